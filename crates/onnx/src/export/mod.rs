//! ONNX export: one function of a verified module becomes an ONNX model, the
//! inverse of the importer.
//!
//! - Float ops (`fp`) become the ONNX ops the importer makes them from
//!   ([`fp`]), located ops as named nodes, constants as initializers.
//! - Quantized ops become QDQ (`QuantizeLinear` / `DequantizeLinear` around
//!   float ops, [`qdq`]) or, with [`ExportFormat::QOperator`], ONNX's and ONNX
//!   Runtime's integer ops (`QLinearConv`, `QGemm`, `QLinearAdd`, …,
//!   [`qoperator`]) where one exists for the op and its types, QDQ otherwise.
//! - Quant-agnostic fp ops on quantized tensors run on the stored integers
//!   where ONNX moves them the same way, or as dequantize → op → quantize
//!   (exact: their results lie on the input's grid).
//!
//! The walk is one loop over the function's ops in order; every problem
//! (an op without an export, a type ONNX cannot express, a rounding mode
//! ONNX cannot express, an opset conflict) is collected with its op and
//! reported at once in [`ExportError::Problems`]. A failed op's results get
//! placeholder names so the ops after it are still checked. The written bytes
//! are then imported again with [`crate::import_model`], whose structural
//! rules (topological order, defined values, op and attribute support,
//! types by the dialects' inference) the model must pass, and the imported
//! signature must equal the function's ([`ExportError::Check`] otherwise).
//! `docs/onnx-export.md` is the user's page.

mod fp;
mod graph;
mod ort;
mod proto_write;
mod qdq;
mod qoperator;
mod types;

use crate::onnx::data_type as dt;
use graph::{AttrValue, GraphValue, Initializer, Names, Node, OnnxModel, MICROSOFT_DOMAIN};
use qopt_dialect_qnn::quant_params::quant_element;
use qopt_ir_core::{
    type_to_string, AttrData, Attribute, BlockId, Context, FxHashMap, LocationData, Module, OpId, QuantType,
    SrcPos, Type, TypeData, ValueId,
};
use std::fmt;
use std::sync::Arc;

/// How quantized ops are written.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum ExportFormat {
    /// QDQ, except the conv and dense layers whose QDQ form ONNX Runtime's
    /// u8 × s8 kernels could saturate on x86 without VNNI: those as
    /// QLinear ops (exact s8 × s8 kernels) where their types allow (the
    /// default; see `ort.rs`).
    #[default]
    Auto,
    /// `QuantizeLinear` / `DequantizeLinear` around float ops.
    Qdq,
    /// ONNX's and ONNX Runtime's integer ops where they exist, QDQ elsewhere.
    QOperator,
}

/// The standard opsets the exporter writes: from 17 (the ops' forms it
/// uses, such as `LayerNormalization`) to the newest the importer reads.
pub const EXPORT_OPSETS: std::ops::RangeInclusive<i64> = 17..=*crate::SUPPORTED_OPSETS.end();

/// What to export and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// QDQ or QOperator.
    pub format: ExportFormat,
    /// The function to export (`@` optional).
    pub function: String,
    /// The standard opset; `None` picks the lowest that expresses the
    /// function, at least 17 (`Gelu` needs 20, 4- and 16-bit quantization
    /// 21, SpaceToDepth's CRD mode 28).
    pub opset: Option<i64>,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions { format: ExportFormat::Auto, function: "main".into(), opset: None }
    }
}

/// A written model.
#[derive(Clone, Debug)]
pub struct Exported {
    /// The `.onnx` file's bytes.
    pub bytes: Vec<u8>,
    /// The standard opset it imports.
    pub opset: i64,
    /// Its node count.
    pub nodes: usize,
    /// Its initializer count.
    pub initializers: usize,
    /// Its nodes' op types in order, with the domain (`com.microsoft.QGemm`)
    /// outside the standard one: for summaries and tests.
    pub op_types: Vec<String>,
    /// The quantized conv and dense layers (`qnn.conv2d`, `qnn.dense` and
    /// their relu forms).
    pub layers: usize,
    /// Those written as QLinear ops (`QLinearConv`, `QGemm`, `QLinearMatMul`).
    pub integer_layers: usize,
    /// The location names (or op names) of the layers ONNX Runtime runs on
    /// its u8 × s8 kernels with weights that may saturate them on x86 CPUs
    /// without VNNI: where its default session can differ from qrun by
    /// more than one output step. Empty when it computes every layer as
    /// qopt does, up to rounding near ties.
    pub u8_s8_saturating: Vec<String>,
}

