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
    Target, TargetCpu, Workspace,
};
use qopt_interp::Tensor;

/// A quantized classifier head with a trailing softmax (the float island
/// real exports leave): quantize, an int8 dense, dequantize, softmax.
const SOFTMAX_HEAD: &str = r#"
module {
  func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
    %w = fp.constant() {value = dense<[[1, -2, 3, -4, 5, -6, 7, -8], [8, 7, 6, 5, 4, 3, 2, 1], [-1, 0, 1, 0, -1, 0, 1, 0], [2, 2, -2, -2, 3, 3, -3, -3]]> : tensor<4x8x!qnn.uniform<i8:f32:0, {0.02:0, 0.03:0, 0.05:0, 0.04:0}>>} : () -> tensor<4x8x!qnn.uniform<i8:f32:0, {0.02:0, 0.03:0, 0.05:0, 0.04:0}>>
    %b = fp.constant() {value = dense<[10, -20, 0, 5]> : tensor<4xi32>} : () -> tensor<4xi32>
    %q = qnn.quantize(%x) : (tensor<2x8xf32>) -> tensor<2x8x!qnn.uniform<i8:f32, 0.05:3>>
    %y = qnn.dense(%q, %w, %b) : (tensor<2x8x!qnn.uniform<i8:f32, 0.05:3>>, tensor<4x8x!qnn.uniform<i8:f32:0, {0.02:0, 0.03:0, 0.05:0, 0.04:0}>>, tensor<4xi32>) -> tensor<2x4x!qnn.uniform<i8:f32, 0.1:-5>>
    %f = qnn.dequantize(%y) : (tensor<2x4x!qnn.uniform<i8:f32, 0.1:-5>>) -> tensor<2x4xf32>
    %p = fp.softmax(%f) {axis = -1} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("prob")
    func.return %p : tensor<2x4xf32>
  }
}
"#;

#[test]
fn a_trailing_softmax_runs_by_a_host_call_and_the_rest_compiles() {
    if !avx2_here("a_trailing_softmax_runs_by_a_host_call_and_the_rest_compiles") {
        return;
    }
    let mut ctx = context();
    let module = parse(&mut ctx, SOFTMAX_HEAD);
    let program = compile_here(&ctx, &module, "main");
    assert_eq!(program.host_ops.len(), 1, "{:?}", program.host_ops);
    let host = &program.host_ops[0];
    assert!(host.describe.starts_with("fp.softmax at "), "{}", host.describe);
    assert!(host.describe.contains("loc(\"prob\")"), "{}", host.describe);
    assert_eq!(host.reason, "no x86 lowering");
    let compiled: Vec<&str> =
        program.kernels.iter().filter(|k| k.host.is_none()).map(|k| k.op_name.as_str()).collect();
    assert!(compiled.contains(&"qnn.dense") && compiled.contains(&"qnn.quantize"), "{compiled:?}");
    check_qir(SOFTMAX_HEAD, 7);
}

/// Token ids (i64) into an embedding table, a float island on i64 data
/// from the first op on, then a quantized product.
const TOKEN_IDS: &str = r#"
module {
  func.func @main(%ids: tensor<1x5xi64>) -> tensor<1x5x2xf32> {
    %table = fp.constant() {value = dense<[[0.5, -1.0, 0.25, 2.0], [1.5, 0.0, -0.75, 1.0], [-2.0, 0.5, 0.5, 0.125]]> : tensor<3x4xf32>} : () -> tensor<3x4xf32>
    %e = fp.gather(%table, %ids) {axis = 0} : (tensor<3x4xf32>, tensor<1x5xi64>) -> tensor<1x5x4xf32>
    %q = qnn.quantize(%e) : (tensor<1x5x4xf32>) -> tensor<1x5x4x!qnn.uniform<i8:f32, 0.02:0>>
    %w = fp.constant() {value = dense<[[3, -1, 2, 0], [-2, 4, 1, 1]]> : tensor<2x4x!qnn.uniform<i8:f32:0, {0.05:0, 0.04:0}>>} : () -> tensor<2x4x!qnn.uniform<i8:f32:0, {0.05:0, 0.04:0}>>
    %b = fp.constant() {value = dense<[0, 3]> : tensor<2xi32>} : () -> tensor<2xi32>
    %y = qnn.dense(%q, %w, %b) : (tensor<1x5x4x!qnn.uniform<i8:f32, 0.02:0>>, tensor<2x4x!qnn.uniform<i8:f32:0, {0.05:0, 0.04:0}>>, tensor<2xi32>) -> tensor<1x5x2x!qnn.uniform<i8:f32, 0.01:0>>
    %f = qnn.dequantize(%y) : (tensor<1x5x2x!qnn.uniform<i8:f32, 0.01:0>>) -> tensor<1x5x2xf32>
    func.return %f : tensor<1x5x2xf32>
  }
}
"#;

#[test]
fn integer_inputs_reach_a_gather_run_by_a_host_call() {
    if !avx2_here("integer_inputs_reach_a_gather_run_by_a_host_call") {
        return;
    }
    let mut ctx = context();
    let module = parse(&mut ctx, TOKEN_IDS);
    let program = compile_here(&ctx, &module, "main");
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
const SIXTEEN_BIT: &str = r#"
module {
  func.func @main(%x: tensor<1x16xf32>) -> tensor<1x16xf32> {
    %q = qnn.quantize(%x) : (tensor<1x16xf32>) -> tensor<1x16x!qnn.uniform<i16:f32, 0.0001:0>>
    %r = qnn.requantize(%q) : (tensor<1x16x!qnn.uniform<i16:f32, 0.0001:0>>) -> tensor<1x16x!qnn.uniform<i8:f32, 0.02:1>>
    %s = fp.relu(%r) : (tensor<1x16x!qnn.uniform<i8:f32, 0.02:1>>) -> tensor<1x16x!qnn.uniform<i8:f32, 0.02:1>>
    %f = qnn.dequantize(%s) : (tensor<1x16x!qnn.uniform<i8:f32, 0.02:1>>) -> tensor<1x16xf32>
    func.return %f : tensor<1x16xf32>
  }
}
"#;

#[test]
fn sixteen_bit_storage_runs_by_host_calls() {
    if !avx2_here("sixteen_bit_storage_runs_by_host_calls") {
        return;
    }
    let mut ctx = context();
    let module = parse(&mut ctx, SIXTEEN_BIT);
    let program = compile_here(&ctx, &module, "main");
    let hosted: Vec<&str> =
        program.host_ops.iter().map(|op| op.describe.split(' ').next().unwrap()).collect();
    assert_eq!(hosted, ["qnn.quantize", "qnn.requantize"]);
    check_qir(SIXTEEN_BIT, 3);
}

/// In an object file, each entry calls `qopt_host_call` once per hosted op
/// (a PLT32 relocation against the undefined symbol), the listing names the
/// call, and the header lists the op and how to link.
#[test]
fn object_files_call_the_host_call_library() {
    let mut ctx = context();
    let module = parse(&mut ctx, SOFTMAX_HEAD);
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
