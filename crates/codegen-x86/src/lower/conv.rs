//! The lowering of `qnn.conv2d` and `qnn.conv2d_relu` ([`Conv2dLowering`]).
//!
//! A depthwise convolution (groups = input channels = output channels,
//! horizontal stride 1 or 2) runs [`depthwise`](crate::kernels::depthwise)'s direct
//! kernel after the pad kernel. Every other convolution runs three kernels:
//! pad → pack → GEMM ([`im2col`](crate::kernels::im2col), [`gemm`](crate::kernels::gemm)),
//! groups being one more coordinate of the work items. The scratch space
//! holds the padded image, then the panels. A 1×1 convolution with unit
//! strides and no padding skips the pad kernel: its pack kernel centers the
//! input as it reads it.
//!
//! Supported: NCHW tensors with static shapes; per-tensor 8-bit activations
//! and results; weights per tensor or per axis 0 with storage of at most 8
//! bits, constant; an optional constant i32 bias; every stride, padding,
//! dilation and group count; all rounding modes; the relu forms with or
//! without `relu_max`. Anything else is an `Unsupported` error from `plan`.

use crate::abi::{KernelCode, Place, BUFFER_ALIGN};
use crate::error::{CodegenError, CodegenErrorKind};
use crate::kernels::append_aligned;
use crate::kernels::channel_gemm::{
    channel_block_records, emit_channel_gemm, pack_channel_weights, ChannelGemmPlaces, ChannelGemmShape,
};
use crate::kernels::depthwise::{emit_depthwise, DepthwiseShape};
use crate::kernels::epilogue::{channel_records, globals};
use crate::kernels::gemm::{emit_gemm, pack_weights, split_table, GemmPlaces, GemmShape};
use crate::kernels::im2col::ConvGeometry;
use crate::kernels::im2col::{
    emit_pack, emit_pad, pack_tables, reads_input_directly, ImageShape, PackPlaces, Window,
};
use crate::kernels::layer::{Accumulation, ConvGemmChoice, KernelOptions, Layer};
use crate::kernels::winograd::{
    emit_input_transform, emit_output_transform, transformed_weights, OutputTransformPlaces, WinogradShape,
};
use crate::lower::{Emit, EmitResult, LowerOp, OpLowering, Plan};
use qopt_dialect_qnn::op_names as qnn_op;

/// Lowers `qnn.conv2d` and `qnn.conv2d_relu`; `options` may forbid the
/// byte-product schemes (tests force the exact path with them).
#[derive(Copy, Clone, Debug, Default)]
pub struct Conv2dLowering {
    /// Which multiply-accumulate schemes the kernels may use.
    pub options: KernelOptions,
}

impl ConvGeometry {
    fn read(op: &LowerOp<'_>) -> Result<ConvGeometry, CodegenError> {
        let x = op.operand_shape(0)?;
        let w = op.operand_shape(1)?;
        let y = op.result_shape(0)?;
        let (&[n, c, h, wd], &[o, cg, kh, kw], &[yn, yo, oh, ow]) = (&x[..], &w[..], &y[..]) else {
            return Err(op.invalid(format!(
                "expected NCHW input, OIHW weight and NCHW result, got shapes {x:?}, {w:?}, {y:?}"
            )));
        };
        let positive = |key: &str, len: usize, default: i64| -> Result<Vec<usize>, CodegenError> {
            let v = op.i64_array_or(key, &vec![default; len])?;
            if v.len() != len || v.iter().any(|&d| d < default) {
                return Err(op.invalid(format!("'{key}' must be {len} integers ≥ {default}, got {v:?}")));
            }
            Ok(v.iter().map(|&d| d as usize).collect())
        };
        let stride = positive("stride", 2, 1)?;
        let pad = positive("pad", 4, 0)?;
        let dilation = positive("dilation", 2, 1)?;
        let groups = op.int_or("groups", 1)?;
        if groups < 1 {
            return Err(op.invalid(format!("'groups' must be at least 1, got {groups}")));
        }
        let groups = groups as usize;
        if c != cg * groups || o % groups != 0 {
            return Err(op.invalid(format!(
                "{c} input channels and {o} output channels do not split into {groups} groups of {cg} inputs"
            )));
        }
        let out_size = |size: usize, before: usize, after: usize, k: usize, s: usize, d: usize| {
            let reach = d * (k.max(1) - 1) + 1;
            (size + before + after).checked_sub(reach).map(|span| span / s + 1)
        };
        let want = (
            out_size(h, pad[0], pad[2], kh, stride[0], dilation[0]),
            out_size(wd, pad[1], pad[3], kw, stride[1], dilation[1]),
        );
        if kh == 0 || kw == 0 || yn != n || yo != o || want != (Some(oh), Some(ow)) {
            return Err(op.invalid(format!(
                "result shape {y:?} does not match input {x:?}, weight {w:?} and the window"
            )));
        }
        Ok(ConvGeometry {
            batches: n,
            channels: c,
            height: h,
            width: wd,
            out_channels: o,
            kernel: [kh, kw],
            output: [oh, ow],
            stride: [stride[0], stride[1]],
            pad: [pad[0], pad[1], pad[2], pad[3]],
            dilation: [dilation[0], dilation[1]],
            groups,
        })
    }