/// One thing the export cannot write, at an op (or at the function for its
/// arguments and results).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportProblem {
    /// The op's name (`qnn.conv2d`), or `func.func` / `func.return`.
    pub op_name: String,
    /// The op's location names (`conv1`), empty if it has none.
    pub location: String,
    /// Where the op was in the parsed text (line 0 if it was not parsed).
    pub pos: SrcPos,
    /// What is wrong, lower case.
    pub message: String,
}

/// A failed export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExportError {
    /// The module has no function of that name.
    NoFunction(String),
    /// The opset is outside [`EXPORT_OPSETS`].
    Opset(i64),
    /// Everything the function holds that ONNX cannot express, at once.
    Problems(Vec<ExportProblem>),
    /// The written model fails the importer's checks or imports to another
    /// signature (an exporter bug, reported rather than written).
    Check(String),
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::NoFunction(name) => write!(f, "no function @{name} in the module"),
            ExportError::Opset(n) => write!(
                f,
                "opset {n} is not supported (qexport writes opsets {} to {})",
                EXPORT_OPSETS.start(),
                EXPORT_OPSETS.end()
            ),
            ExportError::Problems(problems) => {
                write!(f, "{}", problems_heading(problems))?;
                for p in problems {
                    write!(f, "\n  {}", p.describe())?;
                }
                Ok(())
            }
            ExportError::Check(message) => {
                write!(f, "the exported model fails the importer's checks, so it was not written: {message}")
            }
        }
    }
}

impl std::error::Error for ExportError {}

/// `3 ops cannot be exported to ONNX`: the first line of a problem report.
pub fn problems_heading(problems: &[ExportProblem]) -> String {
    let mut ops: Vec<(u32, u32, &str, &str)> =
        problems.iter().map(|p| (p.pos.line, p.pos.col, p.op_name.as_str(), p.location.as_str())).collect();
    ops.dedup();
    let noun = if ops.len() == 1 { "op" } else { "ops" };
    format!("{} {noun} cannot be exported to ONNX:", ops.len())
}

impl ExportProblem {
    /// `'conv1' (qnn.conv2d): message`.
    pub fn describe(&self) -> String {
        if self.location.is_empty() {
            format!("{}: {}", self.op_name, self.message)
        } else {
            format!("'{}' ({}): {}", self.location, self.op_name, self.message)
        }
    }
}

/// Exports function `options.function` of the verified `module`.
pub fn export_module(
    ctx: &Context,
    module: &Module,
    options: &ExportOptions,
) -> Result<Exported, ExportError> {
    if let Some(n) = options.opset.filter(|n| !EXPORT_OPSETS.contains(n)) {
        return Err(ExportError::Opset(n));
    }
    let name = options.function.strip_prefix('@').unwrap_or(&options.function);
    let func = module
        .lookup_symbol(ctx, name)
        .filter(|&op| ctx.op_name_str(module.op_name(op)) == "func.func" && module.num_regions(op) == 1)
        .ok_or_else(|| ExportError::NoFunction(name.to_string()))?;
    let region = module.region(func, 0);
    let Some(block) = module.blocks(region).next() else {
        return Err(ExportError::NoFunction(name.to_string()));
    };
    let mut problems = Vec::new();
    let required = types::required_opset(ctx, module, block);
    let opset = match options.opset {
        Some(given) => {
            for (op, need, why) in required.iter().filter(|(_, need, _)| *need > given) {
                problems.push(problem_at(ctx, module, *op, format!("{why} needs opset {need}, not {given}")));
            }
            given
        }
        None => required.iter().map(|(_, need, _)| *need).fold(*EXPORT_OPSETS.start(), i64::max),
    };
    let mut ex = Exporter::new(ctx, module, options.format, opset, name);
    ex.problems = problems;
    ex.export_block(func, block);
    if !ex.problems.is_empty() {
        return Err(ExportError::Problems(ex.problems));
    }
    let model = std::mem::take(&mut ex.model);
    let bytes = model.encode();
    check_reimport(ctx, module, func, &bytes)?;
    let op_types =
        model
            .nodes
            .iter()
            .map(|n| {
                if n.domain.is_empty() {
                    n.op_type.to_string()
                } else {
                    format!("{}.{}", n.domain, n.op_type)
                }
            })
            .collect();
    Ok(Exported {
        bytes,
        opset,
        nodes: model.nodes.len(),
        initializers: model.initializers.len(),
        op_types,
        layers: ex.layers,
        integer_layers: ex.integer_layers,
        u8_s8_saturating: ex.u8_s8_saturating,
    })
}

