//! The lowerings of the ops this backend compiles out of the box, registered
//! by [`register`]. One module per kind of kernel holds each lowering; this
//! file only names them.

use super::{LowerOp, Lowerings, OpLowering, Plan};
use crate::abi::KernelCode;
use crate::convert::ConvertSpec;
use crate::error::CodegenError;
use crate::kernels;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use std::sync::Arc;

/// Registers every built-in lowering.
pub(super) fn register(l: &mut Lowerings) {
    let convert: Arc<dyn OpLowering> = Arc::new(Convert);
    for name in ["qnn.quantize", "qnn.dequantize"] {
        l.register(name, convert.clone());
    }
    l.register(qnn_op::REQUANTIZE, Arc::new(kernels::requantize::Requantize));
    let binary: Arc<dyn OpLowering> = Arc::new(kernels::binary::Binary);
    for name in [qnn_op::ADD, qnn_op::MUL] {
        l.register(name, binary.clone());
    }
    l.register(qnn_op::CONCAT, Arc::new(kernels::concat::QuantConcat));
    l.register(qnn_op::LOOKUP, Arc::new(kernels::lookup::Lookup));
    let pool: Arc<dyn OpLowering> = Arc::new(kernels::pool::Pool);
    for name in [qnn_op::AVG_POOL2D, qnn_op::GLOBAL_AVG_POOL2D, fp_op::MAX_POOL2D, fp_op::MAX_POOL1D] {
        l.register(name, pool.clone());
    }
    l.register(fp_op::RESIZE, Arc::new(kernels::resize::Resize));
    for (name, lowering) in kernels::movement::lowerings() {
        l.register(name, lowering);
    }
    crate::kernels::register(l);
    let alias: Arc<dyn OpLowering> = Arc::new(Alias);
    for name in ["fp.reshape", "fp.flatten", "fp.squeeze", "fp.unsqueeze", "qnn.cast_hint", "qnn.stop_fusion"]
    {
        l.register(name, alias.clone());
    }
}

/// `qnn.quantize`, `qnn.dequantize`: one elementwise kernel (`convert.rs`).
struct Convert;

impl OpLowering for Convert {
    fn plan(&self, op: &LowerOp<'_>) -> Result<Plan, CodegenError> {
        ConvertSpec::from_op(op.ctx, op.module, op.op)?;
        op.target.require(&ConvertSpec::needed_features(), op.name())?;
        Ok(Plan::kernels())
    }

    fn emit(&self, op: &LowerOp<'_>, out: &mut super::Emit<'_>) -> Result<(), CodegenError> {
        let spec = ConvertSpec::from_op(op.ctx, op.module, op.op)?;
        let len = op.result_shape(0)?.iter().product::<usize>();
        let code = spec.emit((out.operand(0)?, out.result(0)?))?;
        out.kernel(KernelCode { code, work: len, work_item: "element", strategy: "AVX2, 8 lanes".into() });
        Ok(())
    }
}

/// Ops whose result is operand 0's bytes under another shape: reshape,
/// flatten, squeeze, unsqueeze, and the identity annotations.
struct Alias;

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

    fn emit(&self, _op: &LowerOp<'_>, _out: &mut super::Emit<'_>) -> Result<(), CodegenError> {
        Ok(())
    }
}
