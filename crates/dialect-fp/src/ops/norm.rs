//! Normalizations and per-channel affine ops: `fp.batch_norm` (inference-mode
//! ONNX `BatchNormalization`), `fp.bias_add` (a [C] vector added along one
//! axis) and `fp.softmax` (ONNX `Softmax`, opset 13: along one axis).

use super::{common_element, expect_rank, same_as, tensor_operands, Elements, Signature, Sigs};
use crate::attrs;
use crate::shape::{dims_compatible, normalize_axis};
use qopt_ir_core::{Arity, Attribute, Context, OpDef, Traits, Type};

/// The names of this family's ops.
pub mod names {
    /// `fp.batch_norm`.
    pub const BATCH_NORM: &str = "fp.batch_norm";
    /// `fp.bias_add`.
    pub const BIAS_ADD: &str = "fp.bias_add";
    /// `fp.softmax`.
    pub const SOFTMAX: &str = "fp.softmax";
}

/// `fp.batch_norm`'s `epsilon` when the attribute is absent (ONNX's default).
pub const BATCH_NORM_EPSILON: f64 = 1e-5;

/// The names of `fp.batch_norm`'s parameter operands, in operand order after `x`.
pub const BATCH_NORM_PARAMETERS: [&str; 4] = ["scale", "bias", "mean", "var"];

pub(crate) fn ops() -> Vec<OpDef> {
    vec![
        super::with_signature::<BatchNorm>(
            OpDef::new(names::BATCH_NORM, "batch normalization, inference mode")
                .description(
                    "`fp.batch_norm(x, scale, bias, mean, var)`: `x` is N×C×… (rank ≥ 2), the four \
                     parameters are [C]; per channel c, \
                     `y = scale[c] · (x - mean[c]) / sqrt(var[c] + epsilon) + bias[c]`. Attribute `epsilon` \
                     (default `1.0e-5`, ≥ 0). The result type is the type of `x`. `fold-bn` folds it into a \
                     preceding convolution or dense layer.\n\n\
                     ```\n%y = fp.batch_norm(%x, %s, %b, %m, %v) {epsilon = 1.0e-5 : f32} : (tensor<1x64x56x56xf32>, \
                     tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>\n```",
                )
                .operands(Arity::Exact(5))
                .traits(Traits::PURE),
        ),
        super::with_signature::<BiasAdd>(
            OpDef::new(names::BIAS_ADD, "adds a vector along one axis")
                .description(
                    "`fp.bias_add(x, b)`: `b` is [x.shape[axis]] and is added to every slice of `x` along \
                     `axis` (default 1, the channel axis of NCHW; negative counts from the back). The \
                     result type is the type of `x`.\n\n\
                     ```\n%y = fp.bias_add(%x, %b) {axis = 1} : (tensor<1x64x56x56xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>\n```",
                )
                .operands(Arity::Exact(2))
                .traits(Traits::PURE),
        ),
        super::with_signature::<Softmax>(
            OpDef::new(names::SOFTMAX, "softmax along one axis")
                .description(
                    "`fp.softmax(x)`: `y = exp(x - max) / sum(exp(x - max))` along `axis` (default -1; \
                     in [-rank, rank)), ONNX opset 13 semantics. The result type is the type of `x`.\n\n\
                     ```\n%y = fp.softmax(%x) {axis = -1} : (tensor<8x10xf32>) -> tensor<8x10xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE),
        ),
    ]
}

struct BatchNorm;

impl Signature for BatchNorm {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input", "scale", "bias", "mean", "variance"], 5)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let x = &ops[0];
        if x.rank() < 2 {
            return Err(format!(
                "input must have rank 2 or more (NxCx...), got {}",
                qopt_ir_core::type_to_string(ctx, x.ty)
            ));
        }
        let channels = x.shape[1];
        for p in &ops[1..] {
            expect_rank(ctx, p, 1, "C")?;
            if !dims_compatible(p.shape[0], channels) {
                return Err(format!(
                    "{} has {} elements but the input has {channels} channels",
                    p.label(),
                    p.shape[0]
                ));
            }
        }
        let epsilon = attrs::float_in(ctx, attrs, "epsilon", BATCH_NORM_EPSILON)?;
        if !(epsilon >= 0.0 && epsilon.is_finite()) {
            return Err(format!("'epsilon' must be finite and non-negative, got {epsilon}"));
        }
        Ok(same_as(x, elem))
    }
}

struct BiasAdd;

impl Signature for BiasAdd {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input", "bias"], 2)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let (x, b) = (&ops[0], &ops[1]);
        let axis = attrs::int_in(ctx, attrs, "axis", 1)?;
        let axis = normalize_axis(axis, x.rank()).map_err(|e| format!("'axis': {e}"))?;
        expect_rank(ctx, b, 1, "")?;
        if !dims_compatible(b.shape[0], x.shape[axis]) {
            return Err(format!(
                "bias has {} elements but input dimension {axis} has size {}",
                b.shape[0], x.shape[axis]
            ));
        }
        Ok(same_as(x, elem))
    }
}

struct Softmax;

impl Signature for Softmax {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input"], 1)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let axis = attrs::int_in(ctx, attrs, "axis", -1)?;
        normalize_axis(axis, ops[0].rank()).map_err(|e| format!("'axis': {e}"))?;
        Ok(same_as(&ops[0], elem))
    }
}
