//! `qopt --verify-equiv` on the README's example model: the quantize
//! pipeline's checked passes are all proven (fuse under the requantization
//! relation), the others are reported as not checked, the timing report has
//! each check's time, and the run succeeds.

use std::path::Path;
use std::process::Command;

fn qopt(args: &[&str]) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_qopt")).current_dir(&root).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_quantize_pipeline_is_proven_where_it_is_checked() {
    let out = std::env::temp_dir().join(format!("verify-equiv-{}.qir", std::process::id()));
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
    let _ = std::fs::remove_file(out);
}

#[test]
fn a_bad_mode_is_a_usage_error() {
    let (code, stderr) = qopt(&["examples/mlp.qir", "--verify-equiv=maybe"]);
    assert_eq!(code, 2, "{stderr}");
}
