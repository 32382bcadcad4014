//! Cost of `--verify-equiv`: `cargo bench -p qopt-equiv --bench verify`.
//!
//! Each model runs the whole `quantize` pipeline (with calibration data) and
//! then `canonicalize,cse,dce`, once with the equivalence hook and once
//! without, side by side; the bench prints each pass's check (relation,
//! outcome, e-nodes, time) and the ratio of the two runs' times, which is
//! what holds across machines.
//!
//! Models: a generated network of 1,000 ops (residual blocks of conv, batch
//! norm and relu, with an add every block; 16 channels at 8×8) and
//! `resnet18ish` when its `model.onnx` and `calib.npy` are in
//! `target/models/resnet18ish` (or the directory `QOPT_RESNET18ISH` names):
//! `scripts/.venv/bin/python scripts/make_resnet18ish.py target/models/resnet18ish`.

use qopt_equiv::{render, EquivHook, Limits, Mode, SharedReport};
use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::{parse_module, verify, Context, Module};
use qopt_npy::{read_npy_file, write_npy_file, RawArray};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Residual blocks of the generated model; 9 ops each.
const BLOCKS: usize = 111;
/// Channels and spatial size of the generated model.
const CHANNELS: usize = 16;
const SIZE: usize = 8;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work = root.join("target/bench-equiv");
    if let Err(e) = std::fs::create_dir_all(&work) {
        println!("cannot create {}: {e}", work.display());
        return;
    }
    let generated = generated_model();
    let calib = work.join("calib.npy");
    let values: Vec<f32> =
        (0..4 * CHANNELS * SIZE * SIZE).map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0).collect();
    let raw = RawArray::from_elements(vec![4, CHANNELS, SIZE, SIZE], &values).expect("calibration data");
    write_npy_file(&calib, &raw).expect("writing calibration data");
    bench("generated, 1,000 ops", |ctx| parse(ctx, &generated), &calib);

    let resnet = std::env::var_os("QOPT_RESNET18ISH")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/models/resnet18ish"));
    if resnet.join("model.onnx").exists() && resnet.join("calib.npy").exists() {
        // Sixteen calibration samples are plenty for timing the checks.
        let small = work.join("resnet18ish-calib16.npy");
        if let Ok(raw) = read_npy_file(resnet.join("calib.npy")) {
            let per_sample = raw.data.len() / raw.shape[0].max(1);
            let n = raw.shape[0].min(16);
            let mut shape = raw.shape.clone();
            shape[0] = n;
            if let Ok(cut) = RawArray::new(raw.dtype, shape, raw.data[..n * per_sample].to_vec()) {
                let _ = write_npy_file(&small, &cut);
            }
        }
        let bytes = std::fs::read(resnet.join("model.onnx")).expect("reading resnet18ish");
        bench(
            "resnet18ish",
            |ctx| {
                qopt_onnx::import_model(ctx, &bytes, &qopt_onnx::ImportOptions::default())
                    .map_err(|e| e.to_string())
            },
            &small,
        );
    } else {
        println!("resnet18ish: skipped, no {} (see this file's header)", resnet.join("model.onnx").display());
    }
}

