//! `fp.resize` in nearest mode (`docs/quant-semantics.md` §9: each output
//! copies the stored value of its nearest input position), on quantized and
//! f32 tensors.
//!
//! The input index each output index copies is computed at compile time,
//! per dimension, exactly as the interpreter computes it (ONNX's coordinate
//! transformation, then the nearest of the two neighbours by
//! `nearest_mode`, clamped into the input): [`nearest_picks`]. The tables
//! of byte offsets go to rodata; a work item is one output row, whose
//! source row is the sum of the outer dimensions' table entries, and whose
//! elements are read through the last dimension's table (or copied
//! contiguously when that dimension keeps its size and scale).

use super::movement::emit_copy_row;
use crate::buffer::ElementType;
use crate::error::CodegenError;
use crate::kernels::rows::{
    bind, emit_rows, row_major_strides, Nest, Stream, AUX, INPUT0, OUTPUT, ROW_LENGTH, STREAM_POINTERS,
};
use crate::lower::rows::RowKernel;
use crate::lower::{Emit, EmitResult, LowerOp};
use iced_x86::code_asm::*;
use qopt_dialect_fp::{resize_keeps_dimension, resize_params, NearestMode, ResizeMode, ResizeParams};

/// `fp.resize` with `mode = "nearest"`.
pub(crate) struct Resize;

/// For each of `output` indices of a dimension of `input` elements, the
/// input index nearest mode copies: the two neighbours of the source
/// coordinate (the interpreter's padded-index arithmetic with two taps),
/// the right one when `nearest_mode` prefers it, clamped into the input.
pub(crate) fn nearest_picks(
    input: usize,
    output: usize,
    scale: f64,
    p: &ResizeParams,
) -> Result<Vec<usize>, String> {
    if output == 0 {
        return Ok(Vec::new());
    }
    if input == 0 {
        return Err(format!("cannot resize an empty dimension to {output} elements"));
    }
    let last = input as i64 - 1;
    let mut picks = Vec::with_capacity(output);
    for y in 0..output {
        let x = p.coordinates.source(y as f64, input, output, scale);
        let x_int = x.floor();
        let ratio = if x == x_int { 1.0 } else { x - x_int };
        let right = ratio.fract() == 0.0
            || match p.nearest {
                NearestMode::RoundPreferFloor => ratio > 0.5,
                NearestMode::RoundPreferCeil => ratio >= 0.5,
                NearestMode::Floor => false,
                NearestMode::Ceil => true,
            };
        // Two taps: the input padded by one on each side, in padded indices.
        let padded = x + 1.0;
        let whole = padded.floor();
        let offset = if padded - whole == 0.0 { -1 } else { 0 };
        let first = (whole as i64).saturating_add(offset).saturating_sub(1);
        let tap = if right { first.saturating_add(1) } else { first };
        picks.push(tap.clamp(0, last) as usize);
    }
    Ok(picks)
}

/// What the kernel is specialized for.
pub(crate) struct ResizeOp {
    element: ElementType,
    in_shape: Vec<usize>,
    out_shape: Vec<usize>,
    /// Per dimension, the input index of each output index (None: kept).
    picks: Vec<Option<Vec<usize>>>,
}

fn read(op: &LowerOp<'_>) -> Result<ResizeOp, CodegenError> {
    op.expect_arity(1..=1, 1)?;
    let element = op.element_of(op.operand_type(0), "the operand")?;
    if op.ctx.element_type(op.operand_type(0)) != op.ctx.element_type(op.result_type(0)) {
        return Err(op.unsupported("the result must have the operand's element type"));
    }
    let in_shape = op.operand_shape(0)?;
    let params =
        resize_params(op.ctx, op.module.op_attrs(op.op), in_shape.len()).map_err(|e| op.invalid(e))?;
    if params.mode != ResizeMode::Nearest {
        return Err(op.unsupported("only nearest resizing is compiled (linear and cubic interpolate floats)"));
    }
    let mut out_shape = Vec::with_capacity(in_shape.len());
    let mut picks = Vec::with_capacity(in_shape.len());
    for (axis, &input) in in_shape.iter().enumerate() {
        let output = params.out_size(axis, input as i64).map_err(|e| op.invalid(e))?;
        let output = usize::try_from(output).map_err(|_| op.unsupported("a dynamic resized size"))?;
        let scale = params.scales[axis];
        picks.push(if resize_keeps_dimension(input as i64, output as i64, scale) {
            None
        } else {
            Some(nearest_picks(input, output, scale, &params).map_err(|e| op.invalid(e))?)
        });
        out_shape.push(output);
    }
    if op.result_shape(0)? != out_shape {
        return Err(op.invalid(format!("the result shape must be {out_shape:?}")));
    }
    Ok(ResizeOp { element, in_shape, out_shape, picks })
}

impl RowKernel for Resize {
    type Op<'a> = ResizeOp;

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<ResizeOp, CodegenError> {
        read(op)
    }