/// Imports `bytes` again and compares the signature with `func`'s.
fn check_reimport(ctx: &Context, module: &Module, func: OpId, bytes: &[u8]) -> Result<(), ExportError> {
    let mut check_ctx = Context::new();
    let imported = crate::import_model(&mut check_ctx, bytes, &crate::ImportOptions::default())
        .map_err(|e| ExportError::Check(e.to_string()))?;
    let signature = |ctx: &Context, module: &Module, func: OpId| -> String {
        let block = module.first_block(module.region(func, 0));
        let args: Vec<String> =
            module.block_args(block).iter().map(|&a| type_to_string(ctx, module.value_type(a))).collect();
        let ret = module.last_op(block);
        let results: Vec<String> =
            module.operands(ret).map(|v| type_to_string(ctx, module.value_type(v))).collect();
        format!("({}) -> ({})", args.join(", "), results.join(", "))
    };
    let Some(main) = imported.lookup_symbol(&check_ctx, "main") else {
        return Err(ExportError::Check("the imported model has no @main".into()));
    };
    let (want, got) = (signature(ctx, module, func), signature(&check_ctx, &imported, main));
    if want != got {
        return Err(ExportError::Check(format!("the function is {want} but the model imports as {got}")));
    }
    Ok(())
}

/// The location of `op` as names: a name location's name, every name of a
/// fused one (in order), `file:line:col` for a file position.
pub(crate) fn location_names(ctx: &Context, loc: qopt_ir_core::Location) -> Vec<String> {
    let mut names = Vec::new();
    let mut pending = vec![loc];
    while let Some(loc) = pending.pop() {
        match ctx.loc_data(loc) {
            LocationData::Unknown => {}
            LocationData::Name { name, .. } => names.push(ctx.symbol_str(*name).to_string()),
            LocationData::FileLineCol { file, line, col } => {
                names.push(format!("{}:{line}:{col}", ctx.symbol_str(*file)))
            }
            LocationData::Fused(locs) => pending.extend(locs.iter().rev()),
        }
    }
    names
}

fn problem_at(ctx: &Context, module: &Module, op: OpId, message: String) -> ExportProblem {
    ExportProblem {
        op_name: ctx.op_name_str(module.op_name(op)).to_string(),
        location: location_names(ctx, module.op_loc(op)).join(", "),
        pos: module.op_pos(op),
        message,
    }
}

/// The ONNX names of one quantized type's parameters.
#[derive(Clone, Debug)]
pub(crate) struct ParamNames {
    pub scale: String,
    pub zero_point: String,
    /// The `axis` attribute of Q/DQ for a per-axis type.
    pub axis: Option<i64>,
}

/// The state of one export.
pub(crate) struct Exporter<'a> {
    ctx: &'a Context,
    module: &'a Module,
    format: ExportFormat,
    opset: i64,
    model: OnnxModel,
    value_names: Names,
    node_names: Names,
    /// An identity op's result stands for its operand.
    alias: FxHashMap<ValueId, ValueId>,
    /// The tensor holding each value as it is (stored integers for quantized values).
    stored: FxHashMap<ValueId, String>,
    /// The dequantized tensor of a quantized value, once made.
    dequantized: FxHashMap<ValueId, String>,
    /// The scale and zero point initializers of each quantized element type.
    params: FxHashMap<Type, ParamNames>,
    /// The name each graph output is to have, taken when the walk starts.
    result_names: Vec<Option<String>>,
    /// See [`Exported::layers`], [`Exported::integer_layers`], [`Exported::u8_s8_saturating`].
    layers: usize,
    integer_layers: usize,
    u8_s8_saturating: Vec<String>,
    problems: Vec<ExportProblem>,
}

