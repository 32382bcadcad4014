//! Fuzzes the `.qir` parser, verifier and printer with arbitrary bytes.
//!
//! Oracle: nothing panics, overflows or hangs; and whatever parses prints to text
//! that parses again and prints identically (the printer's canonical form).
//! Run: `cargo +nightly fuzz run parse_qir -- -max_total_time=600` from the repo root.

#![no_main]

use libfuzzer_sys::fuzz_target;
use qopt_ir_core::{module_to_string, parse_module, verify, Context};

fuzz_target!(|data: &[u8]| {
    let mut ctx = Context::new();
    ctx.set_allow_unregistered(true);
    let Ok(module) = parse_module(&mut ctx, data, "fuzz.qir") else { return };
    let _ = verify(&mut ctx, &module);
    let printed = module_to_string(&ctx, &module);
    let reparsed = match parse_module(&mut ctx, printed.as_bytes(), "printed.qir") {
        Ok(m) => m,
        Err(d) => panic!("printed module does not parse:\n{d}\n--- printed ---\n{printed}"),
    };
    let again = module_to_string(&ctx, &reparsed);
    assert_eq!(printed, again, "print is not canonical");
});
