//! `qnn.prelu` (`docs/quant-semantics.md` §7.6) with a constant slope of one
//! value or one per index of one axis (a channel).
//!
//! Each slope value becomes a 256-byte block in rodata
//! ([`prelu_block`](crate::kernels::requantize::prelu_block)): the input zero
//! point and the non-negative side's requantization, then the negative
//! side's, then the sign its value takes (the slope's, 0 for a zero slope).
//! The rows kernel walks the tensor with the block stream stepping one block
//! per index of the slope's axis (not at all for one value), and runs
//! [`emit_prelu_rows`]. Multipliers come from `quant_params::prelu_multipliers`,
//! as in the interpreter.

use super::operands::QuantOperand;
use crate::error::CodegenError;
use crate::kernels::quant_params::{ByteQuant, FixedPointMultiplier};
use crate::kernels::requantize::{block_nest, emit_prelu_rows, prelu_block, StageConstants, PRELU_BLOCK};
use crate::lower::rows::RowKernel;
use crate::lower::{Emit, EmitResult, LowerOp};
use qopt_dialect_qnn::quant_params::prelu_multipliers;
use qopt_dialect_qnn::rounding_of;
use qopt_ir_core::dense_values_f64;

/// `qnn.prelu`: per-tensor input and result, a constant slope.
pub(crate) struct Prelu;

pub(crate) struct PreluOp {
    input: ByteQuant,
    unsigned: bool,
    output: ByteQuant,
    shape: Vec<usize>,
    /// The slope values, and the input axis they run along (`None`: one).
    slopes: Vec<f64>,
    axis: Option<usize>,
    positive: (i32, i32),
    negative: Vec<Option<(i32, i32)>>,
}

fn read(op: &LowerOp<'_>) -> Result<PreluOp, CodegenError> {
    op.expect_arity(2..=2, 1)?;
    let x = QuantOperand::of(op, op.operand_type(0), "the input")?;
    let unsigned = x.unsigned;
    let input = x.per_tensor(op, "the input")?;
    let output = QuantOperand::of(op, op.result_type(0), "the result")?.per_tensor(op, "the result")?;
    let shape = op.operand_shape(0)?;
    if op.result_shape(0)? != shape {
        return Err(op.invalid("the result must have the input's shape"));
    }
    let slope = op
        .constant_operand(1)
        .ok_or_else(|| op.unsupported("the slope must be a constant (it is tabulated when compiling)"))?;
    let slopes = dense_values_f64(op.ctx, slope, op.ctx.element_type(slope.ty))
        .ok_or_else(|| op.invalid("the slope has no float values"))?;
    let slope_shape = op.operand_shape(1)?;
    let axis = slope_axis(&shape, &slope_shape).ok_or_else(|| {
        op.unsupported(format!(
            "a slope of shape {slope_shape:?} for an input of shape {shape:?}: compiled prelu takes one \
             value or one per index of one axis"
        ))
    })?;
    let (x_quant, out_quant) = (x.quant, op.quant_of(op.result_type(0)).ok_or_else(|| op.invalid("result"))?);
    let (positive, negative) = prelu_multipliers(x_quant, out_quant, &slopes).map_err(|e| op.invalid(e))?;
    Ok(PreluOp { input, unsigned, output, shape, slopes, axis, positive, negative })
}

/// The input axis a slope of `slope_shape` varies along (aligned to `shape`
/// from the back, numpy style): `Some(None)` for one value, `Some(Some(a))`
/// for one per index of axis `a`, `None` for anything else.
fn slope_axis(shape: &[usize], slope_shape: &[usize]) -> Option<Option<usize>> {
    if slope_shape.len() > shape.len() {
        return None;
    }
    let offset = shape.len() - slope_shape.len();
    let mut varying = slope_shape.iter().enumerate().filter(|&(_, &d)| d != 1);
    match (varying.next(), varying.next()) {
        (None, _) => Some(None),
        (Some((i, &d)), None) if d == shape[offset + i] => Some(Some(offset + i)),
        _ => None,
    }
}

impl RowKernel for Prelu {
    type Op<'a> = PreluOp;

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<PreluOp, CodegenError> {
        read(op)
    }

    fn emit_rows(&self, op: &LowerOp<'_>, r: PreluOp, out: &mut Emit<'_>) -> EmitResult {
        let rounding = rounding_of(op.ctx, op.module.op_attrs(op.op));
        let stage = |(multiplier, shift): (i32, i32)| {
            StageConstants::single_term(FixedPointMultiplier { multiplier, shift }, rounding, &r.output)
        };
        let positive = stage(r.positive);
        let mut blocks = Vec::with_capacity(r.slopes.len() * PRELU_BLOCK);
        for (&alpha, negative) in r.slopes.iter().zip(&r.negative) {
            // A zero slope multiplies its values by 0: any stage gives 0.
            let negative = negative.map_or(positive, stage);
            let sign = if alpha > 0.0 {
                1
            } else if alpha < 0.0 {
                -1
            } else {
                0
            };
            blocks.extend(prelu_block(r.input.zero_point, &positive, &negative, sign));
        }
        let table = out.rodata(&blocks);
        let nest = block_nest(&r.shape, [out.operand(0)?, out.result(0)?, table], PRELU_BLOCK, r.axis);
        let strategy = match r.axis {
            Some(axis) => {
                format!("AVX2, 8 lanes, both sides requantized and blended, slopes along axis {axis}")
            }
            None => "AVX2, 8 lanes, both sides requantized and blended".to_string(),
        };
        out.kernel(emit_prelu_rows(&nest, r.unsigned, &r.output, rounding, strategy)?);
        Ok(())
    }
}
