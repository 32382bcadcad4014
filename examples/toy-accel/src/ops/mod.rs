//! The ops of the `accel` dialect, one module per family:
//!
//! - [`conv`]: `accel.conv2d_relu` and [`conv::check_conv`], the accelerator's
//!   contract that both its verifier and `accel-lower` apply;
//! - [`dma`]: `accel.dma_in`, `accel.dma_out` and the `dma-out-in` pattern.
//!
//! Verifiers never panic on IR content: the core verifier has checked operand
//! and result counts before they run, and they index no further.

use qopt_ir_core::OpDef;

pub(crate) mod conv;
pub(crate) mod dma;

/// Every op of the dialect.
pub(crate) fn all() -> Vec<OpDef> {
    let mut ops = conv::ops();
    ops.extend(dma::ops());
    ops
}
