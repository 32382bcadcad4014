//! Calibration speed and memory: `cargo bench -p qopt-tools --bench calibrate`.
//!
//! For each model (`tests/models/{digits_cnn,resnet_tiny}`, and `resnet18ish`
//! when `target/models/resnet18ish` exists, see `benches/models.rs`), the float
//! model is imported, `fold-bn,insert-observers{observer=...}` runs, and then
//! `calibrate{data=calib.npy}` is timed (the pass alone, from `--timing`,
//! median of 5 runs after a warm-up) with minmax and with histogram observers.
//! The bar: histogram at most 1.5× minmax. ONNX Runtime's figures on the
//! same models and data come from `scripts/ort_calibration_bench.py`.
//!
//! Memory: peak resident memory (`VmHWM`) of one process calibrating digits_cnn
//! with histogram observers on 100 and on 5,000 samples (the calibration set
//! repeated), each in a fresh child process; the bar is 5,000 within 10% of 100.

mod common;

use qopt_npy::{read_npy_file, write_npy_file};
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    if common::ran_as_child() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let scratch = std::env::temp_dir().join(format!("qopt-bench-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    let mut models: Vec<(&str, PathBuf)> = vec![
        ("digits_cnn", root.join("tests/models/digits_cnn")),
        ("resnet_tiny", root.join("tests/models/resnet_tiny")),
    ];
    let resnet18 = std::env::var_os("QOPT_RESNET18ISH")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/models/resnet18ish"));
    if resnet18.join("model.onnx").exists() {
        models.push(("resnet18ish", resnet18));
    } else {
        println!("resnet18ish: skipped, no {}", resnet18.join("model.onnx").display());
    }
    println!("calibrate pass time, median of 5 (2 threads):");
    for (name, dir) in &models {
        let imported = scratch.join(format!("{name}.qir"));
        qimport(&dir.join("model.onnx"), &imported);
        let calib = dir.join("calib.npy");
        let mut times = Vec::new();
        for observer in ["minmax", "histogram"] {
            let observed = scratch.join(format!("{name}.{observer}.qir"));
            qopt(&imported, &format!("fold-bn,insert-observers{{observer={observer}}}"), &observed);
            let pipeline = format!("calibrate{{data=\"{}\"}}", calib.display());
            let _warm_up = pass_seconds(&observed, &pipeline);
            let mut runs: Vec<f64> = (0..5).map(|_| pass_seconds(&observed, &pipeline)).collect();
            runs.sort_by(f64::total_cmp);
            times.push(runs[2]);
        }
        let samples = read_npy_file(&calib).map(|a| a.shape[0]).unwrap_or(0);
        println!(
            "  {name:12} {samples:4} samples: minmax {:8.1} ms, histogram {:8.1} ms, histogram / minmax {:.2}",
            times[0] * 1e3,
            times[1] * 1e3,
            times[1] / times[0]
        );
    }

    // Peak memory against the number of samples.
    let dir = root.join("tests/models/digits_cnn");
    let imported = scratch.join("digits_cnn.qir");
    let observed = scratch.join("digits_cnn.mem.qir");
    qopt(&imported, "fold-bn,insert-observers{observer=histogram}", &observed);
    let calib = read_npy_file(dir.join("calib.npy")).expect("calib.npy");
    println!("peak resident memory, digits_cnn, histogram observers:");
    let mut peaks = Vec::new();
    for samples in [100, 5000] {
        let data = scratch.join(format!("calib-{samples}.npy"));
        write_npy_file(&data, &common::repeat_rows(&calib, samples)).expect("writing the data");
        let peak = common::child_peak(&observed, &format!("calibrate{{data=\"{}\"}}", data.display())).0;
        println!("  {samples:5} samples: {peak} kB");
        peaks.push(peak as f64);
    }
    println!("  5,000 / 100: {:+.1}%", (peaks[1] / peaks[0] - 1.0) * 100.0);
    std::fs::remove_dir_all(&scratch).ok();
}

fn tool(name: &str) -> PathBuf {
    let qopt = PathBuf::from(env!("CARGO_BIN_EXE_qopt"));
    qopt.with_file_name(name)
}

fn qimport(model: &Path, out: &Path) {
    let status =
        Command::new(tool("qimport")).arg(model).arg("-o").arg(out).status().expect("running qimport");
    assert!(status.success(), "qimport {} failed", model.display());
}

fn qopt(input: &Path, pipeline: &str, out: &Path) {
    let status = Command::new(tool("qopt"))
        .arg(input)
        .arg(format!("--pass={pipeline}"))
        .arg("-o")
        .arg(out)
        .status()
        .expect("running qopt");
    assert!(status.success(), "qopt --pass={pipeline} failed");
}

/// Seconds the pipeline's passes took, from `--timing`.
fn pass_seconds(input: &Path, pipeline: &str) -> f64 {
    let out = Command::new(tool("qopt"))
        .arg(input)
        .arg(format!("--pass={pipeline}"))
        .args(["--timing", "-o", "/dev/null"])
        .output()
        .expect("running qopt");
    assert!(out.status.success(), "qopt failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stderr);
    let line = text.lines().find(|l| l.trim_end().ends_with("calibrate")).expect("a calibrate timing line");
    line.split_whitespace().next().and_then(|s| s.parse().ok()).expect("seconds")
}
