//! The graph walk: an ONNX model becomes a verified [`Module`] holding one
//! `func.func @main`.
//!
//! Steps, in order, each failing with one [`ImportError`]:
//!
//! 1. decode the file; find the standard opset (11 to 28);
//! 2. list every node whose op type has no converter ([`crate::ops`]) and
//!    report them all in one error;
//! 3. graph inputs that are not initializers become `@main`'s arguments
//!    (their names in its `arg_names` attribute), with static shapes: dynamic dimensions (symbolic, unset, −1 or 0) are
//!    fixed by [`ImportOptions::input_shapes`] or, for dimension 0, by
//!    [`ImportOptions::batch`]; any other is an error naming the flag;
//! 4. initializers and `Constant` outputs are kept as data and become an
//!    `fp.constant` only where a node uses them as a tensor operand, placed
//!    right before that first use with the location `loc("<name>")`; inputs
//!    that must be constant (shapes, pads, axes, clip bounds, quantization
//!    parameters) are read from the data and make no op;
//! 5. nodes are converted in order (ONNX requires topological order; a use
//!    before the definition is an error), every op located at
//!    `loc("<node name>")` and typed by the op's own inference;
//! 6. the graph outputs are returned (their names in `@main`'s
//!    `result_names` attribute); their declared shapes and those in
//!    `value_info` are checked against the inferred types; the module is verified.
//!
//! The walk is a loop over the node list: nothing recurses over the graph.

use crate::attrs::{AttrsRead, NodeAttrs};
use crate::error::ImportError;
use crate::fold::{Fail, FoldCx, FoldFn, Tensor, FOLD_LIMIT};
use crate::onnx::{decode_model, Dim, GraphProto, ModelProto, NodeProto, ValueInfo};
use crate::tensor::{element_type, TensorData};
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::{
    type_to_string, Attribute, BlockId, Context, FxHashMap, Location, Module, OpId, OpName, OperationState,
    Type, ValueId, DYNAMIC,
};
use smallvec::SmallVec;

/// The opsets of the standard domain the importer implements.
///
/// Opsets 22 to 28 changed the op types the importer converts only by new
/// element types (bf16 for convolution, pooling and activations; 4-bit, 2-bit,
/// float4/6/8 types, which the importer rejects) and three attributes, which
/// the converters check: `QuantizeLinear`'s `precision` and
/// `DequantizeLinear`'s `output_dtype` (opset 23), `SpaceToDepth`'s `mode` (28).
/// A converter for another op type must handle that op's versions up to 28.
pub const SUPPORTED_OPSETS: std::ops::RangeInclusive<i64> = 11..=28;

/// How to import.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// The size of a dynamic batch dimension (dimension 0 of a graph input).
    pub batch: Option<i64>,
    /// Whole shapes for named graph inputs (`--input-shape x=1x3x48x192`):
    /// they fix every dynamic dimension of that input and must agree with its
    /// static ones.
    pub input_shapes: Vec<(String, Vec<i64>)>,
}

/// Imports an ONNX model (the bytes of a `.onnx` file) into a verified module
/// with one function, `@main`. Registers the `fp` and `qnn` dialects in `ctx`
/// if they are not registered yet.
pub fn import_model(ctx: &mut Context, bytes: &[u8], options: &ImportOptions) -> Result<Module, ImportError> {
    let model = decode_model(bytes)?;
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| ImportError::Model("the file holds no graph (is it an ONNX model?)".to_string()))?;
    let opset = standard_opset(&model)?;
    crate::ops::check_supported(graph)?;
    for (name, register) in [
        ("fp", qopt_dialect_fp::register as fn(&mut Context) -> Result<(), String>),
        ("qnn", qopt_dialect_qnn::register),
    ] {
        if ctx.dialect(name).is_none() {
            register(ctx).map_err(ImportError::Model)?;
        }
    }
    let mut importer = Importer::new(ctx, opset);
    importer.add_initializers(graph)?;
    let func = importer.add_function(graph, options)?;
    for node in &graph.node {
        importer.convert(node)?;
    }
    importer.finish(graph, func)
}

