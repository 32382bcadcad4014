//! The kernels of the built-in lowerings, one module per kind of kernel.

pub(crate) mod copy;
