//! Fuzzes the ONNX importer with arbitrary bytes, and runs what imports.
//!
//! Oracle: nothing panics, overflows or hangs; whatever imports verifies (the
//! importer verifies before returning) and runs in the interpreter on zero
//! inputs with an `Ok` or an error, never a crash. Seed it with the reference
//! models (copied into `fuzz/corpus/import_onnx/` under distinct names, as the
//! README shows), then `cargo +nightly fuzz run import_onnx -- -max_total_time=600`
//! from the repo root.

#![no_main]

use libfuzzer_sys::fuzz_target;
use qopt_interp::{DType, Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::{Context, TypeData};
use qopt_onnx::{import_model, ImportOptions};

fuzz_target!(|data: &[u8]| {
    let mut ctx = Context::new();
    let Ok(module) = import_model(&mut ctx, data, &ImportOptions { batch: Some(1) }) else { return };
    let Some(func) = module.lookup_symbol(&ctx, "main") else { return };
    let Some(entry) = module.blocks(module.region(func, 0)).next() else { return };
    let mut inputs = Vec::new();
    for &arg in module.block_args(entry) {
        let TypeData::Tensor { shape, element } = ctx.type_data(module.value_type(arg)) else { return };
        let Ok(dtype) = DType::of_element(&ctx, *element) else { return };
        let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        // Keep runs small: the fuzzer wants many inputs per second.
        if dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).is_none_or(|n| n > 1 << 16) {
            return;
        }
        inputs.push(Tensor::zeros(dtype, &dims));
    }
    let kernels = KernelRegistry::standard();
    let _ = Interpreter::new(&ctx, &module, &kernels).run("main", &inputs);
});
