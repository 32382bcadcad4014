//! The rule language's quantization vocabulary: the macros and conditions
//! that let `qnn` rules state an integer op's definition as
//! `quantize(float op(dequantize(...)))` (`docs/quant-semantics.md`), and
//! the attribute-dictionary macros those definitions need. [`crate::rules`]
//! parses them; the functions here evaluate them on the e-graph.
//!
//! Every function returns `None` (the rule does not fire at that match) when
//! its operands are not what it needs: an unknown type, a value that is not a
//! constant, a type that is not quantized.

use crate::analysis::{attr_leaf, type_leaf, typed_key_of, EqAnalysis};
use crate::lang::Node;
use egg::{EGraph, Id};
use qopt_interp::{KernelContext, Tensor};
use qopt_ir_core::{DenseElements, FloatKind, IntType, QuantParams, QuantType, Signedness, Type, TypeData};
use std::sync::Arc;

type Graph<'g, 'a> = &'g mut EGraph<Node, EqAnalysis<'a>>;

/// Stored values a `(domain ...)` may enumerate: 16-bit storage at most.
const MAX_DOMAIN_BITS: u8 = 16;

/// The type of class `id`: the type a type leaf holds, or a value's type.
pub fn type_of(egraph: &EGraph<Node, EqAnalysis<'_>>, id: Id) -> Option<Type> {
    type_leaf(egraph, id).or(egraph[id].data.ty)
}

/// The quantized element type of `ty`'s elements.
fn quant_of(egraph: &EGraph<Node, EqAnalysis<'_>>, ty: Type) -> Option<QuantType> {
    let ctx = &egraph.analysis.ctx;
    match ctx.type_data(ctx.element_type(ty)) {
        TypeData::Quant(q) => Some(q.clone()),
        _ => None,
    }
}

/// `(expressed ?v)`: the float tensor type that `?v`'s quantized elements
/// stand for, in `?v`'s shape.
pub fn expressed(egraph: Graph<'_, '_>, v: Id) -> Option<Id> {
    let ty = type_of(egraph, v)?;
    let q = quant_of(egraph, ty)?;
    let ctx = &mut *egraph.analysis.ctx;
    let shape = ctx.tensor_shape(ty)?.to_vec();
    let float = ctx.float_type(q.expressed);
    let tensor = ctx.tensor_type(&shape, float);
    Some(egraph.add(Node::Type(tensor)))
}

/// Adds a constant leaf holding `value`, of IR type `ty`.
fn typed_constant(egraph: Graph<'_, '_>, value: Tensor, ty: Type) -> Id {
    let key = typed_key_of(egraph.analysis.ctx, &value, Some(ty));
    let analysis = &mut egraph.analysis;
    analysis.constants.entry(key).or_insert_with(|| Arc::new(value));
    analysis.const_types.insert(key, ty);
    egraph.add(Node::Const(key))
}

/// The type of the bias of a layer with activation `x` and weight `w`
/// (§6.1), shaped like `b_ty`: i32 in units of `s_x ⊗₆₄ s_w[c]` with zero
/// point 0, per output channel when the weight is.
fn bias_type(egraph: Graph<'_, '_>, b_ty: Type, x: Id, w: Id) -> Option<Type> {
    let qx = quant_of(egraph, type_of(egraph, x)?)?;
    let qw = quant_of(egraph, type_of(egraph, w)?)?;
    let QuantParams::PerTensor { scale: s_x, .. } = qx.params else { return None };
    let ctx = &mut *egraph.analysis.ctx;
    let shape = ctx.tensor_shape(b_ty)?.to_vec();
    let channels = usize::try_from(*shape.first()?).ok()?;
    let params = match qw.params {
        QuantParams::PerTensor { scale, .. } => QuantParams::PerTensor { scale: s_x * scale, zero_point: 0 },
        // The weight's output channels (axis 0, or a transposed convolution's
        // axis 1): one scale per bias entry.
        QuantParams::PerAxis { ref scales, .. } if scales.len() == channels => QuantParams::PerAxis {
            axis: 0,
            scales: scales.iter().map(|&s_w| s_x * s_w).collect(),
            zero_points: vec![0; channels].into_boxed_slice(),
        },
        QuantParams::PerAxis { .. } => return None,
    };
    let bias = QuantType {
        storage: IntType { width: 32, signedness: Signedness::Signless },
        storage_min: i64::from(i32::MIN),
        storage_max: i64::from(i32::MAX),
        expressed: FloatKind::F32,
        params,
    };
    let elem = ctx.quant_type(bias);
    Some(ctx.tensor_type(&shape, elem))
}

