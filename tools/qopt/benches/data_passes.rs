//! Memory of the passes that read calibration data against the number of
//! samples: `cargo bench -p qopt-tools --bench data_passes`.
//!
//! For each pass (`quantize` with its default `bias-correct`, and
//! `calibrate`, `bias-correct`, `absorb-bias`, `round-weights`,
//! `quantize-search`, `collect-calibration-data` alone, each on the module it
//! runs on), one child process runs the pass through the driver in process on
//! 100 and on 5,000 samples (the model's `calib.npy` repeated) and prints its
//! peak resident memory (`VmHWM`) and wall time. The bar: 5,000 samples within
//! 10 % of 100; the benchmark exits with status 1 when a pass misses it.
//!
//! The model is `tests/models/digits_cnn`, or the directory named by
//! `QOPT_DATA_PASSES_MODEL` (a `model.onnx` and a `calib.npy`), e.g.
//! `tests/models/mnist_mbv2` (minutes: `quantize-search` evaluates the model
//! once per quantized value on every sample). `QOPT_DATA_PASSES_SAMPLES`
//! replaces `100,5000`.

mod common;

use qopt_npy::{read_npy_file, write_npy_file};
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    if common::ran_as_child() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::var_os("QOPT_DATA_PASSES_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("tests/models/digits_cnn"));
    let counts: Vec<usize> = std::env::var("QOPT_DATA_PASSES_SAMPLES")
        .unwrap_or_else(|_| "100,5000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("QOPT_DATA_PASSES_SAMPLES: counts like 100,5000"))
        .collect();
    let scratch = std::env::temp_dir().join(format!("qopt-bench-data-passes-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");

    let float = scratch.join("model.qir");
    run_tool("qimport", &[dir.join("model.onnx").as_os_str(), "-o".as_ref(), float.as_os_str()]);
    let calib = read_npy_file(dir.join("calib.npy")).expect("calib.npy");
    let data: Vec<(usize, PathBuf)> = counts
        .iter()
        .map(|&n| {
            let path = scratch.join(format!("calib-{n}.npy"));
            write_npy_file(&path, &common::repeat_rows(&calib, n)).expect("writing the data");
            (n, path)
        })
        .collect();
    // The modules each pass runs on, prepared on the smallest data set.
    let first = &data[0].1;
    let prepare = |name: &str, pipeline: String| {
        let out = scratch.join(name);
        qopt(&float, &pipeline, &out);
        out
    };
    let folded = prepare("folded.qir", "fold-bn".into());
    let observed = prepare("observed.qir", "fold-bn,insert-observers".into());
    let fakeq = prepare(
        "fakeq.qir",
        format!("fold-bn,insert-observers,calibrate{{data=\"{}\"}},insert-fakeq", first.display()),
    );
    let fakeq4 = prepare(
        "fakeq4.qir",
        format!(
            "fold-bn,insert-observers,calibrate{{data=\"{}\"}},insert-fakeq{{weight-type=i4}}",
            first.display()
        ),
    );
    let boundary = scratch.join("boundary.npz");
    let passes: [(&str, &Path, String); 7] = [
        ("quantize", &float, "quantize{data=D}".into()),
        ("calibrate", &observed, "calibrate{data=D}".into()),
        ("bias-correct", &fakeq, "bias-correct{data=D}".into()),
        ("absorb-bias", &folded, "absorb-bias{data=D}".into()),
        ("round-weights", &fakeq4, "round-weights{data=D iterations=20}".into()),
        ("quantize-search", &float, "quantize-search{data=D max-drop=0.5%}".into()),
        (
            "collect-calibration-data",
            &float,
            format!("collect-calibration-data{{data=D out=\"{}\"}}", boundary.display()),
        ),
    ];

    println!("peak resident memory and wall time, {} ({} threads):", dir.display(), threads());
    let mut missed = Vec::new();
    for (name, module, pipeline) in &passes {
        let mut peaks = Vec::new();
        for (n, path) in &data {
            let pipeline = pipeline.replace("data=D", &format!("data=\"{}\"", path.display()));
            let (kb, seconds) = common::child_peak(module, &pipeline);
            println!("  {name:25} {n:5} samples: {kb:7} kB {seconds:8.2} s");
            peaks.push(kb as f64);
        }
        let growth = peaks.last().unwrap_or(&0.0) / peaks.first().unwrap_or(&1.0).max(1.0) - 1.0;
        println!("  {name:25} growth {:+.1} %", growth * 100.0);
        if growth > 0.10 {
            missed.push(*name);
        }
    }
    std::fs::remove_dir_all(&scratch).ok();
    if !missed.is_empty() {
        eprintln!("peak memory grew by more than 10 % with the samples: {}", missed.join(", "));
        std::process::exit(1);
    }
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn run_tool(name: &str, args: &[&std::ffi::OsStr]) {
    let tool = PathBuf::from(env!("CARGO_BIN_EXE_qopt")).with_file_name(name);
    let out = Command::new(tool).args(args).output().expect("running a tool");
    assert!(out.status.success(), "{name} failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn qopt(input: &Path, pipeline: &str, out: &Path) {
    let pass = format!("--pass={pipeline}");
    run_tool("qopt", &[input.as_os_str(), pass.as_ref(), "-o".as_ref(), out.as_os_str()]);
}
