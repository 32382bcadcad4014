//! Kernels, one module per dialect (`fp`, `qnn`), one file per op family inside it.

pub(crate) mod fp;
pub(crate) mod qnn;
