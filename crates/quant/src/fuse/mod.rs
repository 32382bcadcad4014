//! The driver of `fuse` (the pass is [`crate::passes::fuse`]): the realize
//! step. Float ops between `qnn.dequantize` and
//! `qnn.quantize` become integer ops, so the quantize/dequantize pairs that
//! `expand-fakeq` left disappear, up to one `qnn.quantize` at the input and
//! one `qnn.dequantize` at the output of a network.
//!
//! In program order (one walk, no recursion), for each float op:
//!
//! 1. **Patterns** ([`FusionPatterns`]): when the op has a pattern, its result
//!    (after an optional `fp.relu` or `fp.clip {min = 0}`) is used only by
//!    `qnn.quantize` ops, and the pattern accepts the operands, the quantized op
//!    it builds replaces those quantizes. When they convert to several types,
//!    the op computes the one at least as fine as every other that holds every
//!    real they hold, and each other type gets one `qnn.requantize` of it,
//!    which only rounds; when no type covers the others, each type gets a
//!    quantized op of its own (a requantize would lose range or precision). An activation the pattern cannot fuse (`qnn.add`
//!    has no relu form) is dropped when the output type already applies it
//!    (zero point at the storage minimum; for `clip(0, c)`, `c` quantizes to
//!    the storage maximum: [`output_applies`]), the quantized op then
//!    computing the activation's value; otherwise a relu is applied to the
//!    quantized result, which is exact: relu commutes with quantization
//!    (`quant-semantics.md` §9), and a clip keeps the op float. A quantized op
//!    that computes the activation's value is located `fused[<op>,
//!    <activation>]`, so `qrun --compare` measures it against the activation.
//!    Ops with the
//!    `LookupActivation` interface (sigmoid, tanh, gelu, hard_swish, ...)
//!    match the `fused-lookup` pattern: a `qnn.lookup` whose table is the op
//!    (and the relu or clip after it) run by the interpreter's kernels on every
//!    stored input of at most 8 bits, so it equals the float ops bit for bit
//!    (§7.5).
//! 2. **Quant-agnostic ops** (`QuantAgnostic` trait: reshape, flatten,
//!    transpose, split, strided_slice, zero pad, max_pool, relu, and resize in
//!    nearest mode: `qopt_dialect_fp::is_quant_agnostic`) whose float
//!    operands are all dequantized from one per-tensor type run on the
//!    integers directly; each result is dequantized for its users, exactly the
//!    old value (§9).
//! 3. **Pairs**: `qnn.quantize(qnn.dequantize(q))` becomes `q` when the types
//!    are equal and `qnn.requantize(q)` otherwise (§5: integer only; it may
//!    differ from the float round trip by one step at ties), one requantize
//!    per value and type.
//! 4. **Duplicates**: a quantize, dequantize or requantize of a value to the
//!    type an earlier one in its block already converts it to is replaced by
//!    that one, so no value is quantized twice with equal parameters.
//!
//! `qnn.stop_fusion` is never fused across: it is neither a dequantize nor a
//! quantize, so no site reaches through it. An op marked `qnn.skip` (the user
//! skipped it: `insert-observers{skip=[...]}`) is neither rewritten nor fused
//! into its producer as an activation; it stays float. Dequantizes and constants left
//! without users are erased. Ops that stay float (no pattern, an operand that
//! is not quantized, a float user) are left as they are for `quant-lint` to
//! report. Statistics: one per pattern used, under its name (`fused-conv2d`,
//! `fused-lookup`), `quant-agnostic-ops`, `requantizes`, `pairs-removed`,
//! `conversions-merged`.

pub mod patterns;

use crate::fuse::patterns::{
    defined_by, is_quantized_tensor, Activation, FuseSite, FusionPatterns, QuantPattern, SiteOperand,
};
use crate::quantizable::runs_on_integers;
use crate::records::hints::is_skipped;
use qopt_dialect_fp::constants::erase_if_unused_constant;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::fixed_point::{quantize_f32, scale_f32};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::quant_element;
use qopt_ir_core::{
    Attribute, BlockId, Context, FxHashMap, InsertPoint, Location, Module, OpId, OpName, OperationState,
    PassError, QuantParams, Rewriter, Type, TypeData, ValueId,
};
use std::sync::Arc;

