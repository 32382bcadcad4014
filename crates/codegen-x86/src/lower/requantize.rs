//! `qnn.requantize` (`docs/quant-semantics.md` §5) with per-tensor or
//! per-axis input parameters, and the requantizing row kernel that
//! `qnn.concat` reuses for its inputs (§7.3).
//!
//! Each parameter entry of the input becomes a 128-byte **parameter block**
//! in rodata ([`param_block`]): its `zp_in` and multiplier broadcast to eight
//! dwords, its rounding bias and shift as four qwords. The rows kernel walks
//! the tensor with the block stream (`AUX`) stepping one block per index of
//! the quantized axis (not at all per tensor), so every row loads its block
//! once and runs [`emit_byte_lanes`] with `v = q − zp_in` and the shared
//! requantizer of `kernels/requantize.rs`. When the axis is the last dimension, rows have
//! one element each (see `Nest::simplified`): slower, still exact.
//!
//! Multipliers come from `quant_params::requantize_multipliers`, as in the
//! interpreter; each becomes a kernel shift in `1..=62` with
//! [`StageConstants::single_term`] (same clamped results for every input).

use super::operands::QuantOperand;
use crate::error::CodegenError;
use crate::kernels::quant_params::{ByteQuant, FixedPointMultiplier};
use crate::kernels::requantize::StageConstants;
use crate::kernels::requantize::{block_nest, emit_requantize_rows, param_block, PARAM_BLOCK};
use crate::lower::rows::RowKernel;
use crate::lower::{Emit, EmitResult, LowerOp};
use qopt_dialect_qnn::quant_params::requantize_multipliers;
use qopt_dialect_qnn::rounding_of;

/// `qnn.requantize`: per-tensor or per-axis input, per-tensor result.
pub(crate) struct Requantize;

pub(crate) struct RequantizeOp<'a> {
    input: QuantOperand<'a>,
    output: ByteQuant,
    shape: Vec<usize>,
    multipliers: Vec<(i32, i32)>,
}

fn read<'a>(op: &LowerOp<'a>) -> Result<RequantizeOp<'a>, CodegenError> {
    op.expect_arity(1..=1, 1)?;
    let input = QuantOperand::of(op, op.operand_type(0), "the operand")?;
    let output = QuantOperand::of(op, op.result_type(0), "the result")?.per_tensor(op, "the result")?;
    let shape = op.operand_shape(0)?;
    if op.result_shape(0)? != shape {
        return Err(op.invalid("the result must have the operand's shape"));
    }
    if let Some(axis) = input.axis {
        if shape.get(axis) != Some(&input.params.len()) {
            return Err(op.invalid(format!(
                "per-axis parameters along axis {axis} do not fit the operand's shape {shape:?}"
            )));
        }
    }
    let multipliers = requantize_multipliers(input.quant, output_quant(op)?).map_err(|e| op.invalid(e))?;
    Ok(RequantizeOp { input, output, shape, multipliers })
}

fn output_quant<'a>(op: &LowerOp<'a>) -> Result<&'a qopt_ir_core::QuantType, CodegenError> {
    op.quant_of(op.result_type(0)).ok_or_else(|| op.invalid("the result must be quantized"))
}

