//! The arithmetic of `docs/quant-semantics.md`, exactly: float quantize and
//! dequantize (§3), fixed-point multipliers (§4.2), the single rounding shift
//! `R(x, s, mode)` (§4.3), requantization of one value (§4.4) and the shared-shift
//! two-term sum of `qnn.add` (§7.1).
//!
//! The interpreter and every backend build on these functions or match them bit
//! for bit; the tests at the bottom hold every worked example of the page and
//! compare each integer function against an independent exact rational
//! reference on random inputs.
//!
//! Invariants: nothing here panics, for any input. Integer work is done in
//! `i128`, so no intermediate wraps (except [`wrap32`], which the conv and dense
//! accumulators ask for); results that leave `i64` saturate, which never changes
//! a result after the final clamp to a storage range of at most 32 bits.

use std::fmt;

/// How [`rounding_shift`] breaks ties (the `rounding` attribute of the ops that
/// requantize).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub enum Rounding {
    /// Ties go away from zero (`2.5 → 3`, `−2.5 → −3`). The default.
    #[default]
    HalfAwayFromZero,
    /// Ties go to the even integer (`2.5 → 2`, `3.5 → 4`).
    HalfToEven,
    /// Ties go toward +∞ (`2.5 → 3`, `−2.5 → −2`).
    HalfUp,
}

impl Rounding {
    /// The name of the attribute that selects the mode.
    pub const ATTR: &'static str = "rounding";
    /// Every mode's attribute value, default first.
    pub const NAMES: [&'static str; 3] = ["half_away_from_zero", "half_to_even", "half_up"];

    /// The mode an attribute value names.
    pub fn parse(name: &str) -> Option<Rounding> {
        match name {
            "half_away_from_zero" => Some(Rounding::HalfAwayFromZero),
            "half_to_even" => Some(Rounding::HalfToEven),
            "half_up" => Some(Rounding::HalfUp),
            _ => None,
        }
    }

    /// The attribute value naming this mode.
    pub fn name(self) -> &'static str {
        match self {
            Rounding::HalfAwayFromZero => "half_away_from_zero",
            Rounding::HalfToEven => "half_to_even",
            Rounding::HalfUp => "half_up",
        }
    }
}

impl fmt::Display for Rounding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// ---- float quantize / dequantize (§3) ---------------------------------------

/// A scale as quantize and dequantize use it: rounded to the nearest f32.
pub fn scale_f32(scale: f64) -> f32 {
    scale as f32
}

/// `quantize` of one f32 value (§3.1): `clamp(rne(x ⊘ scale) + zero_point,
/// qmin, qmax)` with an f32 division; NaN gives `zero_point` (clamped), ±inf
/// saturate. f16 and bf16 inputs are widened to f32 first (exactly).
pub fn quantize_f32(x: f32, scale: f32, zero_point: i64, qmin: i64, qmax: i64) -> i64 {
    if x.is_nan() {
        return zero_point.clamp(qmin, qmax.max(qmin));
    }
    let r = round_half_to_even(x / scale);
    // `as` saturates (±inf, huge values); the clamp below gives the same end
    // of the storage range as the exact value would.
    saturate(r as i64 as i128 + zero_point as i128, qmin, qmax)
}

/// `x` rounded to the nearest integer, ties to even, as `f32::round_ties_even`
/// (up to the sign of a zero result), in two additions: below 2^22 in
/// magnitude, `x + 1.5·2^23` has no fraction bits left, so the addition itself
/// rounds `x` to nearest even and subtracting 1.5·2^23 back is exact. Larger
/// magnitudes (values far outside any storage range) and NaN use the library
/// rounding. Baseline x86-64 has no rounding instruction, and this is the
/// inner step of every quantize.
#[inline]
pub fn round_half_to_even(x: f32) -> f32 {
    const SHIFTER: f32 = 12_582_912.0; // 1.5 · 2^23
    if x.abs() < 4_194_304.0 {
        (x + SHIFTER) - SHIFTER
    } else {
        x.round_ties_even()
    }
}

/// `dequantize` of one stored value to f32 (§3.2): `f32(q − zero_point) ⊗ scale`.
pub fn dequantize_f32(q: i64, zero_point: i64, scale: f32) -> f32 {
    // Integer to float `as` rounds to nearest, ties to even, from i64 as from i128.
    let v = match q.checked_sub(zero_point) {
        Some(v) => v as f32,
        None => (q as i128 - zero_point as i128) as f32,
    };
    v * scale
}