impl<'a> Exporter<'a> {
    fn new(ctx: &'a Context, module: &'a Module, format: ExportFormat, opset: i64, graph_name: &str) -> Self {
        Exporter {
            ctx,
            module,
            format,
            opset,
            model: OnnxModel { graph_name: graph_name.to_string(), opset, ..OnnxModel::default() },
            value_names: Names::default(),
            node_names: Names::default(),
            alias: FxHashMap::default(),
            stored: FxHashMap::default(),
            dequantized: FxHashMap::default(),
            params: FxHashMap::default(),
            result_names: Vec::new(),
            layers: 0,
            integer_layers: 0,
            u8_s8_saturating: Vec::new(),
            problems: Vec::new(),
        }
    }

    fn problem(&mut self, op: OpId, message: String) {
        self.problems.push(problem_at(self.ctx, self.module, op, message));
    }

    /// The function's arguments become graph inputs, its ops nodes, its
    /// returned values graph outputs.
    ///
    /// Graph inputs and outputs keep the names the function gives them
    /// (`arg_names`, `result_names`: qimport records the ONNX model's), so a
    /// program feeding the model by name feeds the export too; a name
    /// missing, empty or given twice falls back to `arg0`, … and the
    /// returned value's own name.
    fn export_block(&mut self, func: OpId, block: BlockId) {
        let (ctx, module) = (self.ctx, self.module);
        let io_names = |key| {
            let n = if key == qopt_ir_core::ARG_NAMES {
                module.block_args(block).len()
            } else {
                module.num_operands(module.last_op(block))
            };
            qopt_ir_core::io_names(ctx, module, func, key)
                .filter(|names| names.len() == n)
                .unwrap_or_default()
        };
        let arg_names = io_names(qopt_ir_core::ARG_NAMES);
        // Taken before any op names a value, so that none takes them.
        self.result_names = io_names(qopt_ir_core::RESULT_NAMES)
            .into_iter()
            .map(|name| if arg_names.contains(&name) { None } else { self.value_names.exact(name) })
            .collect();
        for (i, &arg) in module.block_args(block).iter().enumerate() {
            let ty = module.value_type(arg);
            let given = arg_names.get(i).and_then(|name| self.value_names.exact(name));
            let name = given.unwrap_or_else(|| self.value_names.fresh(&format!("arg{i}")));
            match types::graph_value(ctx, ty) {
                Ok((data_type, dims)) => {
                    self.model.inputs.push(GraphValue { name: name.clone(), data_type, dims });
                }
                Err(e) => {
                    let mut problem = problem_at(ctx, module, func, format!("argument #{i}: {e}"));
                    problem.location = format!("@{}", self.model.graph_name);
                    self.problems.push(problem);
                }
            }
            self.stored.insert(arg, name);
        }
        for op in module.block_ops(block) {
            let name = ctx.op_name_str(module.op_name(op));
            if name == "func.return" {
                self.export_return(op);
                continue;
            }
            let problems_before = self.problems.len();
            for message in types::check_op(ctx, module, op) {
                self.problem(op, message);
            }
            if self.problems.len() == problems_before {
                if let Err(message) = self.export_op(op) {
                    self.problem(op, message);
                }
            }
            if self.problems.len() > problems_before {
                self.bind_placeholders(op);
            }
        }
    }

    /// Gives every result of a failed op a name, so later ops still export
    /// (and report their own problems).
    fn bind_placeholders(&mut self, op: OpId) {
        for v in self.module.results(op) {
            if !self.stored.contains_key(&v) && !self.alias.contains_key(&v) {
                let name = self.value_names.fresh("unexported");
                self.stored.insert(v, name);
            }
        }
    }

