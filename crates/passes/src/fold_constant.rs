//! `fold-constant`: evaluates every op whose operands are all constants through
//! the op's registered folder, replaces its results by constants (made by the
//! dialects' `materialize_constant`), and repeats until no such op is left; then
//! erases the constants the folding left without uses.
//!
//! Unlike `canonicalize` it applies no rewrite patterns and does not fold an op
//! that has a non-constant operand, so `x + 0` stays even though the folder
//! knows the identity. A constant is the result of a registered
//! [`Traits::CONSTANT_LIKE`] op (its `value` attribute). A folder answer is
//! taken only if every result becomes a constant: a new attribute, or an
//! existing constant value of the result's type. The pass evaluates whatever
//! folders the dialects register: today the `fp` folders compute small f32/f64
//! elementwise arithmetic and activations (up to 65,536 elements); ops without a
//! folder (convolutions, pooling, ...) stay until the interpreter's kernels are
//! offered as folders.
//!
//! Assumes: folders keep the meaning of the op (the pass declares
//! [`Pass::preserves_semantics`]). Only constants that lost a use to folding,
//! or were made by it, are erased when unused; other dead ops are `dce`'s.
//!
//! One worklist in program order (a pre-order walk, so operands are folded
//! before their users); a fold re-queues the users of the new constants, so a
//! chain of any length folds in one sweep, without recursion.
//!
//! Options: `max-elements` (default 1,048,576): a folded result with more
//! elements than this is not materialized (counted over the whole tensor type,
//! splats included), and the op stays. Statistic: `folded` (ops folded).
//!
//! ```text
//! // before
//! %0 = fp.constant() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
//! %1 = fp.constant() {value = dense<3.0> : tensor<2xf32>} : () -> tensor<2xf32>
//! %2 = fp.mul(%0, %1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
//! %3 = fp.add(%x, %2) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
//! // after: the product is evaluated, the sum with %x is not
//! %0 = fp.constant() {value = dense<[3.0, 6.0]> : tensor<2xf32>} : () -> tensor<2xf32>
//! %1 = fp.add(%x, %0) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
//! ```

use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::BadOptionValue;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    constant_value, static_num_elements, AttrData, Attribute, Context, EntityId, FoldResult, InsertPoint,
    Module, OpId, Pass, PassContext, PassError, PassOutcome, Rewriter, Traits, Type, ValueId,
};
use smallvec::SmallVec;

/// The `fold-constant` pass; see the module docs.
pub struct FoldConstant;

/// Default of the `max-elements` option: 1 << 20.
const DEFAULT_MAX_ELEMENTS: &str = "1048576";

// Integer constants must come out bit for bit; float folders round in f64, so float constants are compared within ulps.
const INFO: PassInfo = PassInfo::real_rewrite(
    "fold-constant",
    "evaluate ops whose operands are all constants through their folders",
    "Folds every op whose operands are all constants through its registered folder, \
     materializing the results as constants, until no such op is left; then erases the \
     constants the folding left unused. Applies no patterns and leaves ops with a \
     non-constant operand alone (`x + 0` stays). Results with more than `max-elements` \
     elements are not materialized.\n\n\
     ```\n\
     %0 = fp.constant() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>\n\
     %1 = fp.constant() {value = dense<3.0> : tensor<2xf32>} : () -> tensor<2xf32>\n\
     %2 = fp.mul(%0, %1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>\n\
     // -> %2 = fp.constant() {value = dense<[3.0, 6.0]> : tensor<2xf32>} : () -> tensor<2xf32>\n\
     ```",
);

impl Pass for FoldConstant {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![OptionSpec::new("max-elements", OptionKind::Int, DEFAULT_MAX_ELEMENTS)
            .help("largest folded result (in elements) that is materialized as a constant")]
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        let requested = options.int("max-elements");
        if requested < 0 {
            let message = format!("max-elements must not be negative, got {requested}");
            return Err(BadOptionValue::new("max-elements", message));
        }
        Ok(())
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        self.check_options(options)
            .map_err(|bad| PassError::from(format!("fold-constant: {}", bad.message)))?;
        let max_elements = u64::try_from(options.int("max-elements")).unwrap_or(0);
        let folded = fold_constants(cx.ctx, module, max_elements);
        cx.add_stat("folded", folded);
        Ok(PassOutcome::from_changed(folded > 0))
    }
}

