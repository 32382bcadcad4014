//! `expand-fakeq`: each `qnn.fake_quant(x) {type = Q}` becomes
//! `qnn.dequantize(qnn.quantize(x))` through a tensor of `Q`, the first step
//! from the fake-quant model to integer ops.
//!
//! Exact: `fake_quant` is defined as that composition
//! (`docs/quant-semantics.md` §3.4), so the pass preserves semantics. The new
//! ops keep the fake_quant's location, so layer-by-layer comparison and the
//! later passes still name the ONNX node. The `qnn.bias_correction` records
//! of bias correction (`bias_record.rs`) and the `qnn.bias_absorption`
//! records of `absorb-bias` (`absorption_record.rs`) are removed: they
//! describe the float biases and pre-activations of the fake-quant model.
//!
//! ```text
//! %y = qnn.fake_quant(%x) {type = !qnn.uniform<i8:f32, 0.05:0>} : (tensor<8xf32>) -> tensor<8xf32>
//! // becomes
//! %q = qnn.quantize(%x) : (tensor<8xf32>) -> tensor<8x!qnn.uniform<i8:f32, 0.05:0>>
//! %y = qnn.dequantize(%q) : (tensor<8x!qnn.uniform<i8:f32, 0.05:0>>) -> tensor<8xf32>
//! ```

use crate::records::bias_absorption;
use crate::records::bias_correction::drop_records;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    AttrData, Diagnostic, Diagnostics, Module, OpId, OperationState, Pass, PassContext, PassOutcome,
    Severity, Type, TypeData,
};

/// The `expand-fakeq` pass; see the module docs.
pub struct ExpandFakeq;

const INFO: PassInfo = PassInfo {
    name: "expand-fakeq",
    summary: "turn each qnn.fake_quant into qnn.quantize followed by qnn.dequantize (exact)",
    description:
        "Replaces `qnn.fake_quant(x) {type = Q}` by `qnn.dequantize(qnn.quantize(x))` through a tensor \
     of `Q` with `x`'s shape, keeping the location. This is the definition of fake_quant, so the \
     module computes the same values.\n\n\
     ```\n\
     %y = qnn.fake_quant(%x) {type = !qnn.uniform<i8:f32, 0.05:0>} : (tensor<8xf32>) -> tensor<8xf32>\n\
     // -> %q = qnn.quantize(%x) : (tensor<8xf32>) -> tensor<8x!qnn.uniform<i8:f32, 0.05:0>>\n\
     //    %y = qnn.dequantize(%q) : (tensor<8x!qnn.uniform<i8:f32, 0.05:0>>) -> tensor<8xf32>\n\
     ```",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
};

impl Pass for ExpandFakeq {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let fake_quants: Vec<OpId> = module
            .ops_where(|op| module.op_is(cx.ctx, op, qnn_op::FAKE_QUANT) && module.num_operands(op) == 1);
        // Every new type first, so that a bad op changes nothing.
        let mut plans = Vec::with_capacity(fake_quants.len());
        let mut errors = Vec::new();
        for &op in &fake_quants {
            match quantized_tensor_type(cx, module, op) {
                Ok(ty) => plans.push((op, ty)),
                Err(e) => errors.push(Diagnostic::at_op(cx.ctx, module, op, Severity::Error, e)),
            }
        }
        if !errors.is_empty() {
            return Err(Diagnostics(errors).into());
        }
        let (quantize, dequantize) = (cx.ctx.op_name(qnn_op::QUANTIZE), cx.ctx.op_name(qnn_op::DEQUANTIZE));
        for &(op, quantized) in &plans {
            let input = module.operand(op, 0);
            let float_ty = module.value_type(module.result(op, 0));
            let loc = module.op_loc(op);
            // The calibrated range (if recorded) stays with the quantize, for quant-lint.
            let kept: Vec<(&str, qopt_ir_core::Attribute)> = ["calibrated_max", "calibrated_min"]
                .into_iter()
                .filter_map(|name| module.op_attr(cx.ctx, op, name).map(|a| (name, a)))
                .collect();
            let attrs = cx.ctx.dict_attr(&kept);
            let q = module.create_op(
                OperationState::new(quantize).operands(&[input]).results(&[quantized]).attrs(attrs).loc(loc),
            );
            module.insert_op_before(op, q);
            let q_value = module.result(q, 0);
            let d = module.create_op(
                OperationState::new(dequantize).operands(&[q_value]).results(&[float_ty]).loc(loc),
            );
            module.insert_op_before(op, d);
            module.replace_all_uses(module.result(op, 0), module.result(d, 0));
            module.erase_op(op).map_err(|e| format!("cannot remove a fake_quant: {e:?}"))?;
        }
        // The float-bias records of bias correction and absorption end with the fake-quant model.
        let records = drop_records(cx.ctx, module) + bias_absorption::drop_records(cx.ctx, module);
        cx.add_stat("expanded-fake-quants", plans.len() as u64);
        Ok(PassOutcome::from_changed(!plans.is_empty() || records > 0))
    }
}

/// `x`'s tensor type with the fake_quant's `type` as its element type.
fn quantized_tensor_type(cx: &mut PassContext<'_>, module: &Module, op: OpId) -> Result<Type, String> {
    let attr = module.op_attr(cx.ctx, op, "type").ok_or("qnn.fake_quant has no 'type'")?;
    let AttrData::Type(elem) = *cx.ctx.attr_data(attr) else {
        return Err("'type' is not a type attribute".into());
    };
    if !matches!(cx.ctx.type_data(elem), TypeData::Quant(_)) {
        return Err("'type' is not a quantized element type".into());
    }
    let shape = cx
        .ctx
        .tensor_shape(module.value_type(module.operand(op, 0)))
        .ok_or("the operand is not a ranked tensor")?
        .to_vec();
    Ok(cx.ctx.tensor_type(&shape, elem))
}
