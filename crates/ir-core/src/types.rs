//! Type data: what a [`Type`] handle stands for.
//!
//! Types are interned in the [`crate::Context`]; a `Type` is a `u32` and type
//! equality is an integer compare. The builtin types are ranked tensors (static
//! dims, [`DYNAMIC`] for `?`), floats, signless (`i8`) and unsigned (`u8`) integers
//! of width 1..=64, `index`, function types, and uniform quantized element types
//! (`!qnn.uniform<...>`): quantization parameters live in types so that
//! propagating them is type propagation. Their structural checks (storage range,
//! zero points in it, per-axis counts) are [`QuantType::check_structure`], which
//! the verifier applies; the `qnn` dialect adds the semantic ones (scale > 0).
//! Dialects outside the core may use opaque types `!dialect.name<body>`.

use std::hash::{Hash, Hasher};

/// An interned type; compare with `==`.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Type(pub(crate) u32);

impl Type {
    /// The raw interner index.
    pub fn as_u32(self) -> u32 {
        self.0
    }
}

/// The dimension value of a dynamic (`?`) tensor dimension.
pub const DYNAMIC: i64 = -1;

/// The largest static dimension size, 2^48: what the parser reads and the
/// verifier accepts, so every verified module prints text that parses back.
pub const MAX_DIM: i64 = 1 << 48;

/// IEEE and brain floating-point formats.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum FloatKind {
    /// IEEE binary16.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE binary32.
    F32,
    /// IEEE binary64.
    F64,
}

impl FloatKind {
    /// Width in bits.
    pub fn bits(self) -> u32 {
        match self {
            FloatKind::F16 | FloatKind::BF16 => 16,
            FloatKind::F32 => 32,
            FloatKind::F64 => 64,
        }
    }
    /// The keyword in `.qir`.
    pub fn keyword(self) -> &'static str {
        match self {
            FloatKind::F16 => "f16",
            FloatKind::BF16 => "bf16",
            FloatKind::F32 => "f32",
            FloatKind::F64 => "f64",
        }
    }
}

/// Whether an integer type carries a sign in its meaning.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Signedness {
    /// `iN`: bits whose meaning each op decides; printed and stored as signed.
    Signless,
    /// `uN`: unsigned.
    Unsigned,
}

/// Integer type: width 1..=64 and signedness.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct IntType {
    /// Width in bits, 1..=64.
    pub width: u8,
    /// Signless or unsigned.
    pub signedness: Signedness,
}

impl IntType {
    /// Smallest value of the type (signless types are read as signed, except `i1`,
    /// the boolean type, which holds 0 and 1). Widths
    /// outside 1..=64 (rejected by the verifier) are clamped into that range.
    pub fn min_value(self) -> i128 {
        let width = self.width.clamp(1, 64);
        match self.signedness {
            // `i1` is the boolean type: 0 and 1.
            Signedness::Unsigned => 0,
            Signedness::Signless if width == 1 => 0,
            Signedness::Signless => -(1i128 << (width - 1)),
        }
    }
    /// Largest value of the type.
    pub fn max_value(self) -> i128 {
        let width = self.width.clamp(1, 64);
        match self.signedness {
            Signedness::Unsigned => (1i128 << width) - 1,
            Signedness::Signless if width == 1 => 1,
            Signedness::Signless => (1i128 << (width - 1)) - 1,
        }
    }
}

/// Per-tensor or per-axis quantization parameters.
#[derive(Clone, Debug)]
pub enum QuantParams {
    /// One scale and zero point for the whole tensor.
    PerTensor {
        /// real = scale * (stored - zero_point)
        scale: f64,
        /// The stored value that represents real 0.
        zero_point: i64,
    },
    /// One scale and zero point per index along `axis`.
    PerAxis {
        /// The tensor dimension the parameters run along.
        axis: u32,
        /// Scales, one per index of `axis`.
        scales: Box<[f64]>,
        /// Zero points, as many as `scales`.
        zero_points: Box<[i64]>,
    },
}

impl PartialEq for QuantParams {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                QuantParams::PerTensor { scale: a, zero_point: za },
                QuantParams::PerTensor { scale: b, zero_point: zb },
            ) => a.to_bits() == b.to_bits() && za == zb,
            (
                QuantParams::PerAxis { axis: a, scales: sa, zero_points: za },
                QuantParams::PerAxis { axis: b, scales: sb, zero_points: zb },
            ) => {
                a == b
                    && za == zb
                    && sa.len() == sb.len()
                    && sa.iter().zip(sb.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            _ => false,
        }
    }
}
impl Eq for QuantParams {}

