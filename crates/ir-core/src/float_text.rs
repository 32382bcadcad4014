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

/// Rounds `value` to `kind` and returns its raw bits.
pub fn f64_to_bits(value: f64, kind: FloatKind) -> u64 {
    match kind {
        FloatKind::F16 => half::f16::from_f64(value).to_bits() as u64,
        FloatKind::BF16 => half::bf16::from_f64(value).to_bits() as u64,
        FloatKind::F32 => (value as f32).to_bits() as u64,
        FloatKind::F64 => value.to_bits(),
    }
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
