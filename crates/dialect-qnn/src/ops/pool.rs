//! Quantized average pooling: `qnn.avg_pool2d` and `qnn.global_avg_pool2d`
//! (`docs/quant-semantics.md` §7.4). Max pooling needs no op of its own:
//! `fp.max_pool2d` is quant-agnostic.

use super::{expect_shape, rounding_defaults, rounding_doc, rounding_in, tensor, Tensor, ROUNDING_DEFAULT};
use qopt_dialect_fp::attrs::PoolAttrs;
use qopt_dialect_fp::shape::pool_out;
use qopt_ir_core::interfaces::{AttributeDefaults, QuantizableOp};
use qopt_ir_core::{Arity, Attribute, Context, OpDef, OpView, Traits};

qopt_ir_core::op_name_constants! {
    AVG_POOL2D = "qnn.avg_pool2d", GLOBAL_AVG_POOL2D = "qnn.global_avg_pool2d",
}

pub(crate) fn ops() -> Vec<OpDef> {
    vec![
        OpDef::new(names::AVG_POOL2D, "quantized 2-D average pooling (NCHW), one requantization per window")
            .description(concat!(
                "`qnn.avg_pool2d(x)`: the windows, attributes and divisors of `fp.avg_pool2d` (`kernel`, \
                 `stride`, `pad`, `ceil_mode`, `count_include_pad`) over a per-tensor quantized N×C×H×W \
                 input. Each window's exact sum of `x − zp_x` is requantized with `M = s_x / (n × s_out)` \
                 for its divisor `n`, then the output zero point is added and the result saturated to the \
                 written per-tensor result type (`docs/quant-semantics.md` §7.4).\n\nAttributes also: ",
                rounding_doc!(),
                ".\n\n```\n%y = qnn.avg_pool2d(%x) {kernel = [2, 2], stride = [2, 2]} : \
                 (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.1:-128>>) -> tensor<1x8x2x2x!qnn.uniform<i8:f32, 0.1:-128>>\n```"
            ))
            .operands(Arity::Exact(1))
            .traits(Traits::PURE)
            .verifier(verify_avg_pool)
            .interface(QuantizableOp::activations(&[0]))
            .interface(AttributeDefaults(avg_pool2d_defaults)),
        OpDef::new(names::GLOBAL_AVG_POOL2D, "quantized mean over H and W (NCHW)")
            .description(concat!(
                "`qnn.global_avg_pool2d(x)`: `qnn.avg_pool2d` with one window per N×C plane and divisor \
                 H×W; the result is N×C×1×1 with a written per-tensor quantized type \
                 (`docs/quant-semantics.md` §7.4).\n\nAttributes: ",
                rounding_doc!(),
                ".\n\n```\n%y = qnn.global_avg_pool2d(%x) : (tensor<1x512x7x7x!qnn.uniform<i8:f32, 0.05:-128>>) \
                 -> tensor<1x512x1x1x!qnn.uniform<i8:f32, 0.02:-128>>\n```"
            ))
            .operands(Arity::Exact(1))
            .traits(Traits::PURE)
            .verifier(verify_global_avg_pool)
            .interface(QuantizableOp::activations(&[0]))
            .interface(ROUNDING_DEFAULT),
    ]
}

/// What `qnn.avg_pool2d` reads for attributes it leaves out: the window of
/// `fp.avg_pool2d` and the rounding.
fn avg_pool2d_defaults(ctx: &mut Context) -> Vec<(&'static str, Attribute)> {
    let mut defaults = PoolAttrs::default_attributes(ctx, 2, false);
    defaults.extend(rounding_defaults(ctx));
    defaults
}

/// The checks both pools share: a per-tensor quantized N×C×H×W input and
/// result, and the rounding attribute.
fn pool_operands<'v>(v: &OpView<'v>) -> Result<(&'v Context, Tensor<'v>, Tensor<'v>), String> {
    let ctx = v.ctx;
    let x = tensor(ctx, v.operand_type(0), "input")?;
    let result = tensor(ctx, v.result_type(0), "result")?;
    x.per_tensor_quant(ctx)?;
    result.per_tensor_quant(ctx)?;
    x.expect_rank(ctx, 4, "NxCxHxW")?;
    rounding_in(ctx, v.attrs())?;
    Ok((ctx, x, result))
}

fn verify_avg_pool(v: &OpView<'_>) -> Result<(), String> {
    let (ctx, x, result) = pool_operands(v)?;
    let w = PoolAttrs::read_in(ctx, v.attrs(), 2, false)?;
    let mut want = vec![x.shape[0], x.shape[1]];
    for i in 0..2 {
        let size = pool_out(x.shape[2 + i], w.kernel[i], w.stride[i], w.pad[i], w.pad[2 + i], 1, w.ceil_mode)
            .map_err(|e| format!("along dimension {}: {e}", 2 + i))?;
        want.push(size);
    }
    expect_shape("result", result.shape, &want, "N×C×H'×W' of the pooling")
}

fn verify_global_avg_pool(v: &OpView<'_>) -> Result<(), String> {
    let (_, x, result) = pool_operands(v)?;
    expect_shape("result", result.shape, &[x.shape[0], x.shape[1], 1, 1], "N×C×1×1")
}
