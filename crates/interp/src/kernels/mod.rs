//! Kernels, one module per dialect (`fp`), one file per op family inside it.

pub(crate) mod fp;
