//! Attribute data: what an [`Attribute`] handle stands for.
//!
//! Attributes are interned in the [`crate::Context`], so equality is an integer
//! compare and a large dense constant is stored once (its bytes sit behind an
//! `Arc`) however many ops or passes refer to it. An op's attributes are one
//! interned dictionary attribute, sorted by key.

use crate::{Symbol, Type};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// An interned attribute; compare with `==`.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Attribute(pub(crate) u32);

impl Attribute {
    /// The empty dictionary (always interned first); the attributes of an op with none.
    pub const EMPTY_DICT: Attribute = Attribute(0);
    /// The raw interner index.
    pub fn as_u32(self) -> u32 {
        self.0
    }
}

/// Dense elements of a statically shaped tensor, little-endian, each element in
/// its storage width: 1, 2, 4 or 8 bytes for integers of width ≤ 8, 16, 32, 64
/// (sign-extended for signless, zero-extended for unsigned; `i1` is one byte 0/1),
/// 2 for f16/bf16, 4 for f32, 8 for f64 and index; quantized elements use their
/// storage integer type.
#[derive(Clone, Debug)]
pub struct DenseElements {
    /// The tensor type of the whole constant.
    pub ty: Type,
    /// True if `bytes` holds one element that stands for every element.
    pub splat: bool,
    /// Element bytes, shared.
    pub bytes: Arc<[u8]>,
}

impl PartialEq for DenseElements {
    fn eq(&self, other: &Self) -> bool {
        self.ty == other.ty
            && self.splat == other.splat
            && (Arc::ptr_eq(&self.bytes, &other.bytes) || self.bytes[..] == other.bytes[..])
    }
}
impl Eq for DenseElements {}
impl Hash for DenseElements {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.ty.hash(state);
        self.splat.hash(state);
        state.write(&self.bytes);
    }
}

/// What an attribute handle stands for.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum AttrData {
    /// `unit`: presence is the information.
    Unit,
    /// `true` / `false`.
    Bool(bool),
    /// `42 : i32` (the type is i64 when not written).
    Int {
        /// The value, inside the type's range.
        value: i128,
        /// An integer or index type.
        ty: Type,
    },
    /// `0.5 : f32` (f64 when not written). Stored as raw bits of the type's width
    /// so NaN payloads and signed zeros survive.
    Float {
        /// IEEE bits, in the low `ty`-width bits.
        bits: u64,
        /// A float type.
        ty: Type,
    },
    /// `"text"`: arbitrary bytes (usually UTF-8).
    String(Box<[u8]>),
    /// `[a, b, c]`.
    Array(Box<[Attribute]>),
    /// `{key = value, flag}`, sorted by key text, keys unique.
    Dict(Box<[(Symbol, Attribute)]>),
    /// A type used as a value: `tensor<2xf32>`, `(f32) -> f32`.
    Type(Type),
    /// `@name`.
    SymbolRef(Symbol),
    /// `dense<...> : tensor<...>`.
    Dense(DenseElements),
}