/// Runs the four steps above over `module`, counting what each did.
pub fn fuse_module(ctx: &mut Context, module: &mut Module) -> Result<Stats, PassError> {
    let candidates: Vec<OpId> = module.ops_where(|op| ctx.op_name_str(module.op_name(op)).starts_with("fp."));
    let mut stats = Stats::default();
    for op in candidates {
        if module.is_erased(op) || is_skipped(ctx, module, op) {
            continue;
        }
        if !fuse_pattern(ctx, module, op, &mut stats)? {
            run_on_integers(ctx, module, op, &mut stats)?;
        }
    }
    fold_pairs(ctx, module, &mut stats);
    merge_conversions(ctx, module, &mut stats);
    Ok(stats)
}

/// What [`fuse_module`] did.
#[derive(Default)]
pub struct Stats {
    /// Sites fused, per pattern name.
    pub fused: Vec<(&'static str, u64)>,
    /// Quant-agnostic ops run on integers.
    pub agnostic: u64,
    /// Requantizes inserted.
    pub requantizes: u64,
    /// Quantize/dequantize pairs removed.
    pub pairs_removed: u64,
    /// Conversions merged into an earlier equal one.
    pub merged: u64,
}

impl Stats {
    fn fused(&mut self, name: &'static str) {
        match self.fused.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => self.fused.push((name, 1)),
        }
    }
    /// Everything counted.
    pub fn total(&self) -> u64 {
        self.fused.iter().map(|(_, n)| n).sum::<u64>()
            + self.agnostic
            + self.requantizes
            + self.pairs_removed
            + self.merged
    }
}

/// The operand of `op` as a site operand.
fn site_operand(ctx: &Context, module: &Module, value: ValueId) -> SiteOperand {
    match defined_by(ctx, module, value, qnn_op::DEQUANTIZE) {
        Some(d) => SiteOperand::Quantized(module.operand(d, 0)),
        None => SiteOperand::Float(value),
    }
}

/// The activation after `value` (its only user, if a relu or a clip at 0
/// from below, not marked skipped) and the value it ends in.
fn activation_after(ctx: &Context, module: &Module, value: ValueId) -> (Activation, Option<OpId>, ValueId) {
    let none = (Activation::None, None, value);
    let [user] = module.users(value)[..] else { return none };
    if module.num_results(user) != 1 || module.num_operands(user) != 1 || is_skipped(ctx, module, user) {
        return none;
    }
    let out = module.result(user, 0);
    if module.op_is(ctx, user, fp_op::RELU) {
        return (Activation::Relu, Some(user), out);
    }
    if module.op_is(ctx, user, fp_op::CLIP) {
        let bound = |name| module.op_attr(ctx, user, name);
        let is_zero = |a: Option<qopt_ir_core::Attribute>| a.and_then(|a| ctx.attr_as_f64(a)) == Some(0.0);
        let positive =
            |a: Option<qopt_ir_core::Attribute>| a.and_then(|a| ctx.attr_as_f64(a)).is_some_and(|m| m > 0.0);
        if is_zero(bound("min")) && positive(bound("max")) {
            if let Some(max) = bound("max") {
                return (Activation::Clip(max), Some(user), out);
            }
        }
    }
    none
}

/// The `qnn.quantize` users of `value` (all its users must be), in use order.
fn quantize_users(ctx: &Context, module: &Module, value: ValueId) -> Option<Vec<OpId>> {
    let users = module.users(value);
    let all = !users.is_empty() && users.iter().all(|&u| module.op_is(ctx, u, qnn_op::QUANTIZE));
    all.then_some(users)
}

