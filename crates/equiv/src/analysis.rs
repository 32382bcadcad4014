//! The e-class analysis: each class's IR type and, where it is known, its
//! constant value, folded with the interpreter's kernels (IR ops) and the
//! checker's own arithmetic ([`crate::builtins`]).
//!
//! A class that folds to a value gets the constant leaf of that value, so it
//! merges with every class holding the same bits. Under a relation that
//! tolerates rounding ([`Relation::tolerates_rounding`]) a computed float
//! value also merges with an IR constant of the same shape whose elements are
//! all within `ulps` of it; the largest distance used is recorded for the
//! report.
//!
//! Under `calibrated-range` a class may also hold per-channel lower bounds
//! the IR records ([`LowerBound`], put in by the bridge through
//! [`assume_lower_bound`]); classes that merge keep the larger bound of
//! each channel, since both hold of the one value.

use crate::builtins;
use crate::lang::{ConstKey, Node, EFFECT};
use egg::{DidMerge, EGraph, Id};
use qopt_interp::{KernelContext, KernelRegistry, Tensor};
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::{Context, FxHashMap, FxHasher, Traits, Type, TypeData};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Constants larger than this many elements are not folded by kernels.
const FOLD_LIMIT: usize = 1 << 25;

/// What the checks of one run share, keyed by interned IR handles that stay
/// valid for the run: the decoded value of each IR constant attribute and
/// each op folded on constant operands. A pipeline leaves most weights alone,
/// so each is decoded, hashed and dequantized once rather than per pass.
#[derive(Default)]
pub struct Memo {
    /// An IR constant's value, key, precision and type, by its attribute.
    pub constants: FxHashMap<qopt_ir_core::Attribute, (ConstKey, Arc<Tensor>, Precision, Type)>,
    /// A folded op's value and key (`None`: it does not fold).
    pub folds: FxHashMap<FoldKey, Option<(ConstKey, Arc<Tensor>)>>,
}

/// An op applied to constants: name, result, attributes, result type and
/// the operands' keys and types.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct FoldKey {
    name: qopt_ir_core::OpName,
    result: u32,
    attrs: qopt_ir_core::Attribute,
    ty: Type,
    operands: smallvec::SmallVec<[(ConstKey, Type); 4]>,
}

/// A known value.
#[derive(Clone, Debug)]
pub struct Constant {
    /// The value.
    pub value: Arc<Tensor>,
    /// Its content key.
    pub key: ConstKey,
    /// Whether it is a constant of the IR (not one the checker computed).
    pub from_ir: bool,
    /// For a value the checker's arithmetic computed, each element's bound
    /// on the magnitudes of the terms it was computed from
    /// ([`builtins::magnitude`]): rounding errors are committed at that
    /// scale, so a sum that cancels is compared in ulps of its terms, not of
    /// its small result. `None`: the value's own magnitude.
    pub magnitude: Option<Arc<Tensor>>,
}

/// Per-channel lower bounds of a value that the IR records from calibration
/// ([`qopt_ir_core::interfaces::RecordedRange`]): over the calibrated range,
/// every element of channel `c` along `axis` is at least `values[c]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LowerBound {
    /// The channel axis, counted from the front.
    pub axis: usize,
    /// The value's rank (to read an axis counted from the back).
    pub rank: usize,
    /// One bound per channel.
    pub values: Vec<f64>,
}

impl LowerBound {
    /// Both bounds of one value: per channel the larger (each holds on the
    /// calibrated range, so both do). `None` when they do not run along the
    /// same axis of the same number of channels.
    fn tightest(&self, other: &LowerBound) -> Option<LowerBound> {
        let fits =
            self.axis == other.axis && self.rank == other.rank && self.values.len() == other.values.len();
        fits.then(|| LowerBound {
            values: self.values.iter().zip(&other.values).map(|(a, b)| a.max(*b)).collect(),
            ..self.clone()
        })
    }
}

/// What the analysis knows of a class.
#[derive(Clone, Debug, Default)]
pub struct Data {
    /// The IR type of the value, where known.
    pub ty: Option<Type>,
    /// The value, where it is a constant.
    pub constant: Option<Constant>,
    /// Whether the value was compared with the IR's constants within the
    /// rounding tolerance already.
    pub approx_done: bool,
    /// The value's recorded per-channel lower bounds, under a relation that
    /// assumes them ([`Relation::assumes_recorded_ranges`]; the bridge puts
    /// them in, [`assume_lower_bound`]).
    pub lower: Option<Arc<LowerBound>>,
}

