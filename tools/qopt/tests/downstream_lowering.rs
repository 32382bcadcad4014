//! A downstream crate's x86 lowering, registered in the context by its
//! dialect setup (`Lowerings::install`), reaches `qrun --backend=x86` as well
//! as `qcompile`: here an f32 `fp.abs` (which the backend does not compile
//! itself) runs compiled and gives the interpreter's bits.

use clap::Parser;
use iced_x86::code_asm::*;
use qopt_codegen_x86::{abi, CodegenError, Emit, LowerOp, Lowerings, OpLowering, Plan};
use qopt_driver::run::{RunCli, RunDriver};
use qopt_driver::Driver;
use qopt_ir_core::ScratchDir;
use std::sync::Arc;

/// `fp.abs` on f32, one element per work item: the sign bit cleared.
struct F32Abs;

impl OpLowering for F32Abs {
    fn plan(&self, op: &LowerOp<'_>) -> Result<Plan, CodegenError> {
        op.expect_arity(1..=1, 1)?;
        Ok(Plan::kernels())
    }

    fn emit(&self, op: &LowerOp<'_>, out: &mut Emit<'_>) -> Result<(), CodegenError> {
        let elements = op.result_shape(0)?.iter().product::<usize>();
        let mut a = abi::new_assembler()?;
        abi::load_addresses(&mut a, &[(rdi, out.operand(0)?), (rsi, out.result(0)?)])?;
        let mut item = a.create_label();
        let mut done = a.create_label();
        a.mov(eax, 0x7fff_ffff)?;
        a.movd(xmm1, eax)?;
        a.cmp(rcx, r8)?;
        a.jae(done)?;
        a.set_label(&mut item)?;
        a.movss(xmm0, dword_ptr(rdi + rcx * 4))?;
        a.andps(xmm0, xmm1)?;
        a.movss(dword_ptr(rsi + rcx * 4), xmm0)?;
        a.inc(rcx)?;
        a.cmp(rcx, r8)?;
        a.jb(item)?;
        a.set_label(&mut done)?;
        a.ret()?;
        out.kernel(abi::KernelCode {
            code: abi::assemble(&mut a)?,
            work: elements,
            work_item: "element",
            strategy: "scalar".into(),
        });
        Ok(())
    }
}

/// `qrun` with `args` through `driver`: (exit code, standard output, standard error).
fn qrun(driver: &RunDriver, args: &[&str]) -> (i32, String, String) {
    let cli =
        RunCli::try_parse_from(std::iter::once("qrun").chain(args.iter().copied())).expect("arguments parse");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = driver.run_cli(&cli, &mut out, &mut err);
    (code, String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned())
}

#[test]
fn a_lowering_installed_in_the_context_runs_under_qrun_backend_x86() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        eprintln!("skipped: compiled code needs AVX2");
        return;
    }
    let dir = ScratchDir::new("downstream-lowering");
    let model = dir.path().join("abs.qir");
    std::fs::write(
        &model,
        "func.func @main(%x: tensor<2x37xf32>) -> tensor<2x37xf32> {\n  \
         %y = fp.abs(%x) : (tensor<2x37xf32>) -> tensor<2x37xf32>\n  \
         func.return %y : tensor<2x37xf32>\n}\n",
    )
    .unwrap();
    let model = model.to_str().unwrap();
    let args = [model, "--random-inputs", "--seed", "5"];
    let x86_args = [model, "--random-inputs", "--seed", "5", "--backend=x86"];

    // Without the lowering, the op runs by a host call.
    let plain = RunDriver::new("qrun");
    let (code, hosted, err) = qrun(&plain, &x86_args);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("by host calls") && err.contains("fp.abs at line 2:"), "{err}");
    assert!(err.contains(": no x86 lowering"), "{err}");

    let mut driver = Driver::new("qrun");
    driver.add_dialects(|ctx| {
        Lowerings::install(ctx).register("fp.abs", Arc::new(F32Abs));
        Ok(())
    });
    let downstream = RunDriver::with_parts(driver, qopt_driver::run::standard_kernels());
    let (code, interpreted, err) = qrun(&downstream, &args);
    assert_eq!(code, 0, "{err}");
    let (code, compiled, err) = qrun(&downstream, &x86_args);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("host call"), "{err}");
    assert_eq!(compiled, interpreted);
    assert_eq!(hosted, interpreted);
    assert!(
        interpreted.contains("0.") && !interpreted.contains('-'),
        "abs leaves no negative value: {interpreted}"
    );
}