    fn group_inputs(&self) -> usize {
        self.channels / self.groups
    }

    fn positions(&self) -> usize {
        self.output[0] * self.output[1]
    }

    /// One input channel per group and one output per input channel, with a
    /// horizontal stride the direct kernel reads with vector loads.
    fn is_depthwise(&self) -> bool {
        self.groups == self.channels && self.out_channels == self.channels && self.stride[1] <= 2
    }
}

/// Everything the kernels of one conv2d are specialized for.
pub(super) struct ConvPlan {
    geometry: ConvGeometry,
    layer: Layer,
    accumulation: Accumulation,
    image: ImageShape,
    /// `None` for the depthwise kernel.
    gemm: Option<ConvGemm>,
    /// The pack kernel reads the input itself: no pad kernel, no image
    /// ([`reads_input_directly`]).
    direct_input: bool,
}

/// Which GEMM multiplies a conv's packed panels.
#[derive(Copy, Clone, Debug)]
enum ConvGemm {
    /// Positions in the lanes ([`gemm`](crate::kernels::gemm)).
    Positions(GemmShape),
    /// Output channels in the lanes ([`channel_gemm`](crate::kernels::channel_gemm)).
    Channels(ChannelGemmShape),
    /// Winograd F(2×2, 3×3) ([`winograd`](crate::kernels::winograd)): its own image,
    /// input transform, GEMM and output transform.
    Winograd(WinogradShape),
}

/// Winograd is chosen by default, instead of `vpmaddwd` or `vpmaddubsw`
/// (not VNNI), for layers whose transformed multiplies are at most this
/// multiple of the direct ones: on Zen 3 it beat both on resnet18's four 3×3
/// layer shapes, the 7×7 map (stacked tiles: 0.58) included
/// (`resnet_layer_speed`).
const WINOGRAD_MAX_RELATIVE_COST: f64 = 1.2;

/// The fewest input and output channels for which Winograd is chosen by
/// default: its input transform is amortized over the output channels and
/// its output transform over the input channels (mnist_mbv2's 1-channel
/// stem ran 5× slower with it).
const WINOGRAD_MIN_CHANNELS: usize = 16;

impl ConvGemm {
    /// The GEMM `choice` names, by default the one that computes the fewest
    /// lanes per useful multiply-accumulate; Winograd where `winograd`
    /// applies and the choice forces it, or by default on the exact path
    /// when it saves enough multiplies.
    fn choose(positions: GemmShape, winograd: Option<WinogradShape>, choice: ConvGemmChoice) -> ConvGemm {
        if let Some(w) = winograd {
            let avx2_only =
                matches!(positions.accumulation, Accumulation::Words | Accumulation::UnsignedBytes);
            let amortized = w.channels.min(w.out_channels) >= WINOGRAD_MIN_CHANNELS;
            let cheaper = avx2_only && amortized && w.relative_cost() <= WINOGRAD_MAX_RELATIVE_COST;
            if choice == ConvGemmChoice::Winograd || (choice == ConvGemmChoice::Cheapest && cheaper) {
                return ConvGemm::Winograd(w);
            }
        }
        let channels = ChannelGemmShape::of(&positions);
        let channel_lanes = match choice {
            ConvGemmChoice::Cheapest | ConvGemmChoice::Winograd => channels.waste() < positions.waste(),
            ConvGemmChoice::PositionLanes => false,
            ConvGemmChoice::ChannelLanes => true,
        };
        if channel_lanes {
            ConvGemm::Channels(channels)
        } else {
            ConvGemm::Positions(positions)
        }
    }

