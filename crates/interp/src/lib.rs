//! qopt's reference interpreter: runs any function of a module whose ops have
//! kernels, on [`Tensor`]s over ndarray.
//!
//! - [`Tensor`] / [`DType`]: one variant per storage type; quantized values are
//!   their stored integers.
//! - [`KernelRegistry`]: one [`Kernel`] per op name; [`KernelRegistry::with_fp`]
//!   has every `fp` op, and downstream dialects [`KernelRegistry::register`]
//!   theirs.
//! - [`run_function`] / [`run_function_with`] (a hook per op, for calibration
//!   and per-layer comparison) and the reusable [`Interpreter`].
//!
//! The interpreter is the numeric ground truth for calibration, verification and
//! the x86 backend: float kernels follow ONNX semantics (convolution by im2col +
//! GEMM), and nothing reachable from IR or input data panics.

#![warn(missing_docs)]

mod error;
mod exec;
mod kernels;
pub mod npy;
mod registry;
mod tensor;

pub use error::InterpError;
pub use exec::{run_function, run_function_with, Interpreter, MAX_CALL_DEPTH};
pub use registry::{Kernel, KernelContext, KernelRegistry, KernelResults};
pub use tensor::{DType, Tensor};
