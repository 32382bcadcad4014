//! The `qcompile` binary's contract.
//!
//! - **Linked with C**: each case's model is compiled to `model.o` and
//!   `model.h`, a small C program written against the header (its macros
//!   and prototypes) is linked with the system C compiler, and its outputs
//!   from `_run`, `_run_with_workspace` and `_run_quantized` are compared
//!   byte for byte with `qrun`'s on the same inputs. The C program runs the
//!   model with MXCSR set to flush-to-zero, denormals-are-zero and round-down,
//!   and fails unless the model leaves MXCSR as it found it; inputs include
//!   subnormals, ties, ±0, ±inf and NaN, so a kernel that computed in the
//!   caller's mode would differ from `qrun`. Without a C compiler the test
//!   prints `notice: <test>: skipped, no C compiler`; on a CPU without AVX2
//!   it compiles and links but does not run, with a notice.
//! - **Listings**: `--emit=asm` names every kernel's location.
//! - **Host calls**: ops without a lowering run in the interpreter from an
//!   object linked with `libqopt_host_calls.a`, with qrun's bytes.
//! - **Errors**: an op that neither compiles nor runs by a host call (exit
//!   1, one error listing every such op, nothing written), bad flags (exit
//!   2), unreadable or invalid models (exit 1).
//!
//! Cases are [`Case`]s: a body over quantized tensors `%in<i>` defining
//! `%out<j>`, from which [`Case::module`] builds `@main` (quantize each
//! float input, the body, dequantize each output) and `@core` (the body
//! alone). A lowering added to the backend gets its C test by adding a case
//! to [`cases`].

mod common;

use common::c::{c_compiler, c_program, host_call_library, RUST_STATIC_LIBRARY_LIBS};
use common::{scratch, text};
use qopt_codegen_x86::{compile, CpuFeatures, Lowerings, Program, Target};
use qopt_npy::{self as npy, RawArray};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn run_tool(binary: &str, args: &[&str]) -> Output {
    Command::new(binary).args(args).stdin(Stdio::null()).output().expect("the tool starts")
}

/// Runs qcompile, expects exit code `code`, returns (stdout, stderr).
fn qcompile(code: i32, args: &[&str]) -> (String, String) {
    let out = run_tool(env!("CARGO_BIN_EXE_qcompile"), args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(code), "qcompile {args:?}\nstdout: {stdout}\nstderr: {stderr}");
    (stdout, stderr)
}

/// Runs qrun and expects success.
fn qrun(args: &[&str]) {
    let out = run_tool(env!("CARGO_BIN_EXE_qrun"), args);
    assert_eq!(out.status.code(), Some(0), "qrun {args:?}\nstderr: {}", text(&out.stderr));
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// Writes `text` as `dir/name` and returns the path.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a test file");
    path
}

/// The files in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list the directory")
        .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ---- cases -------------------------------------------------------------------

/// A tensor at the boundary of a case: its shape (`3x37`) and quantized
/// element type.
struct Port {
    shape: &'static str,
    quant: &'static str,
}

/// A model for the C test: `body` reads `%in<i>` (of `inputs[i]`'s type) and
/// defines `%out<j>` (of `outputs[j]`'s type).
struct Case {
    name: &'static str,
    inputs: Vec<Port>,
    outputs: Vec<Port>,
    body: String,
    /// `--prefix`, or the default one (`model`).
    prefix: Option<&'static str>,
}

impl Case {
    fn tensor(port: &Port, element: &str) -> String {
        format!("tensor<{}x{element}>", port.shape)
    }

    /// `@main` (float in, float out) and `@core` (quantized in and out).
    fn module(&self) -> String {
        let (mut main_args, mut core_args, mut main_body) = (Vec::new(), Vec::new(), String::new());
        for (i, p) in self.inputs.iter().enumerate() {
            let (f, q) = (Case::tensor(p, "f32"), Case::tensor(p, p.quant));
            main_args.push(format!("%x{i}: {f}"));
            core_args.push(format!("%in{i}: {q}"));
            main_body +=
                &format!("    %in{i} = qnn.quantize(%x{i}) : ({f}) -> {q} loc(\"input{i}.quantize\")\n");
        }
        main_body += &self.body;
        let (mut main_ret, mut core_ret) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
        for (j, p) in self.outputs.iter().enumerate() {
            let (f, q) = (Case::tensor(p, "f32"), Case::tensor(p, p.quant));
            main_body += &format!(
                "    %y{j} = qnn.dequantize(%out{j}) : ({q}) -> {f} loc(\"output{j}.dequantize\")\n"
            );
            main_ret.0.push(format!("%y{j}"));
            main_ret.1.push(f);
            core_ret.0.push(format!("%out{j}"));
            core_ret.1.push(q);
        }
        let func = |name: &str, args: &[String], body: &str, ret: &(Vec<String>, Vec<String>)| {
            format!(
                "  func.func @{name}({}) -> ({}) {{\n{body}    func.return {} : {}\n  }}\n",
                args.join(", "),
                ret.1.join(", "),
                ret.0.join(", "),
                ret.1.join(", ")
            )
        };
        format!(
            "module {{\n{}{}}}\n",
            func("main", &main_args, &main_body, &main_ret),
            func("core", &core_args, &self.body, &core_ret)
        )
    }
}

