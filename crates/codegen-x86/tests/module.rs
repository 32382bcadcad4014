//! Whole functions through the module compiler: places (inputs, outputs,
//! constants, the arena), aliases, outputs that need a copy, the one error
//! listing every op the backend lacks, and threads. Each runs bit for bit
//! against the interpreter.

mod common;

use common::*;
use qopt_codegen_x86::{compile, CodegenErrorKind, JitModule, Lowerings, Target, Workspace};

const Q: &str = "!qnn.uniform<i8:f32, 0.05:-3>";
const R: &str = "!qnn.uniform<u8:f32, 0.11:120>";

#[test]
fn a_chain_of_conversions_and_reshapes_runs_bit_exactly() {
    if !avx2_here("a_chain_of_conversions_and_reshapes_runs_bit_exactly") {
        return;
    }
    let text = format!(
        "module {{
  func.func @main(%x: tensor<3x37xf32>) -> tensor<111xf32> {{
    %q = qnn.quantize(%x) : (tensor<3x37xf32>) -> tensor<3x37x{Q}>
    %f = fp.flatten(%q) {{axis = 0}} : (tensor<3x37x{Q}>) -> tensor<1x111x{Q}>
    %r = qnn.requantize(%f) {{rounding = \"half_to_even\"}} : (tensor<1x111x{Q}>) -> tensor<1x111x{R}>
    %s = fp.reshape(%r) {{shape = [111]}} : (tensor<1x111x{R}>) -> tensor<111x{R}>
    %y = qnn.dequantize(%s) : (tensor<111x{R}>) -> tensor<111xf32>
    func.return %y : tensor<111xf32>
  }}
}}"
    );
    for seed in 0..4 {
        check_qir(&text, seed);
    }
}

#[test]
fn inputs_constants_and_repeated_values_are_copied_to_outputs() {
    if !avx2_here("inputs_constants_and_repeated_values_are_copied_to_outputs") {
        return;
    }
    let text = format!(
        "module {{
  func.func @main(%x: tensor<5xf32>) -> (tensor<5xf32>, tensor<2xf32>, tensor<5x{Q}>, tensor<5x{Q}>) {{
    %c = fp.constant() {{value = dense<[1.5, -2.0]> : tensor<2xf32>}} : () -> tensor<2xf32>
    %q = qnn.quantize(%x) : (tensor<5xf32>) -> tensor<5x{Q}>
    func.return %x, %c, %q, %q : tensor<5xf32>, tensor<2xf32>, tensor<5x{Q}>, tensor<5x{Q}>
  }}
}}"
    );
    check_qir(&text, 7);
}

/// Ops without a lowering run by host calls between the compiled ones,
/// with the interpreter's bits.
#[test]
fn ops_without_a_lowering_run_by_host_calls() {
    let text = format!(
        "module {{
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
    %a = fp.exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
    %q = qnn.quantize(%a) : (tensor<4xf32>) -> tensor<4x{Q}>
    %d = qnn.dequantize(%q) : (tensor<4x{Q}>) -> tensor<4xf32>
    %b = fp.tanh(%d) : (tensor<4xf32>) -> tensor<4xf32>
    func.return %b : tensor<4xf32>
  }}
}}"
    );
    let mut ctx = context();
    let module = parse(&mut ctx, &text);
    let program = compile(&ctx, &module, "main", &Lowerings::builtin(), &Target::host()).unwrap();
    let hosted: Vec<(&str, &str)> =
        program.host_ops.iter().map(|op| (op.describe.as_str(), op.reason.as_str())).collect();
    assert_eq!(
        hosted,
        [("fp.exp at line 3:10", "no x86 lowering"), ("fp.tanh at line 6:10", "no x86 lowering")]
    );
    check_qir(&text, 7);
}

/// What neither compiles nor runs by a host call is listed, every such op
/// in one error.
#[test]
fn every_op_that_cannot_run_is_listed_in_one_error() {
    let text = "module {
  func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
    func.return %x : tensor<4xf32>
  }
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
    %b = fp.exp(%a) : (tensor<4xf32>) -> tensor<4xf32>
    %c = func.call @helper(%b) : (tensor<4xf32>) -> tensor<4xf32>
    func.return %c : tensor<4xf32>
  }
}";
    let mut ctx = context();
    let module = parse(&mut ctx, text);
    let e = compile(&ctx, &module, "main", &Lowerings::builtin(), &Target::host()).unwrap_err();
    assert_eq!(e.kind, CodegenErrorKind::Unsupported);
    assert!(
        e.message.starts_with(
            "@main cannot be compiled for x86-64: 2 ops neither compiled nor run by a host call:"
        ),
        "{e}"
    );
    assert!(e.message.contains("line 6:") && e.message.contains("line 8:"), "{e}");
    assert!(e.message.contains("func.call: no x86 lowering (and an op with regions or a callee"), "{e}");
}

