//! The reference models in `tests/models`: every one imports and verifies;
//! golden snapshots of the imported digits models (float and QDQ), with
//! weight blobs shortened to their size and a checksum so the snapshots stay
//! readable; corrupted copies give errors, never panics.

mod common;

use qopt_ir_core::SplitMix64 as Rng;
use std::path::{Path, PathBuf};

fn models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/models")
}

fn read_model(name: &str) -> Vec<u8> {
    std::fs::read(models_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `text` with every hex blob `dense<"0x…">` replaced by its byte count and
/// FNV-1a checksum.
fn shorten_blobs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("dense<\"0x") {
        let hex_start = start + "dense<\"0x".len();
        let Some(len) = rest[hex_start..].find('"') else { break };
        let hex = &rest[hex_start..hex_start + len];
        let hash = hex
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        out.push_str(&rest[..hex_start]);
        out.push_str(&format!("…{} bytes, fnv1a {hash:016x}", hex.len() / 2));
        rest = &rest[hex_start + len..];
    }
    out.push_str(rest);
    out
}

fn imported(name: &str) -> String {
    common::import_text(&read_model(name), None).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_model_imports_and_verifies() {
    let mut count = 0;
    for dir in std::fs::read_dir(models_dir()).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "onnx") {
                let text = common::import_text(&std::fs::read(&path).unwrap(), None)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(text.contains("func.func @main"));
                count += 1;
            }
        }
    }
    assert_eq!(count, 7, "four float models, three of them also as QDQ");
}

#[test]
fn digits_mlp() {
    insta::assert_snapshot!(shorten_blobs(&imported("digits_mlp/model.onnx")));
}

#[test]
fn digits_cnn() {
    insta::assert_snapshot!(shorten_blobs(&imported("digits_cnn/model.onnx")));
}

#[test]
fn digits_mlp_qdq() {
    insta::assert_snapshot!(shorten_blobs(&imported("digits_mlp/ort_qdq_minmax.onnx")));
}

#[test]
fn digits_cnn_qdq_keeps_every_quantize_pair() {
    let text = imported("digits_cnn/ort_qdq_minmax.onnx");
    // The README's counts: 9 QuantizeLinear, 17 DequantizeLinear (all kept).
    assert_eq!(text.matches("= qnn.quantize(").count(), 9);
    assert_eq!(text.matches("= qnn.dequantize(").count(), 17);
    assert!(text.contains("!qnn.uniform<i8:f32:0, {"), "per-channel weights");
    assert!(text.contains("!qnn.uniform<i32:f32:0, {"), "int32 biases");
}

#[test]
fn the_example_is_the_imported_digits_mlp() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/digits_mlp.qir");
    let text = std::fs::read_to_string(&example).unwrap();
    assert_eq!(text, imported("digits_mlp/model.onnx"), "regenerate with qimport");
}

#[test]
fn corrupted_models_give_errors_not_panics() {
    let original = read_model("digits_cnn/ort_qdq_minmax.onnx");
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut failures = 0;
    for _ in 0..300 {
        let mut bytes = original.clone();
        for _ in 0..1 + rng.next_u64() % 4 {
            let at = (rng.next_u64() % bytes.len() as u64) as usize;
            bytes[at] = rng.next_u64() as u8;
        }
        if rng.next_u64().is_multiple_of(4) {
            bytes.truncate((rng.next_u64() % bytes.len() as u64) as usize);
        }
        failures += usize::from(common::import_text(&bytes, None).is_err());
    }
    assert!(failures > 0);
}