/// The analysis state: the context, kernels, the constant table and the
/// tolerance.
pub struct EqAnalysis<'a> {
    /// The context (types are interned by rules that build IR nodes).
    pub ctx: &'a mut Context,
    /// Values shared with the run's other checks.
    pub memo: &'a mut Memo,
    /// Kernels for folding IR ops.
    pub kernels: KernelRegistry,
    /// Every constant leaf's value.
    pub constants: FxHashMap<ConstKey, Arc<Tensor>>,
    /// The IR's float constants by shape, for matching within the tolerance.
    pub ir_float_leaves: FxHashMap<Vec<usize>, Vec<(ConstKey, Id)>>,
    /// The IR constants' keys, with the significand bits and smallest normal
    /// exponent of their float element type (ulps are measured in it).
    pub ir_keys: FxHashMap<ConstKey, Precision>,
    /// The IR type of constants whose type is part of their identity
    /// (quantized tensors: [`typed_key_of`]).
    pub const_types: FxHashMap<ConstKey, Type>,
    /// Classes of computed float constants by shape, for matching IR
    /// constants that appear after them.
    pub computed_floats: FxHashMap<Vec<usize>, Vec<Id>>,
    /// The leaf of each IR constant attribute already added.
    pub ir_constants_by_attr: FxHashMap<qopt_ir_core::Attribute, Id>,
    /// Argument types of the function being checked.
    pub arg_types: Vec<Type>,
    /// The relation checked.
    pub relation: Relation,
    /// Ulps a float constant may differ by under a rounding relation.
    pub ulps: u32,
    /// The largest ulp distance of an approximate match so far.
    pub max_ulps_used: u32,
    /// Approximate matches made.
    pub approx_matches: usize,
    /// Recorded ranges assumed ([`assume_lower_bound`]).
    pub ranges_assumed: usize,
}

impl<'a> EqAnalysis<'a> {
    /// An analysis over `ctx` for `relation`.
    pub fn new(
        ctx: &'a mut Context,
        memo: &'a mut Memo,
        kernels: KernelRegistry,
        relation: Relation,
        ulps: u32,
    ) -> EqAnalysis<'a> {
        EqAnalysis {
            ctx,
            memo,
            kernels,
            constants: FxHashMap::default(),
            ir_float_leaves: FxHashMap::default(),
            ir_keys: FxHashMap::default(),
            const_types: FxHashMap::default(),
            computed_floats: FxHashMap::default(),
            ir_constants_by_attr: FxHashMap::default(),
            arg_types: Vec::new(),
            relation,
            ulps,
            max_ulps_used: 0,
            approx_matches: 0,
            ranges_assumed: 0,
        }
    }
}

/// The content key of a tensor.
pub fn key_of(t: &Tensor) -> ConstKey {
    let mut h = FxHasher::default();
    h.write_u8(t.dtype() as u8);
    for &d in t.shape() {
        h.write_usize(d);
    }
    match t {
        Tensor::F32(a) => match a.as_slice() {
            Some(s) => s.iter().for_each(|x| h.write_u32(x.to_bits())),
            None => a.iter().for_each(|x| h.write_u32(x.to_bits())),
        },
        Tensor::F64(a) => match a.as_slice() {
            Some(s) => s.iter().for_each(|x| h.write_u64(x.to_bits())),
            None => a.iter().for_each(|x| h.write_u64(x.to_bits())),
        },
        Tensor::I8(a) => a.iter().for_each(|&x| h.write_i8(x)),
        Tensor::U8(a) => a.iter().for_each(|&x| h.write_u8(x)),
        Tensor::I16(a) => a.iter().for_each(|&x| h.write_i16(x)),
        Tensor::I32(a) => a.iter().for_each(|&x| h.write_i32(x)),
        Tensor::I64(a) => a.iter().for_each(|&x| h.write_i64(x)),
        Tensor::Bool(a) => a.iter().for_each(|&x| h.write_u8(u8::from(x))),
    }
    ConstKey { hash: h.finish(), len: t.len() as u64 }
}