/// `fake_quant` of one f32 value (§3.4): dequantize(quantize(x)).
pub fn fake_quant_f32(x: f32, scale: f32, zero_point: i64, qmin: i64, qmax: i64) -> f32 {
    dequantize_f32(quantize_f32(x, scale, zero_point, qmin, qmax), zero_point, scale)
}

// ---- integers -----------------------------------------------------------------

/// `clamp(v, qmin, qmax)` as an `i64` (an empty range `qmin > qmax` gives `qmin`).
pub fn saturate(v: i128, qmin: i64, qmax: i64) -> i64 {
    let hi = qmax.max(qmin);
    v.clamp(qmin as i128, hi as i128) as i64
}

/// `clamp(max(v, zero_point), qmin, qmax)`: the output step of the relu forms (§6).
pub fn saturate_relu(v: i128, zero_point: i64, qmin: i64, qmax: i64) -> i64 {
    saturate(v.max(zero_point as i128), qmin, qmax)
}

/// Two's complement i32 wrapping of an exact integer (the conv and dense
/// accumulators, §6).
pub fn wrap32(v: i128) -> i32 {
    v as i32
}

/// Saturates an `i128` to the `i64` range.
fn clamp_i64(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

// ---- multipliers (§4.2) ---------------------------------------------------------

/// `real = mantissa × 2^(exponent − 53)` with `mantissa ∈ [2^52, 2^53)`, for a
/// finite positive f64 (subnormals are normalized).
fn decompose(real: f64) -> Option<(u64, i32)> {
    if !real.is_finite() || real <= 0.0 {
        return None;
    }
    let bits = real.to_bits();
    let biased = ((bits >> 52) & 0x7FF) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mut mantissa, mut exponent) = if biased == 0 {
        // Subnormal: value = fraction × 2^−1074.
        (fraction, -1074 + 53)
    } else {
        (fraction | (1u64 << 52), biased - 1022)
    };
    // Here real = mantissa × 2^(exponent − 53) holds; normalize the mantissa.
    while mantissa < (1u64 << 52) {
        mantissa <<= 1;
        exponent -= 1;
    }
    Some((mantissa, exponent))
}

/// The fixed-point form of a real multiplier `M > 0` (§4.2): `(m, n)` with
/// `M ≈ m × 2^(−31−n)` and `2^30 ≤ m < 2^31`.
///
/// `frexp(M) = (f, e)`; `m = round_half_away_from_zero(f × 2^31)`; if that is
/// `2^31`, then `m = 2^30` and `e + 1`; `n = −e`. `M` that is NaN, infinite or
/// not positive is an error.
///
/// ```
/// use qopt_dialect_qnn::fixed_point::quantize_multiplier;
/// assert_eq!(quantize_multiplier(2.5), Ok((1342177280, -2)));
/// assert_eq!(quantize_multiplier(0.5), Ok((1 << 30, 0)));
/// assert!(quantize_multiplier(0.0).is_err());
/// ```
pub fn quantize_multiplier(real: f64) -> Result<(i32, i32), String> {
    let (mantissa, e) =
        decompose(real).ok_or_else(|| format!("multiplier {real} is not a positive finite number"))?;
    // frexp's f = mantissa × 2^−53, so f × 2^31 = mantissa × 2^−22 exactly; round
    // half away from zero (up, since it is positive) in integers.
    let mut m = (mantissa + (1 << 21)) >> 22;
    let mut e = e;
    if m == 1 << 31 {
        m = 1 << 30;
        e += 1;
    }
    Ok((m as i32, -e))
}

/// `round_half_away_from_zero(M × 2^(31 + shift))` (§7.1): a multiplier at a
/// shift chosen for another value. The result lies in `[0, 2^31)` or it is an
/// error (the shift is too small for `M`).
pub fn multiplier_at_shift(real: f64, shift: i32) -> Result<i32, String> {
    let (mantissa, e) =
        decompose(real).ok_or_else(|| format!("multiplier {real} is not a positive finite number"))?;
    // M × 2^(31+shift) = mantissa × 2^t.
    let t = e as i64 - 22 + shift as i64;
    let too_big = || format!("multiplier {real} does not fit 31 bits at shift {shift}");
    let m: u128 = if t >= 0 {
        if t > 40 {
            return Err(too_big());
        }
        (mantissa as u128) << t
    } else if t < -100 {
        0
    } else {
        let down = (-t) as u32;
        ((mantissa as u128) + (1u128 << (down - 1))) >> down
    };
    if m >= 1u128 << 31 {
        return Err(too_big());
    }
    Ok(m as i32)
}

