//! The kernels behind the lowerings of `lower/builtin.rs`, one file per kind
//! of kernel; this file only lists them.

pub(crate) mod binary;
pub(crate) mod concat;
pub(crate) mod copy;
pub(crate) mod lanes;
pub(crate) mod lookup;
pub(crate) mod movement;
pub(crate) mod operands;
pub(crate) mod pool;
pub(crate) mod requantize;
pub(crate) mod rescale;
pub(crate) mod rows;
#[cfg(test)]
pub(crate) mod testing;
