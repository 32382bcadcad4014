//! What ONNX Runtime's int8 kernels compute exactly on x86 CPUs with AVX2
//! and without VNNI, the target most exports run on.
//!
//! With its graph optimizations on (the default session), ONNX Runtime
//! fuses a QDQ conv or dense with 8-bit activations and int8 weights into
//! its integer kernels, converting int8 activations to uint8 first
//! (`QDQS8ToU8`); its u8 × s8 kernels multiply with `vpmaddubsw`, which adds
//! each pair of products in i16 with saturation. A QLinear op with int8
//! activations keeps them int8 and runs the exact s8 × s8 kernels; one
//! with uint8 activations and int8 weights takes the u8 × s8 kernels again.
//!
//! A layer is free of that saturation when every pair of its stored weights,
//! in whatever order ONNX Runtime packs them (NCHW or, after its layout
//! transformer, NHWC), has 255·(|a| + |b|) ≤ 32767: the test
//! `quant_params::u8_s8_pairs_exact` makes for qopt's own x86 kernels,
//! applied to each row sorted by magnitude, whose first pair is the worst
//! pair of any order. Stored values are what the kernels multiply (they
//! correct for the weight zero point afterwards).

use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{quant_element, u8_s8_pairs_exact};
use qopt_ir_core::{constant_value, dense_values_i128, AttrData, Context, Module, OpId, Signedness};

/// True for the ops ONNX Runtime runs on its u8 × s8 or s8 × s8 GEMM kernels.
pub(super) fn is_layer(name: &str) -> bool {
    matches!(name, qnn_op::CONV2D | qnn_op::CONV2D_RELU | qnn_op::DENSE | qnn_op::DENSE_RELU)
}

/// How ONNX Runtime's kernels would multiply a conv or dense `op`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Multiply {
    /// Not an 8-bit × int8 layer: ONNX Runtime does not take it to the u8 × s8 kernels.
    Other,
    /// 8-bit activations, int8 weights proven free of `vpmaddubsw` saturation.
    SaturationFree,
    /// 8-bit activations, int8 weights that may saturate `vpmaddubsw`
    /// (or are not constant, so nothing is proven).
    MaySaturate,
}

/// Classifies conv or dense `op` (see [`Multiply`]).
pub(super) fn multiply(ctx: &Context, module: &Module, op: OpId) -> Multiply {
    if module.num_operands(op) < 2 {
        return Multiply::Other;
    }
    let (x, w) = (module.operand(op, 0), module.operand(op, 1));
    let (Some(qx), Some(qw)) =
        (quant_element(ctx, module.value_type(x)), quant_element(ctx, module.value_type(w)))
    else {
        return Multiply::Other;
    };
    if qx.storage.width != 8 || qw.storage.width != 8 || qw.storage.signedness == Signedness::Unsigned {
        return Multiply::Other;
    }
    let values = match constant_value(ctx, module, w).map(|a| ctx.attr_data(a)) {
        Some(AttrData::Dense(d)) => dense_values_i128(ctx, d),
        _ => None,
    };
    let Some(values) = values else { return Multiply::MaySaturate };
    let channels =
        ctx.tensor_shape(module.value_type(w)).and_then(|s| s.first().copied()).unwrap_or(1).max(1);
    let per_row = (values.len() / channels as usize).max(1);
    let free = values.chunks(per_row).all(|row| {
        let mut row: Vec<i64> = row.iter().map(|&v| v as i64).collect();
        row.sort_by_key(|w| std::cmp::Reverse(w.unsigned_abs()));
        u8_s8_pairs_exact(&row)
    });
    if free {
        Multiply::SaturationFree
    } else {
        Multiply::MaySaturate
    }
}

/// True if a layer with 8-bit activations stored as `x_signedness` and int8
/// weights runs on ONNX Runtime's u8 × s8 kernels when written as QDQ
/// (`qoperator` false) or as a QLinear op.
pub(super) fn takes_u8_s8(qoperator: bool, x_signedness: Signedness) -> bool {
    !qoperator || x_signedness == Signedness::Unsigned
}
