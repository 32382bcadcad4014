//! Ops whose result is operand 0's bytes under another shape: no code.

use crate::error::CodegenError;
use crate::lower::{Emit, EmitResult, LowerOp, OpLowering, Plan};

/// Ops whose result is operand 0's bytes under another shape: reshape,
/// flatten, squeeze, unsqueeze, and the identity annotations.
pub(crate) struct Alias;

impl OpLowering for Alias {
    fn plan(&self, op: &LowerOp<'_>) -> Result<Plan, CodegenError> {
        if op.num_results() != 1 || op.num_operands() == 0 {
            return Err(op.invalid("expected a data operand and one result"));
        }
        op.element_of(op.operand_type(0), "operand 0")?;
        let same_element = op.ctx.element_type(op.operand_type(0)) == op.ctx.element_type(op.result_type(0));
        let (n_in, n_out) =
            (op.operand_shape(0)?.iter().product::<usize>(), op.result_shape(0)?.iter().product::<usize>());
        if !same_element || n_in != n_out {
            return Err(op.invalid("the result must hold operand 0's elements unchanged"));
        }
        Ok(Plan::Alias)
    }

    fn emit(&self, _op: &LowerOp<'_>, _out: &mut Emit<'_>) -> EmitResult {
        Ok(())
    }
}
