//! The ops every module needs: `builtin.module` (printed `module`) and the `func`
//! dialect (`func.func`, `func.return`, `func.call`), so one module holds many
//! functions that call each other. [`crate::Context::new`] registers both.

use crate::attributes::AttrData;
use crate::context::{Context, OpName};
use crate::dialect::{Arity, Dialect, OpDef, OpView, Traits};
use crate::types::TypeData;

struct BuiltinDialect;

impl Dialect for BuiltinDialect {
    fn name(&self) -> &'static str {
        "builtin"
    }
    fn summary(&self) -> &'static str {
        "the module op that holds a program"
    }
    fn ops(&self) -> Vec<OpDef> {
        vec![OpDef::new("builtin.module", "a module: one block of functions and other top-level ops")
            .description(
                "The root of every `.qir` file, printed `module`. Its single region holds one block \
                 without arguments and without a terminator; symbol names (`sym_name`) of its ops are unique.\n\n\
                 ```\nmodule {\n  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n    func.return %arg0 : tensor<4xf32>\n  }\n}\n```",
            )
            .results(Arity::Exact(0))
            .regions(Arity::Exact(1))
            .traits(Traits::NO_TERMINATOR | Traits::ISOLATED_FROM_ABOVE)
            .verifier(verify_module)]
    }
}

fn verify_module(v: &OpView<'_>) -> Result<(), String> {
    let m = v.module;
    let region = m.region(v.op, 0);
    let blocks: Vec<_> = m.blocks(region).collect();
    if blocks.len() != 1 {
        return Err(format!("module must have exactly one block, found {}", blocks.len()));
    }
    if !m.block_args(blocks[0]).is_empty() {
        return Err("module block must not have arguments".into());
    }
    // Symbol uniqueness is checked by the verifier itself, which can locate
    // both definitions.
    Ok(())
}

struct FuncDialect;

impl Dialect for FuncDialect {
    fn name(&self) -> &'static str {
        "func"
    }
    fn summary(&self) -> &'static str {
        "functions, calls and returns"
    }
    fn ops(&self) -> Vec<OpDef> {
        vec![
            OpDef::new("func.func", "a function: a named region with a signature")
                .description(
                    "Attributes: `sym_name` (string), `function_type` (a function type), optional \
                     `sym_visibility = \"private\"`, optional `arg_names` and `result_names` (arrays of \
                     strings, one per argument and result: the names a frontend gave them). The body's entry block arguments have the input types; \
                     every path ends in `func.return` with the result types. An empty body is a declaration.\n\n\
                     ```\nfunc.func @relu6(%x: tensor<8xf32>) -> tensor<8xf32> {\n  %0 = fp.clip(%x) {min = 0.0 : f32, max = 6.0 : f32} : (tensor<8xf32>) -> tensor<8xf32>\n  func.return %0 : tensor<8xf32>\n}\nfunc.func private @external(tensor<8xf32>) -> tensor<8xf32>\n```",
                )
                .results(Arity::Exact(0))
                .regions(Arity::Exact(1))
                .traits(Traits::ISOLATED_FROM_ABOVE | Traits::SYMBOL)
                .verifier(verify_func),
            OpDef::new("func.return", "returns values from a function")
                .description("Terminates a `func.func` body; operand types equal the function's result types.\n\n```\nfunc.return %0, %1 : tensor<4xf32>, tensor<4xi8>\n```")
                .operands(Arity::AtLeast(0))
                .results(Arity::Exact(0))
                .traits(Traits::TERMINATOR | Traits::PURE)
                .verifier(verify_return),
            OpDef::new("func.call", "calls a function of the module")
                .description("`callee` names a `func.func` of the module; operand and result types match its signature.\n\n```\n%0 = func.call @relu6(%x) : (tensor<8xf32>) -> tensor<8xf32>\n```")
                .operands(Arity::AtLeast(0))
                .results(Arity::AtLeast(0))
                .verifier(verify_call),
        ]
    }
}

/// Optional attribute of a `func.func`: the names of its arguments, one
/// string per argument (`qimport` writes the ONNX graph's input names).
pub const ARG_NAMES: &str = "arg_names";
/// Optional attribute of a `func.func`: the names of its results, one string
/// per result (`qimport` writes the ONNX graph's output names; `qrun` names
/// its outputs by them).
pub const RESULT_NAMES: &str = "result_names";

/// The names `func` gives its arguments ([`ARG_NAMES`]) or results
/// ([`RESULT_NAMES`]), when it has that attribute as an array of strings.
pub fn io_names<'c>(
    ctx: &'c Context,
    module: &crate::Module,
    func: crate::OpId,
    key: &str,
) -> Option<Vec<&'c str>> {
    let items = ctx.attr_as_array(module.op_attr(ctx, func, key)?)?;
    items.iter().map(|&a| ctx.attr_as_str(a)).collect()
}