/// The content key of a value of IR type `ty`: the stored integers of a
/// quantized tensor mean different reals under different parameters, so its
/// type is part of its identity; any other tensor is named by its content
/// alone (its storage type is in [`key_of`]).
pub fn typed_key_of(ctx: &Context, t: &Tensor, ty: Option<Type>) -> ConstKey {
    let key = key_of(t);
    match ty.filter(|&ty| is_quantized(ctx, ty)) {
        Some(ty) => {
            let mut h = FxHasher::default();
            h.write_u64(key.hash);
            ty.hash(&mut h);
            ConstKey { hash: h.finish(), len: key.len }
        }
        None => key,
    }
}

/// Whether `ty`'s elements are quantized.
pub fn is_quantized(ctx: &Context, ty: Type) -> bool {
    matches!(ctx.type_data(ctx.element_type(ty)), TypeData::Quant(_))
}

/// The type a type leaf class holds.
pub fn type_leaf(egraph: &EGraph<Node, EqAnalysis<'_>>, id: Id) -> Option<Type> {
    egraph[id].nodes.iter().find_map(|n| match n {
        Node::Type(t) => Some(*t),
        _ => None,
    })
}

/// The attribute dictionary an attribute leaf class holds.
pub fn attr_leaf(egraph: &EGraph<Node, EqAnalysis<'_>>, id: Id) -> Option<qopt_ir_core::Attribute> {
    egraph[id].nodes.iter().find_map(|n| match n {
        Node::Attr(a) => Some(*a),
        _ => None,
    })
}

/// The integer an integer leaf class holds.
pub fn int_leaf(egraph: &EGraph<Node, EqAnalysis<'_>>, id: Id) -> Option<i64> {
    egraph[id].nodes.iter().find_map(|n| match n {
        Node::Int(i) => Some(*i),
        _ => None,
    })
}

impl<'a> egg::Analysis<Node> for EqAnalysis<'a> {
    type Data = Data;

    fn make(egraph: &mut EGraph<Node, Self>, enode: &Node, _id: Id) -> Data {
        match enode {
            Node::Arg(i) => {
                Data { ty: egraph.analysis.arg_types.get(*i as usize).copied(), ..Data::default() }
            }
            Node::Const(key) => {
                let value = egraph.analysis.constants.get(key).cloned();
                let from_ir = egraph.analysis.ir_keys.contains_key(key);
                Data {
                    ty: egraph.analysis.const_types.get(key).copied(),
                    constant: value.map(|value| Constant { value, key: *key, from_ir, magnitude: None }),
                    approx_done: from_ir,
                    lower: None,
                }
            }
            Node::Attr(_) | Node::Type(_) | Node::Int(_) => Data::default(),
            Node::Op { result: EFFECT, .. } => Data::default(),
            Node::Op { name, result, children } => {
                // invariant: op nodes other than effects have [attributes, type,
                // operands...] (the bridge builds them so; rule parsing refuses fewer).
                let ty = type_leaf(egraph, children[1]);
                let constant = ty.and_then(|ty| folded(egraph, *name, *result, children, ty));
                Data { ty, constant, ..Data::default() }
            }
            Node::Fn { f, children } => {
                // invariant: rule parsing checks each builtin's arity.
                let operands: Option<Vec<&Constant>> = children[..builtins::value_arity(*f)]
                    .iter()
                    .map(|&c| egraph[c].data.constant.as_ref())
                    .collect();
                let axis = children.get(builtins::value_arity(*f)).and_then(|&c| int_leaf(egraph, c));
                let constant = operands.and_then(|ops| {
                    let values: Vec<Arc<Tensor>> = ops.iter().map(|k| k.value.clone()).collect();
                    let value = builtins::evaluate(*f, &values, axis)?;
                    let magnitudes: Vec<Option<Arc<Tensor>>> =
                        ops.iter().map(|k| k.magnitude.clone()).collect();
                    // A bound no larger than the value itself (no cancellation)
                    // says nothing: dropped, so products with it stay cheap.
                    let magnitude = builtins::magnitude(*f, &values, &magnitudes, axis)
                        .filter(|m| !builtins::bounded_by_itself(m, &value))
                        .map(Arc::new);
                    Some(Constant { magnitude, ..computed(value) })
                });
                Data { constant, ..Data::default() }
            }
        }
    }

