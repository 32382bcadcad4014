//! IR to e-graph: a function body becomes e-nodes, arguments leaves,
//! constants leaves named by content, every other op one node per result
//! whose children are its attributes, its result type and its operands.
//!
//! The attribute child is the op's identity ([`identity_attrs`]): without
//! the annotations the op declares ([`Annotations`]) and without every
//! attribute equal to the default it declares ([`AttributeDefaults`]), so
//! `fp.conv2d {}` and `fp.conv2d {stride = [1, 1]}` are one node. Rules build
//! their op nodes through the same function.
//!
//! Under `calibrated-range`, an op whose attributes record a range for its
//! result ([`RecordedRange`]) also gives its class the recorded per-channel
//! lower bounds, which rules may assume ([`assume_recorded_range`]).

use crate::analysis::{add_constant, assume_lower_bound, typed_key_of, EqAnalysis, Precision};
use crate::lang::{Builtin, Node, EFFECT};
use egg::{EGraph, Id};
use qopt_interp::Tensor;
use qopt_ir_core::interfaces::{Annotations, AttributeDefaults, ChannelMinima, RecordedRange};
use qopt_ir_core::{
    AttrData, Attribute, Context, ElementKind, FloatKind, FxHashMap, Module, OpId, OpName, Traits, ValueId,
};
use std::sync::Arc;

/// A function added to the e-graph.
pub struct Added {
    /// The class of each value of the body.
    pub values: FxHashMap<ValueId, Id>,
    /// The returned values, in order.
    pub results: Vec<ValueId>,
    /// Ops without results (kept for their effect), in order, as nodes.
    pub effects: Vec<Id>,
    /// The body's ops with results, in program order.
    pub ops: Vec<OpId>,
}

/// Why a function cannot be checked.
pub type Unsupported = String;

/// `attrs` as the identity of an op named `op_name`: without its annotation
/// attributes and without each attribute equal to its declared default.
pub fn identity_attrs(ctx: &mut Context, op_name: qopt_ir_core::OpName, attrs: Attribute) -> Attribute {
    let Some(def) = ctx.op_def(op_name) else { return attrs };
    let annotations = def.interfaces.get::<Annotations>().copied();
    let defaults = def.interfaces.get::<AttributeDefaults>().copied();
    let attrs = match annotations {
        Some(Annotations(names)) => names.iter().fold(attrs, |a, name| {
            if ctx.dict_get(a, name).is_some() {
                ctx.dict_remove(a, name)
            } else {
                a
            }
        }),
        None => attrs,
    };
    match defaults {
        Some(defaults) => defaults.strip(ctx, attrs),
        None => attrs,
    }
}

/// The deepest chain of `func.call`s [`add_function`] expands.
pub const MAX_EXPANDED_CALL_DEPTH: usize = 64;

/// A function body being added: its ops, the next one to add, and the call
/// whose results its `func.return` defines (none for the checked function).
struct Frame {
    function: OpId,
    ops: Vec<OpId>,
    next: usize,
    call: Option<OpId>,
}

impl Frame {
    fn new(module: &Module, function: OpId, call: Option<OpId>) -> Frame {
        let body = module.first_block(module.region(function, 0));
        Frame { function, ops: module.block_ops(body).collect(), next: 0, call }
    }
}

