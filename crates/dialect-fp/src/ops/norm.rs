//! Normalizations and per-channel affine ops: `fp.batch_norm` (inference-mode
//! ONNX `BatchNormalization`), `fp.bias_add` (a [C] vector added along one
//! axis) and `fp.softmax` (ONNX `Softmax`, opset 13: along one axis).

use super::{common_element, expect_rank, same_as, tensor_operands, Elements, Signature, Sigs};
use crate::attrs;
use crate::shape::{dims_compatible, normalize_axis};
use qopt_ir_core::{Arity, Attribute, Context, OpDef, Traits, Type};

qopt_ir_core::op_name_constants! {
    BATCH_NORM = "fp.batch_norm", BIAS_ADD = "fp.bias_add", SOFTMAX = "fp.softmax",
    LAYER_NORM = "fp.layer_norm", INSTANCE_NORM = "fp.instance_norm",
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
        super::with_signature::<InstanceNorm>(
            OpDef::new(names::INSTANCE_NORM, "instance normalization over the spatial dimensions")
                .description(
                    "`fp.instance_norm(x, scale, bias) {epsilon}`: `x` is N×C×… (rank ≥ 3); for each sample \
                     and channel, `y = (x - mean) / sqrt(var + epsilon) · scale[c] + bias[c]` with the mean and \
                     population variance over the spatial dimensions, in f64, rounded once (ONNX \
                     InstanceNormalization). `epsilon` defaults to `1.0e-5`.\n\n\
                     ```\n%y = fp.instance_norm(%x, %s, %b) : (tensor<1x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x16x16xf32>\n```",
                )
                .operands(Arity::Exact(3))
                .traits(Traits::PURE),
        ),
        super::with_signature::<LayerNorm>(
            OpDef::new(names::LAYER_NORM, "layer normalization over the trailing dimensions")
                .description(
                    "`fp.layer_norm(x, scale[, bias]) {axis, epsilon}`: over the dimensions from `axis` \
                     (default -1) to the last, `y = (x - mean) / sqrt(var + epsilon) · scale + bias` with the \
                     mean and (population) variance of each such block, computed in f64 and rounded once \
                     (ONNX LayerNormalization, inference). `scale` and `bias` have the normalized shape \
                     `x.shape[axis..]`; `epsilon` defaults to `1.0e-5`.\n\n\
                     ```\n%y = fp.layer_norm(%x, %g, %b) {axis = -1, epsilon = 1.0e-5 : f32} : (tensor<1x16x64xf32>, \
                     tensor<64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>\n```",
                )
                .operands(Arity::Range(2, 3))
                .traits(Traits::PURE),
        ),
    ]
}

/// The epsilon of `fp.instance_norm` (default 1e-5, finite, at least 0).
pub fn instance_norm_epsilon(ctx: &Context, attrs: Attribute) -> Result<f64, String> {
    let epsilon = attrs::float_in(ctx, attrs, "epsilon", BATCH_NORM_EPSILON)?;
    if !(epsilon.is_finite() && epsilon >= 0.0) {
        return Err(format!("'epsilon' must be finite and at least 0, got {epsilon}"));
    }
    Ok(epsilon)
}

struct InstanceNorm;

impl Signature for InstanceNorm {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input", "scale", "bias"], 3)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let x = &ops[0];
        if x.rank() < 3 {
            return Err(format!("input must have rank 3 or more (N×C×…), got {:?}", x.shape));
        }
        instance_norm_epsilon(ctx, attrs)?;
        for p in &ops[1..] {
            if p.rank() != 1 || !dims_compatible(p.shape[0], x.shape[1]) {
                return Err(format!("{} must be [C] = [{}], got {:?}", p.label(), x.shape[1], p.shape));
            }
        }
        Ok(same_as(x, elem))
    }
}

/// The first normalized dimension and the epsilon of `fp.layer_norm`.
pub fn layer_norm_params(ctx: &Context, attrs: Attribute, rank: usize) -> Result<(usize, f64), String> {
    let axis = attrs::int_in(ctx, attrs, "axis", -1)?;
    let axis = normalize_axis(axis, rank).map_err(|e| format!("'axis': {e}"))?;
    let epsilon = attrs::float_in(ctx, attrs, "epsilon", BATCH_NORM_EPSILON)?;
    if !(epsilon.is_finite() && epsilon >= 0.0) {
        return Err(format!("'epsilon' must be finite and at least 0, got {epsilon}"));
    }
    Ok((axis, epsilon))
}

struct LayerNorm;

impl Signature for LayerNorm {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input", "scale", "bias"], 2)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let x = &ops[0];
        let (axis, _) = layer_norm_params(ctx, attrs, x.rank())?;
        let tail = &x.shape[axis..];
        for p in &ops[1..] {
            let fits =
                p.shape.len() == tail.len() && p.shape.iter().zip(tail).all(|(&a, &b)| dims_compatible(a, b));
            if !fits {
                return Err(format!(
                    "{} must have the normalized shape {:?} (x's dimensions from axis {axis}), got {:?}",
                    p.label(),
                    tail,
                    p.shape
                ));
            }
        }
        Ok(same_as(x, elem))
    }
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