/// Folds to a fixed point and erases the constants left unused; returns how many
/// ops were folded.
fn fold_constants(ctx: &mut Context, module: &mut Module, max_elements: u64) -> u64 {
    let root = module.root();
    let mut worklist: Vec<OpId> = module.ops_where(|op| op != root);
    worklist.reverse();
    let mut queued = Flags::default();
    for &op in &worklist {
        queued.set(op, true);
    }
    // Constants that lost a use to a fold or were made by one: erased at the end
    // if nothing uses them.
    let mut touched: Vec<OpId> = Vec::new();
    let mut folded = 0u64;
    let mut rewriter = Rewriter::new(ctx, module);
    while let Some(op) = worklist.pop() {
        queued.set(op, false);
        if rewriter.module.is_erased(op) || rewriter.module.op_block(op).is_none() {
            continue;
        }
        let values = fold_op(&mut rewriter, op, max_elements, &mut touched);
        // The worklist follows uses directly; the rewriter's change log is not needed.
        let _ = rewriter.take_changes();
        let Some(values) = values else { continue };
        folded += 1;
        // The ops that used the folded results use the constants now.
        let module = &*rewriter.module;
        for v in values {
            for user in module.uses(v) {
                if !queued.get(user.op) {
                    queued.set(user.op, true);
                    worklist.push(user.op);
                }
            }
        }
    }
    erase_unused_constants(ctx, module, touched);
    folded
}

/// Folds `op` if it is not a constant, has a folder, every operand is a constant
/// and every result folds to a constant within `max_elements`. Returns the
/// values that replaced its results; records the constants involved in `touched`.
fn fold_op(
    rewriter: &mut Rewriter<'_>,
    op: OpId,
    max_elements: u64,
    touched: &mut Vec<OpId>,
) -> Option<SmallVec<[ValueId; 2]>> {
    let name = rewriter.module.op_name(op);
    let def = rewriter.ctx.op_def(name)?;
    if def.has(Traits::CONSTANT_LIKE) {
        return None;
    }
    let fold = def.fold?;
    let constants: SmallVec<[Option<Attribute>; 4]> = rewriter
        .module
        .operands(op)
        .map(|v| constant_value(rewriter.ctx, rewriter.module, v).map(Some))
        .collect::<Option<_>>()?;
    let results = fold(rewriter.ctx, rewriter.module, op, &constants)?;
    if results.len() != rewriter.module.num_results(op) {
        return None;
    }
    for (i, result) in results.iter().enumerate() {
        let ty = rewriter.module.value_type(rewriter.module.result(op, i));
        let ok = match *result {
            FoldResult::Value(v) => is_constant_of_type(rewriter.ctx, rewriter.module, v, ty, op),
            FoldResult::Constant(attr) => fits(rewriter.ctx, attr, max_elements),
        };
        if !ok {
            return None;
        }
    }
    let dialect: String = rewriter.ctx.dialect_of(name)?.name().to_string();
    let operand_defs: SmallVec<[OpId; 4]> =
        rewriter.module.operands(op).map(|v| rewriter.module.defining_op(v)).collect();

    let saved_ip = rewriter.insertion_point();
    rewriter.set_insertion_point(InsertPoint::Before(op));
    let loc = rewriter.module.op_loc(op);
    let mut values: SmallVec<[ValueId; 2]> = SmallVec::new();
    let mut created: SmallVec<[OpId; 2]> = SmallVec::new();
    for (i, result) in results.iter().enumerate() {
        let value = match *result {
            FoldResult::Value(v) => Some(v),
            FoldResult::Constant(attr) => {
                let ty = rewriter.module.value_type(rewriter.module.result(op, i));
                let made = rewriter.materialize_constant(&dialect, attr, ty, loc);
                if let Some(v) = made {
                    created.push(rewriter.module.defining_op(v));
                }
                made
            }
        };
        let Some(value) = value else {
            // No dialect builds this constant: undo what was made for earlier results.
            for &c in &created {
                let _ = rewriter.erase_op(c);
            }
            rewriter.set_insertion_point(saved_ip);
            return None;
        };
        values.push(value);
    }
    rewriter.set_insertion_point(saved_ip);
    // invariant: every use of the results moves to `values`, so erasing `op`
    // cannot fail.
    rewriter.replace_op(op, &values).ok()?;
    touched.extend(operand_defs);
    touched.extend(created);
    touched.extend(values.iter().map(|&v| rewriter.module.defining_op(v)));
    Some(values)
}

/// True if `v` is a constant of type `ty` other than a result of `op` (a folder
/// answering with the op's own result means "unchanged").
fn is_constant_of_type(ctx: &Context, module: &Module, v: ValueId, ty: Type, op: OpId) -> bool {
    module.defining_op(v) != op && module.value_type(v) == ty && constant_value(ctx, module, v).is_some()
}

