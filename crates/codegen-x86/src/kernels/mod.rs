//! The kernels of the built-in lowerings, one module per kind of kernel.

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
pub(crate) mod resize;
pub(crate) mod rows;
#[cfg(test)]
pub(crate) mod testing;