/// Tries the patterns for `op`; true if one rewrote it.
fn fuse_pattern(
    ctx: &mut Context,
    module: &mut Module,
    op: OpId,
    stats: &mut Stats,
) -> Result<bool, PassError> {
    let name = ctx.op_name_str(module.op_name(op)).to_string();
    let Some(def) = ctx.op_def(module.op_name(op)) else { return Ok(false) };
    let patterns: Vec<_> = FusionPatterns::of(ctx).for_op(def).cloned().collect();
    if patterns.is_empty() || module.num_results(op) != 1 {
        return Ok(false);
    }
    let operands: Vec<SiteOperand> = module.operands(op).map(|v| site_operand(ctx, module, v)).collect();
    if operands.iter().all(|o| matches!(o, SiteOperand::Float(_))) {
        return Ok(false);
    }
    let (activation, activation_op, end) = activation_after(ctx, module, module.result(op, 0));
    let Some(quantizes) = quantize_users(ctx, module, end) else { return Ok(false) };
    let output = module.value_type(module.result(quantizes[0], 0));
    let others_per_tensor = quantizes.iter().all(|&q| {
        let ty = module.value_type(module.result(q, 0));
        ty == output
            || quant_element(ctx, ty).is_some_and(|q| matches!(q.params, QuantParams::PerTensor { .. }))
    });
    if !others_per_tensor {
        return Ok(false);
    }
    // The quantized op computes the end of the chain: a fused location whose
    // last part is the activation's (or the op's), for layer-by-layer
    // comparison.
    let root_loc = module.op_loc(op);
    let chain_loc = match activation_op {
        Some(a) => {
            let a_loc = module.op_loc(a);
            ctx.fused_loc(&[root_loc, a_loc])
        }
        None => root_loc,
    };
    // One quantized op for the type that covers the others (they requantize
    // from it), or else one per type.
    let mut built: Vec<ValueId> = Vec::new();
    for output in fused_outputs(ctx, module, &quantizes) {
        let site = Site { op, operands: &operands, activation, activation_op, output, root_loc, chain_loc };
        match build_fused(ctx, module, &patterns, &site, &name)? {
            Some((fused, pattern)) => {
                built.push(fused);
                stats.fused(pattern);
            }
            None if built.is_empty() => return Ok(false),
            // The other types requantize from what was built.
            None => break,
        }
    }
    replace_quantizes(ctx, module, &quantizes, &built, stats);
    if let Some(a) = activation_op {
        let _ = module.erase_op(a);
    }
    erase_with_dead_operands(ctx, module, op);
    Ok(true)
}

/// What [`build_fused`] fuses: the float op, its operands, the activation
/// after it and the quantized type to compute.
struct Site<'s> {
    op: OpId,
    operands: &'s [SiteOperand],
    activation: Activation,
    activation_op: Option<OpId>,
    output: Type,
    root_loc: Location,
    chain_loc: Location,
}

/// The quantized types to build a fused op for, given the quantizes of its
/// value: the one type at least as fine as every other whose range holds
/// each other's (the others then only round when they requantize from it),
/// or else every distinct type, each computed exactly by its own op.
fn fused_outputs(ctx: &Context, module: &Module, quantizes: &[OpId]) -> Vec<Type> {
    let mut types: Vec<Type> = Vec::new();
    for &q in quantizes {
        let ty = module.value_type(module.result(q, 0));
        if !types.contains(&ty) {
            types.push(ty);
        }
    }
    let covering = types.iter().copied().find(|&t| types.iter().all(|&u| t == u || covers(ctx, t, u)));
    match covering {
        Some(t) => vec![t],
        None => types,
    }
}

/// Whether per-tensor type `fine` has a scale at most `coarse`'s and holds
/// every real `coarse` does.
fn covers(ctx: &Context, fine: Type, coarse: Type) -> bool {
    let (Some(f), Some(c)) = (quant_element(ctx, fine), quant_element(ctx, coarse)) else { return false };
    let (
        QuantParams::PerTensor { scale: sf, zero_point: zf },
        QuantParams::PerTensor { scale: sc, zero_point: zc },
    ) = (&f.params, &c.params)
    else {
        return false;
    };
    let real = |q: i64, s: f64, z: i64| (q - z) as f64 * s;
    sf <= sc
        && real(f.storage_min, *sf, *zf) <= real(c.storage_min, *sc, *zc)
        && real(f.storage_max, *sf, *zf) >= real(c.storage_max, *sc, *zc)
}