#[test]
fn intermediate_buffers_share_the_arena() {
    // Eight requantizes in a chain: each buffer dies after the next op reads
    // it, so two 4 KiB buffers suffice.
    let mut body = String::new();
    let mut prev = "%q".to_string();
    for i in 0..8 {
        let (from, to) = if i % 2 == 0 { (Q, R) } else { (R, Q) };
        body.push_str(&format!(
            "    %r{i} = qnn.requantize({prev}) : (tensor<4096x{from}>) -> tensor<4096x{to}>\n"
        ));
        prev = format!("%r{i}");
    }
    let text = format!(
        "module {{
  func.func @main(%x: tensor<4096xf32>) -> tensor<4096xf32> {{
    %q = qnn.quantize(%x) : (tensor<4096xf32>) -> tensor<4096x{Q}>
{body}    %y = qnn.dequantize({prev}) : (tensor<4096x{Q}>) -> tensor<4096xf32>
    func.return %y : tensor<4096xf32>
  }}
}}"
    );
    let mut ctx = context();
    let module = parse(&mut ctx, &text);
    let program = compile(&ctx, &module, "main", &Lowerings::builtin(), &Target::host()).unwrap();
    assert_eq!(program.arena_bytes, 2 * 4096);
    assert_eq!(program.kernels.len(), 10);
    if avx2_here("intermediate_buffers_share_the_arena") {
        check_qir(&text, 3);
    }
}

#[test]
fn wrong_buffers_are_refused() {
    if !avx2_here("wrong_buffers_are_refused") {
        return;
    }
    let text = format!(
        "module {{
  func.func @main(%x: tensor<5xf32>) -> tensor<5x{Q}> {{
    %q = qnn.quantize(%x) : (tensor<5xf32>) -> tensor<5x{Q}>
    func.return %q : tensor<5x{Q}>
  }}
}}"
    );
    let mut ctx = context();
    let module = parse(&mut ctx, &text);
    let jit = JitModule::new(compile_here(&ctx, &module, "main")).unwrap();
    let wrong = qopt_interp::Tensor::from_f32(&[4], vec![0.0; 4]).unwrap();
    let e = jit.run_tensors(&[wrong], &mut Workspace::new(), 1).unwrap_err();
    assert_eq!(e.kind, CodegenErrorKind::BadArguments);
    assert!(e.message.contains("input 0 must have shape [5]"), "{e}");
    let e = jit.run_tensors(&[], &mut Workspace::new(), 1).unwrap_err();
    assert!(e.message.contains("takes 1 inputs and 1 outputs, got 0"), "{e}");
}

/// A downstream-style lowering of `fp.relu` on f32 whose kernel writes one
/// byte past the end of its output (and nothing else): the guard pages must
/// stop it.
struct OverrunningRelu;

impl qopt_codegen_x86::OpLowering for OverrunningRelu {
    fn plan(
        &self,
        _op: &qopt_codegen_x86::LowerOp<'_>,
    ) -> Result<qopt_codegen_x86::Plan, qopt_codegen_x86::CodegenError> {
        Ok(qopt_codegen_x86::Plan::kernels())
    }

    fn emit(
        &self,
        op: &qopt_codegen_x86::LowerOp<'_>,
        out: &mut qopt_codegen_x86::Emit<'_>,
    ) -> Result<(), qopt_codegen_x86::CodegenError> {
        use iced_x86::code_asm::*;
        use qopt_codegen_x86::abi;
        let bytes = 4 * op.result_shape(0)?.iter().product::<usize>();
        let mut a = abi::new_assembler()?;
        abi::load_addresses(&mut a, &[(rdi, out.result(0)?)])?;
        a.mov(byte_ptr(rdi + bytes as i32), 0)?;
        a.ret()?;
        out.kernel(abi::KernelCode {
            code: abi::assemble(&mut a)?,
            work: 1,
            work_item: "all",
            strategy: "overrun".into(),
        });
        Ok(())
    }
}

#[test]
fn guard_pages_stop_a_kernel_that_writes_past_its_output() {
    if !avx2_here("guard_pages_stop_a_kernel_that_writes_past_its_output") {
        return;
    }
    const CHILD: &str = "QOPT_GUARD_PAGES_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let text = "module {
  func.func @main(%x: tensor<16xf32>) -> tensor<16xf32> {
    %y = fp.relu(%x) : (tensor<16xf32>) -> tensor<16xf32>
    func.return %y : tensor<16xf32>
  }
}";
        let mut ctx = context();
        let module = parse(&mut ctx, text);
        let inputs = random_inputs(&ctx, &module, "main", 1);
        let mut lowerings = Lowerings::builtin();
        lowerings.register("fp.relu", std::sync::Arc::new(OverrunningRelu));
        assert_guarded_run_matches_with(&ctx, &module, "main", &inputs, &lowerings);
        // Reaching this line means the overrun went unnoticed.
        std::process::exit(0);
    }
    let me = std::env::current_exe().unwrap();
    let out = std::process::Command::new(me)
        .args(["--exact", "guard_pages_stop_a_kernel_that_writes_past_its_output", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "the overrun must fault: {:?}", out.status);
}
