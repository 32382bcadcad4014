//! `partition` keeps the module's meaning: the checker proves every case of
//! `tests/passes/partition.qir` and a float model partitioned for targets
//! registered here, through the call expansion of the bridge; the
//! interpreter gives bit-identical outputs before and after; and outlinings
//! broken on purpose (results returned in the wrong order, an op reading
//! the wrong value) are caught.

#[allow(dead_code)]
mod common;

use common::read;
use qopt_equiv::{check, Limits, Outcome};
use qopt_interp::{random_arguments, IntegerValues, KernelRegistry, RandomInputs, Tensor};
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::{module_to_string, parse_module, split_input, verify, Context, Module, OpId};
use qopt_passes::{BackendSupport, BackendTargets};
use std::sync::Arc;

/// A backend that runs the float ops named in `ops`.
struct FloatOps {
    name: &'static str,
    ops: &'static [&'static str],
}

impl BackendSupport for FloatOps {
    fn name(&self) -> &'static str {
        self.name
    }
    fn summary(&self) -> &'static str {
        "a test backend"
    }
    fn supports(&self, ctx: &Context, module: &Module, op: OpId) -> bool {
        self.ops.contains(&ctx.op_name_str(module.op_name(op)))
    }
}

fn context() -> Context {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).unwrap();
    qopt_dialect_qnn::register(&mut ctx).unwrap();
    let targets = BackendTargets::install(&mut ctx);
    targets.add(Arc::new(FloatOps { name: "dense", ops: &["fp.dense"] })).unwrap();
    targets.add(Arc::new(FloatOps { name: "mlp", ops: &["fp.dense", "fp.relu"] })).unwrap();
    ctx
}

fn partition(ctx: &mut Context, module: &Module, target: &str) -> Module {
    let mut registry = PassRegistry::new();
    qopt_passes::register_generic_passes(&mut registry).unwrap();
    qopt_quant::register_quant_passes(&mut registry).unwrap();
    let pipeline = format!("partition{{target={target}}}");
    let manager = PassManager::parse(&registry, &pipeline).unwrap();
    manager.check_options_against(ctx).unwrap();
    let mut after = module.clone();
    let mut inst = Instrumentation { reproducer_dir: None, ..Instrumentation::default() };
    manager.run(ctx, &mut after, &mut inst).unwrap_or_else(|e| panic!("{pipeline}: {e:?}"));
    after
}

/// The names of the functions of `module`, in order.
fn function_names(ctx: &Context, module: &Module) -> Vec<String> {
    module
        .top_level_ops()
        .filter_map(|op| module.op_attr(ctx, op, "sym_name").and_then(|a| ctx.attr_as_str(a)))
        .map(str::to_string)
        .collect()
}

/// Runs every public function of `before` and `after` on the same random
/// arguments (three seeds) and asserts bit-identical results.
fn assert_same_outputs(ctx: &Context, before: &Module, after: &Module) {
    let kernels = KernelRegistry::standard();
    let how = RandomInputs { integers: IntegerValues::FullRange, dynamic_size: None };
    for function in function_names(ctx, before) {
        let func = before.lookup_symbol(ctx, &function).unwrap();
        let body = before.first_block(before.region(func, 0));
        let types: Vec<_> = before.block_args(body).iter().map(|&v| before.value_type(v)).collect();
        for seed in 1..=3 {
            let args: Vec<Tensor> = random_arguments(ctx, &types, seed, &how).unwrap();
            let old = qopt_interp::run_function(ctx, before, &function, &args, &kernels).unwrap();
            let new = qopt_interp::run_function(ctx, after, &function, &args, &kernels).unwrap();
            assert_eq!(old, new, "@{function}, seed {seed}");
        }
    }
}

#[test]
fn every_golden_case_is_proven_and_runs_identically() {
    let text = read("tests/passes/partition.qir");
    let mut cases = 0;
    for chunk in split_input(text.as_bytes()) {
        let mut ctx = context();
        let before = parse_module(&mut ctx, chunk.text, "partition.qir").unwrap();
        verify(&mut ctx, &before).unwrap();
        let after = partition(&mut ctx, &before, "qnn");
        let outcome = check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome;
        assert_eq!(outcome, Outcome::Proven, "case {cases}:\n{}", module_to_string(&ctx, &after));
        assert_same_outputs(&ctx, &before, &after);
        cases += 1;
    }
    assert_eq!(cases, 8);
}

#[test]
fn a_float_model_partitioned_for_registered_targets_is_proven_and_identical() {
    let text = read("examples/digits_mlp.qir");
    for (target, regions) in [("dense", 3), ("mlp", 1)] {
        let mut ctx = context();
        let before = parse_module(&mut ctx, text.as_bytes(), "digits_mlp.qir").unwrap();
        let after = partition(&mut ctx, &before, target);
        verify(&mut ctx, &after).unwrap();
        let outlined: Vec<String> =
            function_names(&ctx, &after).into_iter().filter(|n| n.starts_with(target)).collect();
        assert_eq!(outlined.len(), regions, "{target}: {outlined:?}");
        let outcome = check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome;
        assert_eq!(outcome, Outcome::Proven, "{target}");
        assert_same_outputs(&ctx, &before, &after);
    }
}

/// The `partition_live_outs` case of the golden file, partitioned, then
/// edited as text by `break_it` into what a wrong outlining would write.
fn broken_outlining(break_it: impl Fn(&str) -> String) -> Outcome {
    let text = read("tests/passes/partition.qir");
    let chunks = split_input(text.as_bytes());
    let chunk =
        chunks.iter().find(|c| String::from_utf8_lossy(c.text).contains("@partition_live_outs")).unwrap();
    let mut ctx = context();
    let before = parse_module(&mut ctx, chunk.text, "partition.qir").unwrap();
    let after = partition(&mut ctx, &before, "qnn");
    let printed = module_to_string(&ctx, &after);
    let broken = break_it(&printed);
    assert_ne!(broken, printed, "the edit applies");
    let broken = parse_module(&mut ctx, broken.as_bytes(), "broken.qir").unwrap();
    verify(&mut ctx, &broken).unwrap();
    check(&mut ctx, &before, &broken, Relation::Exact, &Limits::default()).outcome
}

#[test]
fn live_outs_returned_in_the_wrong_order_are_caught() {
    let outcome = broken_outlining(|ir| ir.replace("func.return %0, %1 :", "func.return %1, %0 :"));
    assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
}

#[test]
fn a_region_reading_the_wrong_argument_is_caught() {
    // The outlined mul reads the region's argument where the original read
    // the add's result: mul(add(x, x), x) is not mul(add(x, x), add(x, x)).
    let outcome = broken_outlining(|ir| ir.replacen("qnn.mul(%0, %0)", "qnn.mul(%0, %arg0)", 1));
    assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
}