    fn merge(&mut self, a: &mut Data, b: Data) -> DidMerge {
        let mut changed = DidMerge(false, false);
        match (a.ty, b.ty) {
            (None, Some(t)) => {
                a.ty = Some(t);
                changed.0 = true;
            }
            (Some(_), None) => changed.1 = true,
            _ => {}
        }
        match (&mut a.constant, b.constant) {
            (None, Some(c)) => {
                a.constant = Some(c);
                changed.0 = true;
            }
            (Some(_), None) => changed.1 = true,
            (Some(x), Some(y)) => {
                // The IR's own constant names the class; a bound on the terms
                // a computed value came from is kept whichever record stays.
                let magnitude = x.magnitude.clone().or(y.magnitude.clone());
                if x.magnitude.is_some() != y.magnitude.is_some() {
                    changed.0 |= x.magnitude.is_none();
                    changed.1 |= y.magnitude.is_none();
                }
                if !x.from_ir && y.from_ir {
                    *x = y;
                    changed.0 = true;
                } else if x.key != y.key {
                    changed.1 = true;
                }
                x.magnitude = magnitude;
            }
            (None, None) => {}
        }
        match (&a.lower, b.lower) {
            (None, Some(l)) => {
                a.lower = Some(l);
                changed.0 = true;
            }
            (Some(_), None) => changed.1 = true,
            (Some(x), Some(y)) if **x != *y => match x.tightest(&y) {
                Some(both) => {
                    changed.0 |= both != **x;
                    changed.1 |= both != *y;
                    a.lower = Some(Arc::new(both));
                }
                // Another axis: either holds; the class keeps its own.
                None => changed.1 = true,
            },
            _ => {}
        }
        if a.approx_done != b.approx_done {
            changed.0 |= !a.approx_done;
            changed.1 |= !b.approx_done;
            a.approx_done = true;
        }
        changed
    }

    fn modify(egraph: &mut EGraph<Node, Self>, id: Id) {
        let Some(constant) = egraph[id].data.constant.clone() else { return };
        // A computed value's own leaf: the node that computed it matches it
        // within the tolerance, with the bound on its terms the leaf lacks.
        if !constant.from_ir && egraph[id].nodes.iter().all(|n| matches!(n, Node::Const(_))) {
            return;
        }
        if !constant.from_ir {
            egraph.analysis.constants.entry(constant.key).or_insert_with(|| constant.value.clone());
            let leaf = egraph.add(Node::Const(constant.key));
            egraph.union(id, leaf);
        }
        let id = egraph.find(id);
        if egraph[id].data.approx_done || !egraph.analysis.relation.tolerates_rounding() {
            return;
        }
        egraph[id].data.approx_done = true;
        if !matches!(*constant.value, Tensor::F32(_) | Tensor::F64(_)) {
            return;
        }
        let shape = constant.value.shape().to_vec();
        let earlier = egraph.analysis.computed_floats.entry(shape.clone()).or_default();
        let earlier_computed = earlier.clone();
        earlier.push(id);
        let candidates = egraph.analysis.ir_float_leaves.get(&shape).cloned().unwrap_or_default();
        for (key, leaf) in candidates {
            approx_union(egraph, id, &constant, key, leaf);
        }
        // Two values the checker computed from different IR constants (a
        // normal form reached from both sides of a rescaling, `equalize`)
        // differ by the rounding of those constants: matched in f32 ulps.
        for other in earlier_computed {
            approx_union_computed(egraph, id, &constant, other);
        }
    }
}

/// Assumes that over the calibrated range every element of class `id` (of
/// IR type `ty`) on channel `c` along `axis` (negative from the back) is at
/// least `values[c]`, beside what the class knows already. Nothing is
/// assumed, and false returned, under a relation that does not assume
/// recorded ranges or when the bound does not fit `ty` (no static rank, or
/// another channel count).
pub fn assume_lower_bound(
    egraph: &mut EGraph<Node, EqAnalysis<'_>>,
    id: Id,
    ty: Type,
    axis: i64,
    values: Vec<f64>,
) -> bool {
    if !egraph.analysis.relation.assumes_recorded_ranges() {
        return false;
    }
    let Some(shape) = egraph.analysis.ctx.tensor_shape(ty) else { return false };
    let rank = shape.len();
    let Some(axis) =
        usize::try_from(if axis < 0 { axis + rank as i64 } else { axis }).ok().filter(|&a| a < rank)
    else {
        return false;
    };
    if usize::try_from(shape[axis]).ok() != Some(values.len()) || values.iter().any(|v| v.is_nan()) {
        return false;
    }
    let bound = LowerBound { axis, rank, values };
    let id = egraph.find(id);
    let data = &mut egraph[id].data;
    let merged = match &data.lower {
        Some(known) => known.tightest(&bound).unwrap_or_else(|| (**known).clone()),
        None => bound,
    };
    data.lower = Some(Arc::new(merged));
    true
}

