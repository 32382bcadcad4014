//! `qnn.conv2d`, `qnn.dense` and their relu forms through the module
//! compiler, bit for bit against the interpreter: random small graphs (one
//! or two layers, so results flow through the arena into the next layer)
//! with random shapes, strides, pads, dilations, groups (depthwise
//! included), per-tensor and per-channel weights with zero points, i8, u8
//! and narrowed activations, biases present or absent, every rounding mode,
//! relu with and without `relu_max`. Each graph runs on one thread and on
//! two, and once more with every buffer against guard pages, both with the
//! default lowerings (which take `vpmaddubsw` when the weights prove it
//! safe) and with the exact `vpmaddwd` path forced.
//!
//! Also: the VNNI code assembles for AVX-VNNI and AVX-512 VNNI targets (it
//! runs only where the CPU has it), and what the kernels do not compile is
//! an `Unsupported` error naming the reason.

mod common;

use common::*;
use iced_x86::{Code, Decoder, DecoderOptions};
use proptest::prelude::*;
use qopt_codegen_x86::{
    compile, Conv2dLowering, ConvTransposeLowering, CpuFeatures, DenseLowering, JitModule, KernelOptions,
    Lowerings, Target, TargetCpu, Workspace,
};
use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::{Context, Module, SplitMix64 as Random};
use std::sync::Arc;

/// The builtin lowerings, with conv, transposed conv and dense limited to `options`.
fn lowerings(options: KernelOptions) -> Lowerings {
    let mut l = Lowerings::builtin();
    let conv = Arc::new(Conv2dLowering { options });
    let transposed = Arc::new(ConvTransposeLowering { options });
    let dense = Arc::new(DenseLowering { options });
    for name in ["qnn.conv2d", "qnn.conv2d_relu"] {
        l.register(name, conv.clone());
    }
    for name in ["qnn.conv_transpose2d", "qnn.conv_transpose2d_relu"] {
        l.register(name, transposed.clone());
    }
    for name in ["qnn.dense", "qnn.dense_relu"] {
        l.register(name, dense.clone());
    }
    l
}

/// Runs `@main` with `lowerings` on 1 and 2 threads and against guard pages,
/// comparing with the interpreter; returns each kernel's strategy.
fn check_with(ctx: &Context, module: &Module, inputs: &[Tensor], lowerings: &Lowerings) -> Vec<String> {
    let want = run_function(ctx, module, "main", inputs, &KernelRegistry::standard())
        .unwrap_or_else(|e| panic!("interpreter: {e}"));
    let program = compile(ctx, module, "main", lowerings, &Target::host()).unwrap_or_else(|e| panic!("{e}"));
    let strategies = program.kernels.iter().map(|k| k.strategy.clone()).collect();
    let jit = JitModule::new(program).expect("mapping the program");
    for threads in [1, 2] {
        let got = jit.run_tensors(inputs, &mut Workspace::new(), threads).expect("running the program");
        for (g, w) in got.iter().zip(&want) {
            assert!(g.bit_equal(w), "{threads} thread(s): jit {g:?}\nwant {w:?}");
        }
    }
    assert_guarded_run_matches_with(ctx, module, "main", inputs, lowerings);
    strategies
}

/// Parses `text` and checks it with both option sets on random inputs.
fn check_text(text: &str, seed: u64) -> Vec<String> {
    let mut ctx = context();
    let module = parse(&mut ctx, text);
    let inputs = random_inputs(&ctx, &module, "main", seed);
    let mut strategies = check_with(&ctx, &module, &inputs, &lowerings(KernelOptions::default()));
    strategies.extend(check_with(&ctx, &module, &inputs, &lowerings(KernelOptions::EXACT_WORDS_ONLY)));
    strategies
}

// ---- random graphs ------------------------------------------------------------

/// Activation storages with their ranges.
const STORAGES: [(&str, i64, i64); 4] =
    [("i8", -128, 127), ("u8", 0, 255), ("i8<-127:127>", -127, 127), ("u8<0:200>", 0, 200)];

