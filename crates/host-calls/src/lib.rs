//! Host calls: ops that compiled code does not compute itself run in the
//! interpreter's own kernels, called from between the machine-code kernels.
//!
//! The x86 backend writes each such op as a one-op function `@host<N>` of a
//! small `.qir` module kept in the program's read-only data, and beside it a
//! [`HostCallDescriptor`] per op: where that text is, which function, and
//! where each operand and result buffer lives (the arena, the read-only
//! data, or a slot of the io table). A [`HostRunner`] (the module parsed in
//! a context with the ops' dialects, and a kernel registry) reads the
//! operand bytes into the interpreter's tensors, runs the function, and
//! writes the result bytes back: a buffer holds its elements exactly as the
//! interpreter's tensor of that storage type does, so nothing is converted
//! and the results are the interpreter's bits.
//!
//! In process, the JIT owns a runner. An object file written by `qcompile`
//! calls [`qopt_host_call`](c_abi::qopt_host_call), the C entry of this
//! crate's static library (`libqopt_host_calls.a`), which parses each
//! program's module once and runs the fp and qnn ops with the standard
//! kernels.
//!
//! - `descriptor.rs`: the descriptor's layout, written and read.
//! - `runner.rs`: [`HostRunner`], and buffers as tensors.
//! - `c_abi.rs`: the C entry and its per-process cache of runners.

#![warn(missing_docs)]

pub mod c_abi;
mod descriptor;
mod runner;

pub use descriptor::{HostCallDescriptor, HostPlace};
pub use runner::{tensor_bytes, tensor_from_bytes, HostRunner};