/// Unites the class `id` of the computed value `value` with the IR constant
/// leaf `leaf` (key `key`) when they are within the tolerance.
fn approx_union(
    egraph: &mut EGraph<Node, EqAnalysis<'_>>,
    id: Id,
    computed: &Constant,
    key: ConstKey,
    leaf: Id,
) {
    if egraph.find(leaf) == egraph.find(id) {
        return;
    }
    let Some(ir) = egraph.analysis.constants.get(&key).cloned() else { return };
    let precision = egraph.analysis.ir_keys.get(&key).copied().unwrap_or(Precision::F32);
    let magnitude = computed.magnitude.as_deref();
    if let Some(ulps) = ulp_distance(&computed.value, &ir, precision, egraph.analysis.ulps, magnitude) {
        let analysis = &mut egraph.analysis;
        analysis.max_ulps_used = analysis.max_ulps_used.max(ulps);
        analysis.approx_matches += 1;
        egraph.union(id, leaf);
    }
}

/// Unites the class `id` of the computed value `computed` with the class
/// `other` of another computed value when they are within twice the
/// tolerance, in f32 ulps at each element's magnitude or the larger bound on
/// its terms: each was computed from IR constants rounded on its own side
/// (the tolerance an IR constant gets against a computed value), so their
/// distance is bounded by the sum.
fn approx_union_computed(egraph: &mut EGraph<Node, EqAnalysis<'_>>, id: Id, computed: &Constant, other: Id) {
    if egraph.find(other) == egraph.find(id) {
        return;
    }
    let Some(theirs) = egraph[other].data.constant.clone() else { return };
    if theirs.from_ir {
        return;
    }
    let magnitude = match (computed.magnitude.as_deref(), theirs.magnitude.as_deref()) {
        (Some(a), Some(b)) if a.shape() == b.shape() => {
            let larger: Vec<f64> = a.to_f64_vec().iter().zip(b.to_f64_vec()).map(|(x, y)| x.max(y)).collect();
            ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(a.shape()), larger).ok().map(Tensor::F64)
        }
        (Some(_), Some(_)) => return,
        (Some(m), None) | (None, Some(m)) => Some(m.clone()),
        (None, None) => None,
    };
    let limit = egraph.analysis.ulps.saturating_mul(2);
    if let Some(ulps) =
        ulp_distance(&computed.value, &theirs.value, Precision::F32, limit, magnitude.as_ref())
    {
        let analysis = &mut egraph.analysis;
        analysis.max_ulps_used = analysis.max_ulps_used.max(ulps);
        analysis.approx_matches += 1;
        egraph.union(id, other);
    }
}

/// Makes the constant leaf `id` an IR float constant of `precision` for
/// matching within the tolerance, and matches it against the computed
/// values seen so far.
pub fn register_ir_float_leaf(egraph: &mut EGraph<Node, EqAnalysis<'_>>, id: Id, precision: Precision) {
    let Some(constant) = egraph[id].data.constant.clone() else { return };
    let analysis = &mut egraph.analysis;
    analysis.ir_keys.entry(constant.key).or_insert(precision);
    let shape = constant.value.shape().to_vec();
    let leaves = analysis.ir_float_leaves.entry(shape.clone()).or_default();
    if leaves.iter().any(|(k, _)| *k == constant.key) {
        return;
    }
    leaves.push((constant.key, id));
    if !analysis.relation.tolerates_rounding() {
        return;
    }
    for computed in analysis.computed_floats.get(&shape).cloned().unwrap_or_default() {
        let Some(value) = egraph[computed].data.constant.clone() else { continue };
        approx_union(egraph, computed, &value, constant.key, id);
    }
}

/// A computed constant's record.
fn computed(value: Tensor) -> Constant {
    let key = key_of(&value);
    Constant { value: Arc::new(value), key, from_ir: false, magnitude: None }
}