/// A per-tensor activation type with a random zero point.
fn activation(rng: &mut Random, scale: f64) -> String {
    let (storage, lo, hi) = STORAGES[rng.range(0, 3) as usize];
    let zp = match rng.next_u64() % 3 {
        0 => lo,
        _ => rng.range(lo, hi),
    };
    format!("!qnn.uniform<{storage}:f32, {scale:?}:{zp}>")
}

/// A constant weight of `shape` (output channels on `axis`), per tensor or
/// per channel, signed or unsigned, with zero points, full-range or small
/// values (small ones let `vpmaddubsw` take the layer).
fn weight(rng: &mut Random, shape: &[usize], axis: usize) -> (String, String) {
    let o = shape[axis];
    let unsigned = rng.next_u64().is_multiple_of(5);
    let storage = if unsigned { "u8" } else { "i8" };
    let (lo, hi) = if unsigned { (0, 255) } else { (-128, 127) };
    let per_channel = rng.next_u64().is_multiple_of(2);
    let zero_point = |rng: &mut Random| match (unsigned, rng.next_u64() % 3) {
        (false, 0 | 1) => 0,
        (true, 0 | 1) => rng.range(120, 136),
        _ => rng.range(lo, hi),
    };
    let params: Vec<(f64, i64)> = (0..if per_channel { o } else { 1 })
        .map(|_| {
            (
                (1.0 + (rng.next_u64() % 997) as f64 / 997.0) * 2f64.powi(-7 - rng.range(0, 3) as i32),
                zero_point(rng),
            )
        })
        .collect();
    let elem = if per_channel {
        let entries: Vec<String> = params.iter().map(|(s, z)| format!("{s:?}:{z}")).collect();
        format!("!qnn.uniform<{storage}:f32:{axis}, {{{}}}>", entries.join(", "))
    } else {
        format!("!qnn.uniform<{storage}:f32, {:?}:{}>", params[0].0, params[0].1)
    };
    let small = rng.next_u64().is_multiple_of(2);
    let inner: usize = shape[axis + 1..].iter().product();
    let values: Vec<String> = (0..shape.iter().product::<usize>())
        .map(|i| {
            let zp = params[if per_channel { (i / inner.max(1)) % o } else { 0 }].1;
            let v = if small { (zp + rng.range(-60, 60)).clamp(lo, hi) } else { rng.range(lo, hi) };
            format!("{:02X}", v as u8)
        })
        .collect();
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let ty = format!("tensor<{}x{elem}>", dims.join("x"));
    (format!("dense<\"0x{}\"> : {ty}", values.concat()), ty)
}

/// Attributes shared by conv and dense: rounding, relu_max; and the op name.
fn op_and_attrs(rng: &mut Random, base: &str, mut attrs: Vec<String>) -> (String, String) {
    let relu = rng.range(0, 3);
    if relu >= 2 {
        attrs.push(format!("relu_max = {}", if relu == 2 { "6.0" } else { "0.4" }));
    }
    let rounding = rng.range(0, 3);
    if rounding < 3 {
        attrs.push(format!("rounding = \"{}\"", ROUNDINGS[rounding as usize]));
    }
    let op = if relu > 0 { format!("{base}_relu") } else { base.to_string() };
    (op, format!("{{{}}}", attrs.join(", ")))
}

/// A graph of one or two conv layers (the second may be a dense after a
/// flatten) on a random input.
#[derive(Clone, Debug)]
struct Graph {
    text: String,
    seed: u64,
}

#[derive(Clone, Debug)]
struct ConvShape {
    n: usize,
    c: usize,
    hw: [usize; 2],
}

