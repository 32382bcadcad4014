//! Reader and writer for NumPy `.npy` arrays and `.npz` archives.
//!
//! The module is self-contained: it works on [`RawArray`], a dtype tag plus a shape plus
//! little-endian, C-order element bytes. Conversion to typed data goes through
//! [`RawArray::to_vec`] / [`RawArray::from_elements`] (see [`NpyElement`]).
//!
//! Supported:
//! * `.npy` format versions 1.0, 2.0 and 3.0;
//! * dtypes `<f4 <f8 |i1 |u1 <i2 <i4 <i8 |b1` (any of `<`, `|`, `=` for single-byte types);
//! * big-endian (`>f4`, ...) input, byte-swapped on read;
//! * `fortran_order: True` input, transposed to C order on read;
//! * `.npz` archives whose members are STORED (`np.savez`) or DEFLATE-compressed
//!   (`np.savez_compressed`), including the ZIP64 extra fields numpy writes.
//!
//! For streaming readers ([`crate::dataset`]), [`read_npy_header`] parses a header alone and
//! [`npz_members`] locates `.npz` members without reading them, so STORED data can be read in
//! place (e.g. from a memory map).
//!
//! Writing always produces `.npy` version 1.0 (2.0 for huge headers), little-endian, C order,
//! with the header padded to a 64-byte boundary exactly like numpy, and `.npz` archives with
//! STORED members and CRC-32 checksums.
//!
//! Parsing is strict and never panics on malformed input: every failure is an [`NpyError`].

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;

// ---------------------------------------------------------------------------------------------
// Data types
// ---------------------------------------------------------------------------------------------

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

    /// Parses a NumPy type string. Returns the dtype and whether the data is big-endian.
    fn from_descr(descr: &str) -> Result<(DType, bool), NpyError> {
        let unsupported = || NpyError::UnsupportedDtype(descr.to_string());
        let mut chars = descr.chars();
        let order = chars.next().ok_or_else(unsupported)?;
        let dtype = match chars.as_str() {
            "f4" => DType::F32,
            "f8" => DType::F64,
            "i1" => DType::I8,
            "u1" => DType::U8,
            "i2" => DType::I16,
            "i4" => DType::I32,
            "i8" => DType::I64,
            "b1" => DType::Bool,
            _ => return Err(unsupported()),
        };
        let single = dtype.size() == 1;
        let big_endian = match order {
            '<' => false,
            '>' => !single,
            // `|` (not applicable) and `=` (native) are only unambiguous for single bytes.
            '|' | '=' if single => false,
            _ => return Err(unsupported()),
        };
        Ok((dtype, big_endian))
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

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

fn bad_header(msg: impl Into<String>) -> NpyError {
    NpyError::BadHeader(msg.into())
}

fn bad_zip(msg: impl Into<String>) -> NpyError {
    NpyError::BadZip(msg.into())
}

// ---------------------------------------------------------------------------------------------
// Raw arrays and typed access
// ---------------------------------------------------------------------------------------------

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
fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Number of data bytes for `shape` and `dtype`, or an error on overflow.
fn byte_count(dtype: DType, shape: &[usize]) -> Result<usize, NpyError> {
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
        for &v in values {
            v.push_le(&mut data);
        }
        RawArray::new(T::DTYPE, shape, data)
    }

    /// Decodes the elements in C order; `T` must match the array's dtype.
    pub fn to_vec<T: NpyElement>(&self) -> Result<Vec<T>, NpyError> {
        if self.dtype != T::DTYPE {
            return Err(NpyError::DtypeMismatch { expected: T::DTYPE, found: self.dtype });
        }
        Ok(self.data.chunks_exact(T::DTYPE.size()).map(T::from_le).collect())
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

// ---------------------------------------------------------------------------------------------
// .npy reading
// ---------------------------------------------------------------------------------------------

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The parsed header dictionary.
struct Header {
    dtype: DType,
    big_endian: bool,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// What a `.npy` header says about the data after it (see [`read_npy_header`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// Element type.
    pub dtype: DType,
    /// Dimensions; empty for a 0-d array.
    pub shape: Vec<usize>,
    /// The data is in column-major order (`fortran_order: True`).
    pub fortran_order: bool,
    /// The elements are stored big-endian (`>f4`, ...); never set for single-byte types.
    pub big_endian: bool,
    /// Offset of the first data byte from the start of the `.npy` bytes.
    pub data_offset: usize,
    /// Number of data bytes the shape needs: `shape.iter().product() * dtype.size()`.
    pub data_len: usize,
}

/// Parses only the header of `.npy` bytes: `bytes` may be the whole file or any prefix that
/// holds the header. The data is neither read nor checked (see [`NpyHeader::data_offset`] and
/// [`NpyHeader::data_len`]); a shape whose byte count overflows `usize` is an error.
pub fn read_npy_header(bytes: &[u8]) -> Result<NpyHeader, NpyError> {
    if bytes.len() < 8 {
        let n = bytes.len().min(MAGIC.len());
        return Err(if bytes[..n] == MAGIC[..n] {
            NpyError::Truncated { what: "magic and version", expected: 8, got: bytes.len() }
        } else {
            NpyError::BadMagic
        });
    }
    let prefix = &bytes[..8];
    if &prefix[..6] != MAGIC {
        return Err(NpyError::BadMagic);
    }
    let (major, minor) = (prefix[6], prefix[7]);
    let (len_size, utf8) = match (major, minor) {
        (1, 0) => (2, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        _ => return Err(NpyError::UnsupportedVersion(major, minor)),
    };
    let len_bytes = bytes.get(8..8 + len_size).ok_or(NpyError::Truncated {
        what: "header length",
        expected: 8 + len_size,
        got: bytes.len(),
    })?;
    let header_len = len_bytes.iter().rev().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
    let header_start = 8 + len_size;
    let data_start =
        header_start.checked_add(header_len).ok_or_else(|| bad_header("header length overflows"))?;
    let header_bytes = bytes.get(header_start..data_start).ok_or(NpyError::Truncated {
        what: "header",
        expected: data_start,
        got: bytes.len(),
    })?;
    let header_text: String = if utf8 {
        std::str::from_utf8(header_bytes).map_err(|_| bad_header("header is not valid UTF-8"))?.to_string()
    } else {
        // Versions 1.0 and 2.0 use latin-1.
        header_bytes.iter().map(|&b| char::from(b)).collect()
    };
    let header = parse_header(&header_text)?;
    let data_len = byte_count(header.dtype, &header.shape)?;
    Ok(NpyHeader {
        dtype: header.dtype,
        shape: header.shape,
        fortran_order: header.fortran_order,
        big_endian: header.big_endian,
        data_offset: data_start,
        data_len,
    })
}

/// Like [`read_npy_header`], for `.npy` bytes of length `len` that `read_at(offset, buf)` reads
/// piecewise (filling all of `buf` from `offset`, like `FileExt::read_exact_at`): only the
/// header is read.
pub fn read_npy_header_with(
    len: u64,
    read_at: impl Fn(u64, &mut [u8]) -> io::Result<()>,
) -> Result<NpyHeader, NpyError> {
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    let mut buf = vec![0u8; len.min(12)];
    read_at(0, &mut buf)?;
    // Where the header ends, if the prefix says.
    let end = match (buf.get(..6), buf.get(6..8)) {
        (Some(magic), Some(&[1, 0])) if magic == MAGIC => {
            buf.get(8..10).map(|b| 10 + usize::from(u16::from_le_bytes([b[0], b[1]])))
        }
        (Some(magic), Some(&[2 | 3, 0])) if magic == MAGIC => buf
            .get(8..12)
            .and_then(|b| usize::try_from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])).ok())
            .and_then(|n| n.checked_add(12)),
        _ => None,
    };
    if let Some(end) = end {
        let end = end.min(len);
        if end > buf.len() {
            buf = vec![0u8; end];
            read_at(0, &mut buf)?;
        }
    }
    read_npy_header(&buf)
}

