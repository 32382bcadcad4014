//! Reading quantization parameters out of types, checking quantized types, and
//! deriving the fixed-point multipliers each op uses, in the f64 operation
//! order `docs/quant-semantics.md` §4.1 fixes.
//!
//! The interpreter, passes and backends call these instead of re-deriving
//! multipliers, so `(s_x × s_w) / s_out` is computed the same way everywhere.
//! Everything here takes any type without panicking; a type that is not what a
//! function expects gives `None` or an error message.

use crate::fixed_point::{quantize_f32, quantize_multiplier, scale_f32, shared_multipliers};
use qopt_ir_core::{
    constant_value, dense_values_i128, AttrData, Context, FloatKind, Module, QuantParams, QuantType, Type,
    TypeData, ValueId,
};

/// One scale and zero point: `real = scale × (q − zero_point)`.
#[derive(Copy, Clone, PartialEq, Debug)]
pub struct ScaleZp {
    /// The scale (as written in the type, f64).
    pub scale: f64,
    /// The stored value that stands for real 0.
    pub zero_point: i64,
}

/// The quantized element type of `ty`: `ty` itself if it is a quantized type,
/// the element type of a tensor of quantized elements, else `None`.
pub fn quant_element(ctx: &Context, ty: Type) -> Option<&QuantType> {
    match ctx.type_data(ctx.element_type(ty)) {
        TypeData::Quant(q) => Some(q),
        _ => None,
    }
}

/// `[storage_min, storage_max]`.
pub fn storage_range(q: &QuantType) -> (i64, i64) {
    (q.storage_min, q.storage_max)
}

/// The parameters of a per-tensor type, `None` for a per-axis one.
pub fn per_tensor(q: &QuantType) -> Option<ScaleZp> {
    match q.params {
        QuantParams::PerTensor { scale, zero_point } => Some(ScaleZp { scale, zero_point }),
        QuantParams::PerAxis { .. } => None,
    }
}

/// The quantized axis of a per-axis type, `None` for a per-tensor one.
pub fn axis(q: &QuantType) -> Option<usize> {
    match q.params {
        QuantParams::PerAxis { axis, .. } => Some(axis as usize),
        QuantParams::PerTensor { .. } => None,
    }
}

/// Every parameter entry: one for a per-tensor type, one per index of the
/// axis for a per-axis type (scales and zero points paired up to the shorter
/// list, which the verifier makes equal).
pub fn params(q: &QuantType) -> Vec<ScaleZp> {
    match &q.params {
        QuantParams::PerTensor { scale, zero_point } => {
            vec![ScaleZp { scale: *scale, zero_point: *zero_point }]
        }
        QuantParams::PerAxis { scales, zero_points, .. } => scales
            .iter()
            .zip(zero_points.iter())
            .map(|(&scale, &zero_point)| ScaleZp { scale, zero_point })
            .collect(),
    }
}

/// The parameters that apply at coordinate `index` along the quantized axis
/// (any index for a per-tensor type); `None` if out of range.
pub fn params_at(q: &QuantType, index: usize) -> Option<ScaleZp> {
    match &q.params {
        QuantParams::PerTensor { scale, zero_point } => {
            Some(ScaleZp { scale: *scale, zero_point: *zero_point })
        }
        QuantParams::PerAxis { scales, zero_points, .. } => {
            Some(ScaleZp { scale: *scales.get(index)?, zero_point: *zero_points.get(index)? })
        }
    }
}

/// The checks of `docs/quant-semantics.md` §2 that ir-core leaves to the `qnn`
/// dialect: the expressed type is f32, f16 or bf16, and every scale is finite,
/// positive and a normal f32 once rounded to f32.
pub fn check_semantics(q: &QuantType) -> Result<(), String> {
    if q.expressed == FloatKind::F64 {
        return Err("expressed type f64 is not supported; use f32, f16 or bf16".to_string());
    }
    for p in params(q) {
        let s = p.scale;
        if !s.is_finite() || s <= 0.0 {
            return Err(format!("scale {s:?} is not a positive finite number"));
        }
        let s32 = s as f32;
        if !s32.is_normal() {
            return Err(format!(
                "scale {s:?} is not a normal f32 number (quantize and dequantize compute in f32)"
            ));
        }
    }
    Ok(())
}

