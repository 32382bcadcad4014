//! Fuzzes the `.npy` / `.npz` reader with arbitrary bytes.
//!
//! Oracle: nothing panics, overflows or hangs; every array that reads converts
//! to a tensor, and writing it back and reading again gives the same array.
//! Run: `cargo +nightly fuzz run read_npy -- -max_total_time=600` from the repo root.

#![no_main]

use libfuzzer_sys::fuzz_target;
use qopt_interp::npy::{npy_bytes, read_arrays, read_npy};
use qopt_interp::Tensor;

fuzz_target!(|data: &[u8]| {
    let Ok(arrays) = read_arrays(data, "fuzz.npy") else { return };
    for (_, raw) in arrays {
        let Ok(tensor) = Tensor::from_raw(&raw) else { panic!("a valid array does not convert") };
        let bytes = npy_bytes(&tensor.to_raw()).expect("writing to memory cannot fail");
        let again = read_npy(&bytes).expect("written arrays read back");
        assert_eq!(again, raw, "round trip changed the array");
    }
});