/// Parses a complete `.npy` file held in memory.
pub fn read_npy(bytes: &[u8]) -> Result<RawArray, NpyError> {
    let header = read_npy_header(bytes)?;
    let expected = header.data_len;
    let body = &bytes[header.data_offset..];
    if body.len() < expected {
        return Err(NpyError::Truncated { what: "array data", expected, got: body.len() });
    }
    if body.len() > expected {
        return Err(NpyError::SizeMismatch(format!(
            "shape {:?} of {} needs {expected} data bytes, but the file has {} ({} trailing)",
            header.shape,
            header.dtype,
            body.len(),
            body.len() - expected
        )));
    }
    let mut data = body.to_vec();
    if header.big_endian {
        let size = header.dtype.size();
        for element in data.chunks_exact_mut(size) {
            element.reverse();
        }
    }
    if header.dtype == DType::Bool {
        for b in &mut data {
            *b = u8::from(*b != 0);
        }
    }
    if header.fortran_order && header.shape.len() > 1 {
        data = fortran_to_c(&data, &header.shape, header.dtype.size());
    }
    Ok(RawArray { dtype: header.dtype, shape: header.shape, data })
}

/// Reorders column-major element bytes into row-major order. `data` must be exactly the
/// array's size (checked by the caller).
fn fortran_to_c(data: &[u8], shape: &[usize], size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    if data.is_empty() {
        return out;
    }
    // Column-major strides (in elements).
    let mut strides = Vec::with_capacity(shape.len());
    let mut stride = 1usize;
    for &d in shape {
        strides.push(stride);
        stride *= d;
    }
    let mut index = vec![0usize; shape.len()];
    let mut offset = 0usize;
    loop {
        let start = offset * size;
        out.extend_from_slice(&data[start..start + size]);
        // Advance the C-order multi-index (last axis fastest).
        let mut axis = shape.len();
        loop {
            if axis == 0 {
                return out;
            }
            axis -= 1;
            index[axis] += 1;
            offset += strides[axis];
            if index[axis] < shape[axis] {
                break;
            }
            offset -= strides[axis] * shape[axis];
            index[axis] = 0;
        }
    }
}

/// A value in the header dictionary.
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
    List,
}

struct HeaderParser<'a> {
    rest: &'a str,
}

impl HeaderParser<'_> {
    fn skip_ws(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t', '\n', '\r']);
    }

    fn peek(&self) -> Option<char> {
        self.rest.chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, c: char) -> Result<(), NpyError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(bad_header(format!("expected '{c}' near {}", self.context())))
        }
    }

    fn context(&self) -> String {
        if self.rest.is_empty() {
            "end of header".to_string()
        } else {
            let snippet: String = self.rest.chars().take(20).collect();
            format!("{snippet:?}")
        }
    }

    fn string(&mut self) -> Result<String, NpyError> {
        let quote = match self.peek() {
            Some(q @ ('\'' | '"')) => q,
            _ => return Err(bad_header(format!("expected a quoted string near {}", self.context()))),
        };
        let body = &self.rest[1..];
        let end = body.find(quote).ok_or_else(|| bad_header("unterminated string"))?;
        let s = &body[..end];
        if s.contains('\\') {
            return Err(bad_header("escape sequences in header strings are not supported"));
        }
        self.rest = &body[end + 1..];
        Ok(s.to_string())
    }

    fn dim(&mut self) -> Result<usize, NpyError> {
        let digits_end = self.rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(self.rest.len());
        if digits_end == 0 {
            return Err(bad_header(format!("expected a non-negative integer near {}", self.context())));
        }
        let value = self.rest[..digits_end].parse::<usize>().map_err(|_| {
            NpyError::SizeMismatch(format!("dimension {} is too large", &self.rest[..digits_end]))
        })?;
        self.rest = &self.rest[digits_end..];
        // Python 2 long suffix.
        if !self.eat('L') {
            self.eat('l');
        }
        Ok(value)
    }

    fn tuple(&mut self) -> Result<Vec<usize>, NpyError> {
        self.expect('(')?;
        let mut dims = Vec::new();
        loop {
            self.skip_ws();
            if self.eat(')') {
                break;
            }
            dims.push(self.dim()?);
            self.skip_ws();
            if self.eat(',') {
                continue;
            }
            self.skip_ws();
            self.expect(')')?;
            // `(3)` is just the integer 3 in Python, not a tuple.
            if dims.len() == 1 {
                return Err(bad_header("shape must be a tuple; a one-element tuple needs a trailing comma"));
            }
            break;
        }
        Ok(dims)
    }

    fn value(&mut self) -> Result<Value, NpyError> {
        match self.peek() {
            Some('\'' | '"') => Ok(Value::Str(self.string()?)),
            Some('(') => Ok(Value::Tuple(self.tuple()?)),
            Some('[') => Ok(Value::List),
            _ => {
                if let Some(r) = self.rest.strip_prefix("True") {
                    self.rest = r;
                    Ok(Value::Bool(true))
                } else if let Some(r) = self.rest.strip_prefix("False") {
                    self.rest = r;
                    Ok(Value::Bool(false))
                } else {
                    Err(bad_header(format!("unexpected value near {}", self.context())))
                }
            }
        }
    }
}