/// Every check of §2, including the structural ones ir-core makes on the types
/// of values ([`QuantType::check_structure`]). For quantized types that ir-core
/// does not check itself, such as the one in the `type` attribute of
/// `qnn.fake_quant`.
pub fn check_quant_type(q: &QuantType) -> Result<(), String> {
    q.check_structure()?;
    check_semantics(q)
}

/// Checks that per-axis parameters fit a tensor of `shape` (see
/// [`QuantType::check_axis_fits`]).
pub fn check_axis_fits(q: &QuantType, shape: &[i64]) -> Result<(), String> {
    q.check_axis_fits(shape)
}

// ---- multipliers (§4.1) -----------------------------------------------------

/// A fixed-point multiplier `(m, n)`: `M ≈ m × 2^(−31−n)`.
pub type Multiplier = (i32, i32);

/// `qnn.requantize` and `qnn.concat` (§5, §7.3): one multiplier per parameter
/// entry of `input` for `s_in / s_out`. `output` must be per tensor.
pub fn requantize_multipliers(input: &QuantType, output: &QuantType) -> Result<Vec<Multiplier>, String> {
    let out = per_tensor(output).ok_or("the output of a requantization must be quantized per tensor")?;
    params(input).iter().map(|p| quantize_multiplier(p.scale / out.scale)).collect()
}

/// `qnn.conv2d` and `qnn.dense` (§6): one multiplier per parameter entry of the
/// weight (per output channel, or one) for `(s_x × s_w[c]) / s_out`.
pub fn conv_multipliers(x: &QuantType, w: &QuantType, output: &QuantType) -> Result<Vec<Multiplier>, String> {
    let sx = per_tensor(x).ok_or("the input must be quantized per tensor")?;
    let out = per_tensor(output).ok_or("the output must be quantized per tensor")?;
    params(w).iter().map(|p| quantize_multiplier((sx.scale * p.scale) / out.scale)).collect()
}

/// Whether one output channel's centered weights `w − zp_w[c]`, in the
/// order a conv or dense reduces them (its weight row, input channel major),
/// can be multiplied with u8 activations by x86's `vpmaddubsw` exactly:
/// every weight fits s8, and each pair of taps `2j, 2j+1` the instruction
/// adds in i16 with saturation has 255·(|w_a| + |w_b|) ≤ 32767.
/// `qopt-codegen-x86` picks its kernels by this, and `quant-lint` reports
/// it, so the two cannot disagree.
pub fn u8_s8_pairs_exact(centered_row: &[i64]) -> bool {
    centered_row.iter().all(|w| (-128..=127).contains(w))
        && centered_row
            .chunks(2)
            .all(|pair| 255 * pair.iter().map(|w| w.unsigned_abs()).sum::<u64>() <= 32767)
}

/// The bound [`winograd_f2x3_exact`] proves `255 · Σ|w'|` below.
pub const WINOGRAD_SUM_BOUND: i64 = 1 << 29;

/// Whether one output channel of a 3×3 conv, its centered weights
/// `centered_row`, can run as x86's exact integer Winograd F(2×2, 3×3):
/// the backend's i32 transform-domain sums hold `4·Y` for an output sum
/// `|Y| ≤ 255 · Σ|w'|`, exact when that is below 2^29
/// ([`WINOGRAD_SUM_BOUND`]). `qopt-codegen-x86` and `quant-lint` both use
/// this.
pub fn winograd_f2x3_exact(centered_row: &[i64]) -> bool {
    255 * centered_row.iter().map(|w| w.unsigned_abs()).sum::<u64>() < WINOGRAD_SUM_BOUND as u64
}