    /// Scratch bytes after the image: the panels, and Winograd's sums.
    fn scratch_bytes(&self) -> usize {
        let panels = |p: &GemmShape| (p.panels() * p.splits * p.panel_bytes()).next_multiple_of(BUFFER_ALIGN);
        match self {
            ConvGemm::Positions(shape) => panels(shape),
            ConvGemm::Channels(shape) => panels(&shape.panels),
            ConvGemm::Winograd(shape) => {
                shape.panel_bytes().next_multiple_of(BUFFER_ALIGN)
                    + shape.sum_bytes().next_multiple_of(BUFFER_ALIGN)
            }
        }
    }
}

impl ConvPlan {
    fn new(op: &LowerOp<'_>, options: &KernelOptions) -> Result<ConvPlan, CodegenError> {
        let geometry = ConvGeometry::read(op)?;
        let [kh, kw] = geometry.kernel;
        let relu = op.name() == qnn_op::CONV2D_RELU;
        let layer = Layer::read(op, relu, geometry.out_channels, geometry.group_inputs() * kh * kw)?;
        ConvPlan::of(op, geometry, layer, options)
    }

    /// The plan of the convolution `geometry` computing `layer`, for `op`
    /// (its target, and the name errors give): how a lowering that states its
    /// op as a convolution (a transposed one, [`super::conv_transpose`])
    /// reuses these kernels.
    pub(super) fn of(
        op: &LowerOp<'_>,
        geometry: ConvGeometry,
        layer: Layer,
        options: &KernelOptions,
    ) -> Result<ConvPlan, CodegenError> {
        let depthwise = geometry.is_depthwise();
        let mut accumulation = if depthwise {
            Accumulation::Words
        } else {
            Accumulation::choose(op.target, options, layer.rows())
        };
        op.target.require(&accumulation.needed_features(), op.name())?;
        let mut image = ImageShape {
            batches: geometry.batches,
            channels: geometry.channels,
            height: geometry.height,
            width: geometry.width,
            pad: geometry.pad,
            bytes: accumulation.uses_bytes(),
            input: layer.input.element,
            zero_point: layer.input.zero_point,
            byte_zero_point: layer.byte_zero_point(),
        };
        // Gather indices and table offsets are i32 element offsets within
        // one image.
        if geometry.channels.saturating_mul(image.plane()).saturating_add(4096) > i32::MAX as usize {
            return Err(op.unsupported("the input image is too large for 32-bit element offsets"));
        }
        let gemm = (!depthwise).then(|| {
            ConvGemm::choose(
                GemmShape::new(
                    accumulation,
                    geometry.batches,
                    geometry.groups,
                    geometry.out_channels / geometry.groups,
                    geometry.positions(),
                    layer.depth,
                ),
                WinogradShape::plan(&geometry, &layer, &image),
                options.conv_gemm,
            )
        });
        if let Some(ConvGemm::Winograd(w)) = gemm {
            accumulation = Accumulation::Words;
            image = w.image;
        }
        let window = window_of(&geometry);
        let direct_input = match gemm {
            Some(ConvGemm::Positions(shape)) => reads_input_directly(&image, &window, &shape),
            Some(ConvGemm::Channels(shape)) => reads_input_directly(&image, &window, &shape.panels),
            Some(ConvGemm::Winograd(_)) | None => false,
        };
        Ok(ConvPlan { geometry, layer, accumulation, image, gemm, direct_input })
    }

    /// The element type of the convolution's result.
    pub(super) fn output_element(&self) -> crate::buffer::ElementType {
        self.layer.output.element
    }

    pub(super) fn scratch_bytes(&self) -> usize {
        self.image_scratch_bytes() + self.gemm.map_or(0, |g| g.scratch_bytes())
    }

    /// Scratch bytes of the padded image (none when it is not made).
    fn image_scratch_bytes(&self) -> usize {
        if self.direct_input {
            0
        } else {
            self.image.scratch_bytes()
        }
    }

    fn output_is_empty(&self) -> bool {
        self.geometry.batches * self.geometry.out_channels * self.geometry.positions() == 0
    }
}

/// The window the pack kernel reads.
fn window_of(g: &ConvGeometry) -> Window {
    Window {
        kernel: g.kernel,
        stride: g.stride,
        dilation: g.dilation,
        output: g.output,
        group_inputs: g.group_inputs(),
    }
}

/// `place + delta` for an arena or rodata place.
fn offset(place: Place, delta: usize) -> Result<Place, CodegenError> {
    match place {
        Place::Arena(o) => Ok(Place::Arena(o + delta)),
        Place::Rodata(o) => Ok(Place::Rodata(o + delta)),
        Place::Io(_) => {
            Err(CodegenError::new(CodegenErrorKind::Assembler, "scratch space must be in the arena"))
        }
    }
}