/// `(as-bias ?b ?x ?w)`: the plain i32 constant `?b` read as the bias of a
/// layer with activation `?x` and weight `?w`: the same stored values, of the
/// bias type of §6.1.
pub fn as_bias(egraph: Graph<'_, '_>, b: Id, x: Id, w: Id) -> Option<Id> {
    let value = egraph[b].data.constant.as_ref()?.value.clone();
    let (Tensor::I32(_), Some(b_ty)) = (&*value, type_of(egraph, b)) else { return None };
    if quant_of(egraph, b_ty).is_some() {
        return None;
    }
    let ty = bias_type(egraph, b_ty, x, w)?;
    Some(typed_constant(egraph, (*value).clone(), ty))
}

/// `(rounded-bias ?b ?x ?w)`: the float constant bias `?b` of a layer with
/// activation `?x` and weight `?w` quantized as §6.1 defines,
/// `rne(b[c] / (s_x ⊗₆₄ s_w[c]))` in f64, into the bias type; `None` when a
/// value does not fit i32.
pub fn rounded_bias(egraph: Graph<'_, '_>, b: Id, x: Id, w: Id) -> Option<Id> {
    let value = egraph[b].data.constant.as_ref()?.value.clone();
    let b_ty = type_of(egraph, b)?;
    if !matches!(*value, Tensor::F32(_)) || value.rank() != 1 {
        return None;
    }
    let ty = bias_type(egraph, b_ty, x, w)?;
    let q = quant_of(egraph, ty)?;
    let scales: Vec<f64> = match &q.params {
        QuantParams::PerTensor { scale, .. } => vec![*scale; value.len()],
        QuantParams::PerAxis { scales, .. } => scales.to_vec(),
    };
    let mut stored = Vec::with_capacity(value.len());
    for (v, s) in value.to_f64_vec().into_iter().zip(scales) {
        let r = (v / s).round_ties_even();
        if !(s.is_normal() && s > 0.0 && (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&r)) {
            return None;
        }
        stored.push(r as i128);
    }
    let ctx = &*egraph.analysis.ctx;
    let dense = DenseElements::from_i128(ctx, ty, &stored).ok()?;
    let tensor = Tensor::from_dense(ctx, &dense).ok()?;
    Some(typed_constant(egraph, tensor, ty))
}

/// `(type-of ?v)`: the type of value `?v`.
pub fn type_of_value(egraph: Graph<'_, '_>, v: Id) -> Option<Id> {
    let ty = type_of(egraph, v)?;
    Some(egraph.add(Node::Type(ty)))
}

/// `(domain ?q)`: every stored value of `?q`'s per-tensor quantized element
/// type, `storage_min..=storage_max`, as a vector of that type.
pub fn domain(egraph: Graph<'_, '_>, q: Id) -> Option<Id> {
    let ty = type_of(egraph, q)?;
    let qt = quant_of(egraph, ty)?;
    if qt.storage.width > MAX_DOMAIN_BITS || !matches!(qt.params, QuantParams::PerTensor { .. }) {
        return None;
    }
    let values: Vec<i128> = (qt.storage_min..=qt.storage_max).map(i128::from).collect();
    let ctx = &mut *egraph.analysis.ctx;
    let elem = ctx.element_type(ty);
    let vector = ctx.tensor_type(&[values.len() as i64], elem);
    let dense = DenseElements::from_i128(ctx, vector, &values).ok()?;
    let tensor = Tensor::from_dense(ctx, &dense).ok()?;
    Some(typed_constant(egraph, tensor, vector))
}

/// The type leaf of a tensor of `shape` with the element type of `like`.
pub fn shaped_type(egraph: Graph<'_, '_>, like: Type, shape: &[i64]) -> Id {
    let ctx = &mut *egraph.analysis.ctx;
    let elem = ctx.element_type(like);
    let ty = ctx.tensor_type(shape, elem);
    egraph.add(Node::Type(ty))
}

