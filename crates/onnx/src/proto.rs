//! The protobuf wire format, decoding only: just enough to read ONNX files
//! without `protoc` or generated code.
//!
//! A message is a sequence of fields, each a key varint (`number << 3 |
//! wire_type`) and a payload: a varint (type 0), 8 little-endian bytes (1), a
//! length-delimited byte string (2: strings, bytes, sub-messages and packed
//! repeated scalars) or 4 little-endian bytes (5). [`Reader`] walks the fields
//! of one message; sub-messages are read with a fresh reader over their bytes
//! ([`Field::message`]), so decoding never recurses here. Callers skip fields
//! they do not know simply by ignoring them.
//!
//! Invariants: every read is bounds-checked; truncated input, a length past
//! the end of the message, a varint longer than ten bytes or wider than 64
//! bits, field number 0 and the group wire types (3, 4) and unknown ones (6,
//! 7) are errors with the byte offset in the whole input, never a panic.

use std::fmt;

/// A malformed byte sequence: where (byte offset in the whole input), what,
/// and in which message it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Offset of the offending byte from the start of the input.
    pub offset: usize,
    /// What is wrong, lower case.
    pub message: String,
    /// The innermost message being decoded (`NodeProto`), when known.
    pub within: Option<&'static str>,
}

impl DecodeError {
    fn new(offset: usize, message: impl Into<String>) -> DecodeError {
        DecodeError { offset, message: message.into(), within: None }
    }

    /// Names the message being decoded, unless an inner one is already named.
    pub fn within(mut self, message: &'static str) -> DecodeError {
        self.within.get_or_insert(message);
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.message)?;
        if let Some(within) = self.within {
            write!(f, " (in {within})")?;
        }
        Ok(())
    }
}

impl std::error::Error for DecodeError {}

/// The payload of one field, by wire type.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WireValue<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1: 8 little-endian bytes.
    Fixed64(u64),
    /// Wire type 2: a length-delimited byte string.
    Bytes(&'a [u8]),
    /// Wire type 5: 4 little-endian bytes.
    Fixed32(u32),
}

impl WireValue<'_> {
    fn kind(&self) -> &'static str {
        match self {
            WireValue::Varint(_) => "a varint",
            WireValue::Fixed64(_) => "a 64-bit value",
            WireValue::Bytes(_) => "a length-delimited value",
            WireValue::Fixed32(_) => "a 32-bit value",
        }
    }
}

/// One field of a message.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    /// The field number (1 or more).
    pub number: u32,
    /// The payload.
    pub value: WireValue<'a>,
    /// Offset of the payload in the whole input.
    pub offset: usize,
}

impl<'a> Field<'a> {
    fn mismatch(&self, want: &str) -> DecodeError {
        DecodeError::new(
            self.offset,
            format!("field {} should be {want}, found {}", self.number, self.value.kind()),
        )
    }

    /// A varint field as an unsigned 64-bit integer.
    pub fn as_u64(&self) -> Result<u64, DecodeError> {
        match self.value {
            WireValue::Varint(v) => Ok(v),
            _ => Err(self.mismatch("a varint")),
        }
    }

    /// A varint field as `int64` (two's complement).
    pub fn as_i64(&self) -> Result<i64, DecodeError> {
        self.as_u64().map(|v| v as i64)
    }

    /// A varint field as `int32` (negative values are sign-extended to ten
    /// bytes on the wire; the low 32 bits are the value).
    pub fn as_i32(&self) -> Result<i32, DecodeError> {
        self.as_u64().map(|v| v as u32 as i32)
    }

    /// A 32-bit field as `float`.
    pub fn as_f32(&self) -> Result<f32, DecodeError> {
        match self.value {
            WireValue::Fixed32(v) => Ok(f32::from_bits(v)),
            _ => Err(self.mismatch("a 32-bit float")),
        }
    }

