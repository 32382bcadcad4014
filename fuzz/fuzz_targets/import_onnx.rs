//! libFuzzer entry for `qopt_fuzz_targets::import_onnx` (the oracle is
//! documented there). Seed it with the reference models (README, "Fuzzing").

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| qopt_fuzz_targets::import_onnx(data));