/// `(shaped-like ?t ?v)`: the tensor type with `?t`'s element type and the
/// shape of `?v`'s type.
pub fn shaped_like(egraph: Graph<'_, '_>, t: Id, v: Id) -> Option<Id> {
    let (t, v) = (type_of(egraph, t)?, type_of(egraph, v)?);
    let shape = egraph.analysis.ctx.tensor_shape(v)?.to_vec();
    Some(shaped_type(egraph, t, &shape))
}

/// `(transposed-type ?v)`: the type of the matrix `?v` transposed.
pub fn transposed_type(egraph: Graph<'_, '_>, v: Id) -> Option<Id> {
    let ty = type_of(egraph, v)?;
    let &[rows, columns] = egraph.analysis.ctx.tensor_shape(ty)? else { return None };
    Some(shaped_type(egraph, ty, &[columns, rows]))
}

/// `(table-attrs ?c)`: the attributes `{table = ...}` of a `qnn.lookup`
/// whose table is the constant quantized vector `?c`, stored values in its
/// storage type.
pub fn table_attrs(egraph: Graph<'_, '_>, c: Id) -> Option<Id> {
    let value = egraph[c].data.constant.as_ref()?.value.clone();
    let qt = quant_of(egraph, type_of(egraph, c)?)?;
    let entries: Vec<i128> = value.to_f64_vec().into_iter().map(|v| v as i128).collect();
    let ctx = &mut *egraph.analysis.ctx;
    let storage = ctx.int_type(qt.storage.width, qt.storage.signedness);
    let ty = ctx.tensor_type(&[entries.len() as i64], storage);
    let dense = DenseElements::from_i128(ctx, ty, &entries).ok()?;
    let table = ctx.dense_attr(dense);
    let attrs = ctx.dict_attr(&[("table", table)]);
    Some(egraph.add(Node::Attr(attrs)))
}

/// `(attrs-without ?a NAME...)`: dictionary `?a` without the named entries.
pub fn attrs_without(egraph: Graph<'_, '_>, a: Id, names: &[String]) -> Option<Id> {
    let mut attrs = attr_leaf(egraph, a)?;
    let ctx = &mut *egraph.analysis.ctx;
    for name in names {
        if ctx.dict_get(attrs, name).is_some() {
            attrs = ctx.dict_remove(attrs, name);
        }
    }
    Some(egraph.add(Node::Attr(attrs)))
}

/// `(attrs-pick ?a FROM:TO...)`: a dictionary of `?a`'s entries `FROM`,
/// each renamed `TO` (`NAME` alone keeps the name); a missing entry is left
/// out.
pub fn attrs_pick(egraph: Graph<'_, '_>, a: Id, picks: &[(String, String)]) -> Option<Id> {
    let attrs = attr_leaf(egraph, a)?;
    let ctx = &mut *egraph.analysis.ctx;
    let entries: Vec<(&str, qopt_ir_core::Attribute)> =
        picks.iter().filter_map(|(from, to)| Some((to.as_str(), ctx.dict_get(attrs, from)?))).collect();
    let dict = ctx.dict_attr(&entries);
    Some(egraph.add(Node::Attr(dict)))
}

/// `(attrs-merge ?a ?b)`: `?a`'s entries with `?b`'s added (`?b` wins).
pub fn attrs_merge(egraph: Graph<'_, '_>, a: Id, b: Id) -> Option<Id> {
    let (mut merged, b) = (attr_leaf(egraph, a)?, attr_leaf(egraph, b)?);
    let ctx = &mut *egraph.analysis.ctx;
    let entries: Vec<(String, qopt_ir_core::Attribute)> =
        ctx.dict_entries(b).iter().map(|&(k, v)| (ctx.symbol_str(k).to_string(), v)).collect();
    for (key, value) in entries {
        merged = ctx.dict_set(merged, &key, value);
    }
    Some(egraph.add(Node::Attr(merged)))
}