/// The constant result `result` of op `name` on constant operands, folded
/// once per run ([`Memo::folds`]).
fn folded(
    egraph: &mut EGraph<Node, EqAnalysis<'_>>,
    name: qopt_ir_core::OpName,
    result: u32,
    children: &[Id],
    ty: Type,
) -> Option<Constant> {
    let attrs = attr_leaf(egraph, children[0])?;
    let mut operands = smallvec::SmallVec::new();
    for &c in &children[2..] {
        let data = &egraph[c].data;
        operands.push((data.constant.as_ref()?.key, data.ty?));
    }
    let key = FoldKey { name, result, attrs, ty, operands };
    let analysis = &mut egraph.analysis;
    let entry = match analysis.memo.folds.get(&key) {
        Some(entry) => entry.clone(),
        None => {
            let value = fold_op(egraph, name, result as usize, children, ty).map(|v| {
                let key = typed_key_of(egraph.analysis.ctx, &v, Some(ty));
                (key, Arc::new(v))
            });
            egraph.analysis.memo.folds.insert(key, value.clone());
            value
        }
    };
    entry.map(|(key, value)| Constant { value, key, from_ir: false, magnitude: None })
}

/// The value of result `result` of op `name` when every operand is a known
/// constant and the op is pure with a kernel.
fn fold_op(
    egraph: &EGraph<Node, EqAnalysis<'_>>,
    name: qopt_ir_core::OpName,
    result: usize,
    children: &[Id],
    result_ty: Type,
) -> Option<Tensor> {
    let analysis = &egraph.analysis;
    let def = analysis.ctx.op_def(name)?;
    if !def.has(Traits::PURE) || def.has(Traits::CONSTANT_LIKE) {
        return None;
    }
    let kernel = analysis.kernels.get(analysis.ctx.op_name_str(name))?;
    let attrs = attr_leaf(egraph, children[0])?;
    let mut operands = Vec::with_capacity(children.len() - 2);
    let mut operand_types = Vec::with_capacity(children.len() - 2);
    for &c in &children[2..] {
        let data = &egraph[c].data;
        let value = data.constant.as_ref()?.value.clone();
        if value.len() > FOLD_LIMIT {
            return None;
        }
        operands.push(value);
        operand_types.push(data.ty?);
    }
    // Every result's type is needed by multi-result kernels; a node knows only
    // its own, so fold single-result ops (and split-like ops by their first
    // result's type would be wrong).
    if def.results != qopt_ir_core::Arity::Exact(1) || result != 0 {
        return None;
    }
    let result_types = [result_ty];
    let mut kc = KernelContext::new(analysis.ctx, attrs, &result_types).with_operand_types(&operand_types);
    let refs: Vec<&Tensor> = operands.iter().map(|t| t.as_ref()).collect();
    let mut results = kernel(&mut kc, &refs).ok()?;
    if results.is_empty() {
        return None;
    }
    Some(results.swap_remove(0))
}

/// A float element type's significand bits and smallest normal exponent.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Precision {
    /// Stored significand bits.
    pub bits: i32,
    /// Exponent of the smallest normal number.
    pub min_exponent: i32,
}

impl Precision {
    /// f16.
    pub const F16: Precision = Precision { bits: 10, min_exponent: -14 };
    /// bf16.
    pub const BF16: Precision = Precision { bits: 7, min_exponent: -126 };
    /// f32.
    pub const F32: Precision = Precision { bits: 23, min_exponent: -126 };
    /// f64.
    pub const F64: Precision = Precision { bits: 52, min_exponent: -1022 };

    /// The spacing of values at magnitude `m`.
    fn ulp(self, m: f64) -> f64 {
        // The binary exponent of m from its bits (0 and subnormals: the
        // smallest), without log2 and powi: this runs once per element.
        let biased = ((m.to_bits() >> 52) & 0x7ff) as i32;
        let exponent = if biased == 0 { self.min_exponent } else { (biased - 1023).max(self.min_exponent) };
        power_of_two(exponent - self.bits)
    }
}

/// `2^e`, exactly.
fn power_of_two(e: i32) -> f64 {
    if (-1022..=1023).contains(&e) {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        2f64.powi(e)
    }
}

