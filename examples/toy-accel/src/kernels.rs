//! Interpreter kernels for the `accel` ops, so `qopt-interp` runs a lowered
//! module exactly as it ran the module before `accel-lower`.
//!
//! - `accel.conv2d_relu` computes `qnn.conv2d_relu` with the parameters the
//!   hardware implies (padding from the kernel size, dilation 1, one group,
//!   [`ACCEL_ROUNDING`]) through qopt's own kernel logic,
//!   [`qopt_interp::QuantConv2d`]: the arithmetic is not copied here, so it
//!   cannot drift from `docs/quant-semantics.md`.
//! - `accel.dma_in` and `accel.dma_out` are identities.
//!
//! Kernels read operands the op's verifier has already accepted, but they
//! still return errors instead of panicking on anything else.

use crate::ops::conv::{implied_pad, ACCEL_ROUNDING};
use qopt_dialect_fp::attrs;
use qopt_interp::{InterpError, KernelContext, KernelRegistry, KernelResults, QuantConv2d, Relu, Tensor};

/// Registers the kernels of every `accel` op in `registry` (next to qopt's
/// own, e.g. in [`KernelRegistry::standard`]).
pub fn register_kernels(registry: &mut KernelRegistry) {
    registry.register("accel.conv2d_relu", conv2d_relu);
    registry.register("accel.dma_in", transfer);
    registry.register("accel.dma_out", transfer);
}

/// `accel.conv2d_relu(x, w, b) {stride = [s, s]}`: `qnn.conv2d_relu` with
/// `pad = [k/2; 4]` for a k×k kernel, dilation 1, one group and the engine's
/// rounding.
fn conv2d_relu(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    let stride = attrs::int_array_in(kc.ctx, kc.attrs, "stride", Some(2), &[1, 1])?;
    let size = |v: i64| usize::try_from(v).map_err(|_| InterpError::new(format!("stride {v} is negative")));
    let [sh, sw] = [size(stride[0])?, size(stride[1])?];
    let Some(w) = ops.get(1) else { return Err(InterpError::new("expects a weight operand")) };
    let Some(&kernel) = w.shape().get(2) else {
        return Err(InterpError::new(format!("weight must have rank 4, got shape {:?}", w.shape())));
    };
    let p = i64::try_from(kernel)
        .ok()
        .and_then(|k| usize::try_from(implied_pad(k)).ok())
        .ok_or_else(|| InterpError::new(format!("kernel size {kernel} is out of range")))?;
    let conv = QuantConv2d {
        stride: [sh, sw],
        pad: [p; 4],
        dilation: [1, 1],
        groups: 1,
        rounding: ACCEL_ROUNDING,
        relu: Relu::Plain,
    };
    Ok(smallvec::smallvec![conv.run(kc, ops)?])
}

/// `accel.dma_in`, `accel.dma_out`: the value, unchanged.
fn transfer(_: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    match ops {
        [x] => Ok(smallvec::smallvec![(*x).clone()]),
        _ => Err(InterpError::new(format!("expects 1 operand, got {}", ops.len()))),
    }
}
