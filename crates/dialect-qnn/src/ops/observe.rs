//! `qnn.observe`: the identity that carries calibration statistics.
//!
//! Passes are stateless, so everything calibration learns lives in these
//! attributes: `insert-observers` creates the op with its configuration,
//! `calibrate` fills in the statistics, `insert-fakeq` reads them. The names and
//! their rules are `docs/quant-semantics.md` §8; the verifier checks each one
//! that is present and leaves other attributes alone (passes may add their own).

use super::{convert::infer_identity, describe, tensor};
use qopt_dialect_fp::{attrs, shape};
use qopt_ir_core::{
    dense_values_f64, dense_values_i128, AttrData, Attribute, Context, OpDef, OpView, Traits, TypeData,
};
use qopt_ir_core::{Arity, DenseElements};

qopt_ir_core::op_name_constants! {
    OBSERVE = "qnn.observe",
}

/// The observer kinds qopt's calibration passes provide, default first. The
/// `observer` attribute may also name one a downstream crate registers, so the
/// verifier checks only that it is a name; `calibrate` rejects unknown ones.
pub const BUILTIN_OBSERVERS: [&str; 3] = ["minmax", "moving-average", "histogram"];

pub(crate) fn ops() -> Vec<OpDef> {
    vec![OpDef::new(names::OBSERVE, "identity that records statistics of the values passing through")
        .description(
            "`qnn.observe(x)` returns `x` unchanged. Its attributes configure and hold calibration \
             statistics (`docs/quant-semantics.md` §8); they never change values. All are optional:\n\n\
             - `observer`: `\"minmax\"` (default), `\"moving-average\"`, `\"histogram\"`, or the name of \
             an observer a downstream crate registers (letters, digits, `-`, `_`, `.`);\n\
             - `axis`: per-channel statistics along this dimension (negative counts from the back);\n\
             - `min`, `max`: the running minimum and maximum of the real values, given together, \
             `min ≤ max`; floats, or with `axis` a `dense<...> : tensor<Cxf32>` with one entry per channel;\n\
             - `samples`: how many tensors (calibration batches) were observed, ≥ 0;\n\
             - `averaging_constant`: the moving-average weight of the newest batch, in (0, 1];\n\
             - `bins`: the histogram size to collect, > 0;\n\
             - `histogram`: `dense<...> : tensor<Bxi64>` counts ≥ 0 over [`hist_min`, `hist_max`] in `B` \
             equal bins (`B = bins` when both are given); `hist_min ≤ hist_max` are floats and come \
             with `histogram`;\n\
             - `percentile`: the percentile `insert-fakeq{method=percentile}` uses for this value (instead \
             of the pass's `percentile` option), in (0, 100];\n\
             - `mean_axis`: record the mean of each index of this dimension (the channels a conv or dense \
             reads), for bias correction; `mean` (`dense<...> : tensor<Cxf64>`, finite) and `mean_count` \
             (rows averaged, ≥ 1: indices of dimension 0) hold it and come together.\n\n\
             The operand is a float or quantized tensor (statistics are of the real values); the result \
             has its type.\n\n\
             ```\n%o = qnn.observe(%x) {observer = \"histogram\", bins = 4, min = -1.5 : f32, max = 3.0 : f32, \
             samples = 2, histogram = dense<[1, 0, 5, 2]> : tensor<4xi64>, hist_min = -2.0 : f32, \
             hist_max = 4.0 : f32} : (tensor<8xf32>) -> tensor<8xf32>\n```",
        )
        .operands(Arity::Exact(1))
        .traits(
            Traits::PURE | Traits::ELEMENTWISE | Traits::SAME_OPERANDS_AND_RESULT_TYPE | Traits::QUANT_AGNOSTIC,
        )
        .verifier(verify_observe)
        .infer(infer_identity)]
}

