//! `qnn.lookup {table}` (`docs/quant-semantics.md` §7.5): each stored input
//! value `q` becomes `table[q − qmin]`, one byte read per element.
//!
//! The table goes to rodata as 256 bytes indexed by the input's raw byte
//! (zero-extended, whatever the signedness), so the kernel is `movzx eax,
//! byte [rsi]; movzx eax, byte [table + rax]; mov [rdi], al` per element, with
//! no arithmetic to get wrong. Bytes outside the input's storage range (out
//! of the contract; the interpreter rejects them) read the entry of the
//! nearer end. Entries are checked against the result's storage range, as
//! the verifier and the interpreter do.

use super::operands::QuantOperand;
use crate::error::CodegenError;
use crate::kernels::rows::{bind, emit_rows, Nest, Stream, AUX, INPUT0, OUTPUT, ROW_LENGTH, STREAM_POINTERS};
use crate::lower::rows::RowKernel;
use crate::lower::{Emit, EmitResult, LowerOp};
use iced_x86::code_asm::*;
use qopt_ir_core::{dense_values_i128, AttrData};

/// Elements per work item.
const LOOKUP_RUN: usize = 8192;

/// `qnn.lookup`.
pub(crate) struct Lookup;

/// The 256-byte table by raw input byte, and the shape.
fn read(op: &LowerOp<'_>) -> Result<([u8; 256], Vec<usize>), CodegenError> {
    op.expect_arity(1..=1, 1)?;
    let input = QuantOperand::of(op, op.operand_type(0), "the operand")?;
    input.per_tensor(op, "the operand")?;
    let output = QuantOperand::of(op, op.result_type(0), "the result")?;
    output.per_tensor(op, "the result")?;
    let shape = op.operand_shape(0)?;
    if op.result_shape(0)? != shape {
        return Err(op.invalid("the result must have the operand's shape"));
    }
    let table = match op.attr("table").map(|a| op.ctx.attr_data(a)) {
        Some(AttrData::Dense(d)) => dense_values_i128(op.ctx, d),
        _ => None,
    }
    .ok_or_else(|| op.invalid("needs a dense integer 'table' attribute"))?;
    let entries = (input.qmax - input.qmin + 1) as usize;
    if table.len() != entries {
        return Err(op.invalid(format!("'table' has {} entries, the input's range {entries}", table.len())));
    }
    if let Some(e) = table.iter().find(|&&e| e < i128::from(output.qmin) || e > i128::from(output.qmax)) {
        return Err(op.invalid(format!("'table' entry {e} is outside the result's storage range")));
    }
    let mut by_byte = [0u8; 256];
    for (byte, entry) in by_byte.iter_mut().enumerate() {
        let q = if input.unsigned { byte as i32 } else { byte as u8 as i8 as i32 };
        let index = (q.clamp(input.qmin, input.qmax) - input.qmin) as usize;
        *entry = table[index] as i64 as u8;
    }
    Ok((by_byte, shape))
}

impl RowKernel for Lookup {
    type Op<'a> = ([u8; 256], Vec<usize>);

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<([u8; 256], Vec<usize>), CodegenError> {
        read(op)
    }

    fn emit_rows(&self, _op: &LowerOp<'_>, (by_byte, shape): Self::Op<'_>, out: &mut Emit<'_>) -> EmitResult {
        let table = out.rodata(&by_byte);
        let nest = Nest::new(&shape)
            .with(INPUT0, Stream::contiguous(out.operand(0)?, &shape, 1))
            .with(OUTPUT, Stream::contiguous(out.result(0)?, &shape, 1))
            .with(AUX, Stream { place: table, offset: 0, element_size: 0, strides: vec![0; shape.len()] })
            .simplified();
        let (src, dst, table) = (STREAM_POINTERS[INPUT0], STREAM_POINTERS[OUTPUT], STREAM_POINTERS[AUX]);
        let kernel = emit_rows(
            &nest,
            LOOKUP_RUN,
            &|_| Ok(()),
            &|a, _| {
                let (mut each, mut done) = (a.create_label(), a.create_label());
                a.test(ROW_LENGTH, ROW_LENGTH)?;
                a.jz(done)?;
                bind(a, &mut each)?;
                a.movzx(eax, byte_ptr(src))?;
                a.movzx(eax, byte_ptr(table + rax))?;
                a.mov(byte_ptr(dst), al)?;
                a.inc(src)?;
                a.inc(dst)?;
                a.dec(ROW_LENGTH)?;
                a.jnz(each)?;
                bind(a, &mut done)?;
                Ok(())
            },
            "one table byte per element".into(),
        )?;
        out.kernel(kernel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::kernels::testing::*;

    fn table(entries: usize, lo: i64, hi: i64, seed: u64) -> String {
        let span = (hi - lo + 1) as u64;
        let values: Vec<String> = random_bytes(seed, entries)
            .iter()
            .map(|&b| (lo + (u64::from(b) * 7919 % span) as i64).to_string())
            .collect();
        format!("{{table = dense<[{}]> : tensor<{entries}xi32>}}", values.join(", "))
    }

    #[test]
    fn lookup_matches_the_interpreter() {
        if !avx2_here() {
            return;
        }
        let cases = [
            ("i8", -128i64, 127i64, "i8", -128i64, 127i64),
            ("u8", 0, 255, "u8", 0, 255),
            ("u8", 0, 255, "i8<-100:100>", -100, 100),
            ("i8<-127:127>", -127, 127, "u8", 0, 255),
            ("i4", -8, 7, "i8", -128, 127),
            ("u4", 0, 15, "u8<0:200>", 0, 200),
        ];
        for (k, (sin, lo, hi, sout, out_lo, out_hi)) in cases.into_iter().enumerate() {
            for shape in [&[0usize][..], &[1], &[9], &[3, 1000]] {
                let n: usize = shape.iter().product();
                // Every stored value of the input range, cycled.
                let span = (hi - lo + 1) as usize;
                let values: Vec<u8> = random_bytes(k as u64, n)
                    .iter()
                    .map(|&b| (lo + (b as usize % span) as i64) as u8)
                    .collect();
                let x = byte_tensor(shape, sin.starts_with('u'), values);
                let text = one_op(
                    "qnn.lookup",
                    &table(span, out_lo, out_hi, k as u64 + 1),
                    &[&tensor_type(shape, &quant(sin, 0.5, 0.max(lo)))],
                    &[&tensor_type(shape, &quant(sout, 0.25, 0.max(out_lo)))],
                );
                check(&text, &[x]);
            }
        }
    }
}