/// Parses the header dictionary, e.g.
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 224, 224), }`.
fn parse_header(text: &str) -> Result<Header, NpyError> {
    let mut p = HeaderParser { rest: text };
    let mut descr: Option<(DType, bool)> = None;
    let mut fortran_order: Option<bool> = None;
    let mut shape: Option<Vec<usize>> = None;
    p.skip_ws();
    p.expect('{')?;
    loop {
        p.skip_ws();
        if p.eat('}') {
            break;
        }
        let key = p.string()?;
        p.skip_ws();
        p.expect(':')?;
        p.skip_ws();
        let value = p.value()?;
        match (key.as_str(), value) {
            ("descr", _) if descr.is_some() => return Err(bad_header("duplicate key 'descr'")),
            ("descr", Value::Str(s)) => descr = Some(DType::from_descr(&s)?),
            ("descr", Value::List) => {
                return Err(NpyError::UnsupportedDtype("structured dtype (list descr)".to_string()));
            }
            ("descr", _) => return Err(bad_header("'descr' must be a string")),
            ("fortran_order", _) if fortran_order.is_some() => {
                return Err(bad_header("duplicate key 'fortran_order'"));
            }
            ("fortran_order", Value::Bool(b)) => fortran_order = Some(b),
            ("fortran_order", _) => return Err(bad_header("'fortran_order' must be True or False")),
            ("shape", _) if shape.is_some() => return Err(bad_header("duplicate key 'shape'")),
            ("shape", Value::Tuple(t)) => shape = Some(t),
            ("shape", _) => return Err(bad_header("'shape' must be a tuple of integers")),
            (other, _) => return Err(bad_header(format!("unexpected key '{other}'"))),
        }
        p.skip_ws();
        if p.eat(',') {
            continue;
        }
        p.expect('}')?;
        break;
    }
    if !p.rest.trim_matches([' ', '\t', '\n', '\r', '\0']).is_empty() {
        return Err(bad_header(format!("unexpected text after the dictionary: {}", p.context())));
    }
    let (dtype, big_endian) = descr.ok_or_else(|| bad_header("missing key 'descr'"))?;
    let fortran_order = fortran_order.ok_or_else(|| bad_header("missing key 'fortran_order'"))?;
    let shape = shape.ok_or_else(|| bad_header("missing key 'shape'"))?;
    Ok(Header { dtype, big_endian, fortran_order, shape })
}

// ---------------------------------------------------------------------------------------------
// .npy writing
// ---------------------------------------------------------------------------------------------

fn invalid_input(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The header dictionary text as numpy writes it.
fn header_dict(dtype: DType, shape: &[usize]) -> String {
    let shape = match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        dims => {
            let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    };
    format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}", dtype.descr())
}

/// The `.npy` header (magic, version 1.0, or 2.0 if the dictionary needs it,
/// and the dictionary padded to a multiple of 64 bytes) of an array of
/// `dtype` and `shape`: what [`write_npy`] writes before the data, for
/// writers that stream the data after it.
pub fn npy_header(dtype: DType, shape: &[usize]) -> io::Result<Vec<u8>> {
    let dict = header_dict(dtype, shape);
    // magic(6) + version(2) + length(2 or 4) + dict + padding + '\n', a multiple of 64.
    let padded = |prefix: usize| (prefix + dict.len() + 1).div_ceil(64) * 64 - prefix;
    let (version, prefix) = if padded(10) <= usize::from(u16::MAX) { (1u8, 10) } else { (2u8, 12) };
    let header_len = padded(prefix);
    let mut header = Vec::with_capacity(prefix + header_len);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&[version, 0]);
    if version == 1 {
        header.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        let len = u32::try_from(header_len).map_err(|_| invalid_input("header too large".to_string()))?;
        header.extend_from_slice(&len.to_le_bytes());
    }
    header.extend_from_slice(dict.as_bytes());
    header.resize(prefix + header_len - 1, b' ');
    header.push(b'\n');
    Ok(header)
}

/// Serializes `array` as a `.npy` file (version 1.0, or 2.0 if the header needs it).
pub fn write_npy(array: &RawArray, out: &mut dyn Write) -> io::Result<()> {
    array.validate().map_err(|e| invalid_input(e.to_string()))?;
    out.write_all(&npy_header(array.dtype, &array.shape)?)?;
    out.write_all(&array.data)
}

/// Serializes `array` as `.npy` bytes.
pub fn npy_bytes(array: &RawArray) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(array.data.len() + 128);
    write_npy(array, &mut out)?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// CRC-32 (IEEE, as used by zip)
// ---------------------------------------------------------------------------------------------

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32 (IEEE 802.3 polynomial, reflected) of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    crc32_continue(0, data)
}

/// The CRC-32 of `a` followed by `data`, given `crc = crc32(a)` (so
/// `crc32_continue(0, data) == crc32(data)`): for data read in pieces.
pub fn crc32_continue(crc: u32, data: &[u8]) -> u32 {
    !data.iter().fold(!crc, |c, &b| CRC_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8))
}

// ---------------------------------------------------------------------------------------------
// .npz reading
// ---------------------------------------------------------------------------------------------

const SIG_LOCAL: u32 = 0x0403_4b50;
const SIG_CENTRAL: u32 = 0x0201_4b50;
const SIG_EOCD: u32 = 0x0605_4b50;
const SIG_ZIP64_EOCD: u32 = 0x0606_4b50;
const SIG_ZIP64_LOCATOR: u32 = 0x0706_4b50;

/// Random access to the bytes of an archive: a slice in memory, or a file read piecewise
/// ([`npz_members_with`]).
trait ArchiveBytes {
    /// Total length.
    fn size(&self) -> usize;
    /// Bytes `start .. start + n`, which the caller has checked lie within `size()`.
    fn read(&self, start: usize, n: usize) -> Result<Cow<'_, [u8]>, NpyError>;
}

impl ArchiveBytes for [u8] {
    fn size(&self) -> usize {
        self.len()
    }

    fn read(&self, start: usize, n: usize) -> Result<Cow<'_, [u8]>, NpyError> {
        Ok(Cow::Borrowed(&self[start..start + n]))
    }
}

/// An archive of `len` bytes read through positioned reads.
struct ReadAt<F> {
    len: usize,
    read_at: F,
}

impl<F: Fn(u64, &mut [u8]) -> io::Result<()>> ArchiveBytes for ReadAt<F> {
    fn size(&self) -> usize {
        self.len
    }

    fn read(&self, start: usize, n: usize) -> Result<Cow<'_, [u8]>, NpyError> {
        let mut buf = vec![0u8; n];
        (self.read_at)(start as u64, &mut buf)?;
        Ok(Cow::Owned(buf))
    }
}

/// Bounds-checked little-endian reads over archive bytes.
struct Cursor<'a, A: ArchiveBytes + ?Sized> {
    bytes: &'a A,
    pos: usize,
}

impl<'a, A: ArchiveBytes + ?Sized> Cursor<'a, A> {
    fn at(bytes: &'a A, pos: usize) -> Self {
        Cursor { bytes, pos }
    }

    /// Advances over `n` bytes, returning their range (checked against the length).
    fn skip(&mut self, n: usize) -> Result<std::ops::Range<usize>, NpyError> {
        let end = self.pos.checked_add(n).ok_or_else(|| bad_zip("offset overflow"))?;
        if end > self.bytes.size() {
            return Err(bad_zip("unexpected end of archive"));
        }
        let range = self.pos..end;
        self.pos = end;
        Ok(range)
    }

    fn take(&mut self, n: usize) -> Result<Cow<'a, [u8]>, NpyError> {
        let range = self.skip(n)?;
        self.bytes.read(range.start, n)
    }

    fn u16(&mut self) -> Result<u16, NpyError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, NpyError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, NpyError> {
        let b = self.take(8)?;
        let mut buf = [0u8; 8];
        buf.copy_from_slice(&b);
        Ok(u64::from_le_bytes(buf))
    }
}

fn to_usize(v: u64) -> Result<usize, NpyError> {
    usize::try_from(v).map_err(|_| bad_zip("size does not fit in memory"))
}

/// Locates the central directory: returns (entry count, offset).
fn find_central_directory<A: ArchiveBytes + ?Sized>(bytes: &A) -> Result<(u64, u64), NpyError> {
    const EOCD_LEN: usize = 22;
    let len = bytes.size();
    if len < EOCD_LEN {
        return Err(bad_zip("too short to be a zip archive"));
    }
    // The end record is followed by a comment of at most 65535 bytes.
    let lowest = len.saturating_sub(EOCD_LEN + usize::from(u16::MAX));
    let tail = bytes.read(lowest, len - lowest)?;
    let eocd = (0..=tail.len() - EOCD_LEN)
        .rev()
        .find(|&i| tail[i..i + 4] == SIG_EOCD.to_le_bytes())
        .ok_or_else(|| bad_zip("end of central directory record not found"))?
        + lowest;
    let mut c = Cursor::at(bytes, eocd + 4);
    let disk = c.u16()?;
    let cd_disk = c.u16()?;
    let _entries_on_disk = c.u16()?;
    let entries = c.u16()?;
    let _cd_size = c.u32()?;
    let cd_offset = c.u32()?;
    if entries == u16::MAX || cd_offset == u32::MAX {
        // ZIP64: the locator sits right before the end record.
        let loc = eocd.checked_sub(20).ok_or_else(|| bad_zip("missing ZIP64 locator"))?;
        let mut c = Cursor::at(bytes, loc);
        if c.u32()? != SIG_ZIP64_LOCATOR {
            return Err(bad_zip("missing ZIP64 end of central directory locator"));
        }
        let _disk = c.u32()?;
        let record = to_usize(c.u64()?)?;
        let mut c = Cursor::at(bytes, record);
        if c.u32()? != SIG_ZIP64_EOCD {
            return Err(bad_zip("bad ZIP64 end of central directory record"));
        }
        let _record_size = c.u64()?;
        let _made_by = c.u16()?;
        let _needed = c.u16()?;
        let disk = c.u32()?;
        let cd_disk = c.u32()?;
        let _entries_on_disk = c.u64()?;
        let entries = c.u64()?;
        let _cd_size = c.u64()?;
        let cd_offset = c.u64()?;
        if disk != 0 || cd_disk != 0 {
            return Err(bad_zip("multi-disk archives are not supported"));
        }
        return Ok((entries, cd_offset));
    }
    if disk != 0 || cd_disk != 0 {
        return Err(bad_zip("multi-disk archives are not supported"));
    }
    Ok((u64::from(entries), u64::from(cd_offset)))
}

/// One `.npy` member of a `.npz` archive, located by [`npz_members`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpzMember {
    /// The array name: the member name without `.npy`.
    pub name: String,
    /// The member is DEFLATE-compressed (`np.savez_compressed`); otherwise it is STORED and
    /// its bytes are the `.npy` file itself.
    pub compressed: bool,
    /// Offset of the member's (possibly compressed) bytes from the start of the archive.
    pub data_offset: usize,
    /// Number of (possibly compressed) bytes at `data_offset`; inside the archive.
    pub compressed_size: usize,
    /// Size of the member's `.npy` bytes once decompressed (equals `compressed_size` when
    /// STORED).
    pub size: usize,
    /// The CRC-32 the archive records for the decompressed bytes.
    pub crc32: u32,
}

/// Walks the central directory, calling `f` for each `.npy` member in archive order. Every
/// check of the directory entry and local header of a member happens before `f` sees it.
fn walk_npz<A: ArchiveBytes + ?Sized>(
    bytes: &A,
    mut f: impl FnMut(NpzMember) -> Result<(), NpyError>,
) -> Result<(), NpyError> {
    let (entries, cd_offset) = find_central_directory(bytes)?;
    let mut c = Cursor::at(bytes, to_usize(cd_offset)?);
    for _ in 0..entries {
        if c.u32()? != SIG_CENTRAL {
            return Err(bad_zip("bad central directory entry signature"));
        }
        let _made_by = c.u16()?;
        let _needed = c.u16()?;
        let flags = c.u16()?;
        let method = c.u16()?;
        let _time = c.u16()?;
        let _date = c.u16()?;
        let crc = c.u32()?;
        let mut compressed_size = u64::from(c.u32()?);
        let mut size = u64::from(c.u32()?);
        let name_len = usize::from(c.u16()?);
        let extra_len = usize::from(c.u16()?);
        let comment_len = usize::from(c.u16()?);
        let _disk_start = c.u16()?;
        let _internal_attr = c.u16()?;
        let _external_attr = c.u32()?;
        let mut local_offset = u64::from(c.u32()?);
        let name = String::from_utf8_lossy(&c.take(name_len)?).into_owned();
        let extra = c.take(extra_len)?;
        let extra: &[u8] = &extra;
        c.skip(comment_len)?;

        // ZIP64 extended information replaces the saturated 32-bit fields, in this order.
        let mut e = Cursor::at(extra, 0);
        while e.pos + 4 <= extra.len() {
            let id = e.u16()?;
            let len = usize::from(e.u16()?);
            let field = e.take(len)?;
            if id == 0x0001 {
                let mut f = Cursor::at(&*field, 0);
                if size == u64::from(u32::MAX) {
                    size = f.u64()?;
                }
                if compressed_size == u64::from(u32::MAX) {
                    compressed_size = f.u64()?;
                }
                if local_offset == u64::from(u32::MAX) {
                    local_offset = f.u64()?;
                }
            }
        }

        if name.ends_with('/') {
            continue; // directory entry
        }
        if flags & 0x1 != 0 {
            return Err(bad_zip(format!("member '{name}' is encrypted")));
        }
        let Some(array_name) = name.strip_suffix(".npy") else {
            return Err(bad_zip(format!("member '{name}' is not a .npy file")));
        };

        // The local header repeats name and extra field (possibly with different lengths).
        let mut l = Cursor::at(bytes, to_usize(local_offset)?);
        if l.u32()? != SIG_LOCAL {
            return Err(bad_zip(format!("bad local header signature for member '{name}'")));
        }
        l.skip(22)?;
        let local_name_len = usize::from(l.u16()?);
        let local_extra_len = usize::from(l.u16()?);
        l.skip(local_name_len)?;
        l.skip(local_extra_len)?;
        let data_offset = l.pos;
        let compressed = l.skip(to_usize(compressed_size)?)?;
        let size = to_usize(size)?;
        match method {
            0 => {
                if compressed.len() != size {
                    return Err(bad_zip(format!("stored member '{name}' has inconsistent sizes")));
                }
            }
            8 => {}
            m => {
                return Err(bad_zip(format!(
                    "member '{name}' uses unsupported compression method {m} (only STORED and DEFLATE)"
                )));
            }
        }
        f(NpzMember {
            name: array_name.to_string(),
            compressed: method == 8,
            data_offset,
            compressed_size: compressed.len(),
            size,
            crc32: crc,
        })?;
    }
    Ok(())
}

/// Locates the `.npy` members of a `.npz` archive, in archive order, without reading their
/// data: the central directory and local headers are checked, member data (and its CRC) is
/// not. Get a member's `.npy` bytes with [`npz_member_data`], or, for a STORED member, read
/// them in place at `data_offset .. data_offset + size`.
pub fn npz_members(bytes: &[u8]) -> Result<Vec<NpzMember>, NpyError> {
    let mut members = Vec::new();
    walk_npz(bytes, |m| {
        members.push(m);
        Ok(())
    })?;
    Ok(members)
}

/// Like [`npz_members`], for an archive of `len` bytes that `read_at(offset, buf)` reads
/// piecewise (filling all of `buf` from `offset`, like `FileExt::read_exact_at`): only the end
/// records, the central directory and the local headers are read, never member data.
pub fn npz_members_with(
    len: u64,
    read_at: impl Fn(u64, &mut [u8]) -> io::Result<()>,
) -> Result<Vec<NpzMember>, NpyError> {
    let archive = ReadAt { len: to_usize(len)?, read_at };
    let mut members = Vec::new();
    walk_npz(&archive, |m| {
        members.push(m);
        Ok(())
    })?;
    Ok(members)
}

/// The `.npy` bytes of `member` of the archive `bytes`: borrowed for a STORED member,
/// inflated for a DEFLATE one; the CRC-32 is checked either way.
pub fn npz_member_data<'a>(bytes: &'a [u8], member: &NpzMember) -> Result<Cow<'a, [u8]>, NpyError> {
    let name = format!("{}.npy", member.name);
    let compressed = member
        .data_offset
        .checked_add(member.compressed_size)
        .and_then(|end| bytes.get(member.data_offset..end))
        .ok_or_else(|| bad_zip("unexpected end of archive"))?;
    let size = member.size;
    let data: Cow<'a, [u8]> = if member.compressed {
        let data = miniz_oxide::inflate::decompress_to_vec_with_limit(compressed, size)
            .map_err(|e| bad_zip(format!("cannot inflate member '{name}': {e}")))?;
        if data.len() != size {
            return Err(bad_zip(format!(
                "member '{name}' inflated to {} bytes, expected {size}",
                data.len()
            )));
        }
        data.into()
    } else {
        if compressed.len() != size {
            return Err(bad_zip(format!("stored member '{name}' has inconsistent sizes")));
        }
        compressed.into()
    };
    if crc32(&data) != member.crc32 {
        return Err(bad_zip(format!("CRC-32 mismatch in member '{name}'")));
    }
    Ok(data)
}

/// Parses a `.npz` archive. Members must be `.npy` files; their names are returned without
/// the `.npy` suffix, in archive order.
pub fn read_npz(bytes: &[u8]) -> Result<Vec<(String, RawArray)>, NpyError> {
    let mut arrays = Vec::new();
    walk_npz(bytes, |member| {
        let data = npz_member_data(bytes, &member)?;
        let array = read_npy(&data)
            .map_err(|e| NpyError::Member { name: member.name.clone(), source: Box::new(e) })?;
        arrays.push((member.name, array));
        Ok(())
    })?;
    Ok(arrays)
}

// ---------------------------------------------------------------------------------------------
// .npz writing
// ---------------------------------------------------------------------------------------------

/// DOS date 1980-01-01, time 00:00:00: a fixed timestamp keeps archives reproducible.
const DOS_TIME: u16 = 0;
const DOS_DATE: u16 = (1 << 5) | 1;

/// The largest size or offset a zip archive without ZIP64 records holds.
pub(crate) const ZIP32_LIMIT: u64 = u32::MAX as u64 - 1;

/// One STORED member of a zip archive, as its local header and central
/// directory record describe it.
pub(crate) struct StoredEntry<'a> {
    /// The member's file name (`<name>.npy`).
    pub file_name: &'a str,
    /// CRC-32 of the member's bytes.
    pub crc: u32,
    /// The member's size in bytes.
    pub size: u32,
    /// Where its local header starts in the archive.
    pub offset: u32,
}

impl StoredEntry<'_> {
    /// The general-purpose flags: bit 11 for a UTF-8 name.
    fn flags(&self) -> u16 {
        if self.file_name.is_ascii() {
            0
        } else {
            0x800
        }
    }

    fn name_len(&self) -> io::Result<u16> {
        u16::try_from(self.file_name.len()).map_err(|_| invalid_input("name too long".into()))
    }

    /// The local file header, followed in the archive by the member's bytes.
    pub(crate) fn local_header(&self) -> io::Result<Vec<u8>> {
        let mut local = Vec::with_capacity(30 + self.file_name.len());
        local.extend_from_slice(&SIG_LOCAL.to_le_bytes());
        for v in [20u16, self.flags(), 0, DOS_TIME, DOS_DATE] {
            local.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.crc, self.size, self.size] {
            local.extend_from_slice(&v.to_le_bytes());
        }
        local.extend_from_slice(&self.name_len()?.to_le_bytes());
        local.extend_from_slice(&0u16.to_le_bytes());
        local.extend_from_slice(self.file_name.as_bytes());
        Ok(local)
    }

    /// The member's central directory record.
    pub(crate) fn central_record(&self) -> io::Result<Vec<u8>> {
        let mut central = Vec::with_capacity(46 + self.file_name.len());
        central.extend_from_slice(&SIG_CENTRAL.to_le_bytes());
        for v in [20u16, 20, self.flags(), 0, DOS_TIME, DOS_DATE] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.crc, self.size, self.size] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.name_len()?, 0, 0, 0, 0] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        central.extend_from_slice(&0u32.to_le_bytes()); // external attributes
        central.extend_from_slice(&self.offset.to_le_bytes());
        central.extend_from_slice(self.file_name.as_bytes());
        Ok(central)
    }
}

/// The end of central directory record of an archive of `count` members whose
/// central directory of `size` bytes starts at `offset`.
pub(crate) fn end_of_central_directory(count: usize, size: u32, offset: u32) -> io::Result<Vec<u8>> {
    let too_many = || invalid_input(format!("{count} members are too many for a non-ZIP64 .npz writer"));
    let count = u16::try_from(count).ok().filter(|&c| c != u16::MAX).ok_or_else(too_many)?;
    let mut eocd = Vec::with_capacity(22);
    eocd.extend_from_slice(&SIG_EOCD.to_le_bytes());
    for v in [0u16, 0, count, count] {
        eocd.extend_from_slice(&v.to_le_bytes());
    }
    eocd.extend_from_slice(&size.to_le_bytes());
    eocd.extend_from_slice(&offset.to_le_bytes());
    eocd.extend_from_slice(&0u16.to_le_bytes()); // comment length
    Ok(eocd)
}

/// Writes `arrays` as an uncompressed `.npz` archive (like `np.savez`); each array becomes a
/// member named `"<name>.npy"`.
pub fn write_npz(arrays: &[(String, RawArray)], out: &mut dyn Write) -> io::Result<()> {
    let too_big = || invalid_input("archive too large for a non-ZIP64 .npz writer".to_string());
    let fits = |n: u64| u32::try_from(n).ok().filter(|&n| u64::from(n) <= ZIP32_LIMIT).ok_or_else(too_big);
    let mut names = std::collections::HashSet::new();
    let mut central = Vec::new();
    let mut offset = 0u64;
    for (name, array) in arrays {
        if !names.insert(name.as_str()) {
            return Err(invalid_input(format!("duplicate .npz member name '{name}'")));
        }
        let file_name = format!("{name}.npy");
        let data = npy_bytes(array)?;
        let entry = StoredEntry {
            file_name: &file_name,
            crc: crc32(&data),
            size: fits(data.len() as u64)?,
            offset: fits(offset)?,
        };
        let local = entry.local_header()?;
        out.write_all(&local)?;
        out.write_all(&data)?;
        central.extend_from_slice(&entry.central_record()?);
        offset += (local.len() + data.len()) as u64;
    }
    let cd_size = fits(central.len() as u64)?;
    let eocd = end_of_central_directory(arrays.len(), cd_size, fits(offset)?)?;
    out.write_all(&central)?;
    out.write_all(&eocd)
}

// ---------------------------------------------------------------------------------------------
// Convenience: files and format detection
// ---------------------------------------------------------------------------------------------

/// Reads a whole data file, refusing (without opening it) anything but a
/// regular file: opening a FIFO with no writer would block forever, and a
/// device or directory holds no array.
pub fn read_regular_file(path: &Path) -> io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, not_a_regular_file(&meta)));
    }
    std::fs::read(path)
}

/// Why a file of this kind cannot be read as data: `is a directory, not a
/// regular file`, `is a FIFO (named pipe), not a regular file`.
pub fn not_a_regular_file(meta: &std::fs::Metadata) -> String {
    let kind = meta.file_type();
    #[cfg(unix)]
    let special = {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            Some("a FIFO (named pipe)")
        } else if kind.is_char_device() || kind.is_block_device() {
            Some("a device")
        } else if kind.is_socket() {
            Some("a socket")
        } else {
            None
        }
    };
    #[cfg(not(unix))]
    let special: Option<&str> = None;
    let what = match special {
        Some(what) => what,
        None if kind.is_dir() => "a directory",
        None => "not a file",
    };
    format!("is {what}, not a regular file")
}

