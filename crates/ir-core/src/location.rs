//! Source locations attached to ops: where an op came from, for diagnostics and
//! per-layer reports. Interned in the [`crate::Context`] like types.
//!
//! Printed after an op as `loc("model.onnx":12:0)`, `loc("conv1")`,
//! `loc("conv1"("model.onnx":3:1))`, `loc(fused["a", "b"])`. The unknown location
//! is not printed. The parser also records each op's own position in the input
//! separately ([`crate::SrcPos`]); that one is not part of the IR's meaning.

use crate::Symbol;

/// An interned location.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Location(pub(crate) u32);

impl Location {
    /// The unknown location (always interned first).
    pub const UNKNOWN: Location = Location(0);
    /// True for [`Location::UNKNOWN`].
    pub fn is_unknown(self) -> bool {
        self == Location::UNKNOWN
    }
}

/// What a location stands for.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum LocationData {
    /// No location.
    Unknown,
    /// A position in a file.
    FileLineCol {
        /// File name.
        file: Symbol,
        /// 1-based line.
        line: u32,
        /// Column (as written; 0 allowed).
        col: u32,
    },
    /// A name (an ONNX node name, a layer name), optionally with a nested location.
    Name {
        /// The name.
        name: Symbol,
        /// Where the named thing is, or unknown.
        child: Location,
    },
    /// Several locations merged (e.g. by a fusion).
    Fused(Box<[Location]>),
}

/// Where an op was in the parsed input (1-based line and column); `line == 0`
/// means the op was not parsed (a pass created it).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct SrcPos {
    /// 1-based line, 0 if none.
    pub line: u32,
    /// 1-based column, counted in bytes.
    pub col: u32,
}

impl SrcPos {
    /// No position.
    pub const NONE: SrcPos = SrcPos { line: 0, col: 0 };
    /// True if this is a real position.
    pub fn is_some(self) -> bool {
        self.line != 0
    }
}