/// The version of the standard (`""` / `ai.onnx`) opset the model imports.
fn standard_opset(model: &ModelProto<'_>) -> Result<i64, ImportError> {
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .ok_or_else(|| ImportError::Model("the model imports no standard ONNX opset".to_string()))?;
    if !SUPPORTED_OPSETS.contains(&opset) {
        return Err(ImportError::Model(format!(
            "ONNX opset {opset} is not supported (qimport supports opsets {} to {})",
            SUPPORTED_OPSETS.start(),
            SUPPORTED_OPSETS.end()
        )));
    }
    Ok(opset)
}

/// The error for a use of `name` before any definition.
fn undefined(name: &str) -> String {
    format!(
        "value '{name}' is not defined before its use (not a graph input, an initializer or \
         the output of an earlier node; ONNX nodes must be in topological order)"
    )
}

/// The name a node goes by in messages and locations.
pub(crate) fn node_label(node: &NodeProto<'_>) -> String {
    if !node.name.is_empty() {
        return node.name.clone();
    }
    node.output
        .iter()
        .find(|o| !o.is_empty())
        .cloned()
        .unwrap_or_else(|| format!("<unnamed {}>", node.op_type))
}

/// What an ONNX value name stands for.
#[derive(Copy, Clone, Debug)]
enum Slot {
    /// An IR value.
    Value(ValueId),
    /// Constant data (index into `Importer::constants`), made into an op on first use.
    Constant(usize),
    /// The stored integers of a quantized value (a `Cast` of it to an integer
    /// type), which only a table lookup (`Gather`) may read; see `ops::qlinear`.
    StoredIntegers(ValueId),
}

/// The error for a use of stored integers other than as lookup indices.
fn stored_integers_misused(name: &str) -> String {
    format!(
        "value '{name}' holds the stored integers of a quantized value (a Cast of it), which qimport reads only \
         as the indices of a Gather from a dequantized table (a lookup table)"
    )
}

/// A node's inputs, as far as import-time evaluation is concerned.
enum NodeInputs {
    /// Every input is constant (`None` for an omitted optional one).
    Constant(Vec<Option<Tensor>>),
    /// This input is computed from the graph inputs (or too large to evaluate on).
    Computed(String),
}

struct ConstEntry {
    data: TensorData,
    /// The `fp.constant` made for it, once a node used it as an operand.
    value: Option<ValueId>,
}

/// The state of one import.
pub(crate) struct Importer<'c> {
    ctx: &'c mut Context,
    module: Module,
    block: BlockId,
    slots: FxHashMap<String, Slot>,
    constants: Vec<ConstEntry>,
    opset: i64,
    /// Dequantized lookup tables read by `qnn.lookup`s: erased at the end
    /// when nothing else uses them.
    lookup_tables: Vec<ValueId>,
}

