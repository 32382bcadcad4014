//! Matrix products: `fp.dense` (x·Wᵀ + b, ONNX `Gemm` with `transB = 1`),
//! `fp.matmul` (ONNX / numpy `MatMul` for rank ≥ 2 with broadcast batch
//! dimensions) and `fp.batch_matmul` (B×M×K · B×K×N, no broadcasting).

use super::{common_element, expect_rank, tensor_operands, Elements, Sig, Signature, Sigs};
use crate::shape::{broadcast, dims_compatible, is_dynamic, shape_to_string};
use qopt_ir_core::interfaces::QuantizableOp;
use qopt_ir_core::{Arity, Attribute, Context, OpDef, Traits, Type};
use smallvec::SmallVec;

qopt_ir_core::op_name_constants! {
    DENSE = "fp.dense", MATMUL = "fp.matmul", BATCH_MATMUL = "fp.batch_matmul",
}

pub(crate) fn ops() -> Vec<OpDef> {
    vec![
        super::with_signature::<Dense>(
            OpDef::new(names::DENSE, "fully connected layer: x·Wᵀ + b")
                .description(
                    "`fp.dense(x, w[, b])`: `x` is …×K (rank ≥ 1), `w` is N×K (one row per output \
                     feature), the optional bias `b` is [N]; the result is …×N, `y = x·Wᵀ + b` over the \
                     last dimension of `x`. All share one float element type.\n\n\
                     ```\n%y = fp.dense(%x, %w, %b) : (tensor<8x512xf32>, tensor<10x512xf32>, tensor<10xf32>) \
                     -> tensor<8x10xf32>\n```",
                )
                .operands(Arity::Range(2, 3))
                .traits(Traits::PURE)
                .interface(QuantizableOp::weighted(0, 1, Some(2), 0).with_channel_axis(Some(-1)))
                .interface(crate::attrs::BIAS_CORRECTION_RECORD)
                .interface(crate::attrs::recorded_minima(-1)),
        ),
        super::with_signature::<MatMul>(
            OpDef::new(names::MATMUL, "matrix product with broadcast batch dimensions (numpy matmul)")
                .description(
                    "`fp.matmul(a, b)`: `a` is …×M×K and `b` is …×K×N, both of rank ≥ 2; the leading \
                     (batch) dimensions broadcast with numpy rules; the result is broadcast(…)×M×N. \
                     Rank-1 operands are not accepted (reshape them first).\n\n\
                     ```\n%y = fp.matmul(%a, %b) : (tensor<2x1x4x8xf32>, tensor<3x8x5xf32>) -> tensor<2x3x4x5xf32>\n```",
                )
                .operands(Arity::Exact(2))
                .traits(Traits::PURE)
                .interface(QuantizableOp::activations(&[0, 1])),
        ),
        super::with_signature::<BatchMatMul>(
            OpDef::new(names::BATCH_MATMUL, "batched matrix product B×M×K · B×K×N")
                .description(
                    "`fp.batch_matmul(a, b)`: `a` is B×M×K, `b` is B×K×N, the result B×M×N. The batch \
                     sizes must be equal (no broadcasting; use `fp.matmul` for that).\n\n\
                     ```\n%y = fp.batch_matmul(%a, %b) : (tensor<4x16x32xf32>, tensor<4x32x8xf32>) -> tensor<4x16x8xf32>\n```",
                )
                .operands(Arity::Exact(2))
                .traits(Traits::PURE)
                .interface(QuantizableOp::activations(&[0, 1])),
        ),
    ]
}

/// The known one of two sizes that must be equal (`?` if both unknown).
fn known(a: i64, b: i64) -> i64 {
    if is_dynamic(a) {
        b
    } else {
        a
    }
}

struct Dense;

impl Signature for Dense {
    fn check(ctx: &Context, operands: &[Type], _attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input", "weight", "bias"], 2)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let (x, w) = (&ops[0], &ops[1]);
        let Some(&k) = x.shape.last() else {
            return Err("input must have rank 1 or more (…xK), got a scalar tensor".to_string());
        };
        expect_rank(ctx, w, 2, "NxK")?;
        let (n, wk) = (w.shape[0], w.shape[1]);
        if !dims_compatible(k, wk) {
            return Err(format!(
                "input has {k} features (last dimension) but the weight {} expects {wk}",
                shape_to_string(w.shape)
            ));
        }
        let mut out_n = n;
        if let Some(b) = ops.get(2) {
            expect_rank(ctx, b, 1, "N")?;
            if !dims_compatible(b.shape[0], n) {
                return Err(format!(
                    "bias has {} elements but the weight has {n} output features",
                    b.shape[0]
                ));
            }
            out_n = known(n, b.shape[0]);
        }
        let mut shape: SmallVec<[i64; 4]> = x.shape.into();
        if let Some(last) = shape.last_mut() {
            *last = out_n;
        }
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

struct MatMul;

impl Signature for MatMul {
    fn check(ctx: &Context, operands: &[Type], _attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["lhs", "rhs"], 2)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let (a, b) = (&ops[0], &ops[1]);
        for o in [a, b] {
            if o.rank() < 2 {
                return Err(format!(
                    "{} must have rank 2 or more, got {} (reshape rank-1 operands first)",
                    o.label(),
                    qopt_ir_core::type_to_string(ctx, o.ty)
                ));
            }
        }
        let (ra, rb) = (a.rank(), b.rank());
        let (m, ka) = (a.shape[ra - 2], a.shape[ra - 1]);
        let (kb, n) = (b.shape[rb - 2], b.shape[rb - 1]);
        if !dims_compatible(ka, kb) {
            return Err(format!(
                "contracting dimensions differ: lhs {} has K = {ka}, rhs {} has K = {kb}",
                shape_to_string(a.shape),
                shape_to_string(b.shape)
            ));
        }
        let batch = broadcast(&a.shape[..ra - 2], &b.shape[..rb - 2])
            .map_err(|e| format!("batch dimensions: {e}"))?;
        let mut shape: SmallVec<[i64; 4]> = batch.into_iter().collect();
        shape.push(m);
        shape.push(n);
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

struct BatchMatMul;

impl Signature for BatchMatMul {
    fn check(ctx: &Context, operands: &[Type], _attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["lhs", "rhs"], 2)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let (a, b) = (&ops[0], &ops[1]);
        expect_rank(ctx, a, 3, "BxMxK")?;
        expect_rank(ctx, b, 3, "BxKxN")?;
        if !dims_compatible(a.shape[0], b.shape[0]) {
            return Err(format!("batch sizes differ: {} vs {}", a.shape[0], b.shape[0]));
        }
        if !dims_compatible(a.shape[2], b.shape[1]) {
            return Err(format!(
                "contracting dimensions differ: lhs has K = {}, rhs has K = {}",
                a.shape[2], b.shape[1]
            ));
        }
        Ok(smallvec::smallvec![Sig::new(&[known(a.shape[0], b.shape[0]), a.shape[1], b.shape[2]], elem)])
    }
}
