//! ONNX constant tensors as element bytes, and ONNX element types as IR types.
//!
//! [`TensorData`] holds a tensor's elements in the byte layout of
//! `DenseElements` (little-endian, each element in its storage width, `bool`
//! one byte), which is also the layout of ONNX `raw_data`: a raw tensor is
//! copied once, a tensor in the typed fields (`float_data`, `int32_data`,
//! ...) is encoded into it. Element counts come from checked products of the
//! dims and must match the data exactly.

use crate::onnx::{data_type as dt, TensorProto};
use qopt_ir_core::{
    bits_to_f64, Attribute, Context, DenseElements, FloatKind, IntType, Signedness, Type, TypeData,
};

/// A constant tensor's shape, element type and element bytes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TensorData {
    /// The ONNX name (initializer or node output).
    pub name: String,
    pub dims: Vec<i64>,
    /// A `TensorProto.DataType` value.
    pub data_type: i32,
    /// Little-endian elements, [`element_bytes`] each.
    pub bytes: Vec<u8>,
}

/// Bytes per element of an ONNX data type the importer reads, `None` for others.
pub(crate) fn element_bytes(data_type: i32) -> Option<usize> {
    match data_type {
        // 4-bit elements are unpacked to one byte each (see `TensorData::read`).
        dt::UINT8 | dt::INT8 | dt::BOOL | dt::UINT4 | dt::INT4 => Some(1),
        dt::UINT16 | dt::INT16 | dt::FLOAT16 | dt::BFLOAT16 => Some(2),
        dt::FLOAT | dt::INT32 | dt::UINT32 => Some(4),
        dt::INT64 | dt::DOUBLE | dt::UINT64 => Some(8),
        _ => None,
    }
}

/// The IR scalar type of an ONNX element type.
pub(crate) fn element_type(ctx: &mut Context, data_type: i32) -> Result<Type, String> {
    let int = |width, signedness| TypeData::Int(IntType { width, signedness });
    let data = match data_type {
        dt::FLOAT => TypeData::Float(FloatKind::F32),
        dt::DOUBLE => TypeData::Float(FloatKind::F64),
        dt::FLOAT16 => TypeData::Float(FloatKind::F16),
        dt::BFLOAT16 => TypeData::Float(FloatKind::BF16),
        dt::INT4 => int(4, Signedness::Signless),
        dt::UINT4 => int(4, Signedness::Unsigned),
        dt::INT8 => int(8, Signedness::Signless),
        dt::INT16 => int(16, Signedness::Signless),
        dt::INT32 => int(32, Signedness::Signless),
        dt::INT64 => int(64, Signedness::Signless),
        dt::UINT8 => int(8, Signedness::Unsigned),
        dt::UINT16 => int(16, Signedness::Unsigned),
        dt::UINT32 => int(32, Signedness::Unsigned),
        dt::UINT64 => int(64, Signedness::Unsigned),
        dt::BOOL => int(1, Signedness::Signless),
        other => return Err(format!("element type {} is not supported", dt::name(other))),
    };
    Ok(ctx.intern_type(data))
}

/// The ONNX element type of IR scalar type `elem`, if it has one.
pub(crate) fn onnx_data_type(ctx: &Context, elem: Type) -> Option<i32> {
    let data_type = match ctx.type_data(elem) {
        TypeData::Float(FloatKind::F32) => dt::FLOAT,
        TypeData::Float(FloatKind::F64) => dt::DOUBLE,
        TypeData::Float(FloatKind::F16) => dt::FLOAT16,
        TypeData::Float(FloatKind::BF16) => dt::BFLOAT16,
        TypeData::Int(IntType { width, signedness }) => match (*width, *signedness) {
            (1, _) => dt::BOOL,
            (4, Signedness::Unsigned) => dt::UINT4,
            (4, _) => dt::INT4,
            (8, Signedness::Unsigned) => dt::UINT8,
            (16, Signedness::Unsigned) => dt::UINT16,
            (32, Signedness::Unsigned) => dt::UINT32,
            (64, Signedness::Unsigned) => dt::UINT64,
            (8, _) => dt::INT8,
            (16, _) => dt::INT16,
            (32, _) => dt::INT32,
            (64, _) => dt::INT64,
            _ => return None,
        },
        _ => return None,
    };
    Some(data_type)
}

/// The float kind of an ONNX float element type.
pub(crate) fn float_kind(data_type: i32) -> Option<FloatKind> {
    match data_type {
        dt::FLOAT => Some(FloatKind::F32),
        dt::DOUBLE => Some(FloatKind::F64),
        dt::FLOAT16 => Some(FloatKind::F16),
        dt::BFLOAT16 => Some(FloatKind::BF16),
        _ => None,
    }
}

/// The element count of `dims` (each ≥ 0), checked against overflow.
pub(crate) fn element_count(dims: &[i64]) -> Result<usize, String> {
    dims.iter().try_fold(1usize, |acc, &d| {
        let d = usize::try_from(d).map_err(|_| format!("dimension {d} is negative"))?;
        acc.checked_mul(d).ok_or_else(|| "the element count overflows".to_string())
    })
}