/// The generated model's text.
fn generated_model() -> String {
    let ty = format!("tensor<1x{CHANNELS}x{SIZE}x{SIZE}xf32>");
    let w_ty = format!("tensor<{CHANNELS}x{CHANNELS}x3x3xf32>");
    let v_ty = format!("tensor<{CHANNELS}xf32>");
    let mut text = format!("func.func @main(%x: {ty}) -> {ty} {{\n");
    let mut last = "%x".to_string();
    let vector = |seed: usize, offset: f32| -> String {
        let values: Vec<String> = (0..CHANNELS)
            .map(|c| format!("{:.4}", offset + ((seed * 31 + c * 17) % 23) as f32 / 1000.0))
            .collect();
        format!("dense<[{}]>", values.join(", "))
    };
    for b in 0..BLOCKS {
        let weights: Vec<String> = (0..CHANNELS * CHANNELS * 9)
            .map(|i| format!("{:.3}", ((b * 131 + i * 29) % 41) as f32 / 100.0 - 0.2))
            .collect();
        let _ = writeln!(
            text,
            "  %w{b} = fp.constant() {{value = dense<{}> : {w_ty}}} : () -> {w_ty}",
            nest(&weights)
        );
        for (name, offset) in [("g", 0.01), ("be", -0.1), ("m", -0.2), ("v", 0.5)] {
            let _ = writeln!(
                text,
                "  %{name}{b} = fp.constant() {{value = {} : {v_ty}}} : () -> {v_ty}",
                vector(b + name.len(), offset)
            );
        }
        let _ = writeln!(
            text,
            "  %c{b} = fp.conv2d({last}, %w{b}) {{pad = [1, 1, 1, 1]}} : ({ty}, {w_ty}) -> {ty} loc(\"conv{b}\")\n  \
             %n{b} = fp.batch_norm(%c{b}, %g{b}, %be{b}, %m{b}, %v{b}) : ({ty}, {v_ty}, {v_ty}, {v_ty}, {v_ty}) -> {ty} loc(\"bn{b}\")\n  \
             %r{b} = fp.relu(%n{b}) : ({ty}) -> {ty} loc(\"relu{b}\")\n  \
             %a{b} = fp.add(%r{b}, {last}) : ({ty}, {ty}) -> {ty} loc(\"add{b}\")"
        );
        last = format!("%a{b}");
    }
    let _ = writeln!(text, "  func.return {last} : {ty}\n}}");
    text
}

/// A flat list of values as a 4-d dense literal of the weight's shape.
fn nest(values: &[String]) -> String {
    let kernels: Vec<String> = values
        .chunks(9)
        .map(|k| format!("[[{}], [{}], [{}]]", k[0..3].join(", "), k[3..6].join(", "), k[6..9].join(", ")))
        .collect();
    let rows: Vec<String> = kernels.chunks(CHANNELS).map(|r| format!("[{}]", r.join(", "))).collect();
    format!("[{}]", rows.join(", "))
}

fn parse(ctx: &mut Context, text: &str) -> Result<Module, String> {
    parse_module(ctx, text.as_bytes(), "generated.qir").map_err(|d| d.to_string())
}

fn context() -> Context {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).expect("fp");
    qopt_dialect_qnn::register(&mut ctx).expect("qnn");
    ctx
}

/// Runs the pipeline on the model `load` makes with and without the hook,
/// and prints the report and the times.
fn bench(name: &str, load: impl Fn(&mut Context) -> Result<Module, String>, calib: &Path) {
    let pipeline = format!("quantize{{data={}}},canonicalize,cse,dce", calib.display());
    let mut registry = PassRegistry::new();
    qopt_passes::register_generic_passes(&mut registry).expect("passes");
    qopt_quant::register_quant_passes(&mut registry).expect("passes");
    let manager = match PassManager::parse(&registry, &pipeline) {
        Ok(m) => m,
        Err(e) => return println!("{name}: {}", e.message),
    };
    let run = |verify_equiv: bool| -> Result<(Duration, String, usize), String> {
        let mut ctx = context();
        let mut module = load(&mut ctx)?;
        verify(&mut ctx, &module).map_err(|d| format!("{d:?}"))?;
        let ops = module.walk_preorder(module.root()).count();
        let report = SharedReport::default();
        let mut inst = Instrumentation { reproducer_dir: None, ..Instrumentation::default() };
        if verify_equiv {
            inst.hooks.push(Box::new(EquivHook::new(Mode::Warn, Limits::default(), report.clone())));
        }
        let start = Instant::now();
        manager.run(&mut ctx, &mut module, &mut inst).map_err(|e| format!("{e:?}"))?;
        let time = start.elapsed();
        let text = render(&report.borrow());
        Ok((time, text, ops))
    };
    let result = run(false).and_then(|plain| Ok((plain, run(true)?)));
    match result {
        Ok(((plain, _, ops), (checked, report, _))) => {
            println!(
                "{name} ({ops} ops): pipeline {plain:.2?} without checks, {checked:.2?} with (×{:.2})",
                checked.as_secs_f64() / plain.as_secs_f64()
            );
            print!("{report}");
        }
        Err(e) => println!("{name}: error: {e}"),
    }
}
