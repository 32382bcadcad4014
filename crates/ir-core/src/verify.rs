//! Verifier (being written).
use crate::{Context, Diagnostics, Module, OpId};
/// Verifies the module.
pub fn verify(_ctx: &mut Context, _module: &Module) -> Result<(), Diagnostics> {
    Ok(())
}
/// Verifies one op and what it contains.
pub fn verify_op(_ctx: &mut Context, _module: &Module, _op: OpId) -> Result<(), Diagnostics> {
    Ok(())
}
