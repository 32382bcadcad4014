//! `accel-lower` preserves values, checked by running: a small quantized
//! network runs in `qopt-interp` before and after `accel-lower,canonicalize,cse`
//! (qopt's kernels plus [`toy_accel::register_kernels`]), and every result is
//! bit-identical. The network has a 3x3 'same' convolution, a 1x1 one fed on
//! the device, a residual `qnn.add` on the host, a stride-2 1x1 convolution
//! with per-channel weights and no bias (the lowering adds a zero bias), and a
//! 5x5 convolution the accelerator does not take (it stays `qnn`).

use qopt_driver::Driver;
use qopt_interp::{run_function, DType, KernelContext, KernelRegistry, Tensor};
use qopt_ir_core::{module_to_string, parse_module, verify, Context, Instrumentation, Module, PassManager};
use qopt_npy::RawArray;

// Scales are powers of two, so the multipliers are exact and requantization
// meets many ties: the test also pins the rounding mode.
const X: &str = "tensor<1x8x8x8x!qnn.uniform<i8:f32, 0.5:-3>>";
const W1: &str = "tensor<16x8x3x3x!qnn.uniform<i8:f32, 0.03125:0>>";
const W2: &str = "tensor<16x16x1x1x!qnn.uniform<i8:f32:0, {0.0078125:0, 0.015625:0, 0.0078125:0, 0.015625:0, 0.0078125:0, 0.015625:0, 0.0078125:0, 0.015625:0, 0.0078125:0, 0.015625:0, 0.0078125:0, 0.015625:0, 0.0078125:0, 0.015625:0, 0.0078125:0, 0.015625:0}>>";
const W3: &str = "tensor<8x16x1x1x!qnn.uniform<i8:f32:0, {0.0078125:0, 0.015625:0, 0.0078125:0, 0.015625:0, 0.0078125:0, 0.015625:0, 0.0078125:0, 0.015625:0}>>";
const W5: &str = "tensor<16x8x5x5x!qnn.uniform<i8:f32, 0.03125:0>>";
const Y: &str = "tensor<1x16x8x8x!qnn.uniform<i8:f32, 1.0:-20>>";
const Y3: &str = "tensor<1x8x4x4x!qnn.uniform<i8:f32, 1.0:-20>>";

fn network() -> String {
    format!(
        r#"
module {{
  func.func @net(%x: {X}, %w1: {W1}, %w2: {W2}, %w3: {W3}, %w5: {W5}, %b: tensor<16xi32>) -> ({Y}, {Y3}, {Y}) {{
    %0 = qnn.conv2d_relu(%x, %w1, %b) {{pad = [1, 1, 1, 1]}} : ({X}, {W1}, tensor<16xi32>) -> {Y} loc("conv1")
    %1 = qnn.conv2d_relu(%0, %w2, %b) : ({Y}, {W2}, tensor<16xi32>) -> {Y} loc("conv2")
    %2 = qnn.add(%0, %1) : ({Y}, {Y}) -> {Y}
    %3 = qnn.conv2d_relu(%2, %w3) {{stride = [2, 2]}} : ({Y}, {W3}) -> {Y3} loc("down")
    %4 = qnn.conv2d_relu(%x, %w5, %b) {{pad = [2, 2, 2, 2]}} : ({X}, {W5}, tensor<16xi32>) -> {Y} loc("wide")
    func.return %2, %3, %4 : {Y}, {Y3}, {Y}
  }}
}}
"#
    )
}

/// Deterministic i8 data in `[-range, range]` (xorshift).
fn data(seed: u64, shape: &[usize], range: i64) -> Tensor {
    let mut state = seed | 1;
    let n: usize = shape.iter().product();
    let values: Vec<i8> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state % (2 * range as u64 + 1)) as i64 - range) as i8
        })
        .collect();
    Tensor::from_raw(&RawArray::from_elements(shape.to_vec(), &values).unwrap()).unwrap()
}

fn count(ctx: &Context, module: &Module, name: &str) -> usize {
    module.walk_preorder(module.root()).filter(|&op| ctx.op_name_str(module.op_name(op)) == name).count()
}

