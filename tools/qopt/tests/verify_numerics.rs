//! `qopt --verify-numerics`: preserving passes keep their results within
//! their relation (exit 0); a deliberately broken pass, registered only here,
//! that changes a constant is caught and named (exit 1, located, with a
//! reproducer; reported only in warn mode); passes that change numerics on
//! purpose, and passes under the requantization relation, are measured but
//! not judged; modules that cannot run are reported as not run without
//! failing; bad flags are usage errors.

mod common;

use clap::Parser as _;
use common::scratch;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{dense_values_f64, AttrData, DenseElements, Module, Pass, PassContext, PassOutcome};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the `qopt` binary in the repository root: (exit code, stderr).
fn qopt(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_qopt")).current_dir(root()).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Writes `text` to `dir/name` and returns the path as a string.
fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// The report line of `pass`, after its name column.
fn report_line<'a>(stderr: &'a str, pass: &str) -> &'a str {
    let header = stderr.find("===- Numerics checks").unwrap_or_else(|| panic!("no report: {stderr}"));
    let line = stderr[header..]
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(pass))
        .unwrap_or_else(|| panic!("no line for {pass}: {stderr}"));
    line.split_once(pass).map_or(line, |(_, rest)| rest.trim_start())
}

/// The number after the last `(rel ` in a report line.
fn relative_difference(line: &str) -> f64 {
    let start = line.rfind("(rel ").unwrap_or_else(|| panic!("no relative difference: {line}")) + 5;
    let end = start + line[start..].find(')').unwrap();
    line[start..end].parse().unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// A convolution, a batch norm and a relu: fold-bn computes new constants.
const CONV_BN: &str = include_str!("../../../tests/fixtures/conv_bn_relu.qir");

#[test]
fn preserving_passes_keep_their_results_within_their_relation() {
    let dir = scratch("preserving");
    let input = write(&dir, "conv_bn.qir", CONV_BN);
    let args =
        [&input, "--pass=fold-bn,canonicalize,cse,dce", "--verify-numerics=4", "--verify-numerics-seed=7"];
    let (code, stderr) = qopt(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("===- Numerics checks (--verify-numerics: 4 inputs, seed 7) -===\n"), "{stderr}");
    let fold_bn = report_line(&stderr, "fold-bn");
    assert!(fold_bn.starts_with("ok under real (rel ≤ 1e-4): 4 inputs, "), "{fold_bn}");
    if !fold_bn.ends_with("identical results") {
        // New constants rounded once in f64: a few ulps of the result.
        assert!(relative_difference(fold_bn) < 1e-6, "{fold_bn}");
    }
    for pass in ["canonicalize", "cse", "dce"] {
        assert_eq!(report_line(&stderr, pass), "ok under exact: 4 inputs, identical results", "{stderr}");
    }

    // With the proof as well: both reports, proof first.
    let (code, stderr) = qopt(&[&input, "--pass=fold-bn,cse", "--verify-numerics=2", "--verify-equiv"]);
    assert_eq!(code, 0, "{stderr}");
    let (proofs, numerics) = (stderr.find("===- Equivalence checks"), stderr.find("===- Numerics checks"));
    assert!(proofs.is_some() && proofs < numerics, "{stderr}");
    assert!(report_line(&stderr, "cse").starts_with("ok under exact: 2 inputs"), "{stderr}");
}

/// A broken pass: adds 0.5 to the first element of the first float constant
/// (the convolution's weight) while claiming to keep results exactly
/// (`test-perturb-constant`) or up to requantization
/// (`test-perturb-requantized`).
struct PerturbConstant {
    relation: Relation,
}

/// [`PerturbConstant`] claiming exactness, and claiming requantization.
const EXACT_INFO: PassInfo = PassInfo {
    name: "test-perturb-constant",
    summary: "add 0.5 to one weight while claiming to keep results",
    preserves_semantics: false,
    equivalence: Some(Relation::Exact),
    description: "",
};
const REQUANTIZED_INFO: PassInfo =
    PassInfo { name: "test-perturb-requantized", equivalence: Some(Relation::Requantization), ..EXACT_INFO };

impl Pass for PerturbConstant {
    fn info(&self) -> &'static PassInfo {
        match self.relation {
            Relation::Requantization => &REQUANTIZED_INFO,
            _ => &EXACT_INFO,
        }
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let ctx = &mut *cx.ctx;
        let func = module.top_level_ops().next().expect("a function");
        let body = module.first_block(module.region(func, 0));
        let ops: Vec<_> = module.block_ops(body).collect();
        for op in ops {
            let Some(value) = module.op_attr(ctx, op, "value") else { continue };
            let AttrData::Dense(dense) = ctx.attr_data(value).clone() else { continue };
            let element = ctx.element_type(dense.ty);
            let Some(mut values) = dense_values_f64(ctx, &dense, element) else { continue };
            values[0] += 0.5;
            let changed = DenseElements::from_f64(ctx, dense.ty, &values).expect("an f32 constant");
            let attr = ctx.dense_attr(changed);
            let attrs = ctx.dict_set(module.op_attrs(op), "value", attr);
            module.set_op_attrs(op, attrs);
            return Ok(PassOutcome::Changed);
        }
        Ok(PassOutcome::Unchanged)
    }
}

