//! `qnn.add` (`docs/quant-semantics.md` §7.1) and `qnn.mul` (§7.2) with numpy
//! broadcasting, AVX2 on 8 lanes along the innermost contiguous run.
//!
//! The output is walked as a [`Nest`] whose operand streams have stride 0
//! along broadcast dimensions; after merging, each operand is either
//! contiguous along a row or the same element for the whole row, which
//! [`emit_byte_lanes`] loads as 8 lanes or broadcasts.
//!
//! - **mul**: `v_a × v_b` with `vpmulld` (|v| ≤ 255, so the product is exact
//!   in i32), then the shared single-term rescaling with the multiplier of
//!   `quant_params::mul_multiplier`.
//! - **add** of two contiguous operands first tries [`add_words`]: 16 lanes
//!   of i16 pairs, taken where its arithmetic is checked exact on every pair
//!   of input bytes. Otherwise:
//! - **add**: the exact two-term sum `X = v_a × m_a + v_b × m_b` of §7.1
//!   (multipliers and shared shift from `quant_params::add_multipliers`),
//!   each product by `vpmuldq` on even and odd lanes, summed in i64
//!   (|X| < 2^40), rounded once. The shared right shift `s = 31 + n` takes
//!   one of three forms, [`SumShift`]: `1 ≤ s ≤ 62` rounds as is; `s ≥ 63`
//!   has `|X| < 2^40 < 2^(s−1)`, so `R = 0` in every mode, computed with
//!   zero multipliers; `s ≤ 0` is an exact shift left, and since the clamp
//!   bounds are below 2^9, `clamp(X, ±2^16) << min(−s, 16)` has the same
//!   clamped value (equal when `|X| ≤ 2^16` and `−s ≤ 16`, otherwise both
//!   saturate to the bound of X's sign, or are both 0).

use super::operands::QuantOperand;
use crate::error::{CodegenError, CodegenErrorKind};
use crate::kernels::add_words;
use crate::kernels::lanes::{emit_byte_lanes, Along, LaneInput};
use crate::kernels::quant_params::{ByteQuant, FixedPointMultiplier};
use crate::kernels::registers::{broadcast_u32, broadcast_u64};
use crate::kernels::requantize::{rounding_bias, StageConstants, StageRegisters};
use crate::kernels::rows::LANE_RUN;
use crate::kernels::rows::{
    broadcast_strides, emit_rows, Nest, Stream, INPUT0, INPUT1, OUTPUT, STREAM_POINTERS,
};
use crate::lower::rows::RowKernel;
use crate::lower::{Emit, EmitResult, LowerOp};
use iced_x86::code_asm::*;
use qopt_dialect_qnn::fixed_point::Rounding;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{add_multipliers, mul_multiplier};
use qopt_dialect_qnn::rounding_of;

/// Which of the two ops.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum BinaryKind {
    Add,
    Mul,
}

/// `qnn.add` and `qnn.mul`.
pub(crate) struct Binary;

/// The shared shift of add's two-term sum, as the kernel applies it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum SumShift {
    /// Round and shift right by `shift` (1..=62).
    Right { multiplier_a: i32, multiplier_b: i32, shift: u32 },
    /// Clamp to ±2^16, shift left by `shift` (0..=16), no rounding.
    Left { multiplier_a: i32, multiplier_b: i32, shift: u32 },
}

/// The bound add clamps its sum to before a shift left.
const LEFT_SHIFT_LIMIT: i64 = 1 << 16;

impl SumShift {
    /// The kernel's form of add's `(m_a, m_b, n)` (see the module doc).
    fn of(multiplier_a: i32, multiplier_b: i32, n: i32) -> SumShift {
        let s = 31 + i64::from(n);
        if s >= 63 {
            SumShift::Right { multiplier_a: 0, multiplier_b: 0, shift: 1 }
        } else if s <= 0 {
            SumShift::Left { multiplier_a, multiplier_b, shift: (-s).min(16) as u32 }
        } else {
            SumShift::Right { multiplier_a, multiplier_b, shift: s as u32 }
        }
    }
}

/// One add or mul as the kernel is specialized for it.
pub(crate) struct BinaryOp {
    kind: BinaryKind,
    a: ByteQuant,
    b: ByteQuant,
    out: ByteQuant,
    shape: Vec<usize>,
    strides_a: Vec<i64>,
    strides_b: Vec<i64>,
    /// mul: the multiplier and shift; add: its two multipliers, in `sum`.
    product: FixedPointMultiplier,
    sum: SumShift,
}

