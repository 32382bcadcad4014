//! qopt's reference interpreter: runs any function of a module whose ops have
//! kernels, on [`Tensor`]s over ndarray.
//!
//! - [`Tensor`] / [`DType`]: one variant per storage type; quantized values are
//!   their stored integers.
//! - [`KernelRegistry`]: one [`Kernel`] per op name; [`KernelRegistry::standard`]
//!   has every `fp` and `qnn` op ([`KernelRegistry::with_fp`] only the `fp`
//!   ones), and downstream dialects [`KernelRegistry::register`] theirs. A
//!   kernel reads attributes, operand types and result types through its
//!   [`KernelContext`].
//! - [`QuantConv2d`]: the quantized convolution of `qnn.conv2d` with explicit
//!   parameters, for kernels of downstream ops that compute it.
//! - [`dequantize_tensor`]: stored integers to real values exactly as
//!   `qnn.dequantize` computes them (calibration records quantized values so).
//! - [`run_function`] / [`run_function_with`] (a hook per op, for calibration
//!   and per-layer comparison) and the reusable [`Interpreter`], whose
//!   [`Interpreter::run_observed`] also reports each call's arguments
//!   ([`RunObserver`], for `collect-calibration-data`).
//! - [`random_arguments`]: deterministic random arguments for a function
//!   (`qrun --random-inputs`, `qopt --verify-numerics`), from [`qopt_ir_core::SplitMix64`].
//!
//! The interpreter is the numeric ground truth for calibration, verification and
//! the x86 backend: float kernels follow ONNX semantics (convolution by im2col +
//! GEMM); `qnn` kernels are bit-exact to `docs/quant-semantics.md` (integer
//! convolution and dense by im2col + an exact GEMM), calling the rules
//! implemented in `qopt-dialect-qnn`. Nothing reachable from IR or input data
//! panics.

#![warn(missing_docs)]

mod error;
mod exec;
mod gemm;
mod kernels;
pub mod progress;
mod random_inputs;
mod registry;
mod simd;
mod tensor;

pub use error::InterpError;
pub use exec::{run_function, run_function_with, Interpreter, RunObserver, MAX_CALL_DEPTH, MAX_ELEMENTS};
pub use kernels::qnn::{dequantize_tensor, QuantConv2d, Relu};
pub use random_inputs::{
    check_random_arguments, random_arguments, IntegerValues, RandomInputError, RandomInputs, SMALL_INTEGERS,
};
pub use registry::{Kernel, KernelContext, KernelRegistry, KernelResults};
pub use tensor::{DType, Tensor};
