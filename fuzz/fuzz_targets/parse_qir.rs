//! libFuzzer entry for `qopt_fuzz_targets::parse_qir` (the oracle is documented
//! there). Run from the repository root: see README, "Fuzzing".

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| qopt_fuzz_targets::parse_qir(data));
