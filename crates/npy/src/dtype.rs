//! [`DType`]: the element types of the arrays qopt reads and writes, by
//! their NumPy type strings.

use qopt_ir_core::{element_kind, type_to_string, Context, ElementKind, FloatKind, Type, TypeData};
use std::fmt;

/// Element type of an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `float32` (`<f4`).
    F32,
    /// `float64` (`<f8`).
    F64,
    /// `int8` (`|i1`).
    I8,
    /// `uint8` (`|u1`).
    U8,
    /// `int16` (`<i2`).
    I16,
    /// `int32` (`<i4`).
    I32,
    /// `int64` (`<i8`).
    I64,
    /// `bool` (`|b1`), one byte per element, 0 or 1.
    Bool,
}

impl DType {
    /// All supported dtypes.
    pub const ALL: [DType; 8] =
        [DType::F32, DType::F64, DType::I8, DType::U8, DType::I16, DType::I32, DType::I64, DType::Bool];

    /// NumPy's name for the dtype (`"float32"`, `"int64"`, `"bool"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::Bool => "bool",
        }
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::I16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// The `descr` string written to `.npy` headers (`"<f4"`, `"|u1"`, ...).
    pub fn descr(self) -> &'static str {
        match self {
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::I8 => "|i1",
            DType::U8 => "|u1",
            DType::I16 => "<i2",
            DType::I32 => "<i4",
            DType::I64 => "<i8",
            DType::Bool => "|b1",
        }
    }

    /// The storage type of elements of IR element type `elem` (scalar or
    /// quantized), or an error naming the type.
    pub fn of_element(ctx: &Context, elem: Type) -> Result<DType, String> {
        let kind = element_kind(ctx, elem);
        let dtype = match kind {
            Some(ElementKind::Float(FloatKind::F64)) => Some(DType::F64),
            Some(ElementKind::Float(_)) => Some(DType::F32),
            Some(ElementKind::Int { width: 1, .. }) if !matches!(ctx.type_data(elem), TypeData::Quant(_)) => {
                Some(DType::Bool)
            }
            Some(ElementKind::Int { width, signed }) => match (width, signed) {
                (0..=8, true) => Some(DType::I8),
                (0..=8, false) => Some(DType::U8),
                (9..=16, true) => Some(DType::I16),
                (9..=16, false) | (17..=32, true) => Some(DType::I32),
                (17..=32, false) | (33..=64, true) => Some(DType::I64),
                _ => None,
            },
            None => None,
        };
        dtype.ok_or_else(|| format!("element type {} has no interpreter storage", type_to_string(ctx, elem)))
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
