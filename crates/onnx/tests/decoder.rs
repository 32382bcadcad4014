//! The protobuf decoder on hand-built byte strings: every wire type, packed
//! and unpacked repeated scalars, unknown fields skipped, and every kind of
//! malformed input reported as an error with its byte offset.

mod common;

use common::{varint, Msg};
use qopt_onnx::{decode_model, Reader, WireValue};

/// Every field of `bytes` as (number, value), or the first error's text.
fn fields(bytes: &[u8]) -> Result<Vec<(u32, WireValue<'_>)>, String> {
    let mut r = Reader::new(bytes);
    let mut out = Vec::new();
    while let Some(f) = r.next_field().map_err(|e| e.to_string())? {
        out.push((f.number, f.value));
    }
    Ok(out)
}

#[test]
fn reads_every_wire_type() {
    let mut bytes = vec![0x08, 0x96, 0x01]; // field 1, varint 150
    bytes.extend([0x11, 1, 2, 3, 4, 5, 6, 7, 8]); // field 2, fixed64
    bytes.extend([0x1A, 3, b'a', b'b', b'c']); // field 3, "abc"
    bytes.extend([0x25, 0, 0, 0x80, 0x3F]); // field 4, fixed32 1.0f
    assert_eq!(
        fields(&bytes).unwrap(),
        [
            (1, WireValue::Varint(150)),
            (2, WireValue::Fixed64(0x0807_0605_0403_0201)),
            (3, WireValue::Bytes(b"abc")),
            (4, WireValue::Fixed32(0x3F80_0000)),
        ]
    );
}

#[test]
fn varints_of_every_length() {
    for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), i64::MAX as u64, u64::MAX] {
        let mut bytes = vec![0x08];
        bytes.extend(varint(v));
        assert_eq!(fields(&bytes).unwrap(), [(1, WireValue::Varint(v))], "{v}");
    }
    // Negative int64 / int32 values take ten bytes.
    let m = Msg::new().int(1, -1);
    assert_eq!(m.0.len(), 11);
    assert_eq!(fields(&m.0).unwrap(), [(1, WireValue::Varint(u64::MAX))]);
}