    fn export_op(&mut self, op: OpId) -> Result<(), String> {
        let name = self.ctx.op_name_str(self.module.op_name(op));
        if name == qopt_dialect_fp::op_names::CONSTANT {
            // An initializer, made where an op first reads it.
            return Ok(());
        }
        let base = match location_names(self.ctx, self.module.op_loc(op)).into_iter().next() {
            Some(label) => label,
            None => name.rsplit('.').next().unwrap_or(name).to_string(),
        };
        let layer = ort::is_layer(name);
        let multiply = if layer { ort::multiply(self.ctx, self.module, op) } else { ort::Multiply::Other };
        let x_signedness = (layer && self.module.num_operands(op) > 0)
            .then(|| quant_element(self.ctx, self.module.value_type(self.module.operand(op, 0))))
            .flatten()
            .map(|q| q.storage.signedness);
        let label = base.clone();
        let mut cx = OpCx { ex: self, op, base, nodes: 0 };
        let try_qoperator = match cx.ex.format {
            ExportFormat::QOperator => true,
            // With uint8 activations the QLinear op runs the same u8 × s8 kernels.
            ExportFormat::Auto => {
                multiply == ort::Multiply::MaySaturate
                    && x_signedness != Some(qopt_ir_core::Signedness::Unsigned)
            }
            ExportFormat::Qdq => false,
        };
        let mut written = false;
        if try_qoperator {
            if let Some(export) = qoperator::exporter(name) {
                written = export(&mut cx)? == qoperator::Written::Yes;
            }
        }
        let qoperator = written;
        if !written {
            if let Some(export) = qdq::exporter(name) {
                export(&mut cx)?;
                written = true;
            }
        }
        if written {
            if let Some(x_signedness) = x_signedness {
                self.layers += 1;
                self.integer_layers += usize::from(qoperator);
                if multiply == ort::Multiply::MaySaturate && ort::takes_u8_s8(qoperator, x_signedness) {
                    self.u8_s8_saturating.push(label);
                }
            }
            return Ok(());
        }
        if fp::is_exported(name) {
            return fp::export(&mut cx, name);
        }
        Err(if name.starts_with("func.") || self.module.num_regions(op) > 0 {
            format!("{name} has no ONNX export (export one function without calls or regions)")
        } else {
            format!("{name} has no ONNX export")
        })
    }

    fn export_return(&mut self, ret: OpId) {
        let (ctx, module) = (self.ctx, self.module);
        let mut used: Vec<String> = Vec::new();
        let mut renamed: FxHashMap<String, String> = FxHashMap::default();
        for (i, v) in module.operands(ret).enumerate() {
            let ty = module.value_type(v);
            let (data_type, dims) = match types::graph_value(ctx, ty) {
                Ok(t) => t,
                Err(e) => {
                    self.problem(ret, format!("result #{i}: {e}"));
                    continue;
                }
            };
            let mut name = match self.stored_name(v) {
                Ok(name) => name,
                Err(e) => {
                    self.problem(ret, format!("result #{i}: {e}"));
                    continue;
                }
            };
            if let Some(renamed) = renamed.get(&name) {
                name = renamed.clone();
            }
            // A graph output must be a node's own output, once.
            let is_input = self.model.inputs.iter().any(|i| i.name == name);
            let is_initializer = self.model.initializers.iter().any(|i| i.name == name);
            let given = self.result_names.get(i).cloned().flatten();
            if let Some(given) =
                given.as_ref().filter(|_| !is_input && !is_initializer && !used.contains(&name))
            {
                self.model.rename(&name, given);
                renamed.insert(name, given.clone());
                name = given.clone();
            } else if is_input || is_initializer || used.contains(&name) {
                let output = given.unwrap_or_else(|| self.value_names.fresh(&format!("output{i}")));
                let node = self.node_names.fresh(&format!("output{i}"));
                self.model.nodes.push(Node {
                    name: node,
                    op_type: "Identity",
                    domain: "",
                    inputs: vec![name],
                    outputs: vec![output.clone()],
                    attributes: Vec::new(),
                });
                name = output;
            }
            used.push(name.clone());
            self.model.outputs.push(GraphValue { name, data_type, dims });
        }
    }

    /// The value an identity op's result stands for.
    fn resolve(&self, mut v: ValueId) -> ValueId {
        while let Some(&next) = self.alias.get(&v) {
            v = next;
        }
        v
    }