    /// A length-delimited field's bytes.
    pub fn as_bytes(&self) -> Result<&'a [u8], DecodeError> {
        match self.value {
            WireValue::Bytes(b) => Ok(b),
            _ => Err(self.mismatch("length-delimited")),
        }
    }

    /// A length-delimited field as UTF-8 text.
    pub fn as_str(&self) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(self.as_bytes()?).map_err(|e| {
            DecodeError::new(
                self.offset + e.valid_up_to(),
                format!("field {} is not valid UTF-8 text", self.number),
            )
        })
    }

    /// A length-delimited field as an owned string.
    pub fn as_string(&self) -> Result<String, DecodeError> {
        self.as_str().map(str::to_string)
    }

    /// A reader over the fields of a sub-message.
    pub fn message(&self) -> Result<Reader<'a>, DecodeError> {
        Ok(Reader { buf: self.as_bytes()?, pos: 0, base: self.offset })
    }

    /// Appends the `int64` values of a repeated field, packed or not.
    pub fn push_i64s(&self, out: &mut Vec<i64>) -> Result<(), DecodeError> {
        match self.value {
            WireValue::Bytes(b) => {
                let mut r = Reader { buf: b, pos: 0, base: self.offset };
                while !r.at_end() {
                    out.push(r.read_varint()? as i64);
                }
                Ok(())
            }
            _ => {
                out.push(self.as_i64()?);
                Ok(())
            }
        }
    }

    /// Appends the `int32` values of a repeated field, packed or not.
    pub fn push_i32s(&self, out: &mut Vec<i32>) -> Result<(), DecodeError> {
        match self.value {
            WireValue::Bytes(b) => {
                let mut r = Reader { buf: b, pos: 0, base: self.offset };
                while !r.at_end() {
                    out.push(r.read_varint()? as u32 as i32);
                }
                Ok(())
            }
            _ => {
                out.push(self.as_i32()?);
                Ok(())
            }
        }
    }

    /// Appends the `uint64` values of a repeated field, packed or not.
    pub fn push_u64s(&self, out: &mut Vec<u64>) -> Result<(), DecodeError> {
        match self.value {
            WireValue::Bytes(b) => {
                let mut r = Reader { buf: b, pos: 0, base: self.offset };
                while !r.at_end() {
                    out.push(r.read_varint()?);
                }
                Ok(())
            }
            _ => {
                out.push(self.as_u64()?);
                Ok(())
            }
        }
    }

    /// Appends the `float` values of a repeated field, packed or not.
    pub fn push_f32s(&self, out: &mut Vec<f32>) -> Result<(), DecodeError> {
        match self.value {
            WireValue::Bytes(b) => {
                let chunks = self.packed_chunks::<4>(b)?;
                out.extend(chunks.map(f32::from_le_bytes));
                Ok(())
            }
            _ => {
                out.push(self.as_f32()?);
                Ok(())
            }
        }
    }

    /// Appends the `double` values of a repeated field, packed or not.
    pub fn push_f64s(&self, out: &mut Vec<f64>) -> Result<(), DecodeError> {
        match self.value {
            WireValue::Bytes(b) => {
                let chunks = self.packed_chunks::<8>(b)?;
                out.extend(chunks.map(f64::from_le_bytes));
                Ok(())
            }
            WireValue::Fixed64(v) => {
                out.push(f64::from_bits(v));
                Ok(())
            }
            _ => Err(self.mismatch("a 64-bit double")),
        }
    }

    /// The `N`-byte elements of a packed fixed-width field.
    fn packed_chunks<const N: usize>(
        &self,
        bytes: &'a [u8],
    ) -> Result<impl Iterator<Item = [u8; N]> + 'a, DecodeError> {
        if !bytes.len().is_multiple_of(N) {
            return Err(DecodeError::new(
                self.offset,
                format!(
                    "packed field {} has {} bytes, not a multiple of its {N}-byte elements",
                    self.number,
                    bytes.len()
                ),
            ));
        }
        Ok(bytes.chunks_exact(N).map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            a
        }))
    }
}

/// Reads the fields of one message in order.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf` in the whole input, for error positions.
    base: usize,
}

impl<'a> Reader<'a> {
    /// A reader over a whole top-level message.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0, base: 0 }
    }

    /// True when every field has been read.
    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn offset(&self) -> usize {
        self.base.saturating_add(self.pos)
    }

    /// The next field, or `None` at the end of the message.
    pub fn next_field(&mut self) -> Result<Option<Field<'a>>, DecodeError> {
        if self.at_end() {
            return Ok(None);
        }
        let key_offset = self.offset();
        let key = self.read_varint()?;
        let number = key >> 3;
        if number == 0 || number > u64::from(u32::MAX >> 3) {
            return Err(DecodeError::new(key_offset, format!("invalid field number {number}")));
        }
        let number = number as u32;
        let offset = self.offset();
        let value = match key & 7 {
            0 => WireValue::Varint(self.read_varint()?),
            1 => WireValue::Fixed64(u64::from_le_bytes(self.take_array::<8>()?)),
            2 => {
                let len = self.read_varint()?;
                let len = usize::try_from(len).ok().filter(|&l| l <= self.buf.len() - self.pos).ok_or_else(
                    || {
                        DecodeError::new(
                            offset,
                            format!(
                                "field {number} says it has {len} bytes but only {} remain",
                                self.buf.len() - self.pos
                            ),
                        )
                    },
                )?;
                let payload_offset = self.offset();
                let bytes = &self.buf[self.pos..self.pos + len];
                self.pos += len;
                return Ok(Some(Field { number, value: WireValue::Bytes(bytes), offset: payload_offset }));
            }
            5 => WireValue::Fixed32(u32::from_le_bytes(self.take_array::<4>()?)),
            3 | 4 => {
                return Err(DecodeError::new(
                    key_offset,
                    format!("field {number} uses the group wire type, which ONNX never uses"),
                ))
            }
            t => {
                return Err(DecodeError::new(key_offset, format!("invalid wire type {t} in field {number}")))
            }
        };
        Ok(Some(Field { number, value, offset }))
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let rest = &self.buf[self.pos.min(self.buf.len())..];
        let Some(bytes) = rest.get(..N) else {
            return Err(DecodeError::new(
                self.offset(),
                format!("truncated input: a {N}-byte value needs {N} bytes, {} remain", rest.len()),
            ));
        };
        let mut a = [0u8; N];
        a.copy_from_slice(bytes);
        self.pos += N;
        Ok(a)
    }

    /// A base-128 varint of at most ten bytes that fits 64 bits.
    fn read_varint(&mut self) -> Result<u64, DecodeError> {
        let start = self.offset();
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(DecodeError::new(start, "truncated input: a varint runs past the end"));
            };
            self.pos += 1;
            let bits = u64::from(byte & 0x7F);
            // The tenth byte holds bit 63 only.
            if i == 9 && bits > 1 {
                return Err(DecodeError::new(start, "varint does not fit in 64 bits"));
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::new(start, "varint is longer than ten bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_byte_varints() {
        let mut r = Reader::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]);
        assert_eq!(r.read_varint(), Ok(u64::MAX));
        let mut r = Reader::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02]);
        assert_eq!(r.read_varint().unwrap_err().message, "varint does not fit in 64 bits");
    }
}
