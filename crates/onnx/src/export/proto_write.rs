//! The protobuf wire format, encoding: the counterpart of [`crate::proto`]'s
//! reader, just enough to write ONNX files without `protoc` or generated code.
//!
//! [`Encoder`] appends fields to one message: varints (wire type 0) for
//! integers and enums, fixed 32-bit little-endian values (5) for floats, and
//! length-delimited byte strings (2) for strings, bytes, packed repeated
//! scalars and sub-messages. A sub-message is encoded into its own encoder
//! and then appended with its length ([`Encoder::message`]); the nesting
//! follows the ONNX schema, so it is a handful of levels deep whatever the
//! model.
//!
//! Invariants: negative integers are written as ten-byte two's complement
//! varints (protobuf's `int32` and `int64`), which the reader reads back
//! exactly; every length is the exact byte count that follows.

/// The fields of one message being encoded.
#[derive(Clone, Debug, Default)]
pub(crate) struct Encoder {
    bytes: Vec<u8>,
}

/// Wire type of varint fields.
const VARINT: u8 = 0;
/// Wire type of length-delimited fields.
const LENGTH_DELIMITED: u8 = 2;
/// Wire type of 32-bit fields.
const FIXED32: u8 = 5;

impl Encoder {
    /// An empty message.
    pub fn new() -> Encoder {
        Encoder::default()
    }

    /// The encoded fields.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    fn varint(&mut self, mut value: u64) {
        loop {
            let low = (value & 0x7F) as u8;
            value >>= 7;
            if value == 0 {
                self.bytes.push(low);
                return;
            }
            self.bytes.push(low | 0x80);
        }
    }

    fn key(&mut self, number: u32, wire_type: u8) {
        self.varint(u64::from(number) << 3 | u64::from(wire_type));
    }

    /// An `int32`, `int64` or enum field (negative values as two's complement).
    pub fn int(&mut self, number: u32, value: i64) {
        self.key(number, VARINT);
        self.varint(value as u64);
    }

    /// A `float` field.
    pub fn float(&mut self, number: u32, value: f32) {
        self.key(number, FIXED32);
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    /// A `bytes` field.
    pub fn bytes(&mut self, number: u32, value: &[u8]) {
        self.key(number, LENGTH_DELIMITED);
        self.varint(value.len() as u64);
        self.bytes.extend_from_slice(value);
    }

    /// A `string` field.
    pub fn string(&mut self, number: u32, value: &str) {
        self.bytes(number, value.as_bytes());
    }

    /// A sub-message field whose fields `fill` writes.
    pub fn message(&mut self, number: u32, fill: impl FnOnce(&mut Encoder)) {
        let mut inner = Encoder::new();
        fill(&mut inner);
        self.bytes(number, &inner.bytes);
    }

    /// A packed repeated `int64` field (nothing when `values` is empty).
    pub fn packed_ints(&mut self, number: u32, values: &[i64]) {
        if values.is_empty() {
            return;
        }
        let mut inner = Encoder::new();
        for &v in values {
            inner.varint(v as u64);
        }
        self.bytes(number, &inner.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Reader, WireValue};

    #[test]
    fn the_reader_reads_back_what_the_encoder_writes() {
        let mut e = Encoder::new();
        e.int(1, -2);
        e.int(2, 300);
        e.float(3, 0.5);
        e.string(4, "conv");
        e.message(5, |m| m.int(1, 7));
        e.packed_ints(6, &[1, -1, 1 << 40]);
        let bytes = e.into_bytes();
        let mut r = Reader::new(&bytes);
        let mut fields = Vec::new();
        while let Some(f) = r.next_field().unwrap() {
            fields.push(f);
        }
        assert_eq!(fields.len(), 6);
        assert_eq!(fields[0].as_i64(), Ok(-2));
        assert_eq!(fields[1].as_i64(), Ok(300));
        assert_eq!(fields[2].as_f32(), Ok(0.5));
        assert_eq!(fields[3].as_str(), Ok("conv"));
        let mut inner = fields[4].message().unwrap();
        assert_eq!(inner.next_field().unwrap().unwrap().value, WireValue::Varint(7));
        let mut ints = Vec::new();
        fields[5].push_i64s(&mut ints).unwrap();
        assert_eq!(ints, [1, -1, 1 << 40]);
    }
}