fn graph() -> impl Strategy<Value = Graph> {
    (
        (1usize..3, 1usize..9, 1usize..13, 1usize..13),
        proptest::collection::vec((1usize..4, 1usize..3, 1usize..3, 0usize..3, 0usize..5, 1usize..10), 1..3),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|((n, c, h, w), layers, dense_last, seed)| {
            let mut rng = Random::new(seed | 1);
            let mut shape = ConvShape { n, c, hw: [h, w] };
            let scale = 0.05;
            let input_type = activation(&mut rng, scale);
            let mut ty = input_type.clone();
            let tensor = |s: &ConvShape, t: &str| format!("tensor<{}x{}x{}x{}x{t}>", s.n, s.c, s.hw[0], s.hw[1]);
            let arg = tensor(&shape, &ty);
            let mut body = String::new();
            let mut value = "%x".to_string();
            for (i, &(k, stride, dilation, pad, kind, og)) in layers.iter().enumerate() {
                // kind 0: depthwise; 1: grouped; 4: transposed (an upsampling
                // by its kernel, k×k); else plain.
                let groups = match kind {
                    0 => shape.c,
                    1 if shape.c.is_multiple_of(2) => 2,
                    _ => 1,
                };
                let o = if kind == 0 { shape.c } else { groups * og };
                let reach = dilation * (k - 1) + 1;
                let (out_hw, (w, tw), (op, attrs)) = if kind == 4 {
                    let attrs = vec![format!("stride = [{k}, {k}]")];
                    (
                        shape.hw.map(|d| d * k),
                        weight(&mut rng, &[shape.c, o, k, k], 1),
                        op_and_attrs(&mut rng, "qnn.conv_transpose2d", attrs),
                    )
                } else {
                    if shape.hw.iter().any(|&d| d + 2 * pad < reach) {
                        continue;
                    }
                    let attrs = vec![
                        format!("stride = [{stride}, {stride}]"),
                        format!("pad = [{pad}, {pad}, {pad}, {pad}]"),
                        format!("dilation = [{dilation}, {dilation}]"),
                        format!("groups = {groups}"),
                    ];
                    (
                        shape.hw.map(|d| (d + 2 * pad).saturating_sub(reach) / stride + 1),
                        weight(&mut rng, &[o, shape.c / groups, k, k], 0),
                        op_and_attrs(&mut rng, "qnn.conv2d", attrs),
                    )
                };
                let out_shape = ConvShape { n: shape.n, c: o, hw: out_hw };
                let out_scale = scale * (1.0 + (rng.next_u64() % 7) as f64);
                let out_ty = activation(&mut rng, out_scale);
                let (tin, tout) = (tensor(&shape, &ty), tensor(&out_shape, &out_ty));
                body += &format!("    %w{i} = fp.constant() {{value = {w}}} : () -> {tw}\n");
                let (bias_operand, bias_type) = if rng.next_u64().is_multiple_of(3) {
                    (String::new(), String::new())
                } else {
                    let values: Vec<String> = (0..o).map(|_| rng.range(-30000, 30000).to_string()).collect();
                    body += &format!(
                        "    %b{i} = fp.constant() {{value = dense<[{}]> : tensor<{o}xi32>}} : () -> tensor<{o}xi32>\n",
                        values.join(", ")
                    );
                    (format!(", %b{i}"), format!(", tensor<{o}xi32>"))
                };
                body += &format!(
                    "    %y{i} = {op}({value}, %w{i}{bias_operand}) {attrs} : ({tin}, {tw}{bias_type}) -> {tout}\n"
                );
                value = format!("%y{i}");
                shape = out_shape;
                ty = out_ty;
            }
            let mut result = tensor(&shape, &ty);
            if dense_last {
                let k = shape.c * shape.hw[0] * shape.hw[1];
                let flat = format!("tensor<{}x{k}x{ty}>", shape.n);
                body += &format!("    %f = fp.flatten({value}) {{axis = 1}} : ({result}) -> {flat}\n");
                let o = rng.range(1, 20) as usize;
                let (w, tw) = weight(&mut rng, &[o, k], 0);
                body += &format!("    %wd = fp.constant() {{value = {w}}} : () -> {tw}\n");
                let (op, attrs) = op_and_attrs(&mut rng, "qnn.dense", Vec::new());
                let out_ty = activation(&mut rng, scale * 3.0);
                let tout = format!("tensor<{}x{o}x{out_ty}>", shape.n);
                body += &format!("    %d = {op}(%f, %wd) {attrs} : ({flat}, {tw}) -> {tout}\n");
                value = "%d".into();
                result = tout;
            }
            let text = format!(
                "module {{\n  func.func @main(%x: {arg}) -> {result} {{\n{body}    func.return {value} : {result}\n  }}\n}}\n"
            );
            Graph { text, seed }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_conv_and_dense_graphs_match_the_interpreter(g in graph()) {
        if avx2_here("random_conv_and_dense_graphs_match_the_interpreter") {
            check_text(&g.text, g.seed);
        }
    }
}

// ---- fixed cases ------------------------------------------------------------

/// §6's worked dense example, with the expected bytes written out.
#[test]
fn the_worked_dense_example() {
    if !avx2_here("the_worked_dense_example") {
        return;
    }
    let text = "module {
  func.func @main(%x: tensor<1x3x!qnn.uniform<u8:f32, 0.5:128>>) -> (tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>, tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>) {
    %w = fp.constant() {value = dense<[[4, 1, 9], [-8, 8, 3]]> : tensor<2x3x!qnn.uniform<i8:f32:0, {0.25:0, 0.125:0}>>} : () -> tensor<2x3x!qnn.uniform<i8:f32:0, {0.25:0, 0.125:0}>>
    %b = fp.constant() {value = dense<[10, -4]> : tensor<2xi32>} : () -> tensor<2xi32>
    %y = qnn.dense(%x, %w, %b) : (tensor<1x3x!qnn.uniform<u8:f32, 0.5:128>>, tensor<2x3x!qnn.uniform<i8:f32:0, {0.25:0, 0.125:0}>>, tensor<2xi32>) -> tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>
    %r = qnn.dense_relu(%x, %w, %b) : (tensor<1x3x!qnn.uniform<u8:f32, 0.5:128>>, tensor<2x3x!qnn.uniform<i8:f32:0, {0.25:0, 0.125:0}>>, tensor<2xi32>) -> tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>
    func.return %y, %r : tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>, tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>
  }
}";
    let mut ctx = context();
    let module = parse(&mut ctx, text);
    let x =
        Tensor::U8(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[1, 3]), vec![130, 126, 128]).unwrap());
    for options in [KernelOptions::default(), KernelOptions::EXACT_WORDS_ONLY] {
        let program = compile(&ctx, &module, "main", &lowerings(options), &Target::host()).unwrap();
        let jit = JitModule::new(program).unwrap();
        let got = jit.run_tensors(std::slice::from_ref(&x), &mut Workspace::new(), 1).unwrap();
        let bytes = |t: &Tensor| t.to_f64_vec();
        assert_eq!(bytes(&got[0]), [-2.0, -19.0]);
        assert_eq!(bytes(&got[1]), [-2.0, -10.0]);
    }
    check_with(&ctx, &module, &[x], &lowerings(KernelOptions::default()));
}