impl TensorData {
    /// Reads a `TensorProto`; errors name the tensor.
    pub fn from_proto(t: &TensorProto<'_>) -> Result<TensorData, String> {
        Self::read(t).map_err(|e| format!("tensor '{}': {e}", t.name))
    }

    fn read(t: &TensorProto<'_>) -> Result<TensorData, String> {
        if t.external {
            return Err("its data is stored in an external file, which qimport does not read \
                        (save the model with its data inside the .onnx file)"
                .into());
        }
        if t.segmented {
            return Err("segmented tensors are not supported".into());
        }
        let width = element_bytes(t.data_type)
            .ok_or_else(|| format!("element type {} is not supported", dt::name(t.data_type)))?;
        let count = element_count(&t.dims)?;
        if t.data_type == dt::INT4 || t.data_type == dt::UINT4 {
            let bytes = unpack_4bit(t, count)?;
            return Ok(TensorData {
                name: t.name.clone(),
                dims: t.dims.clone(),
                data_type: t.data_type,
                bytes,
            });
        }
        let expected = count.checked_mul(width).ok_or("the tensor is too large")?;
        let bytes = match t.raw_data {
            Some(raw) => {
                if raw.len() != expected {
                    return Err(format!(
                        "raw_data has {} bytes but {count} elements of {} need {expected}",
                        raw.len(),
                        dt::name(t.data_type)
                    ));
                }
                raw.to_vec()
            }
            None => typed_bytes(t, count, width)?,
        };
        Ok(TensorData { name: t.name.clone(), dims: t.dims.clone(), data_type: t.data_type, bytes })
    }

    /// A tensor built by the importer (a `Constant` node's scalar or list attribute).
    pub fn new(name: &str, dims: Vec<i64>, data_type: i32, bytes: Vec<u8>) -> TensorData {
        TensorData { name: name.to_string(), dims, data_type, bytes }
    }

    /// The elements of an integer tensor as i64 (uint64 above `i64::MAX` is an error).
    pub fn ints(&self) -> Result<Vec<i64>, String> {
        let signed = match self.data_type {
            dt::INT4 | dt::INT8 | dt::INT16 | dt::INT32 | dt::INT64 => true,
            dt::UINT4 | dt::UINT8 | dt::UINT16 | dt::UINT32 | dt::UINT64 | dt::BOOL => false,
            other => {
                return Err(format!("constant '{}' must hold integers, not {}", self.name, dt::name(other)))
            }
        };
        let width = element_bytes(self.data_type).unwrap_or(1);
        self.bytes
            .chunks_exact(width)
            .map(|c| {
                let v = qopt_ir_core::decode_int(c, signed);
                i64::try_from(v).map_err(|_| format!("constant '{}' holds {v}, beyond int64", self.name))
            })
            .collect()
    }

    /// The elements of a float tensor as f64 (exact for every float type).
    pub fn floats(&self) -> Result<Vec<f64>, String> {
        let kind = float_kind(self.data_type).ok_or_else(|| {
            format!("constant '{}' must hold floats, not {}", self.name, dt::name(self.data_type))
        })?;
        let width = kind.bits() as usize / 8;
        Ok(self
            .bytes
            .chunks_exact(width)
            .map(|c| {
                let mut buf = [0u8; 8];
                buf[..width].copy_from_slice(c);
                bits_to_f64(u64::from_le_bytes(buf), kind)
            })
            .collect())
    }

    /// The dense attribute of these elements as a tensor of element type `elem`
    /// (the ONNX element type, or a quantized type with the same storage width).
    pub fn dense_attr(&self, ctx: &mut Context, elem: Type) -> Result<Attribute, String> {
        let ty = ctx.tensor_type(&self.dims, elem);
        let dense = DenseElements::from_bytes(ctx, ty, self.bytes.clone())
            .map_err(|e| format!("constant '{}': {e}", self.name))?;
        Ok(ctx.dense_attr(dense))
    }

    /// The same elements under other dims (same element count).
    pub fn with_dims(&self, dims: Vec<i64>) -> TensorData {
        TensorData { dims, ..self.clone() }
    }

    /// The transpose of a 2-D tensor.
    pub fn transposed_2d(&self) -> Option<TensorData> {
        let [rows, cols] = self.dims[..] else { return None };
        let (r, c) = (usize::try_from(rows).ok()?, usize::try_from(cols).ok()?);
        let width = element_bytes(self.data_type)?;
        let mut bytes = Vec::with_capacity(self.bytes.len());
        for j in 0..c {
            for i in 0..r {
                let at = (i * c + j) * width;
                bytes.extend_from_slice(self.bytes.get(at..at + width)?);
            }
        }
        Some(TensorData { dims: vec![cols, rows], bytes, ..self.clone() })
    }
}

