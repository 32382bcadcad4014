//! The compiled `qnn.quantize`, `qnn.dequantize` and `qnn.requantize`
//! against the reference interpreter, bit for bit.
//!
//! Each case writes a one-op function in `.qir`, parses it, compiles it with
//! the built-in lowerings (so the kernel reads the same types and `rounding`
//! attribute the interpreter's kernel does), runs both on the same data and
//! compares every output bit. Parameters are random: storage types
//! (i8, u8, narrowed ranges, i4, u4), scales across many orders of magnitude,
//! zero points often at the ends of the range, every rounding mode, and
//! lengths that exercise the vector loop, the scalar tail and both together
//! (0, 1, 7, 8, 9, 31, 32, 33, 1000, and random). Quantize inputs mix values
//! near the grid (exact ties included) with NaN, ±inf, ±0, subnormals and
//! huge values.
//!
//! The kernels need AVX2; on a CPU without it every test prints a notice and
//! checks that compiling is refused with an error instead.

mod common;

use common::{avx2_here, context, quant, ROUNDINGS, STORAGES};
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;
use qopt_codegen_x86::{
    compile, CodegenError, CpuFeatures, JitModule, Lowerings, Target, TargetCpu, Workspace,
};
use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::{parse_module, Context, Module};

/// The lengths every property also runs at: empty, tail only, one vector,
/// vector plus tail, several vectors with and without a tail.
const EDGE_LENGTHS: [usize; 9] = [0, 1, 7, 8, 9, 31, 32, 33, 1000];

/// `func.func @f(%x) { %0 = <op>(%x) <attrs> ; return %0 }` over `len` elements.
fn one_op_module(ctx: &mut Context, op: &str, attrs: &str, input: &str, output: &str, len: usize) -> Module {
    let (tin, tout) = (format!("tensor<{len}x{input}>"), format!("tensor<{len}x{output}>"));
    let text = format!(
        "module {{\n  func.func @f(%x: {tin}) -> {tout} {{\n    %0 = {op}(%x) {attrs} : ({tin}) -> {tout}\n    \
         func.return %0 : {tout}\n  }}\n}}\n"
    );
    match parse_module(ctx, text.as_bytes(), "case.qir") {
        Ok(module) => module,
        Err(e) => panic!("{text}\ndoes not parse: {e:?}"),
    }
}

/// `@f` of `module` compiled for `target` and mapped.
fn jit_for(ctx: &Context, module: &Module, target: &Target) -> Result<JitModule, CodegenError> {
    JitModule::new(compile(ctx, module, "f", &Lowerings::builtin(), target)?)
}

/// `@f` of `module` compiled for this CPU.
fn jit(ctx: &Context, module: &Module) -> JitModule {
    let target = Target::for_running(TargetCpu::Native).unwrap();
    jit_for(ctx, module, &target).unwrap_or_else(|e| panic!("{e}"))
}

/// The compiled function's output for `input`.
fn run_jit(jit: &JitModule, input: &Tensor) -> Tensor {
    jit.run_tensors(std::slice::from_ref(input), &mut Workspace::new(), 1).unwrap().remove(0)
}

/// Runs the op through the interpreter and compiled, and asserts equal bits.
fn check(op: &str, attrs: &str, input_elem: &str, output_elem: &str, input: Tensor) {
    let mut ctx = context();
    let len = input.len();
    let module = one_op_module(&mut ctx, op, attrs, input_elem, output_elem, len);
    let want = run_function(&ctx, &module, "f", std::slice::from_ref(&input), &KernelRegistry::standard())
        .unwrap_or_else(|e| panic!("interpreter: {e}"))
        .remove(0);
    let got = run_jit(&jit(&ctx, &module), &input);
    assert!(
        got.bit_equal(&want),
        "{op} {attrs} {input_elem} -> {output_elem}, len {len}:\n{}",
        diff(&input, &got, &want)
    );
}

