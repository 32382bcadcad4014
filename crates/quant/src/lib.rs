//! qopt's post-training quantization: the passes, one file (or folder) per
//! flag in [`passes`], and the mechanisms they share, each in a folder named
//! after its role:
//!
//! - [`calibration`]: the open registries of observers and range methods
//!   ([`QuantMethods`]), the statistics an observer keeps ([`ObserverStats`],
//!   [`Histogram`], [`ChannelMeans`]) and the built-in methods;
//! - [`records`]: what the passes write into the IR beyond ops and types
//!   (bias records, absorption records, cast hints and `qnn.skip`) and the
//!   [`records::scheme::Scheme`] that turns a range into parameters;
//! - [`runs`]: running a function over calibration data (the streamed data
//!   set, the options every data pass shares, the paired float and
//!   fake-quant run);
//! - [`fuse`]: the `fuse` driver and its open registry of quantized patterns
//!   ([`FusionPatterns`]);
//! - [`search`]: `quantize-search`'s sites, evaluation and report;
//! - [`quantizable`] and [`channels`]: which ops quantization touches, and
//!   per-channel views of tensors.
//!
//! The passes, in pipeline order, are listed once in [`passes`]
//! (`docs/passes.md` is generated from the registry): from `fold-bn`,
//! `insert-observers`, `calibrate` and `insert-fakeq` (the fake-quant model)
//! through `propagate-qparams`, `expand-fakeq`, `quantize-constants` and
//! `fuse` (integer ops) to `quant-lint`; the named pipeline `quantize` runs
//! them all, after the generic `recognize-gelu`, `recognize-hard-swish`,
//! `recognize-dense` and `div-to-mul`.
//!
//! Every pass reads only the IR it is given: all statistics and decisions
//! live in attributes, so a user can stop after any pass, edit the `.qir`,
//! and go on. Observers, range methods and fusion patterns are open
//! registries found in the [`qopt_ir_core::Context`] the passes run with.

#![warn(missing_docs)]

pub mod calibration;
pub mod channels;
pub mod fuse;
pub mod layer_pairs;
pub mod passes;
pub mod quantizable;
pub mod records;
pub mod runs;
pub mod search;
#[cfg(test)]
mod test_ir;

pub use calibration::batch::{value_range, ObservedBatch};
pub use calibration::channel_means::ChannelMeans;
pub use calibration::histogram::Histogram;
pub use calibration::methods::{Observer, QuantMethods, RangeMethod, RangeTarget};
pub use calibration::observers::{DEFAULT_AVERAGING_CONSTANT, DEFAULT_BINS};
pub use calibration::stats::ObserverStats;
pub use fuse::patterns::{integer_bias, Activation, FuseSite, FusionPatterns, QuantPattern, SiteOperand};
pub use passes::{quant_passes, register_quant_passes};