fn verify_observe(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    let dict = v.attrs();
    let x = tensor(ctx, v.operand_type(0), "input")?;
    let elem_ok = shape::is_float_element(ctx, x.elem) || shape::is_quant_element(ctx, x.elem);
    if !elem_ok {
        return Err(format!(
            "input must have a float or quantized element type, got {}",
            qopt_ir_core::type_to_string(ctx, x.ty)
        ));
    }
    let kind = attrs::string_in(ctx, dict, "observer", BUILTIN_OBSERVERS[0])?;
    let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if kind.is_empty() || !kind.chars().all(name_char) {
        return Err(format!(
            "'observer' must name an observer (letters, digits, '-', '_', '.'), like \"minmax\", got \"{kind}\""
        ));
    }
    let axis = match attrs::opt_int_in(ctx, dict, "axis")? {
        Some(a) => Some(shape::normalize_axis(a, x.rank()).map_err(|e| format!("'axis': {e}"))?),
        None => None,
    };
    let channels = axis.map(|a| x.shape[a]);

    // min / max.
    let (min, max) = (v.attr("min"), v.attr("max"));
    match (min, max) {
        (None, None) => {}
        (Some(min), Some(max)) => {
            let lo = stat_values(ctx, "min", min, channels)?;
            let hi = stat_values(ctx, "max", max, channels)?;
            if let Some(i) = lo.iter().zip(&hi).position(|(l, h)| l > h) {
                let at = if channels.is_some() { format!(" at channel {i}") } else { String::new() };
                return Err(format!("'min' ({}) is greater than 'max' ({}){at}", lo[i], hi[i]));
            }
        }
        _ => return Err("'min' and 'max' must be given together".to_string()),
    }

    if let Some(samples) = attrs::opt_int_in(ctx, dict, "samples")? {
        if samples < 0 {
            return Err(format!("'samples' must be at least 0, got {samples}"));
        }
    }
    if let Some(c) = attrs::opt_float_in(ctx, dict, "averaging_constant")? {
        if !(c > 0.0 && c <= 1.0) {
            return Err(format!("'averaging_constant' must be in (0, 1], got {c}"));
        }
    }
    if let Some(p) = attrs::opt_float_in(ctx, dict, "percentile")? {
        if !(p > 0.0 && p <= 100.0) {
            return Err(format!("'percentile' must be in (0, 100], got {p}"));
        }
    }
    let bins = attrs::opt_int_in(ctx, dict, "bins")?;
    if let Some(b) = bins {
        if b < 1 {
            return Err(format!("'bins' must be at least 1, got {b}"));
        }
    }

    check_means(ctx, v, x.rank(), x.shape)?;

    // histogram with its range.
    let hist_min = attrs::opt_float_in(ctx, dict, "hist_min")?;
    let hist_max = attrs::opt_float_in(ctx, dict, "hist_max")?;
    match (v.attr("histogram"), hist_min, hist_max) {
        (None, None, None) => Ok(()),
        (Some(h), Some(lo), Some(hi)) => {
            if lo > hi {
                return Err(format!("'hist_min' ({lo}) is greater than 'hist_max' ({hi})"));
            }
            check_histogram(ctx, h, bins)
        }
        (Some(_), _, _) => Err("'histogram' needs 'hist_min' and 'hist_max'".to_string()),
        (None, _, _) => Err("'hist_min' and 'hist_max' come only with 'histogram'".to_string()),
    }
}

/// The dense attribute `attr`, if it is one.
fn dense(ctx: &Context, attr: Attribute) -> Option<&DenseElements> {
    match ctx.attr_data(attr) {
        AttrData::Dense(d) => Some(d),
        _ => None,
    }
}

