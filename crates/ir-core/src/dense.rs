//! Reading and building dense element attributes ([`DenseElements`]) by element
//! type: the byte layout is described on `DenseElements`.

use crate::attributes::DenseElements;
use crate::context::Context;
use crate::float_text::{bits_to_f64, f64_to_bits};
use crate::types::{FloatKind, Signedness, Type, TypeData, DYNAMIC};
use std::sync::Arc;

/// How one element is stored and read.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ElementKind {
    /// A float of this kind.
    Float(FloatKind),
    /// An integer of `width` bits, signed (signless and index read as signed,
    /// except boolean `i1`) or not.
    Int {
        /// Bits.
        width: u8,
        /// True for signless / index, false for unsigned.
        signed: bool,
    },
}

impl ElementKind {
    /// Storage bytes per element.
    pub fn bytes(self) -> usize {
        match self {
            ElementKind::Float(k) => k.bits() as usize / 8,
            ElementKind::Int { width, .. } => crate::types::storage_bytes_for_int(width),
        }
    }
    /// Smallest and largest integer value (integers only).
    pub fn int_range(self) -> Option<(i128, i128)> {
        match self {
            ElementKind::Int { width, signed: true } => {
                Some((-(1i128 << (width - 1)), (1i128 << (width - 1)) - 1))
            }
            ElementKind::Int { width, signed: false } => Some((0, (1i128 << width) - 1)),
            ElementKind::Float(_) => None,
        }
    }
}

/// How elements of type `elem` are stored; `None` if it cannot be a dense element.
pub fn element_kind(ctx: &Context, elem: Type) -> Option<ElementKind> {
    match ctx.type_data(elem) {
        TypeData::Float(k) => Some(ElementKind::Float(*k)),
        // `i1` is boolean: stored and read as 0 / 1.
        TypeData::Int(i) => Some(ElementKind::Int {
            width: i.width,
            signed: i.signedness == Signedness::Signless && i.width > 1,
        }),
        TypeData::Index => Some(ElementKind::Int { width: 64, signed: true }),
        TypeData::Quant(q) => Some(ElementKind::Int {
            width: q.storage.width,
            signed: q.storage.signedness == Signedness::Signless && q.storage.width > 1,
        }),
        _ => None,
    }
}

/// Number of elements of a statically shaped tensor type (`None` if dynamic,
/// not a tensor, or overflowing).
pub fn static_num_elements(ctx: &Context, ty: Type) -> Option<u64> {
    let shape = ctx.tensor_shape(ty)?;
    shape
        .iter()
        .try_fold(1u64, |acc, &d| if d == DYNAMIC || d < 0 { None } else { acc.checked_mul(d as u64) })
}

/// Appends `value` in `bytes` little-endian bytes (two's complement, truncated).
pub fn encode_int(out: &mut Vec<u8>, value: i128, bytes: usize) {
    out.extend_from_slice(&value.to_le_bytes()[..bytes]);
}

/// Reads an integer of `bytes` little-endian bytes, sign- or zero-extending.
pub fn decode_int(bytes: &[u8], signed: bool) -> i128 {
    let mut buf = [0u8; 16];
    buf[..bytes.len()].copy_from_slice(bytes);
    if signed && bytes.last().is_some_and(|b| b & 0x80 != 0) {
        for b in &mut buf[bytes.len()..] {
            *b = 0xFF;
        }
    }
    i128::from_le_bytes(buf)
}

/// Appends raw float bits of `kind`.
pub fn encode_float_bits(out: &mut Vec<u8>, bits: u64, kind: FloatKind) {
    out.extend_from_slice(&bits.to_le_bytes()[..kind.bits() as usize / 8]);
}

/// Reads raw float bits of `kind`.
pub fn decode_float_bits(bytes: &[u8], _kind: FloatKind) -> u64 {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(buf)
}

impl DenseElements {
    /// Builds a dense attribute of tensor type `ty` from f64 values (rounded to the
    /// element type; integers are rounded half to even and must be in range). One
    /// value makes a splat.
    pub fn from_f64(ctx: &Context, ty: Type, values: &[f64]) -> Result<DenseElements, String> {
        let kind = element_kind(ctx, ctx.element_type(ty)).ok_or("element type cannot hold dense data")?;
        let mut bytes = Vec::with_capacity(values.len() * kind.bytes());
        for &v in values {
            match kind {
                ElementKind::Float(k) => encode_float_bits(&mut bytes, f64_to_bits(v, k), k),
                ElementKind::Int { .. } => {
                    let r = v.round_ties_even();
                    let (lo, hi) = kind.int_range().unwrap_or((0, 0));
                    if !r.is_finite() || (r as i128) < lo || (r as i128) > hi {
                        return Err(format!("value {v} does not fit the element type"));
                    }
                    encode_int(&mut bytes, r as i128, kind.bytes());
                }
            }
        }
        Self::from_bytes(ctx, ty, bytes)
    }

