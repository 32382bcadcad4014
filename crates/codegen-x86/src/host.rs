//! Host calls: ops that have no x86 lowering (or that their lowering
//! refuses) run in the interpreter's own kernel between machine-code
//! kernels, so that one such op does not keep the rest of a model from
//! compiling, and its results are the interpreter's bits by construction.
//!
//! The compiler writes each such op as a one-op function `@host<N>` of a
//! small module ([`Program::host_module`], `.qir` text) whose arguments are
//! the op's operands and whose results are the op's results, and records
//! where each of those buffers lives ([`HostOp`]). At run time a
//! [`HostRunner`] (the module parsed in a context with the op's dialects,
//! and a kernel registry) reads the operand bytes into the interpreter's
//! tensors, runs the function, and writes the result bytes back: a buffer
//! holds its elements exactly as the interpreter's tensor of that storage
//! type does (`buffer.rs`), so nothing is converted.
//!
//! [`Program::host_module`]: crate::Program::host_module

use crate::abi::Place;
use crate::buffer::ElementType;
use crate::lower::describe_location;
use crate::module::TensorSignature;
use qopt_interp::{InterpError, KernelRegistry, Tensor};
use qopt_ir_core::{attr_to_string, parse_module, type_to_string, Context, Module, OpId};

/// One op run by a host call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostOp {
    /// Its function in [`Program::host_module`](crate::Program::host_module).
    pub function: String,
    /// Where each operand is, in order.
    pub operands: Vec<HostBuffer>,
    /// Where each result goes, in order.
    pub results: Vec<HostBuffer>,
    /// The op's name and location (`fp.softmax at line 3:5 loc("prob")`).
    pub describe: String,
    /// Why it is not compiled (its lowering's refusal, or that it has none).
    pub reason: String,
}

/// A buffer a host call reads or writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostBuffer {
    /// Where it lives while the program runs.
    pub place: Place,
    /// Its element type and shape.
    pub signature: TensorSignature,
}

/// The `.qir` text of a module with one function `@host<i>` per op of
/// `ops` (of `module`), each taking the op's operands and returning its
/// results, the op written in the generic form.
pub(crate) fn host_module_text(ctx: &Context, module: &Module, ops: &[OpId]) -> String {
    let mut text = String::from("module {\n");
    for (i, &op) in ops.iter().enumerate() {
        let types = |values: &mut dyn Iterator<Item = qopt_ir_core::ValueId>| -> Vec<String> {
            values.map(|v| type_to_string(ctx, module.value_type(v))).collect()
        };
        let operand_types = types(&mut module.operands(op));
        let result_types = types(&mut module.results(op));
        let args: Vec<String> =
            operand_types.iter().enumerate().map(|(k, t)| format!("%a{k}: {t}")).collect();
        let uses: Vec<String> = (0..operand_types.len()).map(|k| format!("%a{k}")).collect();
        let (defs, returned) = match result_types.len() {
            0 => (String::new(), String::new()),
            1 => ("%r = ".to_string(), "%r".to_string()),
            n => (format!("%r:{n} = "), (0..n).map(|j| format!("%r#{j}")).collect::<Vec<_>>().join(", ")),
        };
        let results = format!("({})", result_types.join(", "));
        let ret = if returned.is_empty() {
            "func.return".to_string()
        } else {
            format!("func.return {returned} : {}", result_types.join(", "))
        };
        text.push_str(&format!(
            "  func.func @host{i}({}) -> {results} {{\n    {defs}{}({}) {} : ({}) -> {results}\n    {ret}\n  }}\n",
            args.join(", "),
            ctx.op_name_str(module.op_name(op)),
            uses.join(", "),
            attr_to_string(ctx, module.op_attrs(op)),
            operand_types.join(", "),
        ));
    }
    text.push_str("}\n");
    text
}

