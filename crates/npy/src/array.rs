//! [`RawArray`]: a dtype, a shape and little-endian C-order element bytes,
//! with typed access through [`NpyElement`].

use crate::dtype::DType;
use crate::error::NpyError;

/// An n-dimensional array as raw bytes: little-endian elements in C (row-major) order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawArray {
    /// Element type.
    pub dtype: DType,
    /// Dimensions; empty for a 0-d (scalar) array.
    pub shape: Vec<usize>,
    /// `shape.iter().product() * dtype.size()` bytes, little-endian, C order.
    pub data: Vec<u8>,
}

/// Number of elements of `shape` (1 for a 0-d array), or `None` on overflow.
pub(crate) fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Number of data bytes for `shape` and `dtype`, or an error on overflow.
pub(crate) fn byte_count(dtype: DType, shape: &[usize]) -> Result<usize, NpyError> {
    element_count(shape)
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| NpyError::SizeMismatch(format!("shape {shape:?} is too large")))
}

impl RawArray {
    /// Builds an array, checking that `data` holds exactly the bytes `shape` needs.
    pub fn new(dtype: DType, shape: Vec<usize>, data: Vec<u8>) -> Result<Self, NpyError> {
        let array = RawArray { dtype, shape, data };
        array.validate()?;
        Ok(array)
    }

    /// Checks the data length against dtype and shape.
    pub fn validate(&self) -> Result<(), NpyError> {
        let expected = byte_count(self.dtype, &self.shape)?;
        if self.data.len() != expected {
            return Err(NpyError::SizeMismatch(format!(
                "{} array of shape {:?} needs {expected} bytes, got {}",
                self.dtype,
                self.shape,
                self.data.len()
            )));
        }
        Ok(())
    }

    /// Number of elements (1 for a 0-d array).
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Builds an array from typed elements in C order.
    pub fn from_elements<T: NpyElement>(shape: Vec<usize>, values: &[T]) -> Result<Self, NpyError> {
        let mut data = Vec::with_capacity(values.len().saturating_mul(T::DTYPE.size()));
        T::extend_le(values, &mut data);
        RawArray::new(T::DTYPE, shape, data)
    }

    /// Decodes the elements in C order; `T` must match the array's dtype.
    pub fn to_vec<T: NpyElement>(&self) -> Result<Vec<T>, NpyError> {
        if self.dtype != T::DTYPE {
            return Err(NpyError::DtypeMismatch { expected: T::DTYPE, found: self.dtype });
        }
        Ok(T::decode_le(&self.data))
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Rust element types that map onto a [`DType`].
pub trait NpyElement: Copy + sealed::Sealed {
    /// The matching dtype.
    const DTYPE: DType;
    /// Appends the little-endian encoding of `self`.
    fn push_le(self, out: &mut Vec<u8>);
    /// Decodes from exactly `DTYPE.size()` little-endian bytes.
    fn from_le(bytes: &[u8]) -> Self;
    /// Appends the little-endian encoding of every value.
    fn extend_le(values: &[Self], out: &mut Vec<u8>) {
        values.iter().for_each(|&v| v.push_le(out));
    }
    /// Decodes whole elements of `bytes` (a trailing partial one is ignored).
    fn decode_le(bytes: &[u8]) -> Vec<Self> {
        bytes.chunks_exact(Self::DTYPE.size()).map(Self::from_le).collect()
    }
}

macro_rules! npy_element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl NpyElement for $t {
            const DTYPE: DType = DType::$d;
            fn push_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn from_le(bytes: &[u8]) -> Self {
                let mut buf = [0u8; std::mem::size_of::<$t>()];
                buf.copy_from_slice(bytes);
                <$t>::from_le_bytes(buf)
            }
            // On a little-endian machine the encoding is the memory: one copy.
            #[cfg(target_endian = "little")]
            fn extend_le(values: &[Self], out: &mut Vec<u8>) {
                // SAFETY: a numeric slice is readable as its bytes (no padding).
                out.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
                });
            }
            #[cfg(target_endian = "little")]
            fn decode_le(bytes: &[u8]) -> Vec<Self> {
                let n = bytes.len() / std::mem::size_of::<$t>();
                let mut values: Vec<$t> = vec![0 as $t; n];
                // SAFETY: `values` owns n elements, n · size bytes; every bit
                // pattern is a valid number; the two buffers do not overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        values.as_mut_ptr().cast::<u8>(),
                        n * std::mem::size_of::<$t>(),
                    )
                };
                values
            }
        }
    )*};
}

npy_element!(f32 => F32, f64 => F64, i8 => I8, u8 => U8, i16 => I16, i32 => I32, i64 => I64);

impl sealed::Sealed for bool {}
impl NpyElement for bool {
    const DTYPE: DType = DType::Bool;
    fn push_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn from_le(bytes: &[u8]) -> Self {
        bytes.first().is_some_and(|&b| b != 0)
    }
}
