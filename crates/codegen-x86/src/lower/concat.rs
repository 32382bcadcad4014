//! `qnn.concat {axis}` (`docs/quant-semantics.md` §7.3): each input is
//! written into its window of the result along `axis`, requantized to the
//! result's parameters with its own multiplier, or copied when that changes
//! nothing.
//!
//! An input is copied byte for byte when its scale and zero point equal the
//! result's, its buffer type is the result's and the result's range is the
//! whole byte range: the interpreter's `saturate(q, qmin, qmax)` is then the
//! identity on every byte. Otherwise (other parameters, or a narrowed
//! result range that saturates) it goes through the requantizing rows of
//! `requantize.rs` with one parameter block; equal parameters give the
//! multiplier exactly 1 there, so both paths agree with §5.

use super::movement::{concat_windows, emit_strided_copy};
use super::operands::QuantOperand;
use crate::error::CodegenError;
use crate::kernels::quant_params::ByteQuant;
use crate::kernels::requantize::{emit_requantize_rows, per_tensor_block};
use crate::kernels::rows::{Stream, AUX};
use crate::lower::rows::RowKernel;
use crate::lower::{Emit, EmitResult, LowerOp};
use qopt_dialect_qnn::quant_params::requantize_multipliers;
use qopt_dialect_qnn::rounding_of;

/// `qnn.concat`.
pub(crate) struct QuantConcat;

/// How one input reaches the result.
pub(crate) enum Part {
    /// Bytes copied unchanged.
    Copy,
    /// Requantized with `(m, n)`.
    Requantize { input: ByteQuant, multiplier: (i32, i32) },
}

fn read(op: &LowerOp<'_>) -> Result<(ByteQuant, Vec<Part>), CodegenError> {
    let qout = QuantOperand::of(op, op.result_type(0), "the result")?;
    let output = qout.per_tensor(op, "the result")?;
    concat_windows(op)?;
    let mut parts = Vec::with_capacity(op.num_operands());
    for i in 0..op.num_operands() {
        let what = format!("operand {i}");
        let qin = QuantOperand::of(op, op.operand_type(i), &what)?;
        let input = qin.per_tensor(op, &what)?;
        let full_range = (output.qmin, output.qmax) == qout.byte_range();
        if input.scale == output.scale
            && input.zero_point == output.zero_point
            && input.element == output.element
            && full_range
        {
            parts.push(Part::Copy);
        } else {
            let multipliers = requantize_multipliers(qin.quant, qout.quant).map_err(|e| op.invalid(e))?;
            let [multiplier] = multipliers[..] else {
                return Err(op.invalid(format!("{what} must be quantized per tensor")));
            };
            parts.push(Part::Requantize { input, multiplier });
        }
    }
    Ok((output, parts))
}

impl RowKernel for QuantConcat {
    type Op<'a> = (ByteQuant, Vec<Part>);

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<(ByteQuant, Vec<Part>), CodegenError> {
        read(op)
    }

    fn emit_rows(&self, op: &LowerOp<'_>, (output, parts): Self::Op<'_>, out: &mut Emit<'_>) -> EmitResult {
        let windows = concat_windows(op)?;
        let rounding = rounding_of(op.ctx, op.module.op_attrs(op.op));
        for (i, (part, window)) in parts.iter().zip(&windows.parts).enumerate() {
            let nest = windows.nest(window, out.operand(i)?, out.result(0)?, 1, true);
            let kernel = match part {
                Part::Copy => emit_strided_copy(&nest, output.element)?,
                Part::Requantize { input, multiplier } => {
                    let block = out.rodata(&per_tensor_block(input, &output, *multiplier, rounding));
                    let rank = window.shape.len();
                    let nest = nest
                        .with(
                            AUX,
                            Stream { place: block, offset: 0, element_size: 0, strides: vec![0; rank] },
                        )
                        .simplified();
                    let unsigned = input.element == crate::buffer::ElementType::U8;
                    emit_requantize_rows(
                        &nest,
                        unsigned,
                        &output,
                        rounding,
                        "AVX2, 8 lanes, requantized".into(),
                    )?
                }
            };
            out.kernel(kernel);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::kernels::testing::*;

    #[test]
    fn concat_matches_the_interpreter() {
        if !avx2_here() {
            return;
        }
        let out_params = [("i8", 0.5, 0), ("u8", 0.25, 128), ("i8<-127:127>", 0.5, 0)];
        let in_params = [
            ("i8", 0.5, 0),
            ("i8", 0.25, 0),
            ("u8", 1.0, 128),
            ("u8", 0.25, 128),
            ("i8", 1e-9, 3),
            ("i8", 1e9, -3),
        ];
        type Case<'a> = (usize, [&'a [usize]; 3], &'a [usize]);
        let shapes: [Case<'_>; 3] = [
            (1, [&[2, 1, 5], &[2, 3, 5], &[2, 20, 5]], &[2, 24, 5]),
            (0, [&[40], &[0], &[3]], &[43]),
            (2, [&[3, 2, 33], &[3, 2, 1], &[3, 2, 9]], &[3, 2, 43]),
        ];
        let mut seed = 0;
        for (axis, operands, result) in shapes {
            for (so, s_out, z_out) in out_params {
                for rounding in ["half_away_from_zero", "half_to_even", "half_up"] {
                    seed += 1;
                    let picks = [seed % 6, (seed / 2 + 1) % 6, (seed / 3 + 3) % 6];
                    let types: Vec<String> = operands
                        .iter()
                        .zip(picks)
                        .map(|(shape, k)| {
                            let (s, scale, zp) = in_params[k as usize];
                            tensor_type(shape, &quant(s, scale, zp))
                        })
                        .collect();
                    let inputs: Vec<_> = operands
                        .iter()
                        .zip(picks)
                        .enumerate()
                        .map(|(i, (shape, k))| {
                            let unsigned = in_params[k as usize].0 == "u8";
                            byte_tensor(
                                shape,
                                unsigned,
                                random_bytes(seed * 3 + i as u64, shape.iter().product()),
                            )
                        })
                        .collect();
                    let refs: Vec<&str> = types.iter().map(String::as_str).collect();
                    let out = tensor_type(result, &quant(so, s_out, z_out));
                    let attrs = format!("{{axis = {axis}, rounding = \"{rounding}\"}}");
                    check(&one_op("qnn.concat", &attrs, &refs, &[&out]), &inputs);
                }
            }
        }
    }

    /// §7.3's example: the first input is copied, 3 in the second becomes 2.
    #[test]
    fn worked_example() {
        if !avx2_here() {
            return;
        }
        let text = one_op(
            "qnn.concat",
            "{axis = 1}",
            &["tensor<1x2x!qnn.uniform<i8:f32, 0.5:0>>", "tensor<1x3x!qnn.uniform<i8:f32, 0.25:0>>"],
            &["tensor<1x5x!qnn.uniform<i8:f32, 0.5:0>>"],
        );
        let mut ctx = context();
        let module = parse(&mut ctx, &text);
        let compiled = compile_op(&ctx, &module, the_op(&module)).unwrap();
        let a = byte_tensor(&[1, 2], false, vec![128, 127]);
        let b = byte_tensor(&[1, 3], false, vec![3, 253, 5]);
        let like = byte_tensor(&[1, 5], false, vec![0; 5]);
        let got = compiled.run(&[a, b], &[like], 1);
        assert_eq!(bytes_of(&got[0]), [-128i8, 127, 2, -2, 3].map(|v| v as u8));
    }
}
