//! [`Tensor`]: an n-dimensional array over ndarray, one variant per element
//! storage type the interpreter computes with.
//!
//! Element types of the IR map to storage as follows: f32 → `F32`, f64 → `F64`;
//! f16 and bf16 are widened to `F32` (every f16/bf16 value is exactly an f32;
//! kernels compute in f32 and do not round back to 16 bits); `i1` → `Bool`;
//! other integers by width and signedness to the smallest variant that holds
//! every value (`i4`, `i8` → `I8`, `u8` → `U8`, `i16` → `I16`, `u16`, `i24`, `i32`
//! → `I32`, `u32`, `i64`, `index` → `I64`); quantized element types are stored as
//! their storage integer type. `u64` has no variant.

use crate::error::{bail, InterpError};
use ndarray::{ArrayD, IxDyn};
use qopt_ir_core::{
    bits_to_f64, element_kind, type_to_string, Context, DenseElements, ElementKind, FloatKind, Type,
    TypeData, DYNAMIC,
};
use qopt_npy::{NpyElement, RawArray};

pub use qopt_npy::DType;

/// An n-dimensional array of one storage type.
#[derive(Clone, Debug, PartialEq)]
pub enum Tensor {
    /// f32 elements (also f16 / bf16 values, widened).
    F32(ArrayD<f32>),
    /// f64 elements.
    F64(ArrayD<f64>),
    /// i8 elements (also narrower signed integers and their quantized types).
    I8(ArrayD<i8>),
    /// u8 elements.
    U8(ArrayD<u8>),
    /// i16 elements.
    I16(ArrayD<i16>),
    /// i32 elements.
    I32(ArrayD<i32>),
    /// i64 elements.
    I64(ArrayD<i64>),
    /// Booleans.
    Bool(ArrayD<bool>),
}

/// Applies `$body` to the array inside any tensor variant, binding it to `$a`,
/// and wraps the result back in the same variant.
macro_rules! map_tensor {
    ($t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::tensor::Tensor::F32($a) => $crate::tensor::Tensor::F32($body),
            $crate::tensor::Tensor::F64($a) => $crate::tensor::Tensor::F64($body),
            $crate::tensor::Tensor::I8($a) => $crate::tensor::Tensor::I8($body),
            $crate::tensor::Tensor::U8($a) => $crate::tensor::Tensor::U8($body),
            $crate::tensor::Tensor::I16($a) => $crate::tensor::Tensor::I16($body),
            $crate::tensor::Tensor::I32($a) => $crate::tensor::Tensor::I32($body),
            $crate::tensor::Tensor::I64($a) => $crate::tensor::Tensor::I64($body),
            $crate::tensor::Tensor::Bool($a) => $crate::tensor::Tensor::Bool($body),
        }
    };
}
pub(crate) use map_tensor;

/// Applies `$body` to the array inside any tensor variant, binding it to `$a`.
macro_rules! with_tensor {
    ($t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::tensor::Tensor::F32($a) => $body,
            $crate::tensor::Tensor::F64($a) => $body,
            $crate::tensor::Tensor::I8($a) => $body,
            $crate::tensor::Tensor::U8($a) => $body,
            $crate::tensor::Tensor::I16($a) => $body,
            $crate::tensor::Tensor::I32($a) => $body,
            $crate::tensor::Tensor::I64($a) => $body,
            $crate::tensor::Tensor::Bool($a) => $body,
        }
    };
}

