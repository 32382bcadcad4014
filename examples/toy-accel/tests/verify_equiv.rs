//! `accel-lower` is proven by qopt's equivalence checker with the `accel`
//! dialect's own rules (`src/equivalence.rs`): every case of
//! `tests/lower.qir` through `toy-opt --verify-equiv`, as a user runs it; and
//! two broken lowerings, built here only, are caught at the convolution they
//! got wrong: one that drops the model's bias (the engine adds zeros
//! instead), one that ignores a rounding mode the engine does not have.

use qopt_driver::Driver;
use qopt_equiv::{check, EquivHook, Limits, Mode, Outcome, SharedReport};
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::{OptionSpec, PassOptions};
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    loc_to_string, parse_module, split_input, verify, Context, DenseElements, Dialect, InsertPoint,
    Instrumentation, Module, OpId, Pass, PassContext, PassManager, PipelineFailure, Rewriter,
};
use std::process::Command;
use std::sync::Arc;
use toy_accel::AccelLower;

/// Runs `toy-opt` with `args` in the crate directory: `(exit code, stderr)`.
fn toy_opt(args: &[&str]) -> (i32, String) {
    let tool = env!("CARGO_BIN_EXE_toy-opt");
    let out = Command::new(tool)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn lower_qir() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lower.qir");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The report lines of `accel-lower` in a `--verify-equiv` run's stderr.
fn accel_lower_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.split_whitespace().nth(1) == Some("accel-lower")).collect()
}

#[test]
fn every_case_of_lower_qir_is_proven_under_verify_equiv() {
    // Every case but the last (a hand-written invalid accel op the verifier
    // rejects before any pass) runs the pass.
    let cases = split_input(lower_qir().as_bytes())
        .iter()
        .filter(|c| !String::from_utf8_lossy(c.text).contains("expected-error"))
        .count();
    assert_eq!(cases, 7);
    let (code, stderr) =
        toy_opt(&["tests/lower.qir", "--pass=accel-lower", "--split-input-file", "--verify-equiv"]);
    assert_eq!(code, 1, "only the invalid case fails:\n{stderr}");
    assert_eq!(stderr.matches(": error: ").count(), 1, "{stderr}");
    assert!(stderr.contains("error: 'accel.conv2d_relu' op stride [3, 3] is not supported"), "{stderr}");
    let lines = accel_lower_lines(&stderr);
    assert_eq!(lines.len(), cases, "{stderr}");
    for line in lines {
        assert!(line.contains("accel-lower          proven: exact,"), "{line}");
    }
}

#[test]
fn the_lowering_pipeline_is_proven_pass_by_pass() {
    let pipeline = "--pass=accel-lower,canonicalize,cse,dce";
    let (code, stderr) = toy_opt(&["tests/pipeline.qir", pipeline, "--verify-equiv"]);
    assert_eq!(code, 0, "{stderr}");
    for pass in ["accel-lower", "canonicalize", "cse", "dce"] {
        let line = stderr
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(pass))
            .unwrap_or_else(|| panic!("no line for {pass}:\n{stderr}"));
        assert!(line.contains("proven: exact"), "{line}");
    }
}

/// `accel-lower`, broken on purpose: after the real lowering, each
/// accelerator convolution adds a zero bias instead of the model's, as a
/// lowering that forgot the bias operand would.
struct AccelLowerDropsTheBias;

const INFO: PassInfo = PassInfo {
    name: "accel-lower-drops-the-bias",
    summary: "accel-lower with zeros in place of each bias (a broken pass for tests)",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
    description: "",
};

impl Pass for AccelLowerDropsTheBias {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        AccelLower.options()
    }
    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let outcome = AccelLower.run(cx, module, options)?;
        let convs: Vec<OpId> =
            module.ops_where(|op| cx.ctx.op_name_str(module.op_name(op)) == "accel.conv2d_relu");
        for conv in convs {
            let (ty, loc) = (module.value_type(module.operand(conv, 2)), module.op_loc(conv));
            let zeros = DenseElements::from_i128(cx.ctx, ty, &[0])?;
            let value = cx.ctx.dense_attr(zeros);
            let mut rewriter = Rewriter::new(cx.ctx, module);
            rewriter.set_insertion_point(InsertPoint::Before(conv));
            let zero = qopt_dialect_fp::FpDialect
                .materialize_constant(&mut rewriter, value, ty, loc)
                .ok_or("cannot make a zero bias")?;
            rewriter.set_operand(conv, 2, zero);
        }
        Ok(outcome)
    }
}

/// The case of `tests/lower.qir` that defines `@name`.
fn case(name: &str) -> String {
    let text = lower_qir();
    let chunks = split_input(text.as_bytes());
    let chunk = chunks
        .iter()
        .map(|c| String::from_utf8_lossy(c.text).into_owned())
        .find(|c| c.contains(&format!("func.func @{name}(")))
        .unwrap_or_else(|| panic!("no case @{name} in tests/lower.qir"));
    chunk
}