/// Adds the body of `func` to `egraph`, its arguments numbered from
/// `first_arg`.
///
/// A `func.call` of a function of the module is expanded in place: the
/// callee's body is added with its arguments bound to the call's operands,
/// and the call's results are the values its `func.return` returns. So a
/// pass that outlines ops into a function (`partition`) is checked against
/// the ops it moved. Expansion uses an explicit stack of bodies, not
/// recursion; recursive calls, calls of declarations and chains deeper than
/// [`MAX_EXPANDED_CALL_DEPTH`] are [`Unsupported`].
pub fn add_function(
    egraph: &mut EGraph<Node, EqAnalysis<'_>>,
    module: &Module,
    func: OpId,
    first_arg: u32,
) -> Result<Added, Unsupported> {
    let body = module.first_block(module.region(func, 0));
    let mut values: FxHashMap<ValueId, Id> = FxHashMap::default();
    for (i, &arg) in module.block_args(body).iter().enumerate() {
        values.insert(arg, egraph.add(Node::Arg(first_arg + i as u32)));
    }
    let mut results = Vec::new();
    let mut effects = Vec::new();
    let mut ops = Vec::new();
    let mut frames = vec![Frame::new(module, func, None)];
    while let Some(frame) = frames.last_mut() {
        let Some(&op) = frame.ops.get(frame.next) else {
            frames.pop();
            continue;
        };
        frame.next += 1;
        let name = module.op_name(op);
        if name == OpName::RETURN {
            let returned: Vec<ValueId> = module.operands(op).collect();
            let call = frame.call;
            frames.pop();
            match call {
                None => results = returned,
                Some(call) => {
                    if returned.len() != module.num_results(call) {
                        return Err("a call's result count differs from its callee's".into());
                    }
                    for (i, v) in returned.into_iter().enumerate() {
                        let id = values.get(&v).copied().ok_or("a returned value is not defined")?;
                        values.insert(module.result(call, i), id);
                    }
                }
            }
            continue;
        }
        if name == OpName::CALL {
            let callee = callee_body(&egraph.analysis, module, op, &frames)?;
            for (&arg, v) in module
                .block_args(module.first_block(module.region(callee, 0)))
                .iter()
                .zip(module.operands(op))
            {
                let id =
                    values.get(&v).copied().ok_or("a call operand is defined outside the function body")?;
                values.insert(arg, id);
            }
            frames.push(Frame::new(module, callee, Some(op)));
            continue;
        }
        let ctx = &mut *egraph.analysis.ctx;
        if module.num_regions(op) > 0 {
            return Err(format!("'{}' has regions, which the checker does not model", ctx.op_name_str(name)));
        }
        let def = ctx.op_def(name);
        if def.is_some_and(|d| d.has(Traits::CONSTANT_LIKE)) {
            if let Some(id) = add_ir_constant(egraph, module, op)? {
                values.insert(module.result(op, 0), id);
                continue;
            }
        }
        let ctx = &mut *egraph.analysis.ctx;
        let attrs = identity_attrs(ctx, name, module.op_attrs(op));
        let attr_id = egraph.add(Node::Attr(attrs));
        let mut operands = smallvec::SmallVec::<[Id; 4]>::new();
        for v in module.operands(op) {
            let id = values.get(&v).copied().ok_or("an operand is defined outside the function body")?;
            operands.push(id);
        }
        if module.num_results(op) == 0 {
            let mut children = smallvec::SmallVec::<[Id; 4]>::new();
            children.push(attr_id);
            children.extend_from_slice(&operands);
            effects.push(egraph.add(Node::Op { name, result: EFFECT, children }));
        }
        if module.num_results(op) > 0 {
            ops.push(op);
        }
        for (i, r) in module.results(op).enumerate() {
            let ty = egraph.add(Node::Type(module.value_type(r)));
            let mut children = smallvec::SmallVec::<[Id; 4]>::new();
            children.push(attr_id);
            children.push(ty);
            children.extend_from_slice(&operands);
            let id = egraph.add(Node::Op { name, result: i as u32, children });
            values.insert(r, id);
        }
        if module.num_results(op) == 1 {
            if let Some(&id) = values.get(&module.result(op, 0)) {
                assume_recorded_range(egraph, module, op, id);
            }
        }
    }
    Ok(Added { values, results, effects, ops })
}

/// Under a relation that assumes the ranges the IR records
/// ([`Relation::assumes_recorded_ranges`]), what `op`'s attributes record of
/// its result (class `id`) through the op's [`RecordedRange`]: over the
/// calibrated range, the result is at least `min − offset` per channel, and
/// the value the record measured, the node `(chan-add result offset AXIS)`,
/// at least `min` (`absorb-bias`: the layer with its original bias, which
/// the rules then find in the model before the pass).
///
/// [`Relation::assumes_recorded_ranges`]: qopt_ir_core::equivalence::Relation::assumes_recorded_ranges
fn assume_recorded_range(egraph: &mut EGraph<Node, EqAnalysis<'_>>, module: &Module, op: OpId, id: Id) {
    if !egraph.analysis.relation.assumes_recorded_ranges() {
        return;
    }
    let ctx = &*egraph.analysis.ctx;
    let Some(range) =
        ctx.op_def(module.op_name(op)).and_then(|d| d.interfaces.get::<RecordedRange>()).copied()
    else {
        return;
    };
    let Some(ChannelMinima { min, offset }) = (range.read)(ctx, module.op_attrs(op)) else { return };
    let ty = module.value_type(module.result(op, 0));
    let stored: Vec<f64> = min.iter().zip(&offset).map(|(m, o)| m - o).collect();
    if offset.len() != min.len() || !assume_lower_bound(egraph, id, ty, range.axis, stored) {
        return;
    }
    if offset.iter().any(|&o| o != 0.0) {
        let offset = add_constant(egraph, Tensor::F64(ndarray::Array1::from(offset).into_dyn()));
        let axis = egraph.add(Node::Int(range.axis));
        let measured =
            egraph.add(Node::Fn { f: Builtin::ChanAdd, children: smallvec::smallvec![id, offset, axis] });
        assume_lower_bound(egraph, measured, ty, range.axis, min);
    }
    egraph.analysis.ranges_assumed += 1;
}

