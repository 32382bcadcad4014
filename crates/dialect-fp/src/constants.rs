//! Building and cleaning up `fp.constant`s, for the passes that fold
//! arithmetic into new constants (`simplify-inference`, `fold-bn`), erase
//! the arithmetic that used them (`recognize-gelu`) or rewrite an op into
//! another on a new constant (`recognize-dense`, `div-to-mul`).

use crate::op_names as fp_op;
use qopt_ir_core::{
    Attribute, Context, DenseElements, InsertPoint, Module, OpId, Rewriter, Traits, Type, ValueId,
};

/// The dense attribute of `ty` holding `values`, rounded to its element type.
pub fn dense(ctx: &mut Context, ty: Type, values: &[f64]) -> Result<Attribute, String> {
    let elements = DenseElements::from_f64(ctx, ty, values)?;
    Ok(ctx.dense_attr(elements))
}

/// `fp.constant` holding `value`, at the rewriter's insertion point.
pub fn create_constant(rewriter: &mut Rewriter<'_>, value: Attribute) -> Result<ValueId, String> {
    let attrs = rewriter.ctx.dict_attr(&[("value", value)]);
    let op = rewriter.create_inferred(fp_op::CONSTANT, &[], attrs)?;
    Ok(rewriter.module.result(op, 0))
}

/// Replaces `op` by `name(x, c)`, where `c` is a new `fp.constant` holding
/// `value` located where `old` (the operand it stands for) is defined, when
/// the new op infers `op`'s result type; `old` is erased if nothing uses it
/// any more. `None`, and the module as it was, otherwise.
pub fn replace_with_op_on_constant(
    ctx: &mut Context,
    module: &mut Module,
    op: OpId,
    (name, x): (&str, ValueId),
    (value, old): (Attribute, ValueId),
) -> Option<()> {
    let result_ty = module.value_type(module.result(op, 0));
    let (loc, constant_loc) = (module.op_loc(op), module.op_loc(module.defining_op(old)));
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(op));
    rewriter.set_loc(constant_loc);
    let constant = create_constant(&mut rewriter, value).ok()?;
    rewriter.set_loc(loc);
    let created = rewriter.create_inferred(name, &[x, constant], Attribute::EMPTY_DICT).ok()?;
    let y = rewriter.module.result(created, 0);
    if rewriter.module.value_type(y) != result_ty {
        let _ = rewriter.module.erase_op(created);
        erase_if_unused_constant(ctx, module, constant);
        return None;
    }
    rewriter.replace_op(op, &[y]).ok()?;
    erase_if_unused_constant(ctx, module, old);
    Some(())
}

/// Erases the op defining `v` if it is a registered pure constant nobody uses.
pub fn erase_if_unused_constant(ctx: &Context, module: &mut Module, v: ValueId) {
    let def = module.defining_op(v);
    if def.is_none() || module.is_erased(def) || module.op_has_uses(def) {
        return;
    }
    let constant =
        ctx.op_def(module.op_name(def)).is_some_and(|d| d.has(Traits::CONSTANT_LIKE) && d.has(Traits::PURE));
    if constant {
        // invariant: no result is used, so erasing cannot fail.
        let _ = module.erase_op(def);
    }
}

/// "scale is not a constant", "scale and var are not constants", "a, b and c ...".
pub fn not_constants(names: &[&str]) -> String {
    match names {
        [one] => format!("{one} is not a constant"),
        [init @ .., last] => format!("{} and {last} are not constants", init.join(", ")),
        [] => String::new(),
    }
}