#[test]
fn lowering_is_bit_identical_in_the_interpreter() {
    let mut driver = Driver::new("toy-opt");
    toy_accel::register(&mut driver);
    let mut ctx = driver.new_context().unwrap();
    let mut module =
        parse_module(&mut ctx, network().as_bytes(), "net.qir").unwrap_or_else(|d| panic!("{d}"));
    verify(&mut ctx, &module).unwrap_or_else(|d| panic!("{d}"));

    let mut kernels = KernelRegistry::standard();
    toy_accel::register_kernels(&mut kernels);
    let bias: Vec<i32> = (0..16).map(|i| (i * 37 % 101) - 50).collect();
    let inputs = [
        data(1, &[1, 8, 8, 8], 127),
        data(2, &[16, 8, 3, 3], 20),
        data(3, &[16, 16, 1, 1], 40),
        data(4, &[8, 16, 1, 1], 40),
        data(5, &[16, 8, 5, 5], 10),
        Tensor::from_raw(&RawArray::from_elements(vec![16], &bias).unwrap()).unwrap(),
    ];
    let before = run_function(&ctx, &module, "net", &inputs, &kernels).unwrap();

    let pipeline = PassManager::parse(driver.passes_mut(), "accel-lower,canonicalize,cse").unwrap();
    pipeline.run(&mut ctx, &mut module, &mut Instrumentation::default()).unwrap();
    verify(&mut ctx, &module).unwrap_or_else(|d| panic!("{d}"));
    let text = module_to_string(&ctx, &module);
    assert_eq!(count(&ctx, &module, "accel.conv2d_relu"), 3, "{text}");
    assert_eq!(count(&ctx, &module, "qnn.conv2d_relu"), 1, "the 5x5 convolution stays:\n{text}");

    let after = run_function(&ctx, &module, "net", &inputs, &kernels).unwrap();
    assert_eq!(before.len(), after.len());
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        assert!(a.bit_equal(b), "result #{i} differs after lowering:\n{b:?}\n{a:?}");
    }
    // The data is not degenerate: the results are neither all zero-point nor
    // all saturated.
    for (i, r) in before.iter().enumerate() {
        let v = r.to_f64_vec();
        let distinct = v.iter().map(|&x| x as i64).collect::<std::collections::BTreeSet<_>>().len();
        assert!(distinct > 10, "result #{i} has only {distinct} distinct values");
    }
}

#[test]
fn accel_kernels_report_bad_operands() {
    let mut kernels = KernelRegistry::new();
    toy_accel::register_kernels(&mut kernels);
    assert_eq!(kernels.names(), ["accel.conv2d_relu", "accel.dma_in", "accel.dma_out"]);
    let mut driver = Driver::new("toy-opt");
    toy_accel::register(&mut driver);
    let mut ctx = driver.new_context().unwrap();
    let text = format!(
        r#"
module {{
  func.func @f(%x: {X}, %w: {W1}, %b: tensor<16xi32>) -> {Y} {{
    %y = accel.conv2d_relu(%x, %w, %b) {{stride = [1, 1]}} : ({X}, {W1}, tensor<16xi32>) -> {Y}
    func.return %y : {Y}
  }}
}}
"#
    );
    let module = parse_module(&mut ctx, text.as_bytes(), "f.qir").unwrap_or_else(|d| panic!("{d}"));
    let func = module.lookup_symbol(&ctx, "f").unwrap();
    let op = module.first_op(module.first_block(module.region(func, 0)));
    let operand_types: Vec<_> = module.operands(op).map(|v| module.value_type(v)).collect();
    let result_types: Vec<_> = module.results(op).map(|v| module.value_type(v)).collect();
    let mut kc =
        KernelContext::new(&ctx, module.op_attrs(op), &result_types).with_operand_types(&operand_types);
    let conv = kernels.get("accel.conv2d_relu").unwrap();
    // A weight of the wrong storage type, or a missing one, is an error naming
    // it, not a panic.
    let x = data(1, &[1, 8, 8, 8], 127);
    let w = Tensor::zeros(DType::F32, &[16, 8, 3, 3]);
    let b = Tensor::zeros(DType::I32, &[16]);
    let e = conv(&mut kc, &[&x, &w, &b]).unwrap_err();
    assert!(e.message.starts_with("weight expects tensor<16x8x3x3x!qnn.uniform<i8:f32, 0.03125:0>>"), "{e}");
    assert!(conv(&mut kc, &[&x]).unwrap_err().message.contains("weight"));
    let dma = kernels.get("accel.dma_in").unwrap();
    assert_eq!(dma(&mut kc, &[&x]).unwrap()[0], x);
    assert!(dma(&mut kc, &[&x, &x]).is_err());
}

/// `toy-run` (qrun with the accel kernels) compares the network before and
/// after lowering on random inputs: every output and every located value the
/// two share is identical (SQNR ∞).
#[test]
fn toy_run_compares_a_lowered_module_with_the_original() {
    let mut driver = Driver::new("toy-opt");
    toy_accel::register(&mut driver);
    let mut ctx = driver.new_context().unwrap();
    let mut module =
        parse_module(&mut ctx, network().as_bytes(), "net.qir").unwrap_or_else(|d| panic!("{d}"));
    let pipeline = PassManager::parse(driver.passes_mut(), "accel-lower,canonicalize,cse").unwrap();
    pipeline.run(&mut ctx, &mut module, &mut Instrumentation::default()).unwrap();
    let dir = qopt_ir_core::ScratchDir::new("toy-run");
    let (original, lowered) = (dir.join("net.qir"), dir.join("net.accel.qir"));
    std::fs::write(&original, network()).unwrap();
    std::fs::write(&lowered, module_to_string(&ctx, &module)).unwrap();

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toy-run"))
        .args([original.to_str().unwrap(), "--func", "net", "--random-inputs", "--seed", "7", "--compare"])
        .arg(&lowered)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<&str> =
        stdout.lines().filter(|l| l.starts_with("loc(") || l.starts_with("output")).collect();
    assert!(rows.iter().any(|r| r.starts_with("loc(\"conv1\")")), "{stdout}");
    assert_eq!(rows.iter().filter(|r| r.starts_with("output")).count(), 3, "{stdout}");
    for row in rows {
        assert!(row.contains(" inf "), "not identical: {row}\n{stdout}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