/// Which scheme a layer gets: the exact one for weights that could
/// saturate `vpmaddubsw`, the byte one for weights proven safe, the exact
/// one when the options forbid the others.
#[test]
fn the_scheme_follows_the_weights_and_the_options() {
    let conv = |weights: &str| {
        format!(
            "module {{
  func.func @main(%x: tensor<1x2x3x3x!qnn.uniform<i8:f32, 0.1:0>>) -> tensor<1x1x3x3x!qnn.uniform<i8:f32, 0.1:0>> {{
    %w = fp.constant() {{value = dense<[{weights}]> : tensor<1x2x1x1x!qnn.uniform<i8:f32, 0.01:0>>}} : () -> tensor<1x2x1x1x!qnn.uniform<i8:f32, 0.01:0>>
    %y = qnn.conv2d(%x, %w) : (tensor<1x2x3x3x!qnn.uniform<i8:f32, 0.1:0>>, tensor<1x2x1x1x!qnn.uniform<i8:f32, 0.01:0>>) -> tensor<1x1x3x3x!qnn.uniform<i8:f32, 0.1:0>>
    func.return %y : tensor<1x1x3x3x!qnn.uniform<i8:f32, 0.1:0>>
  }}
}}"
        )
    };
    let v3 = Target::for_running_on(TargetCpu::X86_64V3, &CpuFeatures::X86_64_V3).unwrap();
    let strategy = |text: &str, options: KernelOptions| {
        let mut ctx = context();
        let module = parse(&mut ctx, text);
        let program = compile(&ctx, &module, "main", &lowerings(options), &v3).unwrap();
        program.kernels.last().unwrap().strategy.clone()
    };
    // 255 · (64 + 64) = 32640 ≤ 32767: proven; 255 · (64 + 65) = 32895: not.
    let safe = conv("[[[64]], [[-64]]]");
    let unsafe_pair = conv("[[[64]], [[-65]]]");
    assert!(strategy(&safe, KernelOptions::default()).starts_with("vpmaddubsw"));
    assert!(strategy(&unsafe_pair, KernelOptions::default()).starts_with("vpmaddwd exact"));
    assert!(strategy(&safe, KernelOptions::EXACT_WORDS_ONLY).starts_with("vpmaddwd exact"));
    if avx2_here("the_scheme_follows_the_weights_and_the_options") {
        for text in [&safe, &unsafe_pair] {
            check_text(text, 5);
        }
    }
}

