//! The e-graph language: IR op results, their leaves (arguments, constants,
//! attribute dictionaries, types, integers) and the checker's own arithmetic.
//!
//! An IR op result is `Op { name, result, children }` whose children are the
//! op's attribute dictionary, the result's type, then the operands. Equal
//! attributes are the same interned handle, so they are the same leaf and
//! ops with equal attributes on equal operands are one e-node: CSE is free,
//! and a rule can bind, keep or compare an op's attributes and type like any
//! operand. A constant is a leaf named by its content ([`ConstKey`]).
//!
//! [`Builtin`]s are the checker's vocabulary for identities the IR cannot
//! state by itself (per-channel scaling, arithmetic on parameter vectors in
//! f64); the analysis evaluates them on constants with its own code, never
//! the passes'.

use egg::{Id, Language};
use qopt_ir_core::{Attribute, OpName, Type};
use smallvec::SmallVec;
use std::fmt;

/// A constant's identity: a hash of its storage type, shape and element bits,
/// and its element count.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct ConstKey {
    /// FxHash of dtype, shape and bits.
    pub hash: u64,
    /// Number of elements.
    pub len: u64,
}

/// The result index of the node standing for an op without results (kept
/// for its effect; children are its attributes and operands, no type).
pub const EFFECT: u32 = u32::MAX;

/// The checker's own operations (see the module docs).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Builtin {
    /// `(+ a b)`: elementwise sum, numpy broadcasting, in f64.
    Add,
    /// `(- a b)`.
    Sub,
    /// `(* a b)`.
    Mul,
    /// `(/ a b)`.
    Div,
    /// `(sqrt a)`.
    Sqrt,
    /// `(chan-mul x v AXIS)`: `x` times the vector `v` along `AXIS`.
    ChanMul,
    /// `(chan-add x v AXIS)`: `x` plus the vector `v` along `AXIS`.
    ChanAdd,
    /// `(chan-div x v AXIS)`: `x` divided by the vector `v` along `AXIS`.
    ChanDiv,
    /// `(chan-absmax x AXIS)`: the vector of each index of `AXIS`'s largest
    /// magnitude in `x`, 1 where that is 0 (a positive scale for every
    /// channel: a layer's weight range, `equalize`'s normal form).
    ChanAbsMax,
    /// `(chan-sum x AXIS)`: the vector of each index of `AXIS`'s sum of `x`
    /// (a layer's weights times a shift of its input channels, summed over
    /// its inputs and taps: what the shift adds to each output channel).
    ChanSum,
}

impl Builtin {
    /// Every builtin, for parsing.
    pub const ALL: [Builtin; 10] = [
        Builtin::Add,
        Builtin::Sub,
        Builtin::Mul,
        Builtin::Div,
        Builtin::Sqrt,
        Builtin::ChanMul,
        Builtin::ChanAdd,
        Builtin::ChanDiv,
        Builtin::ChanAbsMax,
        Builtin::ChanSum,
    ];

    /// The name in rule text.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Add => "+",
            Builtin::Sub => "-",
            Builtin::Mul => "*",
            Builtin::Div => "/",
            Builtin::Sqrt => "sqrt",
            Builtin::ChanMul => "chan-mul",
            Builtin::ChanAdd => "chan-add",
            Builtin::ChanDiv => "chan-div",
            Builtin::ChanAbsMax => "chan-absmax",
            Builtin::ChanSum => "chan-sum",
        }
    }

    /// The number of children.
    pub fn arity(self) -> usize {
        match self {
            Builtin::Sqrt => 1,
            Builtin::Add
            | Builtin::Sub
            | Builtin::Mul
            | Builtin::Div
            | Builtin::ChanAbsMax
            | Builtin::ChanSum => 2,
            Builtin::ChanMul | Builtin::ChanAdd | Builtin::ChanDiv => 3,
        }
    }
}

/// An e-node.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Node {
    /// Function argument `index`.
    Arg(u32),
    /// A constant tensor, by content.
    Const(ConstKey),
    /// An op's attribute dictionary (annotations removed).
    Attr(Attribute),
    /// A type.
    Type(Type),
    /// An integer (an axis in a builtin).
    Int(i64),
    /// Result `result` of an IR op: children are attributes, type, operands.
    Op {
        /// The op's name.
        name: OpName,
        /// Which result.
        result: u32,
        /// `[attributes, type, operands...]`.
        children: SmallVec<[Id; 4]>,
    },
    /// A builtin applied to its children.
    Fn {
        /// Which builtin.
        f: Builtin,
        /// Its operands.
        children: SmallVec<[Id; 4]>,
    },
}

/// What identifies a node apart from its children (egg's discriminant).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Discriminant {
    /// A leaf kind (payloads are compared by `matches`).
    Leaf(u8),
    /// An op result.
    Op(OpName, u32),
    /// A builtin.
    Fn(Builtin),
}

impl Language for Node {
    type Discriminant = Discriminant;

    fn discriminant(&self) -> Discriminant {
        match self {
            Node::Arg(_) => Discriminant::Leaf(0),
            Node::Const(_) => Discriminant::Leaf(1),
            Node::Attr(_) => Discriminant::Leaf(2),
            Node::Type(_) => Discriminant::Leaf(3),
            Node::Int(_) => Discriminant::Leaf(4),
            Node::Op { name, result, .. } => Discriminant::Op(*name, *result),
            Node::Fn { f, .. } => Discriminant::Fn(*f),
        }
    }

    fn matches(&self, other: &Self) -> bool {
        match (self, other) {
            (Node::Op { name, result, children }, Node::Op { name: n, result: r, children: c }) => {
                name == n && result == r && children.len() == c.len()
            }
            (Node::Fn { f, children }, Node::Fn { f: g, children: c }) => f == g && children.len() == c.len(),
            _ => self == other,
        }
    }

    fn children(&self) -> &[Id] {
        match self {
            Node::Op { children, .. } | Node::Fn { children, .. } => children,
            _ => &[],
        }
    }

    fn children_mut(&mut self) -> &mut [Id] {
        match self {
            Node::Op { children, .. } | Node::Fn { children, .. } => children,
            _ => &mut [],
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Arg(i) => write!(f, "%arg{i}"),
            Node::Const(k) => write!(f, "const#{:016x}", k.hash),
            Node::Attr(a) => write!(f, "attrs{a:?}"),
            Node::Type(t) => write!(f, "type{t:?}"),
            Node::Int(i) => write!(f, "{i}"),
            Node::Op { name, result, .. } => write!(f, "op{name:?}#{result}"),
            Node::Fn { f: b, .. } => f.write_str(b.name()),
        }
    }
}
