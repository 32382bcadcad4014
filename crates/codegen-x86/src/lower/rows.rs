//! The lowering every row kernel shares ([`RowKernel`], wrapped as an
//! [`OpLowering`] by [`RowLowering`]): the op is read into its parameters
//! (every check that can fail), its tensors must fit 32-bit offsets, the
//! target must have AVX2, and the kernels need no scratch; emitting reads
//! the op the same way and hands the parameters over.

use crate::error::CodegenError;
use crate::kernels::rows::AVX2;
use crate::lower::operands::check_tensor_sizes;
use crate::lower::{Emit, EmitResult, LowerOp, OpLowering, Plan};

/// An op whose kernels walk rows of its tensors (`kernels/rows.rs`).
pub(crate) trait RowKernel: Send + Sync {
    /// The op's parameters, read and checked.
    type Op<'a>;

    /// Reads and checks the op (an `Unsupported` or `InvalidInput` error
    /// says why it cannot be compiled).
    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<Self::Op<'a>, CodegenError>;

    /// Emits the op's kernels from what [`RowKernel::read`] returned.
    fn emit_rows(&self, op: &LowerOp<'_>, read: Self::Op<'_>, out: &mut Emit<'_>)
        -> Result<(), CodegenError>;
}

/// A [`RowKernel`] as an [`OpLowering`].
pub(crate) struct RowLowering<K>(pub K);

impl<K: RowKernel> OpLowering for RowLowering<K> {
    fn plan(&self, op: &LowerOp<'_>) -> Result<Plan, CodegenError> {
        self.0.read(op)?;
        check_tensor_sizes(op)?;
        op.target.require(&AVX2, op.name())?;
        Ok(Plan::kernels())
    }

    fn emit(&self, op: &LowerOp<'_>, out: &mut Emit<'_>) -> EmitResult {
        let read = self.0.read(op)?;
        self.0.emit_rows(op, read, out)
    }
}