/// `(inputs, results)` of a `func.func`'s `function_type`, or an error message.
pub fn function_signature<'c>(v: &OpView<'c>) -> Result<(&'c [crate::Type], &'c [crate::Type]), String> {
    let ty = v.attr("function_type").ok_or("func.func needs a 'function_type' attribute")?;
    let AttrData::Type(t) = v.ctx.attr_data(ty) else {
        return Err("'function_type' must be a type attribute".into());
    };
    match v.ctx.type_data(*t) {
        TypeData::Function { inputs, results } => Ok((inputs, results)),
        _ => Err("'function_type' must be a function type".into()),
    }
}

fn verify_func(v: &OpView<'_>) -> Result<(), String> {
    let name = v.attr("sym_name").ok_or("func.func needs a 'sym_name' string attribute")?;
    if v.ctx.attr_as_str(name).is_none() {
        return Err("'sym_name' must be a string".into());
    }
    if let Some(vis) = v.attr("sym_visibility") {
        match v.ctx.attr_as_str(vis) {
            Some("private" | "public" | "nested") => {}
            _ => return Err("'sym_visibility' must be \"public\", \"private\" or \"nested\"".into()),
        }
    }
    let (inputs, results) = function_signature(v)?;
    for (key, count, what) in [(ARG_NAMES, inputs.len(), "argument"), (RESULT_NAMES, results.len(), "result")]
    {
        let Some(names) = v.attr(key) else { continue };
        let strings =
            v.ctx.attr_as_array(names).filter(|items| items.iter().all(|&a| v.ctx.attr_as_str(a).is_some()));
        match strings {
            Some(items) if items.len() == count => {}
            _ => return Err(format!("'{key}' must be an array of {count} strings, one per {what}")),
        }
    }
    let m = v.module;
    let region = m.region(v.op, 0);
    let entry = m.first_block(region);
    if entry.is_none() {
        return Ok(());
    }
    if m.blocks(region).count() != 1 {
        return Err("function bodies have exactly one block".into());
    }
    let last = m.last_op(entry);
    if last.is_none() || m.op_name(last) != OpName::RETURN {
        return Err("function body must end with 'func.return'".into());
    }
    let args = m.block_args(entry);
    if args.len() != inputs.len() {
        return Err(format!(
            "entry block has {} arguments but the signature has {} inputs",
            args.len(),
            inputs.len()
        ));
    }
    for (i, (&a, &t)) in args.iter().zip(inputs).enumerate() {
        if m.value_type(a) != t {
            return Err(format!("type of entry block argument #{i} does not match the signature"));
        }
    }
    Ok(())
}

fn verify_return(v: &OpView<'_>) -> Result<(), String> {
    let parent = v.module.parent_op(v.op);
    if parent.is_none() || v.module.op_name(parent) != OpName::FUNC {
        return Err("'func.return' must be inside a 'func.func'".into());
    }
    let (_, results) = function_signature(&OpView { op: parent, ..*v })?;
    let got = v.operand_types();
    if got.len() != results.len() {
        return Err(format!("returns {} values but the function has {} results", got.len(), results.len()));
    }
    for (i, (a, b)) in got.iter().zip(results).enumerate() {
        if a != b {
            return Err(format!("type of return operand #{i} does not match the function's result type"));
        }
    }
    Ok(())
}

fn verify_call(v: &OpView<'_>) -> Result<(), String> {
    let callee = v.attr("callee").ok_or("func.call needs a 'callee' symbol reference")?;
    let AttrData::SymbolRef(sym) = v.ctx.attr_data(callee) else {
        return Err("'callee' must be a symbol reference like @name".into());
    };
    let name = v.ctx.symbol_str(*sym);
    let target = v.lookup_symbol(name).ok_or_else(|| format!("no function named '@{name}' in the module"))?;
    if v.module.op_name(target) != OpName::FUNC {
        return Err(format!("'@{name}' is not a function"));
    }
    let (inputs, results) = function_signature(&OpView { op: target, ..*v })?;
    if v.operand_types().as_slice() != inputs || v.result_types().as_slice() != results {
        return Err(format!("call operand or result types do not match the signature of '@{name}'"));
    }
    Ok(())
}

pub(crate) fn register_builtin_dialects(ctx: &mut Context) {
    // invariant: a fresh context has neither dialect, so registration cannot fail.
    let _ = ctx.register_dialect(BuiltinDialect);
    let _ = ctx.register_dialect(FuncDialect);
}
