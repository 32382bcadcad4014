//! Integer compute ops on quantized operands: `qnn.conv2d`, `qnn.conv2d_relu`,
//! `qnn.conv_transpose2d`, `qnn.conv_transpose2d_relu`, `qnn.dense`,
//! `qnn.dense_relu` (i32 accumulators, requantized per output channel),
//! `qnn.add`, `qnn.sub`, `qnn.mul` (broadcasting), `qnn.concat` and
//! `qnn.prelu`.
//!
//! Their result types are written: output parameters are free (calibration
//! chooses them), so the verifiers check shapes, with the rules and helpers of
//! the `fp` dialect (`qopt_dialect_fp::shape`, `qopt_dialect_fp::attrs`), and
//! element kinds, and do not infer. The arithmetic is
//! `docs/quant-semantics.md` §6 and §7.

use super::{
    expect_shape, relu_max_doc, relu_max_in, rounding_defaults, rounding_doc, rounding_in, tensor, Tensor,
    ROUNDING_DEFAULT,
};
use qopt_dialect_fp::attrs;
use qopt_dialect_fp::attrs::{ConvAttrs, ConvTransposeAttrs};
use qopt_dialect_fp::conv_transpose_shape;
use qopt_dialect_fp::shape::{
    broadcast, conv_out, dims_compatible, is_dynamic, normalize_axis, shape_to_string,
};
use qopt_ir_core::interfaces::{AttributeDefaults, QuantizableOp};
use qopt_ir_core::{
    type_to_string, Arity, Attribute, Context, FoldResult, Module, OpDef, OpId, OpView, Traits, TypeData,
    VerifyFn, DYNAMIC,
};
use smallvec::{smallvec, SmallVec};

qopt_ir_core::op_name_constants! {
    CONV2D = "qnn.conv2d", CONV2D_RELU = "qnn.conv2d_relu", CONV_TRANSPOSE2D = "qnn.conv_transpose2d",
    CONV_TRANSPOSE2D_RELU = "qnn.conv_transpose2d_relu", DENSE = "qnn.dense",
    DENSE_RELU = "qnn.dense_relu", ADD = "qnn.add", SUB = "qnn.sub", MUL = "qnn.mul",
    CONCAT = "qnn.concat", PRELU = "qnn.prelu",
}