impl RowKernel for Requantize {
    type Op<'a> = RequantizeOp<'a>;

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<RequantizeOp<'a>, CodegenError> {
        read(op)
    }

    fn emit_rows(&self, op: &LowerOp<'_>, r: Self::Op<'_>, out: &mut Emit<'_>) -> EmitResult {
        let rounding = rounding_of(op.ctx, op.module.op_attrs(op.op));
        let mut blocks = Vec::with_capacity(r.multipliers.len() * PARAM_BLOCK);
        for (p, &(multiplier, shift)) in r.input.params.iter().zip(&r.multipliers) {
            let stage =
                StageConstants::single_term(FixedPointMultiplier { multiplier, shift }, rounding, &r.output);
            blocks.extend(param_block(p.zero_point as i32, &stage));
        }
        let table = out.rodata(&blocks);
        let nest = block_nest(&r.shape, [out.operand(0)?, out.result(0)?, table], PARAM_BLOCK, r.input.axis);
        let strategy = match r.input.axis {
            Some(axis) => format!("AVX2, 8 lanes, parameters per index of axis {axis}"),
            None => "AVX2, 8 lanes".to_string(),
        };
        out.kernel(emit_requantize_rows(&nest, r.input.unsigned, &r.output, rounding, strategy)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::kernels::testing::*;

    const ROUNDINGS: [&str; 3] = ["half_away_from_zero", "half_to_even", "half_up"];

    /// A per-axis type along `axis` with `n` entries derived from `seed`.
    fn per_axis(storage: &str, axis: usize, n: usize, seed: u64) -> String {
        let bytes = random_bytes(seed, 2 * n);
        let (lo, hi) = if storage.starts_with('u') { (0i64, 255i64) } else { (-128, 127) };
        let entries: Vec<String> = (0..n)
            .map(|i| {
                let scale =
                    2f64.powi(i32::from(bytes[2 * i] % 40) - 20) * (1.0 + f64::from(bytes[2 * i] % 7) / 8.0);
                let zp = lo + i64::from(bytes[2 * i + 1]) % (hi - lo + 1);
                format!("{scale:?}:{zp}")
            })
            .collect();
        format!("!qnn.uniform<{storage}:f32:{axis}, {{{}}}>", entries.join(", "))
    }

    #[test]
    fn requantize_matches_the_interpreter() {
        if !avx2_here() {
            return;
        }
        let shapes: [&[usize]; 7] = [&[0], &[1], &[7], &[33], &[2, 3, 4, 5], &[1, 3, 1, 17], &[3, 5000]];
        let mut seed = 1u64;
        for shape in shapes {
            for (sin, sout) in
                [("i8", "i8"), ("u8", "i8"), ("i8", "u8"), ("u8", "u8"), ("i4", "i8<-127:127>")]
            {
                for rounding in ROUNDINGS {
                    seed += 1;
                    let n: usize = shape.iter().product();
                    let unsigned = sin.starts_with('u');
                    let bytes = random_bytes(seed, n);
                    let bytes = if sin == "i4" {
                        bytes.iter().map(|b| ((*b as i8) >> 4) as u8).collect()
                    } else {
                        bytes
                    };
                    let input = byte_tensor(shape, unsigned, bytes);
                    let attrs = format!("{{rounding = \"{rounding}\"}}");
                    let out =
                        tensor_type(shape, &quant(sout, 0.37, if sout.starts_with('u') { 130 } else { -3 }));
                    for (scale, zp) in [(0.37 * 2.5, 0), (0.37, 5), (0.37 / 4.0, -7), (1e-12, 0), (1e12, 1)] {
                        let zp = if unsigned { zp + 10 } else { zp };
                        let tin = tensor_type(shape, &quant(sin, scale, zp));
                        check(
                            &one_op("qnn.requantize", &attrs, &[&tin], &[&out]),
                            std::slice::from_ref(&input),
                        );
                    }
                    for axis in 0..shape.len() {
                        if shape[axis] == 0 || sin == "i4" {
                            continue;
                        }
                        let tin = tensor_type(shape, &per_axis(sin, axis, shape[axis], seed));
                        check(
                            &one_op("qnn.requantize", &attrs, &[&tin], &[&out]),
                            std::slice::from_ref(&input),
                        );
                    }
                }
            }
        }
    }

    /// §5's per-axis example with the bytes written out.
    #[test]
    fn per_axis_worked_example() {
        if !avx2_here() {
            return;
        }
        let text = one_op(
            "qnn.requantize",
            "",
            &["tensor<2x3x!qnn.uniform<i8:f32:0, {0.1:0, 0.4:-1}>>"],
            &["tensor<2x3x!qnn.uniform<i8:f32, 0.2:0>>"],
        );
        let input = byte_tensor(&[2, 3], false, [3i8, -3, 7, 1, -2, 5].map(|v| v as u8).to_vec());
        check(&text, std::slice::from_ref(&input));
        let mut ctx = context();
        let module = parse(&mut ctx, &text);
        let compiled = compile_op(&ctx, &module, the_op(&module)).unwrap();
        let got = compiled.run(std::slice::from_ref(&input), std::slice::from_ref(&input), 1);
        assert_eq!(bytes_of(&got[0]), [2i8, -2, 4, 4, -2, 12].map(|v| v as u8));
    }

    #[test]
    fn wide_storage_is_unsupported() {
        let e = compile_error(&one_op(
            "qnn.requantize",
            "",
            &["tensor<4x!qnn.uniform<i16:f32, 0.5:0>>"],
            &["tensor<4x!qnn.uniform<i8:f32, 0.5:0>>"],
        ));
        assert_eq!(e.kind, crate::CodegenErrorKind::Unsupported, "{e}");
        assert!(e.message.contains("16-bit"), "{e}");
    }
}
