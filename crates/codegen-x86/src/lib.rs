//! qopt's x86-64 backend (issue 12): quantized IR compiled to machine code,
//! bit-exact with the interpreter.
//!
//! - [`Target`], [`TargetCpu`], [`CpuFeatures`] (`target.rs`): run-time
//!   detection of AVX2, FMA, AVX-512 and the VNNI extensions, and
//!   `--target-cpu=native|x86-64-v3|x86-64-v4` with a clear error when this
//!   CPU cannot run the requested target.
//! - [`ExecutableCode`] (`jit.rs`): W^X executable memory, written while
//!   read + write, then switched to read + execute, unmapped on drop.
//! - [`ConvertKernel`] (`convert.rs`): JIT-compiled `qnn.quantize`,
//!   `qnn.dequantize` and `qnn.requantize` on per-tensor 8-bit types,
//!   specialized per op and bit-exact with the interpreter; `emit.rs` holds
//!   the loop every elementwise kernel shares.
//! - [`Conv2dLowering`], [`DenseLowering`] (`kernels/`): `qnn.conv2d`,
//!   `qnn.dense` and their relu forms, specialized per layer (weights packed
//!   into rodata, requantization fused into the GEMM epilogue) with
//!   `vpmaddwd` (exact for any weights), `vpmaddubsw` (where the weights
//!   prove it cannot saturate) or `vpdpbusd` (VNNI targets); [`KernelOptions`]
//!   may forbid the byte schemes.
//! - `kernels/`: the kernels of the built-in lowerings beyond conversions:
//!   `qnn.requantize` (per tensor or per axis), `qnn.add` / `qnn.mul` with
//!   broadcasting, `qnn.concat`, the average pools, `qnn.lookup`, and
//!   quantized max pooling, transpose, slices, split, concat, pad and relu,
//!   all in the row nest of `kernels/rows.rs`, the integer ones sharing the
//!   rescaling of `kernels/rescale.rs`.
//!
//! **Assembler: iced-x86's `code_asm`.** It assembles at run time from plain
//! Rust calls, so registers, immediates and instruction choice are ordinary
//! values that the per-op specialization and the run-time ISA choice (AVX2 vs
//! AVX-512/VNNI) can compute; it validates every operand combination and
//! returns errors instead of panicking; and the same crate carries the
//! decoder and formatter that `--emit=asm` will need. dynasm-rs checks at
//! Rust compile time instead, which suits fixed templates but makes
//! run-time register and ISA choice awkward, and it brings a proc-macro.
//!
//! Outputs of a compiled [`Program`] besides the JIT ([`JitModule`]):
//! - [`write_object`] (`object.rs`): a relocatable x86-64 ELF object with C
//!   entry points (`entry.rs` builds their stubs), and [`c_header`]
//!   (`header.rs`) its header;
//! - [`listing`] (`listing.rs`): a readable assembly listing.
//!

#![warn(missing_docs)]

pub mod abi;
mod arena;
mod buffer;
mod error;
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
pub use lower::convert::{ConvertKernel, ConvertSpec};
pub use lower::{Conv2dLowering, DenseLowering};
pub use lower::{Emit, LowerOp, Lowerings, OpLowering, Plan};
pub use module::{
    compile, KernelEntry, OpEntry, Program, QuantizedInterface, QuantizedTensor, TensorSignature,
};
pub use object::entry::{text_image, DataReference, DataSection, EntryFunction, EntryKind, TextImage};
pub use object::header::c_header;
pub use object::listing::{listing, AsmSyntax};
pub use runtime::clock::measure_clock_hz;
pub use runtime::executable::ExecutableCode;
pub use runtime::guard::{GuardSide, GuardedRegion};
pub use runtime::{JitModule, Workspace};
pub use target::{CpuFeatures, Target, TargetCpu};
