//! Rewriting every op of one name with a function that may decline, for
//! the passes that turn one op shape into another (`recognize-dense`,
//! `div-to-mul`).

use qopt_ir_core::{Context, Module, OpId};

/// Calls `rewrite` on every op named `name` (those of the module when the
/// call starts) and returns how many it rewrote (`Some`).
pub(crate) fn rewrite_each(
    ctx: &mut Context,
    module: &mut Module,
    name: &str,
    rewrite: fn(&mut Context, &mut Module, OpId) -> Option<()>,
) -> u64 {
    let name = ctx.op_name(name);
    let ops = module.ops_where(|op| module.op_name(op) == name);
    ops.into_iter().map(|op| u64::from(rewrite(ctx, module, op).is_some())).sum()
}