/// The values of `min` or `max`: one float per tensor, or with an axis of
/// `channels` entries, a rank-1 f32 dense attribute (`channels` = `Some(size)`).
fn stat_values(
    ctx: &Context,
    name: &str,
    attr: Attribute,
    channels: Option<i64>,
) -> Result<Vec<f64>, String> {
    let Some(channels) = channels else {
        return match ctx.attr_as_f64(attr) {
            Some(v) if v.is_nan() => Err(format!("'{name}' must not be NaN")),
            Some(v) => Ok(vec![v]),
            None => Err(format!("'{name}' must be a float (like 1.0 : f32), got {}", describe(ctx, attr))),
        };
    };
    let bad = || {
        format!(
            "'{name}' must be a dense<...> : tensor<{}xf32> with one value per channel of 'axis', got {}",
            if channels < 0 { "?".to_string() } else { channels.to_string() },
            describe(ctx, attr)
        )
    };
    let d = dense(ctx, attr).ok_or_else(bad)?;
    let f32_ty = ctx.common().f32;
    let elem = ctx.element_type(d.ty);
    let shape = ctx.tensor_shape(d.ty).unwrap_or(&[]);
    if elem != f32_ty || shape.len() != 1 || (channels >= 0 && shape[0] != channels) {
        return Err(bad());
    }
    let values = dense_values_f64(ctx, d, elem).ok_or_else(bad)?;
    if values.iter().any(|v| v.is_nan()) {
        return Err(format!("'{name}' must not hold NaN"));
    }
    Ok(values)
}

/// `mean_axis` with `mean` (one finite float per index of that axis) and
/// `mean_count` (> 0), which come together.
fn check_means(ctx: &Context, v: &OpView<'_>, rank: usize, dims: &[i64]) -> Result<(), String> {
    let dict = v.attrs();
    let axis = match attrs::opt_int_in(ctx, dict, "mean_axis")? {
        Some(a) => Some(shape::normalize_axis(a, rank).map_err(|e| format!("'mean_axis': {e}"))?),
        None => None,
    };
    let count = attrs::opt_int_in(ctx, dict, "mean_count")?;
    match (v.attr("mean"), count, axis) {
        (None, None, _) => Ok(()),
        (Some(mean), Some(count), Some(axis)) => {
            if count < 1 {
                return Err(format!("'mean_count' must be at least 1, got {count}"));
            }
            let channels = dims[axis];
            let bad = || {
                format!(
                    "'mean' must be a dense<...> : tensor<{}xf64> with one value per index of 'mean_axis', got {}",
                    if channels < 0 { "?".to_string() } else { channels.to_string() },
                    describe(ctx, mean)
                )
            };
            let d = dense(ctx, mean).ok_or_else(bad)?;
            let shape = ctx.tensor_shape(d.ty).unwrap_or(&[]);
            let values = dense_values_f64(ctx, d, ctx.element_type(d.ty)).ok_or_else(bad)?;
            if shape.len() != 1 || (channels >= 0 && shape[0] != channels) {
                return Err(bad());
            }
            if values.iter().any(|m| !m.is_finite()) {
                return Err("'mean' must hold finite values".to_string());
            }
            Ok(())
        }
        (_, _, None) => Err("'mean' and 'mean_count' need 'mean_axis'".to_string()),
        _ => Err("'mean' and 'mean_count' must be given together".to_string()),
    }
}

/// `histogram`: a rank-1 i64 dense attribute of non-negative counts, with
/// `bins` entries when `bins` is given.
fn check_histogram(ctx: &Context, attr: Attribute, bins: Option<i64>) -> Result<(), String> {
    let bad =
        || format!("'histogram' must be a dense<...> : tensor<Bxi64> of counts, got {}", describe(ctx, attr));
    let d = dense(ctx, attr).ok_or_else(bad)?;
    let is_i64 = matches!(ctx.type_data(ctx.element_type(d.ty)), TypeData::Int(i) if i.width == 64);
    let shape = ctx.tensor_shape(d.ty).unwrap_or(&[]);
    if !is_i64 || shape.len() != 1 {
        return Err(bad());
    }
    if let Some(b) = bins {
        if shape[0] != b {
            return Err(format!("'histogram' has {} bins but 'bins' is {b}", shape[0]));
        }
    }
    let counts = dense_values_i128(ctx, d).ok_or_else(bad)?;
    if let Some(c) = counts.iter().find(|&&c| c < 0) {
        return Err(format!("'histogram' counts must be at least 0, got {c}"));
    }
    Ok(())
}