/// `(zero-point-at-min ?t)`: `?t`'s quantized elements have every zero point
/// at the storage minimum, so quantizing applies a relu.
pub fn zero_point_at_min(egraph: &EGraph<Node, EqAnalysis<'_>>, t: Id) -> bool {
    let Some(q) = type_of(egraph, t).and_then(|ty| quant_of(egraph, ty)) else { return false };
    match &q.params {
        QuantParams::PerTensor { zero_point, .. } => *zero_point == q.storage_min,
        QuantParams::PerAxis { zero_points, .. } => zero_points.iter().all(|&z| z == q.storage_min),
    }
}

/// `(clip-saturates ?c ?t)`: the clip attributes `?c` have `min = 0` and a
/// `max` that quantizes (by the `qnn.quantize` kernel) to the storage maximum
/// of the per-tensor type `?t`, so quantizing to `?t` applies the clip's top.
pub fn clip_saturates(egraph: Graph<'_, '_>, c: Id, t: Id) -> bool {
    clip_top_is_storage_max(egraph, c, t).unwrap_or(false)
}

/// Whether clip attributes `c` have `min = 0` and a `max` quantizing to the
/// storage maximum of type `t`; `None` when they do not say.
fn clip_top_is_storage_max(egraph: Graph<'_, '_>, c: Id, t: Id) -> Option<bool> {
    let attrs = attr_leaf(egraph, c)?;
    let ty = type_of(egraph, t)?;
    let q = quant_of(egraph, ty)?;
    if !matches!(q.params, QuantParams::PerTensor { .. }) {
        return None;
    }
    let analysis = &mut egraph.analysis;
    let ctx = &mut *analysis.ctx;
    let (min, max) = (ctx.dict_get(attrs, "min")?, ctx.dict_get(attrs, "max")?);
    if ctx.attr_as_f64(min)? != 0.0 {
        return Some(false);
    }
    let max = ctx.attr_as_f64(max)?;
    let elem = ctx.element_type(ty);
    let (f32_ty, no_attrs) = (ctx.common().f32, ctx.dict_attr(&[]));
    let operand_ty = ctx.tensor_type(&[1], f32_ty);
    let result_ty = ctx.tensor_type(&[1], elem);
    let kernel = analysis.kernels.get(qopt_dialect_qnn::op_names::QUANTIZE)?;
    let (operand_types, result_types) = ([operand_ty], [result_ty]);
    let mut kc = KernelContext::new(ctx, no_attrs, &result_types).with_operand_types(&operand_types);
    let input = Tensor::from_f32(&[1], vec![max as f32]).ok()?;
    let stored = kernel(&mut kc, &[&input]).ok()?.first()?.to_f64_vec();
    Some(stored.first().copied()? >= q.storage_max as f64)
}

/// `(covers ?u ?t)`: per-tensor type `?u` is at least as fine as `?t` and
/// represents every real `?t` does, so requantizing through `?u` on the way
/// to `?t` only rounds.
pub fn covers(egraph: &EGraph<Node, EqAnalysis<'_>>, u: Id, t: Id) -> bool {
    let quant = |id| type_of(egraph, id).and_then(|ty| quant_of(egraph, ty));
    let (Some(qu), Some(qt)) = (quant(u), quant(t)) else { return false };
    let (
        QuantParams::PerTensor { scale: su, zero_point: zu },
        QuantParams::PerTensor { scale: st, zero_point: zt },
    ) = (&qu.params, &qt.params)
    else {
        return false;
    };
    let real = |q: i64, s: f64, z: i64| (q - z) as f64 * s;
    su <= st
        && real(qu.storage_min, *su, *zu) <= real(qt.storage_min, *st, *zt)
        && real(qu.storage_max, *su, *zu) >= real(qt.storage_max, *st, *zt)
}

/// `(same-element ?x ?t)`: the types of `?x` and `?t` (values or type
/// leaves) have one element type.
pub fn same_element(egraph: &EGraph<Node, EqAnalysis<'_>>, x: Id, t: Id) -> bool {
    let ctx = &egraph.analysis.ctx;
    match (type_of(egraph, x), type_of(egraph, t)) {
        (Some(a), Some(b)) => ctx.element_type(a) == ctx.element_type(b),
        _ => false,
    }
}

/// `(not-quantized ?x)`: the type of `?x` is known and not quantized.
pub fn not_quantized(egraph: &EGraph<Node, EqAnalysis<'_>>, x: Id) -> bool {
    type_of(egraph, x).is_some_and(|ty| quant_of(egraph, ty).is_none())
}
