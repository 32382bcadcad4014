//! Shared by the integration tests: parse a `.qir` module, run one function
//! through the reference interpreter and through the JIT, and compare every
//! output bit for bit.
#![allow(dead_code)]

use qopt_codegen_x86::host::tensor_bytes;
use qopt_codegen_x86::{
    compile, CpuFeatures, ElementType, Elements, ElementsMut, GuardSide, GuardedRegion, JitModule, Lowerings,
    Program, Target, Workspace,
};
use qopt_interp::{random_arguments, run_function, IntegerValues, KernelRegistry, RandomInputs, Tensor};
use qopt_ir_core::{function_signature, parse_module, Context, Module, OpView};

pub use qopt_dialect_qnn::context;

/// Parses `text`, panicking with the text and the error when it does not.
pub fn parse(ctx: &mut Context, text: &str) -> Module {
    match parse_module(ctx, text.as_bytes(), "case.qir") {
        Ok(module) => module,
        Err(e) => panic!("{text}\ndoes not parse: {e:?}"),
    }
}

/// Storage types of activations and results, with their ranges: full i8 and
/// u8, narrowed, and 4-bit.
pub const STORAGES: [(&str, i64, i64); 6] = [
    ("i8", -128, 127),
    ("u8", 0, 255),
    ("i8<-127:127>", -127, 127),
    ("u8<0:200>", 0, 200),
    ("i4", -8, 7),
    ("u4", 0, 15),
];

/// Every rounding mode, as the `rounding` attribute spells it.
pub const ROUNDINGS: [&str; 3] = ["half_away_from_zero", "half_to_even", "half_up"];

/// A quantized element type `!qnn.uniform<storage:f32, scale:zp>`.
pub fn quant(storage: &str, scale: f64, zero_point: i64) -> String {
    format!("!qnn.uniform<{storage}:f32, {scale:?}:{zero_point}>")
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
/// bit, naming the element. With several threads it runs twice: as
/// compiled (small kernels on thread 0 alone) and with every kernel shared
/// between the threads, as a large model's are.
pub fn assert_jit_matches_interpreter(
    ctx: &Context,
    module: &Module,
    function: &str,
    inputs: &[Tensor],
    threads: usize,
) {
    let want = run_function(ctx, module, function, inputs, &KernelRegistry::standard())
        .unwrap_or_else(|e| panic!("interpreter: {e}"));
    let program = compile_here(ctx, module, function);
    let mut shared = program.clone();
    shared.kernels.iter_mut().filter(|k| k.host.is_none()).for_each(|k| k.serial = false);
    let programs = if threads > 1 { vec![program, shared] } else { vec![program] };
    for program in programs {
        let jit = JitModule::new(program).expect("mapping the program");
        let got = jit.run_tensors(inputs, &mut Workspace::new(), threads).expect("running the program");
        assert_outputs_equal(&got, &want);
    }
}

/// Panics at the first output of `got` that differs from `want` in any bit.
fn assert_outputs_equal(got: &[Tensor], want: &[Tensor]) {
    assert_eq!(got.len(), want.len());
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
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
/// thread and on two, and once more with every buffer between guard pages.
pub fn check_qir(text: &str, seed: u64) {
    let mut ctx = context();
    let module = parse(&mut ctx, text);
    let inputs = random_inputs(&ctx, &module, "main", seed);
    assert_jit_matches_interpreter(&ctx, &module, "main", &inputs, 1);
    assert_jit_matches_interpreter(&ctx, &module, "main", &inputs, 2);
    assert_guarded_run_matches(&ctx, &module, "main", &inputs);
}

/// Runs `@function` with every input, every output and the arena flush
/// against an inaccessible guard page, first at their ends (overruns
/// fault), then at their starts (underruns fault), and compares the outputs
/// with the interpreter's bit for bit.
pub fn assert_guarded_run_matches(ctx: &Context, module: &Module, function: &str, inputs: &[Tensor]) {
    assert_guarded_run_matches_with(ctx, module, function, inputs, &Lowerings::builtin());
}

/// [`assert_guarded_run_matches`] with other lowerings.
pub fn assert_guarded_run_matches_with(
    ctx: &Context,
    module: &Module,
    function: &str,
    inputs: &[Tensor],
    lowerings: &Lowerings,
) {
    let want = run_function(ctx, module, function, inputs, &KernelRegistry::standard())
        .unwrap_or_else(|e| panic!("interpreter: {e}"));
    let program = compile(ctx, module, function, lowerings, &Target::host()).expect("compiling");
    let jit = JitModule::new(program).expect("mapping the program");
    let program = jit.program();
    for side in [GuardSide::End { align: 4 }, GuardSide::Start] {
        let guarded_inputs: Vec<(GuardedRegion, ElementType)> = inputs
            .iter()
            .zip(&program.inputs)
            .map(|(t, sig)| {
                let bytes = tensor_bytes(t);
                let mut region = GuardedRegion::new(bytes.len(), side).expect("a guarded input");
                region.as_mut_slice().copy_from_slice(&bytes);
                (region, sig.element)
            })
            .collect();
        let guarded_outputs: Vec<(GuardedRegion, ElementType, usize)> = program
            .outputs
            .iter()
            .map(|sig| {
                (GuardedRegion::new(sig.bytes(), side).expect("a guarded output"), sig.element, sig.len())
            })
            .collect();
        let views: Vec<Elements<'_>> =
            guarded_inputs.iter().map(|(r, e)| view(r.as_mut_ptr(), *e, r.len() / e.size())).collect();
        let mut outs: Vec<ElementsMut<'_>> =
            guarded_outputs.iter().map(|(r, e, n)| view_mut(r.as_mut_ptr(), *e, *n)).collect();
        jit.run(&views, &mut outs, &mut Workspace::guarded(), 2).expect("a guarded run");
        drop(outs);
        for (j, ((region, _, _), w)) in guarded_outputs.iter().zip(&want).enumerate() {
            assert_eq!(region.as_slice(), tensor_bytes(w).as_slice(), "output {j} ({side:?} guards)");
        }
    }
}

fn view<'a>(ptr: *mut u8, element: ElementType, len: usize) -> Elements<'a> {
    // SAFETY (test helper): the guarded region holds `len` elements of
    // `element` at `ptr`, aligned for them, and outlives the view's use.
    unsafe { Elements::from_raw_parts(element, ptr, len) }
}

fn view_mut<'a>(ptr: *mut u8, element: ElementType, len: usize) -> ElementsMut<'a> {
    // SAFETY (test helper): as in `view`; each output region is distinct.
    unsafe { ElementsMut::from_raw_parts(element, ptr, len) }
}
