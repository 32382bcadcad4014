//! The quantization passes, one module per flag, listed once in the
//! `quant_passes!` invocation below in pipeline order, and the named pipeline
//! `quantize` ([`quantize::quantize_pipeline`]).
//!
//! Beyond min-max, optional passes slot into that order: `equalize` and
//! `absorb-bias` on the float model, `quantize-search` (mixed precision, as
//! `qnn.cast_hint` ops the later passes read), and after `insert-fakeq`,
//! `round-weights` (adaptive rounding) and `bias-correct` (empirical bias
//! correction, which `quantize` runs by default).
//! `collect-calibration-data` reads data like `calibrate` but only writes the
//! function boundaries it sees to an `.npz`, for a backend's own quantizer.

pub mod quantize;

use qopt_ir_core::{Pass, PassRegistry};
use std::sync::Arc;

// Declared here, not by the macro below, so that rustfmt (which does not
// expand macros) finds and formats every pass file.
pub mod absorb_bias;
pub mod bias_correct;
pub mod calibrate;
pub mod collect_calibration_data;
pub mod equalize;
pub mod expand_fakeq;
pub mod fold_bn;
pub mod fuse;
pub mod insert_fakeq;
pub mod insert_observers;
pub mod propagate_qparams;
pub mod quant_lint;
pub mod quantize_constants;
pub mod quantize_search;
pub mod round_weights;

/// Re-exports the passes of the modules above and lists them in
/// [`quant_passes`]: one `module::Pass` line per pass.
macro_rules! quant_passes {
    ($($module:ident :: $pass:ident),* $(,)?) => {
        $(pub use $module::$pass;)*
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
    registry.register_pipeline(quantize::quantize_pipeline())
}
