//! The lowering of `qnn.conv_transpose2d` and `qnn.conv_transpose2d_relu`
//! whose kernel is its stride ([`ConvTransposeLowering`]): the upsampling
//! layers of segmentation and detection heads (2×2, stride 2).
//!
//! Such a transposed convolution adds each input position's taps into its
//! own `kh×kw` block of the result, blocks never overlapping, so output
//! `(o, i·kh + ki, j·kw + kj)` is one dot product over the input channels at
//! `(i, j)`: channel `(o, ki, kj)` of a 1×1 convolution with `O·kh·kw`
//! output channels ([`WeightRows::TransposedTaps`]: row `(o, ki, kj)` of
//! its weight is `w[·, o, ki, kj]`, with channel `o`'s bias and multiplier).
//! The lowering runs that convolution's kernels ([`super::conv`]) into
//! scratch space, then one strided copy moves each channel `(o, ki, kj)` to
//! its positions of the result (a depth-to-space). The sums, the
//! requantization and the clamp are the convolution's per channel, so the
//! bytes are §6.2's. Other transposed convolutions (overlapping taps,
//! padding, dilation, groups) run in the interpreter through a host call.

use super::conv::{emit_conv, ConvPlan};
use super::movement::emit_strided_copy;
use crate::abi::{Place, BUFFER_ALIGN};
use crate::buffer::ElementType;
use crate::error::CodegenError;
use crate::kernels::im2col::ConvGeometry;
use crate::kernels::layer::{KernelOptions, Layer, WeightRows};
use crate::kernels::rows::{row_major_strides, Nest, Stream, INPUT0, OUTPUT};
use crate::lower::{Emit, EmitResult, LowerOp, OpLowering, Plan};
use qopt_dialect_qnn::op_names as qnn_op;

/// Lowers `qnn.conv_transpose2d` and its relu form when the kernel is the
/// stride (see the module docs); `options` as for [`super::conv::Conv2dLowering`].
#[derive(Copy, Clone, Debug, Default)]
pub struct ConvTransposeLowering {
    /// Which multiply-accumulate schemes the kernels may use.
    pub options: KernelOptions,
}

/// A transposed convolution as its 1×1 convolution and its depth-to-space.
struct Upsampling {
    plan: ConvPlan,
    /// `[N, O, kh, kw, H, W]`: the convolution's result, channel `(o, ki, kj)`.
    blocks: [usize; 6],
}

impl Upsampling {
    fn read(op: &LowerOp<'_>, options: &KernelOptions) -> Result<Upsampling, CodegenError> {
        let x = op.operand_shape(0)?;
        let w = op.operand_shape(1)?;
        let y = op.result_shape(0)?;
        let (&[n, c, h, wd], &[wc, o, kh, kw], &[yn, yo, oh, ow]) = (&x[..], &w[..], &y[..]) else {
            return Err(op.invalid(format!(
                "expected NCHW input, CO·kH·kW weight and NCHW result, got shapes {x:?}, {w:?}, {y:?}"
            )));
        };
        let stride = op.i64_array_or("stride", &[1, 1])?;
        let plain = op.i64_array_or("pad", &[0; 4])?.iter().all(|&p| p == 0)
            && op.i64_array_or("output_padding", &[0, 0])?.iter().all(|&p| p == 0)
            && op.i64_array_or("dilation", &[1, 1])? == [1, 1]
            && op.int_or("groups", 1)? == 1;
        if !plain || stride != [kh as i64, kw as i64] {
            return Err(op.unsupported(
                "compiled transposed convolutions have a kernel equal to their stride, one group, no padding \
                 and no dilation",
            ));
        }
        if wc != c || yn != n || yo != o || oh != h * kh || ow != wd * kw {
            return Err(op.invalid(format!("result shape {y:?} does not match input {x:?} and weight {w:?}")));
        }
        let taps = kh * kw;
        let relu = op.name() == qnn_op::CONV_TRANSPOSE2D_RELU;
        let layer = Layer::read_rows(op, relu, o * taps, c, WeightRows::TransposedTaps { taps })?;
        let geometry = ConvGeometry {
            batches: n,
            channels: c,
            height: h,
            width: wd,
            out_channels: o * taps,
            kernel: [1, 1],
            output: [h, wd],
            stride: [1, 1],
            pad: [0; 4],
            dilation: [1, 1],
            groups: 1,
        };
        let plan = ConvPlan::of(op, geometry, layer, options)?;
        Ok(Upsampling { plan, blocks: [n, o, kh, kw, h, wd] })
    }

    /// Bytes of the convolution's result, aligned.
    fn blocks_bytes(&self) -> usize {
        self.blocks.iter().product::<usize>().next_multiple_of(BUFFER_ALIGN)
    }

    /// The copy of `blocks` (at `from`) into the `N×O×(H·kh)×(W·kw)` result
    /// at `to`, walked in the result's order `[n, o, i, ki, j, kj]`.
    fn depth_to_space(&self, element: ElementType, from: Place, to: Place) -> Nest {
        let [n, o, kh, kw, h, w] = self.blocks;
        let size = element.size();
        let source = row_major_strides(&self.blocks, size);
        let order = [0, 1, 4, 2, 5, 3];
        let dims = [n, o, h, kh, w, kw];
        Nest::new(&dims)
            .with(
                INPUT0,
                Stream {
                    place: from,
                    offset: 0,
                    element_size: size,
                    strides: order.map(|d| source[d]).to_vec(),
                },
            )
            .with(OUTPUT, Stream::contiguous(to, &dims, size))
    }
}

impl OpLowering for ConvTransposeLowering {
    fn plan(&self, op: &LowerOp<'_>) -> Result<Plan, CodegenError> {
        let up = Upsampling::read(op, &self.options)?;
        Ok(Plan::weighted_layer(op, up.blocks_bytes() + up.plan.scratch_bytes()))
    }

    /// `N·O·OH·OW` outputs of `C` taps each.
    fn multiply_accumulates(&self, op: &LowerOp<'_>) -> u64 {
        let Ok(up) = Upsampling::read(op, &self.options) else { return 0 };
        let c = op.operand_shape(0).ok().and_then(|s| s.get(1).copied()).unwrap_or(0);
        (up.blocks.iter().product::<usize>() * c) as u64
    }

    fn emit(&self, op: &LowerOp<'_>, out: &mut Emit<'_>) -> EmitResult {
        let up = Upsampling::read(op, &self.options)?;
        let (input, output) = (out.operand(0)?, out.result(0)?);
        let scratch = out.planned_scratch(op)?;
        let Place::Arena(at) = scratch else {
            return Err(op.invalid("scratch space must be in the arena"));
        };
        let blocks = Place::Arena(at);
        let conv_scratch = Place::Arena(at + up.blocks_bytes());
        emit_conv(&up.plan, &self.options, [input, blocks, conv_scratch], out)?;
        if up.blocks.iter().product::<usize>() > 0 {
            let element = up.plan.output_element();
            out.kernel(emit_strided_copy(&up.depth_to_space(element, blocks, output), element)?);
        }
        Ok(())
    }
}
