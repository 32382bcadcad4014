//! `propagate-qparams`: on a fake-quant model, gives the values that ops which
//! do not change values produce the parameters of their input, so that no
//! requantize is needed there once `fuse` runs them on integers (seed 003's
//! "Propagate QParam Info"):
//!
//! - a quant-agnostic `fp` op (reshape, flatten, transpose, split,
//!   strided_slice, zero pad, max pool, relu, nearest resize) whose float operand is the
//!   result of a per-tensor `qnn.fake_quant` of type T: every
//!   `qnn.fake_quant` of its results takes T;
//! - `fp.concat` whose operands are all per-tensor fake quants of one storage:
//!   the inputs and the fake quants of its result all take one type covering
//!   every one of their ranges (symmetric if every type is, power-of-two
//!   scales if the first input's scale is a power of two).
//!
//! Ops marked `qnn.skip` stay float, so nothing is propagated through them.
//! One walk in program order, so chains (max pool → reshape → ...) carry T
//! along. The pass changes numerics slightly (a relu's output keeps its
//! producer's negative range; a concat input gets a coarser scale).
//! Statistics: `parameters-changed` and `largest-scale-change-percent`
//! (|s_new / s_old − 1| in percent, rounded up).
//!
//! ```text
//! %x = qnn.fake_quant(%a) {type = !qnn.uniform<i8:f32, 0.1:0>}
//! %y:2 = fp.split(%x) {axis = 1, sizes = [2, 2]}
//! %z = qnn.fake_quant(%y#0) {type = !qnn.uniform<i8:f32, 0.07:3>}
//! // becomes
//! %z = qnn.fake_quant(%y#0) {type = !qnn.uniform<i8:f32, 0.1:0>}
//! ```

use crate::quantizable::runs_on_integers;
use crate::records::hints::is_skipped;
use crate::records::scheme::Scheme;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::params;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    AttrData, Context, Module, OpId, Pass, PassContext, PassOutcome, QuantParams, QuantType, Type, TypeData,
    ValueId,
};

/// The `propagate-qparams` pass; see the module docs.
pub struct PropagateQparams;

const INFO: PassInfo = PassInfo {
    name: "propagate-qparams",
    summary: "give the outputs of quant-agnostic ops their input's quantization, and concat inputs one shared type",
    preserves_semantics: false,
    equivalence: None,
    description: "On a fake-quant model: the `qnn.fake_quant` of a result of a quant-agnostic op (reshape, \
     flatten, transpose, split, strided_slice, zero pad, max pool, relu, nearest resize) takes the type of the \
     fake_quant its operand comes from, and the inputs and output of an `fp.concat` take one type \
     covering all their ranges, so `fuse` needs no requantize there. Changes numerics slightly. \
     Statistics: `parameters-changed`, `largest-scale-change-percent`.",
};

impl Pass for PropagateQparams {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let ops: Vec<OpId> = module.walk_preorder(module.root()).collect();
        let mut changes = Changes::default();
        for op in ops {
            if is_skipped(cx.ctx, module, op) {
                continue;
            }
            if module.op_is(cx.ctx, op, fp_op::CONCAT) {
                unify_concat(cx.ctx, module, op, &mut changes);
            } else if runs_on_integers(cx.ctx, module, op) {
                propagate_through(cx.ctx, module, op, &mut changes);
            }
        }
        cx.add_stat("parameters-changed", changes.count);
        cx.add_stat("largest-scale-change-percent", (changes.largest * 100.0).ceil() as u64);
        Ok(PassOutcome::from_changed(changes.count > 0))
    }
}

#[derive(Default)]
struct Changes {
    count: u64,
    largest: f64,
}

/// The element type of the `qnn.fake_quant` defining `value`, if per tensor.
fn fake_quant_type(ctx: &Context, module: &Module, value: ValueId) -> Option<(OpId, Type)> {
    let def = module.defining_op(value);
    if def.is_none() || !module.op_is(ctx, def, qnn_op::FAKE_QUANT) {
        return None;
    }
    let AttrData::Type(t) = *ctx.attr_data(module.op_attr(ctx, def, "type")?) else { return None };
    let TypeData::Quant(q) = ctx.type_data(t) else { return None };
    matches!(q.params, QuantParams::PerTensor { .. }).then_some((def, t))
}

