//! Kernels, one module per dialect (`fp`, `qnn`), one file per op family inside it.

/// Declares `kernels()`, the kernels of one op family by op name, from
/// `op_names::X => kernel` entries: the family's one table.
macro_rules! kernel_table {
    ($($name:expr => $kernel:expr),* $(,)?) => {
        /// The kernels of this family, by op name.
        pub(crate) fn kernels() -> Vec<(&'static str, Kernel)> {
            vec![$(($name, $kernel)),*]
        }
    };
}

pub(crate) mod fp;
pub(crate) mod qnn;