impl OpLowering for Conv2dLowering {
    fn plan(&self, op: &LowerOp<'_>) -> Result<Plan, CodegenError> {
        let plan = ConvPlan::new(op, &self.options)?;
        Ok(Plan::weighted_layer(op, plan.scratch_bytes()))
    }

    /// `N·O·OH·OW` outputs of `Cg·kh·kw` taps each.
    fn multiply_accumulates(&self, op: &LowerOp<'_>) -> u64 {
        let Ok(g) = ConvGeometry::read(op) else { return 0 };
        (g.batches * g.out_channels * g.positions() * g.group_inputs() * g.kernel[0] * g.kernel[1]) as u64
    }

    fn emit(&self, op: &LowerOp<'_>, out: &mut Emit<'_>) -> EmitResult {
        let plan = ConvPlan::new(op, &self.options)?;
        let (input, output) = (out.operand(0)?, out.result(0)?);
        let scratch = out.planned_scratch(op)?;
        emit_conv(&plan, &self.options, [input, output, scratch], out)
    }
}

/// Emits the kernels of `plan` reading `input` and writing `output`, with
/// `plan.scratch_bytes()` of arena at `scratch`.
pub(super) fn emit_conv(
    plan: &ConvPlan,
    options: &KernelOptions,
    [input, output, scratch]: [Place; 3],
    out: &mut Emit<'_>,
) -> EmitResult {
    if plan.output_is_empty() {
        return Ok(());
    }
    let g = &plan.geometry;
    let direct = plan.direct_input;
    let image_place = if direct { input } else { scratch };
    let planes = g.batches * g.channels;
    if planes > 0 && !direct {
        out.kernel(KernelCode {
            code: emit_pad(&plan.image, input, image_place)?,
            work: planes,
            work_item: "input plane",
            strategy: format!(
                "pad and center into a {}×{} {} image",
                plan.image.padded_height(),
                plan.image.padded_width(),
                if plan.image.bytes { "u8" } else { "i16" }
            ),
        });
    }
    let init = plan.layer.accumulator_init(plan.accumulation);
    let records = channel_records(&plan.layer.requant, &init);
    let Some(gemm) = plan.gemm else {
        let shape = DepthwiseShape::new(
            g.channels,
            g.kernel,
            g.output,
            g.stride,
            g.dilation,
            &plan.image,
            options.depthwise_taps,
        );
        let code =
            emit_depthwise(&plan.layer, &shape, image_place, output, &records, &globals(&plan.layer), out)?;
        out.kernel(KernelCode { code, work: planes, work_item: "channel plane", strategy: shape.describe() });
        return Ok(());
    };

    let window = window_of(g);
    let panels = offset(scratch, plan.image_scratch_bytes())?;
    let panel_shape = match gemm {
        ConvGemm::Positions(shape) => shape,
        ConvGemm::Channels(shape) => shape.panels,
        ConvGemm::Winograd(shape) => {
            let panels = offset(scratch, plan.image_scratch_bytes())?;
            let sums = offset(panels, shape.panel_bytes().next_multiple_of(BUFFER_ALIGN))?;
            let places = WinogradPlaces { image: image_place, panels, sums, output };
            return emit_winograd(plan, &shape, &records, places, out);
        }
    };
    let (tables, blocks_at) = pack_tables(&plan.image, &window, &panel_shape);
    let tables = out.rodata(&tables);
    out.kernel(KernelCode {
        code: emit_pack(
            &plan.image,
            &window,
            &panel_shape,
            PackPlaces { image: image_place, panels, tables, blocks_at },
        )?,
        work: panel_shape.panels(),
        work_item: "panel of output positions",
        strategy: format!(
            "{} of {} positions × {} {}",
            if direct { "centered straight from the input: im2col" } else { "im2col" },
            panel_shape.block_width(),
            panel_shape.units,
            if plan.accumulation.uses_bytes() { "byte quads" } else { "i16 pairs" }
        ),
    });
    match gemm {
        ConvGemm::Channels(shape) => emit_channel_lanes_gemm(plan, &shape, &init, panels, output, out),
        _ => emit_position_gemm(plan, &panel_shape, &records, panels, output, out),
    }
}