impl Hash for QuantParams {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            QuantParams::PerTensor { scale, zero_point } => {
                state.write_u8(0);
                state.write_u64(scale.to_bits());
                zero_point.hash(state);
            }
            QuantParams::PerAxis { axis, scales, zero_points } => {
                state.write_u8(1);
                axis.hash(state);
                for s in scales.iter() {
                    state.write_u64(s.to_bits());
                }
                zero_points.hash(state);
            }
        }
    }
}

/// A uniform quantized element type: `!qnn.uniform<i8<-127:127>:f32, 0.5:0>`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct QuantType {
    /// The integer storage type.
    pub storage: IntType,
    /// Smallest stored value used (the storage type's minimum unless narrowed).
    pub storage_min: i64,
    /// Largest stored value used.
    pub storage_max: i64,
    /// The float type the values stand for.
    pub expressed: FloatKind,
    /// Scale and zero point(s).
    pub params: QuantParams,
}

impl QuantType {
    /// The structural checks every quantized type must pass (the verifier makes
    /// them on every type it sees; the `qnn` dialect adds the semantic ones):
    /// storage width 1..=32, `storage_min <= storage_max` inside the storage
    /// type's range, zero points inside `[storage_min, storage_max]`, per-axis
    /// scales and zero points equally many and not none.
    pub fn check_structure(&self) -> Result<(), String> {
        let w = self.storage.width;
        if !(1..=32).contains(&w) {
            return Err(format!("quantized storage types are 1 to 32 bits wide, not {w}"));
        }
        let (lo, hi) = (self.storage.min_value(), self.storage.max_value());
        let (min, max) = (self.storage_min, self.storage_max);
        if (min as i128) < lo || (max as i128) > hi {
            let sign = if self.storage.signedness == Signedness::Unsigned { 'u' } else { 'i' };
            return Err(format!("storage range [{min}, {max}] does not fit in storage type {sign}{w}"));
        }
        if min > max {
            return Err(format!("storage range [{min}, {max}] is empty"));
        }
        let zp_ok = |zp: i64| -> Result<(), String> {
            if zp < min || zp > max {
                Err(format!("zero point {zp} is outside the storage range [{min}, {max}]"))
            } else {
                Ok(())
            }
        };
        match &self.params {
            QuantParams::PerTensor { zero_point, .. } => zp_ok(*zero_point),
            QuantParams::PerAxis { scales, zero_points, .. } => {
                if scales.len() != zero_points.len() {
                    return Err(format!(
                        "per-axis parameters have {} scales but {} zero points",
                        scales.len(),
                        zero_points.len()
                    ));
                }
                if scales.is_empty() {
                    return Err("per-axis parameters are empty".into());
                }
                zero_points.iter().try_for_each(|&zp| zp_ok(zp))
            }
        }
    }

    /// Checks that per-axis parameters fit a tensor of `shape`: the axis is a
    /// dimension and, when its size is static, it equals the number of scales.
    pub fn check_axis_fits(&self, shape: &[i64]) -> Result<(), String> {
        let QuantParams::PerAxis { axis, scales, .. } = &self.params else { return Ok(()) };
        let axis = *axis as usize;
        let Some(&size) = shape.get(axis) else {
            return Err(format!(
                "per-axis quantization axis {axis} is not a dimension of a rank-{} tensor",
                shape.len()
            ));
        };
        if size != DYNAMIC && size as usize != scales.len() {
            return Err(format!(
                "per-axis quantization along axis {axis} has {} scales but the dimension is {size}",
                scales.len()
            ));
        }
        Ok(())
    }

    /// True if the storage range is narrower than the storage type's full range.
    pub fn is_narrowed(&self) -> bool {
        self.storage_min as i128 != self.storage.min_value()
            || self.storage_max as i128 != self.storage.max_value()
    }
}

/// What a type handle stands for.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum TypeData {
    /// A floating-point scalar type.
    Float(FloatKind),
    /// An integer scalar type.
    Int(IntType),
    /// The target's index type.
    Index,
    /// The unit type `none`.
    None,
    /// A ranked tensor; `shape` entries are sizes or [`DYNAMIC`].
    Tensor {
        /// Dimension sizes, outermost first.
        shape: Box<[i64]>,
        /// The element type (scalar or quantized).
        element: Type,
    },
    /// A uniform quantized element type.
    Quant(QuantType),
    /// `(inputs) -> results`.
    Function {
        /// Argument types.
        inputs: Box<[Type]>,
        /// Result types.
        results: Box<[Type]>,
    },
    /// A dialect type the core does not interpret: `!dialect.name<body>` (body kept verbatim).
    Opaque {
        /// `dialect.name`.
        name: Box<str>,
        /// Text between the angle brackets, empty if none.
        body: Box<str>,
    },
}

/// Bytes one element of this scalar type takes in dense storage.
pub(crate) fn storage_bytes_for_int(width: u8) -> usize {
    match width {
        0..=8 => 1,
        9..=16 => 2,
        17..=32 => 4,
        _ => 8,
    }
}