#[test]
fn malformed_input_is_an_error_with_its_offset() {
    let cases: &[(&[u8], &str)] = &[
        (&[0x08], "at byte 1: truncated input: a varint runs past the end"),
        (&[0x08, 0x80, 0x80], "at byte 1: truncated input: a varint runs past the end"),
        (&[0x80], "at byte 0: truncated input: a varint runs past the end"),
        (&[0x11, 1, 2, 3], "at byte 1: truncated input: a 8-byte value needs 8 bytes, 3 remain"),
        (&[0x25, 1], "at byte 1: truncated input: a 4-byte value needs 4 bytes, 1 remain"),
        (&[0x1A, 5, b'a'], "at byte 1: field 3 says it has 5 bytes but only 1 remain"),
        (
            &[0x1A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
            "at byte 1: field 3 says it has 18446744073709551615 bytes but only 0 remain",
        ),
        (&[0x0B], "at byte 0: field 1 uses the group wire type, which ONNX never uses"),
        (&[0x0C], "at byte 0: field 1 uses the group wire type, which ONNX never uses"),
        (&[0x0E], "at byte 0: invalid wire type 6 in field 1"),
        (&[0x0F], "at byte 0: invalid wire type 7 in field 1"),
        (&[0x00, 0x00], "at byte 0: invalid field number 0"),
        (
            &[0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F],
            "at byte 1: varint does not fit in 64 bits",
        ),
        (
            &[0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
            "at byte 1: varint does not fit in 64 bits",
        ),
        (&[0xF8, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], "at byte 0: invalid field number 8589934591"),
    ];
    for (bytes, expected) in cases {
        assert_eq!(fields(bytes).unwrap_err(), *expected, "{bytes:x?}");
    }
}

#[test]
fn unknown_fields_are_skipped() {
    // ModelProto with unknown fields of each wire type around ir_version.
    let mut bytes = Msg::new().int(99, 5).bytes(98, b"junk").f32(97, 1.0).0;
    bytes.extend(varint(96 << 3 | 1)); // field 96, fixed64
    bytes.extend([1, 2, 3, 4, 5, 6, 7, 8]);
    bytes.extend(Msg::new().int(1, 8).0);
    let decoded = decode_model(&bytes).unwrap();
    assert_eq!(decoded.ir_version, 8);
    assert!(decoded.graph.is_none());
}

#[test]
fn packed_and_unpacked_repeated_fields_agree() {
    // TensorProto dims (1, int64), float_data (4), int32_data (5), int64_data (7), double_data (10).
    let packed = Msg::new()
        .packed_i64(1, &[2, 3])
        .packed_f32(4, &[1.5, -2.0])
        .packed_i64(5, &[-1, 7])
        .packed_i64(7, &[i64::MIN, 4])
        .bytes(10, &[0.25f64.to_le_bytes(), 8.0f64.to_le_bytes()].concat());
    let mut unpacked = Msg::new().int(1, 2).int(1, 3).f32(4, 1.5).f32(4, -2.0).int(5, -1).int(5, 7);
    unpacked = unpacked.int(7, i64::MIN).int(7, 4);
    let mut raw = unpacked.0.clone();
    for v in [0.25f64, 8.0] {
        raw.push(10 << 3 | 1);
        raw.extend(v.to_le_bytes());
    }
    for bytes in [packed.0, raw] {
        let model = Msg::new().msg(7, &Msg::new().bytes(5, &bytes));
        let decoded = decode_model(&model.0).unwrap();
        let t = &decoded.graph.unwrap().initializer[0];
        assert_eq!(t.dims, [2, 3]);
        assert_eq!(t.float_data, [1.5, -2.0]);
        assert_eq!(t.int32_data, [-1, 7]);
        assert_eq!(t.int64_data, [i64::MIN, 4]);
        assert_eq!(t.double_data, [0.25, 8.0]);
    }
}

#[test]
fn malformed_messages_name_the_message() {
    // A packed float field whose length is not a multiple of 4, inside a tensor.
    let tensor = Msg::new().bytes(4, &[0, 0, 0]);
    let model = Msg::new().msg(7, &Msg::new().msg(5, &tensor));
    assert_eq!(
        decode_model(&model.0).unwrap_err().to_string(),
        "at byte 6: packed field 4 has 3 bytes, not a multiple of its 4-byte elements (in TensorProto)"
    );
    // A node name that is a varint instead of a string.
    let model = Msg::new().msg(7, &Msg::new().msg(1, &Msg::new().int(3, 1)));
    assert_eq!(
        decode_model(&model.0).unwrap_err().to_string(),
        "at byte 5: field 3 should be length-delimited, found a varint (in NodeProto)"
    );
    // Invalid UTF-8 in an op type.
    let model = Msg::new().msg(7, &Msg::new().msg(1, &Msg::new().bytes(4, &[b'R', 0xFF])));
    assert_eq!(
        decode_model(&model.0).unwrap_err().to_string(),
        "at byte 7: field 4 is not valid UTF-8 text (in NodeProto)"
    );
    // A sub-message whose inner length runs past its own end.
    let model = Msg::new().msg(7, &Msg(vec![0x0A, 10, 0x08]));
    assert_eq!(
        decode_model(&model.0).unwrap_err().to_string(),
        "at byte 3: field 1 says it has 10 bytes but only 1 remain (in GraphProto)"
    );
    // Two graphs.
    let graph = Msg::new().str(2, "g");
    let model = Msg::new().msg(7, &graph).msg(7, &graph);
    assert!(decode_model(&model.0).unwrap_err().to_string().contains("more than one graph"));
}

#[test]
fn subgraphs_are_recorded_not_decoded() {
    // A node with a GRAPH attribute whose body is garbage: decoding does not look inside.
    let attr = Msg::new().str(1, "then_branch").int(20, 5).bytes(6, &[0xFF, 0xFF]);
    let node = Msg::new().str(4, "If").msg(5, &attr);
    let model = Msg::new().msg(7, &Msg::new().msg(1, &node));
    let decoded = decode_model(&model.0).unwrap();
    assert_eq!(decoded.graph.unwrap().node[0].attribute[0].subgraphs.len(), 1);
}

#[test]
fn every_prefix_of_a_model_decodes_or_errors() {
    let bytes =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/models/digits_cnn/model.onnx"))
            .unwrap();
    let full = decode_model(&bytes).unwrap();
    let step = (bytes.len() / 997).max(1);
    let mut errors = 0;
    for len in (0..bytes.len()).step_by(step) {
        if let Err(e) = decode_model(&bytes[..len]) {
            assert!(e.offset <= len, "{e} for a {len}-byte prefix");
            errors += 1;
        }
    }
    assert!(errors > 0);
    assert_eq!(decode_model(&bytes).unwrap(), full);
}
