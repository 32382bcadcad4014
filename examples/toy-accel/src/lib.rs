//! `toy-accel`: the template a hardware vendor copies to plug an accelerator
//! into qopt without changing qopt. It is an ordinary crate that depends on
//! qopt's crates and adds, through qopt's public API only:
//!
//! - a dialect, `accel` ([`AccelDialect`]), with the three ops of a toy int8
//!   accelerator: `accel.conv2d_relu` (the fused conv engine) and
//!   `accel.dma_in` / `accel.dma_out` (transfers to and from accelerator
//!   memory), each with a summary, a description with a `.qir` example, arity,
//!   traits, a verifier that encodes what the hardware accepts, type inference
//!   where the result type follows from the operands, and one canonicalization
//!   pattern (`dma-out-in`) that qopt's own `canonicalize` pass applies;
//! - a pass, `accel-lower` ([`AccelLower`]), that hands each supported
//!   `qnn.conv2d_relu` to the accelerator and says, per op it keeps, why;
//! - equivalence rules that define the `accel` ops in terms of `qnn`
//!   (`src/equivalence.rs`, [`AccelDialect`]'s `equivalence_rules`), so
//!   `toy-opt --verify-equiv` proves `accel-lower` on every run;
//! - [`register_kernels`], interpreter kernels for the `accel` ops, so
//!   `qopt-interp` runs a lowered module (`accel.conv2d_relu` calls qopt's own
//!   quantized convolution, [`qopt_interp::QuantConv2d`]);
//! - [`AccelHeadroom`], the vendor's own calibration method, added to qopt's
//!   range-method registry (`insert-fakeq{method=accel-headroom}`), and the
//!   same kernels installed in the context so the `calibrate` pass can run
//!   `accel` ops ([`register_extensions`]);
//! - [`AccelConvRelu`], a pattern for qopt's `fuse` pass: a float conv + relu
//!   between quantized values goes straight to the engine when it supports it;
//! - [`AccelTarget`], the accelerator as a target of qopt's
//!   `partition{target=accel}` (what the engine runs, by the same contract),
//!   and [`AccelQuantize`], the vendor's own quantizer for the outlined
//!   regions, fed by the boundary data of qopt's `collect-calibration-data`
//!   (the BYOC flow, `README.md`);
//! - [`register`], which adds the dialect and the passes to a
//!   [`qopt_driver::Driver`], and the `toy-opt` binary (`src/bin/toy-opt.rs`),
//!   three lines long, that is qopt's driver with every qopt flag and pass
//!   plus these.
//!
//! The accelerator's contract lives in one place, [`check_conv`]: the verifier
//! of `accel.conv2d_relu` and `accel-lower` both call it, so the pass never
//! builds an op the verifier rejects, and the warning for a kept op gives the
//! same reasons the verifier would.
//!
//! ```text
//! $ toy-opt model.qir --pass=accel-lower,canonicalize,cse --stats
//! ```
//!
//! To make your own backend: copy this directory, rename the crate, the
//! dialect (`accel`) and the binary, replace the contract in `ops/conv.rs` by
//! your hardware's, and point the qopt dependencies at a qopt revision
//! (`README.md` has the commands).

#![warn(missing_docs)]

mod accel_lower;
mod accel_quantize;
mod backend;
mod calibration;
mod equivalence;
mod fusion;
mod kernels;
mod ops;

pub use accel_lower::AccelLower;
pub use accel_quantize::AccelQuantize;
pub use backend::{AccelTarget, ACCEL_TARGET};
pub use calibration::AccelHeadroom;
pub use fusion::AccelConvRelu;
pub use kernels::register_kernels;
pub use ops::conv::{
    check_conv, check_conv_with, implied_pad, ConvContract, ConvParams, Elements, ACCEL_ROUNDING,
    KERNEL_SIZES, STRIDES,
};
pub use ops::dma::DmaOutIn;

use qopt_driver::Driver;
use qopt_ir_core::{Context, Dialect, OpDef, Pass, RewritePattern};
use qopt_quant::RangeMethod as _;
use std::sync::Arc;

/// The `accel` dialect; see the crate docs.
#[derive(Copy, Clone, Debug, Default)]
pub struct AccelDialect;

impl Dialect for AccelDialect {
    fn name(&self) -> &'static str {
        "accel"
    }
    fn summary(&self) -> &'static str {
        "a toy int8 accelerator: fused conv+relu engine and DMA transfers"
    }
    fn ops(&self) -> Vec<OpDef> {
        ops::all()
    }
    fn canonicalization_patterns(&self) -> Vec<Box<dyn RewritePattern>> {
        vec![Box::new(DmaOutIn)]
    }
    fn equivalence_rules(&self) -> Vec<qopt_ir_core::equivalence::EquivRule> {
        equivalence::rules()
    }
}

/// Registers the dialects `toy-opt` needs in `ctx`: `fp` and `qnn` (each only
/// if it is not there yet, so this works whatever the driver already
/// registers) and `accel`.
pub fn register_dialects(ctx: &mut Context) -> Result<(), String> {
    if ctx.dialect("fp").is_none() {
        qopt_dialect_fp::register(ctx)?;
    }
    if ctx.dialect("qnn").is_none() {
        qopt_dialect_qnn::register(ctx)?;
    }
    if ctx.dialect("accel").is_none() {
        ctx.register_dialect(AccelDialect)?;
    }
    register_extensions(ctx)
}

/// Adds what qopt's passes look up in the context: the `accel` kernels (so
/// `calibrate` runs modules with `accel` ops), the vendor's calibration
/// method [`AccelHeadroom`] (`insert-fakeq{method=accel-headroom}`), its
/// fusion pattern [`AccelConvRelu`] and its partitioning target
/// [`AccelTarget`] (`partition{target=accel}`). Calling it twice changes
/// nothing.
pub fn register_extensions(ctx: &mut Context) -> Result<(), String> {
    register_kernels(qopt_interp::KernelRegistry::install(ctx));
    let methods = qopt_quant::QuantMethods::install(ctx);
    if methods.range_method(AccelHeadroom.name()).is_none() {
        methods.add_range_method(Arc::new(AccelHeadroom))?;
    }
    use qopt_quant::QuantPattern;
    let patterns = qopt_quant::FusionPatterns::install(ctx);
    if !patterns.all().iter().any(|p| p.name() == AccelConvRelu.name()) {
        patterns.add(Arc::new(AccelConvRelu))?;
    }
    let targets = qopt_passes::BackendTargets::install(ctx);
    if targets.get(ACCEL_TARGET).is_none() {
        targets.add(Arc::new(AccelTarget))?;
    }
    Ok(())
}

/// Adds the `accel` dialect (and `fp` and `qnn`, if the driver does not
/// register them itself) and the `accel-lower` and `accel-quantize` passes
/// to `driver`. Calling it twice changes nothing.
pub fn register(driver: &mut Driver) {
    driver.add_dialects(register_dialects);
    let passes = driver.passes_mut();
    let ours: [Arc<dyn Pass>; 2] = [Arc::new(AccelLower), Arc::new(AccelQuantize)];
    for pass in ours {
        if passes.get(pass.name()).is_none() {
            // invariant: the name is free (checked just above) and valid, so
            // this cannot fail.
            let _ = passes.register(pass);
        }
    }
}

#[cfg(test)]
mod tests;
