//! Building and cleaning up `fp.constant`s, for the passes that fold
//! arithmetic into new constants (`simplify-inference`, `fold-bn`) or erase
//! the arithmetic that used them (`recognize-gelu`).

use crate::op_names as fp_op;
use qopt_ir_core::{Attribute, Context, DenseElements, Module, Rewriter, Traits, Type, ValueId};

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