    /// The tensor holding `v` as it is; a constant becomes an initializer on first use.
    fn stored_name(&mut self, v: ValueId) -> Result<String, String> {
        let v = self.resolve(v);
        if let Some(name) = self.stored.get(&v) {
            return Ok(name.clone());
        }
        let module = self.module;
        let op = module.defining_op(v);
        let is_constant =
            !op.is_none() && self.ctx.op_name_str(module.op_name(op)) == qopt_dialect_fp::op_names::CONSTANT;
        if !is_constant {
            return Err("a value is used before it is defined".into());
        }
        let value = module.op_attr(self.ctx, op, "value").ok_or("fp.constant has no value")?;
        let AttrData::Dense(dense) = self.ctx.attr_data(value) else {
            return Err("fp.constant's value is not dense data".into());
        };
        let (data_type, dims) = types::onnx_tensor(self.ctx, dense.ty)?;
        let raw = types::initializer_bytes(self.ctx, dense, data_type)?;
        let base = location_names(self.ctx, module.op_loc(op)).into_iter().next().unwrap_or("const".into());
        let name = self.add_initializer(&base, dims, data_type, raw);
        self.stored.insert(v, name.clone());
        Ok(name)
    }

    fn add_initializer(&mut self, base: &str, dims: Vec<i64>, data_type: i32, raw: Arc<[u8]>) -> String {
        let name = self.value_names.fresh(base);
        self.model.initializers.push(Initializer { name: name.clone(), dims, data_type, raw });
        name
    }

    /// The scale and zero point initializers of quantized element type `elem`.
    fn param_names(&mut self, elem: Type, base: &str) -> Result<ParamNames, String> {
        if let Some(p) = self.params.get(&elem) {
            return Ok(p.clone());
        }
        let TypeData::Quant(q) = self.ctx.type_data(elem) else {
            return Err(format!("{} is not a quantized type", types::short(self.ctx, elem)));
        };
        let types::ParamTensors { scales, zero_points, axis } = types::param_tensors(q);
        let dims: Vec<i64> = if axis.is_some() { vec![scales.len() as i64] } else { Vec::new() };
        let scale_bytes: Vec<u8> = scales.iter().flat_map(|s| s.to_le_bytes()).collect();
        let zp_type = types::storage_data_type(q)?;
        let zp_bytes = types::encode_ints(&zero_points, zp_type)?;
        let scale =
            self.add_initializer(&format!("{base}_scale"), dims.clone(), dt::FLOAT, scale_bytes.into());
        let zero_point = self.add_initializer(&format!("{base}_zero_point"), dims, zp_type, zp_bytes.into());
        let names = ParamNames { scale, zero_point, axis: axis.map(|a| a as i64) };
        self.params.insert(elem, names.clone());
        Ok(names)
    }
}

/// One op being exported: what its exporter reads and writes.
pub(crate) struct OpCx<'e, 'a> {
    ex: &'e mut Exporter<'a>,
    op: OpId,
    /// The op's first location name, or its op name: the start of its node and value names.
    base: String,
    /// Nodes written so far for this op.
    nodes: usize,
}