/// Reads a `.npy` file.
pub fn read_npy_file(path: impl AsRef<Path>) -> Result<RawArray, NpyError> {
    read_npy(&read_regular_file(path.as_ref())?)
}

/// Writes a `.npy` file.
pub fn write_npy_file(path: impl AsRef<Path>, array: &RawArray) -> io::Result<()> {
    let mut out = io::BufWriter::new(std::fs::File::create(path)?);
    write_npy(array, &mut out)?;
    out.flush()
}

/// Reads a `.npz` file.
pub fn read_npz_file(path: impl AsRef<Path>) -> Result<Vec<(String, RawArray)>, NpyError> {
    read_npz(&read_regular_file(path.as_ref())?)
}

/// Writes an uncompressed `.npz` file.
pub fn write_npz_file(path: impl AsRef<Path>, arrays: &[(String, RawArray)]) -> io::Result<()> {
    let mut out = io::BufWriter::new(std::fs::File::create(path)?);
    write_npz(arrays, &mut out)?;
    out.flush()
}

/// Reads either format, detected from the content: a `.npz` yields its members, a `.npy`
/// yields a single array named `npy_name`.
pub fn read_arrays(bytes: &[u8], npy_name: &str) -> Result<Vec<(String, RawArray)>, NpyError> {
    if bytes.starts_with(b"PK") {
        read_npz(bytes)
    } else {
        Ok(vec![(npy_name.to_string(), read_npy(bytes)?)])
    }
}