/// The largest distance in ulps (of the IR constant's element type,
/// `precision`, at each element's larger magnitude or its bound in
/// `magnitude`) between `computed` and the IR constant `ir`, if every element
/// is within `limit` ulps and both are float tensors of one shape.
pub fn ulp_distance(
    computed: &Tensor,
    ir: &Tensor,
    precision: Precision,
    limit: u32,
    magnitude: Option<&Tensor>,
) -> Option<u32> {
    if computed.shape() != ir.shape() || magnitude.is_some_and(|m| m.shape() != ir.shape()) {
        return None;
    }
    let bounds = magnitude.map(Tensor::to_f64_vec).unwrap_or_default();
    let mut largest = 0u32;
    let mut within = |i: usize, x: f64, y: f64| -> bool {
        if x == y || (x.is_nan() && y.is_nan()) {
            return true;
        }
        let magnitude = x.abs().max(y.abs()).max(bounds.get(i).copied().unwrap_or(0.0));
        if !magnitude.is_finite() {
            return false;
        }
        let distance = ((x - y).abs() / precision.ulp(magnitude)).ceil();
        if distance > f64::from(limit) {
            return false;
        }
        largest = largest.max(distance as u32);
        true
    };
    // The common pairs in one loop each, without a dynamic iterator.
    // Contiguous arrays as slices: iterating a dynamic-rank array element by
    // element is several times slower.
    let all_within = match (computed, ir) {
        (Tensor::F64(c), Tensor::F32(r)) => match (c.as_slice(), r.as_slice()) {
            (Some(c), Some(r)) => c.iter().zip(r).enumerate().all(|(i, (&x, &y))| within(i, x, f64::from(y))),
            _ => c.iter().zip(r.iter()).enumerate().all(|(i, (&x, &y))| within(i, x, f64::from(y))),
        },
        (Tensor::F64(c), Tensor::F64(r)) => {
            c.iter().zip(r.iter()).enumerate().all(|(i, (&x, &y))| within(i, x, y))
        }
        _ => float_values(computed)?.zip(float_values(ir)?).enumerate().all(|(i, (x, y))| within(i, x, y)),
    };
    all_within.then_some(largest)
}

/// The values of a float tensor in f64, in logical order.
fn float_values(t: &Tensor) -> Option<Box<dyn Iterator<Item = f64> + '_>> {
    match t {
        Tensor::F32(a) => Some(Box::new(a.iter().map(|&x| f64::from(x)))),
        Tensor::F64(a) => Some(Box::new(a.iter().copied())),
        _ => None,
    }
}

/// Adds a constant leaf holding `value`.
pub fn add_constant(egraph: &mut EGraph<Node, EqAnalysis<'_>>, value: Tensor) -> Id {
    let key = key_of(&value);
    egraph.analysis.constants.entry(key).or_insert_with(|| Arc::new(value));
    egraph.add(Node::Const(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulps_are_measured_at_the_larger_magnitude() {
        let a = Tensor::from_f32(&[3], vec![1.0, 2.0, -0.0]).unwrap();
        let b = Tensor::from_f32(&[3], vec![1.0 + f32::EPSILON, 2.0, 0.0]).unwrap();
        assert_eq!(ulp_distance(&a, &b, Precision::F32, 4, None), Some(1));
        let far = Tensor::from_f32(&[3], vec![1.0 + 8.0 * f32::EPSILON, 2.0, 0.0]).unwrap();
        assert_eq!(ulp_distance(&a, &far, Precision::F32, 4, None), None);
        assert_eq!(ulp_distance(&a, &far, Precision::F16, 4, None), Some(1));
        assert_eq!(ulp_distance(&a, &a, Precision::F32, 0, None), Some(0));
        // 1 - 0.9999999 computed in f32 is off by an ulp of 1, not of 1e-7.
        let small = Tensor::F64(ndarray::arr1(&[1.0 - 0.999_999_9]).into_dyn());
        let rounded = Tensor::from_f32(&[1], vec![1.0f32 - 0.999_999_9f32]).unwrap();
        assert_eq!(ulp_distance(&small, &rounded, Precision::F32, 4, None), None);
        let terms = Tensor::F64(ndarray::arr1(&[2.0]).into_dyn());
        assert!(ulp_distance(&small, &rounded, Precision::F32, 4, Some(&terms)).is_some());
    }
}