/// The largest stored value `qnn.conv2d_relu` and `qnn.dense_relu` produce
/// (§6): `qmax` of `output`, lowered to `quantize(relu_max)` in the output's
/// parameters (§3.1, with the f32 scale) when the op carries `relu_max`.
/// `output` must be per tensor. The interpreter and the backends read the
/// bound from here, so a fused ReLU6 clips at the same stored value everywhere.
pub fn relu_upper_bound(output: &QuantType, relu_max: Option<f64>) -> Result<i64, String> {
    let out = per_tensor(output).ok_or("the output must be quantized per tensor")?;
    let (qmin, qmax) = storage_range(output);
    Ok(match relu_max {
        None => qmax,
        Some(max) => qmax.min(quantize_f32(max as f32, scale_f32(out.scale), out.zero_point, qmin, qmax)),
    })
}

/// `qnn.add` (§7.1): `(m_a, m_b, n)` with the shared shift `n`.
pub fn add_multipliers(a: &QuantType, b: &QuantType, output: &QuantType) -> Result<(i32, i32, i32), String> {
    let (sa, sb, out) = per_tensor_triple(a, b, output)?;
    shared_multipliers(sa.scale / out.scale, sb.scale / out.scale)
}

/// A `qnn.add` operand that contributes nothing (see [`add_operand_dropped`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AddOperandDropped {
    /// 0 or 1.
    pub operand: usize,
    /// Its scale.
    pub scale: f64,
    /// The other operand's scale.
    pub other_scale: f64,
}

/// The operand of a `qnn.add` whose shared-shift multiplier (§7.1) rounds to
/// 0 although its scale is not 0: its scale is more than 2^31 times smaller
/// than the other's, and the sum ignores it. `None` when both count, or the
/// types are not what `qnn.add` takes. `quant-lint` warns about it and the
/// ONNX export refuses it (ONNX adds the operand).
pub fn add_operand_dropped(a: &QuantType, b: &QuantType, output: &QuantType) -> Option<AddOperandDropped> {
    let (sa, sb, _) = per_tensor_triple(a, b, output).ok()?;
    let (m_a, m_b, _) = add_multipliers(a, b, output).ok()?;
    match (m_a, m_b) {
        (0, m) if m != 0 && sa.scale != 0.0 => {
            Some(AddOperandDropped { operand: 0, scale: sa.scale, other_scale: sb.scale })
        }
        (m, 0) if m != 0 && sb.scale != 0.0 => {
            Some(AddOperandDropped { operand: 1, scale: sb.scale, other_scale: sa.scale })
        }
        _ => None,
    }
}

/// `qnn.prelu` (§7.6): the multiplier of the non-negative side,
/// `s_x ⊘₆₄ s_out`, and per slope value `α` that of the negative side,
/// `(s_x ⊗₆₄ |α|) ⊘₆₄ s_out` (`None` for `α = 0`, whose side is the zero
/// point).
pub fn prelu_multipliers(
    x: &QuantType,
    output: &QuantType,
    slopes: &[f64],
) -> Result<(Multiplier, Vec<Option<Multiplier>>), String> {
    let sx = per_tensor(x).ok_or("the input must be quantized per tensor")?;
    let out = per_tensor(output).ok_or("the output must be quantized per tensor")?;
    let positive = quantize_multiplier(sx.scale / out.scale)?;
    let negative = slopes
        .iter()
        .map(|&alpha| {
            if !alpha.is_finite() {
                return Err(format!("slope {alpha} is not a finite number"));
            }
            if alpha == 0.0 {
                return Ok(None);
            }
            quantize_multiplier((sx.scale * alpha.abs()) / out.scale).map(Some)
        })
        .collect::<Result<_, _>>()?;
    Ok((positive, negative))
}

