//! The quantization passes, one module per flag, and the calibration
//! registries they share.
//!
//! | flag | does |
//! |---|---|
//! | `fold-bn` | folds batch norms (and per-channel constant scales and shifts) into the conv or dense before them |
//! | `insert-observers` | puts a `qnn.observe` on every float value a quantized op would consume or produce |
//! | `calibrate` | runs `@main` over a data set and accumulates statistics into the observers' attributes |
//! | `insert-fakeq` | turns observers into `qnn.fake_quant` with parameters from their statistics, and fake-quantizes weights |
//! | `propagate-qparams` | gives outputs of quant-agnostic ops their input's parameters, and concat inputs one type |
//! | `expand-fakeq` | turns each `qnn.fake_quant` into `qnn.quantize` + `qnn.dequantize` (exact) |
//! | `quantize-constants` | folds `qnn.quantize` of constants into quantized constants; biases become i32 |
//! | `fuse` | turns dequantize → float op → quantize into integer `qnn` ops (patterns: [`FusionPatterns`]) |
//! | `quant-lint` | reports, with fixes, what keeps the module from a clean integer model (analysis only) |
//!
//! Every pass reads only the IR it is given: all statistics and decisions live
//! in attributes, so a user can stop after any pass, edit the `.qir`, and go on.
//! Observers and range methods are open registries ([`QuantMethods`]), found in
//! the [`qopt_ir_core::Context`] the passes run with.

mod bias_correction;
mod calibrate;
mod channel_means;
mod expand_fakeq;
mod fold_bn;
mod fuse;
mod fuse_patterns;
mod histogram;
mod insert_fakeq;
mod insert_observers;
mod methods;
mod observers;
mod propagate_qparams;
mod quant_lint;
mod quantize_constants;
mod quantize_pipeline;
mod ranges;
mod scheme;
mod stats;
mod util;

pub use calibrate::Calibrate;
pub use channel_means::ChannelMeans;
pub use expand_fakeq::ExpandFakeq;
pub use fold_bn::FoldBn;
pub use fuse::Fuse;
pub use fuse_patterns::{integer_bias, Activation, FuseSite, FusionPatterns, QuantPattern, SiteOperand};
pub use histogram::Histogram;
pub use insert_fakeq::InsertFakeq;
pub use insert_observers::InsertObservers;
pub use methods::{value_range, ObservedBatch, Observer, QuantMethods, RangeMethod, RangeTarget};
pub use observers::{DEFAULT_AVERAGING_CONSTANT, DEFAULT_BINS};
pub use propagate_qparams::PropagateQparams;
pub use quant_lint::QuantLint;
pub use quantize_constants::QuantizeConstants;
pub use quantize_pipeline::quantize_pipeline;
pub use stats::ObserverStats;

use qopt_ir_core::{Pass, PassRegistry};
use std::sync::Arc;

/// The quantization passes, in pipeline order.
pub fn quant_passes() -> Vec<Arc<dyn Pass>> {
    vec![
        Arc::new(FoldBn),
        Arc::new(InsertObservers),
        Arc::new(Calibrate),
        Arc::new(InsertFakeq),
        Arc::new(PropagateQparams),
        Arc::new(ExpandFakeq),
        Arc::new(QuantizeConstants),
        Arc::new(Fuse),
        Arc::new(QuantLint),
        // one line per pass
    ]
}

/// Registers every pass of [`quant_passes`] and the `quantize` named
/// pipeline. Fails only if a name is taken.
pub fn register_quant_passes(registry: &mut PassRegistry) -> Result<(), String> {
    quant_passes().into_iter().try_for_each(|pass| registry.register(pass))?;
    registry.register_pipeline(quantize_pipeline())
}
