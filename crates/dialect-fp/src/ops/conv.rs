//! Convolutions: `fp.conv2d` (NCHW) and `fp.conv1d` (NCL), ONNX `Conv` with
//! groups, stride, explicit padding, dilation and an optional bias; and the
//! transposed convolutions `fp.conv_transpose2d` and `fp.conv_transpose1d`,
//! ONNX `ConvTranspose` with explicit pads and `output_padding`.
//!
//! The convolutions share one check over `n` spatial dimensions: the input is
//! `N×C×spatial`, the weight `O×(C/groups)×kernel`, the bias `[O]`; `pad` lists
//! every begin padding, then every end padding (ONNX `pads` order). The
//! transposed ones share another: the weight is `C×(O/groups)×kernel` (input
//! channels first, as in ONNX), `pad` crops the full output.

use super::{common_element, expect_rank, tensor_operands, Elements, Sig, Signature, Sigs};
use crate::attrs;
use crate::shape::{conv_out, conv_transpose_out, dims_compatible, is_dynamic};
use qopt_ir_core::interfaces::{AttributeDefaults, QuantizableOp};
use qopt_ir_core::{Arity, Attribute, Context, OpDef, Traits, Type, DYNAMIC};
use smallvec::SmallVec;

qopt_ir_core::op_name_constants! {
    CONV2D = "fp.conv2d", CONV1D = "fp.conv1d", CONV_TRANSPOSE2D = "fp.conv_transpose2d",
    CONV_TRANSPOSE1D = "fp.conv_transpose1d",
}