const I8: &str = "!qnn.uniform<i8:f32, 0.05:-3>";
const U8: &str = "!qnn.uniform<u8:f32, 0.11:120>";
const NARROW: &str = "!qnn.uniform<i8<-127:127>:f32, 0.25:0>";
const U4: &str = "!qnn.uniform<u4:f32, 0.7:3>";
/// Scales near the smallest normal f32: subnormal inputs quantize to 0 or
/// ±1 here, and to the zero point under DAZ.
const TINY_IN: &str = "!qnn.uniform<i8:f32, 1.2e-38:0>";
const TINY_OUT: &str = "!qnn.uniform<i8:f32, 2.5e-38:3>";
/// Scales whose products round differently toward −inf and to nearest.
const INEXACT_IN: &str = "!qnn.uniform<u8:f32, 0.1:128>";
const INEXACT_OUT: &str = "!qnn.uniform<i8:f32, 0.037:-1>";

fn requantize(from: &Port, to: &Port, rounding: &str, x: &str, y: &str, loc: &str) -> String {
    format!(
        "    {y} = qnn.requantize({x}) {{rounding = \"{rounding}\"}} : ({}) -> {} loc(\"{loc}\")\n",
        Case::tensor(from, from.quant),
        Case::tensor(to, to.quant)
    )
}

