//! The sites of `quantize-search`: the quantized values it may keep wide,
//! found in the calibrated module, and the `qnn.cast_hint` that keeps one wide.

use crate::quantizable::quantizable;
use crate::records::hints::STORAGE;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::interfaces::FusedActivation;
use qopt_ir_core::{Context, FxHashMap, Module, OpId, OperationState, ValueDef, ValueId};

/// One quantized value the search may keep wide.
pub(crate) struct Site {
    /// The observed value (a layer's output after its relu or clip, or an argument).
    pub(crate) value: ValueId,
    /// Its observer in the calibrated module.
    pub(crate) observer: OpId,
    /// The op computing it (through its fused relu or clip), if not an argument.
    pub(crate) producer: Option<OpId>,
    /// The producer's location name (the ONNX node), or `<func>.argN`.
    pub(crate) name: String,
    /// The producer's op name, or `argument`.
    pub(crate) op: String,
}

/// The observers of the calibrated module, in program order, except those
/// with a `storage` already (the user's hints, kept as they are).
pub(crate) fn find_sites(ctx: &Context, observed: &Module) -> Vec<Site> {
    observed
        .walk_preorder(observed.root())
        .filter(|&op| observed.op_is(ctx, op, qnn_op::OBSERVE) && observed.num_operands(op) == 1)
        .filter(|&op| observed.op_attr(ctx, op, STORAGE).is_none())
        .map(|observer| {
            let value = observed.operand(observer, 0);
            let producer = producer_of(ctx, observed, value);
            let loc = producer.map_or(observed.op_loc(observer), |p| observed.op_loc(p));
            let name = ctx.location_names(loc).first().map_or_else(|| "?".to_string(), |n| n.to_string());
            let op = producer.map_or("argument", |p| ctx.op_name_str(observed.op_name(p))).to_string();
            Site { value, observer, producer, name, op }
        })
        .collect()
}

/// The op computing `value`, through the relu or clip ops fused into it.
pub(crate) fn producer_of(ctx: &Context, module: &Module, value: ValueId) -> Option<OpId> {
    let mut def = module.defining_op(value);
    while !def.is_none()
        && module.num_operands(def) > 0
        && ctx.op_def(module.op_name(def)).is_some_and(|d| d.interfaces.get::<FusedActivation>().is_some())
    {
        def = module.defining_op(module.operand(def, 0));
    }
    (!def.is_none()).then_some(def)
}

/// The site each `qnn.fake_quant` of the fully quantized module belongs to:
/// an activation's is the site of its value, a weight's or constant
/// operand's that of the op using it; `None` for the others.
pub(crate) fn fake_quant_owners(
    ctx: &Context,
    quantized: &Module,
    sites: &[Site],
) -> Vec<(OpId, Option<usize>)> {
    let by_value: FxHashMap<ValueId, usize> = sites.iter().enumerate().map(|(i, s)| (s.value, i)).collect();
    let by_producer: FxHashMap<OpId, usize> =
        sites.iter().enumerate().filter_map(|(i, s)| s.producer.map(|p| (p, i))).collect();
    quantized
        .walk_preorder(quantized.root())
        .filter(|&op| quantized.op_is(ctx, op, qnn_op::FAKE_QUANT))
        .map(|fq| {
            let owner = by_value.get(&quantized.operand(fq, 0)).copied().or_else(|| {
                quantized
                    .users(quantized.result(fq, 0))
                    .into_iter()
                    .find_map(|u| by_producer.get(&u).copied())
            });
            (fq, owner)
        })
        .collect()
}

/// The fully quantized module with only site `index` quantized: every other
/// fake quant removed, and every other layer's bias back to the float
/// model's (bias correction changed it for the weights now float).
pub(crate) fn only_site(
    ctx: &Context,
    float: &Module,
    quantized: &Module,
    owners: &[(OpId, Option<usize>)],
    index: usize,
    site: &Site,
) -> Module {
    let mut alone = quantized.clone();
    for &(fq, owner) in owners {
        if owner != Some(index) {
            let (input, output) = (alone.operand(fq, 0), alone.result(fq, 0));
            alone.replace_all_uses(output, input);
            // Unused now, and an identity: erasing cannot fail.
            let _ = alone.erase_op(fq);
        }
    }
    let layers: Vec<OpId> = float.walk_preorder(float.root()).collect();
    for op in layers {
        if Some(op) == site.producer || quantizable(ctx, float, op).and_then(|q| q.bias).is_none() {
            continue;
        }
        restore_constant_operands(float, &mut alone, op);
    }
    alone
}

/// Gives `op` of `alone` (a quantized clone of `float`) the operands it has
/// in `float` where those are constants: bias correction replaced its bias
/// (erasing the old constant, or adding a bias it did not have). An erased
/// constant is recreated before `op`; other operands stay as they are.
pub(crate) fn restore_constant_operands(float: &Module, alone: &mut Module, op: OpId) {
    let mut operands: Vec<ValueId> = alone.operands(op).collect();
    operands.truncate(float.num_operands(op));
    for (i, slot) in operands.iter_mut().enumerate() {
        let original = float.operand(op, i);
        let def = float.defining_op(original);
        if def.is_none() || *slot == original || float.num_operands(def) != 0 || float.num_results(def) != 1 {
            continue;
        }
        if alone.is_erased(def) {
            let state = OperationState::new(float.op_name(def))
                .results(&[float.value_type(original)])
                .attrs(float.op_attrs(def))
                .loc(float.op_loc(def));
            let copy = alone.create_op(state);
            alone.insert_op_before(op, copy);
            *slot = alone.result(copy, 0);
        } else {
            *slot = original;
        }
    }
    alone.set_operands(op, &operands);
}

/// Puts `qnn.cast_hint {kind}` after `site`'s value in `module` and routes
/// the value's other uses through it.
pub(crate) fn insert_hint(ctx: &mut Context, module: &mut Module, site: &Site, kind: &str) {
    let value = site.value;
    let ty = module.value_type(value);
    let name = ctx.op_name(qnn_op::CAST_HINT);
    let attrs = {
        let kind = ctx.string_attr(kind);
        ctx.dict_attr(&[("kind", kind)])
    };
    // Located at the layer (the ONNX node), as the sensitivity table names it.
    let def = module.value_def(value);
    let loc = match def {
        ValueDef::Result { op, .. } => module.op_loc(site.producer.unwrap_or(op)),
        ValueDef::BlockArg { .. } => ctx.name_loc(&site.name),
    };
    let hint =
        module.create_op(OperationState::new(name).operands(&[value]).results(&[ty]).attrs(attrs).loc(loc));
    match def {
        ValueDef::Result { op, .. } => module.insert_op_after(op, hint),
        ValueDef::BlockArg { block, .. } => {
            let first = module.first_op(block);
            if first.is_none() {
                module.append_op(block, hint);
            } else {
                module.insert_op_before(first, hint);
            }
        }
    }
    let result = module.result(hint, 0);
    module.replace_uses_where(value, result, |u| u.op != hint);
}
