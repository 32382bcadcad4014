//! Loading a model: read a `.qir` file, parse and verify it in a context with
//! the driver's dialects, and read the signature of the function to run.

use crate::Driver;
use qopt_interp::InterpError;
use qopt_ir_core::{
    io_names, parse_source, type_to_string, verify, AttrData, Context, Diagnostics, Module, SourceMap,
    SourceText, Type, TypeData, RESULT_NAMES,
};
use std::path::Path;
use std::sync::Arc;

/// A parsed and verified module with the context that owns its types.
pub(crate) struct Model {
    /// The file name as given on the command line.
    pub name: String,
    pub ctx: Context,
    pub module: Module,
}

/// Why a model could not be loaded.
pub(crate) enum LoadError {
    /// A failure outside the text (unreadable file, dialect registration).
    Message(String),
    /// Parse or verification errors, with the source to show them in.
    Diagnostics(SourceMap, Diagnostics),
}

impl Model {
    /// Reads, parses and verifies `path` with `driver`'s dialects.
    pub fn load(driver: &Driver, path: &Path, allow_unregistered: bool) -> Result<Model, LoadError> {
        let name = path.display().to_string();
        let source = SourceText::read_file(path)
            .map_err(|e| LoadError::Message(format!("cannot read '{name}': {e}")))?;
        if let Some(why) = crate::not_qir_text(source.bytes()) {
            return Err(LoadError::Message(format!("'{name}': {why}")));
        }
        let mut ctx = driver
            .new_context()
            .map_err(|e| LoadError::Message(format!("registering dialects failed: {e}")))?;
        ctx.set_allow_unregistered(allow_unregistered);
        let source = Arc::new(source);
        let mut sources = SourceMap::new();
        sources.add(name.as_str().into(), source.clone());
        let module = match parse_source(&mut ctx, &source, &name) {
            Ok(m) => m,
            Err(d) => return Err(LoadError::Diagnostics(sources, d)),
        };
        if let Err(d) = verify(&mut ctx, &module) {
            return Err(LoadError::Diagnostics(sources, d));
        }
        Ok(Model { name, ctx, module })
    }

    /// The argument and result types of function `func` (`@` optional).
    pub fn signature(&self, func: &str) -> Result<Signature, String> {
        let (ctx, m) = (&self.ctx, &self.module);
        let func = func.strip_prefix('@').unwrap_or(func);
        let op = match m.lookup_symbol(ctx, func) {
            Some(op) if ctx.op_name_str(m.op_name(op)) == "func.func" => op,
            Some(_) => return Err(format!("@{func} in '{}' is not a function", self.name)),
            None => return Err(format!("no function @{func} in '{}'", self.name)),
        };
        let function_type = m.op_attr(ctx, op, "function_type").and_then(|a| match ctx.attr_data(a) {
            AttrData::Type(t) => Some(*t),
            _ => None,
        });
        match function_type.map(|t| ctx.type_data(t)) {
            Some(TypeData::Function { inputs, results }) => Ok(Signature {
                func: func.to_string(),
                args: inputs.to_vec(),
                output_names: output_names(io_names(ctx, m, op, RESULT_NAMES), results.len()),
                results: results.to_vec(),
            }),
            _ => Err(format!("@{func} in '{}' has no function type", self.name)),
        }
    }

    /// The message for a failed run: `m.qir (sample 3): at loc("fc1")
    /// ('fp.dense'): ...`, with `during` naming the samples of a `--batch` run.
    pub fn failure(&self, during: Option<String>, e: &InterpError) -> String {
        let during = during.map(|d| format!(" ({d})")).unwrap_or_default();
        let place = match (&e.location, &e.op) {
            (Some(loc), Some(op)) => format!(": at {loc} ('{op}')"),
            (None, Some(op)) => format!(": in '{op}'"),
            (Some(loc), None) => format!(": at {loc}"),
            (None, None) => String::new(),
        };
        format!("{}{during}{place}: {}", self.name, e.message)
    }

    /// `tensor<1x64xf32>`: a type as `.qir` spells it.
    pub fn type_text(&self, ty: Type) -> String {
        type_to_string(&self.ctx, ty)
    }
}

/// The types of a function's arguments and results.
pub(crate) struct Signature {
    /// The function's name, without `@`.
    pub func: String,
    pub args: Vec<Type>,
    pub results: Vec<Type>,
    /// What outputs are called in summaries and `--output` archives: the
    /// function's `result_names` (ONNX output names after qimport), else
    /// `out0`, `out1`, ...
    pub output_names: Vec<String>,
}

/// The function's result names when they can name archive members (present,
/// non-empty, distinct, no `/`), else `out0`, `out1`, ...
fn output_names(given: Option<Vec<&str>>, count: usize) -> Vec<String> {
    let usable = given.filter(|names| {
        let distinct: std::collections::HashSet<&&str> = names.iter().collect();
        names.len() == count
            && distinct.len() == count
            && names.iter().all(|n| !n.is_empty() && !n.contains('/') && n.len() <= 200)
    });
    match usable {
        Some(names) => names.into_iter().map(str::to_string).collect(),
        None => (0..count).map(|k| format!("out{k}")).collect(),
    }
}

impl Signature {
    /// `argument #1 of @main`, the start of messages about an argument.
    pub fn arg_name(&self, i: usize) -> String {
        format!("argument #{i} of @{}", self.func)
    }
}