/// A small network through every kind of compute kernel: conv with relu6
/// (per-channel weights with a bias), depthwise conv, add, max pool, global
/// average pool, flatten and dense.
fn network_case() -> Case {
    const X: &str = "!qnn.uniform<i8:f32, 0.04:-10>";
    const A: &str = "!qnn.uniform<i8:f32, 0.03:-128>";
    const B: &str = "!qnn.uniform<i8:f32, 0.05:-7>";
    const S: &str = "!qnn.uniform<i8:f32, 0.06:-20>";
    const G: &str = "!qnn.uniform<i8:f32, 0.02:-60>";
    const O: &str = "!qnn.uniform<u8:f32, 0.1:130>";
    let w1_type = "!qnn.uniform<i8:f32:0, {0.011:0, 0.013:0, 0.009:0, 0.02:0}>";
    let wd_type = "!qnn.uniform<i8:f32:0, {0.05:0, 0.04:0, 0.03:0, 0.06:0}>";
    let wf_type = "!qnn.uniform<i8:f32, 0.015:0>";
    // Deterministic weights that use the whole i8 range, nested by `shape`.
    let values = |shape: &[usize], seed: i64| -> String {
        let flat: Vec<String> = (0..shape.iter().product::<usize>() as i64)
            .map(|i| (((i * 37 + seed * 11) % 255) - 127).to_string())
            .collect();
        let mut level = flat;
        for &dim in shape.iter().rev() {
            level = level.chunks(dim).map(|c| format!("[{}]", c.join(", "))).collect();
        }
        level.concat()
    };
    let body = format!(
        "    %w1 = fp.constant() {{value = dense<{w1}> : tensor<4x3x3x3x{w1_type}>}} : () -> tensor<4x3x3x3x{w1_type}> loc(\"w1\")
    %b1 = fp.constant() {{value = dense<[300, -200, 0, 5000]> : tensor<4xi32>}} : () -> tensor<4xi32> loc(\"b1\")
    %c1 = qnn.conv2d_relu(%in0, %w1, %b1) {{pad = [1, 1, 1, 1], relu_max = 6.0 : f32}} : (tensor<1x3x9x9x{X}>, tensor<4x3x3x3x{w1_type}>, tensor<4xi32>) -> tensor<1x4x9x9x{A}> loc(\"conv1\")
    %wd = fp.constant() {{value = dense<{wd}> : tensor<4x1x3x3x{wd_type}>}} : () -> tensor<4x1x3x3x{wd_type}> loc(\"wd\")
    %d = qnn.conv2d(%c1, %wd) {{groups = 4, pad = [1, 1, 1, 1]}} : (tensor<1x4x9x9x{A}>, tensor<4x1x3x3x{wd_type}>) -> tensor<1x4x9x9x{B}> loc(\"dw\")
    %s = qnn.add(%d, %c1) : (tensor<1x4x9x9x{B}>, tensor<1x4x9x9x{A}>) -> tensor<1x4x9x9x{S}> loc(\"add\")
    %m = fp.max_pool2d(%s) {{kernel = [2, 2], stride = [2, 2]}} : (tensor<1x4x9x9x{S}>) -> tensor<1x4x4x4x{S}> loc(\"maxpool\")
    %g = qnn.global_avg_pool2d(%m) : (tensor<1x4x4x4x{S}>) -> tensor<1x4x1x1x{G}> loc(\"gap\")
    %f = fp.flatten(%g) : (tensor<1x4x1x1x{G}>) -> tensor<1x4x{G}> loc(\"flatten\")
    %wf = fp.constant() {{value = dense<{wf}> : tensor<5x4x{wf_type}>}} : () -> tensor<5x4x{wf_type}> loc(\"wf\")
    %out0 = qnn.dense(%f, %wf) : (tensor<1x4x{G}>, tensor<5x4x{wf_type}>) -> tensor<1x5x{O}> loc(\"fc\")
",
        w1 = values(&[4, 3, 3, 3], 1),
        wd = values(&[4, 1, 3, 3], 2),
        wf = values(&[5, 4], 3),
    );
    Case {
        name: "network",
        inputs: vec![Port { shape: "1x3x9x9", quant: X }],
        outputs: vec![Port { shape: "1x5", quant: O }],
        body,
        prefix: Some("net_small"),
    }
}

/// The C test's models; more ops get a case here as their lowerings land.
fn cases() -> Vec<Case> {
    let chain_in = Port { shape: "3x37", quant: I8 };
    let chain_flat = Port { shape: "1x111", quant: I8 };
    let chain_flat_out = Port { shape: "1x111", quant: U8 };
    let chain_body = format!(
        "    %f = fp.flatten(%in0) {{axis = 0}} : ({}) -> {} loc(\"flatten\")\n{}    %out0 = fp.reshape(%r) {{shape = [111]}} : ({}) -> {} loc(\"reshape\")\n",
        Case::tensor(&chain_in, I8),
        Case::tensor(&chain_flat, I8),
        requantize(&chain_flat, &chain_flat_out, "half_to_even", "%f", "%r", "requantize"),
        Case::tensor(&chain_flat_out, U8),
        Case::tensor(&Port { shape: "111", quant: U8 }, U8),
    );

    let many: Vec<(Port, Port, &str)> = vec![
        (Port { shape: "5", quant: I8 }, Port { shape: "5", quant: U8 }, "half_up"),
        (Port { shape: "9", quant: U8 }, Port { shape: "9", quant: NARROW }, "half_away_from_zero"),
        (Port { shape: "2x8", quant: NARROW }, Port { shape: "2x8", quant: U4 }, "half_to_even"),
        (Port { shape: "33", quant: U4 }, Port { shape: "33", quant: I8 }, "half_up"),
    ];
    let many_body: String = many
        .iter()
        .enumerate()
        .map(|(i, (a, b, r))| {
            requantize(a, b, r, &format!("%in{i}"), &format!("%out{i}"), &format!("requantize{i}"))
        })
        .collect();

    let fp_env = [
        (Port { shape: "67", quant: TINY_IN }, Port { shape: "67", quant: TINY_OUT }),
        (Port { shape: "67", quant: INEXACT_IN }, Port { shape: "67", quant: INEXACT_OUT }),
    ];
    let fp_env_body: String = fp_env
        .iter()
        .enumerate()
        .map(|(i, (a, b))| requantize(a, b, "half_to_even", &format!("%in{i}"), &format!("%out{i}"), "rq"))
        .collect();
    let constant = Port { shape: "5", quant: I8 };
    let constant_body = format!(
        "{}    %out1 = fp.constant() {{value = dense<[-128, -3, 0, 127, 5]> : {t}}} : () -> {t} loc(\"table\")\n",
        requantize(&Port { shape: "7", quant: U8 }, &Port { shape: "7", quant: I8 }, "half_up", "%in0", "%out0", "rq"),
        t = Case::tensor(&constant, I8)
    );

    vec![
        Case {
            name: "chain",
            inputs: vec![chain_in],
            outputs: vec![Port { shape: "111", quant: U8 }],
            body: chain_body,
            prefix: None,
        },
        Case {
            name: "many",
            inputs: many.iter().map(|(a, _, _)| Port { shape: a.shape, quant: a.quant }).collect(),
            outputs: many.iter().map(|(_, b, _)| Port { shape: b.shape, quant: b.quant }).collect(),
            body: many_body,
            prefix: Some("net"),
        },
        Case {
            name: "fp_env",
            inputs: fp_env.iter().map(|(a, _)| Port { shape: a.shape, quant: a.quant }).collect(),
            outputs: fp_env.iter().map(|(_, b)| Port { shape: b.shape, quant: b.quant }).collect(),
            body: fp_env_body,
            prefix: None,
        },
        Case {
            name: "constant",
            inputs: vec![Port { shape: "7", quant: U8 }],
            outputs: vec![Port { shape: "7", quant: I8 }, constant],
            body: constant_body,
            prefix: Some("with_table"),
        },
        network_case(),
    ]
}

// ---- inputs ------------------------------------------------------------------

/// A deterministic generator (64-bit LCG, high bits).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 32) as u32
    }

    /// Uniform in `lo..=hi`.
    fn int(&mut self, lo: i32, hi: i32) -> i32 {
        lo + (self.next() % (hi - lo + 1) as u32) as i32
    }
}

const SPECIALS: [f32; 10] =
    [0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-45, -1e-39, 9e-39, f32::MAX, -f32::MAX];

/// Float inputs for a quantized type: values on and between its grid,
/// exact ties, subnormals and the specials, mixed.
fn float_input(len: usize, q: &qopt_codegen_x86::ByteQuant, rng: &mut Lcg) -> Vec<f32> {
    let (s, zp) = (q.scale as f32, q.zero_point);
    (0..len)
        .map(|k| match k % 8 {
            0 => SPECIALS[(k / 8) % SPECIALS.len()],
            1 => f32::from_bits(rng.next() & 0x807F_FFFF),
            2 => (rng.int(q.qmin - zp, q.qmax - zp) as f32 + 0.5) * s,
            _ => s * (rng.int(-20_000, 20_000) as f32 / 64.0 + (q.qmin + q.qmax) as f32 / 2.0 - zp as f32),
        })
        .collect()
}

/// Stored values over the type's range, as the buffer's bytes.
fn quantized_input(len: usize, q: &qopt_codegen_x86::ByteQuant, rng: &mut Lcg) -> Vec<u8> {
    (0..len).map(|_| rng.int(q.qmin, q.qmax) as u8).collect()
}

/// Writes `bytes` as `name.bin` (for C) and as `name.npy` (for qrun) and
/// returns the two paths.
fn input_files(dir: &Path, name: &str, raw: RawArray) -> (PathBuf, PathBuf) {
    let (bin, npy) = (dir.join(format!("{name}.bin")), dir.join(format!("{name}.npy")));
    std::fs::write(&bin, &raw.data).expect("write .bin");
    npy::write_npy_file(&npy, &raw).expect("write .npy");
    (bin, npy)
}

// ---- the C side ---------------------------------------------------------------

fn compile_here(model_text: &str) -> Program {
    let driver = qopt_driver::Driver::new("test");
    let mut ctx = driver.new_context().expect("a context");
    let module =
        qopt_ir_core::parse_module(&mut ctx, model_text.as_bytes(), "case.qir").expect("the case parses");
    compile(&ctx, &module, "main", &Lowerings::builtin(), &Target::host()).expect("the case compiles")
}

/// Compiles, links and runs one case; panics at the first output byte that
/// differs from qrun's.
fn check_case(case: &Case, cc: &str, run: bool) {
    let dir = scratch(case.name);
    let model_text = case.module();
    let model = write(&dir, "model.qir", &model_text);
    let object = dir.join("model.o");
    let mut args = vec![path_str(&model), "-o", path_str(&object)];
    if let Some(prefix) = case.prefix {
        args.extend(["--prefix", prefix]);
    }
    let (_, stderr) = qcompile(0, &args);
    assert!(stderr.contains("wrote"), "{stderr}");
    assert!(dir.join("model.h").is_file());
    let prefix = case.prefix.unwrap_or("model");
    let n_in = case.inputs.len();
    let n_out = case.outputs.len();
    let main_c = write(&dir, "main.c", &c_program(prefix, n_in, n_out));
    let prog = dir.join("prog");
    let linked = Command::new(cc)
        .args(["-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .args([path_str(&prog), path_str(&main_c), path_str(&object)])
        .output()
        .expect("the C compiler starts");
    assert!(linked.status.success(), "{}: linking failed:\n{}", case.name, text(&linked.stderr));
    if !run {
        return;
    }

    let program = compile_here(&model_text);
    let quantized = program.quantized.as_ref().expect("the case has a quantized interface");
    for seed in 0..2u64 {
        let mut rng = Lcg(seed * 1000 + 17);
        let mut floats = Vec::new();
        let mut quants = Vec::new();
        for (i, (sig, q)) in program.inputs.iter().zip(&quantized.inputs).enumerate() {
            let values = float_input(sig.len(), &q.quant, &mut rng);
            floats.push(input_files(
                &dir,
                &format!("x{i}"),
                RawArray::from_elements(sig.shape.clone(), &values).unwrap(),
            ));
            let stored = quantized_input(sig.len(), &q.quant, &mut rng);
            let raw = match q.quant.element {
                qopt_codegen_x86::ElementType::I8 => RawArray::from_elements(
                    sig.shape.clone(),
                    &stored.iter().map(|&b| b as i8).collect::<Vec<_>>(),
                ),
                _ => RawArray::from_elements(sig.shape.clone(), &stored),
            };
            quants.push(input_files(&dir, &format!("q{i}"), raw.unwrap()));
        }
        for (mode, function, inputs) in
            [("run", "main", &floats), ("workspace", "main", &floats), ("quantized", "core", &quants)]
        {
            let want = dir.join(format!("want-{mode}.npz"));
            let mut qrun_args =
                vec![path_str(&model), "--func", function, "--allow-nonfinite", "-o", path_str(&want)];
            for (_, npy) in inputs {
                qrun_args.extend(["--input", path_str(npy)]);
            }
            qrun(&qrun_args);
            let outputs: Vec<PathBuf> = (0..n_out).map(|j| dir.join(format!("y{j}-{mode}.bin"))).collect();
            let ran = Command::new(&prog)
                .arg(mode)
                .args(inputs.iter().map(|(bin, _)| bin))
                .args(&outputs)
                .output()
                .expect("the C program starts");
            assert!(
                ran.status.success(),
                "{}: {mode} exited with {:?}: {}",
                case.name,
                ran.status.code(),
                text(&ran.stderr)
            );
            let expected = npy::read_npz_file(&want).expect("qrun's outputs");
            for (j, path) in outputs.iter().enumerate() {
                let got = std::fs::read(path).expect("the C program's output");
                let want =
                    &expected.iter().find(|(name, _)| *name == format!("out{j}")).expect("outj").1.data;
                if let Some(at) = got.iter().zip(want.iter()).position(|(a, b)| a != b) {
                    panic!(
                        "{}: {mode} (seed {seed}): output {j} differs from qrun's at byte {at}",
                        case.name
                    );
                }
                assert_eq!(got.len(), want.len(), "{}: {mode}: output {j}'s size", case.name);
            }
        }
    }
}

#[test]
fn objects_linked_into_c_programs_compute_what_qrun_computes() {
    let test = "objects_linked_into_c_programs_compute_what_qrun_computes";
    let Some(cc) = c_compiler(test) else {
        return;
    };
    let host = CpuFeatures::host();
    let run = host.avx && host.avx2;
    if !run {
        println!("notice: {test}: compiled and linked but did not run the programs, this CPU lacks AVX2 (it has {host})");
    }
    for case in cases() {
        check_case(&case, &cc, run);
    }
}

/// A float island after quantize (a trailing softmax) and token ids into a
/// gather run by host calls: the object, linked with the host-call library,
/// computes qrun's bytes from `_run` and `_run_with_workspace`, under the
/// C program's hostile MXCSR (the interpreter's kernels run in the default
/// one and the caller's is given back).
#[test]
fn objects_with_host_calls_link_with_the_host_call_library() {
    let test = "objects_with_host_calls_link_with_the_host_call_library";
    let Some(cc) = c_compiler(test) else {
        return;
    };
    let library = host_call_library().expect("libqopt_host_calls.a beside the test");
    let dir = scratch("host-calls");
    let model = write(
        &dir,
        "model.qir",
        r#"func.func @main(%x: tensor<2x8xf32>, %ids: tensor<1x3xi64>) -> (tensor<2x4xf32>, tensor<1x3x4xf32>) {
  %w = fp.constant() {value = dense<[[1, -2, 3, -4, 5, -6, 7, -8], [8, 7, 6, 5, 4, 3, 2, 1], [-1, 0, 1, 0, -1, 0, 1, 0], [2, 2, -2, -2, 3, 3, -3, -3]]> : tensor<4x8x!qnn.uniform<i8:f32:0, {0.02:0, 0.03:0, 0.05:0, 0.04:0}>>} : () -> tensor<4x8x!qnn.uniform<i8:f32:0, {0.02:0, 0.03:0, 0.05:0, 0.04:0}>>
  %b = fp.constant() {value = dense<[10, -20, 0, 5]> : tensor<4xi32>} : () -> tensor<4xi32>
  %q = qnn.quantize(%x) : (tensor<2x8xf32>) -> tensor<2x8x!qnn.uniform<i8:f32, 0.05:3>>
  %y = qnn.dense(%q, %w, %b) : (tensor<2x8x!qnn.uniform<i8:f32, 0.05:3>>, tensor<4x8x!qnn.uniform<i8:f32:0, {0.02:0, 0.03:0, 0.05:0, 0.04:0}>>, tensor<4xi32>) -> tensor<2x4x!qnn.uniform<i8:f32, 0.1:-5>>
  %f = qnn.dequantize(%y) : (tensor<2x4x!qnn.uniform<i8:f32, 0.1:-5>>) -> tensor<2x4xf32>
  %p = fp.softmax(%f) {axis = -1} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("prob")
  %table = fp.constant() {value = dense<[[0.5, -1.0, 0.25, 2.0], [1.5, 0.0, -0.75, 1.0], [-2.0, 0.5, 0.5, 0.125]]> : tensor<3x4xf32>} : () -> tensor<3x4xf32>
  %e = fp.gather(%table, %ids) {axis = 0} : (tensor<3x4xf32>, tensor<1x3xi64>) -> tensor<1x3x4xf32> loc("embed")
  func.return %p, %e : tensor<2x4xf32>, tensor<1x3x4xf32>
}
"#,
    );
    let object = dir.join("model.o");
    let (_, stderr) = qcompile(0, &[path_str(&model), "-o", path_str(&object)]);
    assert!(stderr.contains("2 ops run by host calls"), "{stderr}");
    let header = std::fs::read_to_string(dir.join("model.h")).unwrap();
    assert!(header.contains("libqopt_host_calls.a") && header.contains("fp.softmax at "), "{header}");
    assert!(header.contains("const int64_t *input1"), "{header}");

    let main_c = write(&dir, "main.c", &c_program("model", 2, 2));
    let prog = dir.join("prog");
    let linked = Command::new(&cc)
        .args(["-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .args([path_str(&prog), path_str(&main_c), path_str(&object), path_str(&library)])
        .args(RUST_STATIC_LIBRARY_LIBS)
        .output()
        .expect("the C compiler starts");
    assert!(linked.status.success(), "linking failed:\n{}", text(&linked.stderr));
    let host = CpuFeatures::host();
    if !(host.avx && host.avx2) {
        println!("notice: {test}: linked but did not run the program, this CPU lacks AVX2 (it has {host})");
        return;
    }

    let mut rng = Lcg(99);
    let x: Vec<f32> = (0..16).map(|_| rng.int(-3000, 3000) as f32 / 997.0).collect();
    let (x_bin, x_npy) = input_files(&dir, "x", RawArray::from_elements(vec![2, 8], &x).unwrap());
    let (ids_bin, ids_npy) =
        input_files(&dir, "ids", RawArray::from_elements(vec![1, 3], &[2i64, 0, 1]).unwrap());
    let want = dir.join("want.npz");
    qrun(&[
        path_str(&model),
        "--input",
        path_str(&x_npy),
        "--input",
        path_str(&ids_npy),
        "-o",
        path_str(&want),
    ]);
    let expected = npy::read_npz_file(&want).expect("qrun's outputs");
    for mode in ["run", "workspace"] {
        let outputs = [dir.join(format!("p-{mode}.bin")), dir.join(format!("e-{mode}.bin"))];
        let ran = Command::new(&prog)
            .arg(mode)
            .args([&x_bin, &ids_bin])
            .args(&outputs)
            .output()
            .expect("the C program starts");
        assert!(ran.status.success(), "{mode} exited with {:?}: {}", ran.status.code(), text(&ran.stderr));
        for (j, path) in outputs.iter().enumerate() {
            let want = &expected.iter().find(|(name, _)| *name == format!("out{j}")).expect("outj").1.data;
            assert_eq!(&std::fs::read(path).unwrap(), want, "{mode}: output {j}");
        }
    }
    // An index out of range fails in the host call: the entry returns 3.
    let (bad_ids, _) = input_files(&dir, "bad", RawArray::from_elements(vec![1, 3], &[2i64, 7, 1]).unwrap());
    let ran = Command::new(&prog)
        .arg("run")
        .args([&x_bin, &bad_ids])
        .args([dir.join("p.bin"), dir.join("e.bin")])
        .output()
        .expect("the C program starts");
    assert_eq!(ran.status.code(), Some(4), "{}", text(&ran.stderr));
    assert!(
        text(&ran.stderr).contains("qopt host call: ") && text(&ran.stderr).contains("the entry returned 3"),
        "{}",
        text(&ran.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Code compiled for x86-64-v4 (AVX-512) refuses to run on a CPU without
/// it: every entry returns 2 before any kernel runs, and says so again on
/// the next call (the cached answer). On a CPU with AVX-512 it runs.
#[test]
fn entries_refuse_to_run_on_a_cpu_without_the_target_features() {
    let test = "entries_refuse_to_run_on_a_cpu_without_the_target_features";
    let Some(cc) = c_compiler(test) else {
        return;
    };
    let dir = scratch("cpu-check");
    let case = &cases()[0];
    let model = write(&dir, "model.qir", &case.module());
    let object = dir.join("model.o");
    qcompile(0, &[path_str(&model), "-o", path_str(&object), "--target-cpu=x86-64-v4"]);
    let main_c = write(
        &dir,
        "main.c",
        "#include \"model.h\"\n#include <stdio.h>\n#include <stdlib.h>\n\
         int main(void) {\n\
           float *in = calloc(MODEL_INPUT0_ELEMENTS, sizeof(float));\n\
           float *out = calloc(MODEL_OUTPUT0_ELEMENTS, sizeof(float));\n\
           int first, second;\n\
           if (!in || !out) return 11;\n\
           first = model_run(in, out);\n\
           second = model_run(in, out);\n\
           printf(\"%d %d\\n\", first, second);\n\
           return 0;\n\
         }\n",
    );
    let prog = dir.join("prog");
    let linked = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-o", path_str(&prog), path_str(&main_c), path_str(&object)])
        .output()
        .expect("the C compiler starts");
    assert!(linked.status.success(), "linking failed:\n{}", text(&linked.stderr));
    let ran = Command::new(&prog).output().expect("the program starts");
    assert!(ran.status.success(), "exit {:?}: {}", ran.status.code(), text(&ran.stderr));
    let host = CpuFeatures::host();
    let v4 = qopt_codegen_x86::Target::named(qopt_codegen_x86::TargetCpu::X86_64V4).features;
    let want = if v4.is_subset_of(&host) { "0 0" } else { "2 2" };
    assert_eq!(text(&ran.stdout).trim(), want, "this CPU has {host}");
}

// ---- listings ----------------------------------------------------------------

#[test]
fn the_listing_names_each_kernel_location() {
    let dir = scratch("listing");
    let case = &cases()[0];
    let model = write(&dir, "model.qir", &case.module());
    let (stdout, stderr) = qcompile(0, &[path_str(&model), "--emit=asm", "--target-cpu=x86-64-v3"]);
    for loc in ["input0.quantize", "requantize", "output0.dequantize"] {
        assert!(stdout.contains(&format!("loc(\"{loc}\")")), "{loc} in\n{stdout}");
    }
    for header in [
        "; kernel 0: qnn.quantize at line ",
        "; kernel 1: qnn.requantize at line ",
        "; kernel 2: qnn.dequantize at line ",
    ] {
        assert!(stdout.contains(header), "{header}");
    }
    assert!(stdout.contains("\nmodel_run_quantized:\n"), "{stdout}");
    assert!(stderr.contains("@main for x86-64-v3: 3 kernels"), "{stderr}");
    assert_eq!(files_in(&dir), ["model.qir"], "the listing went to standard output");

    let (dash, _) = qcompile(0, &[path_str(&model), "--emit=asm", "--target-cpu=x86-64-v3", "-o", "-"]);
    assert_eq!(dash, stdout, "-o - is standard output");
    let listing = dir.join("model.s");
    let (stdout, _) =
        qcompile(0, &[path_str(&model), "--emit=asm", "--asm-syntax=att", "-o", path_str(&listing)]);
    assert!(stdout.is_empty());
    let att = std::fs::read_to_string(&listing).unwrap();
    assert!(att.contains("# kernel 1: qnn.requantize at line ") && att.contains("%rbp"), "{att}");
}

#[test]
fn any_target_cpu_compiles_on_any_machine() {
    let dir = scratch("targets");
    let model = write(&dir, "m.qir", &cases()[0].module());
    let object = dir.join("m.o");
    for cpu in ["x86-64-v3", "x86-64-v4", "native"] {
        qcompile(0, &[path_str(&model), "-o", path_str(&object), &format!("--target-cpu={cpu}")]);
        let header = std::fs::read_to_string(dir.join("m.h")).unwrap();
        assert!(header.contains(&format!(" * Target:  {cpu} (")), "{header}");
        assert!(header.contains("int m_run(const float *input0, float *output0);"), "{header}");
    }
    let header = dir.join("include").join("api.h");
    std::fs::create_dir_all(header.parent().unwrap()).unwrap();
    qcompile(
        0,
        &[path_str(&model), "-o", path_str(&object), "--header", path_str(&header), "--function", "@main"],
    );
    assert!(std::fs::read_to_string(&header).unwrap().contains("#ifndef M_H"));
}

// ---- errors ------------------------------------------------------------------

#[test]
fn ops_that_cannot_run_are_listed_in_one_error_and_nothing_is_written() {
    let dir = scratch("unsupported");
    let model = write(
        &dir,
        "model.qir",
        "func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(\"first\")
  %q = qnn.quantize(%a) : (tensor<4xf32>) -> tensor<4x!qnn.uniform<i8:f32, 0.1:0>> loc(\"q\")
  %d = qnn.dequantize(%q) : (tensor<4x!qnn.uniform<i8:f32, 0.1:0>>) -> tensor<4xf32> loc(\"dq\")
  %r = func.call @helper(%d) : (tensor<4xf32>) -> tensor<4xf32> loc(\"second\")
  func.return %r : tensor<4xf32>
}
",
    );
    // An old header stays as it was.
    write(&dir, "model.h", "old");
    let object = dir.join("model.o");
    for emit in ["--emit=obj", "--emit=asm"] {
        let (stdout, stderr) = qcompile(1, &[path_str(&model), "-o", path_str(&object), emit]);
        assert!(stdout.is_empty());
        assert!(
            stderr.starts_with(&format!(
                "qcompile: error: {}: @main cannot be compiled for x86-64: 2 ops neither compiled nor run by a host call:\n",
                path_str(&model)
            )),
            "{stderr}"
        );
        assert!(stderr.contains("line 5:8 loc(\"first\"): func.call: no x86 lowering"), "{stderr}");
        assert!(stderr.contains("line 8:8 loc(\"second\"): func.call: no x86 lowering"), "{stderr}");
        assert_eq!(files_in(&dir), ["model.h", "model.qir"], "nothing was written");
        assert_eq!(std::fs::read_to_string(dir.join("model.h")).unwrap(), "old");
    }
}

#[test]
fn bad_flags_are_usage_errors() {
    let dir = scratch("usage");
    let model = write(&dir, "model.qir", &cases()[0].module());
    let m = path_str(&model);
    let object = dir.join("model.o");
    let o = path_str(&object);
    let (_, stderr) = qcompile(2, &[m, "-o", o, "--target-cpu=skylake"]);
    assert!(
        stderr.contains("unknown target CPU 'skylake'; expected one of native, x86-64-v3, x86-64-v4"),
        "{stderr}"
    );
    let (_, stderr) = qcompile(2, &[m]);
    assert!(stderr.contains("--emit=obj needs -o FILE"), "{stderr}");
    let (_, stderr) = qcompile(2, &[m, "--emit=asm", "--header", "x.h"]);
    assert!(stderr.contains("--header goes with --emit=obj"), "{stderr}");
    let (_, stderr) = qcompile(2, &[m, "-o", o, "--prefix", "9lives"]);
    assert!(stderr.contains("symbol prefix '9lives' is not a C identifier"), "{stderr}");
    let (_, stderr) = qcompile(2, &[m, "-o", path_str(&dir.join("model.h"))]);
    assert!(stderr.contains("the header would overwrite the object"), "{stderr}");
    let (_, stderr) = qcompile(2, &[m, "-o", o, "--emit=elf"]);
    assert!(stderr.contains("invalid value 'elf'"), "{stderr}");
    qcompile(2, &[]);
    assert_eq!(files_in(&dir), ["model.qir"]);
    let (stdout, _) = qcompile(0, &["--help"]);
    assert!(
        stdout.contains("--target-cpu <CPU>") && stdout.contains("qcompile model.qir -o model.o"),
        "{stdout}"
    );
}

#[test]
fn unreadable_and_invalid_models_are_errors() {
    let dir = scratch("inputs");
    let object = dir.join("out.o");
    let o = path_str(&object);
    let missing = dir.join("missing.qir");
    let (_, stderr) = qcompile(1, &[path_str(&missing), "-o", o]);
    assert!(
        stderr.starts_with(&format!("qcompile: error: cannot read '{}'", path_str(&missing))),
        "{stderr}"
    );

    let bad = write(
        &dir,
        "bad.qir",
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %y : tensor<4xf32>\n}\n",
    );
    let (_, stderr) = qcompile(1, &[path_str(&bad), "-o", o]);
    assert!(stderr.contains(&format!("{}:2:", path_str(&bad))) && stderr.contains("error:"), "{stderr}");

    let model = write(&dir, "model.qir", &cases()[0].module());
    let (_, stderr) = qcompile(1, &[path_str(&model), "-o", o, "--function", "nope"]);
    assert!(stderr.contains("the module has no function @nope"), "{stderr}");

    let unwritable = dir.join("no-such-dir").join("m.o");
    let (_, stderr) = qcompile(1, &[path_str(&model), "-o", path_str(&unwritable)]);
    assert!(stderr.contains("qcompile: error: cannot write"), "{stderr}");
    assert_eq!(files_in(&dir), ["bad.qir", "model.qir"]);
}

// ---- the object and its header, as one unit ------------------------------------

/// A failed object write leaves no header: the pair is written as one unit
/// (it wrote the header first, so `-o adir` left `adir.h`).
#[test]
fn an_unwritable_object_leaves_no_header() {
    let dir = scratch("unwritable-object");
    let model = write(&dir, "model.qir", &cases()[0].module());
    let adir = dir.join("adir");
    std::fs::create_dir(&adir).unwrap();
    let (_, stderr) = qcompile(1, &[path_str(&model), "-o", path_str(&adir)]);
    assert!(stderr.contains("(neither was written)"), "{stderr}");
    let missing = dir.join("no-such-dir").join("m.o");
    let header = dir.join("m.h");
    qcompile(1, &[path_str(&model), "-o", path_str(&missing), "--header", path_str(&header)]);
    assert_eq!(files_in(&dir), ["adir", "model.qir"], "no lone header");
    assert!(files_in(&adir).is_empty());
}

/// Two compiles of different models to one object and header at the same
/// time: afterwards the header always describes the object beside it (the
/// trial saw one model's header with the other's object in 9 of 60 rounds).
#[test]
fn concurrent_compiles_to_one_pair_leave_a_matching_pair() {
    let dir = scratch("concurrent");
    let case = network_case();
    let alpha = write(&dir, "alpha.qir", &case.module());
    let bravo = write(&dir, "bravo.qir", &case.module().replace("0.04:-10", "0.045:-10"));
    let (object, header) = (dir.join("pair.o"), dir.join("pair.h"));
    for round in 0..30 {
        let children: Vec<_> = [&alpha, &bravo]
            .iter()
            .map(|model| {
                Command::new(env!("CARGO_BIN_EXE_qcompile"))
                    .args([path_str(model), "-o", path_str(&object), "--header", path_str(&header)])
                    .args(["--prefix", "net"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("qcompile starts")
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().expect("qcompile finishes");
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
        let h = std::fs::read_to_string(&header).unwrap();
        let o = std::fs::read(&object).unwrap();
        // The object's file symbol names the model it was compiled from.
        let has = |name: &str| o.windows(name.len()).any(|w| w == name.as_bytes());
        let from_alpha = h.contains(" * Model:   alpha.qir");
        assert_eq!(has("alpha.qir"), from_alpha, "round {round}: the header and the object differ");
        assert_eq!(has("bravo.qir"), !from_alpha, "round {round}: the header and the object differ");
    }
    assert_eq!(files_in(&dir), ["alpha.qir", "bravo.qir", "pair.h", "pair.o"]);
}

/// `-o -` cannot hold an object and its header: a usage error that says what
/// to do, and no files named `-` and `-.h`.
#[test]
fn an_object_to_standard_output_is_a_usage_error() {
    let dir = scratch("dash");
    let model = write(&dir, "model.qir", &cases()[0].module());
    for args in [vec!["-o", "-"], vec!["-o", "m.o", "--header", "-"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_qcompile"))
            .arg(path_str(&model))
            .args(&args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()
            .expect("qcompile starts");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("cannot go to standard output") && stderr.contains("--emit=asm"), "{stderr}");
        assert!(out.stdout.is_empty());
        assert_eq!(files_in(&dir), ["model.qir"], "{args:?}");
    }
}

/// README's `qcompile model.int8.qir -o model.o` gives `model_run` in
/// `model.h`: the prefix comes from the object's name. The header's sizes
/// are the ones qcompile's line prints.
#[test]
fn symbols_are_named_after_the_object_and_the_sizes_agree() {
    let dir = scratch("names");
    let model = write(&dir, "model.int8.qir", &network_case().module());
    let object = dir.join("model.o");
    let (_, stderr) = qcompile(0, &[path_str(&model), "-o", path_str(&object)]);
    let header = std::fs::read_to_string(dir.join("model.h")).unwrap();
    for symbol in
        ["int model_run(", "int model_run_with_workspace(", "int model_run_quantized(", "MODEL_NUM_INPUTS"]
    {
        assert!(header.contains(symbol), "{symbol} in\n{header}");
    }
    assert!(stderr.contains("(model_run, model_run_with_workspace, model_run_quantized)"), "{stderr}");
    // "N kernels, A bytes of kernel code, B bytes of .text with the entry points"
    let sizes = |text: &str| {
        let at = text.find(" bytes of kernel code, ").unwrap_or_else(|| panic!("sizes in {text}"));
        let code = text[..at].rsplit(' ').next().unwrap().to_string();
        let rest = &text[at + " bytes of kernel code, ".len()..];
        let text_bytes = rest.split(' ').next().unwrap().to_string();
        assert!(rest[text_bytes.len()..].starts_with(" bytes of .text with the entry points"), "{text}");
        (code, text_bytes)
    };
    let (code, text_bytes) = sizes(&header);
    assert_eq!(sizes(&stderr), (code.clone(), text_bytes.clone()), "{stderr}\n{header}");
    assert!(code.parse::<usize>().unwrap() < text_bytes.parse::<usize>().unwrap());

    let listing = dir.join("net.s");
    qcompile(0, &[path_str(&model), "--emit=asm", "-o", path_str(&listing)]);
    assert!(std::fs::read_to_string(&listing).unwrap().contains("\nnet_run:\n"));
    let (stdout, _) = qcompile(0, &[path_str(&model), "--emit=asm"]);
    assert!(stdout.contains("\nmodel_int8_run:\n"), "a listing on standard output is named after the model");
}
