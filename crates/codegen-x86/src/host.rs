//! Host calls: ops that have no x86 lowering (or that their lowering
//! refuses) run in the interpreter's own kernel between machine-code
//! kernels, so that one such op does not keep the rest of a model from
//! compiling, and its results are the interpreter's bits by construction.
//!
//! The compiler writes each such op as a one-op function `@host<N>` of a
//! small module ([`Program::host_module`], `.qir` text) whose arguments are
//! the op's operands and whose results are the op's results, and puts that
//! text and one `qopt_host_calls::HostCallDescriptor` per op (where each
//! buffer lives) into the program's read-only data. The JIT runs them with
//! its [`HostRunner`]; an object file calls `qopt_host_call` of the
//! `qopt-host-calls` static library with the same descriptor. This file
//! holds what the compiler records ([`HostOp`]) and writes.
//!
//! [`Program::host_module`]: crate::Program::host_module

use crate::abi::Place;
use crate::lower::describe_location;
use crate::module::TensorSignature;
use qopt_host_calls::HostPlace;
pub use qopt_host_calls::{tensor_bytes, HostRunner};
use qopt_ir_core::{attr_to_string, type_to_string, Context, Module, OpId};

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
    /// Offset of its `HostCallDescriptor` in the program's read-only data.
    pub descriptor: usize,
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

/// The descriptor's form of a place.
pub(crate) fn host_place(place: Place) -> HostPlace {
    match place {
        Place::Arena(offset) => HostPlace::Arena(offset),
        Place::Rodata(offset) => HostPlace::Rodata(offset),
        Place::Io(slot) => HostPlace::Io(slot),
    }
}
