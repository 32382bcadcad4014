//! The vendor's flow end to end with the crate's own binaries, on the float
//! model shipped in `tests/byoc/` (`make_model.py` writes it): partition for
//! `accel`, collect the regions' boundary data, quantize the regions with the
//! vendor's `accel-quantize`, lower them onto the engine, and compare with
//! the float model layer by layer in `toy-run`. The README's "The BYOC flow"
//! section runs the same commands.

use qopt_ir_core::ScratchDir;
use qopt_npy as npy;
use std::path::Path;
use std::process::Command;

/// Runs binary `tool` with `args` in `tests/byoc`: `(exit code, stdout, stderr)`.
fn run(tool: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(tool)
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/byoc"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn toy_opt(args: &[&str]) -> (i32, String, String) {
    run(env!("CARGO_BIN_EXE_toy-opt"), args)
}

fn succeeded((code, out, err): (i32, String, String), what: &str) -> (String, String) {
    assert_eq!(code, 0, "{what} failed:\n{err}");
    (out, err)
}

/// A test's files, removed with their directory when dropped.
struct Scratch(ScratchDir);

impl Scratch {
    fn new(name: &str) -> Scratch {
        Scratch(ScratchDir::new(&format!("toy-accel-byoc-{name}")))
    }

    fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

/// The SQNR column of `toy-run --compare`'s row for `value`.
fn sqnr(report: &str, value: &str) -> f64 {
    let row = report
        .lines()
        .find(|l| l.starts_with(value))
        .unwrap_or_else(|| panic!("no row for {value}:\n{report}"));
    let words: Vec<&str> = row.split_whitespace().collect();
    // value, op, shape words ([1, 16, 8, 8] spans several), then the metrics.
    let metrics = &words[words.len() - 4..];
    metrics[0].parse().unwrap_or_else(|_| panic!("bad SQNR in {row}"))
}

#[test]
fn partition_collect_quantize_lower_and_compare() {
    let scratch = Scratch::new("flow");
    let (part, boundary, quantized, lowered) = (
        scratch.file("part.qir"),
        scratch.file("boundary.npz"),
        scratch.file("q.qir"),
        scratch.file("accel.qir"),
    );

    // 1. The regions the engine takes: conv1+relu1+conv2+relu2 and conv4+relu4;
    // the dilated conv3 stays on the host between them.
    let (_, err) = succeeded(
        toy_opt(&["model.qir", "--pass=partition{target=accel}", "--stats", "-o", &part]),
        "partition",
    );
    assert!(err.contains("   2 regions") && err.contains("   6 outlined-ops"), "{err}");
    let text = std::fs::read_to_string(&part).unwrap();
    for expected in ["func.func private @accel_0(", "func.func private @accel_1(", "func.call @accel_0("] {
        assert!(text.contains(expected), "{expected} missing:\n{text}");
    }
    let main = &text[..text.find("func.func private").unwrap()];
    assert!(main.contains("loc(\"conv3\")") && !main.contains("loc(\"conv1\")"), "{main}");

    // 2. Every region's inputs and outputs, and @main's, for the 24 samples.
    let pass = format!("--pass=collect-calibration-data{{data=calib.npy out={boundary}}}");
    succeeded(toy_opt(&[&part, &pass, "-o", "/dev/null"]), "collect-calibration-data");
    let members: Vec<(String, Vec<usize>)> =
        npy::read_npz_file(&boundary).unwrap().into_iter().map(|(name, a)| (name, a.shape)).collect();
    let expected = [
        ("main/input0", vec![24, 1, 8, 8, 8]),
        ("accel_0/input0", vec![24, 1, 8, 8, 8]),
        ("accel_0/output0", vec![24, 1, 16, 4, 4]),
        ("accel_1/input0", vec![24, 1, 16, 4, 4]),
        ("accel_1/output0", vec![24, 1, 8, 4, 4]),
        ("main/output0", vec![24, 1, 4]),
    ];
    let expected: Vec<(String, Vec<usize>)> = expected.into_iter().map(|(n, s)| (n.to_string(), s)).collect();
    assert_eq!(members, expected);

    // 3. The vendor's quantizer reads the boundary data.
    let pass = format!("--pass=accel-quantize{{calibration={boundary}}}");
    let (_, err) = succeeded(toy_opt(&[&part, &pass, "--stats", "-o", &quantized]), "accel-quantize");
    assert!(err.contains("   3 convolutions") && err.contains("   2 regions"), "{err}");

    // 4. Onto the engine.
    let (_, err) = succeeded(
        toy_opt(&[&quantized, "--pass=accel-lower,canonicalize,cse", "--stats", "-o", &lowered]),
        "accel-lower",
    );
    assert!(err.contains("   3 lowered") && err.contains("   0 kept"), "{err}");
    let text = std::fs::read_to_string(&lowered).unwrap();
    assert_eq!(text.matches("accel.conv2d_relu(").count(), 3);
    assert!(!text.contains("qnn.conv2d_relu("));

    // 5. Layer by layer against the float model: quantized (finite SQNR),
    // and close (above 30 dB; about 37 to 45 dB when this was written).
    let (report, _) = succeeded(
        run(
            env!("CARGO_BIN_EXE_toy-run"),
            &["model.qir", "--input", "calib.npy", "--batch", "--compare", &lowered],
        ),
        "toy-run --compare",
    );
    for value in ["loc(\"relu1\")", "loc(\"relu2\")", "loc(\"relu3\")", "loc(\"relu4\")", "output #0"] {
        let db = sqnr(&report, value);
        assert!(db.is_finite() && db > 30.0, "{value}: {db} dB\n{report}");
    }
    let weight = sqnr(&report, "loc(\"conv1.weight\")");
    assert!(weight.is_finite() && weight > 30.0, "conv1.weight: {weight} dB\n{report}");
}

#[test]
fn boundary_data_of_another_model_is_refused() {
    let scratch = Scratch::new("stale");
    let (part, boundary, quantized) =
        (scratch.file("part.qir"), scratch.file("b.npz"), scratch.file("q.qir"));
    // The failing runs below write their reproducers here, not to the temp directory.
    let reproducers = scratch.file("reproducers");
    succeeded(toy_opt(&["model.qir", "--pass=partition{target=accel}", "-o", &part]), "partition");
    let collect = format!("--pass=collect-calibration-data{{data=calib.npy out={boundary}}}");
    let quantize = format!("--pass=accel-quantize{{calibration={boundary}}}");
    // Data recorded on the quantized regions does not match the float ones.
    succeeded(toy_opt(&[&part, &collect, "-o", "/dev/null"]), "collect");
    succeeded(toy_opt(&[&part, &quantize, "-o", &quantized]), "accel-quantize");
    succeeded(toy_opt(&[&quantized, &collect, "-o", "/dev/null"]), "collect on the quantized model");
    let (code, _, err) = toy_opt(&[&part, &quantize, "-o", "/dev/null", "--reproducer-dir", &reproducers]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("@accel_0: recorded entry 0 of the archive is not what the region computes"),
        "{err}"
    );

    // No boundary data at all for the regions: the unpartitioned model's.
    let model_only = scratch.file("main.npz");
    let collect = format!("--pass=collect-calibration-data{{data=calib.npy out={model_only}}}");
    succeeded(toy_opt(&["model.qir", &collect, "-o", "/dev/null"]), "collect on the float model");
    let quantize = format!("--pass=accel-quantize{{calibration={model_only}}}");
    let (code, _, err) = toy_opt(&[&part, &quantize, "-o", "/dev/null", "--reproducer-dir", &reproducers]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("@accel_0:") && err.contains("collect-calibration-data after partition"), "{err}");
}