impl<'c> Importer<'c> {
    fn new(ctx: &'c mut Context, opset: i64) -> Importer<'c> {
        let module = Module::new();
        let block = module.body();
        Importer {
            ctx,
            module,
            block,
            slots: FxHashMap::default(),
            constants: Vec::new(),
            opset,
            lookup_tables: Vec::new(),
        }
    }

    fn define(&mut self, name: &str, slot: Slot) -> Result<(), String> {
        if self.slots.insert(name.to_string(), slot).is_some() {
            return Err(format!("value '{name}' is defined twice"));
        }
        Ok(())
    }

    fn add_initializers(&mut self, graph: &GraphProto<'_>) -> Result<(), ImportError> {
        for t in &graph.initializer {
            let data = TensorData::from_proto(t).map_err(ImportError::Model)?;
            let index = self.constants.len();
            self.constants.push(ConstEntry { data, value: None });
            self.define(&t.name, Slot::Constant(index)).map_err(ImportError::Model)?;
        }
        Ok(())
    }

    /// An array attribute of `names`.
    fn string_array(&mut self, names: &[&str]) -> Attribute {
        let items: Vec<Attribute> = names.iter().map(|n| self.ctx.string_attr(n)).collect();
        self.ctx.array_attr(&items)
    }

    /// Creates `@main` with the graph inputs as arguments (named by
    /// `arg_names`); later ops go into its body.
    fn add_function(&mut self, graph: &GraphProto<'_>, options: &ImportOptions) -> Result<OpId, ImportError> {
        for (name, _) in &options.input_shapes {
            if !graph.input.iter().any(|i| &i.name == name && !self.slots.contains_key(name)) {
                let inputs: Vec<&str> = graph
                    .input
                    .iter()
                    .filter(|i| !self.slots.contains_key(&i.name))
                    .map(|i| i.name.as_str())
                    .collect();
                return Err(ImportError::Model(format!(
                    "--input-shape names '{name}', which is not an input of the model (inputs: {})",
                    inputs.join(", ")
                )));
            }
        }
        let mut names = Vec::new();
        let mut types = Vec::new();
        for input in &graph.input {
            if self.slots.contains_key(&input.name) {
                continue;
            }
            types.push(self.input_type(input, options).map_err(ImportError::Model)?);
            names.push(input.name.as_str());
        }
        let sym = self.ctx.string_attr("main");
        let arg_names = self.string_array(&names);
        let attrs = self.ctx.dict_attr(&[("sym_name", sym), (qopt_ir_core::ARG_NAMES, arg_names)]);
        let func = self.module.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
        let body = self.module.body();
        self.module.append_op(body, func);
        let region = self.module.region(func, 0);
        self.block = self.module.append_block(region, &types);
        let args = self.module.block_args(self.block).to_vec();
        for (name, arg) in names.into_iter().zip(args) {
            self.define(name, Slot::Value(arg)).map_err(ImportError::Model)?;
        }
        Ok(func)
    }

    /// The static tensor type of a graph input. A dimension written as a
    /// symbolic name, left unset, or as −1 or 0 (Paddle writes −1) is dynamic:
    /// `--input-shape` fixes it, or `--batch` when it is dimension 0.
    fn input_type(&mut self, input: &ValueInfo, options: &ImportOptions) -> Result<Type, String> {
        let name = &input.name;
        let Some(tensor) = &input.tensor else {
            return Err(if input.not_a_tensor {
                format!("input '{name}' is not a tensor; only tensor inputs are supported")
            } else {
                format!("input '{name}' has no type")
            });
        };
        let elem = element_type(self.ctx, tensor.elem_type).map_err(|e| format!("input '{name}': {e}"))?;
        let given = options.input_shapes.iter().find(|(n, _)| n == name).map(|(_, s)| s.as_slice());
        let declared: Vec<Dim> = match (&tensor.shape, given) {
            (Some(dims), _) => dims.clone(),
            (None, Some(shape)) => vec![Dim::Unknown; shape.len()],
            (None, None) => {
                return Err(format!(
                "input '{name}' has no shape (unknown rank); give one with --input-shape {name}=1x3x224x224"
            ))
            }
        };
        if let Some(shape) = given {
            if shape.len() != declared.len() {
                return Err(format!(
                    "--input-shape gives input '{name}' {} dimensions, the model declares {}",
                    shape.len(),
                    declared.len()
                ));
            }
        }
        let mut shape = Vec::with_capacity(declared.len());
        for (i, dim) in declared.iter().enumerate() {
            let fixed = given.map(|g| g[i]);
            let size = match (dim, fixed) {
                (Dim::Value(v), Some(g)) if *v > 0 && *v != g => {
                    return Err(format!(
                        "input '{name}' has size {v} in dimension {i}, but --input-shape says {g}"
                    ))
                }
                (Dim::Value(v), None) if *v > 0 => {
                    if let (0, Some(batch)) = (i, options.batch) {
                        if batch != *v {
                            return Err(format!(
                                "input '{name}' has a static batch of {v}; --batch {batch} cannot change it"
                            ));
                        }
                    }
                    *v
                }
                (Dim::Value(v), None) if *v < -1 => {
                    return Err(format!("input '{name}' has size {v} in dimension {i}"))
                }
                (_, Some(g)) => g,
                (_, None) if i == 0 && options.batch.is_some() => options.batch.unwrap_or(1),
                (dim, None) => {
                    let hint = if i == 0 {
                        format!("--batch N or --input-shape {name}=...")
                    } else {
                        format!("--input-shape {name}=...")
                    };
                    return Err(format!(
                        "input '{name}' has a dynamic size{} in dimension {i}; fix it with {hint}",
                        describe_dim(dim)
                    ));
                }
            };
            shape.push(size);
        }
        Ok(self.ctx.tensor_type(&shape, elem))
    }

    fn convert(&mut self, node: &NodeProto<'_>) -> Result<(), ImportError> {
        let fail = |message: String| ImportError::Node {
            node: node_label(node),
            op_type: node.op_type.clone(),
            message,
        };
        if let Some(a) = node.attribute.iter().find(|a| !a.subgraphs.is_empty()) {
            return Err(fail(format!("attribute '{}' is a subgraph; subgraphs are not supported", a.name)));
        }
        let converter = crate::ops::converter(&node.domain, &node.op_type);
        let folder =
            crate::ops::is_standard(&node.domain).then(|| crate::fold::folder(&node.op_type)).flatten();
        if let Some(fold) = folder {
            match self.constant_inputs(node).map_err(&fail)? {
                NodeInputs::Constant(inputs) => match self.evaluate(node, fold, inputs) {
                    Ok(()) => return Ok(()),
                    Err(Fail::TooLarge(_)) if converter.is_some() => {}
                    Err(e) => return Err(fail(e.to_string())),
                },
                NodeInputs::Computed(computed) if converter.is_none() => {
                    return Err(fail(format!(
                        "input '{computed}' is computed from the model's inputs, and qimport evaluates {} \
                         only on constants (a shape computation); give the inputs static shapes with \
                         --input-shape",
                        node.op_type
                    )))
                }
                NodeInputs::Computed(_) => {}
            }
        }
        let convert = converter.ok_or_else(|| fail("op type is not supported".into()))?;
        let loc = self.ctx.name_loc(&node_label(node));
        let read = AttrsRead::default();
        let mut cx = NodeCx { imp: self, node, loc, read: &read };
        convert(&mut cx).map_err(&fail)?;
        read.check(node).map_err(&fail)?;
        for (i, output) in node.output.iter().enumerate() {
            if !output.is_empty() && !self.slots.contains_key(output) {
                return Err(fail(format!("output #{i} ('{output}') is not supported")));
            }
        }
        Ok(())
    }

    /// The node's inputs as constant tensors, or the first that is computed.
    fn constant_inputs(&self, node: &NodeProto<'_>) -> Result<NodeInputs, String> {
        let mut inputs = Vec::with_capacity(node.input.len());
        for name in &node.input {
            if name.is_empty() {
                inputs.push(None);
                continue;
            }
            match self.slots.get(name) {
                Some(Slot::Constant(index)) => {
                    let data = &self.constants[*index].data;
                    if data.bytes.len() / crate::tensor::element_bytes(data.data_type).unwrap_or(1)
                        > FOLD_LIMIT
                    {
                        return Ok(NodeInputs::Computed(name.clone()));
                    }
                    inputs.push(Some(Tensor::from_data(data)?));
                }
                Some(Slot::Value(_) | Slot::StoredIntegers(_)) => {
                    return Ok(NodeInputs::Computed(name.clone()))
                }
                None => return Err(undefined(name)),
            }
        }
        Ok(NodeInputs::Constant(inputs))
    }

    /// Evaluates `node` on constant `inputs` and binds its outputs to the results.
    fn evaluate(
        &mut self,
        node: &NodeProto<'_>,
        fold: FoldFn,
        inputs: Vec<Option<Tensor>>,
    ) -> Result<(), Fail> {
        let read = AttrsRead::default();
        let cx = FoldCx { attrs: NodeAttrs::tracked(node, &read), opset: self.opset, inputs };
        let results = fold(&cx)?;
        read.check(node)?;
        for (name, result) in node.output.iter().zip(results) {
            if name.is_empty() {
                continue;
            }
            let data = result.into_data(name)?;
            self.constants.push(ConstEntry { data, value: None });
            self.define(name, Slot::Constant(self.constants.len() - 1))?;
        }
        Ok(())
    }

    /// The IR value of `name`, making the `fp.constant` of constant data on first use.
    fn value(&mut self, name: &str) -> Result<ValueId, String> {
        match self.slots.get(name).copied() {
            Some(Slot::Value(v)) => Ok(v),
            Some(Slot::Constant(index)) => self.materialize(index),
            Some(Slot::StoredIntegers(_)) => Err(stored_integers_misused(name)),
            None => Err(undefined(name)),
        }
    }

    fn materialize(&mut self, index: usize) -> Result<ValueId, String> {
        if let Some(v) = self.constants[index].value {
            return Ok(v);
        }
        let data = self.constants[index].data.clone();
        let elem =
            element_type(self.ctx, data.data_type).map_err(|e| format!("constant '{}': {e}", data.name))?;
        let loc = self.ctx.name_loc(&data.name);
        let v = self.constant_op(&data, elem, loc)?;
        self.constants[index].value = Some(v);
        Ok(v)
    }

    /// Appends `fp.constant` holding `data` as a tensor of element type `elem`.
    fn constant_op(&mut self, data: &TensorData, elem: Type, loc: Location) -> Result<ValueId, String> {
        let value = data.dense_attr(self.ctx, elem)?;
        let attrs = self.ctx.dict_attr(&[("value", value)]);
        self.append(fp_op::CONSTANT, &[], attrs, None, loc).map(|r| r[0])
    }

    /// Appends op `name`; result types are `types`, or inferred by the op when `None`.
    fn append(
        &mut self,
        name: &str,
        operands: &[ValueId],
        attrs: Attribute,
        types: Option<&[Type]>,
        loc: Location,
    ) -> Result<SmallVec<[ValueId; 1]>, String> {
        let op_name = self.ctx.op_name(name);
        let results: SmallVec<[Type; 1]> = match types {
            Some(t) => t.into(),
            None => {
                let infer = self
                    .ctx
                    .op_def(op_name)
                    .and_then(|d| d.infer_types)
                    .ok_or_else(|| format!("op '{name}' has no result-type inference"))?;
                let operand_types: SmallVec<[Type; 4]> =
                    operands.iter().map(|&v| self.module.value_type(v)).collect();
                infer(self.ctx, &operand_types, attrs).map_err(|e| format!("{name}: {e}"))?
            }
        };
        let op = self.module.create_op(
            OperationState::new(op_name).operands(operands).results(&results).attrs(attrs).loc(loc),
        );
        self.module.append_op(self.block, op);
        Ok(self.module.results(op).collect())
    }

    fn finish(mut self, graph: &GraphProto<'_>, func: OpId) -> Result<Module, ImportError> {
        let mut results = Vec::with_capacity(graph.output.len());
        for output in &graph.output {
            let v = self.value(&output.name).map_err(|e| ImportError::Model(format!("graph output: {e}")))?;
            results.push(v);
        }
        self.erase_unused_lookup_tables();
        let ret = self.module.create_op(OperationState::new(OpName::RETURN).operands(&results));
        self.module.append_op(self.block, ret);
        let inputs: Vec<Type> =
            self.module.block_args(self.block).iter().map(|&a| self.module.value_type(a)).collect();
        let outputs: Vec<Type> = results.iter().map(|&v| self.module.value_type(v)).collect();
        let fty = self.ctx.function_type(&inputs, &outputs);
        let fty = self.ctx.type_attr(fty);
        let attrs = self.ctx.dict_set(self.module.op_attrs(func), "function_type", fty);
        let output_names: Vec<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
        let result_names = self.string_array(&output_names);
        let attrs = self.ctx.dict_set(attrs, qopt_ir_core::RESULT_NAMES, result_names);
        self.module.set_op_attrs(func, attrs);
        for info in graph.output.iter().chain(&graph.value_info) {
            if let Some(Slot::Value(v)) = self.slots.get(&info.name).copied() {
                self.check_declared(info, self.module.value_type(v)).map_err(ImportError::Model)?;
            }
        }
        qopt_ir_core::verify(self.ctx, &self.module).map_err(|diagnostics| {
            let mut text = String::new();
            for d in &diagnostics.0 {
                text.push_str(&format!("{d}\n"));
                for note in &d.notes {
                    text.push_str(&format!("  {note}\n"));
                }
            }
            ImportError::Verify(text)
        })?;
        Ok(self.module)
    }

    /// Erases each lookup table's `qnn.dequantize` that nothing but the
    /// lookup read, and then its constant unless something else reads it.
    fn erase_unused_lookup_tables(&mut self) {
        for table in std::mem::take(&mut self.lookup_tables) {
            if self.module.has_uses(table) {
                continue;
            }
            let dequantize = self.module.defining_op(table);
            let constant = self.module.operand(dequantize, 0);
            if self.module.erase_op(dequantize).is_err() || self.module.has_uses(constant) {
                continue;
            }
            if self.module.erase_op(self.module.defining_op(constant)).is_ok() {
                for entry in &mut self.constants {
                    if entry.value == Some(constant) {
                        entry.value = None;
                    }
                }
            }
        }
    }

    /// An error if the model declares a static size for `info` that differs from
    /// the inferred type `ty` (element types are not compared: in QDQ models
    /// ONNX types hold integers where the IR holds quantized types).
    fn check_declared(&self, info: &ValueInfo, ty: Type) -> Result<(), String> {
        let (Some(tensor), Some(shape)) = (&info.tensor, self.ctx.tensor_shape(ty)) else { return Ok(()) };
        let Some(dims) = &tensor.shape else { return Ok(()) };
        let differs = dims.len() != shape.len()
            || dims
                .iter()
                .zip(shape)
                .any(|(d, &s)| matches!(d, Dim::Value(v) if *v > 0 && *v != s && s != DYNAMIC));
        if differs {
            let declared: Vec<String> = dims
                .iter()
                .map(|d| match d {
                    Dim::Value(v) if *v > 0 => v.to_string(),
                    _ => "?".to_string(),
                })
                .collect();
            return Err(format!(
                "value '{}' is declared with shape [{}] but the imported graph computes {}",
                info.name,
                declared.join(", "),
                type_to_string(self.ctx, ty)
            ));
        }
        Ok(())
    }
}

fn describe_dim(dim: &Dim) -> String {
    match dim {
        Dim::Param(p) => format!(" '{p}'"),
        _ => String::new(),
    }
}

/// One node being converted: what its converter in [`crate::ops`] reads and builds.
pub(crate) struct NodeCx<'i, 'c> {
    imp: &'i mut Importer<'c>,
    node: &'i NodeProto<'i>,
    loc: Location,
    read: &'i AttrsRead,
}

impl<'i> NodeCx<'i, '_> {
    /// The standard opset version.
    pub fn opset(&self) -> i64 {
        self.imp.opset
    }