pub(crate) fn ops() -> Vec<OpDef> {
    vec![
        OpDef::new(names::CONV2D, "quantized 2-D convolution (NCHW) with i32 accumulation and requantization")
            .description(concat!(
                "`qnn.conv2d(x, w[, b])`: shapes, attributes and defaults of `fp.conv2d` (`stride`, \
                 `pad = [top, left, bottom, right]`, `dilation`, `groups`). `x` (N×C×H×W) is quantized per \
                 tensor; `w` (O×C/groups×kH×kW) per tensor or per axis 0; the optional bias `b` is a \
                 `tensor<Oxi32>` in units of `s_x × s_w[c]` with zero point 0. Per output channel c: \
                 `acc = wrap32(Σ (x − zp_x)(w − zp_w[c]) + b[c])` (padding reads `zp_x`), then requantized \
                 with `M = (s_x × s_w[c]) / s_out` to the written per-tensor result type \
                 (`docs/quant-semantics.md` §6).\n\nAttributes also: ",
                rounding_doc!(),
                ".\n\n```\n%y = qnn.conv2d(%x, %w, %b) {pad = [1, 1, 1, 1]} : (tensor<1x3x8x8x!qnn.uniform<u8:f32, 0.02:128>>, \
                 tensor<4x3x3x3x!qnn.uniform<i8:f32:0, {0.01:0, 0.02:0, 0.01:0, 0.03:0}>>, tensor<4xi32>) \
                 -> tensor<1x4x8x8x!qnn.uniform<u8:f32, 0.05:0>>\n```"
            ))
            .windowed(verify_conv2d, 0, conv2d_defaults),
        OpDef::new(names::CONV2D_RELU, "qnn.conv2d followed by relu, fused (QuantConvReLU)")
            .description(concat!(
                "`qnn.conv2d_relu(x, w[, b])` is `qnn.conv2d` whose requantized output is clamped at the \
                 output zero point (real 0) before saturating: `clamp(max(y, zp_out), storage_min, storage_max)` \
                 (`docs/quant-semantics.md` §6). Same operands, attributes and checks as `qnn.conv2d`; \
                 attributes include ",
                rounding_doc!(),
                " and ",
                relu_max_doc!(),
                ".\n\n```\n%y = qnn.conv2d_relu(%x, %w) {stride = [2, 2]} : (tensor<1x3x8x8x!qnn.uniform<u8:f32, 0.02:128>>, \
                 tensor<4x3x3x3x!qnn.uniform<i8:f32, 0.01:0>>) -> tensor<1x4x3x3x!qnn.uniform<u8:f32, 0.05:0>>\n```"
            ))
            .windowed(verify_conv2d, 0, conv2d_defaults),
        OpDef::new(
            names::CONV_TRANSPOSE2D,
            "quantized 2-D transposed convolution (NCHW) with i32 accumulation and requantization",
        )
        .description(concat!(
            "`qnn.conv_transpose2d(x, w[, b])`: shapes, attributes and defaults of `fp.conv_transpose2d` \
             (`stride`, `pad`, `dilation`, `groups`, `output_padding`). `x` (N×C×H×W) is quantized per tensor; \
             `w` (C×O/groups×kH×kW, input channels first as in ONNX) per tensor, or per axis 1 (the output \
             channels) with one group; the optional bias `b` is a `tensor<Oxi32>` in units of `s_x × s_w[c]` \
             with zero point 0. Per output channel c: `acc = wrap32(Σ (x − zp_x)(w − zp_w[c]) + b[c])` over \
             the input positions and taps that land on the output position (positions outside the result are \
             dropped; nothing reads padding), then requantized with `M = (s_x × s_w[c]) / s_out` to the written \
             per-tensor result type (`docs/quant-semantics.md` §6.2).\n\nAttributes also: ",
            rounding_doc!(),
            ".\n\n```\n%y = qnn.conv_transpose2d(%x, %w, %b) {stride = [2, 2]} : (tensor<1x4x3x3x!qnn.uniform<u8:f32, 0.02:128>>, \
             tensor<4x2x2x2x!qnn.uniform<i8:f32:1, {0.01:0, 0.02:0}>>, tensor<2xi32>) \
             -> tensor<1x2x6x6x!qnn.uniform<u8:f32, 0.05:0>>\n```"
        ))
        .windowed(verify_conv_transpose2d, 1, conv_transpose2d_defaults),
        OpDef::new(names::CONV_TRANSPOSE2D_RELU, "qnn.conv_transpose2d followed by relu, fused")
            .description(concat!(
                "`qnn.conv_transpose2d_relu(x, w[, b])` is `qnn.conv_transpose2d` whose requantized output is \
                 clamped at the output zero point (real 0) before saturating, as `qnn.conv2d_relu` \
                 (`docs/quant-semantics.md` §6.2). Same operands, attributes and checks as \
                 `qnn.conv_transpose2d`; attributes include ",
                rounding_doc!(),
                " and ",
                relu_max_doc!(),
                ".\n\n```\n%y = qnn.conv_transpose2d_relu(%x, %w) {stride = [2, 2]} : \
                 (tensor<1x4x3x3x!qnn.uniform<u8:f32, 0.02:128>>, tensor<4x2x2x2x!qnn.uniform<i8:f32, 0.01:0>>) \
                 -> tensor<1x2x6x6x!qnn.uniform<u8:f32, 0.05:0>>\n```"
            ))
            .windowed(verify_conv_transpose2d, 1, conv_transpose2d_defaults),
        OpDef::new(names::DENSE, "quantized fully connected layer x·Wᵀ + b with i32 accumulation")
            .description(concat!(
                "`qnn.dense(x, w[, b])`: shapes of `fp.dense`: `x` is …×K quantized per tensor, `w` is N×K \
                 quantized per tensor or per axis 0, the optional bias `b` is a `tensor<Nxi32>` in units of \
                 `s_x × s_w[c]`; the result is …×N with a written per-tensor quantized type. Accumulation and \
                 requantization as `qnn.conv2d` (`docs/quant-semantics.md` §6).\n\nAttributes: ",
                rounding_doc!(),
                ".\n\n```\n%y = qnn.dense(%x, %w, %b) : (tensor<1x3x!qnn.uniform<u8:f32, 0.5:128>>, \
                 tensor<2x3x!qnn.uniform<i8:f32:0, {0.25:0, 0.125:0}>>, tensor<2xi32>) \
                 -> tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>\n```"
            ))
            .operands(Arity::Range(2, 3))
            .traits(Traits::PURE)
            .verifier(verify_dense)
            .interface(QuantizableOp::weighted(0, 1, Some(2), 0).with_channel_axis(Some(-1)))
            .interface(ROUNDING_DEFAULT),
        OpDef::new(names::DENSE_RELU, "qnn.dense followed by relu, fused")
            .description(concat!(
                "`qnn.dense_relu(x, w[, b])` is `qnn.dense` with the output clamped at the output zero point \
                 before saturating (`docs/quant-semantics.md` §6). Same operands and checks as `qnn.dense`; \
                 attributes: ",
                rounding_doc!(),
                " and ",
                relu_max_doc!(),
                ".\n\n```\n%y = qnn.dense_relu(%x, %w) : (tensor<1x3x!qnn.uniform<u8:f32, 0.5:128>>, \
                 tensor<2x3x!qnn.uniform<i8:f32, 0.25:0>>) -> tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>\n```"
            ))
            .operands(Arity::Range(2, 3))
            .traits(Traits::PURE)
            .verifier(verify_dense)
            .interface(QuantizableOp::weighted(0, 1, Some(2), 0).with_channel_axis(Some(-1)))
            .interface(ROUNDING_DEFAULT),
        OpDef::new(names::ADD, "quantized addition with broadcasting, rounded once")
            .description(concat!(
                "`qnn.add(a, b)`: both operands and the written result are quantized per tensor, with any \
                 parameters; shapes broadcast as `fp.add` (numpy). Each operand is rescaled to the output \
                 scale with its own multiplier at one shared shift, and the exact sum is rounded once: \
                 `R((a − zp_a)·m_a + (b − zp_b)·m_b, 31 + n) + zp_out`, saturated \
                 (`docs/quant-semantics.md` §7.1).\n\nAttributes: ",
                rounding_doc!(),
                ".\n\n```\n%y = qnn.add(%a, %b) : (tensor<2x3x!qnn.uniform<i8:f32, 0.5:0>>, \
                 tensor<3x!qnn.uniform<i8:f32, 0.25:4>>) -> tensor<2x3x!qnn.uniform<i8:f32, 1.0:0>>\n```"
            ))
            .operands(Arity::Exact(2))
            .traits(Traits::PURE | Traits::ELEMENTWISE | Traits::COMMUTATIVE)
            .verifier(verify_binary)
            .interface(QuantizableOp::activations(&[0, 1]))
            .interface(ROUNDING_DEFAULT),
        OpDef::new(names::SUB, "quantized subtraction with broadcasting, rounded once")
            .description(concat!(
                "`qnn.sub(a, b)`: `qnn.add` with `b`'s term subtracted: the same operands, multipliers and \
                 shift, and the exact difference is rounded once: \
                 `R((a − zp_a)·m_a − (b − zp_b)·m_b, 31 + n) + zp_out`, saturated \
                 (`docs/quant-semantics.md` §7.1).\n\nAttributes: ",
                rounding_doc!(),
                ".\n\n```\n%y = qnn.sub(%a, %b) : (tensor<2x3x!qnn.uniform<i8:f32, 0.5:0>>, \
                 tensor<3x!qnn.uniform<i8:f32, 0.25:4>>) -> tensor<2x3x!qnn.uniform<i8:f32, 1.0:0>>\n```"
            ))
            .operands(Arity::Exact(2))
            .traits(Traits::PURE | Traits::ELEMENTWISE)
            .verifier(verify_binary)
            .interface(QuantizableOp::activations(&[0, 1]))
            .interface(ROUNDING_DEFAULT),
        OpDef::new(names::MUL, "quantized multiplication with broadcasting")
            .description(concat!(
                "`qnn.mul(a, b)`: operands and the written result quantized per tensor, any parameters; \
                 numpy broadcasting. The exact product `(a − zp_a)(b − zp_b)` is requantized with \
                 `M = (s_a × s_b) / s_out` (`docs/quant-semantics.md` §7.2).\n\nAttributes: ",
                rounding_doc!(),
                ".\n\n```\n%y = qnn.mul(%a, %b) : (tensor<4x!qnn.uniform<i8:f32, 0.5:0>>, \
                 tensor<4x!qnn.uniform<i8:f32, 0.5:0>>) -> tensor<4x!qnn.uniform<i8:f32, 0.1:0>>\n```"
            ))
            .operands(Arity::Exact(2))
            .traits(Traits::PURE | Traits::ELEMENTWISE | Traits::COMMUTATIVE)
            .verifier(verify_binary)
            .interface(QuantizableOp::activations(&[0, 1]))
            .interface(ROUNDING_DEFAULT),
        OpDef::new(names::PRELU, "quantized parametric relu with a float slope per channel")
            .description(concat!(
                "`qnn.prelu(x, slope)`: `x` and the written result quantized per tensor, of one shape; `slope` \
                 a float tensor broadcasting to `x` without enlarging it (ONNX PRelu: C×1×1 per channel of an \
                 N×C×H×W input, or one value). With `v = x − zp_x`: `v ≥ 0` is requantized with \
                 `M = s_x / s_out`, `v < 0` with `M = (s_x × |α|) / s_out` of its slope `α` (the value `−v` \
                 when `α < 0`; `zp_out` when `α = 0`), plus `zp_out`, saturated \
                 (`docs/quant-semantics.md` §7.6).\n\nAttributes: ",
                rounding_doc!(),
                ".\n\n```\n%y = qnn.prelu(%x, %s) : (tensor<1x2x4x4x!qnn.uniform<i8:f32, 0.1:0>>, tensor<2x1x1xf32>) \
                 -> tensor<1x2x4x4x!qnn.uniform<i8:f32, 0.1:0>>\n```"
            ))
            .operands(Arity::Exact(2))
            .traits(Traits::PURE)
            .verifier(verify_prelu)
            .interface(QuantizableOp::activations(&[0]))
            .interface(ROUNDING_DEFAULT),
        OpDef::new(names::CONCAT, "concatenation of quantized tensors, each requantized to the output")
            .description(concat!(
                "`qnn.concat(x0, x1, ...) {axis}`: one or more tensors quantized per tensor with any \
                 parameters, of one rank, equal in every dimension but `axis` (required; negative counts from \
                 the back). Each input is requantized to the written per-tensor result type (copied unchanged \
                 when its parameters are the output's), then concatenated (`docs/quant-semantics.md` §7.3). \
                 When all parameters are equal, `fp.concat` does the same without requantizing.\n\n\
                 Attributes also: ",
                rounding_doc!(),
                ".\n\n```\n%y = qnn.concat(%a, %b) {axis = 1} : (tensor<1x2x!qnn.uniform<i8:f32, 0.5:0>>, \
                 tensor<1x3x!qnn.uniform<i8:f32, 0.25:0>>) -> tensor<1x5x!qnn.uniform<i8:f32, 0.5:0>>\n```"
            ))
            .operands(Arity::AtLeast(1))
            .traits(Traits::PURE)
            .verifier(verify_concat)
            .folder(fold_concat)
            .interface(ROUNDING_DEFAULT),
    ]
}