/// The first few elements where `got` and `want` differ, with their inputs.
fn diff(input: &Tensor, got: &Tensor, want: &Tensor) -> String {
    let bits = |t: &Tensor| -> Vec<String> {
        match t {
            Tensor::F32(a) => a.iter().map(|v| format!("{v:e} ({:#010x})", v.to_bits())).collect(),
            Tensor::I8(a) => a.iter().map(|v| v.to_string()).collect(),
            Tensor::U8(a) => a.iter().map(|v| v.to_string()).collect(),
            other => vec![other.describe()],
        }
    };
    let (i, g, w) = (bits(input), bits(got), bits(want));
    let lines: Vec<String> = (0..g.len())
        .filter(|&k| g[k] != w[k])
        .take(8)
        .map(|k| format!("  [{k}] input {} → jit {} vs interpreter {}", i[k], g[k], w[k]))
        .collect();
    lines.join("\n")
}

fn f32_tensor(values: Vec<f32>) -> Tensor {
    Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[values.len()]), values).unwrap())
}

/// A stored-value tensor of the storage's buffer type.
fn stored_tensor(storage: &str, values: Vec<i64>) -> Tensor {
    let shape = IxDyn(&[values.len()]);
    if storage.starts_with('u') {
        Tensor::U8(ArrayD::from_shape_vec(shape, values.into_iter().map(|v| v as u8).collect()).unwrap())
    } else {
        Tensor::I8(ArrayD::from_shape_vec(shape, values.into_iter().map(|v| v as i8).collect()).unwrap())
    }
}

// ---- strategies -----------------------------------------------------------------

/// A scale `mantissa × 2^exponent` that stays a normal f32: from about 1e-30 to 1e30.
fn scale() -> impl Strategy<Value = f64> {
    (1.0f64..2.0, -100i32..100).prop_map(|(m, e)| m * 2f64.powi(e))
}

/// A zero point in `[lo, hi]`, at either end a third of the time.
fn zero_point(lo: i64, hi: i64) -> impl Strategy<Value = i64> {
    prop_oneof![Just(lo), Just(hi), lo..=hi]
}

fn length() -> impl Strategy<Value = usize> {
    prop_oneof![proptest::sample::select(EDGE_LENGTHS.to_vec()), 0usize..200]
}

/// One quantize input for a grid of `scale`: on the grid, on a tie, anywhere
/// near the range, special values, or any bit pattern.
fn quantize_input(scale: f32) -> impl Strategy<Value = f32> {
    prop_oneof![
        (-300i32..300).prop_map(move |k| k as f32 * scale),
        (-300i32..300).prop_map(move |k| (k as f32 + 0.5) * scale),
        (-300.0f32..300.0).prop_map(move |t| t * scale),
        proptest::sample::select(vec![
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            1e-45,
            -1e-45,
            1e38,
            -1e38,
            4_194_304.5,
        ]),
        any::<u32>().prop_map(f32::from_bits),
    ]
}

/// A quantize case: (storage, zero point, scale, inputs on that scale's grid).
fn quantize_case() -> impl Strategy<Value = (&'static str, i64, f64, Vec<f32>)> {
    quant_type().prop_flat_map(|(storage, _, _, zp, s)| {
        let inputs = length().prop_flat_map(move |n| proptest::collection::vec(quantize_input(s as f32), n));
        (Just(storage), Just(zp), Just(s), inputs)
    })
}

