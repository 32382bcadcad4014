//! `expand-fakeq` is exact: the calibrated fake-quant digits MLP
//! (`examples/digits_mlp.qir`) and its expansion into quantize + dequantize
//! give bit-identical outputs on every test sample in the interpreter.

use qopt_interp::npy::{read_npy_file, RawArray};
use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::{parse_module, verify, Context, Module};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn context() -> Context {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).unwrap();
    qopt_dialect_qnn::register(&mut ctx).unwrap();
    ctx
}

/// Runs `pipeline` on `module` in place.
fn run(ctx: &mut Context, module: &mut Module, pipeline: &str) {
    let mut registry = PassRegistry::new();
    qopt_passes::register_generic_passes(&mut registry).unwrap();
    let manager =
        PassManager::parse(&registry, pipeline).unwrap_or_else(|e| panic!("{pipeline}: {}", e.message));
    let mut inst = Instrumentation { reproducer_dir: None, ..Instrumentation::default() };
    manager.run(ctx, module, &mut inst).unwrap_or_else(|e| panic!("{pipeline}: {e:?}"));
    verify(ctx, module).expect("the result verifies");
}

/// The `i`-th row of `all` as a batch of one.
fn sample(all: &RawArray, i: usize) -> Tensor {
    let row = all.shape[1..].iter().product::<usize>() * all.dtype.size();
    let raw = RawArray {
        dtype: all.dtype,
        shape: [&[1][..], &all.shape[1..]].concat(),
        data: all.data[i * row..(i + 1) * row].to_vec(),
    };
    Tensor::from_raw(&raw).unwrap()
}

#[test]
fn expanding_fake_quants_changes_no_bit() {
    let mut ctx = context();
    let text = std::fs::read_to_string(repo().join("examples/digits_mlp.qir")).unwrap();
    let mut fake = parse_module(&mut ctx, text.as_bytes(), "digits_mlp.qir").unwrap();
    let calib = repo().join("tests/models/digits_mlp/calib.npy");
    let pipeline = format!("fold-bn,insert-observers,calibrate{{data=\"{}\"}},insert-fakeq", calib.display());
    run(&mut ctx, &mut fake, &pipeline);
    let mut expanded = fake.clone();
    run(&mut ctx, &mut expanded, "expand-fakeq");

    let kernels = KernelRegistry::standard();
    let test = read_npy_file(repo().join("tests/models/digits_mlp/test.npy")).unwrap();
    for i in 0..test.shape[0] {
        let x = sample(&test, i);
        let a = run_function(&ctx, &fake, "main", std::slice::from_ref(&x), &kernels).unwrap();
        let b = run_function(&ctx, &expanded, "main", std::slice::from_ref(&x), &kernels).unwrap();
        assert!(a[0].bit_equal(&b[0]), "sample {i}: {} vs {}", a[0].describe(), b[0].describe());
    }
    let printed = qopt_ir_core::module_to_string(&ctx, &expanded);
    assert!(!printed.contains("qnn.fake_quant") && printed.matches("qnn.quantize").count() >= 7);
}