/// Builds the quantized op computing `site.output` with the first pattern
/// that accepts the site: with the activation fused in, or else without it
/// (dropped when the output type already applies it, so the quantized op
/// computes the activation's value, or a relu applied to the quantized
/// result). Returns the value and the pattern's name.
fn build_fused(
    ctx: &mut Context,
    module: &mut Module,
    patterns: &[Arc<dyn QuantPattern>],
    site: &Site<'_>,
    name: &str,
) -> Result<Option<(ValueId, &'static str)>, PassError> {
    let (activation, output, root_loc) = (site.activation, site.output, site.root_loc);
    let mut attempts = vec![(activation, Tail::Fused)];
    if activation != Activation::None {
        if output_applies(ctx, activation, output) {
            attempts.push((Activation::None, Tail::Applied));
        } else if activation == Activation::Relu {
            attempts.push((Activation::None, Tail::IntegerRelu));
        }
    }
    for pattern in patterns {
        for &(act, tail) in &attempts {
            let fuse_site =
                FuseSite { op: site.op, operands: site.operands.to_vec(), activation: act, output };
            let mut rw = Rewriter::new(ctx, module);
            rw.set_insertion_point(InsertPoint::Before(site.op));
            // Followed by a relu of its own, the op computes the root's value.
            rw.set_loc(if tail == Tail::IntegerRelu { root_loc } else { site.chain_loc });
            let built = pattern
                .rewrite(&mut rw, &fuse_site)
                .map_err(|e| PassError::from(format!("fusing {} ({}): {e}", name, pattern.name())))?;
            let Some(mut fused) = built else {
                // A declined pattern may have made helper ops; drop them.
                let created = rw.take_changes().created;
                for &c in created.iter().rev() {
                    let _ = rw.module.erase_op(c);
                }
                continue;
            };
            if tail == Tail::IntegerRelu {
                // relu on the quantized result: max(q, zp), exact (§9).
                let relu = rw.ctx.op_name(fp_op::RELU);
                let at = site.activation_op.map_or(root_loc, |a| rw.module.op_loc(a));
                let r = rw.create(OperationState::new(relu).operands(&[fused]).results(&[output]).loc(at));
                fused = rw.module.result(r, 0);
            }
            return Ok(Some((fused, pattern.name())));
        }
    }
    Ok(None)
}

/// How the activation after a fused op is realized.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Tail {
    /// The pattern fused it (or there is none).
    Fused,
    /// The output type applies it: every value it changes quantizes to what
    /// its result quantizes to, so it is dropped.
    Applied,
    /// A relu on the quantized result, `max(q, zp)`.
    IntegerRelu,
}

/// Whether quantizing to `output` already applies `activation`: the zero
/// point is the storage minimum (whatever is below real 0 saturates to it, as
/// 0 does), and for `clip(0, c)` `c` quantizes to the storage maximum
/// (whatever is above `c` saturates to it too). Then
/// `quantize(activation(y)) = quantize(y)` for every `y`, and the quantized
/// op alone computes the activation's quantized value, bit for bit.
fn output_applies(ctx: &Context, activation: Activation, output: Type) -> bool {
    let Some(q) = quant_element(ctx, output) else { return false };
    let QuantParams::PerTensor { scale, zero_point } = q.params else { return false };
    if zero_point != q.storage_min {
        return false;
    }
    match activation {
        Activation::None | Activation::Relu => true,
        Activation::Clip(max) => ctx.attr_as_f64(max).is_some_and(|c| {
            let (qmin, qmax) = (q.storage_min, q.storage_max);
            quantize_f32(c as f32, scale_f32(scale), zero_point, qmin, qmax) == qmax
        }),
    }
}

/// Replaces each quantize in `quantizes` (all of one value) by the value of
/// `built` of its type, or by one shared requantize of `built[0]` per other
/// type.
fn replace_quantizes(
    ctx: &mut Context,
    module: &mut Module,
    quantizes: &[OpId],
    built: &[ValueId],
    stats: &mut Stats,
) {
    let mut by_type: FxHashMap<Type, ValueId> = FxHashMap::default();
    for &v in built {
        by_type.insert(module.value_type(v), v);
    }
    let fused = built[0];
    for &q in quantizes {
        let result = module.result(q, 0);
        let ty = module.value_type(result);
        let replacement = match by_type.get(&ty) {
            Some(&v) => v,
            None => {
                let v = requantize_after(ctx, module, fused, ty);
                stats.requantizes += 1;
                by_type.insert(ty, v);
                v
            }
        };
        module.replace_all_uses(result, replacement);
        let _ = module.erase_op(q);
    }
}

