//! Translation validation by equality saturation: `qopt --verify-equiv`
//! proves, on every run and for the user's own module, that each pass kept
//! the module's meaning under the relation the pass declares
//! ([`qopt_ir_core::Pass::equivalence`]).
//!
//! The function before the pass and the function after it go into one
//! e-graph ([`bridge`]); equality saturation with `egg` applies the rules the
//! registered dialects state ([`qopt_ir_core::Dialect::equivalence_rules`],
//! parsed by [`rules`]) while an e-class analysis folds constants with the
//! interpreter's kernels and the checker's own arithmetic ([`analysis`],
//! [`builtins`]). The pass is proven when each result of the old function
//! shares an e-class with the matching result of the new one ([`check`]).
//! Under `calibrated-range` the analysis also carries the per-channel
//! minima the IR records from calibration, and rules may assume them.
//!
//! `qopt --verify-numerics` is the complement ([`numerics`]): it runs the
//! module before and after each pass on the same random inputs in the
//! interpreter ([`sample_runs`]) and reports the largest difference of the
//! results ([`difference`]), judging the passes held to identical or
//! real-valued results.
//! `docs/verification.md` is the user's page.

#![warn(missing_docs)]

pub mod analysis;
pub mod bridge;
pub mod builtins;
pub mod check;
pub mod difference;
pub mod hook;
pub mod lang;
pub mod numerics;
pub mod quant_vocab;
pub mod rules;
pub mod sample_runs;
pub mod shape_vocab;

pub use check::{check, check_with_memo, registered_rules, Check, Failure, Limits, Outcome};
pub use hook::{render, EquivHook, Mode, ReportLine, SharedReport};
pub use numerics::{
    render_numerics, Criterion, NumericsHook, NumericsLine, NumericsReport, NumericsSettings, DEFAULT_INPUTS,
    REAL_TOLERANCE,
};