pub(crate) fn ops() -> Vec<OpDef> {
    vec![
        super::with_signature::<Conv<2>>(
            OpDef::new(names::CONV2D, "2-D convolution (NCHW), ONNX Conv")
                .description(
                    "`fp.conv2d(x, w[, b])`: `x` is N×C×H×W, `w` is O×(C/groups)×kH×kW, the optional \
                     bias `b` is [O]; the result is N×O×H'×W' with \
                     `H' = (H + pad_top + pad_bottom - dilation_h·(kH - 1) - 1) / stride_h + 1` (rounded \
                     down), likewise W'.\n\n\
                     Attributes: `stride = [sh, sw]` (default `[1, 1]`), `pad = [top, left, bottom, right]` \
                     (default zeros), `dilation = [dh, dw]` (default `[1, 1]`), `groups` (default 1; C and O \
                     divisible by it). All operands and the result share one float element type.\n\n\
                     ```\n%y = fp.conv2d(%x, %w, %b) {pad = [1, 1, 1, 1], stride = [2, 2]} : \
                     (tensor<1x3x224x224xf32>, tensor<64x3x3x3xf32>, tensor<64xf32>) -> tensor<1x64x112x112xf32>\n```",
                )
                .operands(Arity::Range(2, 3))
                .traits(Traits::PURE)
                .interface(QuantizableOp::weighted(0, 1, Some(2), 0))
                .interface(crate::attrs::BIAS_CORRECTION_RECORD)
                .interface(attrs::recorded_minima(1))
                .interface(AttributeDefaults(|ctx| attrs::ConvAttrs::default_attributes(ctx, 2))),
        ),
        super::with_signature::<Conv<1>>(
            OpDef::new(names::CONV1D, "1-D convolution (NCL), ONNX Conv")
                .description(
                    "`fp.conv1d(x, w[, b])`: `x` is N×C×L, `w` is O×(C/groups)×K, the optional bias `b` \
                     is [O]; the result is N×O×L' with \
                     `L' = (L + pad_begin + pad_end - dilation·(K - 1) - 1) / stride + 1` (rounded down).\n\n\
                     Attributes: `stride = [s]` (default `[1]`), `pad = [begin, end]` (default zeros), \
                     `dilation = [d]` (default `[1]`), `groups` (default 1).\n\n\
                     ```\n%y = fp.conv1d(%x, %w) {pad = [1, 1]} : (tensor<1x16x100xf32>, tensor<32x16x3xf32>) \
                     -> tensor<1x32x100xf32>\n```",
                )
                .operands(Arity::Range(2, 3))
                .traits(Traits::PURE)
                .interface(QuantizableOp::weighted(0, 1, Some(2), 0))
                .interface(crate::attrs::BIAS_CORRECTION_RECORD)
                .interface(attrs::recorded_minima(1))
                .interface(AttributeDefaults(|ctx| attrs::ConvAttrs::default_attributes(ctx, 1))),
        ),
        super::with_signature::<ConvTranspose<2>>(
            OpDef::new(names::CONV_TRANSPOSE2D, "2-D transposed convolution (NCHW), ONNX ConvTranspose")
                .description(
                    "`fp.conv_transpose2d(x, w[, b])`: the transpose of `fp.conv2d`. `x` is N×C×H×W, `w` is \
                     C×(O/groups)×kH×kW (input channels first, as in ONNX), the optional bias `b` is [O]. \
                     Each input value `x[n, c, i, j]` adds `x[n, c, i, j] · w[c, o, ki, kj]` to the result \
                     at channel `g·(O/groups) + o` (`g` the group of `c`), row \
                     `i·stride_h + ki·dilation_h - pad_top` and column `j·stride_w + kj·dilation_w - pad_left`; \
                     contributions outside the result are dropped. The result is N×O×H'×W' with \
                     `H' = stride_h·(H - 1) + output_padding_h + dilation_h·(kH - 1) + 1 - pad_top - pad_bottom`, \
                     likewise W'.\n\n\
                     Attributes: `stride`, `pad = [top, left, bottom, right]`, `dilation` and `groups` as for \
                     `fp.conv2d` (C divisible by `groups`; O is `groups` times the weight's dimension 1), and \
                     `output_padding = [oh, ow]` (default zeros, each smaller than the larger of its \
                     dimension's stride and dilation): extra rows and columns at the end, which get only the \
                     bias. The ONNX importer resolves `auto_pad` and `output_shape` into `pad` and \
                     `output_padding`. All operands and the result share one float element type.\n\n\
                     ```\n%y = fp.conv_transpose2d(%x, %w, %b) {output_padding = [1, 1], pad = [1, 1, 1, 1], \
                     stride = [2, 2]} : (tensor<1x64x28x28xf32>, tensor<64x32x3x3xf32>, tensor<32xf32>) \
                     -> tensor<1x32x56x56xf32>\n```",
                )
                .operands(Arity::Range(2, 3))
                .traits(Traits::PURE)
                // Output channels are the weight's axis 1 (per group).
                .interface(QuantizableOp::weighted(0, 1, Some(2), 1))
                .interface(crate::attrs::BIAS_CORRECTION_RECORD)
                .interface(AttributeDefaults(|ctx| attrs::ConvTransposeAttrs::default_attributes(ctx, 2))),
        ),
        super::with_signature::<ConvTranspose<1>>(
            OpDef::new(names::CONV_TRANSPOSE1D, "1-D transposed convolution (NCL), ONNX ConvTranspose")
                .description(
                    "`fp.conv_transpose1d(x, w[, b])`: `fp.conv_transpose2d` over one spatial dimension. \
                     `x` is N×C×L, `w` is C×(O/groups)×K, the optional bias `b` is [O]; the result is N×O×L' \
                     with `L' = stride·(L - 1) + output_padding + dilation·(K - 1) + 1 - pad_begin - pad_end`.\n\n\
                     Attributes: `stride = [s]` (default `[1]`), `pad = [begin, end]` (default zeros), \
                     `dilation = [d]` (default `[1]`), `groups` (default 1), `output_padding = [p]` (default \
                     `[0]`, smaller than the larger of stride and dilation).\n\n\
                     ```\n%y = fp.conv_transpose1d(%x, %w) {stride = [2]} : (tensor<1x16x50xf32>, \
                     tensor<16x8x4xf32>) -> tensor<1x8x102xf32>\n```",
                )
                .operands(Arity::Range(2, 3))
                .traits(Traits::PURE)
                .interface(AttributeDefaults(|ctx| attrs::ConvTransposeAttrs::default_attributes(ctx, 1))),
        ),
    ]
}

/// A convolution over `N` spatial dimensions.
struct Conv<const N: usize>;