fn read(op: &LowerOp<'_>) -> Result<BinaryOp, CodegenError> {
    // qnn.sub is qnn.add with the right operand's multiplier negated (§7.1).
    let (kind, sign) = match op.name() {
        qnn_op::ADD => (BinaryKind::Add, 1),
        qnn_op::SUB => (BinaryKind::Add, -1),
        qnn_op::MUL => (BinaryKind::Mul, 1),
        other => return Err(op.unsupported(format!("{other} is not qnn.add, qnn.sub or qnn.mul"))),
    };
    op.expect_arity(2..=2, 1)?;
    let qa = QuantOperand::of(op, op.operand_type(0), "the left operand")?;
    let qb = QuantOperand::of(op, op.operand_type(1), "the right operand")?;
    let qout = QuantOperand::of(op, op.result_type(0), "the result")?;
    let (a, b, out) = (
        qa.per_tensor(op, "the left operand")?,
        qb.per_tensor(op, "the right operand")?,
        qout.per_tensor(op, "the result")?,
    );
    let shape = op.result_shape(0)?;
    let broadcast = |i: usize| -> Result<Vec<i64>, CodegenError> {
        broadcast_strides(&op.operand_shape(i)?, &shape, 1).ok_or_else(|| {
            op.invalid(format!("operand {i} does not broadcast to the result shape {shape:?}"))
        })
    };
    let (strides_a, strides_b) = (broadcast(0)?, broadcast(1)?);
    let (product, sum) = match kind {
        BinaryKind::Mul => {
            let (multiplier, shift) =
                mul_multiplier(qa.quant, qb.quant, qout.quant).map_err(|e| op.invalid(e))?;
            (FixedPointMultiplier { multiplier, shift }, SumShift::of(0, 0, 0))
        }
        BinaryKind::Add => {
            let (m_a, m_b, n) = add_multipliers(qa.quant, qb.quant, qout.quant).map_err(|e| op.invalid(e))?;
            (FixedPointMultiplier { multiplier: 0, shift: 0 }, SumShift::of(m_a, sign * m_b, n))
        }
    };
    Ok(BinaryOp { kind, a, b, out, shape, strides_a, strides_b, product, sum })
}

impl RowKernel for Binary {
    type Op<'a> = BinaryOp;

    fn read<'a>(&self, op: &LowerOp<'a>) -> Result<BinaryOp, CodegenError> {
        read(op)
    }

    fn emit_rows(&self, op: &LowerOp<'_>, r: Self::Op<'_>, out: &mut Emit<'_>) -> EmitResult {
        let rounding = rounding_of(op.ctx, op.module.op_attrs(op.op));
        let nest = Nest::new(&r.shape)
            .with(
                INPUT0,
                Stream { place: out.operand(0)?, offset: 0, element_size: 1, strides: r.strides_a.clone() },
            )
            .with(
                INPUT1,
                Stream { place: out.operand(1)?, offset: 0, element_size: 1, strides: r.strides_b.clone() },
            )
            .with(OUTPUT, Stream::contiguous(out.result(0)?, &r.shape, 1))
            .simplified();
        if let Some(plan) = word_add(&r, &nest, rounding) {
            out.kernel(emit_rows(
                &nest,
                LANE_RUN,
                &|a| add_words::emit_constants(a, &plan),
                &|a, _| add_words::emit_row(a, &plan),
                "AVX2, 16 lanes of i16 pairs (vpmaddwd), checked exact on every input pair".into(),
            )?);
            return Ok(());
        }
        out.kernel(emit_binary(&r, &nest, rounding)?);
        Ok(())
    }
}

/// The i16-pair form of an add whose operands are both contiguous along
/// the rows ([`add_words`]), where it is exact.
fn word_add(r: &BinaryOp, nest: &Nest, rounding: Rounding) -> Option<add_words::WordAdd> {
    let contiguous = |slot| nest.inner_stride(slot) != 0 && nest.is_contiguous(slot);
    match (r.kind, r.sum) {
        (BinaryKind::Add, SumShift::Right { multiplier_a, multiplier_b, shift })
            if contiguous(INPUT0) && contiguous(INPUT1) =>
        {
            add_words::WordAdd::plan(
                (&r.a, &r.b, &r.out),
                (multiplier_a, multiplier_b, shift as i32 - 31),
                rounding,
            )
        }
        _ => None,
    }
}

