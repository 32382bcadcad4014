//! qopt's x86-64 backend: quantized IR compiled to machine code, bit-exact
//! with the interpreter. Its folders follow a module's way to machine code:
//!
//! - [`lower`]: how an op becomes kernels ([`OpLowering`], [`LowerOp`],
//!   [`Plan`], [`Emit`]), the registry by op name ([`Lowerings`], found in
//!   the context so downstream lowerings reach every tool), and one file per
//!   op family; `lower/table.rs` is the one table of the built-in lowerings.
//! - `kernels/`: the building blocks lowerings assemble kernels from: the
//!   conv and dense GEMMs, im2col, Winograd, depthwise, their epilogues, the
//!   one requantizer (`kernels/requantize.rs`), the row and lane machinery
//!   of the elementwise kernels, and the parameters kernels are specialized
//!   for ([`ByteQuant`], [`kernel_multiplier_and_shift`]).
//! - `module.rs`, `arena.rs`, [`abi`]: compiling a function into a
//!   [`Program`] (plans, a liveness-planned arena, kernels in order) and the
//!   kernel calling convention.
//! - `runtime/`: running a program in this process ([`JitModule`],
//!   [`Workspace`]): W^X executable memory ([`ExecutableCode`]), guard
//!   pages ([`GuardedRegion`]), worker threads, and the clock measure.
//! - `object/`: a program as files: a relocatable ELF object with C entry
//!   points ([`write_object`]), its C header ([`c_header`]), a listing
//!   ([`listing`]), and the CPU check the entry points run first.
//! - [`Target`], [`TargetCpu`], [`CpuFeatures`] (`target.rs`): run-time
//!   detection of AVX2, FMA, AVX-512 and the VNNI extensions, and
//!   `--target-cpu=native|x86-64-v3|x86-64-v4` with a clear error when this
//!   CPU cannot run the requested target.
//!
//! **Assembler: iced-x86's `code_asm`.** It assembles at run time from plain
//! Rust calls, so registers, immediates and instruction choice are ordinary
//! values that the per-op specialization and the run-time ISA choice (AVX2 vs
//! AVX-512/VNNI) can compute; it validates every operand combination and
//! returns errors instead of panicking; and the same crate carries the
//! decoder and formatter that `--emit=asm` needs. dynasm-rs checks at Rust
//! compile time instead, which suits fixed templates but makes run-time
//! register and ISA choice awkward, and it brings a proc-macro.

#![warn(missing_docs)]

pub mod abi;
mod arena;
mod buffer;
mod error;
pub mod host;
mod kernels;
pub mod lower;
mod module;
mod object;
mod runtime;
mod target;

pub use crate::object::{check_prefix, default_prefix, write_object, ObjectOptions};
pub use buffer::{ElementType, Elements, ElementsMut};
pub use error::{CodegenError, CodegenErrorKind};
pub use kernels::quant_params::{kernel_multiplier_and_shift, ByteQuant, FixedPointMultiplier};
pub use kernels::{ConvGemmChoice, DepthwiseTaps, KernelOptions};
pub use lower::{Conv2dLowering, ConvTransposeLowering, DenseLowering};
pub use lower::{Emit, EmitResult, LowerOp, Lowerings, OpLowering, Plan};
pub use module::{
    compile, host_call_ops, KernelEntry, OpEntry, Program, QuantizedInterface, QuantizedTensor,
    TensorSignature,
};
pub use object::entry::{text_image, DataReference, DataSection, EntryFunction, EntryKind, TextImage};
pub use object::header::c_header;
pub use object::listing::{listing, AsmSyntax};
pub use runtime::clock::measure_clock_hz;
pub use runtime::executable::ExecutableCode;
pub use runtime::guard::{GuardSide, GuardedRegion};
pub use runtime::{JitModule, Workspace};
pub use target::{CpuFeatures, Target, TargetCpu};
