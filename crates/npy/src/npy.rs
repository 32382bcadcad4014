//! The `.npy` format: header parsing (versions 1.0 to 3.0, big-endian and
//! Fortran-order input) and writing (version 1.0, or 2.0 for huge headers,
//! padded like NumPy).

use crate::array::{byte_count, RawArray};
use crate::dtype::DType;
use crate::error::{bad_header, NpyError};
use std::io::{self, Write};

pub(crate) const MAGIC: &[u8; 6] = b"\x93NUMPY";

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
            ("descr", Value::Str(s)) => descr = Some(dtype_from_descr(&s)?),
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

pub(crate) fn invalid_input(msg: String) -> io::Error {
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

/// Parses a NumPy type string. Returns the dtype and whether the data is big-endian.
fn dtype_from_descr(descr: &str) -> Result<(DType, bool), NpyError> {
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
