//! `accel-lower`: hands each `qnn.conv2d_relu` the toy accelerator supports to
//! it, and explains each one it keeps.
//!
//! An op is taken when [`crate::check_conv`] accepts its types and parameters
//! (3x3 kernels with pad 1 or 1x1 with pad 0, dilation 1, one group, stride 1
//! or 2, i8 storage, channel counts that are multiples of 8, batch 1, static
//! shapes, the engine's rounding) and both channel counts are at most the
//! `max-channels` option. It becomes `accel.dma_in` on each operand, the
//! `accel.conv2d_relu`, and `accel.dma_out` on the result, all at the op's
//! location; a missing bias becomes a zero `tensor<Oxi32>` constant
//! (`fp.constant`), since the engine always adds one. Every other op stays as
//! it is, with a warning at it that lists every reason.
//!
//! The rewrite is exact: `accel.conv2d_relu` computes `qnn.conv2d_relu` with
//! the parameters the check demanded, and the transfers are identities. The
//! dialect states exactly that as equivalence rules (`src/equivalence.rs`),
//! so `toy-opt --verify-equiv` proves each run of the pass under the `exact`
//! relation (the zero bias by `qnn`'s rule that a zero bias adds nothing).
//!
//! Statistics: `lowered`, `kept`.
//!
//! ```text
//! // before
//! %y = qnn.conv2d_relu(%x, %w, %b) {pad = [1, 1, 1, 1]} : (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>, ...) -> ...
//! // after
//! %0 = accel.dma_in(%x) : ...
//! %1 = accel.dma_in(%w) : ...
//! %2 = accel.dma_in(%b) : ...
//! %3 = accel.conv2d_relu(%0, %1, %2) {stride = [1, 1]} : ...
//! %y = accel.dma_out(%3) : ...
//! ```

use crate::ops::conv::{check_conv_with, ConvContract, ConvParams, Elements, ACCEL_ROUNDING};
use qopt_dialect_fp::{attrs, FpDialect};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::BadOptionValue;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    Context, DenseElements, Diagnostic, Dialect, InsertPoint, Location, Module, OpId, OperationState, Pass,
    PassContext, PassOutcome, Rewriter, Severity, ValueId,
};

/// The `accel-lower` pass; see the module docs.
#[derive(Copy, Clone, Debug, Default)]
pub struct AccelLower;

/// The option that bounds channel counts.
const MAX_CHANNELS: &str = "max-channels";

const INFO: PassInfo = PassInfo {
    name: "accel-lower",
    summary: "run each qnn.conv2d_relu the toy accelerator supports on it, between DMA transfers",
    preserves_semantics: true,
    // Bit-identical results: the `accel` rules define each op the pass
    // writes as the `qnn` computation it replaces.
    equivalence: Some(Relation::Exact),
    description: "Rewrites each `qnn.conv2d_relu` the accelerator supports (3x3 kernels with pad 1 or 1x1 \
     with pad 0, dilation 1, groups 1, stride 1 or 2, i8 storage, batch 1, static shapes, \
     channels multiples of 8 and at most `max-channels`) into `accel.dma_in` on each operand, \
     `accel.conv2d_relu` and `accel.dma_out`, keeping the op's location; a missing bias becomes \
     a zero constant. Ops it cannot take stay, with a warning naming every reason. Run \
     `canonicalize` after it to keep the data of chained convolutions on the device.\n\n\
     ```\n\
     // before\n\
     %y = qnn.conv2d_relu(%x, %w, %b) {pad = [1, 1, 1, 1]} : (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>, \
     tensor<16x8x3x3x!qnn.uniform<i8:f32, 0.01:0>>, tensor<16xi32>) -> tensor<1x16x4x4x!qnn.uniform<i8:f32, 0.1:-128>>\n\
     // after\n\
     %0 = accel.dma_in(%x) : (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>) -> tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>\n\
     %1 = accel.dma_in(%w) : (tensor<16x8x3x3x!qnn.uniform<i8:f32, 0.01:0>>) -> tensor<16x8x3x3x!qnn.uniform<i8:f32, 0.01:0>>\n\
     %2 = accel.dma_in(%b) : (tensor<16xi32>) -> tensor<16xi32>\n\
     %3 = accel.conv2d_relu(%0, %1, %2) {stride = [1, 1]} : (...) -> tensor<1x16x4x4x!qnn.uniform<i8:f32, 0.1:-128>>\n\
     %y = accel.dma_out(%3) : (tensor<1x16x4x4x!qnn.uniform<i8:f32, 0.1:-128>>) -> tensor<1x16x4x4x!qnn.uniform<i8:f32, 0.1:-128>>\n\
     ```",
};