impl<const N: usize> Signature for Conv<N> {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input", "weight", "bias"], 2)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let (x, w) = (&ops[0], &ops[1]);
        let (layout_x, layout_w) = if N == 2 { ("NxCxHxW", "OxCxKHxKW") } else { ("NxCxL", "OxCxK") };
        expect_rank(ctx, x, N + 2, layout_x)?;
        expect_rank(ctx, w, N + 2, layout_w)?;
        let window = attrs::ConvAttrs::read_in(ctx, attrs, N)?;
        let (channels, out_channels) = (x.shape[1], w.shape[0]);
        let groups = window.groups;
        if !is_dynamic(channels) && channels % groups != 0 {
            return Err(format!("input channels ({channels}) must be divisible by 'groups' ({groups})"));
        }
        if !is_dynamic(out_channels) && out_channels % groups != 0 {
            return Err(format!("output channels ({out_channels}) must be divisible by 'groups' ({groups})"));
        }
        let per_group = w.shape[1];
        if !is_dynamic(channels) && !is_dynamic(per_group) && per_group.checked_mul(groups) != Some(channels)
        {
            return Err(format!(
                "weight has {per_group} input channels per group but the input has {channels} channels \
                 in {groups} group{} (expected {})",
                if groups == 1 { "" } else { "s" },
                channels / groups
            ));
        }
        if let Some(b) = ops.get(2) {
            expect_rank(ctx, b, 1, "O")?;
            if !dims_compatible(b.shape[0], out_channels) {
                return Err(format!(
                    "bias has {} elements but the weight has {out_channels} output channels",
                    b.shape[0]
                ));
            }
        }
        let mut shape: SmallVec<[i64; 4]> = SmallVec::new();
        shape.push(x.shape[0]);
        shape.push(if is_dynamic(out_channels) {
            ops.get(2).map_or(DYNAMIC, |b| b.shape[0])
        } else {
            out_channels
        });
        for i in 0..N {
            let size = conv_out(
                x.shape[2 + i],
                w.shape[2 + i],
                window.stride[i],
                window.pad[i],
                window.pad[N + i],
                window.dilation[i],
            )
            .map_err(|e| format!("along dimension {}: {e}", 2 + i))?;
            shape.push(size);
        }
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

/// A transposed convolution over `N` spatial dimensions.
struct ConvTranspose<const N: usize>;

/// The result shape N×O×… of a transposed convolution of an N×C×… input
/// `x` with a C×(O/groups)×k… weight `w` (shapes of one rank, `?` for a
/// dynamic size) under `a`, checking the channels against each other and
/// against the bias's shape `[O]` if there is one: the rule of
/// `fp.conv_transpose2d` and `fp.conv_transpose1d`, which `qnn`'s transposed
/// convolution shares.
pub fn conv_transpose_shape(
    x: &[i64],
    w: &[i64],
    bias: Option<&[i64]>,
    a: &attrs::ConvTransposeAttrs,
) -> Result<SmallVec<[i64; 4]>, String> {
    let n = x.len().saturating_sub(2);
    if n == 0 || w.len() != x.len() || a.output_padding.len() != n {
        return Err(format!("input {x:?} and weight {w:?} must have one rank, with a spatial dimension"));
    }
    let window = &a.window;
    let groups = window.groups;
    let (channels, weight_channels) = (x[1], w[0]);
    if !is_dynamic(channels) && channels % groups != 0 {
        return Err(format!("input channels ({channels}) must be divisible by 'groups' ({groups})"));
    }
    if !dims_compatible(channels, weight_channels) {
        return Err(format!(
            "weight has {weight_channels} input channels (its dimension 0) but the input has {channels}"
        ));
    }
    let per_group = w[1];
    let out_channels = if is_dynamic(per_group) {
        bias.and_then(|b| b.first().copied()).unwrap_or(DYNAMIC)
    } else {
        per_group
            .checked_mul(groups)
            .ok_or_else(|| format!("{per_group} output channels per group in {groups} groups overflow"))?
    };
    if let Some(&[b]) = bias {
        if !dims_compatible(b, out_channels) {
            return Err(format!(
                "bias has {b} elements but there are {out_channels} output channels ({per_group} per \
                 group in {groups} group{})",
                if groups == 1 { "" } else { "s" }
            ));
        }
    }
    let mut shape: SmallVec<[i64; 4]> = SmallVec::new();
    shape.push(x[0]);
    shape.push(out_channels);
    for i in 0..n {
        let size = conv_transpose_out(
            x[2 + i],
            w[2 + i],
            window.stride[i],
            window.pad[i],
            window.pad[n + i],
            window.dilation[i],
            a.output_padding[i],
        )
        .map_err(|e| format!("along dimension {}: {e}", 2 + i))?;
        shape.push(size);
    }
    Ok(shape)
}

impl<const N: usize> Signature for ConvTranspose<N> {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input", "weight", "bias"], 2)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let (x, w) = (&ops[0], &ops[1]);
        let (layout_x, layout_w) = if N == 2 { ("NxCxHxW", "CxOxKHxKW") } else { ("NxCxL", "CxOxK") };
        expect_rank(ctx, x, N + 2, layout_x)?;
        expect_rank(ctx, w, N + 2, layout_w)?;
        let a = attrs::ConvTransposeAttrs::read_in(ctx, attrs, N)?;
        let bias = ops.get(2).map(|b| b.shape);
        if let Some(b) = ops.get(2) {
            expect_rank(ctx, b, 1, "O")?;
        }
        let shape = conv_transpose_shape(x.shape, w.shape, bias, &a)?;
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}
