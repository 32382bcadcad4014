//! Matching and replacing chains of `fp` arithmetic that compute one
//! activation (the decompositions exporters write), for the recognize passes
//! (`recognize-gelu`, `recognize-hard-swish`): single-use links, binary and
//! unary ops, constants within a few f32 ulps of an expected value, and the
//! replacement of a whole chain by one op.

use qopt_dialect_fp::shape;
use qopt_ir_core::{
    constant_value, dense_values_f64, AttrData, Attribute, Context, InsertPoint, Module, OpId, OpName,
    Rewriter, Traits, ValueId,
};
use smallvec::SmallVec;

use qopt_dialect_fp::constants::erase_if_unused_constant;

/// How far a constant may be from its expected value, in f32 ulps there.
const ULPS: f64 = 4.0;

/// The defining op of `v` if it is a live op named `name` with one result,
/// and `v` has exactly one use.
pub(crate) fn single_use_def(module: &Module, v: ValueId, name: OpName) -> Option<OpId> {
    let op = module.defining_op(v);
    let ok = op.is_some()
        && !module.is_erased(op)
        && module.op_name(op) == name
        && module.num_results(op) == 1
        && module.uses(v).count() == 1;
    ok.then_some(op)
}

/// The two operands of `op` if it is named `name` with two operands and one result.
pub(crate) fn binary(module: &Module, op: OpId, name: OpName) -> Option<(ValueId, ValueId)> {
    (module.op_name(op) == name && module.num_operands(op) == 2 && module.num_results(op) == 1)
        .then(|| (module.operand(op, 0), module.operand(op, 1)))
}

/// The operand of the one-operand `op`.
pub(crate) fn unary(module: &Module, op: OpId) -> Option<ValueId> {
    (module.num_operands(op) == 1).then(|| module.operand(op, 0))
}

/// For the commutative binary `op` named `name` with one operand the constant
/// `value` (see [`is_constant`]), the other operand (the second operand is
/// tried as the constant first).
pub(crate) fn other_than_constant(
    ctx: &Context,
    module: &Module,
    op: OpId,
    name: OpName,
    value: f64,
) -> Option<ValueId> {
    let (p, q) = binary(module, op, name)?;
    if is_constant(ctx, module, q, value) {
        Some(p)
    } else if is_constant(ctx, module, p, value) {
        Some(q)
    } else {
        None
    }
}

/// Whether `v` is a constant with float elements, at least one, all within
/// [`ULPS`] f32 ulps of `value` (> 0).
pub(crate) fn is_constant(ctx: &Context, module: &Module, v: ValueId, value: f64) -> bool {
    let Some(attr) = constant_value(ctx, module, v) else { return false };
    let AttrData::Dense(d) = ctx.attr_data(attr) else { return false };
    let elem = ctx.element_type(d.ty);
    if !shape::is_float_element(ctx, elem) {
        return false;
    }
    let tolerance = ULPS * f32_ulp(value);
    dense_values_f64(ctx, d, elem)
        .is_some_and(|values| !values.is_empty() && values.iter().all(|&c| (c - value).abs() <= tolerance))
}

/// The distance from the f32 nearest to `value` (> 0, normal) to the next
/// larger f32.
pub(crate) fn f32_ulp(value: f64) -> f64 {
    let f = value as f32;
    f64::from(f32::from_bits(f.to_bits() + 1)) - f64::from(f)
}

/// Whether `x` is a float tensor and the final op `y_op` and every op of the
/// chain produce exactly `x`'s type (no broadcast to a larger shape).
pub(crate) fn keeps_float_type(
    ctx: &Context,
    module: &Module,
    x: ValueId,
    y_op: OpId,
    chain: &[OpId],
) -> bool {
    let ty = module.value_type(x);
    let float = shape::tensor_parts(ctx, ty).is_some_and(|(_, elem)| shape::is_float_element(ctx, elem));
    float && std::iter::once(&y_op).chain(chain).all(|&op| module.value_type(module.result(op, 0)) == ty)
}

/// Replaces the chain's final op `y_op` by `name(x) {attrs}` at its location,
/// erases the chain (`chain`: its other ops, each after its users, each with
/// one user) and the constants it leaves unused; on `Err` the IR is unchanged.
pub(crate) fn replace_chain(
    ctx: &mut Context,
    module: &mut Module,
    y_op: OpId,
    chain: &[OpId],
    name: &str,
    x: ValueId,
    attrs: Attribute,
) -> Result<(), String> {
    let (y, loc) = (module.result(y_op, 0), module.op_loc(y_op));
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(y_op));
    rewriter.set_loc(loc);
    let new_op = rewriter.create_inferred(name, &[x], attrs)?;
    let g = rewriter.module.result(new_op, 0);
    if rewriter.module.value_type(g) != rewriter.module.value_type(y) {
        // invariant: the new op is unused, so erasing it cannot fail.
        let _ = rewriter.erase_op(new_op);
        return Err(format!("{name} would change the result type"));
    }
    // The constants the chain uses, erased below if nothing else does.
    let mut constants: SmallVec<[ValueId; 8]> = SmallVec::new();
    for &op in std::iter::once(&y_op).chain(chain) {
        for v in module.operands(op) {
            let def = module.defining_op(v);
            let constant = def.is_some()
                && ctx.op_def(module.op_name(def)).is_some_and(|d| d.has(Traits::CONSTANT_LIKE));
            if constant && !constants.contains(&v) {
                constants.push(v);
            }
        }
    }
    module.replace_all_uses(y, g);
    // invariant: `y_op` has no uses left and each op of the chain had one user,
    // erased before it, so every erase succeeds.
    for &op in std::iter::once(&y_op).chain(chain) {
        let _ = module.erase_op(op);
    }
    for &c in &constants {
        erase_if_unused_constant(ctx, module, c);
    }
    Ok(())
}