/// The positions-in-lanes GEMM kernel of a conv.
fn emit_position_gemm(
    plan: &ConvPlan,
    gemm: &GemmShape,
    records: &[u8],
    panels: Place,
    output: Place,
    out: &mut Emit<'_>,
) -> Result<(), CodegenError> {
    let mut blob = pack_weights(|c| plan.layer.row(c), gemm);
    let records_at = append_aligned(&mut blob, records);
    let globals_at = append_aligned(&mut blob, &globals(&plan.layer));
    let splits_at = append_aligned(&mut blob, &split_table(gemm));
    let rodata = out.rodata(&blob);
    let places =
        GemmPlaces { panels, output, rodata, records: records_at, globals: globals_at, splits: splits_at };
    out.kernel(KernelCode {
        code: emit_gemm(&plan.layer, gemm, places)?,
        work: gemm.items(),
        work_item: if gemm.splits > 1 {
            "range of channel tiles of a panel"
        } else {
            "panel of output positions"
        },
        strategy: format!(
            "{}; {} channels × {} positions per tile",
            plan.accumulation.describe(),
            gemm.rows,
            gemm.block_width()
        ),
    });
    Ok(())
}

/// The channels-in-lanes GEMM kernel of a conv.
fn emit_channel_lanes_gemm(
    plan: &ConvPlan,
    gemm: &ChannelGemmShape,
    init: &[i32],
    panels: Place,
    output: Place,
    out: &mut Emit<'_>,
) -> Result<(), CodegenError> {
    let mut blob = pack_channel_weights(&plan.layer, gemm);
    let records_at = append_aligned(&mut blob, &channel_block_records(&plan.layer, gemm, init));
    let globals_at = append_aligned(&mut blob, &globals(&plan.layer));
    let rodata = out.rodata(&blob);
    let places = ChannelGemmPlaces { panels, output, rodata, records: records_at, globals: globals_at };
    out.kernel(KernelCode {
        code: emit_channel_gemm(&plan.layer, gemm, places)?,
        work: gemm.items(),
        work_item: "block of 16 output channels",
        strategy: format!(
            "{}; 4 positions × 16 channels per tile (channels in lanes)",
            plan.accumulation.describe()
        ),
    });
    Ok(())
}

/// The scratch and output places of a Winograd conv's kernels.
#[derive(Copy, Clone, Debug)]
struct WinogradPlaces {
    image: Place,
    panels: Place,
    sums: Place,
    output: Place,
}

/// The input transform, GEMM and output transform of a Winograd conv
/// (the pad kernel is emitted already).
fn emit_winograd(
    plan: &ConvPlan,
    shape: &WinogradShape,
    records: &[u8],
    places: WinogradPlaces,
    out: &mut Emit<'_>,
) -> Result<(), CodegenError> {
    const NAME: &str = "winograd F(2×2,3×3)";
    let g = &plan.geometry;
    out.kernel(KernelCode {
        code: emit_input_transform(shape, places.image, places.panels)?,
        work: g.batches * g.channels.div_ceil(2),
        work_item: "pair of input channels",
        strategy: format!(
            "{NAME} input transform: {}×{} tiles, 8 tiles × 2 channels per vector",
            shape.tiles[0], shape.tiles[1]
        ),
    });
    let weights = transformed_weights(&plan.layer, g.channels);
    let gemm = &shape.gemm;
    let mut blob = pack_weights(|c| &weights[c * g.channels..(c + 1) * g.channels], gemm);
    let splits_at = append_aligned(&mut blob, &split_table(gemm));
    let rodata = out.rodata(&blob);
    let gemm_places = GemmPlaces {
        panels: places.panels,
        output: places.sums,
        rodata,
        records: 0,
        globals: 0,
        splits: splits_at,
    };
    out.kernel(KernelCode {
        code: emit_gemm(&plan.layer, gemm, gemm_places)?,
        work: gemm.items(),
        work_item: "panel of tiles of one tap",
        strategy: format!(
            "{NAME} GEMM: vpmaddwd exact on i16 transforms (any 8-bit weights; every channel proves |Σ| < 2^29); \
             {} channels × {} tiles per tile, 16 taps",
            gemm.rows,
            gemm.block_width()
        ),
    });
    let mut blob = records.to_vec();
    let globals_at = append_aligned(&mut blob, &globals(&plan.layer));
    let rodata = out.rodata(&blob);
    let transform_places = OutputTransformPlaces {
        sums: places.sums,
        output: places.output,
        rodata,
        records: 0,
        globals: globals_at,
    };
    out.kernel(KernelCode {
        code: emit_output_transform(&plan.layer, shape, transform_places)?,
        work: g.batches * g.out_channels,
        work_item: "output channel plane",
        strategy: format!("{NAME} output transform: Aᵀ M A / 4, bias, requantize; 8 tiles per vector"),
    });
    Ok(())
}