fn toy_context(driver: &Driver) -> Context {
    driver.new_context().unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `pass` on the case `@name` of `tests/lower.qir` under
/// `--verify-equiv` (fail mode): the pipeline's result and the report's texts.
fn run_checked(driver: &mut Driver, pass: &str, name: &str) -> (Result<(), PipelineFailure>, Vec<String>) {
    let mut ctx = toy_context(driver);
    let mut module = parse_module(&mut ctx, case(name).as_bytes(), "lower.qir").unwrap();
    verify(&mut ctx, &module).unwrap();
    let report = SharedReport::default();
    let hook = EquivHook::new(Mode::Fail, Limits::default(), report.clone());
    let mut inst = Instrumentation { reproducer_dir: None, ..Instrumentation::default() };
    inst.hooks.push(Box::new(hook));
    let manager = PassManager::parse(driver.passes_mut(), pass).unwrap_or_else(|e| panic!("{}", e.message));
    let result = manager.run(&mut ctx, &mut module, &mut inst).map(|_| ());
    drop(inst);
    let lines = report.borrow().iter().map(|l| l.text.clone()).collect::<Vec<_>>();
    (result, lines)
}

#[test]
fn a_lowering_that_drops_the_bias_is_caught_at_the_convolution() {
    let mut driver = Driver::new("toy-opt");
    toy_accel::register(&mut driver);
    driver.passes_mut().register(Arc::new(AccelLowerDropsTheBias)).unwrap();
    let mut run = |pass: &str, name: &str| run_checked(&mut driver, pass, name);

    // The real pass on the same case is proven.
    let (result, lines) = run("accel-lower", "same_3x3");
    assert!(result.is_ok(), "{result:?}");
    assert!(lines[0].starts_with("proven: exact"), "{lines:?}");

    let (result, lines) = run("accel-lower-drops-the-bias", "same_3x3");
    let failure = result.expect_err("a dropped bias was not caught");
    for d in &failure.diagnostics.0 {
        println!("{d}");
        d.notes.iter().for_each(|n| println!("note: {}", n.message));
    }
    assert!(lines[0].starts_with("FAILED at result #0 of @same_3x3: exact"), "{lines:?}");
    assert_eq!(failure.pass, "accel-lower-drops-the-bias");
    let error = &failure.diagnostics.0[0];
    assert!(error.message.contains("pass 'accel-lower-drops-the-bias' is not proven"), "{error:?}");
    // At the source line of the convolution the pass replaced (the ops it
    // made have no line of their own), with notes naming both sides.
    let text = case("same_3x3");
    let line = text.lines().nth(error.pos.line.saturating_sub(1) as usize).unwrap_or_default();
    assert!(line.trim_start().starts_with("%0 = qnn.conv2d_relu(%x, %w, %b)"), "{error:?}: {line}");
    let notes: Vec<&str> = error.notes.iter().map(|n| n.message.as_str()).collect();
    assert!(notes.contains(&"the pass made accel.conv2d_relu loc(\"conv1\") there"), "{notes:?}");
    assert!(
        notes.contains(
            &"before the pass, the first difference on the way from that result is qnn.conv2d_relu loc(\"conv1\")"
        ),
        "{notes:?}"
    );
    assert!(notes.iter().any(|n| n.contains("accel-dma-in-is-identity")), "{notes:?}");

    // Where the model has no bias, zeros are right: the same broken pass is
    // proven there.
    let (result, lines) = run("accel-lower-drops-the-bias", "pointwise_stride_2");
    assert!(result.is_ok(), "{result:?}");
    assert!(lines[0].starts_with("proven: exact"), "{lines:?}");
}

#[test]
fn a_lowering_that_ignores_the_rounding_mode_is_caught_at_the_convolution() {
    let mut driver = Driver::new("toy-opt");
    toy_accel::register(&mut driver);
    let mut ctx = toy_context(&driver);
    let text = case("same_3x3");
    let half_to_even =
        text.replace("{pad = [1, 1, 1, 1]}", "{pad = [1, 1, 1, 1], rounding = \"half_to_even\"}");
    assert_ne!(half_to_even, text);
    let before = parse_module(&mut ctx, half_to_even.as_bytes(), "lower.qir").unwrap();
    verify(&mut ctx, &before).unwrap();
    // What a lowering that did not read `rounding` writes: the real pass on
    // the op without it.
    let mut after = parse_module(&mut ctx, text.as_bytes(), "lower.qir").unwrap();
    let manager =
        PassManager::parse(driver.passes_mut(), "accel-lower").unwrap_or_else(|e| panic!("{}", e.message));
    manager.run(&mut ctx, &mut after, &mut Instrumentation::default()).unwrap();
    let Outcome::Failed(f) = check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome
    else {
        panic!("an ignored rounding mode was not caught")
    };
    let name = |module: &Module, op: Option<OpId>| {
        op.map(|op| {
            format!("{} {}", ctx.op_name_str(module.op_name(op)), loc_to_string(&ctx, module.op_loc(op)))
        })
    };
    assert_eq!(name(&before, f.before_op).as_deref(), Some("qnn.conv2d_relu loc(\"conv1\")"));
    assert!(name(&after, f.after_op).is_some_and(|n| n.ends_with("loc(\"conv1\")")), "{:?}", f.after_op);
    // The same lowering of the op as written (default rounding) is proven.
    let before = parse_module(&mut ctx, text.as_bytes(), "lower.qir").unwrap();
    verify(&mut ctx, &before).unwrap();
    assert_eq!(
        check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome,
        Outcome::Proven
    );
}