impl Pass for AccelLower {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![OptionSpec::new(MAX_CHANNELS, OptionKind::Int, "512")
            .help("the most input or output channels the conv engine takes")]
    }

    // Checked when the pipeline is parsed: a bad value is a usage error
    // located in the pipeline text (exit 2), not a pass failure.
    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        let max_channels = options.int(MAX_CHANNELS);
        if max_channels < 1 {
            let message = format!("'{MAX_CHANNELS}' must be at least 1, got {max_channels}");
            return Err(BadOptionValue::new(MAX_CHANNELS, message));
        }
        Ok(())
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        self.check_options(options)?;
        let max_channels = options.int(MAX_CHANNELS);
        let conv = cx.ctx.op_name(qnn_op::CONV2D_RELU);
        let candidates: Vec<OpId> = module.ops_where(|op| module.op_name(op) == conv);
        let (mut lowered, mut kept) = (0u64, 0u64);
        for op in candidates {
            match supported(cx.ctx, module, op, max_channels) {
                Ok(contract) => {
                    lower(cx.ctx, module, op, &contract)
                        .map_err(|e| Diagnostic::at_op(cx.ctx, module, op, Severity::Error, e))?;
                    lowered += 1;
                }
                Err(reasons) => {
                    let message = format!("not lowered to accel: {}", reasons.join("; "));
                    cx.warn_at(module, op, message);
                    kept += 1;
                }
            }
        }
        cx.add_stat("lowered", lowered);
        cx.add_stat("kept", kept);
        Ok(PassOutcome::from_changed(lowered > 0))
    }
}

/// What the engine would run for `op` (a verified `qnn.conv2d_relu`), or why not.
fn supported(
    ctx: &Context,
    module: &Module,
    op: OpId,
    max_channels: i64,
) -> Result<ConvContract, Vec<String>> {
    let operand = |i: usize| module.value_type(module.operand(op, i));
    let bias = (module.num_operands(op) > 2).then(|| operand(2));
    let result = module.value_type(module.result(op, 0));
    let checked =
        check_conv_attrs(ctx, module.op_attrs(op), operand(0), operand(1), bias, result, Elements::Quantized);
    let mut reasons = checked.as_ref().err().cloned().unwrap_or_default();
    // The channel bound is this pass's option, not a rule of the op.
    let channels = |d: usize, t| ctx.tensor_shape(operand(t)).and_then(|s| s.get(d).copied());
    for (what, n) in [("input", channels(1, 0)), ("output", channels(0, 1))] {
        if let Some(n) = n.filter(|&n| n > max_channels) {
            reasons.push(format!("{n} {what} channels exceed {MAX_CHANNELS} = {max_channels}"));
        }
    }
    match checked {
        Ok(contract) if reasons.is_empty() => Ok(contract),
        _ => Err(reasons),
    }
}