    fn emit_rows(&self, _op: &LowerOp<'_>, r: Self::Op<'_>, out: &mut Emit<'_>) -> EmitResult {
        let size = r.element.size();
        // A scalar is a row of one element.
        let (in_shape, out_shape, picks) = if r.in_shape.is_empty() {
            (vec![1], vec![1], vec![None])
        } else {
            (r.in_shape.clone(), r.out_shape.clone(), r.picks.clone())
        };
        let in_strides = row_major_strides(&in_shape, size);
        // Per dimension, the byte offset in the input of each output index.
        let mut tables = Vec::new();
        let mut table_at = Vec::with_capacity(out_shape.len());
        for (d, pick) in picks.iter().enumerate() {
            table_at.push(tables.len() as i32);
            for o in 0..out_shape[d] {
                let index = pick.as_ref().map_or(o, |p| p[o]);
                tables.extend_from_slice(&(index as i64 * in_strides[d]).to_le_bytes());
            }
        }
        let table = out.rodata(&tables);
        let rank = out_shape.len();
        let nest = Nest::new(&out_shape)
            .with(
                INPUT0,
                Stream { place: out.operand(0)?, offset: 0, element_size: size, strides: vec![0; rank] },
            )
            .with(OUTPUT, Stream::contiguous(out.result(0)?, &out_shape, size))
            .with(AUX, Stream { place: table, offset: 0, element_size: 0, strides: vec![0; rank] });
        let (src, dst, tbl) = (STREAM_POINTERS[INPUT0], STREAM_POINTERS[OUTPUT], STREAM_POINTERS[AUX]);
        let last_kept = picks[rank - 1].is_none();
        let kernel = emit_rows(
            &nest,
            usize::MAX,
            &|_| Ok(()),
            &|a, row| {
                for (d, counter) in row.counters.iter().enumerate() {
                    a.mov(rax, *counter)?;
                    a.add(src, qword_ptr(tbl + rax * 8 + table_at[d]))?;
                }
                if last_kept {
                    return emit_copy_row(a, size, size as i64, size as i64);
                }
                let (mut each, mut done) = (a.create_label(), a.create_label());
                a.lea(r9, qword_ptr(tbl + table_at[rank - 1]))?;
                a.test(ROW_LENGTH, ROW_LENGTH)?;
                a.jz(done)?;
                bind(a, &mut each)?;
                a.mov(rax, qword_ptr(r9))?;
                if size == 4 {
                    a.mov(ecx, dword_ptr(src + rax))?;
                    a.mov(dword_ptr(dst), ecx)?;
                } else {
                    a.movzx(ecx, byte_ptr(src + rax))?;
                    a.mov(byte_ptr(dst), cl)?;
                }
                a.add(r9, 8)?;
                a.add(dst, size as i32)?;
                a.dec(ROW_LENGTH)?;
                a.jnz(each)?;
                bind(a, &mut done)?;
                Ok(())
            },
            "nearest: source offsets from tables".into(),
        )?;
        out.kernel(kernel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::kernels::testing::*;
    use qopt_interp::Tensor;

    const COORDINATES: [&str; 6] = [
        "half_pixel",
        "half_pixel_symmetric",
        "pytorch_half_pixel",
        "align_corners",
        "asymmetric",
        "tf_half_pixel_for_nn",
    ];
    const NEAREST: [&str; 4] = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"];

    #[test]
    fn nearest_resizes_match_the_interpreter() {
        if !avx2_here() {
            return;
        }
        // (input shape, sizes, scales, output shape)
        let cases: [(&[usize], &str, &str, &[usize]); 7] = [
            (&[1, 2, 3, 4], "[-1, -1, -1, -1]", "[1.0, 1.0, 2.0, 2.0]", &[1, 2, 6, 8]),
            (&[1, 1, 5, 7], "[1, 1, 3, 3]", "[1.0, 1.0, 0.6, 0.42857142857142855]", &[1, 1, 3, 3]),
            (&[2, 3, 4], "[-1, -1, -1]", "[1.0, 1.5, 2.5]", &[2, 4, 10]),
            (&[1, 3, 2, 2], "[-1, -1, -1, -1]", "[1.0, 1.0, 3.0, 1.0]", &[1, 3, 6, 2]),
            (&[9], "[4]", "[0.45]", &[4]),
            (&[4, 40], "[-1, -1]", "[1.0, 1.3]", &[4, 52]),
            (&[3, 1], "[-1, 5]", "[1.0, 5.0]", &[3, 5]),
        ];
        let elements = ["f32", "!qnn.uniform<i8:f32, 0.5:-3>", "!qnn.uniform<u8:f32, 0.1:7>"];
        let mut seed = 0;
        for (shape, sizes, scales, result) in cases {
            for element in elements {
                for (k, coordinates) in COORDINATES.iter().enumerate() {
                    let nearest = NEAREST[(k + seed as usize) % 4];
                    seed += 1;
                    let n: usize = shape.iter().product();
                    let x = if element == "f32" {
                        f32_tensor(shape, (0..n).map(|i| i as f32 * 0.5 - 3.0).collect())
                    } else {
                        byte_tensor(shape, element.contains("u8"), random_bytes(seed, n))
                    };
                    let attrs = format!(
                        "{{sizes = {sizes}, scales = {scales}, mode = \"nearest\", \
                         coordinate_transformation_mode = \"{coordinates}\", nearest_mode = \"{nearest}\"}}"
                    );
                    let text = one_op(
                        "fp.resize",
                        &attrs,
                        &[&tensor_type(shape, element)],
                        &[&tensor_type(result, element)],
                    );
                    check(&text, &[x] as &[Tensor]);
                }
            }
        }
    }

    #[test]
    fn linear_resizes_are_unsupported() {
        let e = compile_error(&one_op(
            "fp.resize",
            "{sizes = [-1], scales = [2.0], mode = \"linear\"}",
            &["tensor<3xf32>"],
            &["tensor<6xf32>"],
        ));
        assert_eq!(e.kind, crate::CodegenErrorKind::Unsupported, "{e}");
    }
}
