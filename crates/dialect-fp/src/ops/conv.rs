//! Convolutions: `fp.conv2d` (NCHW) and `fp.conv1d` (NCL), ONNX `Conv` with
//! groups, stride, explicit padding, dilation and an optional bias.
//!
//! Both share one check over `n` spatial dimensions: the input is `N×C×spatial`,
//! the weight `O×(C/groups)×kernel`, the bias `[O]`; `pad` lists every begin
//! padding, then every end padding (ONNX `pads` order).

use super::{common_element, expect_rank, tensor_operands, Elements, Sig, Signature, Sigs};
use crate::attrs;
use crate::shape::{conv_out, dims_compatible, is_dynamic};
use qopt_ir_core::interfaces::QuantizableOp;
use qopt_ir_core::{Arity, Attribute, Context, OpDef, Traits, Type, DYNAMIC};
use smallvec::SmallVec;

/// The names of this family's ops.
pub mod names {
    /// `fp.conv2d`.
    pub const CONV2D: &str = "fp.conv2d";
    /// `fp.conv1d`.
    pub const CONV1D: &str = "fp.conv1d";
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
                .interface(QuantizableOp::weighted(0, 1, Some(2), 0)),
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
                .interface(QuantizableOp::weighted(0, 1, Some(2), 0)),
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