/// True if the folded constant `attr` has at most `max_elements` elements (a
/// dense tensor counts every element of its type, a scalar attribute one).
fn fits(ctx: &Context, attr: Attribute, max_elements: u64) -> bool {
    match ctx.attr_data(attr) {
        AttrData::Dense(d) => static_num_elements(ctx, d.ty).is_some_and(|n| n <= max_elements),
        _ => max_elements >= 1,
    }
}

/// Erases the ops in `candidates` that are registered pure constants whose
/// results nobody uses (each once; already erased ones are skipped).
fn erase_unused_constants(ctx: &Context, module: &mut Module, mut candidates: Vec<OpId>) {
    candidates.retain(|op| op.is_some());
    candidates.sort_unstable();
    candidates.dedup();
    for op in candidates {
        if module.is_erased(op) || module.op_has_uses(op) || module.num_regions(op) > 0 {
            continue;
        }
        let constant = ctx
            .op_def(module.op_name(op))
            .is_some_and(|def| def.has(Traits::CONSTANT_LIKE) && def.has(Traits::PURE));
        if constant {
            // invariant: the op has no used results, so erasing cannot fail.
            let _ = module.erase_op(op);
        }
    }
}

/// One flag per op id, growing as new ops are made.
#[derive(Default)]
struct Flags(Vec<bool>);

impl Flags {
    fn get(&self, op: OpId) -> bool {
        self.0.get(op.index()).copied().unwrap_or(false)
    }
    fn set(&mut self, op: OpId, value: bool) {
        if self.0.len() <= op.index() {
            self.0.resize(op.index() + 1, false);
        }
        self.0[op.index()] = value;
    }
}

#[cfg(test)]
mod tests {
    use crate::test_ir::{check_pass, fold_a_10000_op_chain};

    /// `%v1 = %c + %c; %v2 = %v1 + %c; ...`: 10,000 adds fold to one constant on a
    /// small stack, and the constant they all used is erased.
    #[test]
    fn a_10000_op_chain_folds_to_one_constant() {
        fold_a_10000_op_chain("fold-constant", |out| assert_eq!(out.stats, [("folded", 10_000)]));
    }

    /// `x + 0` has a folder answer (`x`), but `x` is not a constant: nothing changes,
    /// and an unused constant no fold touched is left to `dce`.
    #[test]
    fn non_constant_operands_are_not_folded() {
        let input = "func.func @f(%x: i64) -> i64 {
  %0 = test.const() {value = 0} : () -> i64
  %1 = test.add(%x, %0) : (i64, i64) -> i64
  %2 = test.const() {value = 7} : () -> i64
  func.return %1 : i64
}
";
        let out = check_pass("fold-constant", input).unwrap();
        assert_eq!(
            out.ir,
            "module {
  func.func @f(%arg0: i64) -> i64 {
    %0 = test.const() {value = 0} : () -> i64
    %1 = test.add(%arg0, %0) : (i64, i64) -> i64
    %2 = test.const() {value = 7} : () -> i64
    func.return %1 : i64
  }
}
"
        );
        assert_eq!(out.stats, [("folded", 0)]);
    }

    #[test]
    fn max_elements_below_zero_is_an_error() {
        let input = "func.func @f() {\n  func.return\n}\n";
        let error = check_pass("fold-constant{max-elements=-1}", input).unwrap_err();
        // Refused when the pipeline is parsed, at the option's value.
        assert_eq!(
            error,
            "error: pass 'fold-constant': max-elements must not be negative, got -1\n  \
             fold-constant{max-elements=-1}\n                             ^"
        );
    }

    /// A scalar attribute counts as one element: `max-elements=0` keeps the add.
    #[test]
    fn max_elements_zero_keeps_scalar_folds() {
        let input = "func.func @f() -> i64 {
  %0 = test.const() {value = 2} : () -> i64
  %1 = test.add(%0, %0) : (i64, i64) -> i64
  func.return %1 : i64
}
";
        let out = check_pass("fold-constant{max-elements=0}", input).unwrap();
        assert_eq!(out.stat("folded"), 0);
        let out = check_pass("fold-constant{max-elements=1}", input).unwrap();
        assert_eq!(out.stat("folded"), 1);
        assert!(out.ir.contains("test.const() {value = 4}"), "{}", out.ir);
        assert!(!out.ir.contains("value = 2"), "{}", out.ir);
    }
}