/// A conv (its weights fit s8) and a dense on its output.
fn conv_and_dense_text() -> String {
    "module {
  func.func @main(%x: tensor<1x5x6x7x!qnn.uniform<u8:f32, 0.05:3>>) -> tensor<2x9x!qnn.uniform<i8:f32, 0.4:1>> {
    %w = fp.constant() {value = dense<\"0x0102FF7F807942BDF22106F0847762F0F3CB4D764DC7072051159A0F89F2C6DACAE344BB311245FD6F84DF9AD7C5B3D076AC0E8F53A7356C88913F20F6F72DB022D24D0A96DAD43C1617C1A98E78129E\"> : tensor<4x5x2x2x!qnn.uniform<i8:f32:0, {0.01:0, 0.02:-3, 0.01:4, 0.03:0}>>} : () -> tensor<4x5x2x2x!qnn.uniform<i8:f32:0, {0.01:0, 0.02:-3, 0.01:4, 0.03:0}>>
    %y = qnn.conv2d_relu(%x, %w) {stride = [2, 1], pad = [1, 0, 0, 1]} : (tensor<1x5x6x7x!qnn.uniform<u8:f32, 0.05:3>>, tensor<4x5x2x2x!qnn.uniform<i8:f32:0, {0.01:0, 0.02:-3, 0.01:4, 0.03:0}>>) -> tensor<1x4x3x7x!qnn.uniform<i8:f32, 0.2:-5>>
    %f = fp.reshape(%y) {shape = [2, 42]} : (tensor<1x4x3x7x!qnn.uniform<i8:f32, 0.2:-5>>) -> tensor<2x42x!qnn.uniform<i8:f32, 0.2:-5>>
    %v = fp.constant() {value = dense<7> : tensor<9x42x!qnn.uniform<i8:f32, 0.01:0>>} : () -> tensor<9x42x!qnn.uniform<i8:f32, 0.01:0>>
    %d = qnn.dense(%f, %v) : (tensor<2x42x!qnn.uniform<i8:f32, 0.2:-5>>, tensor<9x42x!qnn.uniform<i8:f32, 0.01:0>>) -> tensor<2x9x!qnn.uniform<i8:f32, 0.4:1>>
    func.return %d : tensor<2x9x!qnn.uniform<i8:f32, 0.4:1>>
  }
}".to_string()
}