/// `fp.softmax at line 3:5 loc("prob")`.
pub(crate) fn describe_op(ctx: &Context, module: &Module, op: OpId) -> String {
    format!("{} at {}", ctx.op_name_str(module.op_name(op)), describe_location(ctx, module, op))
}

/// The bytes a buffer of `t`'s storage type holds for it (row-major).
pub fn tensor_bytes(t: &Tensor) -> Vec<u8> {
    t.to_raw().data
}

/// The tensor of `signature` whose buffer holds `bytes` (booleans are any
/// non-zero byte).
pub fn tensor_from_bytes(signature: &TensorSignature, bytes: &[u8]) -> Result<Tensor, InterpError> {
    let raw = qopt_npy::RawArray {
        dtype: signature.element.dtype(),
        shape: signature.shape.clone(),
        data: if signature.element == ElementType::Bool {
            bytes.iter().map(|&b| u8::from(b != 0)).collect()
        } else {
            bytes.to_vec()
        },
    };
    Tensor::from_raw(&raw)
}

/// The ops of a program that run by host calls, parsed and ready to run.
pub struct HostRunner {
    ctx: Context,
    module: Module,
    kernels: KernelRegistry,
}

impl std::fmt::Debug for HostRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostRunner").finish_non_exhaustive()
    }
}

impl HostRunner {
    /// Parses `text` (a program's host module) in `ctx`, which must have the
    /// dialects of its ops, to run with `kernels`.
    pub fn new(mut ctx: Context, text: &str, kernels: KernelRegistry) -> Result<HostRunner, String> {
        let module = parse_module(&mut ctx, text.as_bytes(), "host-calls.qir")
            .map_err(|e| format!("the host-call module does not parse: {e:?}"))?;
        qopt_ir_core::verify(&mut ctx, &module)
            .map_err(|e| format!("the host-call module does not verify: {e:?}"))?;
        Ok(HostRunner { ctx, module, kernels })
    }

    /// Runs `op` on the buffers of one run: each place resolved against
    /// `arena`, `rodata` and the io table `io`.
    ///
    /// # Safety
    /// Every place of `op` must address a buffer of its signature's size
    /// within `arena`, `rodata` or the io table's buffers, the result
    /// buffers writable and overlapping no operand, and no other thread may
    /// touch them during the call.
    pub unsafe fn run(
        &self,
        op: &HostOp,
        (arena, rodata, io): (*mut u8, *const u8, &[*mut u8]),
    ) -> Result<(), String> {
        let address = |place: Place| -> *mut u8 {
            // SAFETY: the caller guarantees that the place is inside these bases.
            unsafe {
                match place {
                    Place::Arena(offset) => arena.add(offset),
                    Place::Rodata(offset) => rodata.add(offset).cast_mut(),
                    Place::Io(slot) => io[slot],
                }
            }
        };
        let mut inputs = Vec::with_capacity(op.operands.len());
        for buffer in &op.operands {
            let len = buffer.signature.bytes();
            // SAFETY: the caller guarantees `len` readable bytes at the place.
            let bytes = unsafe { std::slice::from_raw_parts(address(buffer.place), len) };
            inputs.push(tensor_from_bytes(&buffer.signature, bytes).map_err(|e| e.to_string())?);
        }
        let outputs =
            qopt_interp::run_function(&self.ctx, &self.module, &op.function, &inputs, &self.kernels)
                .map_err(|e| format!("{}: {e}", op.describe))?;
        for (buffer, t) in op.results.iter().zip(&outputs) {
            let bytes = tensor_bytes(t);
            if bytes.len() != buffer.signature.bytes() {
                return Err(format!(
                    "{}: the interpreter's result has {} bytes where {} ({}) were planned",
                    op.describe,
                    bytes.len(),
                    buffer.signature.bytes(),
                    buffer.signature.type_text
                ));
            }
            // SAFETY: the caller guarantees a writable buffer of this size
            // at the place, overlapping no operand.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), address(buffer.place), bytes.len()) };
        }
        Ok(())
    }
}
