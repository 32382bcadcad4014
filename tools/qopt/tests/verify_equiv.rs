//! `qopt --verify-equiv` on the README's example model: the quantize
//! pipeline's checked passes are all proven (fuse under the requantization
//! relation), the others are reported as not checked, the timing report has
//! each check's time, and the run succeeds; so it is on 1-D and transposed
//! layers; `absorb-bias` is proven under `calibrated-range`.

use std::path::Path;
use std::process::Command;

fn qopt(args: &[&str]) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_qopt")).current_dir(&root).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_quantize_pipeline_is_proven_where_it_is_checked() {
    let dir = qopt_ir_core::ScratchDir::new("verify-equiv");
    let out = dir.join("out.qir");
    let out = out.to_str().unwrap();
    let pipeline = "--pass=quantize{data=tests/models/digits_mlp/calib.npy}";
    let (code, stderr) =
        qopt(&["examples/digits_mlp.qir", pipeline, "--verify-equiv", "--timing", "-o", out]);
    assert_eq!(code, 0, "{stderr}");
    for pass in [
        "fold-bn",
        "insert-observers",
        "calibrate",
        "expand-fakeq",
        "quantize-constants",
        "fuse",
        "canonicalize",
        "dce",
        "quant-lint",
    ] {
        let line =
            stderr.lines().find(|l| l.contains(&format!(" {pass} "))).unwrap_or_else(|| panic!("{stderr}"));
        assert!(line.contains("proven"), "{line}");
    }
    assert!(stderr.contains("fold-bn              proven: real (float constants within 4 ulps"), "{stderr}");
    let fakeq = stderr.lines().find(|l| l.contains(" insert-fakeq ")).unwrap();
    assert!(fakeq.contains("not checked: the pass changes numerics on purpose"), "{fakeq}");
    let fuse = stderr.lines().find(|l| l.contains(" fuse ")).unwrap();
    assert!(fuse.contains("proven: requantization"), "{fuse}");
    // The timing report has the checks' time under each checked pass.
    let timed = stderr.lines().filter(|l| l.trim_end().ends_with("verify-equiv")).count();
    assert!(timed >= 9, "{stderr}");
}

/// The quantize pipeline on 1-D layers and a grouped transposed one, whose
/// bias correction records the checker must read as annotations: every
/// checked pass proven, the conv1d-to-conv2d rewrite exactly.
#[test]
fn quantize_is_proven_on_one_d_and_transposed_layers() {
    let pipeline = "--pass=quantize{data=tests/passes/data/calib-ncl.npy}";
    let (code, stderr) =
        qopt(&["tests/passes/quantize-conv1d.qir", pipeline, "--verify-equiv", "-o", "/dev/null"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("FAILED") && !stderr.contains("unknown"), "{stderr}");
    let rewrite = stderr.lines().find(|l| l.contains(" conv1d-to-conv2d ")).unwrap_or_default();
    assert!(rewrite.contains("proven: exact"), "{stderr}");
    let fuse = stderr.lines().find(|l| l.contains(" fuse ")).unwrap_or_default();
    assert!(fuse.contains("proven: requantization"), "{stderr}");
}

/// `absorb-bias` absorbs 16 channels of digits_mlp's two pairs and is
/// proven under `calibrated-range`, assuming the two records it wrote.
#[test]
fn absorb_bias_is_proven_under_the_calibrated_range_relation() {
    let pipeline = "--pass=fold-bn,equalize,absorb-bias{data=tests/models/digits_mlp/calib.npy}";
    let (code, stderr) =
        qopt(&["examples/digits_mlp.qir", pipeline, "--verify-equiv", "--stats", "-o", "/dev/null"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("16 channels-absorbed"), "{stderr}");
    let line = stderr.lines().find(|l| l.contains(" absorb-bias ")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.contains("absorb-bias          proven: calibrated-range (2 recorded ranges assumed; "),
        "{line}"
    );
    let equalize = stderr.lines().find(|l| l.contains(" equalize ")).unwrap();
    assert!(equalize.contains("proven: real ("), "{equalize}");
}

#[test]
fn a_bad_mode_is_a_usage_error() {
    let (code, stderr) = qopt(&["examples/mlp.qir", "--verify-equiv=maybe"]);
    assert_eq!(code, 2, "{stderr}");
}