/// [`check_conv_with`] for a convolution with the attributes `dict` of
/// `fp.conv2d` / `qnn.conv2d_relu` (`stride`, `pad`, `dilation`, `groups`,
/// `rounding`) and these operand and result types. A float convolution has no
/// rounding yet: it gets the engine's.
pub(crate) fn check_conv_attrs(
    ctx: &Context,
    dict: qopt_ir_core::Attribute,
    x: qopt_ir_core::Type,
    w: qopt_ir_core::Type,
    bias: Option<qopt_ir_core::Type>,
    result: qopt_ir_core::Type,
    elements: Elements,
) -> Result<ConvContract, Vec<String>> {
    let read = || -> Result<_, String> {
        let stride = attrs::int_array_in(ctx, dict, "stride", Some(2), &[1, 1])?;
        let pad = attrs::int_array_in(ctx, dict, "pad", Some(4), &[0, 0, 0, 0])?;
        let dilation = attrs::int_array_in(ctx, dict, "dilation", Some(2), &[1, 1])?;
        let groups = attrs::int_in(ctx, dict, "groups", 1)?;
        Ok((stride, pad, dilation, groups))
    };
    // A verified op's attributes read; a failure here is still a reason to
    // keep it rather than a crash.
    let (stride, pad, dilation, groups) = read().map_err(|e| vec![e])?;
    let params = ConvParams {
        stride: &stride,
        pad: Some(&pad),
        dilation: &dilation,
        groups,
        rounding: match elements {
            Elements::Quantized => qopt_dialect_qnn::rounding_of(ctx, dict),
            Elements::Float => ACCEL_ROUNDING,
        },
    };
    check_conv_with(ctx, x, w, bias, result, &params, elements)
}

/// Replaces `op` by transfers in, the accelerator op, and the transfer out.
fn lower(ctx: &mut Context, module: &mut Module, op: OpId, contract: &ConvContract) -> Result<(), String> {
    let loc = module.op_loc(op);
    let result_type = module.value_type(module.result(op, 0));
    let operands: Vec<ValueId> = module.operands(op).collect();
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(op));
    rewriter.set_loc(loc);
    let back = on_device(&mut rewriter, operands, result_type, contract, loc)?;
    rewriter.replace_op(op, &[back]).map_err(|e| format!("cannot replace the op: {e:?}"))
}

/// At the rewriter's insertion point: `accel.dma_in` of `x`, `w` and the bias
/// (zeros at `loc` when `operands` has none), `accel.conv2d_relu` with the contract's
/// stride, and `accel.dma_out` of its result, which is returned.
pub(crate) fn on_device(
    rewriter: &mut Rewriter<'_>,
    mut operands: Vec<ValueId>,
    result_type: qopt_ir_core::Type,
    contract: &ConvContract,
    loc: Location,
) -> Result<ValueId, String> {
    if operands.len() == 2 {
        operands.push(zero_bias(rewriter, contract.out_channels, loc)?);
    }
    let no_attrs = rewriter.ctx.dict_attr(&[]);
    let mut on_device = Vec::with_capacity(3);
    for v in operands {
        let dma = rewriter.create_inferred("accel.dma_in", &[v], no_attrs)?;
        on_device.push(rewriter.module.result(dma, 0));
    }
    let stride = rewriter.ctx.i64_array_attr(&[contract.stride, contract.stride]);
    let attrs = rewriter.ctx.dict_attr(&[("stride", stride)]);
    let name = rewriter.ctx.op_name("accel.conv2d_relu");
    let conv =
        rewriter.create(OperationState::new(name).operands(&on_device).results(&[result_type]).attrs(attrs));
    let computed = rewriter.module.result(conv, 0);
    let out = rewriter.create_inferred("accel.dma_out", &[computed], no_attrs)?;
    Ok(rewriter.module.result(out, 0))
}

/// A constant of zeros of type `tensor<Oxi32>` at the insertion point, made by
/// the `fp` dialect the way its folders make constants (`fp.constant`).
fn zero_bias(rewriter: &mut Rewriter<'_>, out_channels: i64, loc: Location) -> Result<ValueId, String> {
    let i32_type = rewriter.ctx.common().i32;
    let ty = rewriter.ctx.tensor_type(&[out_channels], i32_type);
    let zeros = DenseElements::from_i128(rewriter.ctx, ty, &[0])?;
    let value = rewriter.ctx.dense_attr(zeros);
    FpDialect
        .materialize_constant(rewriter, value, ty, loc)
        .ok_or_else(|| "cannot make a zero bias".to_string())
}