/// The shared part of the windowed weighted ops' definitions (the
/// convolutions and their relu forms): two or three operands, pure, the
/// verifier, the weight's output channels on `weight_axis`, and the
/// attributes read when left out.
trait Windowed {
    fn windowed(self, verifier: VerifyFn, weight_axis: usize, defaults: DefaultsFn) -> OpDef;
}

/// What an op reads for the attributes it leaves out.
type DefaultsFn = fn(&mut Context) -> Vec<(&'static str, Attribute)>;

impl Windowed for OpDef {
    fn windowed(self, verifier: VerifyFn, weight_axis: usize, defaults: DefaultsFn) -> OpDef {
        self.operands(Arity::Range(2, 3))
            .traits(Traits::PURE)
            .verifier(verifier)
            .interface(QuantizableOp::weighted(0, 1, Some(2), weight_axis))
            .interface(AttributeDefaults(defaults))
    }
}

/// `x`, `w`, optional `b`, and the result of a conv or dense op, with the
/// element checks they share: `x` and the result per tensor, `w` per tensor or
/// per axis 0, `b` a rank-1 i32 tensor.
struct Weighted<'c> {
    x: Tensor<'c>,
    w: Tensor<'c>,
    b: Option<Tensor<'c>>,
    result: Tensor<'c>,
}