/// Runs a driver with both [`PerturbConstant`] passes registered: (exit
/// code, stderr).
fn run_with_broken_pass(args: &[&str]) -> (i32, String) {
    let mut driver = qopt_driver::Driver::new("qopt");
    for relation in [Relation::Exact, Relation::Requantization] {
        driver.passes_mut().register(Arc::new(PerturbConstant { relation })).unwrap();
    }
    let cli = qopt_driver::Cli::try_parse_from(std::iter::once("qopt").chain(args.iter().copied())).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = driver.run_cli(&cli, &mut out, &mut err);
    (code, String::from_utf8_lossy(&err).into_owned())
}

#[test]
fn a_pass_that_changes_a_constant_is_caught_and_named() {
    let dir = scratch("broken");
    let input = write(&dir, "conv_bn.qir", CONV_BN);
    let reproducers = dir.to_str().unwrap();
    let pipeline = "--pass=canonicalize,test-perturb-constant,dce";
    let (code, stderr) =
        run_with_broken_pass(&[&input, pipeline, "--verify-numerics", "--reproducer-dir", reproducers]);
    assert_eq!(code, 1, "{stderr}");
    let line = report_line(&stderr, "test-perturb-constant");
    assert!(line.starts_with("FAILED under exact: 8 inputs, largest |Δ| "), "{line}");
    assert!(line.contains("; first: input #0 (seed 0) differs at result #0 of @main by |Δ| "), "{line}");
    assert!(!stderr.contains(" dce "), "the pipeline stops at the failing pass: {stderr}");
    // Located at the op producing the result (the relu, line 9 of the input).
    let error = format!(
        "{input}:9:8: error: --verify-numerics: pass 'test-perturb-constant' (exact) must keep identical \
         results, but input #0 (seed 0) differs at result #0 of @main by |Δ| "
    );
    assert!(stderr.contains(&error), "{stderr}");
    assert!(stderr.contains("note: input #k is drawn with seed 0 + k; float and quantized arguments are those of `qrun --random-inputs --seed 0`"), "{stderr}");
    assert!(
        stderr.contains("add `--verify-numerics=8 --verify-numerics-seed=0` to the replay command"),
        "{stderr}"
    );
    assert!(stderr.contains("pass 'test-perturb-constant' failed"), "{stderr}");
    assert!(stderr.contains("reproducer written to"), "{stderr}");

    // Warn mode: the same line, and the pipeline goes on.
    let (code, stderr) =
        run_with_broken_pass(&[&input, pipeline, "--verify-numerics=2", "--verify-numerics-mode=warn"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(report_line(&stderr, "test-perturb-constant").starts_with("FAILED under exact"), "{stderr}");
    assert_eq!(report_line(&stderr, "dce"), "ok under exact: 2 inputs, identical results", "{stderr}");
    assert!(!stderr.contains("error:"), "{stderr}");
}

#[test]
fn passes_that_change_numerics_on_purpose_are_measured_not_judged() {
    let dir = scratch("quantize");
    let out = dir.join("int8.qir");
    let pipeline = "--pass=quantize{data=tests/models/digits_mlp/calib.npy}";
    let (code, stderr) =
        qopt(&["examples/digits_mlp.qir", pipeline, "--verify-numerics", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let fakeq = report_line(&stderr, "insert-fakeq");
    assert!(
        fakeq.starts_with("informational (changes numerics on purpose; random inputs leave the calibrated range): 8 inputs, largest |Δ| "),
        "{fakeq}"
    );
    assert!(relative_difference(fakeq) > 1e-3, "quantization moves the results: {fakeq}");
    let line = report_line(&stderr, "propagate-qparams");
    assert!(line.starts_with("informational (changes numerics on purpose; random inputs leave the calibrated range): 8 inputs, "), "{line}");
    for pass in ["fuse", "quantize-constants"] {
        let line = report_line(&stderr, pass);
        assert!(
            line.starts_with("requantization, measured only (rounding compounds over layers): "),
            "{line}"
        );
    }
    // The result is dequantized from a grid from expand-fakeq on.
    assert!(report_line(&stderr, "fuse").contains("; max steps "), "{stderr}");
    for pass in ["fold-bn", "calibrate", "expand-fakeq", "canonicalize", "quant-lint"] {
        assert!(report_line(&stderr, pass).starts_with("ok under "), "{stderr}");
    }
}

#[test]
fn passes_under_requantization_are_measured_not_judged() {
    // Rounding differences compound over layers, so no bound at the results
    // follows from the relation: even a wrong weight is only reported.
    let dir = scratch("requantized");
    let input = write(&dir, "conv_bn.qir", CONV_BN);
    let (code, stderr) =
        run_with_broken_pass(&[&input, "--pass=test-perturb-requantized", "--verify-numerics=2"]);
    assert_eq!(code, 0, "{stderr}");
    let line = report_line(&stderr, "test-perturb-requantized");
    let measured = "requantization, measured only (rounding compounds over layers): 2 inputs, largest |Δ| ";
    assert!(line.starts_with(measured), "{line}");
    assert!(relative_difference(line) > 0.1, "{line}");
}

#[test]
fn modules_that_cannot_run_are_reported_not_run_without_failing() {
    let dir = scratch("not-run");
    let cases = [
        (
            "func.func @main(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {\n  \
             %y = fp.relu(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>\n  func.return %y : tensor<?x4xf32>\n}\n",
            "argument #0 of @main has a dynamic shape (tensor<?x4xf32>)",
        ),
        (
            "func.func @main(%x: tensor<65536x65536xf32>) -> tensor<65536x65536xf32> {\n  \
             func.return %x : tensor<65536x65536xf32>\n}\n",
            "argument #0 of @main has type tensor<65536x65536xf32>, more than the interpreter's limit of \
             2147483648 elements",
        ),
        (
            "func.func @main(%x: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {\n  \
             func.return %x : tensor<4096x4096xf32>\n}\n",
            "the results of 8 inputs have more than 67108864 elements to keep for the comparison; ask for \
             fewer inputs",
        ),
        (
            "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  \
             %y = mystery.op(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(\"odd\")\n  \
             func.return %y : tensor<4xf32>\n}\n",
            "error at loc(\"odd\") ('mystery.op'): no kernel for 'mystery.op'",
        ),
        (
            "func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %x : tensor<4xf32>\n}\n\
             func.func @b(%x: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %x : tensor<4xf32>\n}\n",
            "the module has no @main and 2 public functions (@a, @b)",
        ),
    ];
    for (i, (module, why)) in cases.iter().enumerate() {
        let input = write(&dir, &format!("case{i}.qir"), module);
        let args = [&input, "--pass=canonicalize,cse", "--verify-numerics", "--allow-unregistered-dialect"];
        let (code, stderr) = qopt(&args);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(
            report_line(&stderr, "canonicalize"),
            format!("not run: before the pass, {why}"),
            "{stderr}"
        );
        assert!(report_line(&stderr, "cse").starts_with("not run: before the pass, "), "{stderr}");
    }
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        vec!["examples/mlp.qir", "--verify-numerics=0"],
        vec!["examples/mlp.qir", "--verify-numerics=many"],
        vec!["examples/mlp.qir", "--verify-numerics-seed=3"],
        vec!["examples/mlp.qir", "--verify-numerics", "--verify-numerics-mode=maybe"],
    ] {
        let (code, stderr) = qopt(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }
    // Without a pipeline there is nothing to check: an empty report.
    let (code, stderr) = qopt(&["examples/mlp.qir", "--verify-numerics", "-o", "/dev/null"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr, "===- Numerics checks (--verify-numerics: 8 inputs, seed 0) -===\n");
}