    /// Builds a dense attribute of tensor type `ty` from integers (checked against
    /// the element type's range; floats get the value converted).
    pub fn from_i128(ctx: &Context, ty: Type, values: &[i128]) -> Result<DenseElements, String> {
        let kind = element_kind(ctx, ctx.element_type(ty)).ok_or("element type cannot hold dense data")?;
        let mut bytes = Vec::with_capacity(values.len() * kind.bytes());
        for &v in values {
            match kind {
                ElementKind::Float(k) => encode_float_bits(&mut bytes, f64_to_bits(v as f64, k), k),
                ElementKind::Int { .. } => {
                    let (lo, hi) = kind.int_range().unwrap_or((0, 0));
                    if v < lo || v > hi {
                        return Err(format!("value {v} does not fit the element type"));
                    }
                    encode_int(&mut bytes, v, kind.bytes());
                }
            }
        }
        Self::from_bytes(ctx, ty, bytes)
    }

    /// Wraps raw element bytes (one element = splat, else every element), checking
    /// the length against the type.
    pub fn from_bytes(ctx: &Context, ty: Type, bytes: Vec<u8>) -> Result<DenseElements, String> {
        let kind = element_kind(ctx, ctx.element_type(ty)).ok_or("element type cannot hold dense data")?;
        let n = static_num_elements(ctx, ty).ok_or("dense elements need a statically shaped tensor type")?;
        let count = bytes.len() / kind.bytes();
        if !bytes.len().is_multiple_of(kind.bytes()) || (count as u64 != n && count != 1) {
            return Err(format!(
                "dense data has {} bytes; the type needs {} elements of {} bytes (or one for a splat)",
                bytes.len(),
                n,
                kind.bytes()
            ));
        }
        Ok(DenseElements { ty, splat: count == 1 && n != 1, bytes: Arc::from(bytes) })
    }

    /// Number of stored elements (1 for a splat).
    pub fn stored_len(&self, ctx: &Context) -> usize {
        element_kind(ctx, ctx.element_type(self.ty)).map_or(0, |k| self.bytes.len() / k.bytes())
    }
}

/// Every element as f64 (a splat expands); `None` for non-numeric elements or
/// tensors too large to expand.
pub fn dense_values_f64(ctx: &Context, d: &DenseElements, elem: Type) -> Option<Vec<f64>> {
    let kind = element_kind(ctx, elem)?;
    let n = static_num_elements(ctx, d.ty)? as usize;
    let w = kind.bytes();
    let read = |i: usize| -> f64 {
        let chunk = &d.bytes[i * w..(i + 1) * w];
        match kind {
            ElementKind::Float(k) => bits_to_f64(decode_float_bits(chunk, k), k),
            ElementKind::Int { signed, .. } => decode_int(chunk, signed) as f64,
        }
    };
    if d.splat {
        let v = read(0);
        return Some(vec![v; n]);
    }
    Some((0..n).map(read).collect())
}

/// Every element as an integer (integer element types only; a splat expands).
pub fn dense_values_i128(ctx: &Context, d: &DenseElements) -> Option<Vec<i128>> {
    let kind = element_kind(ctx, ctx.element_type(d.ty))?;
    let ElementKind::Int { signed, .. } = kind else { return None };
    let n = static_num_elements(ctx, d.ty)? as usize;
    let w = kind.bytes();
    let read = |i: usize| decode_int(&d.bytes[i * w..(i + 1) * w], signed);
    if d.splat {
        return Some(vec![read(0); n]);
    }
    let bytes = d.bytes.get(..n.checked_mul(w)?)?;
    // The common widths by fixed-size conversions (weights are megabytes of
    // i8), the rest through `decode_int`.
    Some(match (w, signed) {
        (1, true) => bytes.iter().map(|&b| i128::from(b as i8)).collect(),
        (1, false) => bytes.iter().map(|&b| i128::from(b)).collect(),
        (2, true) => bytes.chunks_exact(2).map(|c| i128::from(i16::from_le_bytes([c[0], c[1]]))).collect(),
        (4, true) => {
            bytes.chunks_exact(4).map(|c| i128::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect()
        }
        _ => (0..n).map(read).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, Signedness};
    use std::sync::Arc;

    /// The width-specialized reads give what `decode_int` gives, element by
    /// element, for every integer width and signedness.
    #[test]
    fn integer_reads_agree_with_decode_int() {
        let mut ctx = Context::new();
        let bytes: Vec<u8> = (0..64u32).map(|i| (i.wrapping_mul(97) ^ 0xA5) as u8).collect();
        for width in [4u8, 8, 16, 32, 64] {
            for signedness in [Signedness::Signless, Signedness::Unsigned] {
                let element = ctx.int_type(width, signedness);
                let kind = element_kind(&ctx, element).unwrap();
                let w = kind.bytes();
                let n = bytes.len() / w;
                let ty = ctx.tensor_type(&[n as i64], element);
                let d = DenseElements { ty, splat: false, bytes: Arc::from(&bytes[..n * w]) };
                let signed = signedness == Signedness::Signless;
                let want: Vec<i128> = bytes[..n * w].chunks_exact(w).map(|c| decode_int(c, signed)).collect();
                assert_eq!(dense_values_i128(&ctx, &d).unwrap(), want, "i{width} {signedness:?}");
            }
        }
    }
}