/// `qnn.mul` (§7.2): the multiplier of `(s_a × s_b) / s_out`.
pub fn mul_multiplier(a: &QuantType, b: &QuantType, output: &QuantType) -> Result<Multiplier, String> {
    let (sa, sb, out) = per_tensor_triple(a, b, output)?;
    quantize_multiplier((sa.scale * sb.scale) / out.scale)
}

fn per_tensor_triple(
    a: &QuantType,
    b: &QuantType,
    out: &QuantType,
) -> Result<(ScaleZp, ScaleZp, ScaleZp), String> {
    match (per_tensor(a), per_tensor(b), per_tensor(out)) {
        (Some(a), Some(b), Some(o)) => Ok((a, b, o)),
        _ => Err("operands and result must be quantized per tensor".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_ir_core::{IntType, Signedness};

    #[test]
    fn winograd_exactness_stops_below_two_to_the_29() {
        // 255 · 2105376 = 2^29 − 32: exact; one more unit of |w| reaches 2^29.
        let mut row = vec![255i64; 2105376 / 255];
        row.push(-(2105376 % 255) as i64);
        assert_eq!(255 * row.iter().map(|w| w.abs()).sum::<i64>(), (1 << 29) - 32);
        assert!(winograd_f2x3_exact(&row));
        row.push(1);
        assert!(!winograd_f2x3_exact(&row));
    }

    fn q(params: QuantParams) -> QuantType {
        QuantType {
            storage: IntType { width: 8, signedness: Signedness::Signless },
            storage_min: -128,
            storage_max: 127,
            expressed: FloatKind::F32,
            params,
        }
    }

    fn per_t(scale: f64, zero_point: i64) -> QuantType {
        q(QuantParams::PerTensor { scale, zero_point })
    }

    fn per_axis(scales: &[f64], zero_points: &[i64]) -> QuantType {
        q(QuantParams::PerAxis { axis: 0, scales: scales.into(), zero_points: zero_points.into() })
    }

    #[test]
    fn reading() {
        let t = per_t(0.5, -3);
        assert_eq!(per_tensor(&t), Some(ScaleZp { scale: 0.5, zero_point: -3 }));
        assert_eq!(params_at(&t, 99), per_tensor(&t));
        assert_eq!(axis(&t), None);
        let a = per_axis(&[0.1, 0.25], &[0, 1]);
        assert_eq!(axis(&a), Some(0));
        assert_eq!(per_tensor(&a), None);
        assert_eq!(params_at(&a, 1), Some(ScaleZp { scale: 0.25, zero_point: 1 }));
        assert_eq!(params_at(&a, 2), None);
        assert_eq!(params(&a).len(), 2);
        assert_eq!(storage_range(&a), (-128, 127));
        let mut ctx = Context::new();
        let elem = ctx.quant_type(t.clone());
        let tensor = ctx.tensor_type(&[2, 2], elem);
        assert_eq!(quant_element(&ctx, tensor), Some(&t));
        assert_eq!(quant_element(&ctx, elem), Some(&t));
        let f32_ty = ctx.common().f32;
        assert_eq!(quant_element(&ctx, f32_ty), None);
    }

    #[test]
    fn type_checks() {
        assert_eq!(check_quant_type(&per_t(0.5, -3)), Ok(()));
        assert_eq!(check_semantics(&per_t(0.0, 0)).unwrap_err(), "scale 0.0 is not a positive finite number");
        assert_eq!(
            check_semantics(&per_t(-1.0, 0)).unwrap_err(),
            "scale -1.0 is not a positive finite number"
        );
        assert_eq!(
            check_semantics(&per_t(f64::NAN, 0)).unwrap_err(),
            "scale NaN is not a positive finite number"
        );
        assert_eq!(
            check_semantics(&per_t(f64::INFINITY, 0)).unwrap_err(),
            "scale inf is not a positive finite number"
        );
        assert_eq!(
            check_semantics(&per_t(1e-40, 0)).unwrap_err(),
            "scale 1e-40 is not a normal f32 number (quantize and dequantize compute in f32)"
        );
        assert!(check_semantics(&per_t(1e39, 0)).is_err());
        assert!(check_semantics(&per_t(f32::MAX as f64, 0)).is_ok());
        assert!(check_semantics(&per_t(f32::MIN_POSITIVE as f64, 0)).is_ok());
        assert!(check_semantics(&per_axis(&[0.1, 0.0], &[0, 0])).is_err());
        let mut f64_expressed = per_t(0.5, 0);
        f64_expressed.expressed = FloatKind::F64;
        assert_eq!(
            check_semantics(&f64_expressed).unwrap_err(),
            "expressed type f64 is not supported; use f32, f16 or bf16"
        );
        assert_eq!(
            check_quant_type(&per_t(0.5, 300)).unwrap_err(),
            "zero point 300 is outside the storage range [-128, 127]"
        );
        let mut wide = per_t(0.5, 0);
        wide.storage.width = 33;
        assert!(check_quant_type(&wide).is_err());
        let mut bad_range = per_t(0.5, 0);
        bad_range.storage_min = 5;
        bad_range.storage_max = 4;
        assert_eq!(check_quant_type(&bad_range).unwrap_err(), "storage range [5, 4] is empty");
        assert!(check_quant_type(&per_axis(&[0.1], &[0, 0])).is_err());
        assert!(check_quant_type(&per_axis(&[], &[])).is_err());
        let a = per_axis(&[0.1, 0.2], &[0, 0]);
        assert_eq!(check_axis_fits(&a, &[2, 5]), Ok(()));
        assert_eq!(check_axis_fits(&a, &[-1, 5]), Ok(()));
        assert_eq!(
            check_axis_fits(&a, &[3]).unwrap_err(),
            "per-axis quantization along axis 0 has 2 scales but the dimension is 3"
        );
        assert_eq!(
            check_axis_fits(&a, &[]).unwrap_err(),
            "per-axis quantization axis 0 is not a dimension of a rank-0 tensor"
        );
    }

    #[test]
    fn multipliers() {
        // §5: 0.5 → 0.2 is 2.5.
        assert_eq!(requantize_multipliers(&per_t(0.5, 2), &per_t(0.2, 10)), Ok(vec![(1342177280, -2)]));
        assert_eq!(
            requantize_multipliers(&per_axis(&[0.1, 0.4], &[0, -1]), &per_t(0.2, 0)),
            Ok(vec![(1 << 30, 0), (1 << 30, -2)])
        );
        assert!(requantize_multipliers(&per_t(0.5, 0), &per_axis(&[0.1], &[0])).is_err());
        // §6 dense example.
        let x = per_t(0.5, 128);
        let w = per_axis(&[0.25, 0.125], &[0, 0]);
        assert_eq!(conv_multipliers(&x, &w, &per_t(0.25, -10)), Ok(vec![(1 << 30, 0), (1 << 30, 1)]));
        assert!(conv_multipliers(&w, &w, &x).is_err());
        // §7.
        assert_eq!(
            add_multipliers(&per_t(0.5, 0), &per_t(0.25, 4), &per_t(1.0, 0)),
            Ok((1 << 30, 1 << 29, 0))
        );
        assert_eq!(mul_multiplier(&per_t(0.5, 0), &per_t(0.5, 0), &per_t(0.1, 0)), Ok((1342177280, -2)));
        assert!(mul_multiplier(&w, &x, &x).is_err());
    }
}

/// The worst output channel of a conv or dense whose signed accumulator can
/// overflow (see [`accumulator_overflow`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccumulatorOverflow {
    /// The output channel with the largest bound.
    pub channel: usize,
    /// Its worst case |accumulator|: `Σ_k |w_k − zp_w[c]| · max|x − zp_x| + |b[c]|`.
    pub bound: i128,
    /// The largest value the accumulator holds, `2^(bits−1) − 1`.
    pub limit: i128,
}

/// Whether a conv or dense reading `x` (of a quantized type) with weight `w`
/// (quantized, per tensor or per output channel, its output channels on
/// `weight_axis`: 0, or 1 for a transposed convolution) and the optional integer
/// `bias` can overflow a signed `bits`-bit accumulator: per output channel,
/// `Σ_k |w_k − zp_w[c]| · max|x − zp_x| + |b[c]|`, exact from a constant
/// weight, else K times the widest `|w − zp_w|` the type allows; a bias that
/// is not an integer constant counts as 0. `None` when it cannot overflow or
/// `x` or `w` is not quantized. `quant-lint` reports it on `qnn.conv2d` and
/// `qnn.dense`, `quantize-search` checks its candidates with it, and the
/// ONNX export refuses a layer it finds (ONNX computes the unwrapped sum).
pub fn accumulator_overflow(
    ctx: &Context,
    module: &Module,
    x: ValueId,
    (w, weight_axis): (ValueId, usize),
    bias: Option<ValueId>,
    bits: u32,
) -> Option<AccumulatorOverflow> {
    let qx = quant_element(ctx, module.value_type(x))?;
    let qw = quant_element(ctx, module.value_type(w))?;
    let zp_x = i128::from(params(qx).first().map_or(0, |p| p.zero_point));
    let max_x = (i128::from(qx.storage_max) - zp_x).abs().max((i128::from(qx.storage_min) - zp_x).abs());
    let w_params = params(qw);
    let w_shape = ctx.tensor_shape(module.value_type(w))?;
    let channels = w_shape.get(weight_axis).copied().unwrap_or(1).max(1) as usize;
    // Elements run in C order: element i is of channel (i / inner) % channels.
    let inner = w_shape.iter().skip(weight_axis + 1).map(|&d| d.max(1) as usize).product::<usize>();
    // Per channel Σ_k |w_k − zp_w[c]|: exact from a constant weight, else
    // K times the widest |w − zp_w| the type allows.
    let per_channel: Vec<i128> = match constant_value(ctx, module, w)
        .map(|a| ctx.attr_data(a))
        .and_then(|d| if let AttrData::Dense(d) = d { dense_values_i128(ctx, d) } else { None })
    {
        Some(values) if !values.is_empty() => {
            let mut sums = vec![0i128; channels];
            for (i, &v) in values.iter().enumerate() {
                let c = (i / inner.max(1)) % channels;
                let zp = i128::from(w_params.get(c).or(w_params.last()).map_or(0, |p| p.zero_point));
                sums[c] += (v - zp).abs();
            }
            sums
        }
        _ => {
            let k: i128 = w_shape
                .iter()
                .enumerate()
                .filter(|&(axis, _)| axis != weight_axis)
                .map(|(_, &d)| i128::from(d.max(0)))
                .product();
            let widest = w_params
                .iter()
                .map(|p| {
                    let zp = i128::from(p.zero_point);
                    (i128::from(qw.storage_max) - zp).abs().max((i128::from(qw.storage_min) - zp).abs())
                })
                .max()
                .unwrap_or(0);
            vec![k * widest; channels]
        }
    };
    let bias: Vec<i128> = bias
        .and_then(|b| constant_value(ctx, module, b))
        .and_then(
            |a| if let AttrData::Dense(d) = ctx.attr_data(a) { dense_values_i128(ctx, d) } else { None },
        )
        .unwrap_or_default();
    let limit = (1i128 << (bits.clamp(2, 127) - 1)) - 1;
    per_channel
        .iter()
        .enumerate()
        .map(|(channel, &s)| (channel, s * max_x + bias.get(channel).map_or(0, |b| b.abs())))
        .max_by_key(|&(_, v)| v)
        .filter(|&(_, bound)| bound > limit)
        .map(|(channel, bound)| AccumulatorOverflow { channel, bound, limit })
}