fn weighted<'c>(v: &OpView<'c>) -> Result<Weighted<'c>, String> {
    weighted_on_axis(v, 0)
}

/// [`weighted`] for an op whose weight holds the output channels on
/// `weight_axis`.
fn weighted_on_axis<'c>(v: &OpView<'c>, weight_axis: usize) -> Result<Weighted<'c>, String> {
    let ctx = v.ctx;
    let x = tensor(ctx, v.operand_type(0), "input")?;
    let w = tensor(ctx, v.operand_type(1), "weight")?;
    let b = if v.num_operands() > 2 { Some(tensor(ctx, v.operand_type(2), "bias")?) } else { None };
    let result = tensor(ctx, v.result_type(0), "result")?;
    x.per_tensor_quant(ctx)?;
    let wq = w.quant(ctx)?;
    if let Some(axis) = crate::quant_params::axis(wq) {
        if axis != weight_axis {
            return Err(format!(
                "weight must be quantized per tensor or per axis {weight_axis} (output channels), got axis {axis}"
            ));
        }
    }
    result.per_tensor_quant(ctx)?;
    if let Some(b) = &b {
        let is_i32 = matches!(ctx.type_data(b.elem), TypeData::Int(i) if i.width == 32
            && i.signedness == qopt_ir_core::Signedness::Signless);
        if !is_i32 || b.rank() != 1 {
            return Err(format!(
                "bias must be a rank-1 tensor of i32 (in units of input scale × weight scale), got {}",
                type_to_string(ctx, b.ty)
            ));
        }
    }
    rounding_in(ctx, v.attrs())?;
    let relu_max = relu_max_in(ctx, v.attrs())?;
    if relu_max.is_some() && !ctx.op_name_str(v.name()).ends_with("_relu") {
        return Err(
            "'relu_max' belongs to the _relu forms (qnn.conv2d_relu, qnn.conv_transpose2d_relu, qnn.dense_relu)"
                .into(),
        );
    }
    Ok(Weighted { x, w, b, result })
}