impl<'a> OpCx<'_, 'a> {
    pub fn ctx(&self) -> &'a Context {
        self.ex.ctx
    }

    pub fn module(&self) -> &'a Module {
        self.ex.module
    }

    pub fn opset(&self) -> i64 {
        self.ex.opset
    }

    pub fn attrs(&self) -> Attribute {
        self.ex.module.op_attrs(self.op)
    }

    pub fn operands(&self) -> Vec<ValueId> {
        self.ex.module.operands(self.op).collect()
    }

    pub fn operand(&self, i: usize) -> Result<ValueId, String> {
        if i >= self.ex.module.num_operands(self.op) {
            return Err(format!("operand #{i} is missing"));
        }
        Ok(self.ex.module.operand(self.op, i))
    }

    pub fn results(&self) -> Vec<ValueId> {
        self.ex.module.results(self.op).collect()
    }

    pub fn result(&self) -> ValueId {
        self.ex.module.result(self.op, 0)
    }

    pub fn value_type(&self, v: ValueId) -> Type {
        self.ex.module.value_type(v)
    }

    /// The static shape of tensor value `v`.
    pub fn shape(&self, v: ValueId) -> Result<Vec<i64>, String> {
        let ty = self.value_type(v);
        self.ctx()
            .tensor_shape(ty)
            .map(<[i64]>::to_vec)
            .ok_or_else(|| format!("{} is not a tensor", types::short(self.ctx(), ty)))
    }

    /// The quantized element type of `v`, if it has one.
    pub fn quant(&self, v: ValueId) -> Option<&'a QuantType> {
        quant_element(self.ex.ctx, self.value_type(v))
    }

    /// The quantized element type of `v`, which must have one.
    pub fn quant_of(&self, v: ValueId) -> Result<&'a QuantType, String> {
        self.quant(v).ok_or_else(|| {
            format!("expected a quantized value, got {}", types::short(self.ctx(), self.value_type(v)))
        })
    }

    /// The ONNX element type of `v`.
    pub fn data_type(&self, v: ValueId) -> Result<i32, String> {
        Ok(types::onnx_tensor(self.ctx(), self.value_type(v))?.0)
    }

    /// The tensor holding `v` as it is (stored integers for a quantized value).
    pub fn stored(&mut self, v: ValueId) -> Result<String, String> {
        self.ex.stored_name(v)
    }

    /// `v` as a float tensor: itself, or its `DequantizeLinear` (made once per value).
    pub fn float(&mut self, v: ValueId) -> Result<String, String> {
        let v = self.ex.resolve(v);
        if self.quant(v).is_none() {
            return self.stored(v);
        }
        if let Some(name) = self.ex.dequantized.get(&v) {
            return Ok(name.clone());
        }
        let stored = self.stored(v)?;
        let output = self.ex.value_names.fresh(&format!("{stored}_dequantized"));
        let node = self.ex.node_names.fresh(&format!("{stored}/dequantize"));
        self.dequantize_node(node, v, &stored, &output)?;
        self.ex.dequantized.insert(v, output.clone());
        Ok(output)
    }

    /// Appends `DequantizeLinear(stored)` with the parameters of `v`'s type.
    fn dequantize_node(
        &mut self,
        node: String,
        v: ValueId,
        stored: &str,
        output: &str,
    ) -> Result<(), String> {
        let elem = self.ctx().element_type(self.value_type(v));
        let params = self.ex.param_names(elem, stored)?;
        let mut attributes = Vec::new();
        if let Some(axis) = params.axis {
            attributes.push(("axis", AttrValue::Int(axis)));
        }
        self.ex.model.nodes.push(Node {
            name: node,
            op_type: "DequantizeLinear",
            domain: "",
            inputs: vec![stored.to_string(), params.scale, params.zero_point],
            outputs: vec![output.to_string()],
            attributes,
        });
        Ok(())
    }

    /// Makes `v`'s dequantized tensor the `DequantizeLinear` this op writes,
    /// named after the op (`qnn.dequantize`), unless one exists already.
    pub fn dequantize_here(&mut self, v: ValueId) -> Result<String, String> {
        let v = self.ex.resolve(v);
        if let Some(name) = self.ex.dequantized.get(&v) {
            return Ok(name.clone());
        }
        let stored = self.stored(v)?;
        let output = self.fresh_value("");
        let node = self.node_name("DequantizeLinear");
        self.dequantize_node(node, v, &stored, &output)?;
        self.nodes += 1;
        self.ex.dequantized.insert(v, output.clone());
        Ok(output)
    }

    /// The scale and zero point initializers of the quantized element type
    /// of `v`, named after `v`'s tensor (or its op's location) when they are new.
    pub fn params(&mut self, v: ValueId) -> Result<ParamNames, String> {
        let elem = self.ctx().element_type(self.value_type(v));
        let v = self.ex.resolve(v);
        let def = self.module().defining_op(v);
        let base = match self.ex.stored.get(&v) {
            Some(name) => name.clone(),
            None if !def.is_none() => location_names(self.ctx(), self.module().op_loc(def))
                .into_iter()
                .next()
                .unwrap_or_else(|| self.base.clone()),
            None => self.base.clone(),
        };
        self.ex.param_names(elem, &base)
    }

    /// A fresh value name: the op's base name, with `_suffix` when given.
    pub fn fresh_value(&mut self, suffix: &str) -> String {
        let base = if suffix.is_empty() { self.base.clone() } else { format!("{}_{suffix}", self.base) };
        self.ex.value_names.fresh(&base)
    }

    /// The name of this op's next node: its base name for the first,
    /// `base/OpType` after.
    fn node_name(&mut self, op_type: &str) -> String {
        let base = if self.nodes == 0 { self.base.clone() } else { format!("{}/{op_type}", self.base) };
        self.ex.node_names.fresh(&base)
    }

    /// Appends a node of the standard domain.
    pub fn node(
        &mut self,
        op_type: &'static str,
        inputs: Vec<String>,
        outputs: Vec<String>,
        attributes: Vec<(&'static str, AttrValue)>,
    ) {
        self.node_in("", op_type, inputs, outputs, attributes);
    }

    /// Appends a node of `domain` (`""` or [`MICROSOFT_DOMAIN`]).
    pub fn node_in(
        &mut self,
        domain: &'static str,
        op_type: &'static str,
        inputs: Vec<String>,
        outputs: Vec<String>,
        attributes: Vec<(&'static str, AttrValue)>,
    ) {
        let name = self.node_name(op_type);
        self.ex.model.uses_microsoft_domain |= domain == MICROSOFT_DOMAIN;
        self.ex.model.nodes.push(Node { name, op_type, domain, inputs, outputs, attributes });
        self.nodes += 1;
    }

    /// Binds result `v` to tensor `name` (its stored form).
    pub fn bind(&mut self, v: ValueId, name: String) {
        self.ex.stored.insert(v, name);
    }

    /// Makes result `v` stand for `source` (identity ops).
    pub fn alias(&mut self, v: ValueId, source: ValueId) {
        let source = self.ex.resolve(source);
        self.ex.alias.insert(v, source);
    }

    /// An int64 1-D initializer (shapes, pads, axes).
    pub fn ints(&mut self, suffix: &str, values: &[i64]) -> String {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let base = format!("{}_{suffix}", self.base);
        self.ex.add_initializer(&base, vec![values.len() as i64], dt::INT64, raw.into())
    }

    /// A rank-0 float initializer of ONNX float type `data_type`.
    pub fn float_scalar(&mut self, suffix: &str, value: f64, data_type: i32) -> Result<String, String> {
        let raw = types::encode_float(value, data_type)?;
        let base = format!("{}_{suffix}", self.base);
        Ok(self.ex.add_initializer(&base, Vec::new(), data_type, raw.into()))
    }

    /// An initializer with the given elements.
    pub fn initializer(&mut self, suffix: &str, dims: Vec<i64>, data_type: i32, raw: Vec<u8>) -> String {
        let base = format!("{}_{suffix}", self.base);
        self.ex.add_initializer(&base, dims, data_type, raw.into())
    }

    /// Appends `QuantizeLinear(float)` to the type of `target` (a result of
    /// this op) into `output`.
    pub fn quantize_into(&mut self, float: String, target: ValueId, output: String) -> Result<(), String> {
        let elem = self.ctx().element_type(self.value_type(target));
        let params = self.ex.param_names(elem, &output)?;
        let mut attributes = Vec::new();
        if let Some(axis) = params.axis {
            attributes.push(("axis", AttrValue::Int(axis)));
        }
        self.node("QuantizeLinear", vec![float, params.scale, params.zero_point], vec![output], attributes);
        Ok(())
    }

    /// The defining `fp.constant`'s dense data of `v`, if `v` is a constant.
    pub fn constant_data(&self, v: ValueId) -> Option<&'a qopt_ir_core::DenseElements> {
        let module = self.module();
        let v = self.ex.resolve(v);
        let op = module.defining_op(v);
        if op.is_none() || self.ctx().op_name_str(module.op_name(op)) != qopt_dialect_fp::op_names::CONSTANT {
            return None;
        }
        match self.ctx().attr_data(module.op_attr(self.ctx(), op, "value")?) {
            AttrData::Dense(d) => Some(d),
            _ => None,
        }
    }
}