/// The VNNI kernels for a target with AVX-VNNI and one with AVX-512 VNNI:
/// they assemble (every op compiles, the GEMM says `vpdpbusd`), and run bit
/// for bit where this CPU has the extension.
#[test]
fn vnni_kernels_assemble_and_run_where_the_cpu_has_them() {
    let text = conv_and_dense_text();
    let host = CpuFeatures::host();
    let targets = [
        ("AVX-VNNI", CpuFeatures { avxvnni: true, ..CpuFeatures::X86_64_V3 }, host.avxvnni),
        (
            "AVX-512 VNNI",
            CpuFeatures { avx512vnni: true, ..CpuFeatures::X86_64_V4 },
            host.avx512vnni && host.avx512vl && host.avx512f,
        ),
    ];
    let mut ctx = context();
    let module = parse(&mut ctx, &text);
    for (name, features, runs_here) in targets {
        let target = Target { cpu: TargetCpu::Native, features };
        let program = compile(&ctx, &module, "main", &Lowerings::builtin(), &target)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let vnni_kernels = program.kernels.iter().filter(|k| k.strategy.starts_with("vpdpbusd")).count();
        assert_eq!(
            vnni_kernels,
            2,
            "{name}: {:?}",
            program.kernels.iter().map(|k| &k.strategy).collect::<Vec<_>>()
        );
        // The code decodes, holds vpdpbusd in the target's encoding, and
        // nothing else needs AVX-512 (the AVX-VNNI target has none).
        let codes = decoded_codes(&program);
        let (vex, evex) = (Code::VEX_Vpdpbusd_ymm_ymm_ymmm256, Code::EVEX_Vpdpbusd_ymm_k1z_ymm_ymmm256b32);
        let (wanted, unwanted) = if features.avxvnni { (vex, evex) } else { (evex, vex) };
        assert!(codes.contains(&wanted) && !codes.contains(&unwanted), "{name}: vpdpbusd encoding");
        if features.avxvnni {
            assert!(codes.iter().all(|c| !is_evex(*c)), "{name}: EVEX code for a target without AVX-512");
        }
        if !runs_here {
            println!(
                "notice: vnni_kernels_assemble_and_run_where_the_cpu_has_them: skipped running the {name} kernels, this CPU lacks {name} (it has {host})"
            );
            continue;
        }
        let inputs = random_inputs(&ctx, &module, "main", 11);
        let want = run_function(&ctx, &module, "main", &inputs, &KernelRegistry::standard()).unwrap();
        let jit = JitModule::new(program).unwrap();
        let got = jit.run_tensors(&inputs, &mut Workspace::new(), 2).unwrap();
        assert!(got[0].bit_equal(&want[0]), "{name}");
    }
}

/// Every instruction of `program`'s code, decoded (the kernels are laid
/// out one after another).
fn decoded_codes(program: &qopt_codegen_x86::Program) -> Vec<Code> {
    let mut codes = Vec::new();
    for k in &program.kernels {
        let bytes = &program.code[k.offset..k.offset + k.len];
        let mut decoder = Decoder::with_ip(64, bytes, 0, DecoderOptions::NONE);
        for instruction in &mut decoder {
            assert!(!instruction.is_invalid(), "{} does not decode", k.strategy);
            codes.push(instruction.code());
        }
    }
    codes
}

/// Whether an instruction is EVEX-encoded (AVX-512), by its code's name.
fn is_evex(code: Code) -> bool {
    format!("{code:?}").starts_with("EVEX_")
}

/// The AVX2 target's conv and dense code has no EVEX and no VNNI
/// instruction.
#[test]
fn avx2_code_uses_only_vex_instructions() {
    let text = conv_and_dense_text();
    let mut ctx = context();
    let module = parse(&mut ctx, &text);
    let v3 = Target { cpu: TargetCpu::X86_64V3, features: CpuFeatures::X86_64_V3 };
    for options in [KernelOptions::default(), KernelOptions::EXACT_WORDS_ONLY] {
        let program = compile(&ctx, &module, "main", &lowerings(options), &v3).unwrap();
        let codes = decoded_codes(&program);
        assert!(codes.iter().all(|c| !is_evex(*c)), "EVEX code for x86-64-v3");
        assert!(!codes.iter().any(|c| format!("{c:?}").contains("Vpdpbusd")), "VNNI code for x86-64-v3");
    }
}