impl Tensor {
    /// The element storage type.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::F32,
            Tensor::F64(_) => DType::F64,
            Tensor::I8(_) => DType::I8,
            Tensor::U8(_) => DType::U8,
            Tensor::I16(_) => DType::I16,
            Tensor::I32(_) => DType::I32,
            Tensor::I64(_) => DType::I64,
            Tensor::Bool(_) => DType::Bool,
        }
    }

    /// The dimension sizes.
    pub fn shape(&self) -> &[usize] {
        with_tensor!(self, a => a.shape())
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        with_tensor!(self, a => a.len())
    }

    /// True if the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A tensor of zeros (false) of `dtype` and `shape`.
    pub fn zeros(dtype: DType, shape: &[usize]) -> Tensor {
        let s = IxDyn(shape);
        match dtype {
            DType::F32 => Tensor::F32(ArrayD::zeros(s)),
            DType::F64 => Tensor::F64(ArrayD::zeros(s)),
            DType::I8 => Tensor::I8(ArrayD::zeros(s)),
            DType::U8 => Tensor::U8(ArrayD::zeros(s)),
            DType::I16 => Tensor::I16(ArrayD::zeros(s)),
            DType::I32 => Tensor::I32(ArrayD::zeros(s)),
            DType::I64 => Tensor::I64(ArrayD::zeros(s)),
            DType::Bool => Tensor::Bool(ArrayD::from_elem(s, false)),
        }
    }

    /// An f32 tensor of `shape` from row-major `data` (an error if the lengths differ).
    pub fn from_f32(shape: &[usize], data: Vec<f32>) -> Result<Tensor, InterpError> {
        ArrayD::from_shape_vec(IxDyn(shape), data)
            .map(Tensor::F32)
            .map_err(|e| InterpError::new(format!("cannot build a tensor of shape {shape:?}: {e}")))
    }

    /// The f32 array, if this is an f32 tensor.
    pub fn as_f32(&self) -> Option<&ArrayD<f32>> {
        match self {
            Tensor::F32(a) => Some(a),
            _ => None,
        }
    }

    /// The f64 array, if this is an f64 tensor.
    pub fn as_f64(&self) -> Option<&ArrayD<f64>> {
        match self {
            Tensor::F64(a) => Some(a),
            _ => None,
        }
    }

    /// Every element widened to f64, in row-major order (booleans as 0 / 1).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            Tensor::F32(a) => a.iter().map(|&v| v as f64).collect(),
            Tensor::F64(a) => a.iter().copied().collect(),
            Tensor::I8(a) => a.iter().map(|&v| v as f64).collect(),
            Tensor::U8(a) => a.iter().map(|&v| v as f64).collect(),
            Tensor::I16(a) => a.iter().map(|&v| v as f64).collect(),
            Tensor::I32(a) => a.iter().map(|&v| v as f64).collect(),
            Tensor::I64(a) => a.iter().map(|&v| v as f64).collect(),
            Tensor::Bool(a) => a.iter().map(|&v| f64::from(u8::from(v))).collect(),
        }
    }

    /// `float32 [1, 3, 32, 32]`: dtype and shape, for messages.
    pub fn describe(&self) -> String {
        format!("{} {:?}", self.dtype(), self.shape())
    }

    /// Checks that this tensor can be a value of IR type `ty` (a tensor type):
    /// the storage type matches the element type and every static dimension
    /// matches. The error says what was expected and what was found.
    pub fn check_type(&self, ctx: &Context, ty: Type) -> Result<(), InterpError> {
        let TypeData::Tensor { shape, element } = ctx.type_data(ty) else {
            bail!("{} is not a tensor type", type_to_string(ctx, ty));
        };
        let want = DType::of_element(ctx, *element)?;
        let fits = want == self.dtype()
            && shape.len() == self.rank()
            && shape.iter().zip(self.shape()).all(|(&d, &s)| d == DYNAMIC || d as u64 == s as u64);
        if !fits {
            bail!("expects {}, got {}", type_to_string(ctx, ty), self.describe());
        }
        Ok(())
    }

    /// The tensor a dense constant stands for (a splat expands; f16/bf16 widen to
    /// f32; quantized elements keep their stored integers).
    pub fn from_dense(ctx: &Context, dense: &DenseElements) -> Result<Tensor, InterpError> {
        let TypeData::Tensor { shape, element } = ctx.type_data(dense.ty) else {
            bail!("dense constant of non-tensor type {}", type_to_string(ctx, dense.ty));
        };
        let dims = static_dims(shape)
            .ok_or_else(|| InterpError::new("dense constant needs a static shape".to_string()))?;
        let n: usize = dims.iter().product();
        let dtype = DType::of_element(ctx, *element)?;
        let kind = element_kind(ctx, *element)
            .ok_or_else(|| InterpError::new("dense constant has no element kind".to_string()))?;
        let w = kind.bytes();
        let stored = dense.bytes.len() / w.max(1);
        if !dense.bytes.len().is_multiple_of(w.max(1)) || (stored != n && !(dense.splat || stored == 1)) {
            bail!("dense constant has {} bytes for {n} elements of {w} bytes", dense.bytes.len());
        }
        if n > 0 && stored == 0 {
            bail!("dense constant has no data");
        }
        let chunk = |i: usize| -> &[u8] {
            let i = if stored == n { i } else { 0 };
            &dense.bytes[i * w..(i + 1) * w]
        };
        let int = |i: usize| -> i128 {
            let signed = matches!(kind, ElementKind::Int { signed: true, .. });
            qopt_ir_core::decode_int(chunk(i), signed)
        };
        let shape = IxDyn(&dims);
        let build_err = |e: ndarray::ShapeError| InterpError::new(format!("dense constant: {e}"));
        Ok(match (dtype, kind) {
            (DType::F32, ElementKind::Float(FloatKind::F32)) => {
                let v = if stored == n {
                    dense.bytes.chunks_exact(4).map(|c| f32::from_le_bytes(le4(c))).collect()
                } else {
                    vec![f32::from_le_bytes(le4(chunk(0))); n]
                };
                Tensor::F32(ArrayD::from_shape_vec(shape, v).map_err(build_err)?)
            }
            (DType::F32, ElementKind::Int { .. }) => bail!("integer constant stored as f32"),
            (DType::F32, ElementKind::Float(k)) => {
                let v = (0..n)
                    .map(|i| {
                        let c = chunk(i);
                        bits_to_f64(u64::from(u16::from_le_bytes([c[0], c.get(1).copied().unwrap_or(0)])), k)
                            as f32
                    })
                    .collect();
                Tensor::F32(ArrayD::from_shape_vec(shape, v).map_err(build_err)?)
            }
            (DType::F64, _) => {
                let v = (0..n).map(|i| f64::from_le_bytes(le8(chunk(i)))).collect();
                Tensor::F64(ArrayD::from_shape_vec(shape, v).map_err(build_err)?)
            }
            (DType::Bool, _) => {
                let v = (0..n).map(|i| int(i) != 0).collect();
                Tensor::Bool(ArrayD::from_shape_vec(shape, v).map_err(build_err)?)
            }
            (DType::I8, _) => Tensor::I8(ArrayD::from_shape_vec(shape, ints(n, int)?).map_err(build_err)?),
            (DType::U8, _) => Tensor::U8(ArrayD::from_shape_vec(shape, ints(n, int)?).map_err(build_err)?),
            (DType::I16, _) => Tensor::I16(ArrayD::from_shape_vec(shape, ints(n, int)?).map_err(build_err)?),
            (DType::I32, _) => Tensor::I32(ArrayD::from_shape_vec(shape, ints(n, int)?).map_err(build_err)?),
            (DType::I64, _) => Tensor::I64(ArrayD::from_shape_vec(shape, ints(n, int)?).map_err(build_err)?),
        })
    }

    /// True if both tensors have the same dtype and shape and every pair of
    /// elements differs by at most `atol + rtol·|expected|` (floats; NaN equals
    /// NaN), or is equal (integers, booleans). For tests.
    pub fn all_close(&self, expected: &Tensor, rtol: f64, atol: f64) -> bool {
        if self.dtype() != expected.dtype() || self.shape() != expected.shape() {
            return false;
        }
        let (a, b) = (self.to_f64_vec(), expected.to_f64_vec());
        a.iter()
            .zip(&b)
            .all(|(&x, &y)| (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= atol + rtol * y.abs())
    }

    /// True if both tensors have the same dtype, shape and bits (so NaN equals a
    /// NaN of the same payload and -0.0 differs from 0.0). For tests.
    pub fn bit_equal(&self, other: &Tensor) -> bool {
        match (self, other) {
            (Tensor::F32(a), Tensor::F32(b)) => {
                a.shape() == b.shape() && a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Tensor::F64(a), Tensor::F64(b)) => {
                a.shape() == b.shape() && a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            _ => self == other,
        }
    }
}

impl Tensor {
    /// The tensor of a `.npy` array.
    pub fn from_raw(raw: &RawArray) -> Result<Tensor, InterpError> {
        Tensor::from_le_bytes(raw.dtype, &raw.shape, &raw.data)
    }

    /// The tensor of `dtype` and `shape` whose elements are `bytes`,
    /// little-endian in C order (a boolean is any non-zero byte), decoded in
    /// one copy; an error when `bytes` does not hold exactly that many.
    pub fn from_le_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor, InterpError> {
        let want = shape.iter().try_fold(dtype.size(), |n, &d| n.checked_mul(d));
        if want != Some(bytes.len()) {
            bail!("{} bytes do not hold a {dtype} tensor of shape {shape:?}", bytes.len());
        }
        fn build<T: NpyElement>(shape: &[usize], bytes: &[u8]) -> Result<ArrayD<T>, InterpError> {
            ArrayD::from_shape_vec(IxDyn(shape), T::decode_le(bytes))
                .map_err(|e| InterpError::new(e.to_string()))
        }
        Ok(match dtype {
            DType::F32 => Tensor::F32(build(shape, bytes)?),
            DType::F64 => Tensor::F64(build(shape, bytes)?),
            DType::I8 => Tensor::I8(build(shape, bytes)?),
            DType::U8 => Tensor::U8(build(shape, bytes)?),
            DType::I16 => Tensor::I16(build(shape, bytes)?),
            DType::I32 => Tensor::I32(build(shape, bytes)?),
            DType::I64 => Tensor::I64(build(shape, bytes)?),
            DType::Bool => Tensor::Bool(build(shape, bytes)?),
        })
    }

    /// The tensor as a `.npy` array.
    pub fn to_raw(&self) -> RawArray {
        fn raw<T: NpyElement>(a: &ArrayD<T>) -> RawArray {
            let collected: Vec<T>;
            let values = match a.as_slice() {
                Some(values) => values,
                None => {
                    collected = a.iter().copied().collect();
                    &collected
                }
            };
            match RawArray::from_elements(a.shape().to_vec(), values) {
                Ok(r) => r,
                // invariant: from_elements only fails when the data does not fill the
                // shape, and an ndarray's elements always fill its shape.
                Err(_) => unreachable!("an ndarray's elements fill its shape"),
            }
        }
        match self {
            Tensor::F32(a) => raw(a),
            Tensor::F64(a) => raw(a),
            Tensor::I8(a) => raw(a),
            Tensor::U8(a) => raw(a),
            Tensor::I16(a) => raw(a),
            Tensor::I32(a) => raw(a),
            Tensor::I64(a) => raw(a),
            Tensor::Bool(a) => raw(a),
        }
    }
}

macro_rules! tensor_from_array {
    ($($t:ty => $v:ident),*) => {$(
        impl From<ArrayD<$t>> for Tensor {
            fn from(a: ArrayD<$t>) -> Tensor {
                Tensor::$v(a)
            }
        }
    )*};
}
tensor_from_array!(f32 => F32, f64 => F64, i8 => I8, u8 => U8, i16 => I16, i32 => I32, i64 => I64, bool => Bool);

/// Sizes of a fully static IR shape, `None` if a dimension is dynamic or negative.
pub(crate) fn static_dims(shape: &[i64]) -> Option<Vec<usize>> {
    shape.iter().map(|&d| usize::try_from(d).ok()).collect()
}

fn le4(c: &[u8]) -> [u8; 4] {
    let mut b = [0u8; 4];
    for (d, s) in b.iter_mut().zip(c) {
        *d = *s;
    }
    b
}

fn le8(c: &[u8]) -> [u8; 8] {
    let mut b = [0u8; 8];
    for (d, s) in b.iter_mut().zip(c) {
        *d = *s;
    }
    b
}

fn ints<T: TryFrom<i128>>(n: usize, int: impl Fn(usize) -> i128) -> Result<Vec<T>, InterpError> {
    (0..n)
        .map(|i| {
            let v = int(i);
            T::try_from(v)
                .map_err(|_| InterpError::new(format!("dense value {v} does not fit its storage type")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_ir_core::Signedness;

    #[test]
    fn little_endian_bytes_round_trip_in_one_copy() {
        let t = Tensor::from_f32(&[2, 3], vec![1.5, -2.0, 0.25, 3.0, f32::MIN_POSITIVE, -0.0]).unwrap();
        let raw = t.to_raw();
        let back = Tensor::from_le_bytes(DType::F32, &[2, 3], &raw.data).unwrap();
        assert!(back.bit_equal(&t));
        let i = Tensor::from_le_bytes(DType::I16, &[2], &[0x01, 0x80, 0xFF, 0x7F]).unwrap();
        assert_eq!(i.to_f64_vec(), [-32767.0, 32767.0]);
        // Any non-zero byte is true; a length that does not fill the shape is an error.
        let b = Tensor::from_le_bytes(DType::Bool, &[3], &[0, 7, 1]).unwrap();
        assert_eq!(b.to_f64_vec(), [0.0, 1.0, 1.0]);
        let e = Tensor::from_le_bytes(DType::F32, &[2, 3], &raw.data[..20]).unwrap_err();
        assert!(e.to_string().contains("20 bytes do not hold"), "{e}");
    }

    #[test]
    fn dense_to_tensor() {
        let mut ctx = Context::new();
        let f32t = ctx.common().f32;
        let ty = ctx.tensor_type(&[2, 2], f32t);
        let d = DenseElements::from_f64(&ctx, ty, &[1.0, -2.0, 0.5, 4.0]).unwrap();
        let t = Tensor::from_dense(&ctx, &d).unwrap();
        assert_eq!(t, Tensor::from_f32(&[2, 2], vec![1.0, -2.0, 0.5, 4.0]).unwrap());
        t.check_type(&ctx, ty).unwrap();

        let splat = DenseElements::from_f64(&ctx, ty, &[3.0]).unwrap();
        assert_eq!(Tensor::from_dense(&ctx, &splat).unwrap().to_f64_vec(), vec![3.0; 4]);

        let i8t = ctx.int_type(8, Signedness::Signless);
        let ity = ctx.tensor_type(&[3], i8t);
        let d = DenseElements::from_i128(&ctx, ity, &[-128, 0, 127]).unwrap();
        let t = Tensor::from_dense(&ctx, &d).unwrap();
        assert_eq!(t, Tensor::I8(ndarray::arr1(&[-128i8, 0, 127]).into_dyn()));

        let u16t = ctx.int_type(16, Signedness::Unsigned);
        let uty = ctx.tensor_type(&[1], u16t);
        let d = DenseElements::from_i128(&ctx, uty, &[65535]).unwrap();
        assert_eq!(Tensor::from_dense(&ctx, &d).unwrap(), Tensor::I32(ndarray::arr1(&[65535]).into_dyn()));

        let f16t = ctx.float_type(FloatKind::F16);
        let hty = ctx.tensor_type(&[2], f16t);
        let d = DenseElements::from_f64(&ctx, hty, &[0.5, -1.0]).unwrap();
        assert_eq!(Tensor::from_dense(&ctx, &d).unwrap().to_f64_vec(), vec![0.5, -1.0]);

        let i1 = ctx.int_type(1, Signedness::Signless);
        let bty = ctx.tensor_type(&[2], i1);
        let d = DenseElements::from_i128(&ctx, bty, &[1, 0]).unwrap();
        assert_eq!(
            Tensor::from_dense(&ctx, &d).unwrap(),
            Tensor::Bool(ndarray::arr1(&[true, false]).into_dyn())
        );
    }

    #[test]
    fn type_checks() {
        let mut ctx = Context::new();
        let f32t = ctx.common().f32;
        let ty = ctx.tensor_type(&[1, 3], f32t);
        let dynty = ctx.tensor_type(&[DYNAMIC, 3], f32t);
        let t = Tensor::zeros(DType::F32, &[2, 3]);
        assert_eq!(
            t.check_type(&ctx, ty).unwrap_err().message,
            "expects tensor<1x3xf32>, got float32 [2, 3]"
        );
        t.check_type(&ctx, dynty).unwrap();
        let i = Tensor::zeros(DType::I32, &[1, 3]);
        assert!(i.check_type(&ctx, ty).is_err());
    }

    #[test]
    fn npy_round_trip() {
        let t = Tensor::I8(ndarray::arr2(&[[-128i8, 0, 127]]).into_dyn());
        let raw = t.to_raw();
        assert_eq!((raw.dtype, raw.shape.as_slice()), (DType::I8, &[1usize, 3][..]));
        assert_eq!(Tensor::from_raw(&raw).unwrap(), t);
        let b = Tensor::Bool(ndarray::arr1(&[true, false]).into_dyn());
        assert_eq!(Tensor::from_raw(&b.to_raw()).unwrap(), b);
    }

    #[test]
    fn comparisons() {
        let a = Tensor::from_f32(&[2], vec![1.0, f32::NAN]).unwrap();
        let b = Tensor::from_f32(&[2], vec![1.000001, f32::NAN]).unwrap();
        assert!(a.all_close(&b, 1e-5, 0.0));
        assert!(!a.all_close(&b, 1e-7, 0.0));
        assert!(a.bit_equal(&a.clone()));
        assert!(!a.bit_equal(&b));
        assert!(Tensor::from_f32(&[3], vec![1.0]).is_err());
    }
}
