//! Ops the backend does not compile run by host calls in the interpreter's
//! own kernels between machine-code kernels: float islands after
//! `quantize` (a trailing softmax), integer index inputs (token ids into a
//! gather) and 16-bit storage. Every output must equal the interpreter's bit
//! for bit, on one thread and two, and with every buffer between guard
//! pages.

mod common;

use common::*;
use qopt_codegen_x86::{
    c_header, compile, listing, text_image, write_object, AsmSyntax, JitModule, Lowerings, ObjectOptions,
    Program, Target, TargetCpu, Workspace,
};
use qopt_interp::Tensor;
use qopt_ir_core::{Context, Module};

/// The text of `tests/fixtures/host-calls/<name>.qir`.
fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/fixtures/host-calls/{name}.qir", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Fixture `name` parsed and its `@main` compiled for this CPU, or `None`
/// (with a notice) where the CPU lacks AVX2 to run it.
fn compiled_on_avx2(test: &str, name: &str) -> Option<(Context, Module, Program)> {
    if !avx2_here(test) {
        return None;
    }
    let mut ctx = context();
    let module = parse(&mut ctx, &fixture(name));
    let program = compile_here(&ctx, &module, "main");
    Some((ctx, module, program))
}

/// A quantized classifier head with a trailing softmax (the float island
/// real exports leave): quantize, an int8 dense, dequantize, softmax.
#[test]
fn a_trailing_softmax_runs_by_a_host_call_and_the_rest_compiles() {
    let Some((_, _, program)) =
        compiled_on_avx2("a_trailing_softmax_runs_by_a_host_call_and_the_rest_compiles", "softmax-head")
    else {
        return;
    };
    assert_eq!(program.host_ops.len(), 1, "{:?}", program.host_ops);
    let host = &program.host_ops[0];
    assert!(host.describe.starts_with("fp.softmax at "), "{}", host.describe);
    assert!(host.describe.contains("loc(\"prob\")"), "{}", host.describe);
    assert_eq!(host.reason, "no x86 lowering");
    let compiled: Vec<&str> =
        program.kernels.iter().filter(|k| k.host.is_none()).map(|k| k.op_name.as_str()).collect();
    assert!(compiled.contains(&"qnn.dense") && compiled.contains(&"qnn.quantize"), "{compiled:?}");
    check_qir(&fixture("softmax-head"), 7);
}

/// Token ids (i64) into an embedding table, a float island on i64 data
/// from the first op on, then a quantized product.
#[test]
fn integer_inputs_reach_a_gather_run_by_a_host_call() {
    let Some((ctx, module, program)) =
        compiled_on_avx2("integer_inputs_reach_a_gather_run_by_a_host_call", "token-ids")
    else {
        return;
    };
    assert_eq!(program.inputs[0].element.to_string(), "i64");
    let ids =
        Tensor::I64(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[1, 5]), vec![2, 0, 1, 1, 2]).unwrap());
    for threads in [1, 2] {
        assert_jit_matches_interpreter(&ctx, &module, "main", std::slice::from_ref(&ids), threads);
    }
    assert_guarded_run_matches(&ctx, &module, "main", std::slice::from_ref(&ids));
    // An index out of range is the interpreter's error, returned by the run.
    let bad =
        Tensor::I64(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[1, 5]), vec![0, 0, 9, 0, 0]).unwrap());
    let jit = JitModule::new(program).unwrap();
    for threads in [1, 2] {
        let e = jit.run_tensors(std::slice::from_ref(&bad), &mut Workspace::new(), threads).unwrap_err();
        assert!(e.message.contains("fp.gather at "), "{e}");
    }
}

/// A16 storage (what quantize-search's mixed precision writes): the i16
/// region runs by host calls, the i8 ones compile.
#[test]
fn sixteen_bit_storage_runs_by_host_calls() {
    let Some((_, _, program)) = compiled_on_avx2("sixteen_bit_storage_runs_by_host_calls", "sixteen-bit")
    else {
        return;
    };
    let hosted: Vec<&str> =
        program.host_ops.iter().map(|op| op.describe.split(' ').next().unwrap()).collect();
    assert_eq!(hosted, ["qnn.quantize", "qnn.requantize"]);
    check_qir(&fixture("sixteen-bit"), 3);
}

/// In an object file, each entry calls `qopt_host_call` once per hosted op
/// (a PLT32 relocation against the undefined symbol), the listing names the
/// call, and the header lists the op and how to link.
#[test]
fn object_files_call_the_host_call_library() {
    let mut ctx = context();
    let module = parse(&mut ctx, &fixture("softmax-head"));
    let target = Target::named(TargetCpu::X86_64V3);
    let program = compile(&ctx, &module, "main", &Lowerings::builtin(), &target).unwrap();
    let image = text_image(&program, "model").unwrap();
    // `_run` and `_run_with_workspace` (no quantized entry: the output is the softmax's).
    assert_eq!(image.entries.len(), 2);
    assert_eq!(image.host_calls.len(), 2);
    for &at in &image.host_calls {
        assert_eq!(image.text[at - 1], 0xE8, "a rel32 call");
    }
    let options = ObjectOptions::new("model", "head.qir").unwrap();
    let asm = listing(&program, &options, AsmSyntax::Intel).unwrap();
    assert_eq!(asm.matches("R_X86_64_PLT32 qopt_host_call-4").count(), 2, "{asm}");
    let header = c_header(&program, &options).unwrap();
    assert!(header.contains("#define MODEL_HOST_CALLS 1"), "{header}");
    assert!(header.contains("fp.softmax at ") && header.contains("libqopt_host_calls.a"), "{header}");
    let object = write_object(&program, &options).unwrap();
    assert!(object.windows(14).any(|w| w == b"qopt_host_call"), "the object names the symbol");
}