/// The multipliers of a two-term sum with one shared shift (§7.1, `qnn.add`):
/// `(m_a, m_b, n)` where `n` is the shift of `max(M_a, M_b)` and each `m` is
/// `round_half_away_from_zero(M × 2^(31 + n))`.
pub fn shared_multipliers(real_a: f64, real_b: f64) -> Result<(i32, i32, i32), String> {
    let big = if real_a >= real_b { real_a } else { real_b };
    let (_, shift) = quantize_multiplier(big)?;
    Ok((multiplier_at_shift(real_a, shift)?, multiplier_at_shift(real_b, shift)?, shift))
}

// ---- the rounding shift (§4.3) ----------------------------------------------------

/// `R(x, s, mode)` (§4.3): for `s ≤ 0`, `x × 2^(−s)` (saturating at the `i128`
/// range); for `s > 0`, `x / 2^s` rounded once to an integer, ties broken by
/// `mode`. Exact for every `x` and `s`.
pub fn rounding_shift(x: i128, s: i64, mode: Rounding) -> i128 {
    if s <= 0 {
        if x == 0 {
            return 0;
        }
        let up = s.unsigned_abs();
        let saturated = if x > 0 { i128::MAX } else { i128::MIN };
        if up >= 127 {
            return saturated;
        }
        return x.checked_mul(1i128 << up).unwrap_or(saturated);
    }
    if s >= 129 {
        // |x| < 2^127 ≤ 2^(s−2): |x / 2^s| < 1/4, which every mode rounds to 0.
        return 0;
    }
    let s = s as u32;
    // x = q·2^s + r with q = floor(x / 2^s) and 0 ≤ r < 2^s.
    let (q, r): (i128, u128) = if s == 128 {
        (if x < 0 { -1 } else { 0 }, x as u128)
    } else {
        (x >> s, (x as u128) & ((1u128 << s) - 1))
    };
    let half = 1u128 << (s - 1);
    let up = match r.cmp(&half) {
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => match mode {
            Rounding::HalfAwayFromZero => x >= 0,
            Rounding::HalfToEven => q & 1 != 0,
            Rounding::HalfUp => true,
        },
    };
    // q ≤ 2^126 here (s ≥ 1), so q + 1 cannot overflow.
    if up {
        q + 1
    } else {
        q
    }
}

/// `requantize(v; m, n, mode) = R(v × m, 31 + n, mode)` (§4.4), saturated to
/// the `i64` range. Add the output zero point and [`saturate`] afterwards.
///
/// ```
/// use qopt_dialect_qnn::fixed_point::{quantize_multiplier, requantize, Rounding};
/// let (m, n) = quantize_multiplier(2.5).unwrap();
/// assert_eq!(requantize(5, m, n, Rounding::HalfAwayFromZero), 13);
/// assert_eq!(requantize(5, m, n, Rounding::HalfToEven), 12);
/// assert_eq!(requantize(-5, m, n, Rounding::HalfUp), -12);
/// ```
pub fn requantize(value: i64, multiplier: i32, shift: i32, rounding: Rounding) -> i64 {
    let x = value as i128 * multiplier as i128;
    clamp_i64(rounding_shift(x, 31 + shift as i64, rounding))
}