/// What the kernels do not compile is refused when planning, naming why,
/// and runs by a host call with that reason, with the interpreter's bits.
#[test]
fn unsupported_conv_and_dense_run_by_host_calls() {
    let cases = [
        (
            "per-axis activations",
            "tensor<1x2x!qnn.uniform<i8:f32:1, {0.1:0, 0.2:0}>>",
            "dense<1> : tensor<3x2x!qnn.uniform<i8:f32, 0.1:0>>",
            "tensor<1x3x!qnn.uniform<i8:f32, 0.1:0>>",
            "per-axis",
        ),
        (
            "16-bit weights",
            "tensor<1x2x!qnn.uniform<i8:f32, 0.1:0>>",
            "dense<1> : tensor<3x2x!qnn.uniform<i16:f32, 0.1:0>>",
            "tensor<1x3x!qnn.uniform<i8:f32, 0.1:0>>",
            "16-bit storage",
        ),
        (
            "f16 expressed weights",
            "tensor<1x2x!qnn.uniform<i8:f32, 0.1:0>>",
            "dense<1> : tensor<3x2x!qnn.uniform<i8:f16, 0.1:0>>",
            "tensor<1x3x!qnn.uniform<i8:f32, 0.1:0>>",
            "expressed type",
        ),
        (
            "a 16-bit result",
            "tensor<1x2x!qnn.uniform<i8:f32, 0.1:0>>",
            "dense<1> : tensor<3x2x!qnn.uniform<i8:f32, 0.1:0>>",
            "tensor<1x3x!qnn.uniform<i16:f32, 0.1:0>>",
            "16-bit",
        ),
    ];
    for (what, tx, weight, ty, expect) in cases {
        let tw = weight.split(" : ").nth(1).unwrap();
        let text = format!(
            "module {{
  func.func @main(%x: {tx}) -> {ty} {{
    %w = fp.constant() {{value = {weight}}} : () -> {tw}
    %y = qnn.dense(%x, %w) : ({tx}, {tw}) -> {ty}
    func.return %y : {ty}
  }}
}}"
        );
        let mut ctx = context();
        let module = parse(&mut ctx, &text);
        let program = compile(&ctx, &module, "main", &Lowerings::builtin(), &Target::host())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let [host] = &program.host_ops[..] else { panic!("{what}: {:?}", program.host_ops) };
        assert!(
            host.describe.starts_with("qnn.dense at ") && host.reason.contains(expect),
            "{what}: {host:?}"
        );
        let inputs = random_inputs(&ctx, &module, "main", 5);
        match run_function(&ctx, &module, "main", &inputs, &KernelRegistry::standard()) {
            Ok(_) => check_qir(&text, 5),
            // What the interpreter refuses, the host call refuses: when its
            // module is verified (mapping) or when it runs.
            Err(want) => {
                let run = JitModule::new(program)
                    .and_then(|jit| jit.run_tensors(&inputs, &mut Workspace::new(), 1).map(drop));
                let e = run.unwrap_err();
                assert!(
                    e.message.contains("'qnn.dense'") || e.message.contains(&want.message),
                    "{what}: {e}"
                );
            }
        }
    }
    // A weight computed at run time cannot be packed when compiling.
    let text = "module {
  func.func @main(%x: tensor<1x2x!qnn.uniform<i8:f32, 0.1:0>>, %w: tensor<3x2x!qnn.uniform<i8:f32, 0.1:0>>) -> tensor<1x3x!qnn.uniform<i8:f32, 0.1:0>> {
    %y = qnn.dense(%x, %w) : (tensor<1x2x!qnn.uniform<i8:f32, 0.1:0>>, tensor<3x2x!qnn.uniform<i8:f32, 0.1:0>>) -> tensor<1x3x!qnn.uniform<i8:f32, 0.1:0>>
    func.return %y : tensor<1x3x!qnn.uniform<i8:f32, 0.1:0>>
  }
}";
    runs_by_host_call(text, "the weight must be a constant");
    // A transposed convolution whose taps overlap (4×4, stride 2, pad 1) is
    // not an upsampling by its kernel: a host call, bit-exact.
    let text = "module {
  func.func @main(%x: tensor<1x2x3x3x!qnn.uniform<u8:f32, 0.1:3>>) -> tensor<1x2x6x6x!qnn.uniform<i8:f32, 0.2:-1>> {
    %w = fp.constant() {value = dense<[[[[1, -2, 3, 4], [5, 6, -7, 8], [1, 2, 3, 4], [0, 0, 1, -1]], [[2, 2, 2, 2], [1, -1, 1, -1], [3, 0, 0, 3], [9, 8, 7, 6]]], [[[4, 3, 2, 1], [0, 1, 0, 1], [-5, 5, -5, 5], [1, 1, 1, 1]], [[7, 0, -7, 0], [2, 4, 6, 8], [1, 3, 5, 7], [0, 2, 0, 2]]]]> : tensor<2x2x4x4x!qnn.uniform<i8:f32:1, {0.05:0, 0.03:1}>>} : () -> tensor<2x2x4x4x!qnn.uniform<i8:f32:1, {0.05:0, 0.03:1}>>
    %y = qnn.conv_transpose2d(%x, %w) {pad = [1, 1, 1, 1], stride = [2, 2]} : (tensor<1x2x3x3x!qnn.uniform<u8:f32, 0.1:3>>, tensor<2x2x4x4x!qnn.uniform<i8:f32:1, {0.05:0, 0.03:1}>>) -> tensor<1x2x6x6x!qnn.uniform<i8:f32, 0.2:-1>>
    func.return %y : tensor<1x2x6x6x!qnn.uniform<i8:f32, 0.2:-1>>
  }
}";
    runs_by_host_call(text, "kernel equal to their stride");
}