/// (storage, qmin, qmax, zero point, scale) for a quantized type.
fn quant_type() -> impl Strategy<Value = (&'static str, i64, i64, i64, f64)> {
    proptest::sample::select(STORAGES.to_vec())
        .prop_flat_map(|(storage, lo, hi)| (Just(storage), Just(lo), Just(hi), zero_point(lo, hi), scale()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn quantize_matches_the_interpreter((storage, zp, s, values) in quantize_case()) {
        if !avx2_here("quantize_matches_the_interpreter") { return Ok(()); }
        check("qnn.quantize", "", "f32", &quant(storage, s, zp), f32_tensor(values));
    }

    #[test]
    fn dequantize_matches_the_interpreter(
        (storage, lo, hi, zp, s) in quant_type(),
        picks in length().prop_flat_map(|n| proptest::collection::vec(any::<u64>(), n)),
    ) {
        if !avx2_here("dequantize_matches_the_interpreter") { return Ok(()); }
        let span = (hi - lo + 1) as u64;
        let values = picks.iter().map(|p| lo + (p % span) as i64).collect();
        check("qnn.dequantize", "", &quant(storage, s, zp), "f32", stored_tensor(storage, values));
    }

    #[test]
    fn requantize_matches_the_interpreter(
        (in_storage, lo, hi, zp_in, s_in) in quant_type(),
        (out_storage, _, _, zp_out, _) in quant_type(),
        // The output scale relative to the input: ratios from 2^-70 to 2^70
        // cover shifts below 0, in 1..=62 and above 62.
        (ratio_mantissa, ratio_exponent) in (1.0f64..2.0, -70i32..70),
        near_one in any::<bool>(),
        rounding in proptest::sample::select(ROUNDINGS.to_vec()),
        picks in length().prop_flat_map(|n| proptest::collection::vec(any::<u64>(), n)),
    ) {
        if !avx2_here("requantize_matches_the_interpreter") { return Ok(()); }
        // Ratios near 1 and small powers of 2 make ties frequent.
        let ratio = if near_one { ratio_mantissa.round() * 2f64.powi(ratio_exponent % 4) } else { ratio_mantissa * 2f64.powi(ratio_exponent) };
        let s_out = s_in / ratio;
        prop_assume!((s_out as f32).is_normal());
        let span = (hi - lo + 1) as u64;
        let values = picks.iter().map(|p| lo + (p % span) as i64).collect();
        check(
            "qnn.requantize",
            &format!("{{rounding = \"{rounding}\"}}"),
            &quant(in_storage, s_in, zp_in),
            &quant(out_storage, s_out, zp_out),
            stored_tensor(in_storage, values),
        );
    }
}

/// Every stored input value, every storage pair, the worked examples' and
/// extreme multipliers, every mode: an exhaustive sweep of the input domain.
#[test]
fn requantize_every_stored_value() {
    if !avx2_here("requantize_every_stored_value") {
        return;
    }
    let ratios =
        [2.5, 1.0, 0.5, 0.235 / 0.1 * 0.1, 1.0 / 3.0, 3.0, 2f64.powi(40), 2f64.powi(-40), 1e-12, 1e12];
    for (in_storage, lo, hi) in STORAGES {
        let values: Vec<i64> = (lo..=hi).collect();
        for (out_storage, out_lo, out_hi) in [STORAGES[0], STORAGES[1], STORAGES[2]] {
            for ratio in ratios {
                for rounding in ROUNDINGS {
                    let zp_out = (out_lo + out_hi) / 2;
                    check(
                        "qnn.requantize",
                        &format!("{{rounding = \"{rounding}\"}}"),
                        &quant(in_storage, 0.5, lo),
                        &quant(out_storage, 0.5 / ratio, zp_out),
                        stored_tensor(in_storage, values.clone()),
                    );
                }
            }
        }
    }
}

/// The worked examples of docs/quant-semantics.md §3.1 and §5, with the
/// expected bytes written out, so a shared mistake of kernel and interpreter
/// would still show.
#[test]
fn worked_examples() {
    if !avx2_here("worked_examples") {
        return;
    }
    let mut ctx = context();
    let module = one_op_module(&mut ctx, "qnn.quantize", "", "f32", &quant("i8", 0.5, -3), 7);
    let x = f32_tensor(vec![1.25, 1.75, -0.25, 100.0, -70.0, f32::NAN, f32::INFINITY]);
    assert_eq!(run_jit(&jit(&ctx, &module), &x), stored_tensor("i8", vec![-1, 1, -3, 127, -128, -3, 127]));

    let module =
        one_op_module(&mut ctx, "qnn.requantize", "", &quant("i8", 0.5, 2), &quant("i8", 0.2, 10), 4);
    let q = stored_tensor("i8", vec![7, -3, 127, -128]);
    assert_eq!(run_jit(&jit(&ctx, &module), &q), stored_tensor("i8", vec![23, -3, 127, -128]));

    let module = one_op_module(&mut ctx, "qnn.dequantize", "", &quant("i8", 0.5, 0), "f32", 3);
    let q = stored_tensor("i8", vec![1, 2, 3]);
    assert_eq!(run_jit(&jit(&ctx, &module), &q), f32_tensor(vec![0.5, 1.0, 1.5]));
}

/// A caller running with flush-to-zero and denormals-are-zero still gets
/// IEEE results: the kernel pins MXCSR for its duration and restores it.
#[cfg(target_arch = "x86_64")]
#[test]
fn results_do_not_depend_on_the_callers_mxcsr() {
    if !avx2_here("results_do_not_depend_on_the_callers_mxcsr") {
        return;
    }
    // Subnormal inputs over the smallest normal scale: quotients in
    // [0.5, 1), which round to 0 or 1, and which DAZ would turn into 0.
    let s = f32::MIN_POSITIVE as f64;
    let x: Vec<f32> = (0..40).map(|k| f32::from_bits(0x0040_0000 + k * 0x0001_0000)).collect();
    let mut ctx = context();
    let module = one_op_module(&mut ctx, "qnn.quantize", "", "f32", &quant("i8", s, 0), x.len());
    let jit = jit(&ctx, &module);
    let input = f32_tensor(x.clone());
    let ieee = run_jit(&jit, &input);
    let reference: Vec<i64> = x
        .iter()
        .map(|&v| qopt_dialect_qnn::fixed_point::quantize_f32(v, s as f32, 0, -128, 127) as i64)
        .collect();
    assert_eq!(ieee, stored_tensor("i8", reference));
    assert!(
        ieee.to_f64_vec().iter().any(|&q| q != 0.0),
        "subnormal inputs give non-zero results under IEEE rules"
    );

    let mut workspace = Workspace::new();
    let ftz_daz_round_down: u32 = 0x1F80 | 0x8000 | 0x0040 | 0x2000;
    let mut saved: u32 = 0;
    // SAFETY: stmxcsr/ldmxcsr only read and write the given u32s; MXCSR is
    // restored before any Rust float code runs again (the run between them
    // copies and checks buffers, and its kernel pins its own MXCSR).
    unsafe {
        std::arch::asm!("stmxcsr [{}]", in(reg) &mut saved);
        std::arch::asm!("ldmxcsr [{}]", in(reg) &ftz_daz_round_down);
    }
    let result = jit.run_tensors(std::slice::from_ref(&input), &mut workspace, 1);
    let mut after: u32 = 0;
    // SAFETY: as above.
    unsafe {
        std::arch::asm!("stmxcsr [{}]", in(reg) &mut after);
        std::arch::asm!("ldmxcsr [{}]", in(reg) &saved);
    }
    assert_eq!(after, ftz_daz_round_down, "the kernel restores the caller's MXCSR");
    assert_eq!(result.unwrap().remove(0), ieee);
}

/// Conversions the kernels do not handle run by host calls, with the
/// lowering's refusal as the reason and the interpreter's bits: never wrong
/// answers.
#[test]
fn unsupported_conversions_run_by_host_calls() {
    let mut ctx = context();
    let target = Target::for_running_on(TargetCpu::Native, &CpuFeatures::host()).unwrap();
    let per_axis = "!qnn.uniform<i8:f32:0, {0.1:0, 0.2:0}>";
    let cases = [
        (one_op_module(&mut ctx, "qnn.quantize", "", "f32", per_axis, 2), "per-axis"),
        (
            one_op_module(&mut ctx, "qnn.quantize", "", "f32", &quant("i16", 0.5, 0), 2),
            "the result: 16-bit storage is not compiled yet (8 bits at most)",
        ),
    ];
    let input =
        Tensor::F32(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[2]), vec![0.37, -1.25]).unwrap());
    for (module, reason) in cases {
        let jit = jit_for(&ctx, &module, &target).unwrap();
        let host = &jit.program().host_ops;
        assert!(host.len() == 1 && host[0].reason.contains(reason), "{host:?}");
        let want =
            run_function(&ctx, &module, "f", std::slice::from_ref(&input), &KernelRegistry::standard());
        assert!(run_jit(&jit, &input).bit_equal(&want.unwrap()[0]));
    }

    // Without AVX2 every conversion runs in the interpreter.
    let module = one_op_module(&mut ctx, "qnn.dequantize", "", &quant("i8", 0.5, 0), "f32", 3);
    if let Ok(no_avx2) = Target::for_running_on(TargetCpu::Native, &CpuFeatures::NONE) {
        let jit = jit_for(&ctx, &module, &no_avx2).unwrap();
        let host = &jit.program().host_ops;
        assert!(host.len() == 1 && host[0].reason.contains("avx2"), "{host:?}");
    }
}