/// Per-call constants: zero points and multipliers (i32 lanes), and the
/// stage registers. Scratch: ymm0–ymm4.
const ZP_A: AsmRegisterYmm = ymm15;
const ZP_B: AsmRegisterYmm = ymm14;
const MULTIPLIER_A: AsmRegisterYmm = ymm13;
const MULTIPLIER_B: AsmRegisterYmm = ymm12;
const REGS: StageRegisters =
    StageRegisters { zero: ymm6, one: ymm10, bias: ymm11, shift: xmm5, low: ymm9, high: ymm8, zp_out: ymm7 };
/// Add's shift-left form keeps its sum's bounds where the rounding's bias
/// and ones would be (it does not round).
const LIMIT_HIGH: AsmRegisterYmm = ymm11;
const LIMIT_LOW: AsmRegisterYmm = ymm10;

fn along(nest: &Nest, slot: usize) -> Result<Along, CodegenError> {
    if nest.inner_stride(slot) == 0 {
        Ok(Along::Broadcast)
    } else if nest.is_contiguous(slot) {
        Ok(Along::Contiguous)
    } else {
        Err(CodegenError::new(
            CodegenErrorKind::Assembler,
            "a broadcast operand is neither contiguous nor repeated",
        ))
    }
}

fn emit_binary(
    r: &BinaryOp,
    nest: &Nest,
    rounding: Rounding,
) -> Result<crate::abi::KernelCode, CodegenError> {
    let inputs = [
        LaneInput {
            pointer: STREAM_POINTERS[INPUT0],
            unsigned: r.a.element == crate::buffer::ElementType::U8,
            along: along(nest, INPUT0)?,
            lanes: ymm0,
        },
        LaneInput {
            pointer: STREAM_POINTERS[INPUT1],
            unsigned: r.b.element == crate::buffer::ElementType::U8,
            along: along(nest, INPUT1)?,
            lanes: ymm1,
        },
    ];
    let out_unsigned = r.out.element == crate::buffer::ElementType::U8;
    let (multiplier_a, multiplier_b, stage) = match (r.kind, r.sum) {
        (BinaryKind::Mul, _) => {
            let stage = StageConstants::single_term(r.product, rounding, &r.out);
            (stage.multiplier, 0, stage)
        }
        (BinaryKind::Add, SumShift::Right { multiplier_a, multiplier_b, shift }) => {
            (multiplier_a, multiplier_b, StageConstants::with_shift(0, shift, rounding, &r.out))
        }
        (BinaryKind::Add, SumShift::Left { multiplier_a, multiplier_b, .. }) => {
            (multiplier_a, multiplier_b, StageConstants::with_shift(0, 1, rounding, &r.out))
        }
    };
    let strategy = match r.kind {
        BinaryKind::Add => "AVX2, 8 lanes, exact two-term i64 sum",
        BinaryKind::Mul => "AVX2, 8 lanes",
    };
    let sum = r.sum;
    let constants = |a: &mut CodeAssembler| -> Result<(), CodegenError> {
        broadcast_u32(a, ZP_A, r.a.zero_point as u32)?;
        broadcast_u32(a, ZP_B, r.b.zero_point as u32)?;
        broadcast_u32(a, MULTIPLIER_A, multiplier_a as u32)?;
        broadcast_u32(a, MULTIPLIER_B, multiplier_b as u32)?;
        a.vpxor(REGS.zero, REGS.zero, REGS.zero)?;
        broadcast_u64(a, REGS.low, stage.low as u64)?;
        broadcast_u64(a, REGS.high, stage.high as u64)?;
        broadcast_u32(a, REGS.zp_out, stage.zp_out as u32)?;
        if let SumShift::Left { .. } = sum {
            broadcast_u64(a, LIMIT_HIGH, LEFT_SHIFT_LIMIT as u64)?;
            broadcast_u64(a, LIMIT_LOW, (-LEFT_SHIFT_LIMIT) as u64)?;
        } else {
            broadcast_u64(a, REGS.bias, rounding_bias(stage.shift, rounding) as u64)?;
            broadcast_u64(a, REGS.one, 1)?;
            a.mov(eax, stage.shift)?;
            a.vmovd(REGS.shift, eax)?;
        }
        Ok(())
    };
    let compute = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        a.vpsubd(ymm0, ymm0, ZP_A)?; // v_a
        a.vpsubd(ymm1, ymm1, ZP_B)?; // v_b
        match r.kind {
            BinaryKind::Mul => {
                a.vpmulld(ymm0, ymm0, ymm1)?; // v_a × v_b, exact (|·| ≤ 65025)
                REGS.requantizer(rounding, MULTIPLIER_A).emit(a, ymm0, ymm1, ymm2)
            }
            BinaryKind::Add => {
                a.vpmuldq(ymm2, ymm0, MULTIPLIER_A)?;
                a.vpmuldq(ymm3, ymm1, MULTIPLIER_B)?;
                a.vpaddq(ymm2, ymm2, ymm3)?; // X of elements 0, 2, 4, 6
                a.vpsrlq(ymm0, ymm0, 32)?;
                a.vpsrlq(ymm1, ymm1, 32)?;
                a.vpmuldq(ymm0, ymm0, MULTIPLIER_A)?;
                a.vpmuldq(ymm1, ymm1, MULTIPLIER_B)?;
                a.vpaddq(ymm0, ymm0, ymm1)?; // X of elements 1, 3, 5, 7
                let requantizer = REGS.requantizer(rounding, MULTIPLIER_A);
                match sum {
                    SumShift::Right { .. } => requantizer.emit_sums(a, ymm0, [ymm2, ymm0], ymm3),
                    SumShift::Left { shift, .. } => {
                        for x in [ymm2, ymm0] {
                            a.vpcmpgtq(ymm3, LIMIT_LOW, x)?;
                            a.vblendvpd(x, x, LIMIT_LOW, ymm3)?;
                            a.vpcmpgtq(ymm3, x, LIMIT_HIGH)?;
                            a.vblendvpd(x, x, LIMIT_HIGH, ymm3)?;
                            a.vpsllq(x, x, shift as i32)?;
                        }
                        requantizer.emit_clamped_halves(a, ymm0, [ymm2, ymm0], ymm3)
                    }
                }
            }
        }
    };
    emit_rows(
        nest,
        LANE_RUN,
        &constants,
        &|a, _| emit_byte_lanes(a, &inputs, out_unsigned, ymm1, &compute),
        strategy.into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::*;

    #[test]
    fn sum_shift_forms() {
        assert_eq!(SumShift::of(5, 6, -2), SumShift::Right { multiplier_a: 5, multiplier_b: 6, shift: 29 });
        assert_eq!(SumShift::of(5, 6, 32), SumShift::Right { multiplier_a: 0, multiplier_b: 0, shift: 1 });
        assert_eq!(SumShift::of(5, 6, -31), SumShift::Left { multiplier_a: 5, multiplier_b: 6, shift: 0 });
        assert_eq!(SumShift::of(5, 6, -60), SumShift::Left { multiplier_a: 5, multiplier_b: 6, shift: 16 });
    }

    const ROUNDINGS: [&str; 3] = ["half_away_from_zero", "half_to_even", "half_up"];

    fn run_case(
        op: &str,
        (sa, sb): (&[usize], &[usize]),
        storages: [&str; 3],
        scales: [f64; 3],
        zps: [i64; 3],
        seed: u64,
    ) {
        let out_shape: Vec<usize> = {
            let rank = sa.len().max(sb.len());
            let dim = |s: &[usize], d: usize| if d + s.len() >= rank { s[d + s.len() - rank] } else { 1 };
            (0..rank).map(|d| if dim(sa, d) == 1 { dim(sb, d) } else { dim(sa, d) }).collect()
        };
        let ta = tensor_type(sa, &quant(storages[0], scales[0], zps[0]));
        let tb = tensor_type(sb, &quant(storages[1], scales[1], zps[1]));
        let tout = tensor_type(&out_shape, &quant(storages[2], scales[2], zps[2]));
        let a = byte_tensor(sa, storages[0] == "u8", random_bytes(seed, sa.iter().product()));
        let b = byte_tensor(sb, storages[1] == "u8", random_bytes(seed + 7, sb.iter().product()));
        for rounding in ROUNDINGS {
            let attrs = format!("{{rounding = \"{rounding}\"}}");
            check(&one_op(op, &attrs, &[&ta, &tb], &[&tout]), &[a.clone(), b.clone()]);
        }
    }

    const SHAPES: [(&[usize], &[usize]); 12] = [
        (&[2, 3], &[3]),
        (&[4, 1, 5], &[3, 1]),
        (&[], &[2, 2]),
        (&[1], &[]),
        (&[0, 3], &[1, 3]),
        (&[2, 3, 4, 5], &[1, 3, 1, 1]),
        (&[17], &[17]),
        (&[1000], &[1]),
        (&[3, 1], &[1, 20]),
        (&[2, 9, 1], &[9, 9]),
        (&[1, 1, 1], &[5000]),
        (&[8193], &[8193]),
    ];

    #[test]
    fn add_and_mul_match_the_interpreter() {
        if !avx2_here() {
            return;
        }
        let params: [([&str; 3], [f64; 3], [i64; 3]); 10] = [
            (["i8", "i8", "i8"], [1e-12, 3e-12, 1.0], [1, 2, -1]),
            (["u8", "i8", "i8"], [1e15, 2e14, 1.0], [100, -2, 3]),
            (["i8", "i8", "i8"], [0.5, 0.25, 1.0], [0, 4, 0]),
            (["u8", "i8", "u8"], [0.02, 0.03, 0.05], [128, -3, 100]),
            (["i8", "u8", "i8<-127:127>"], [0.5, 0.5, 0.5], [-128, 255, 127]),
            (["u8", "u8", "u8"], [1.0, 1.0, 1.0], [0, 0, 0]),
            (["i8", "i8", "u8"], [1e-6, 2e-6, 1.0], [3, -3, 7]),
            (["i8", "i8", "i8"], [1e10, 3e9, 1.0], [1, 2, -1]),
            (["i8", "i8", "i8"], [1.0, 1e-12, 1.0], [-5, 9, 0]),
            (["i4", "u4", "i8"], [0.1, 0.3, 0.05], [-2, 7, 0]),
        ];
        for (k, &shapes) in SHAPES.iter().enumerate() {
            for (j, &(storages, scales, zps)) in params.iter().enumerate() {
                if storages[0] == "i4" {
                    continue; // random bytes are outside 4-bit storage
                }
                for op in ["qnn.add", "qnn.mul"] {
                    run_case(op, shapes, storages, scales, zps, (k * 31 + j) as u64);
                }
            }
        }
    }

    /// §7.1's and §7.2's tables, with the bytes written out.
    #[test]
    fn worked_examples() {
        if !avx2_here() {
            return;
        }
        let mut ctx = context();
        for (mode, want) in ROUNDINGS.iter().zip([[2i8, 3, -3, 94], [2, 2, -2, 94], [2, 3, -2, 94]]) {
            let text = one_op(
                "qnn.add",
                &format!("{{rounding = \"{mode}\"}}"),
                &["tensor<4x!qnn.uniform<i8:f32, 0.5:0>>", "tensor<4x!qnn.uniform<i8:f32, 0.25:4>>"],
                &["tensor<4x!qnn.uniform<i8:f32, 1.0:0>>"],
            );
            let module = parse(&mut ctx, &text);
            let compiled = compile_op(&ctx, &module, the_op(&module)).unwrap();
            let a = byte_tensor(&[4], false, [3i8, 5, -5, 127].map(|v| v as u8).to_vec());
            let b = byte_tensor(&[4], false, [6i8, 4, 4, 127].map(|v| v as u8).to_vec());
            let got = compiled.run(&[a.clone(), b], &[a], 1);
            assert_eq!(bytes_of(&got[0]), want.map(|v| v as u8), "{mode}");
        }
        for (mode, want) in ROUNDINGS.iter().zip([[38i8, 3], [38, 2], [38, 3]]) {
            let t = "tensor<2x!qnn.uniform<i8:f32, 0.5:0>>";
            let text = one_op(
                "qnn.mul",
                &format!("{{rounding = \"{mode}\"}}"),
                &[t, t],
                &["tensor<2x!qnn.uniform<i8:f32, 0.1:0>>"],
            );
            let module = parse(&mut ctx, &text);
            let compiled = compile_op(&ctx, &module, the_op(&module)).unwrap();
            let a = byte_tensor(&[2], false, vec![3, 1]);
            let b = byte_tensor(&[2], false, vec![5, 1]);
            let got = compiled.run(&[a.clone(), b], &[a], 1);
            assert_eq!(bytes_of(&got[0]), want.map(|v| v as u8), "{mode}");
        }
    }

    #[test]
    fn tensors_beyond_2_gib_are_unsupported_when_planning() {
        let t = "tensor<3000000000x!qnn.uniform<i8:f32, 0.5:0>>";
        let e = compile_error(&one_op("qnn.add", "", &[t, t], &[t]));
        assert_eq!(e.kind, CodegenErrorKind::Unsupported, "{e}");
        assert!(e.message.contains("2 GiB"), "{e}");
    }

    #[test]
    fn per_axis_operands_are_unsupported() {
        let e = compile_error(&one_op(
            "qnn.add",
            "",
            &["tensor<2x!qnn.uniform<i8:f32:0, {0.1:0, 0.2:0}>>", "tensor<2x!qnn.uniform<i8:f32, 0.5:0>>"],
            &["tensor<2x!qnn.uniform<i8:f32, 0.5:0>>"],
        ));
        assert_eq!(e.kind, CodegenErrorKind::Unsupported, "{e}");
    }
}