/// The shared-shift sum of `qnn.add` (§7.1): `R(v_a × m_a + v_b × m_b, 31 + n,
/// mode)`, saturated to `i64`.
pub fn requantize_sum(
    value_a: i64,
    multiplier_a: i32,
    value_b: i64,
    multiplier_b: i32,
    shift: i32,
    rounding: Rounding,
) -> i64 {
    let x = value_a as i128 * multiplier_a as i128 + value_b as i128 * multiplier_b as i128;
    clamp_i64(rounding_shift(x, 31 + shift as i64, rounding))
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_half_to_even_matches_the_library() {
        use super::round_half_to_even;
        let edges = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            0.49999997,
            4_194_303.5,
            4_194_304.0,
            4_194_304.5,
            8_388_607.5,
            8_388_608.0,
            1e30,
            -1e30,
            f32::MIN_POSITIVE,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let random = (0..200_000).map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            f32::from_bits((state >> 32) as u32)
        });
        for x in edges.into_iter().chain(random).filter(|x| !x.is_nan()) {
            let (fast, library) = (round_half_to_even(x), x.round_ties_even());
            assert!(fast == library, "{x}: {fast} vs {library}");
        }
    }

    use super::*;
    use proptest::prelude::*;

    const MODES: [Rounding; 3] = [Rounding::HalfAwayFromZero, Rounding::HalfToEven, Rounding::HalfUp];

    /// Exact reference for `R(x, s, mode)`, written independently of
    /// [`rounding_shift`]: compares twice the remainder of a Euclidean division
    /// with the divisor (only for `1 ≤ s ≤ 125`, where `2^s` and `2r` fit).
    fn reference_round(x: i128, s: u32, mode: Rounding) -> i128 {
        let d = 1i128 << s;
        let q = x.div_euclid(d);
        let r = x.rem_euclid(d);
        match (2 * r).cmp(&d) {
            std::cmp::Ordering::Less => q,
            std::cmp::Ordering::Greater => q + 1,
            std::cmp::Ordering::Equal => {
                // x / d = q + 1/2 exactly.
                let candidates = (q, q + 1);
                match mode {
                    Rounding::HalfUp => candidates.1,
                    Rounding::HalfToEven => {
                        if q % 2 == 0 {
                            candidates.0
                        } else {
                            candidates.1
                        }
                    }
                    Rounding::HalfAwayFromZero => {
                        if 2 * q + 1 > 0 {
                            candidates.1
                        } else {
                            candidates.0
                        }
                    }
                }
            }
        }
    }

    /// The branch-free forms of §12 of the semantics page, on i128.
    fn branch_free(x: i128, s: u32, mode: Rounding) -> i128 {
        let h = 1i128 << (s - 1);
        match mode {
            Rounding::HalfUp => (x + h) >> s,
            Rounding::HalfAwayFromZero => (x + h - i128::from(x < 0)) >> s,
            Rounding::HalfToEven => (x + h - 1 + ((x >> s) & 1)) >> s,
        }
    }

    #[test]
    fn rounding_names() {
        for name in Rounding::NAMES {
            assert_eq!(Rounding::parse(name).map(Rounding::name), Some(name));
        }
        assert_eq!(Rounding::default().name(), Rounding::NAMES[0]);
        assert_eq!(Rounding::parse("nearest"), None);
        assert_eq!(Rounding::HalfUp.to_string(), "half_up");
    }

    #[test]
    fn quantize_examples() {
        // §3.1: !qnn.uniform<i8:f32, 0.5:-3>.
        let q = |x: f32| quantize_f32(x, 0.5, -3, -128, 127);
        assert_eq!(q(1.25), -1);
        assert_eq!(q(1.75), 1);
        assert_eq!(q(-0.25), -3);
        assert_eq!(q(100.0), 127);
        assert_eq!(q(-70.0), -128);
        assert_eq!(q(f32::NAN), -3);
        assert_eq!(q(-f32::NAN), -3);
        assert_eq!(q(f32::INFINITY), 127);
        assert_eq!(q(f32::NEG_INFINITY), -128);
        assert_eq!(q(-0.0), -3);
        assert_eq!(q(f32::MAX), 127);
        // Narrowed range.
        assert_eq!(quantize_f32(-70.0, 0.5, 0, -127, 127), -127);
        // The f32 division matters: 0.35 / 0.1 rounds to 3.5 in f32, a tie.
        let tenth = scale_f32(0.1);
        assert_eq!(quantize_f32(0.35, tenth, 0, -128, 127), 4);
        assert_eq!(quantize_f32(0.25, tenth, 0, -128, 127), 2);
        // A quotient that overflows f32 saturates.
        assert_eq!(quantize_f32(3.0e38, 1.0e-10, 0, 0, 255), 255);
        assert_eq!(quantize_f32(-3.0e38, 1.0e-10, 0, 0, 255), 0);
        // 32-bit storage: the sum r + zp is exact.
        assert_eq!(quantize_f32(3.0e9, 1.0, 0, -(1 << 31), (1 << 31) - 1), (1 << 31) - 1);
        assert_eq!(quantize_f32(3.0e9, 1.0, -(1 << 31), -(1 << 31), (1 << 31) - 1), 852_516_352);
        assert_eq!(quantize_f32(1.0e9, 1.0, 1 << 30, 0, u32::MAX as i64), 2_073_741_824);
    }

    #[test]
    fn dequantize_examples() {
        assert_eq!(dequantize_f32(7, -3, 0.5), 5.0);
        assert_eq!(dequantize_f32(-128, -3, 0.5), -62.5);
        // §3.3, row 0 with scale 0.1.
        let tenth = scale_f32(0.1);
        assert_eq!(dequantize_f32(4, 0, tenth), 0.4f32);
        assert_eq!(dequantize_f32(127, 0, tenth), 12.7f32);
        assert_eq!(dequantize_f32(0, 0, tenth), 0.0);
        assert_eq!(dequantize_f32(1, 1, 0.25), 0.0);
        assert_eq!(dequantize_f32(5, 1, 0.25), 1.0);
        // Overflow to inf with a huge scale.
        assert_eq!(dequantize_f32(255, 0, f32::MAX), f32::INFINITY);
        assert_eq!(fake_quant_f32(0.35, tenth, 0, -128, 127), 0.4f32);
        assert_eq!(fake_quant_f32(f32::NAN, 0.5, -3, -128, 127), 0.0);
        assert_eq!(fake_quant_f32(f32::INFINITY, 0.5, -3, -128, 127), 65.0);
    }

    #[test]
    fn per_axis_example() {
        // §3.3: rows use (0.1, 0) and (0.25, 1).
        let params = [(scale_f32(0.1), 0i64), (0.25f32, 1i64)];
        let x = [[0.35f32, -0.05, 20.0], [0.25, -0.125, 1.0]];
        let expect = [[4i64, 0, 127], [2, 1, 5]];
        for (row, (s, zp)) in params.iter().enumerate() {
            for col in 0..3 {
                assert_eq!(quantize_f32(x[row][col], *s, *zp, -128, 127), expect[row][col]);
            }
        }
    }

    #[test]
    fn multiplier_examples() {
        // §4.2 table.
        assert_eq!(quantize_multiplier(2.5), Ok((1342177280, -2)));
        assert_eq!(quantize_multiplier(0.5), Ok((1073741824, 0)));
        assert_eq!(quantize_multiplier(1.0), Ok((1073741824, -1)));
        assert_eq!(quantize_multiplier(0.0235 / 0.1), Ok((2018634629, 2)));
        // The carry case.
        assert_eq!(quantize_multiplier(1.0 - 2f64.powi(-40)), Ok((1073741824, -1)));
        assert!(quantize_multiplier(0.0).is_err());
        assert!(quantize_multiplier(-1.0).is_err());
        assert!(quantize_multiplier(f64::NAN).is_err());
        assert!(quantize_multiplier(f64::INFINITY).is_err());
        // Extremes of the f64 range stay exact.
        assert_eq!(quantize_multiplier(f64::MAX), Ok((1 << 30, -1025)));
        assert_eq!(quantize_multiplier(f64::MIN_POSITIVE), Ok((1 << 30, 1021)));
        assert_eq!(quantize_multiplier(5e-324), Ok((1 << 30, 1073)));
        assert_eq!(quantize_multiplier(3.0 * 5e-324), Ok((3 << 29, 1072)));
    }

    #[test]
    fn requantize_examples() {
        // §4.4 table, M = 2.5.
        let (m, n) = (1342177280, -2);
        let table = [(5, [13, 12, 13]), (-5, [-13, -12, -12]), (7, [18, 18, 18]), (3, [8, 8, 8])];
        for (v, want) in table {
            for (mode, w) in MODES.iter().zip(want) {
                assert_eq!(requantize(v, m, n, *mode), w, "v = {v}, {mode}");
            }
        }
        // Ties are decided on the fixed-point product: 100 × 0.235 is 23.5 in
        // reals but 23.4999999986 in fixed point.
        let (m, n) = quantize_multiplier(0.0235 / 0.1).unwrap();
        for mode in MODES {
            assert_eq!(requantize(100, m, n, mode), 23);
        }
        // §5: input (0.5, 2) to output (0.2, 10).
        let (m, n) = quantize_multiplier(0.5 / 0.2).unwrap();
        let out = |q: i64| saturate(requantize(q - 2, m, n, Rounding::default()) as i128 + 10, -128, 127);
        assert_eq!(out(7), 23);
        assert_eq!(out(-3), -3);
        assert_eq!(out(127), 127);
        assert_eq!(out(-128), -128);
        assert_eq!(requantize(125, m, n, Rounding::default()), 313);
        assert_eq!(requantize(-130, m, n, Rounding::default()), -325);
        // §5 per-axis example: rows with M = 0.5 and M = 2.
        let (m0, n0) = quantize_multiplier(0.1 / 0.2).unwrap();
        let (m1, n1) = quantize_multiplier(0.4 / 0.2).unwrap();
        let row0: Vec<i64> = [3, -3, 7].iter().map(|&q| requantize(q, m0, n0, Rounding::default())).collect();
        let row1: Vec<i64> =
            [1, -2, 5].iter().map(|&q| requantize(q + 1, m1, n1, Rounding::default())).collect();
        assert_eq!(row0, [2, -2, 4]);
        assert_eq!(row1, [4, -2, 12]);
        // Same scale: exact identity.
        let (m, n) = quantize_multiplier(1.0).unwrap();
        for v in [-(1i64 << 32), -129, -1, 0, 1, 77, 1 << 32] {
            for mode in MODES {
                assert_eq!(requantize(v, m, n, mode), v);
            }
        }
    }

    #[test]
    fn dense_example() {
        // §6: x (0.5, 128) u8, w per axis {0.25, 0.125}, b = [10, -4], out (0.25, -10).
        let x = [130i64, 126, 128];
        let w = [[4i64, 1, 9], [-8, 8, 3]];
        let b = [10i64, -4];
        let sw = [0.25f64, 0.125];
        let mut plain = Vec::new();
        let mut relu = Vec::new();
        for c in 0..2 {
            let acc: i128 =
                x.iter().zip(w[c]).map(|(&xv, wv)| ((xv - 128) * wv) as i128).sum::<i128>() + b[c] as i128;
            let acc = wrap32(acc);
            let (m, n) = quantize_multiplier((0.5 * sw[c]) / 0.25).unwrap();
            let y = requantize(acc as i64, m, n, Rounding::default()) as i128 - 10;
            plain.push(saturate(y, -128, 127));
            relu.push(saturate_relu(y, -10, -128, 127));
        }
        assert_eq!(plain, [-2, -19]);
        assert_eq!(relu, [-2, -10]);
    }

    #[test]
    fn add_example() {
        // §7.1: a (0.5, 0), b (0.25, 4), out (1.0, 0).
        let (ma, mb, n) = shared_multipliers(0.5 / 1.0, 0.25 / 1.0).unwrap();
        assert_eq!((ma, mb, n), (1 << 30, 1 << 29, 0));
        let table = [(3, 6, [2, 2, 2]), (5, 4, [3, 2, 3]), (-5, 4, [-3, -2, -2]), (127, 127, [94, 94, 94])];
        for (a, b, want) in table {
            for (mode, w) in MODES.iter().zip(want) {
                assert_eq!(requantize_sum(a, ma, b - 4, mb, n, *mode), w, "a = {a}, b = {b}, {mode}");
            }
        }
        // The larger multiplier is the ordinary one, even in the carry case.
        let big = 1.0 - 2f64.powi(-40);
        let (m_big, n_big) = quantize_multiplier(big).unwrap();
        let (ma, mb, n) = shared_multipliers(0.25, big).unwrap();
        assert_eq!((mb, n), (m_big, n_big));
        assert_eq!(ma, 1 << 28);
        // A tiny second scale rounds to 0.
        assert_eq!(shared_multipliers(1.0, 1e-12), Ok((1 << 30, 0, -1)));
    }

    #[test]
    fn mul_example() {
        // §7.2: M = 0.25 / 0.1 = 2.5.
        let (m, n) = quantize_multiplier((0.5 * 0.5) / 0.1).unwrap();
        assert_eq!((m, n), (1342177280, -2));
        assert_eq!(requantize(15, m, n, Rounding::HalfAwayFromZero), 38);
        assert_eq!(requantize(15, m, n, Rounding::HalfToEven), 38);
        assert_eq!(requantize(1, m, n, Rounding::HalfAwayFromZero), 3);
        assert_eq!(requantize(1, m, n, Rounding::HalfToEven), 2);
    }

    #[test]
    fn rounding_shift_edges() {
        for mode in MODES {
            assert_eq!(rounding_shift(5, 0, mode), 5);
            assert_eq!(rounding_shift(5, -3, mode), 40);
            assert_eq!(rounding_shift(-5, -3, mode), -40);
            assert_eq!(rounding_shift(1, -127, mode), i128::MAX);
            assert_eq!(rounding_shift(-1, -200, mode), i128::MIN);
            assert_eq!(rounding_shift(0, -200, mode), 0);
            assert_eq!(rounding_shift(i128::MAX, -1, mode), i128::MAX);
            assert_eq!(rounding_shift(i128::MAX, 200, mode), 0);
            assert_eq!(rounding_shift(i128::MIN, 129, mode), 0);
            assert_eq!(rounding_shift(i128::MAX, 127, mode), 1);
            assert_eq!(rounding_shift(i128::MIN + 1, 127, mode), -1);
        }
        // x = −2^127, s = 128: exactly −0.5.
        assert_eq!(rounding_shift(i128::MIN, 128, Rounding::HalfAwayFromZero), -1);
        assert_eq!(rounding_shift(i128::MIN, 128, Rounding::HalfToEven), 0);
        assert_eq!(rounding_shift(i128::MIN, 128, Rounding::HalfUp), 0);
        assert_eq!(rounding_shift(i128::MIN, 127, Rounding::HalfUp), -1);
        // Requantize saturates to i64 instead of wrapping.
        assert_eq!(requantize(i64::MAX, i32::MAX, -40, Rounding::HalfUp), i64::MAX);
        assert_eq!(requantize(i64::MIN, i32::MAX, i32::MIN, Rounding::HalfUp), i64::MIN);
        assert_eq!(requantize(i64::MIN, i32::MAX, i32::MAX, Rounding::HalfUp), 0);
    }

    #[test]
    fn multiplier_at_shift_edges() {
        assert_eq!(multiplier_at_shift(0.5, 0), Ok(1 << 30));
        assert_eq!(multiplier_at_shift(0.25, 0), Ok(1 << 29));
        assert!(multiplier_at_shift(1.0, 0).is_err());
        assert!(multiplier_at_shift(1e300, 0).is_err());
        assert_eq!(multiplier_at_shift(1e-300, 0), Ok(0));
        assert_eq!(multiplier_at_shift(2f64.powi(-32), 0), Ok(1));
        assert_eq!(multiplier_at_shift(1.5 * 2f64.powi(-32), 0), Ok(1));
        assert_eq!(multiplier_at_shift(2f64.powi(-33), 0), Ok(0));
        assert!(multiplier_at_shift(f64::NAN, 0).is_err());
    }

    /// The folding claim of §10: dequantize then quantize with one f32 type is
    /// the identity for |q − zp| ≤ 2^17 when nothing overflows.
    fn roundtrip_holds(v: i64, scale: f32) -> bool {
        let x = dequantize_f32(v, 0, scale);
        quantize_f32(x, scale, 0, i64::MIN, i64::MAX) == v
    }

    #[test]
    fn narrow_roundtrip_exhaustive_for_some_scales() {
        for scale in [0.1f32, 0.0235, 1.0 / 3.0, 7.0e-30, f32::MIN_POSITIVE, 3.0e33, 0.007_812_5, 123.456] {
            for v in -(1i64 << 17)..=(1 << 17) {
                if (v as f64 * scale as f64).abs() <= f32::MAX as f64 {
                    assert!(roundtrip_holds(v, scale), "v = {v}, scale = {scale}");
                }
            }
        }
    }

    /// A random positive f64 multiplier spread over many binades.
    fn any_multiplier() -> impl Strategy<Value = f64> {
        (1u64..(1 << 52), -80i32..40)
            .prop_map(|(frac, exp)| (1.0 + frac as f64 / (1u64 << 52) as f64) * 2f64.powi(exp))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn rounding_shift_matches_the_rational_reference(x in any::<i128>(), s in 1u32..=125) {
            let x = x >> 3; // keep 2r in range for the reference
            for mode in MODES {
                prop_assert_eq!(rounding_shift(x, s as i64, mode), reference_round(x, s, mode));
            }
        }

        #[test]
        fn branch_free_forms_match(x in -(1i128 << 100)..(1i128 << 100), s in 1u32..=100) {
            for mode in MODES {
                prop_assert_eq!(branch_free(x, s, mode), reference_round(x, s, mode));
            }
        }

        #[test]
        fn ties_round_as_documented(q in -(1i128 << 60)..(1i128 << 60), s in 1u32..=60) {
            // x / 2^s = q + 1/2 exactly.
            let x = q * (1i128 << s) + (1i128 << (s - 1));
            prop_assert_eq!(rounding_shift(x, s as i64, Rounding::HalfUp), q + 1);
            let away = if x > 0 { q + 1 } else { q };
            prop_assert_eq!(rounding_shift(x, s as i64, Rounding::HalfAwayFromZero), away);
            let even = if q % 2 == 0 { q } else { q + 1 };
            prop_assert_eq!(rounding_shift(x, s as i64, Rounding::HalfToEven), even);
            // Symmetry of the default mode.
            prop_assert_eq!(rounding_shift(-x, s as i64, Rounding::HalfAwayFromZero), -away);
        }

        #[test]
        fn multipliers_are_normalized_and_nearest(real in any_multiplier()) {
            let (m, n) = quantize_multiplier(real).unwrap();
            prop_assert!((1 << 30..1i64 << 31).contains(&(m as i64)));
            // |m − M·2^(31+n)| ≤ 1/2, where M·2^(31+n) is exact in f64.
            let scaled = real * 2f64.powi(31 + n);
            prop_assert!((m as f64 - scaled).abs() <= 0.5, "m = {}, scaled = {}", m, scaled);
            prop_assert_eq!(multiplier_at_shift(real, n), Ok(m));
        }

        #[test]
        fn requantize_matches_the_rational_reference(
            v in -(1i64 << 33)..(1i64 << 33),
            real in any_multiplier(),
        ) {
            let (m, n) = quantize_multiplier(real).unwrap();
            let s = 31 + n;
            let x = v as i128 * m as i128;
            for mode in MODES {
                let want = if s <= 0 { x << (-s) } else { reference_round(x, s as u32, mode) };
                let want = want.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
                prop_assert_eq!(requantize(v, m, n, mode), want);
            }
        }

        #[test]
        fn requantize_sum_matches_the_rational_reference(
            a in -(1i64 << 32)..(1i64 << 32),
            b in -(1i64 << 32)..(1i64 << 32),
            ra in any_multiplier(),
            rb in any_multiplier(),
        ) {
            let (ma, mb, n) = shared_multipliers(ra, rb).unwrap();
            prop_assert!(ma >= 0 && mb >= 0);
            let s = 31 + n;
            let x = a as i128 * ma as i128 + b as i128 * mb as i128;
            for mode in MODES {
                let want = if s <= 0 { x << (-s) } else { reference_round(x, s as u32, mode) };
                let want = want.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
                prop_assert_eq!(requantize_sum(a, ma, b, mb, n, mode), want);
            }
        }

        #[test]
        fn quantize_matches_a_wide_reference(x in any::<f32>(), scale in 1.0e-6f32..1.0e6, zp in -128i64..=127) {
            // Reference: the f32 quotient rounded with f64 arithmetic and clamped in i128.
            let t = x / scale;
            let want = if t.is_nan() {
                zp
            } else {
                let r = (t as f64).round_ties_even();
                (r.clamp(-1e30, 1e30) as i128 + zp as i128).clamp(-128, 127) as i64
            };
            prop_assert_eq!(quantize_f32(x, scale, zp, -128, 127), want);
        }

        #[test]
        fn dequantize_then_quantize_is_exact_for_16_bit_storage(v in -(1i64 << 17)..=(1i64 << 17), bits in any::<u32>()) {
            let scale = f32::from_bits(bits & 0x7FFF_FFFF);
            prop_assume!(scale.is_normal());
            prop_assume!((v as f64 * scale as f64).abs() <= f32::MAX as f64);
            prop_assert!(roundtrip_holds(v, scale));
        }
    }
}