/// `qnn.requantize(value) : ty`, placed right after `value`'s definition.
fn requantize_after(ctx: &mut Context, module: &mut Module, value: ValueId, ty: Type) -> ValueId {
    let def = module.defining_op(value);
    let loc = module.op_loc(def);
    let name = ctx.op_name(qnn_op::REQUANTIZE);
    let op = module.create_op(OperationState::new(name).operands(&[value]).results(&[ty]).loc(loc));
    module.insert_op_after(def, op);
    module.result(op, 0)
}

/// Erases `op`, then each of its operands' dequantizes (and their constants)
/// left without users; an operand used twice (`concat(x, x)`) is looked at
/// once.
fn erase_with_dead_operands(ctx: &Context, module: &mut Module, op: OpId) {
    let mut old_operands: Vec<ValueId> = Vec::with_capacity(module.num_operands(op));
    for v in module.operands(op) {
        if !old_operands.contains(&v) {
            old_operands.push(v);
        }
    }
    let _ = module.erase_op(op);
    for v in old_operands {
        erase_dead_dequantize(ctx, module, v);
    }
}

/// Erases `value`'s defining dequantize when nothing uses it any more, and
/// then its operand's constant if that is unused too.
fn erase_dead_dequantize(ctx: &Context, module: &mut Module, value: ValueId) {
    if let Some(d) = defined_by(ctx, module, value, qnn_op::DEQUANTIZE) {
        if !module.op_has_uses(d) {
            let source = module.operand(d, 0);
            let _ = module.erase_op(d);
            erase_if_unused_constant(ctx, module, source);
        }
    } else {
        erase_if_unused_constant(ctx, module, value);
    }
}

/// Runs a quant-agnostic `fp` op on the integers when its float tensor
/// operands are all dequantized from one per-tensor quantized type: the op
/// is rebuilt on the quantized values with results of that element type,
/// each dequantized for the old users (§9: the same real values).
fn run_on_integers(
    ctx: &mut Context,
    module: &mut Module,
    op: OpId,
    stats: &mut Stats,
) -> Result<(), PassError> {
    if !runs_on_integers(ctx, module, op) || module.num_results(op) == 0 {
        return Ok(());
    }
    let mut element: Option<Type> = None;
    let mut operands = Vec::with_capacity(module.num_operands(op));
    for v in module.operands(op) {
        let ty = module.value_type(v);
        if !is_float_tensor_type(ctx, ty) {
            operands.push(v);
            continue;
        }
        let Some(d) = defined_by(ctx, module, v, qnn_op::DEQUANTIZE) else { return Ok(()) };
        let q = module.operand(d, 0);
        let q_ty = module.value_type(q);
        let Some(quant) = quant_element(ctx, q_ty) else { return Ok(()) };
        if !matches!(quant.params, QuantParams::PerTensor { .. }) {
            return Ok(());
        }
        let elem = ctx.element_type(q_ty);
        if element.is_some_and(|e| e != elem) {
            return Ok(());
        }
        element = Some(elem);
        operands.push(q);
    }
    let Some(element) = element else { return Ok(()) };
    let mut result_types = Vec::with_capacity(module.num_results(op));
    for r in module.results(op) {
        let ty = module.value_type(r);
        if !is_float_tensor_type(ctx, ty) {
            return Ok(());
        }
        let Some(shape) = ctx.tensor_shape(ty).map(<[i64]>::to_vec) else { return Ok(()) };
        result_types.push(ctx.tensor_type(&shape, element));
    }
    let (name, attrs, loc) = (module.op_name(op), module.op_attrs(op), module.op_loc(op));
    let new = module.create_op(
        OperationState::new(name).operands(&operands).results(&result_types).attrs(attrs).loc(loc),
    );
    module.insert_op_before(op, new);
    let dequantize = ctx.op_name(qnn_op::DEQUANTIZE);
    let old_results: Vec<ValueId> = module.results(op).collect();
    for (i, old) in old_results.into_iter().enumerate() {
        let float_ty = module.value_type(old);
        let q = module.result(new, i);
        let d =
            module.create_op(OperationState::new(dequantize).operands(&[q]).results(&[float_ty]).loc(loc));
        module.insert_op_before(op, d);
        module.replace_all_uses(old, module.result(d, 0));
    }
    erase_with_dead_operands(ctx, module, op);
    stats.agnostic += 1;
    Ok(())
}

