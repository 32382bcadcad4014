//! [`NpyError`]: why an array or archive could not be read.

use crate::dtype::DType;
use std::fmt;
use std::io;

/// Everything that can go wrong while reading `.npy` / `.npz` data.
#[derive(Debug)]
pub enum NpyError {
    /// The input does not start with `\x93NUMPY`.
    BadMagic,
    /// The format version is not 1.0, 2.0 or 3.0.
    UnsupportedVersion(u8, u8),
    /// The header dictionary is malformed.
    BadHeader(String),
    /// The `descr` names a dtype this reader does not handle (e.g. `<c8`).
    UnsupportedDtype(String),
    /// The input ends before the announced data.
    Truncated {
        /// The part that is cut short (`"header"`, `"array data"`, ...).
        what: &'static str,
        /// Bytes that part needs.
        expected: usize,
        /// Bytes actually available.
        got: usize,
    },
    /// The data length does not match the shape, or a shape is too large.
    SizeMismatch(String),
    /// A typed accessor was used with the wrong element type.
    DtypeMismatch {
        /// The dtype the caller asked for.
        expected: DType,
        /// The array's dtype.
        found: DType,
    },
    /// The `.npz` container is not a valid (supported) zip archive.
    BadZip(String),
    /// An error inside one member of an `.npz` archive.
    Member {
        /// The array name (member name without `.npy`).
        name: String,
        /// What went wrong in that member.
        source: Box<NpyError>,
    },
    /// An I/O error while reading a file.
    Io(io::Error),
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NpyError::BadMagic => f.write_str("not a .npy file: missing \\x93NUMPY magic"),
            NpyError::UnsupportedVersion(major, minor) => {
                write!(f, "unsupported .npy format version {major}.{minor} (supported: 1.0, 2.0, 3.0)")
            }
            NpyError::BadHeader(msg) => write!(f, "malformed .npy header: {msg}"),
            NpyError::UnsupportedDtype(descr) => write!(
                f,
                "unsupported .npy dtype '{descr}' (supported: float32, float64, int8, uint8, int16, \
                 int32, int64, bool)"
            ),
            NpyError::Truncated { what, expected, got } => {
                write!(f, "truncated .npy data: {what} needs {expected} bytes, only {got} available")
            }
            NpyError::SizeMismatch(msg) => write!(f, "array size mismatch: {msg}"),
            NpyError::DtypeMismatch { expected, found } => {
                write!(f, "dtype mismatch: expected {expected}, array is {found}")
            }
            NpyError::BadZip(msg) => write!(f, "bad .npz archive: {msg}"),
            NpyError::Member { name, source } => write!(f, "in .npz member '{name}': {source}"),
            NpyError::Io(e) => write!(f, "I/O error: {e}"),
        }
    }
}

impl std::error::Error for NpyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NpyError::Member { source, .. } => Some(source.as_ref()),
            NpyError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for NpyError {
    fn from(e: io::Error) -> Self {
        NpyError::Io(e)
    }
}

pub(crate) fn bad_header(msg: impl Into<String>) -> NpyError {
    NpyError::BadHeader(msg.into())
}

pub(crate) fn bad_zip(msg: impl Into<String>) -> NpyError {
    NpyError::BadZip(msg.into())
}