/// The known one of two sizes that must be equal (`?` if both unknown).
fn known(a: i64, b: i64) -> i64 {
    if is_dynamic(a) {
        b
    } else {
        a
    }
}

/// What `qnn.conv2d` and `qnn.conv2d_relu` read for attributes they leave
/// out: the window of `fp.conv2d` (the defaults [`ConvAttrs::read_in`] reads,
/// which the verifier uses) and the rounding.
fn conv2d_defaults(ctx: &mut Context) -> Vec<(&'static str, Attribute)> {
    let window = ConvAttrs::default_attributes(ctx, 2);
    with_rounding(ctx, window)
}

/// `defaults` and the rounding's.
fn with_rounding(
    ctx: &mut Context,
    mut defaults: Vec<(&'static str, Attribute)>,
) -> Vec<(&'static str, Attribute)> {
    defaults.extend(rounding_defaults(ctx));
    defaults
}

fn verify_conv2d(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    let Weighted { x, w, b, result } = weighted(v)?;
    x.expect_rank(ctx, 4, "NxCxHxW")?;
    w.expect_rank(ctx, 4, "OxCxKHxKW")?;
    let ConvAttrs { stride, pad, dilation, groups } = ConvAttrs::read_in(ctx, v.attrs(), 2)?;
    let (channels, out_channels, per_group) = (x.shape[1], w.shape[0], w.shape[1]);
    if !is_dynamic(channels) && channels % groups != 0 {
        return Err(format!("input channels ({channels}) must be divisible by 'groups' ({groups})"));
    }
    if !is_dynamic(out_channels) && out_channels % groups != 0 {
        return Err(format!("output channels ({out_channels}) must be divisible by 'groups' ({groups})"));
    }
    if !is_dynamic(channels) && !is_dynamic(per_group) && per_group.checked_mul(groups) != Some(channels) {
        return Err(format!(
            "weight has {per_group} input channels per group but the input has {channels} channels in {groups} \
             group{} (expected {})",
            if groups == 1 { "" } else { "s" },
            channels / groups
        ));
    }
    let mut out_c = out_channels;
    if let Some(b) = &b {
        if !dims_compatible(b.shape[0], out_channels) {
            return Err(format!(
                "bias has {} elements but the weight has {out_channels} output channels",
                b.shape[0]
            ));
        }
        out_c = known(out_channels, b.shape[0]);
    }
    let mut want = vec![x.shape[0], out_c];
    for i in 0..2 {
        let size = conv_out(x.shape[2 + i], w.shape[2 + i], stride[i], pad[i], pad[2 + i], dilation[i])
            .map_err(|e| format!("along dimension {}: {e}", 2 + i))?;
        want.push(size);
    }
    expect_shape("result", result.shape, &want, "N×O×H'×W' of the convolution")
}

/// What `qnn.conv_transpose2d` and its relu form read for attributes they
/// leave out: those of `fp.conv_transpose2d` and the rounding.
fn conv_transpose2d_defaults(ctx: &mut Context) -> Vec<(&'static str, Attribute)> {
    let window = ConvTransposeAttrs::default_attributes(ctx, 2);
    with_rounding(ctx, window)
}

fn verify_conv_transpose2d(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    let Weighted { x, w, b, result } = weighted_on_axis(v, 1)?;
    x.expect_rank(ctx, 4, "NxCxHxW")?;
    w.expect_rank(ctx, 4, "CxOxKHxKW")?;
    let attrs = ConvTransposeAttrs::read_in(ctx, v.attrs(), 2)?;
    if attrs.window.groups != 1 && crate::quant_params::axis(w.quant(ctx)?).is_some() {
        return Err(format!(
            "a weight quantized per axis 1 holds one group's output channels: with 'groups' = {} it must \
             be quantized per tensor",
            attrs.window.groups
        ));
    }
    let want = conv_transpose_shape(x.shape, w.shape, b.as_ref().map(|b| b.shape), &attrs)?;
    expect_shape("result", result.shape, &want, "N×O×H'×W' of the transposed convolution")
}

fn verify_dense(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    let Weighted { x, w, b, result } = weighted(v)?;
    let Some(&k) = x.shape.last() else {
        return Err("input must have rank 1 or more (…xK), got a scalar tensor".to_string());
    };
    w.expect_rank(ctx, 2, "NxK")?;
    let (n, wk) = (w.shape[0], w.shape[1]);
    if !dims_compatible(k, wk) {
        return Err(format!(
            "input has {k} features (last dimension) but the weight {} expects {wk}",
            shape_to_string(w.shape)
        ));
    }
    let mut out_n = n;
    if let Some(b) = &b {
        if !dims_compatible(b.shape[0], n) {
            return Err(format!("bias has {} elements but the weight has {n} output features", b.shape[0]));
        }
        out_n = known(n, b.shape[0]);
    }
    let mut want = x.shape.to_vec();
    if let Some(last) = want.last_mut() {
        *last = out_n;
    }
    expect_shape("result", result.shape, &want, "the input's with N output features")
}

fn verify_prelu(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    let x = tensor(ctx, v.operand_type(0), "input")?;
    let slope = tensor(ctx, v.operand_type(1), "slope")?;
    let result = tensor(ctx, v.result_type(0), "result")?;
    x.per_tensor_quant(ctx)?;
    result.per_tensor_quant(ctx)?;
    if !matches!(ctx.type_data(slope.elem), TypeData::Float(_)) {
        return Err(format!("slope must be a float tensor, got {}", type_to_string(ctx, slope.ty)));
    }
    rounding_in(ctx, v.attrs())?;
    match broadcast(x.shape, slope.shape) {
        Ok(shape) if shape.as_slice() == x.shape => {}
        _ => {
            return Err(format!(
                "slope {} must broadcast to the input's shape {} without enlarging it",
                shape_to_string(slope.shape),
                shape_to_string(x.shape)
            ))
        }
    }
    expect_shape("result", result.shape, x.shape, "the input's")
}

fn verify_binary(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    let a = tensor(ctx, v.operand_type(0), "lhs")?;
    let b = tensor(ctx, v.operand_type(1), "rhs")?;
    let result = tensor(ctx, v.result_type(0), "result")?;
    a.per_tensor_quant(ctx)?;
    b.per_tensor_quant(ctx)?;
    result.per_tensor_quant(ctx)?;
    rounding_in(ctx, v.attrs())?;
    let want = broadcast(a.shape, b.shape)?;
    expect_shape("result", result.shape, &want, "the broadcast of the operands")
}

fn verify_concat(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    let labels: Vec<String> = (0..v.num_operands()).map(|i| format!("operand #{i}")).collect();
    let inputs = labels
        .iter()
        .enumerate()
        .map(|(i, label)| tensor(ctx, v.operand_type(i), label))
        .collect::<Result<Vec<_>, _>>()?;
    let result = tensor(ctx, v.result_type(0), "result")?;
    for t in &inputs {
        t.per_tensor_quant(ctx)?;
    }
    result.per_tensor_quant(ctx)?;
    rounding_in(ctx, v.attrs())?;
    let axis = attrs::opt_int_in(ctx, v.attrs(), "axis")?.ok_or("needs an integer 'axis' attribute")?;
    let Some(first) = inputs.first() else { return Err("expects at least 1 operand, found 0".to_string()) };
    let rank = first.rank();
    let axis = normalize_axis(axis, rank).map_err(|e| format!("'axis': {e}"))?;
    let mut want = first.shape.to_vec();
    for t in &inputs[1..] {
        if t.rank() != rank {
            return Err(format!(
                "{} has rank {} but operand #0 has rank {rank}; all operands must have one rank",
                t.what,
                t.rank()
            ));
        }
        for (d, (slot, &size)) in want.iter_mut().zip(t.shape).enumerate() {
            if d == axis {
                *slot =
                    if is_dynamic(*slot) || is_dynamic(size) { DYNAMIC } else { slot.saturating_add(size) };
            } else if !dims_compatible(*slot, size) {
                return Err(format!(
                    "{} has size {size} in dimension {d} but operand #0 has {}; only dimension {axis} may differ",
                    t.what, *slot
                ));
            } else {
                *slot = known(*slot, size);
            }
        }
    }
    expect_shape("result", result.shape, &want, "the operands joined along 'axis'")
}

/// `concat(x : T) -> T` of a single operand is `x`.
fn fold_concat(
    _ctx: &mut Context,
    module: &Module,
    op: OpId,
    _constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    if module.num_operands(op) != 1 || module.num_results(op) != 1 {
        return None;
    }
    let input = module.operand(op, 0);
    if module.value_type(input) != module.value_type(module.result(op, 0)) {
        return None;
    }
    Some(smallvec![FoldResult::Value(input)])
}