/// The function `call` calls, checked for expansion: a single-block body
/// taking as many arguments as the call passes, not already being expanded
/// (recursion), within the depth limit.
fn callee_body(
    analysis: &EqAnalysis<'_>,
    module: &Module,
    call: OpId,
    frames: &[Frame],
) -> Result<OpId, Unsupported> {
    let ctx = &*analysis.ctx;
    let name = match module.op_attr(ctx, call, "callee").map(|a| ctx.attr_data(a)) {
        Some(AttrData::SymbolRef(s)) => ctx.symbol_str(*s).to_string(),
        _ => return Err("a func.call has no callee".into()),
    };
    let callee = module
        .lookup_symbol(ctx, &name)
        .filter(|&f| module.op_name(f) == OpName::FUNC && module.num_regions(f) == 1)
        .ok_or_else(|| format!("@{name} is not a function of the module"))?;
    let blocks = module.blocks(module.region(callee, 0)).count();
    if blocks != 1 {
        return Err(format!("@{name} has {blocks} blocks; only single-block callees are expanded"));
    }
    if frames.iter().any(|f| f.function == callee) {
        return Err(format!("@{name} calls itself (recursion is not expanded)"));
    }
    if frames.len() >= MAX_EXPANDED_CALL_DEPTH {
        return Err(format!("calls nest deeper than {MAX_EXPANDED_CALL_DEPTH}"));
    }
    let args = module.block_args(module.first_block(module.region(callee, 0))).len();
    if args != module.num_operands(call) {
        return Err(format!(
            "@{name} takes {args} argument(s), the call passes {}",
            module.num_operands(call)
        ));
    }
    Ok(callee)
}

/// Adds a constant op's value as a leaf (`None` when it holds no dense value).
fn add_ir_constant(
    egraph: &mut EGraph<Node, EqAnalysis<'_>>,
    module: &Module,
    op: OpId,
) -> Result<Option<Id>, Unsupported> {
    let ctx = &*egraph.analysis.ctx;
    let Some(value) = module.op_attr(ctx, op, "value") else { return Ok(None) };
    let AttrData::Dense(dense) = ctx.attr_data(value) else { return Ok(None) };
    if dense.ty != module.value_type(module.result(op, 0)) {
        return Ok(None);
    }
    // Attributes are interned: a constant the pass left alone is the same
    // attribute on both sides, decoded and hashed once.
    if let Some(&id) = egraph.analysis.ir_constants_by_attr.get(&value) {
        return Ok(Some(id));
    }
    let (key, tensor, precision, ty) = match egraph.analysis.memo.constants.get(&value) {
        Some(entry) => entry.clone(),
        None => {
            let ty = dense.ty;
            let tensor = Tensor::from_dense(ctx, dense).map_err(|e| format!("constant: {e}"))?;
            let precision = match qopt_ir_core::element_kind(ctx, ctx.element_type(ty)) {
                Some(ElementKind::Float(FloatKind::F16)) => Precision::F16,
                Some(ElementKind::Float(FloatKind::BF16)) => Precision::BF16,
                Some(ElementKind::Float(FloatKind::F64)) => Precision::F64,
                _ => Precision::F32,
            };
            let entry = (typed_key_of(ctx, &tensor, Some(ty)), Arc::new(tensor), precision, ty);
            egraph.analysis.memo.constants.insert(value, entry.clone());
            entry
        }
    };
    let float = matches!(*tensor, Tensor::F32(_) | Tensor::F64(_));
    let shape = tensor.shape().to_vec();
    let analysis = &mut egraph.analysis;
    analysis.ir_keys.insert(key, precision);
    analysis.const_types.insert(key, ty);
    analysis.constants.entry(key).or_insert(tensor);
    let id = egraph.add(Node::Const(key));
    egraph.analysis.ir_constants_by_attr.insert(value, id);
    if float {
        let leaves = egraph.analysis.ir_float_leaves.entry(shape).or_default();
        if !leaves.iter().any(|(k, _)| *k == key) {
            leaves.push((key, id));
        }
    }
    Ok(Some(id))
}