/// Compiles `text`, whose one op runs by a host call for `reason`, and
/// checks it against the interpreter.
fn runs_by_host_call(text: &str, reason: &str) {
    let mut ctx = context();
    let module = parse(&mut ctx, text);
    let program = compile(&ctx, &module, "main", &Lowerings::builtin(), &Target::host()).unwrap();
    assert!(program.host_ops[0].reason.contains(reason), "{:?}", program.host_ops);
    check_qir(text, 5);
}

/// Whole resnet18-sized conv layers through the module compiler and the
/// runner, on one thread and on two (ignored: a benchmark; run in release
/// with `--ignored --nocapture`). Prints the fastest of 20 runs.
#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn resnet_layers_on_one_and_two_threads() {
    if !avx2_here("resnet_layers_on_one_and_two_threads") {
        return;
    }
    for (c, o, hw, stride) in [(64, 64, 56, 1), (128, 128, 28, 1), (256, 256, 14, 1), (512, 512, 7, 1)] {
        let out = (hw + 2 - 3) / stride + 1;
        let mut rng = Random::new(0x5EED ^ (c * hw) as u64);
        let (w, tw) = weight(&mut rng, &[o, c, 3, 3], 0);
        let (tx, ty) = (
            format!("tensor<1x{c}x{hw}x{hw}x!qnn.uniform<i8:f32, 0.05:-128>>"),
            format!("tensor<1x{o}x{out}x{out}x!qnn.uniform<i8:f32, 0.07:-128>>"),
        );
        let text = format!(
            "module {{
  func.func @main(%x: {tx}) -> {ty} {{
    %w = fp.constant() {{value = {w}}} : () -> {tw}
    %y = qnn.conv2d_relu(%x, %w) {{pad = [1, 1, 1, 1], stride = [{stride}, {stride}]}} : ({tx}, {tw}) -> {ty}
    func.return %y : {ty}
  }}
}}"
        );
        let mut ctx = context();
        let module = parse(&mut ctx, &text);
        let inputs = random_inputs(&ctx, &module, "main", 1);
        let program = compile(&ctx, &module, "main", &Lowerings::builtin(), &Target::host()).unwrap();
        let strategy = program.kernels.last().unwrap().strategy.clone();
        let jit = JitModule::new(program).unwrap();
        let mut workspace = Workspace::new();
        let macs = (o * out * out * c * 9) as f64;
        let mut line = format!("{c}→{o} 3×3 {hw}×{hw}:");
        for threads in [1, 2] {
            let mut best = f64::INFINITY;
            for _ in 0..20 {
                let start = std::time::Instant::now();
                jit.run_tensors(&inputs, &mut workspace, threads).unwrap();
                best = best.min(start.elapsed().as_secs_f64());
            }
            line += &format!("  {threads} thread(s) {:.3} ms ({:.1} GMAC/s)", best * 1e3, macs / best / 1e9);
        }
        println!("{line} — {strategy}");
    }
}