/// Sets the `type` of fake_quant `op` to `ty`, counting the change.
fn retype(ctx: &mut Context, module: &mut Module, op: OpId, ty: Type, changes: &mut Changes) {
    let Some(old) = module.op_attr(ctx, op, "type") else { return };
    let AttrData::Type(old_ty) = *ctx.attr_data(old) else { return };
    if old_ty == ty {
        return;
    }
    let scale = |t: Type| match ctx.type_data(t) {
        TypeData::Quant(q) => params(q).first().map(|p| p.scale),
        _ => None,
    };
    if let (Some(a), Some(b)) = (scale(old_ty), scale(ty)) {
        changes.largest = changes.largest.max((b / a - 1.0).abs());
    }
    let attr = ctx.type_attr(ty);
    let attrs = module.op_attrs(op);
    let attrs = ctx.dict_set(attrs, "type", attr);
    module.set_op_attrs(op, attrs);
    changes.count += 1;
}

/// The fake_quants reading `value`.
fn fake_quant_users(ctx: &Context, module: &Module, value: ValueId) -> Vec<OpId> {
    module.users(value).into_iter().filter(|&u| module.op_is(ctx, u, qnn_op::FAKE_QUANT)).collect()
}

fn propagate_through(ctx: &mut Context, module: &mut Module, op: OpId, changes: &mut Changes) {
    let float_operands: Vec<ValueId> = module
        .operands(op)
        .filter(|&v| matches!(ctx.type_data(ctx.element_type(module.value_type(v))), TypeData::Float(_)))
        .collect();
    let [operand] = float_operands[..] else { return };
    let Some((_, ty)) = fake_quant_type(ctx, module, operand) else { return };
    let results: Vec<ValueId> = module.results(op).collect();
    for r in results {
        for user in fake_quant_users(ctx, module, r) {
            retype(ctx, module, user, ty, changes);
        }
    }
}

/// One type for every input and output fake_quant of a concat.
fn unify_concat(ctx: &mut Context, module: &mut Module, op: OpId, changes: &mut Changes) {
    let mut inputs = Vec::new();
    for v in module.operands(op).collect::<Vec<_>>() {
        let Some(found) = fake_quant_type(ctx, module, v) else { return };
        inputs.push(found);
    }
    let outputs = fake_quant_users(ctx, module, module.result(op, 0));
    let mut types: Vec<Type> = inputs.iter().map(|&(_, t)| t).collect();
    for &o in &outputs {
        if let Some(AttrData::Type(t)) = module.op_attr(ctx, o, "type").map(|a| ctx.attr_data(a)) {
            types.push(*t);
        }
    }
    let quants: Vec<QuantType> = types
        .iter()
        .filter_map(|&t| match ctx.type_data(t) {
            TypeData::Quant(q) if matches!(q.params, QuantParams::PerTensor { .. }) => Some(q.clone()),
            _ => None,
        })
        .collect();
    let Some(first) = quants.first() else { return };
    let same_kind = quants.iter().all(|q| {
        q.storage == first.storage
            && q.storage_min == first.storage_min
            && q.storage_max == first.storage_max
            && q.expressed == first.expressed
    });
    if quants.len() != types.len() || !same_kind || quants.iter().all(|q| q == first) {
        return;
    }
    // The real range each type covers, and their union.
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for q in &quants {
        let p = params(q)[0];
        let scale = f64::from(qopt_dialect_qnn::fixed_point::scale_f32(p.scale));
        lo = lo.min((q.storage_min - p.zero_point) as f64 * scale);
        hi = hi.max((q.storage_max - p.zero_point) as f64 * scale);
    }
    let p0 = params(first)[0];
    let mut scheme = Scheme::of_type(first, p0.scale, p0.zero_point);
    // Symmetric only if every type is (a zero point of 0 alone does not say).
    let symmetric_zp = scheme.symmetric_zero_point();
    scheme.symmetric &= quants.iter().all(|q| params(q)[0].zero_point == symmetric_zp);
    let (scale, zero_point) = scheme.params(lo, hi);
    let unified = scheme.quant_type(first.expressed, QuantParams::PerTensor { scale, zero_point });
    let ty = ctx.quant_type(unified);
    for (fq, _) in inputs {
        retype(ctx, module, fq, ty, changes);
    }
    for o in outputs {
        retype(ctx, module, o, ty, changes);
    }
}
