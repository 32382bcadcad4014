//! Pooling: `fp.max_pool2d`, `fp.max_pool1d` (ONNX `MaxPool`),
//! `fp.avg_pool2d` (ONNX `AveragePool`) and `fp.global_avg_pool2d` (ONNX
//! `GlobalAveragePool`), all over NCHW (NCL for 1-D).
//!
//! Window attributes: `kernel` (required), `stride` (default ones, as in ONNX),
//! `pad` (every begin padding, then every end padding; default zeros; each
//! smaller than the dilated kernel so every window sees input), `dilation`
//! (max pooling only; default ones), `ceil_mode` (default false; see
//! [`crate::shape::pool_out`]).

use super::{common_element, expect_rank, tensor_operands, Elements, Sig, Signature, Sigs};
use crate::attrs;
use crate::shape::pool_out;
use qopt_ir_core::interfaces::{AttributeDefaults, QuantizableOp};
use qopt_ir_core::{Arity, Attribute, Context, OpDef, Traits, Type};
use smallvec::SmallVec;

qopt_ir_core::op_name_constants! {
    MAX_POOL2D = "fp.max_pool2d", MAX_POOL1D = "fp.max_pool1d", AVG_POOL2D = "fp.avg_pool2d",
    GLOBAL_AVG_POOL2D = "fp.global_avg_pool2d",
}

pub(crate) fn ops() -> Vec<OpDef> {
    vec![
        super::with_signature::<Pool<2, true>>(
            OpDef::new(names::MAX_POOL2D, "2-D max pooling (NCHW)")
                .description(
                    "`fp.max_pool2d(x)`: the maximum of each window; `x` is N×C×H×W. Attributes: \
                     `kernel = [kh, kw]` (required), `stride` (default ones, as in ONNX), \
                     `pad = [top, left, bottom, right]` (default zeros; padding never wins the max), \
                     `dilation = [dh, dw]` (default `[1, 1]`), `ceil_mode` (default `false`). \
                     Quant-agnostic: on a quantized tensor the result keeps its quantized type.\n\n\
                     ```\n%y = fp.max_pool2d(%x) {kernel = [3, 3], pad = [1, 1, 1, 1], stride = [2, 2]} : \
                     (tensor<1x64x112x112xf32>) -> tensor<1x64x56x56xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(Traits::PURE | Traits::QUANT_AGNOSTIC)
                .interface(AttributeDefaults(|ctx| attrs::PoolAttrs::default_attributes(ctx, 2, true))),
        ),
        super::with_signature::<Pool<1, true>>(
            OpDef::new(names::MAX_POOL1D, "1-D max pooling (NCL)")
                .description(
                    "`fp.max_pool1d(x)`: like `fp.max_pool2d` over N×C×L with `kernel = [k]`, \
                     `stride = [s]`, `pad = [begin, end]`, `dilation = [d]`, `ceil_mode`.\n\n\
                     ```\n%y = fp.max_pool1d(%x) {kernel = [2], stride = [2]} : (tensor<1x16x100xf32>) -> tensor<1x16x50xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(Traits::PURE | Traits::QUANT_AGNOSTIC)
                .interface(AttributeDefaults(|ctx| attrs::PoolAttrs::default_attributes(ctx, 1, true))),
        ),
        super::with_signature::<Pool<2, false>>(
            OpDef::new(names::AVG_POOL2D, "2-D average pooling (NCHW)")
                .description(
                    "`fp.avg_pool2d(x)`: the mean of each window; `x` is N×C×H×W. Attributes: \
                     `kernel = [kh, kw]` (required), `stride` (default ones, as in ONNX), \
                     `pad = [top, left, bottom, right]` (default zeros), `ceil_mode` (default `false`), \
                     `count_include_pad` (default `false`: the divisor is the number of input elements \
                     in the window; with `true` padding positions count too, the window clipped to the \
                     padded input, as ONNX Runtime and PyTorch do).\n\n\
                     ```\n%y = fp.avg_pool2d(%x) {kernel = [2, 2], stride = [2, 2]} : (tensor<1x64x56x56xf32>) -> tensor<1x64x28x28xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(Traits::PURE)
                .interface(QuantizableOp::activations(&[0]))
                .interface(AttributeDefaults(|ctx| attrs::PoolAttrs::default_attributes(ctx, 2, false))),
        ),
        super::with_signature::<GlobalAvgPool>(
            OpDef::new(names::GLOBAL_AVG_POOL2D, "mean over H and W (NCHW)")
                .description(
                    "`fp.global_avg_pool2d(x)`: the mean of each N×C plane; `x` is N×C×H×W and the \
                     result N×C×1×1.\n\n\
                     ```\n%y = fp.global_avg_pool2d(%x) : (tensor<1x512x7x7xf32>) -> tensor<1x512x1x1xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(Traits::PURE)
                .interface(QuantizableOp::activations(&[0])),
        ),
    ]
}

/// Pooling over `N` spatial dimensions; `MAX` for max pooling (quant-agnostic,
/// with dilation), otherwise average pooling.
struct Pool<const N: usize, const MAX: bool>;

impl<const N: usize, const MAX: bool> Signature for Pool<N, MAX> {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input"], 1)?;
        let allowed = if MAX { Elements::FloatOrQuant } else { Elements::Float };
        let elem = common_element(ctx, &ops, allowed)?;
        let x = &ops[0];
        expect_rank(ctx, x, N + 2, if N == 2 { "NxCxHxW" } else { "NxCxL" })?;
        let w = attrs::PoolAttrs::read_in(ctx, attrs, N, MAX)?;
        let mut shape: SmallVec<[i64; 4]> = x.shape[..2].into();
        for i in 0..N {
            let size = pool_out(
                x.shape[2 + i],
                w.kernel[i],
                w.stride[i],
                w.pad[i],
                w.pad[N + i],
                w.dilation[i],
                w.ceil_mode,
            )
            .map_err(|e| format!("along dimension {}: {e}", 2 + i))?;
            shape.push(size);
        }
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

struct GlobalAvgPool;

impl Signature for GlobalAvgPool {
    fn check(ctx: &Context, operands: &[Type], _attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input"], 1)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let x = &ops[0];
        expect_rank(ctx, x, 4, "NxCxHxW")?;
        Ok(smallvec::smallvec![Sig::new(&[x.shape[0], x.shape[1], 1, 1], elem)])
    }
}