/// Whether `ty` is a tensor of f32, f16 or bf16 (not quantized).
fn is_float_tensor_type(ctx: &Context, ty: Type) -> bool {
    matches!(ctx.type_data(ty), TypeData::Tensor { .. })
        && !is_quantized_tensor(ctx, ty)
        && matches!(ctx.type_data(ctx.element_type(ty)), TypeData::Float(_))
}

/// `qnn.quantize(qnn.dequantize(q))` into `q` (same type) or one
/// `qnn.requantize(q)` per value and per-tensor type.
fn fold_pairs(ctx: &mut Context, module: &mut Module, stats: &mut Stats) {
    let quantizes: Vec<OpId> =
        module.ops_where(|op| module.op_is(ctx, op, qnn_op::QUANTIZE) && module.num_operands(op) == 1);
    let mut made: FxHashMap<(ValueId, Type), ValueId> = FxHashMap::default();
    for q in quantizes {
        let Some(d) = defined_by(ctx, module, module.operand(q, 0), qnn_op::DEQUANTIZE) else { continue };
        let source = module.operand(d, 0);
        let result = module.result(q, 0);
        let ty = module.value_type(result);
        let replacement = if module.value_type(source) == ty {
            stats.pairs_removed += 1;
            source
        } else if let Some(&v) = made.get(&(source, ty)) {
            stats.pairs_removed += 1;
            v
        } else {
            let per_tensor =
                quant_element(ctx, ty).is_some_and(|t| matches!(t.params, QuantParams::PerTensor { .. }));
            let expressed_ok = matches!(ctx.type_data(module.value_type(source)), TypeData::Tensor { .. });
            if !per_tensor || !expressed_ok {
                continue;
            }
            let name = ctx.op_name(qnn_op::REQUANTIZE);
            let loc = module.op_loc(q);
            let r = module.create_op(OperationState::new(name).operands(&[source]).results(&[ty]).loc(loc));
            module.insert_op_before(q, r);
            let v = module.result(r, 0);
            made.insert((source, ty), v);
            stats.requantizes += 1;
            v
        };
        module.replace_all_uses(result, replacement);
        let _ = module.erase_op(q);
        if !module.op_has_uses(d) {
            let _ = module.erase_op(d);
        }
    }
}

/// Merges conversions that compute the same value: a `qnn.quantize`,
/// `qnn.dequantize` or `qnn.requantize` of the same operand to the same type
/// (and the same attributes, the calibrated range of a quantize aside) as an
/// earlier one in its block is replaced by that one. So no value is
/// quantized twice with equal parameters, and after the pairs are folded
/// each distinct parameter set of a value has one conversion.
fn merge_conversions(ctx: &mut Context, module: &mut Module, stats: &mut Stats) {
    let names = [qnn_op::QUANTIZE, qnn_op::DEQUANTIZE, qnn_op::REQUANTIZE];
    let conversions: Vec<OpId> = module.ops_where(|op| {
        names.iter().any(|n| module.op_is(ctx, op, n))
            && module.num_operands(op) == 1
            && module.num_results(op) == 1
    });
    type Key = (BlockId, OpName, ValueId, Type, Attribute);
    let mut first: FxHashMap<Key, ValueId> = FxHashMap::default();
    for op in conversions {
        let result = module.result(op, 0);
        let mut attrs = module.op_attrs(op);
        for calibrated in ["calibrated_min", "calibrated_max"] {
            attrs = ctx.dict_remove(attrs, calibrated);
        }
        let operand = module.operand(op, 0);
        let key = (module.op_block(op), module.op_name(op), operand, module.value_type(result), attrs);
        match first.get(&key) {
            Some(&earlier) => {
                module.replace_all_uses(result, earlier);
                let _ = module.erase_op(op);
                stats.merged += 1;
            }
            None => {
                first.insert(key, result);
            }
        }
    }
}