/// The elements of an INT4 or UINT4 tensor, one byte each (INT4
/// sign-extended), from `raw_data` or `int32_data`, which hold them two to a
/// byte, the first in the low nibble.
fn unpack_4bit(t: &TensorProto<'_>, count: usize) -> Result<Vec<u8>, String> {
    let packed_len = count.div_ceil(2);
    let packed: Vec<u8> = match t.raw_data {
        Some(raw) => raw.to_vec(),
        None => t
            .int32_data
            .iter()
            .map(|&v| {
                u8::try_from(v).map_err(|_| format!("int32_data value {v} is not a byte of two 4-bit values"))
            })
            .collect::<Result<_, _>>()?,
    };
    if packed.len() != packed_len {
        return Err(format!(
            "holds {} bytes but {count} elements of {} need {packed_len}",
            packed.len(),
            dt::name(t.data_type)
        ));
    }
    let signed = t.data_type == dt::INT4;
    Ok((0..count)
        .map(|i| {
            let byte = packed[i / 2];
            let nibble = if i % 2 == 0 { byte & 0x0F } else { byte >> 4 };
            if signed && nibble & 0x08 != 0 {
                nibble | 0xF0
            } else {
                nibble
            }
        })
        .collect())
}

/// The element bytes of a tensor stored in its typed data field.
fn typed_bytes(t: &TensorProto<'_>, count: usize, width: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(count.saturating_mul(width).min(1 << 30));
    let found = match t.data_type {
        dt::FLOAT => {
            t.float_data.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            t.float_data.len()
        }
        dt::DOUBLE => {
            t.double_data.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            t.double_data.len()
        }
        dt::INT64 => {
            t.int64_data.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            t.int64_data.len()
        }
        dt::UINT32 | dt::UINT64 => {
            for &v in &t.uint64_data {
                if width == 4 && v > u64::from(u32::MAX) {
                    return Err(format!("uint64_data value {v} does not fit UINT32"));
                }
                out.extend_from_slice(&v.to_le_bytes()[..width]);
            }
            t.uint64_data.len()
        }
        // int32_data carries every narrower integer, bool, and the bits of 16-bit floats.
        _ => {
            let (lo, hi): (i64, i64) = match t.data_type {
                dt::INT8 => (-128, 127),
                dt::UINT8 => (0, 255),
                dt::INT16 => (-32768, 32767),
                dt::UINT16 | dt::FLOAT16 | dt::BFLOAT16 => (0, 65535),
                dt::BOOL => (0, 1),
                _ => (i64::from(i32::MIN), i64::from(i32::MAX)),
            };
            for &v in &t.int32_data {
                if !(lo..=hi).contains(&i64::from(v)) {
                    return Err(format!("int32_data value {v} does not fit {}", dt::name(t.data_type)));
                }
                out.extend_from_slice(&v.to_le_bytes()[..width]);
            }
            t.int32_data.len()
        }
    };
    if found != count {
        return Err(format!(
            "has {count} elements but its data field holds {found} (is the data in another field?)"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_fields_become_little_endian_bytes() {
        let t = TensorProto {
            name: "zp".into(),
            dims: vec![3],
            data_type: dt::INT8,
            int32_data: vec![-1, 0, 127],
            ..TensorProto::default()
        };
        let data = TensorData::from_proto(&t).unwrap();
        assert_eq!(data.bytes, [0xFF, 0, 127]);
        assert_eq!(data.ints().unwrap(), [-1, 0, 127]);
        let bad = TensorProto { int32_data: vec![300, 0, 0], ..t.clone() };
        assert_eq!(
            TensorData::from_proto(&bad).unwrap_err(),
            "tensor 'zp': int32_data value 300 does not fit INT8"
        );
        let short = TensorProto { int32_data: vec![1], ..t };
        assert!(TensorData::from_proto(&short)
            .unwrap_err()
            .contains("has 3 elements but its data field holds 1"));
    }

    #[test]
    fn four_bit_tensors_unpack_low_nibble_first() {
        let t = TensorProto {
            name: "w".into(),
            dims: vec![3],
            data_type: dt::INT4,
            raw_data: Some(&[0xF1, 0x08]),
            ..TensorProto::default()
        };
        assert_eq!(TensorData::from_proto(&t).unwrap().ints().unwrap(), [1, -1, -8]);
        let u = TensorProto { data_type: dt::UINT4, ..t.clone() };
        assert_eq!(TensorData::from_proto(&u).unwrap().ints().unwrap(), [1, 15, 8]);
        let short = TensorProto { raw_data: Some(&[0xF1]), ..t };
        assert!(TensorData::from_proto(&short).unwrap_err().contains("need 2"));
    }

    #[test]
    fn transpose_2d() {
        let t = TensorData::new("w", vec![2, 3], dt::INT8, vec![1, 2, 3, 4, 5, 6]);
        let tt = t.transposed_2d().unwrap();
        assert_eq!(tt.dims, [3, 2]);
        assert_eq!(tt.bytes, [1, 4, 2, 5, 3, 6]);
    }

    #[test]
    fn element_counts_are_checked() {
        assert_eq!(element_count(&[2, 3]), Ok(6));
        assert!(element_count(&[-1]).is_err());
        assert!(element_count(&[i64::MAX, i64::MAX]).is_err());
    }
}