/// Reads a `.npy` or `.npz` file; a `.npy` array is named after the file stem.
pub fn read_arrays_file(path: impl AsRef<Path>) -> Result<Vec<(String, RawArray)>, NpyError> {
    let path = path.as_ref();
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    read_arrays(&read_regular_file(path)?, &stem)
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// Test support shared with the data set reader's tests (`testing` feature).
#[cfg(any(test, feature = "testing"))]
/// Builds a zip archive by hand, in the layout Python's `zipfile` produces for
/// `np.savez_compressed`: DEFLATE members whose local headers carry ZIP64 extras with
/// saturated 32-bit sizes (numpy passes `force_zip64=True`).
pub fn deflate_zip(members: &[(&str, Vec<u8>)], zip64_local: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in members {
        let compressed = miniz_oxide::deflate::compress_to_vec(data, 6);
        let crc = crc32(data);
        let offset = out.len() as u32;
        let (local_c, local_u, extra) = if zip64_local {
            let mut extra = Vec::new();
            extra.extend_from_slice(&1u16.to_le_bytes());
            extra.extend_from_slice(&16u16.to_le_bytes());
            extra.extend_from_slice(&(data.len() as u64).to_le_bytes());
            extra.extend_from_slice(&(compressed.len() as u64).to_le_bytes());
            (u32::MAX, u32::MAX, extra)
        } else {
            (compressed.len() as u32, data.len() as u32, Vec::new())
        };
        out.extend_from_slice(&SIG_LOCAL.to_le_bytes());
        for v in [45u16, 0, 8, 0, 0x21] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [crc, local_c, local_u] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&extra);
        out.extend_from_slice(&compressed);

        central.extend_from_slice(&SIG_CENTRAL.to_le_bytes());
        for v in [45u16, 45, 0, 8, 0, 0x21] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [crc, compressed.len() as u32, data.len() as u32] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [name.len() as u16, 0, 0, 0, 0] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        central.extend_from_slice(&0u32.to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&SIG_EOCD.to_le_bytes());
    let n = members.len() as u16;
    for v in [0u16, 0, n, n] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(dtype: DType, shape: &[usize]) -> RawArray {
        let n = element_count(shape).unwrap();
        let data = match dtype {
            DType::F32 => RawArray::from_elements(
                shape.to_vec(),
                &(0..n).map(|i| i as f32 * 0.5 - 3.0).collect::<Vec<_>>(),
            ),
            DType::F64 => {
                RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| i as f64 / 3.0).collect::<Vec<_>>())
            }
            DType::I8 => RawArray::from_elements(
                shape.to_vec(),
                &(0..n).map(|i| (i as i8).wrapping_sub(100)).collect::<Vec<_>>(),
            ),
            DType::U8 => {
                RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| (i * 7) as u8).collect::<Vec<_>>())
            }
            DType::I16 => {
                RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| i as i16 * -300).collect::<Vec<_>>())
            }
            DType::I32 => RawArray::from_elements(
                shape.to_vec(),
                &(0..n).map(|i| i as i32 * -70_000).collect::<Vec<_>>(),
            ),
            DType::I64 => RawArray::from_elements(
                shape.to_vec(),
                &(0..n).map(|i| i as i64 * -(1 << 40)).collect::<Vec<_>>(),
            ),
            DType::Bool => {
                RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| i % 3 == 0).collect::<Vec<_>>())
            }
        };
        data.unwrap()
    }

    const SHAPES: &[&[usize]] = &[&[], &[0], &[5], &[2, 3], &[3, 0, 2], &[1, 3, 2, 2]];

    #[test]
    fn round_trip_every_dtype_and_shape() {
        for dtype in DType::ALL {
            for shape in SHAPES {
                let array = sample(dtype, shape);
                let bytes = npy_bytes(&array).unwrap();
                assert_eq!(bytes.len() % 64, array.data.len() % 64, "header aligned to 64");
                let back = read_npy(&bytes).unwrap();
                assert_eq!(back, array, "{dtype} {shape:?}");
            }
        }
    }

    #[test]
    fn typed_access() {
        let a = RawArray::from_elements(vec![2, 2], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(a.len(), 4);
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
        let err = a.to_vec::<i64>().unwrap_err();
        assert!(matches!(err, NpyError::DtypeMismatch { expected: DType::I64, found: DType::F32 }));
        assert!(RawArray::from_elements(vec![3], &[1u8, 2]).is_err());
        assert!(RawArray::new(DType::I32, vec![2], vec![0; 7]).is_err());
        let zero_d = RawArray::from_elements(vec![], &[7i16]).unwrap();
        assert_eq!(zero_d.len(), 1);
        assert!(RawArray::from_elements::<f64>(vec![0, 4], &[]).unwrap().is_empty());
    }

    #[test]
    fn header_matches_numpy_layout() {
        let a = RawArray::from_elements(vec![597, 64], &vec![0f32; 597 * 64]).unwrap();
        let bytes = npy_bytes(&a).unwrap();
        let expected_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (597, 64), }";
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 118);
        assert_eq!(&bytes[10..10 + expected_dict.len()], expected_dict.as_bytes());
        assert_eq!(bytes[127], b'\n');
        let one = npy_bytes(&sample(DType::I64, &[597])).unwrap();
        assert!(one[10..128].starts_with(b"{'descr': '<i8', 'fortran_order': False, 'shape': (597,), }"));
        let scalar = npy_bytes(&sample(DType::Bool, &[])).unwrap();
        assert!(scalar[10..].starts_with(b"{'descr': '|b1', 'fortran_order': False, 'shape': (), }"));
    }

    /// Builds a `.npy` file with an arbitrary header dict and payload.
    fn npy_with(version: (u8, u8), dict: &str, payload: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[version.0, version.1]);
        let header = format!("{dict}\n");
        if version.0 == 1 {
            out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn versions_2_and_3() {
        let payload: Vec<u8> = [1i32, -2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        for version in [(1, 0), (2, 0), (3, 0)] {
            let bytes =
                npy_with(version, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", &payload);
            let a = read_npy(&bytes).unwrap();
            assert_eq!(a.to_vec::<i32>().unwrap(), vec![1, -2, 3]);
        }
        let err = read_npy(&npy_with((4, 0), "{}", &[])).unwrap_err();
        assert!(matches!(err, NpyError::UnsupportedVersion(4, 0)));
        assert!(err.to_string().contains("4.0"));
        assert!(read_npy(&npy_with((1, 1), "{}", &[])).is_err());
    }

    #[test]
    fn header_variants() {
        let f = 1.5f32.to_le_bytes();
        // Key order, double quotes, no trailing comma, extra whitespace, Python 2 longs.
        for dict in [
            "{'shape': (1,), 'fortran_order': False, 'descr': '<f4'}",
            "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1,)}",
            "  { 'descr' : '<f4' ,'fortran_order':False,'shape':( 1 , ) , }  ",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1L,), }",
        ] {
            let a = read_npy(&npy_with((1, 0), dict, &f)).unwrap_or_else(|e| panic!("{dict}: {e}"));
            assert_eq!(a.shape, vec![1]);
            assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.5]);
        }
        // Single-byte types accept any byte-order marker; `=` is rejected for multi-byte ones.
        for descr in ["|u1", "<u1", "=u1", ">u1"] {
            let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2,), }}");
            assert_eq!(read_npy(&npy_with((1, 0), &dict, &[3, 4])).unwrap().data, vec![3, 4]);
        }
        let dict = "{'descr': '=f4', 'fortran_order': False, 'shape': (1,), }";
        assert!(matches!(read_npy(&npy_with((1, 0), dict, &f)), Err(NpyError::UnsupportedDtype(_))));
        // Bool bytes are normalized.
        let dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }";
        assert_eq!(read_npy(&npy_with((1, 0), dict, &[0, 5])).unwrap().data, vec![0, 1]);
    }

    #[test]
    fn big_endian_is_converted() {
        let payload: Vec<u8> = [1.25f64, -2.0].iter().flat_map(|v| v.to_be_bytes()).collect();
        let dict = "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }";
        let a = read_npy(&npy_with((1, 0), dict, &payload)).unwrap();
        assert_eq!(a.to_vec::<f64>().unwrap(), vec![1.25, -2.0]);
        let payload: Vec<u8> = [-5i16, 300].iter().flat_map(|v| v.to_be_bytes()).collect();
        let dict = "{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }";
        assert_eq!(
            read_npy(&npy_with((1, 0), dict, &payload)).unwrap().to_vec::<i16>().unwrap(),
            vec![-5, 300]
        );
    }

    #[test]
    fn fortran_order_is_transposed() {
        // C-order [[0,1,2],[3,4,5]] stored column-major is 0,3,1,4,2,5.
        let payload: Vec<u8> = [0i32, 3, 1, 4, 2, 5].iter().flat_map(|v| v.to_le_bytes()).collect();
        let dict = "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }";
        let a = read_npy(&npy_with((1, 0), dict, &payload)).unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.to_vec::<i32>().unwrap(), vec![0, 1, 2, 3, 4, 5]);
        // 3-d: element (i, j, k) has value 100i + 10j + k, stored column-major.
        let shape = [2usize, 3, 4];
        let mut fortran = Vec::new();
        for k in 0..4 {
            for j in 0..3 {
                for i in 0..2 {
                    fortran.push((100 * i + 10 * j + k) as u8);
                }
            }
        }
        let dict = "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3, 4), }";
        let a = read_npy(&npy_with((1, 0), dict, &fortran)).unwrap();
        let mut expected = Vec::new();
        for i in 0..shape[0] {
            for j in 0..shape[1] {
                for k in 0..shape[2] {
                    expected.push((100 * i + 10 * j + k) as u8);
                }
            }
        }
        assert_eq!(a.data, expected);
        // Empty and 1-d Fortran arrays are trivially fine.
        let dict = "{'descr': '|u1', 'fortran_order': True, 'shape': (0, 3), }";
        assert!(read_npy(&npy_with((1, 0), dict, &[])).unwrap().is_empty());
        let dict = "{'descr': '|u1', 'fortran_order': True, 'shape': (3,), }";
        assert_eq!(read_npy(&npy_with((1, 0), dict, &[1, 2, 3])).unwrap().data, vec![1, 2, 3]);
    }

    #[test]
    fn clear_errors() {
        let err_of = |dict: &str, payload: &[u8]| read_npy(&npy_with((1, 0), dict, payload)).unwrap_err();
        let e = err_of("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", &[0; 8]);
        assert!(matches!(&e, NpyError::UnsupportedDtype(d) if d == "<c8"));
        assert!(e.to_string().contains("'<c8'"), "{e}");
        let e = err_of("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", &[0; 4]);
        assert!(matches!(e, NpyError::UnsupportedDtype(_)), "{e}");
        for descr in ["<f2", "<u2", "<U3", "|O", "|S4", "f4", ""] {
            let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (1,), }}");
            assert!(matches!(err_of(&dict, &[0; 4]), NpyError::UnsupportedDtype(_)), "{descr}");
        }
        let e = err_of("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", &[0; 20]);
        assert!(matches!(e, NpyError::Truncated { expected: 24, got: 20, .. }), "{e}");
        assert!(e.to_string().contains("truncated"));
        let e = err_of("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", &[0; 5]);
        assert!(matches!(e, NpyError::SizeMismatch(_)), "{e}");
        let e =
            err_of("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", &[]);
        assert!(matches!(e, NpyError::SizeMismatch(_)), "{e}");
        let e =
            err_of("{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999999999999999,), }", &[]);
        assert!(matches!(e, NpyError::SizeMismatch(_)), "{e}");
        for dict in [
            "{'descr': '<f4', 'fortran_order': False}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
            "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
            "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': [1]}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} trailing",
            "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}",
            "{'descr: '<f4', 'fortran_order': False, 'shape': (1,)}",
            "",
            "{",
        ] {
            assert!(matches!(err_of(dict, &[0; 4]), NpyError::BadHeader(_)), "{dict}");
        }
        assert!(matches!(read_npy(b"PK\x03\x04 definitely not npy"), Err(NpyError::BadMagic)));
        assert!(matches!(read_npy(b""), Err(NpyError::Truncated { .. })));
        assert!(matches!(read_npy(b"hi"), Err(NpyError::BadMagic)));
        assert!(matches!(read_npy(b"\x93NUM"), Err(NpyError::Truncated { .. })));
        // Writing an inconsistent array is refused.
        let bad = RawArray { dtype: DType::F32, shape: vec![2], data: vec![0; 3] };
        assert_eq!(npy_bytes(&bad).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    /// Tiny deterministic generator for garbage inputs.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            self.0 >> 33
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = Lcg(42);
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            assert!(read_npy(&bytes).is_err());
            assert!(read_npz(&bytes).is_err());
            let mut with_magic = MAGIC.to_vec();
            with_magic.extend_from_slice(&bytes);
            let _ = read_npy(&with_magic);
        }
        // Every truncation and every single-byte corruption of valid files.
        let npy = npy_bytes(&sample(DType::I16, &[2, 3])).unwrap();
        let npz =
            npz_bytes(&[("a".into(), sample(DType::F32, &[3])), ("b".into(), sample(DType::U8, &[2, 2]))]);
        for file in [&npy, &npz] {
            for cut in 0..file.len() {
                let _ = read_npy(&file[..cut]);
                let _ = read_npz(&file[..cut]);
            }
            for i in 0..file.len() {
                for b in [0u8, 0xFF, b'(', b',', b'\'', rng.next() as u8] {
                    let mut m = file.clone();
                    m[i] = b;
                    let _ = read_npy(&m);
                    let _ = read_npz(&m);
                }
            }
        }
        for cut in 0..npy.len() {
            assert!(read_npy(&npy[..cut]).is_err());
        }
        for cut in 0..npz.len() {
            assert!(read_npz(&npz[..cut]).is_err());
        }
    }

    fn npz_bytes(arrays: &[(String, RawArray)]) -> Vec<u8> {
        let mut out = Vec::new();
        write_npz(arrays, &mut out).unwrap();
        out
    }

    #[test]
    fn crc32_known_values() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b"The quick brown fox jumps over the lazy dog"), 0x414F_A339);
    }

    #[test]
    fn npz_round_trip() {
        let arrays: Vec<(String, RawArray)> = DType::ALL
            .iter()
            .zip(SHAPES.iter().cycle())
            .enumerate()
            .map(|(i, (&dtype, shape))| (format!("arr_{i}"), sample(dtype, shape)))
            .collect();
        let bytes = npz_bytes(&arrays);
        assert_eq!(&bytes[..4], b"PK\x03\x04");
        assert_eq!(read_npz(&bytes).unwrap(), arrays);
        assert_eq!(read_arrays(&bytes, "x").unwrap(), arrays);
        assert!(read_npz(&npz_bytes(&[])).unwrap().is_empty());
        let dup = [("a".to_string(), sample(DType::U8, &[1])), ("a".to_string(), sample(DType::U8, &[1]))];
        assert!(write_npz(&dup, &mut Vec::new()).is_err());
        // Non-ASCII names survive (UTF-8 flag).
        let named = vec![("gewicht_ß".to_string(), sample(DType::F64, &[2]))];
        assert_eq!(read_npz(&npz_bytes(&named)).unwrap(), named);
    }

    #[test]
    fn npz_deflate() {
        let x = sample(DType::F32, &[4, 8]);
        let y = sample(DType::I64, &[3]);
        let members = [("x.npy", npy_bytes(&x).unwrap()), ("y.npy", npy_bytes(&y).unwrap())];
        for zip64_local in [false, true] {
            let zip = deflate_zip(&members, zip64_local);
            let read = read_npz(&zip).unwrap();
            assert_eq!(read, vec![("x".to_string(), x.clone()), ("y".to_string(), y.clone())]);
        }
        // Corrupting the compressed payload is detected (inflate failure or CRC mismatch).
        let mut zip = deflate_zip(&members, false);
        let data_start = 30 + "x.npy".len();
        zip[data_start + 10] ^= 0x55;
        assert!(matches!(read_npz(&zip), Err(NpyError::BadZip(_) | NpyError::Member { .. })));
        // Non-.npy members and unsupported methods are rejected by name.
        let zip = deflate_zip(&[("notes.txt", b"hello".to_vec())], false);
        let e = read_npz(&zip).unwrap_err();
        assert!(e.to_string().contains("notes.txt"), "{e}");
        let mut zip = deflate_zip(&[("x.npy", npy_bytes(&x).unwrap())], false);
        let cd = zip.len() - 22 - (46 + 5);
        zip[cd + 10] = 12; // bzip2
        let e = read_npz(&zip).unwrap_err();
        assert!(e.to_string().contains("compression method 12"), "{e}");
        // An invalid member is reported with its name.
        let zip = deflate_zip(&[("bad.npy", b"\x93NUMPY\x09\x00".to_vec())], false);
        let e = read_npz(&zip).unwrap_err();
        assert!(matches!(&e, NpyError::Member { name, .. } if name == "bad"), "{e}");
        assert!(e.to_string().contains("9.0"), "{e}");
    }

    // Archives written by Python's `zipfile` exactly as `np.savez` / `np.savez_compressed` do
    // (`ZipFile(..., allowZip64=True)`, `zipf.open(name, 'w', force_zip64=True)`), holding
    // a = float32 [[1.5, -2.0], [0.25, 8.0]] and b = int64 [4, 4, 8]. The streamed variant was
    // written to a non-seekable file, so its members use data descriptors.
    const PY_SAVEZ: &str = concat!(
        "504b03042d00000000000000210037e44249ffffffffffffffff05001400612e6e707901001000900000000000000090",
        "00000000000000934e554d5059010076007b276465736372273a20273c6634272c2027666f727472616e5f6f72646572",
        "273a2046616c73652c20277368617065273a2028322c2032292c207d2020202020202020202020202020202020202020",
        "20202020202020202020202020202020202020202020202020202020202020202020202020200a0000c03f000000c000",
        "00803e00000041504b03042d000000000000002100761f8d68ffffffffffffffff05001400622e6e7079010010009800",
        "0000000000009800000000000000934e554d5059010076007b276465736372273a20273c6938272c2027666f72747261",
        "6e5f6f72646572273a2046616c73652c20277368617065273a2028332c292c207d202020202020202020202020202020",
        "2020202020202020202020202020202020202020202020202020202020202020202020202020202020202020200a0400",
        "00000000000004000000000000000800000000000000504b01022d032d00000000000000210037e44249900000009000",
        "0000050000000000000000000000800100000000612e6e7079504b01022d032d000000000000002100761f8d68980000",
        "00980000000500000000000000000000008001c7000000622e6e7079504b050600000000020002006600000096010000",
        "0000",
    );

    const PY_SAVEZ_COMPRESSED: &str = concat!(
        "504b03042d00000008000000210037e44249ffffffffffffffff05001400612e6e707901001000900000000000000054",
        "000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2aea3a09e965f54529498179f5f94920a",
        "12774bcc294e058a17672416a402f91a463a0a469a3a0ab50a64032e068603f60c408281a1c10e483b0200504b03042d",
        "000000080000002100761f8d68ffffffffffffffff05001400622e6e70790100100098000000000000004c0000000000",
        "00009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9369a1aea3a09e965f54529498179f5f94920a12774bcc29",
        "4e058a17672416a402f91ac63a9a3a0ab50a14002e16060880d11c501a00504b01022d032d00000008000000210037e4",
        "42495400000090000000050000000000000000000000800100000000612e6e7079504b01022d032d0000000800000021",
        "00761f8d684c0000009800000005000000000000000000000080018b000000622e6e7079504b05060000000002000200",
        "660000000e0100000000",
    );

    const PY_SAVEZ_STREAMED: &str = concat!(
        "504b03042d00080008000000210000000000ffffffffffffffff05001400612e6e707901001000000000000000000000",
        "000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2aea3a09e965f54529498179f5f94920a",
        "12774bcc294e058a17672416a402f91a463a0a469a3a0ab50a64032e068603f60c408281a1c10e483b0200504b070837",
        "e4424954000000000000009000000000000000504b03042d00080008000000210000000000ffffffffffffffff050014",
        "00622e6e707901001000000000000000000000000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e",
        "9369a1aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a402f91ac63a9a3a0ab50a14002e160608",
        "80d11c501a00504b0708761f8d684c000000000000009800000000000000504b01022d032d00080008000000210037e4",
        "42495400000090000000050000000000000000000000800100000000612e6e7079504b01022d032d0008000800000021",
        "00761f8d684c000000980000000500000000000000000000008001a3000000622e6e7079504b05060000000002000200",
        "660000003e0100000000",
    );

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// A `read_at` over bytes in memory.
    fn reader(bytes: &[u8]) -> impl Fn(u64, &mut [u8]) -> io::Result<()> + '_ {
        move |offset, buf| {
            let start = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
            let src = start
                .checked_add(buf.len())
                .and_then(|end| bytes.get(start..end))
                .ok_or(io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(src);
            Ok(())
        }
    }

    fn same<T: PartialEq + fmt::Debug>(a: Result<T, NpyError>, b: Result<T, NpyError>) {
        match (a, b) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("{a:?} vs {b:?}"),
        }
    }

    #[test]
    fn headers_and_members_in_place() {
        // The header alone, from a prefix or piecewise, agrees with the full reader.
        for dtype in DType::ALL {
            for shape in SHAPES {
                let array = sample(dtype, shape);
                let bytes = npy_bytes(&array).unwrap();
                let header = read_npy_header(&bytes).unwrap();
                assert_eq!((header.dtype, &header.shape), (dtype, &array.shape));
                assert_eq!(header.data_offset + header.data_len, bytes.len());
                assert_eq!(&bytes[header.data_offset..], &array.data[..]);
                assert_eq!(read_npy_header(&bytes[..header.data_offset]).unwrap(), header);
                same(read_npy_header_with(bytes.len() as u64, reader(&bytes)), Ok(header));
            }
        }
        let npy = npy_bytes(&sample(DType::F64, &[3, 2])).unwrap();
        for cut in 0..npy.len() {
            let part = &npy[..cut];
            same(read_npy_header_with(cut as u64, reader(part)), read_npy_header(part));
        }
        // Members located in place, from the slice or piecewise, give what read_npz reads.
        let x = sample(DType::F32, &[4, 8]);
        let y = sample(DType::I64, &[3]);
        let stored = npz_bytes(&[("x".into(), x.clone()), ("y".into(), y.clone())]);
        let deflated =
            deflate_zip(&[("x.npy", npy_bytes(&x).unwrap()), ("y.npy", npy_bytes(&y).unwrap())], true);
        for zip in
            [stored.clone(), deflated, unhex(PY_SAVEZ), unhex(PY_SAVEZ_COMPRESSED), unhex(PY_SAVEZ_STREAMED)]
        {
            let members = npz_members(&zip).unwrap();
            same(npz_members_with(zip.len() as u64, reader(&zip)), Ok(members.clone()));
            let arrays: Vec<(String, RawArray)> = members
                .iter()
                .map(|m| (m.name.clone(), read_npy(&npz_member_data(&zip, m).unwrap()).unwrap()))
                .collect();
            assert_eq!(arrays, read_npz(&zip).unwrap());
        }
        let members = npz_members(&stored).unwrap();
        assert!(members.iter().all(|m| !m.compressed && m.size == m.compressed_size));
        let m = &members[1];
        assert_eq!(read_npy(&stored[m.data_offset..m.data_offset + m.size]).unwrap(), y);
        // Truncated archives fail alike.
        for cut in 0..stored.len() {
            let part = &stored[..cut];
            same(npz_members_with(cut as u64, reader(part)), npz_members(part));
        }
    }

    #[test]
    fn reads_python_zipfile_archives() {
        for fixture in [PY_SAVEZ, PY_SAVEZ_COMPRESSED, PY_SAVEZ_STREAMED] {
            let arrays = read_npz(&unhex(fixture)).unwrap();
            assert_eq!(arrays.len(), 2);
            assert_eq!(arrays[0].0, "a");
            assert_eq!(arrays[0].1.shape, vec![2, 2]);
            assert_eq!(arrays[0].1.to_vec::<f32>().unwrap(), vec![1.5, -2.0, 0.25, 8.0]);
            assert_eq!(arrays[1].0, "b");
            assert_eq!(arrays[1].1.shape, vec![3]);
            assert_eq!(arrays[1].1.to_vec::<i64>().unwrap(), vec![4, 4, 8]);
        }
    }

    fn reference(name: &str) -> Option<RawArray> {
        let path = Path::new("/work/shared/models/digits_mlp").join(name);
        if !path.exists() {
            eprintln!("skipping: {} not found", path.display());
            return None;
        }
        Some(read_npy_file(&path).unwrap())
    }

    #[test]
    fn reads_reference_files() {
        if let Some(a) = reference("test.npy") {
            assert_eq!((a.dtype, a.shape.as_slice()), (DType::F32, &[597, 64][..]));
            let v = a.to_vec::<f32>().unwrap();
            assert_eq!(&v[..5], &[0.0, 0.0, 0.0, 0.3125, 1.0]);
            assert!(v.iter().all(|x| (0.0..=1.0).contains(x)));
        }
        if let Some(a) = reference("calib.npy") {
            assert_eq!((a.dtype, a.shape.as_slice()), (DType::F32, &[200, 64][..]));
            assert_eq!(&a.to_vec::<f32>().unwrap()[..5], &[0.0, 0.0, 0.0, 0.75, 1.0]);
        }
        if let Some(a) = reference("ref_fp32.npy") {
            assert_eq!((a.dtype, a.shape.as_slice()), (DType::F32, &[597, 10][..]));
            assert!(a.to_vec::<f32>().unwrap().iter().all(|x| x.is_finite()));
        }
        if let Some(a) = reference("test_labels.npy") {
            assert_eq!((a.dtype, a.shape.as_slice()), (DType::I64, &[597][..]));
            let labels = a.to_vec::<i64>().unwrap();
            assert_eq!(&labels[..5], &[4, 4, 8, 2, 7]);
            assert_eq!(labels.iter().sum::<i64>(), 2619);
            // Re-serializing reproduces numpy's file byte for byte.
            let original = std::fs::read("/work/shared/models/digits_mlp/test_labels.npy").unwrap();
            assert_eq!(npy_bytes(&a).unwrap(), original);
        }
    }

    #[test]
    fn files_round_trip() {
        let dir = qopt_ir_core::ScratchDir::new("npy-test");
        let a = sample(DType::F32, &[2, 3]);
        let npy = dir.join("weights.npy");
        write_npy_file(&npy, &a).unwrap();
        assert_eq!(read_npy_file(&npy).unwrap(), a);
        assert_eq!(read_arrays_file(&npy).unwrap(), vec![("weights".to_string(), a.clone())]);
        let npz = dir.join("all.npz");
        let arrays = vec![("w".to_string(), a), ("b".to_string(), sample(DType::I32, &[3]))];
        write_npz_file(&npz, &arrays).unwrap();
        assert_eq!(read_npz_file(&npz).unwrap(), arrays);
        assert!(matches!(read_npy_file(dir.join("missing.npy")), Err(NpyError::Io(_))));
    }
}
