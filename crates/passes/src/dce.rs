//! `dce`: dead-code elimination. Erases every op that is dead: registered
//! [`Traits::PURE`], not a [`Traits::TERMINATOR`], none of its results used, and
//! (if it has regions) nothing nested in it has side effects, i.e. every nested op
//! is registered and pure (nested pure terminators such as `func.return` are fine).
//! Erasing an op can make the ops that define its operands dead, so those are
//! re-queued until nothing more can be erased.
//!
//! Assumes: `Pure` means the op has no side effects, so dropping it when nobody
//! reads its results keeps the meaning. Unregistered ops are assumed to have side
//! effects and are kept. Functions are not pure, so whole functions are never
//! erased here (`symbol-dce` does that).
//!
//! The worklist starts as a post-order walk popped from the back, so users come
//! before the ops defining their operands and a dead chain goes in one sweep;
//! nothing recurses over nesting depth or chain length. Statistic: `erased` (ops
//! erased, nested ones included).
//!
//! ```text
//! // before
//! %0 = test.const() {value = 1} : () -> i64
//! %1 = test.add(%x, %0) : (i64, i64) -> i64   // unused
//! test.effect(%x) : (i64) -> ()
//! // after
//! test.effect(%x) : (i64) -> ()
//! ```

use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{Context, EntityId, Module, OpId, Pass, PassContext, PassOutcome, Traits};

/// The `dce` pass; see the module docs.
pub struct Dce;

const INFO: PassInfo = PassInfo {
    name: "dce",
    summary: "erase pure ops whose results are unused, to a fixed point",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
    description: "Erases ops that are pure, not terminators, have no used results and nothing with \
     side effects nested in them; then the ops that only they used, and so on.\n\n\
     ```\n\
     %0 = test.const() {value = 1} : () -> i64\n\
     %1 = test.add(%x, %0) : (i64, i64) -> i64   // unused: both ops are erased\n\
     ```",
};

impl Pass for Dce {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let erased = erase_dead_ops(cx.ctx, module);
        cx.add_stat("erased", erased);
        Ok(PassOutcome::from_changed(erased > 0))
    }
}

/// True if the op is registered and pure.
fn is_pure(ctx: &Context, module: &Module, op: OpId) -> bool {
    ctx.op_def(module.op_name(op)).is_some_and(|def| def.has(Traits::PURE))
}

/// Erases dead ops nested in the module root until none is left; returns how many
/// ops were erased (nested ones included).
fn erase_dead_ops(ctx: &Context, module: &mut Module) -> u64 {
    let root = module.root();
    let order: Vec<OpId> = module.walk_postorder(root).filter(|&op| op != root).collect();
    let slots = order.iter().map(|op| op.index() + 1).max().unwrap_or(0);
    // `effects[op]`: the op, or something nested in it, is not known to be pure.
    // Children come before parents in post-order, so one pass fills it bottom-up.
    // Erasing pure ops never adds effects, so it stays right while erasing.
    let mut effects = vec![false; slots];
    for &op in &order {
        if !is_pure(ctx, module, op) {
            effects[op.index()] = true;
        }
        if effects[op.index()] {
            let parent = module.parent_op(op);
            if parent.is_some() && parent != root {
                effects[parent.index()] = true;
            }
        }
    }
    let is_dead = |module: &Module, op: OpId| {
        !effects[op.index()]
            && !module.op_has_uses(op)
            && ctx.op_def(module.op_name(op)).is_some_and(|def| !def.has(Traits::TERMINATOR))
    };

    let mut queued = vec![true; slots];
    let mut worklist = order;
    let mut erased = 0u64;
    let mut operand_defs: Vec<OpId> = Vec::new();
    while let Some(op) = worklist.pop() {
        queued[op.index()] = false;
        if module.is_erased(op) || module.op_block(op).is_none() || !is_dead(module, op) {
            continue;
        }
        let doomed: Vec<OpId> = module.walk_preorder(op).collect();
        operand_defs.clear();
        for &d in &doomed {
            operand_defs
                .extend(module.operands(d).map(|v| module.defining_op(v)).filter(|def| def.is_some()));
        }
        // invariant: dead means no result is used, and values defined inside the
        // op are not visible outside it, so erasing cannot fail; skip it if it does.
        if module.erase_op(op).is_err() {
            continue;
        }
        erased += doomed.len() as u64;
        for &def in &operand_defs {
            if !module.is_erased(def) && !queued[def.index()] {
                queued[def.index()] = true;
                worklist.push(def);
            }
        }
    }
    erased
}

#[cfg(test)]
mod tests {
    use crate::test_ir::{check_pass, on_small_stack, registry, TestIr};

    #[test]
    fn erasing_a_region_op_requeues_the_outer_values_it_used() {
        // %0 is used only inside the dead pure region op, which comes after it:
        // the post-order pops the region op first, erasing it re-queues %0.
        let input = "func.func @f(%x: i64) {
  %0 = test.neg(%x) : (i64) -> i64
  %1 = test.pure_region() ({
    %2 = test.add(%0, %0) : (i64, i64) -> i64
  }) : () -> i64
  func.return
}
";
        let out = check_pass("dce", input).unwrap();
        assert_eq!(out.ir, "module {\n  func.func @f(%arg0: i64) {\n    func.return\n  }\n}\n");
        assert_eq!(out.stats, [("erased", 3)]);
    }

    /// A 10,000-op dead chain, and a 10,000-deep nest of pure region ops, are
    /// erased on a small stack.
    #[test]
    fn a_10000_op_chain_and_nest_are_erased() {
        on_small_stack(|| {
            let mut ir = TestIr::default();
            let (_, entry) = ir.function("chain", 1, 0);
            let x = ir.module.block_args(entry)[0];
            let mut value = x;
            for _ in 0..10_000 {
                value = ir.op(entry, "test.add", &[value, x], 1)[0];
            }
            let mut block = entry;
            for _ in 0..10_000 {
                let nest = ir.op_with(block, "test.pure_region", &[], 0, 1, &[]);
                block = ir.module.first_block(ir.module.region(nest, 0));
            }
            ir.op(block, "test.mul", &[value, x], 1);
            ir.ret(entry, &[]);
            let out = ir.run(&registry(), "dce").unwrap();
            assert_eq!(out.ir, "module {\n  func.func @chain(%arg0: i64) {\n    func.return\n  }\n}\n");
            assert_eq!(out.stats, [("erased", 20_001)]);
        });
    }
}
