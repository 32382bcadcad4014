//! Shared by the integration tests: parse a `.qir` module, run one function
//! through the reference interpreter and through the JIT, and compare every
//! output bit for bit.
#![allow(dead_code)]

use qopt_codegen_x86::{compile, CpuFeatures, JitModule, Lowerings, Program, Target, Workspace};
use qopt_interp::{random_arguments, run_function, IntegerValues, KernelRegistry, RandomInputs, Tensor};
use qopt_ir_core::{function_signature, parse_module, Context, Module, OpView};

/// A context with the fp and qnn dialects.
pub fn context() -> Context {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).unwrap();
    qopt_dialect_qnn::register(&mut ctx).unwrap();
    ctx
}

/// Parses `text`, panicking with the text and the error when it does not.
pub fn parse(ctx: &mut Context, text: &str) -> Module {
    match parse_module(ctx, text.as_bytes(), "case.qir") {
        Ok(module) => module,
        Err(e) => panic!("{text}\ndoes not parse: {e:?}"),
    }
}

/// Whether this CPU runs the AVX2 kernels; prints a notice when it does not.
pub fn avx2_here(test: &str) -> bool {
    let host = CpuFeatures::host();
    if host.avx2 && host.avx {
        true
    } else {
        println!("notice: {test}: skipped running the AVX2 kernels, this CPU lacks AVX2 (it has {host})");
        false
    }
}

/// Compiles `@function` of `module` for this CPU with the built-in lowerings.
pub fn compile_here(ctx: &Context, module: &Module, function: &str) -> Program {
    match compile(ctx, module, function, &Lowerings::builtin(), &Target::host()) {
        Ok(p) => p,
        Err(e) => panic!("compiling @{function}: {e}"),
    }
}

/// Random arguments for `@function` (the interpreter's generator).
pub fn random_inputs(ctx: &Context, module: &Module, function: &str, seed: u64) -> Vec<Tensor> {
    let func = module.lookup_symbol(ctx, function).expect("the function");
    let (args, _) = function_signature(&OpView::new(ctx, module, func)).expect("a signature");
    random_arguments(
        ctx,
        args,
        seed,
        &RandomInputs { integers: IntegerValues::FullRange, dynamic_size: None },
    )
    .expect("random arguments")
}

/// Runs `@function` on `inputs` in the interpreter and in the JIT (on
/// `threads` threads) and panics at the first output that differs in any
/// bit, naming the element.
pub fn assert_jit_matches_interpreter(
    ctx: &Context,
    module: &Module,
    function: &str,
    inputs: &[Tensor],
    threads: usize,
) {
    let want = run_function(ctx, module, function, inputs, &KernelRegistry::standard())
        .unwrap_or_else(|e| panic!("interpreter: {e}"));
    let jit = JitModule::new(compile_here(ctx, module, function)).expect("mapping the program");
    let got = jit.run_tensors(inputs, &mut Workspace::new(), threads).expect("running the program");
    assert_eq!(got.len(), want.len());
    for (j, (g, w)) in got.iter().zip(&want).enumerate() {
        if !g.bit_equal(w) {
            let (gv, wv) = (g.to_f64_vec(), w.to_f64_vec());
            let at = gv.iter().zip(&wv).position(|(a, b)| a.to_bits() != b.to_bits());
            panic!(
                "output {j} differs from the interpreter's{}\n jit: {g:?}\nwant: {w:?}",
                at.map(|i| format!(" first at element {i}: {} vs {}", gv[i], wv[i])).unwrap_or_default()
            );
        }
    }
}

/// Parses `text` and checks `@main` on random inputs from `seed`, on one
/// thread and on two.
pub fn check_qir(text: &str, seed: u64) {
    let mut ctx = context();
    let module = parse(&mut ctx, text);
    let inputs = random_inputs(&ctx, &module, "main", seed);
    assert_jit_matches_interpreter(&ctx, &module, "main", &inputs, 1);
    assert_jit_matches_interpreter(&ctx, &module, "main", &inputs, 2);
}
