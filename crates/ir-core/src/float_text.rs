//! Float literals that round-trip bit for bit.
//!
//! Finite values print as the shortest decimal that reads back to the same value
//! of their own type (`0.1`, `1e-7`, `-0.0`); infinities as `inf` / `-inf`; the
//! canonical quiet NaN of each type as `nan`; any other NaN (sign, payload) as its
//! raw bits in hex (`0x7FC00001`), which the parser reads back as bits when the
//! literal's type is a float type. f16 and bf16 values are exact in f32, so they
//! print as the shortest f32 literal of their value and read back through f32
//! without loss; a decimal written by hand for an f16/bf16 is rounded to f32 first,
//! then to the 16-bit type (which may differ from direct rounding by one unit in
//! the last place for values exactly between two 16-bit floats).

use crate::types::FloatKind;

/// The canonical quiet NaN bits of a float kind.
pub fn canonical_nan_bits(kind: FloatKind) -> u64 {
    match kind {
        FloatKind::F16 => 0x7E00,
        FloatKind::BF16 => 0x7FC0,
        FloatKind::F32 => 0x7FC0_0000,
        FloatKind::F64 => 0x7FF8_0000_0000_0000,
    }
}

/// Widens raw bits of `kind` to f64 (exactly: every value of every kind is an f64).
pub fn bits_to_f64(bits: u64, kind: FloatKind) -> f64 {
    match kind {
        FloatKind::F16 => half::f16::from_bits(bits as u16).to_f64(),
        FloatKind::BF16 => half::bf16::from_bits(bits as u16).to_f64(),
        FloatKind::F32 => f32::from_bits(bits as u32) as f64,
        FloatKind::F64 => f64::from_bits(bits),
    }
}

/// Rounds `value` to `kind` (to nearest, ties to even) and returns its raw bits.
pub fn f64_to_bits(value: f64, kind: FloatKind) -> u64 {
    match kind {
        // Not `half`'s `from_f64`: it drops the low 32 bits of the f64 mantissa
        // before rounding, so a value just above a midpoint rounds as a tie.
        // Rounding to f32 to odd keeps that information (f32 has more than two
        // bits beyond either 16-bit type), and the f32 → 16-bit step is exact RNE.
        FloatKind::F16 => half::f16::from_f32(f64_to_f32_odd(value)).to_bits() as u64,
        FloatKind::BF16 => half::bf16::from_f32(f64_to_f32_odd(value)).to_bits() as u64,
        FloatKind::F32 => (value as f32).to_bits() as u64,
        FloatKind::F64 => value.to_bits(),
    }
}

/// `value` rounded to f32 to odd: exact values stay, any other becomes the
/// neighbour toward zero with its last mantissa bit set (the largest finite
/// f32 beyond it). A later rounding to a type at least two bits narrower is
/// then the correct rounding of `value` itself.
fn f64_to_f32_odd(value: f64) -> f32 {
    let nearest = value as f32;
    if nearest.is_nan() || f64::from(nearest) == value {
        return nearest;
    }
    if nearest.is_infinite() {
        return f32::MAX.copysign(nearest);
    }
    let mut bits = nearest.to_bits();
    if f64::from(nearest).abs() > value.abs() {
        bits -= 1; // one step toward zero (the sign bit is apart)
    }
    f32::from_bits(bits | 1)
}

/// Appends the literal for raw bits of `kind` (see the module docs).
pub fn write_float(out: &mut String, bits: u64, kind: FloatKind) {
    use std::fmt::Write;
    let value = bits_to_f64(bits, kind);
    if value.is_nan() {
        if bits == canonical_nan_bits(kind) {
            out.push_str("nan");
        } else {
            let digits = kind.bits() as usize / 4;
            let _ = write!(out, "0x{bits:0digits$X}");
        }
    } else if value.is_infinite() {
        out.push_str(if value < 0.0 { "-inf" } else { "inf" });
    } else {
        let start = out.len();
        match kind {
            FloatKind::F64 => {
                let _ = write!(out, "{value:?}");
            }
            _ => {
                let _ = write!(out, "{:?}", value as f32);
            }
        }
        // Debug output is `1.0`, `1e-7` or `1.5e20`: always a float literal.
        debug_assert!(out[start..].contains(['.', 'e', 'E']));
    }
}

