//! Running a function over calibration data: the [`dataset`] streamed from
//! `.npy` / `.npz` files, the options and chunking every data pass shares
//! ([`data`]), and the [`paired_run`] of the float and fake-quant models side
//! by side that `bias-correct` and `absorb-bias` measure with.

pub mod data;
pub mod dataset;
pub mod paired_run;
