//! The quantization passes, one module per flag, and the calibration
//! registries they share.
//!
//! The passes, in pipeline order, are listed once in the `quant_passes!`
//! invocation below (`docs/passes.md` is generated from the registry): from
//! `fold-bn`, `insert-observers`, `calibrate` and `insert-fakeq` (the
//! fake-quant model) through `propagate-qparams`, `expand-fakeq`,
//! `quantize-constants` and `fuse` (integer ops) to `quant-lint`; the named
//! pipeline `quantize` runs them all, after the generic `recognize-gelu`.
//! `collect-calibration-data` reads data like `calibrate` but only writes the
//! function boundaries it sees to an `.npz`, for a backend's own quantizer.
//! Beyond min-max, optional passes slot into that order: `equalize` and
//! `absorb-bias` on the float model, `quantize-search` (mixed precision, as
//! `qnn.cast_hint` ops the later passes read), and after `insert-fakeq`,
//! `round-weights` (adaptive rounding) and `bias-correct` (empirical bias
//! correction, which `quantize` runs by default).
//!
//! Every pass reads only the IR it is given: all statistics and decisions live
//! in attributes, so a user can stop after any pass, edit the `.qir`, and go on.
//! Observers and range methods are open registries ([`QuantMethods`]), found in
//! the [`qopt_ir_core::Context`] the passes run with.

mod absorption_record;
mod adaround;
mod bias_correction;
mod bias_record;
mod channel_means;
mod fuse_patterns;
mod histogram;
mod layer_inputs;
mod methods;
mod observers;
mod paired_run;
mod quantize_pipeline;
mod ranges;
mod scheme;
mod stats;
mod util;

pub use channel_means::ChannelMeans;
pub use fuse_patterns::{integer_bias, Activation, FuseSite, FusionPatterns, QuantPattern, SiteOperand};
pub use histogram::Histogram;
pub use methods::{value_range, ObservedBatch, Observer, QuantMethods, RangeMethod, RangeTarget};
pub use observers::{DEFAULT_AVERAGING_CONSTANT, DEFAULT_BINS};
pub use quantize_pipeline::quantize_pipeline;
pub use stats::ObserverStats;

use qopt_ir_core::{Pass, PassRegistry};
use std::sync::Arc;

/// Declares pass modules, re-exports their passes and lists them in
/// [`quant_passes`]: one `module::Pass` line per pass.
macro_rules! quant_passes {
    ($($module:ident :: $pass:ident),* $(,)?) => {
        $(mod $module; pub use $module::$pass;)*
        /// The quantization passes, in pipeline order.
        pub fn quant_passes() -> Vec<Arc<dyn Pass>> {
            vec![$(Arc::new($pass)),*]
        }
    };
}

quant_passes! {
    fold_bn::FoldBn,
    equalize::Equalize,
    absorb_bias::AbsorbBias,
    quantize_search::QuantizeSearch,
    insert_observers::InsertObservers,
    calibrate::Calibrate,
    collect_calibration_data::CollectCalibrationData,
    insert_fakeq::InsertFakeq,
    round_weights::RoundWeights,
    bias_correct::BiasCorrect,
    propagate_qparams::PropagateQparams,
    expand_fakeq::ExpandFakeq,
    quantize_constants::QuantizeConstants,
    fuse::Fuse,
    quant_lint::QuantLint,
}

/// Registers every pass of [`quant_passes`] and the `quantize` named
/// pipeline. Fails only if a name is taken.
pub fn register_quant_passes(registry: &mut PassRegistry) -> Result<(), String> {
    quant_passes().into_iter().try_for_each(|pass| registry.register(pass))?;
    registry.register_pipeline(quantize_pipeline())
}