/// Parses a decimal float literal (`1.5`, `-2e-3`, `inf`, `-inf`, `nan`) as `kind`
/// and returns its raw bits, or `None` if the text is not a float literal.
pub fn parse_decimal(text: &str, kind: FloatKind) -> Option<u64> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let special = match body {
        "inf" => Some(f64::INFINITY),
        "nan" => Some(f64::NAN),
        _ => None,
    };
    if let Some(v) = special {
        if v.is_nan() {
            let bits = canonical_nan_bits(kind);
            let sign = 1u64 << (kind.bits() - 1);
            return Some(if negative { bits | sign } else { bits });
        }
        return Some(f64_to_bits(if negative { -v } else { v }, kind));
    }
    if body.is_empty()
        || !body.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
    {
        return None;
    }
    match kind {
        FloatKind::F64 => text.parse::<f64>().ok().map(f64::to_bits),
        FloatKind::F32 => text.parse::<f32>().ok().map(|v| v.to_bits() as u64),
        FloatKind::F16 => text.parse::<f32>().ok().map(|v| half::f16::from_f32(v).to_bits() as u64),
        FloatKind::BF16 => text.parse::<f32>().ok().map(|v| half::bf16::from_f32(v).to_bits() as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bit_rounding_sees_every_f64_bit() {
        // Just above the midpoint between two 16-bit values, by less than the
        // f64 bits `half::from_f64` drops: rounds up, not to even.
        let bf16 = 2f64.powi(40) + 2f64.powi(32) + 2f64.powi(15);
        assert_eq!(
            bits_to_f64(f64_to_bits(bf16, FloatKind::BF16), FloatKind::BF16),
            2f64.powi(40) + 2f64.powi(33)
        );
        let f16 = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(bits_to_f64(f64_to_bits(f16, FloatKind::F16), FloatKind::F16), 1.0 + 2f64.powi(-10));
        // Ties still go to even, below-midpoint values down, and signs, zeros,
        // subnormals, overflow and NaN come through.
        for (v, want) in [
            (1.0 + 2f64.powi(-11), 1.0),
            (1.0 + 3.0 * 2f64.powi(-11), 1.0 + 2.0 * 2f64.powi(-10)),
            (1.0 + 2f64.powi(-11) - 2f64.powi(-40), 1.0),
            (-(1.0 + 2f64.powi(-11) + 2f64.powi(-40)), -(1.0 + 2f64.powi(-10))),
            (2f64.powi(-25) + 2f64.powi(-60), 2f64.powi(-24)),
            (2f64.powi(-25), 0.0),
            (65520.0, f64::INFINITY),
            (65519.99, 65504.0),
            (1e300, f64::INFINITY),
        ] {
            assert_eq!(bits_to_f64(f64_to_bits(v, FloatKind::F16), FloatKind::F16), want, "f16 of {v:e}");
        }
        assert!(bits_to_f64(f64_to_bits(-0.0, FloatKind::F16), FloatKind::F16).is_sign_negative());
        assert!(bits_to_f64(f64_to_bits(f64::NAN, FloatKind::BF16), FloatKind::BF16).is_nan());
        let bf16_max = f64::from(f32::from_bits(0x7F7F_0000));
        assert_eq!(bits_to_f64(f64_to_bits(f64::MAX, FloatKind::BF16), FloatKind::BF16), f64::INFINITY);
        assert_eq!(bits_to_f64(f64_to_bits(bf16_max, FloatKind::BF16), FloatKind::BF16), bf16_max);
        // bf16 subnormals: 2^-133 is the smallest; just above half of it rounds up.
        let tiny = 2f64.powi(-134) + 2f64.powi(-170);
        assert_eq!(bits_to_f64(f64_to_bits(tiny, FloatKind::BF16), FloatKind::BF16), 2f64.powi(-133));
    }

    fn round_trip(bits: u64, kind: FloatKind) {
        let mut s = String::new();
        write_float(&mut s, bits, kind);
        let back = if let Some(hex) = s.strip_prefix("0x") {
            u64::from_str_radix(hex, 16).unwrap()
        } else {
            parse_decimal(&s, kind).unwrap()
        };
        assert_eq!(back, bits, "{kind:?} {bits:#x} printed as {s}");
    }

    #[test]
    fn specials_round_trip_bit_identically() {
        for kind in [FloatKind::F16, FloatKind::BF16, FloatKind::F32, FloatKind::F64] {
            let w = kind.bits();
            let sign = 1u64 << (w - 1);
            let exp_all_ones = match kind {
                FloatKind::F16 => 0x7C00,
                FloatKind::BF16 => 0x7F80,
                FloatKind::F32 => 0x7F80_0000,
                FloatKind::F64 => 0x7FF0_0000_0000_0000,
            };
            for bits in [
                0,
                sign,
                exp_all_ones,
                exp_all_ones | sign,
                canonical_nan_bits(kind),
                canonical_nan_bits(kind) | sign,
                exp_all_ones | 1,
                1,
                sign | 1,
            ] {
                round_trip(bits, kind);
            }
        }
    }

    #[test]
    fn every_f16_and_bf16_round_trips() {
        for bits in 0..=u16::MAX as u64 {
            round_trip(bits, FloatKind::F16);
            round_trip(bits, FloatKind::BF16);
        }
    }

    #[test]
    fn f32_and_f64_samples_round_trip() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            round_trip(x & 0xFFFF_FFFF, FloatKind::F32);
            round_trip(x, FloatKind::F64);
        }
    }

    #[test]
    fn literal_forms() {
        let mut s = String::new();
        write_float(&mut s, 0.1f32.to_bits() as u64, FloatKind::F32);
        assert_eq!(s, "0.1");
        s.clear();
        write_float(&mut s, f64::INFINITY.to_bits(), FloatKind::F64);
        assert_eq!(s, "inf");
        s.clear();
        write_float(&mut s, 0x7FC0_0001, FloatKind::F32);
        assert_eq!(s, "0x7FC00001");
        assert_eq!(parse_decimal("abc", FloatKind::F32), None);
    }
}