    /// The node's attributes.
    pub fn attrs(&self) -> NodeAttrs<'i> {
        NodeAttrs::tracked(self.node, self.read)
    }

    /// The context, to build attributes and types.
    pub fn ctx(&mut self) -> &mut Context {
        self.imp.ctx
    }

    /// The context, to read types and attributes.
    pub fn ctx_ref(&self) -> &Context {
        self.imp.ctx
    }

    /// The name of input `i`, `None` if absent or empty (an omitted optional input).
    pub fn input_name(&self, i: usize) -> Option<&str> {
        self.node.input.get(i).map(String::as_str).filter(|n| !n.is_empty())
    }

    /// The number of outputs the node lists.
    pub fn num_outputs(&self) -> usize {
        self.node.output.len()
    }

    /// The name of output `i` (empty if absent).
    pub fn output_name(&self, i: usize) -> String {
        self.node.output.get(i).cloned().unwrap_or_default()
    }

    /// True if output `i` is listed with a name (used or not).
    pub fn has_output(&self, i: usize) -> bool {
        self.node.output.get(i).is_some_and(|n| !n.is_empty())
    }

    /// How many inputs the node lists (empty names included).
    pub fn node_input_count(&self) -> usize {
        self.node.input.len()
    }

    /// The value of required input `i`.
    pub fn input(&mut self, i: usize) -> Result<ValueId, String> {
        let name = self.input_name(i).ok_or_else(|| format!("input #{i} is missing"))?.to_string();
        self.imp.value(&name)
    }

    /// The value of optional input `i`.
    pub fn opt_input(&mut self, i: usize) -> Result<Option<ValueId>, String> {
        match self.input_name(i).map(str::to_string) {
            Some(name) => self.imp.value(&name).map(Some),
            None => Ok(None),
        }
    }

    /// The data of input `i` if it is constant (an initializer or a `Constant`
    /// output, possibly through `Identity`); `None` if absent; an error if present
    /// but computed.
    pub fn const_input(&self, i: usize) -> Result<Option<TensorData>, String> {
        let Some(name) = self.input_name(i) else { return Ok(None) };
        match self.imp.slots.get(name) {
            Some(Slot::Constant(index)) => Ok(Some(self.imp.constants[*index].data.clone())),
            _ => Err(format!("input #{i} ('{name}') must be a constant (an initializer or a Constant node)")),
        }
    }

    /// True if input `i` is present and constant.
    pub fn is_const_input(&self, i: usize) -> bool {
        self.input_name(i).is_some_and(|n| matches!(self.imp.slots.get(n), Some(Slot::Constant(_))))
    }

    /// The integers of constant input `i`, `None` if absent.
    pub fn const_ints(&self, i: usize) -> Result<Option<Vec<i64>>, String> {
        self.const_input(i)?.map(|t| t.ints()).transpose()
    }

    /// The shape of input `i`, without making an op for a constant input.
    pub fn input_shape(&self, i: usize) -> Result<Vec<i64>, String> {
        let name = self.input_name(i).ok_or_else(|| format!("input #{i} is missing"))?;
        match self.imp.slots.get(name) {
            Some(Slot::Constant(index)) => Ok(self.imp.constants[*index].data.dims.clone()),
            Some(Slot::Value(v)) => self.shape(*v),
            Some(Slot::StoredIntegers(_)) => Err(stored_integers_misused(name)),
            None => Err(undefined(name)),
        }
    }

    /// The ONNX element type of input `i` (a `TensorProto.DataType` value).
    pub fn input_data_type(&self, i: usize) -> Result<i32, String> {
        let name = self.input_name(i).ok_or_else(|| format!("input #{i} is missing"))?;
        match self.imp.slots.get(name) {
            Some(Slot::Constant(index)) => Ok(self.imp.constants[*index].data.data_type),
            Some(Slot::StoredIntegers(_)) => Err(stored_integers_misused(name)),
            Some(Slot::Value(v)) => {
                let elem = self.imp.ctx.element_type(self.value_type(*v));
                crate::tensor::onnx_data_type(self.imp.ctx, elem)
                    .ok_or_else(|| format!("input '{name}' has no ONNX element type"))
            }
            None => Err(undefined(name)),
        }
    }

    /// The type of `v`.
    pub fn value_type(&self, v: ValueId) -> Type {
        self.imp.module.value_type(v)
    }

    /// The shape of tensor value `v`.
    pub fn shape(&self, v: ValueId) -> Result<Vec<i64>, String> {
        let ty = self.value_type(v);
        self.imp
            .ctx
            .tensor_shape(ty)
            .map(<[i64]>::to_vec)
            .ok_or_else(|| format!("expected a tensor, got {}", type_to_string(self.imp.ctx, ty)))
    }

    /// The element type of tensor value `v`.
    pub fn element(&self, v: ValueId) -> Type {
        self.imp.ctx.element_type(self.value_type(v))
    }

    /// Appends op `name` at the node's location, its result types inferred.
    pub fn emit(&mut self, name: &str, operands: &[ValueId], attrs: Attribute) -> Result<ValueId, String> {
        Ok(self.emit_all(name, operands, attrs)?[0])
    }

    /// Like [`Self::emit`], for ops with several results.
    pub fn emit_all(
        &mut self,
        name: &str,
        operands: &[ValueId],
        attrs: Attribute,
    ) -> Result<SmallVec<[ValueId; 1]>, String> {
        self.imp.append(name, operands, attrs, None, self.loc)
    }

    /// Appends op `name` with the written result type `ty` (ops without inference).
    pub fn emit_typed(&mut self, name: &str, operands: &[ValueId], ty: Type) -> Result<ValueId, String> {
        self.emit_typed_with(name, operands, Attribute::EMPTY_DICT, ty)
    }

    /// Appends op `name` with attributes `attrs` and the written result type `ty`.
    pub fn emit_typed_with(
        &mut self,
        name: &str,
        operands: &[ValueId],
        attrs: Attribute,
        ty: Type,
    ) -> Result<ValueId, String> {
        Ok(self.imp.append(name, operands, attrs, Some(&[ty]), self.loc)?[0])
    }

    /// The quantized value whose stored integers input `i` names (a `Cast`
    /// of it), if it names such integers.
    pub fn stored_integers_input(&self, i: usize) -> Option<ValueId> {
        match self.imp.slots.get(self.input_name(i)?) {
            Some(Slot::StoredIntegers(v)) => Some(*v),
            _ => None,
        }
    }

    /// Binds output 0 to the stored integers of quantized value `v`.
    pub fn set_stored_integers_output(&mut self, v: ValueId) -> Result<(), String> {
        match self.node.output.first().filter(|n| !n.is_empty()) {
            Some(name) => self.imp.define(name, Slot::StoredIntegers(v)),
            None => Ok(()),
        }
    }

    /// The quantized constant `v` dequantizes, if `v` is the result of
    /// `qnn.dequantize` of an `fp.constant`.
    pub fn dequantized_constant(&self, v: ValueId) -> Option<ValueId> {
        let q = self.dequantized_value(v)?;
        let module = &self.imp.module;
        let def = module.defining_op(q);
        (!def.is_none() && self.imp.ctx.op_name_str(module.op_name(def)) == fp_op::CONSTANT).then_some(q)
    }

    /// The quantized value `v` dequantizes, if `v` is the result of a `qnn.dequantize`.
    pub fn dequantized_value(&self, v: ValueId) -> Option<ValueId> {
        let module = &self.imp.module;
        let def = module.defining_op(v);
        if def.is_none()
            || self.imp.ctx.op_name_str(module.op_name(def)) != qopt_dialect_qnn::op_names::DEQUANTIZE
        {
            return None;
        }
        Some(module.operand(def, 0))
    }

    /// The dense data of the `fp.constant` defining `v`.
    pub fn constant_value(&self, v: ValueId) -> Option<&qopt_ir_core::DenseElements> {
        let module = &self.imp.module;
        let def = module.defining_op(v);
        let value = module.op_attr(self.imp.ctx, def, "value")?;
        match self.imp.ctx.attr_data(value) {
            qopt_ir_core::AttrData::Dense(d) => Some(d),
            _ => None,
        }
    }

    /// Gives the `fp.constant` value `v` the tensor type `ty` (same shape and
    /// storage, other quantization parameters), its data unchanged.
    pub fn retype_constant(&mut self, v: ValueId, ty: Type) -> Result<(), String> {
        let bytes = self.constant_value(v).ok_or("not a dense constant")?.bytes.to_vec();
        let dense = qopt_ir_core::DenseElements::from_bytes(self.imp.ctx, ty, bytes)?;
        let value = self.imp.ctx.dense_attr(dense);
        let def = self.imp.module.defining_op(v);
        let attrs = self.imp.ctx.dict_set(self.imp.module.op_attrs(def), "value", value);
        self.imp.module.set_op_attrs(def, attrs);
        self.imp.module.set_value_type(v, ty);
        Ok(())
    }

    /// Records `table`, a dequantized lookup table, to be erased at the end
    /// if nothing else reads it.
    pub fn note_lookup_table(&mut self, table: ValueId) {
        self.imp.lookup_tables.push(table);
    }

    /// Appends `fp.constant` holding `data` with element type `elem`, located
    /// at the data's name.
    pub fn constant(&mut self, data: &TensorData, elem: Type) -> Result<ValueId, String> {
        let loc = self.imp.ctx.name_loc(&data.name);
        self.imp.constant_op(data, elem, loc)
    }

    /// Appends a rank-0 `fp.constant` of element type `elem` at the node's location.
    pub fn scalar(&mut self, value: f64, elem: Type) -> Result<ValueId, String> {
        let ty = self.imp.ctx.tensor_type(&[], elem);
        let dense = qopt_ir_core::DenseElements::from_f64(self.imp.ctx, ty, &[value])?;
        let value = self.imp.ctx.dense_attr(dense);
        let attrs = self.imp.ctx.dict_attr(&[("value", value)]);
        self.emit(fp_op::CONSTANT, &[], attrs)
    }

    /// Binds output `i` to `v`.
    pub fn set_output(&mut self, i: usize, v: ValueId) -> Result<(), String> {
        match self.node.output.get(i).filter(|n| !n.is_empty()) {
            Some(name) => self.imp.define(name, Slot::Value(v)),
            None => Ok(()),
        }
    }

    /// Binds output `i` to constant data.
    pub fn set_const_output(&mut self, i: usize, data: TensorData) -> Result<(), String> {
        let Some(name) = self.node.output.get(i).filter(|n| !n.is_empty()) else { return Ok(()) };
        self.imp.constants.push(ConstEntry { data, value: None });
        let index = self.imp.constants.len() - 1;
        self.imp.define(name, Slot::Constant(index))
    }

    /// Binds output 0 to whatever input 0 stands for (a value or constant data).
    pub fn forward_input(&mut self) -> Result<(), String> {
        let input = self.input_name(0).ok_or("input #0 is missing")?;
        let slot = self.imp.slots.get(input).copied().ok_or_else(|| {
            format!("value '{input}' is not defined before its use (ONNX nodes must be in topological order)")
        })?;
        match self.node.output.first().filter(|n| !n.is_empty()) {
            Some(name) => self.imp.define(name, slot),
            None => Ok(()),
        }
    }
}
