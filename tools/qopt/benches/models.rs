//! Interpreter latency on the reference models: `cargo bench -p qopt-tools --bench models`.
//!
//! Each model is imported from ONNX (import time is not measured), then run by
//! the reference interpreter with the standard kernels:
//! - per-sample latency (median, min, max over the runs, after a warm-up) on the
//!   first test sample;
//! - the whole test set, sample by sample on one interpreter, as a calibration
//!   or evaluation loop would run it.
//!
//! Models: `tests/models/{digits_mlp,digits_cnn,resnet_tiny}` (in the repo) and
//! `resnet18ish` when its directory exists. That one is 47 MB and generated:
//! `scripts/.venv/bin/python scripts/make_resnet18ish.py target/models/resnet18ish`
//! (needs numpy and onnx), or point `QOPT_RESNET18ISH` at a directory holding
//! its `model.onnx` and `test.npy`. Pass a model name to run only that one.

use qopt_interp::{Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::{Context, Module};
use qopt_npy::read_npy_file;
use qopt_onnx::{import_model, ImportOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let mut models: Vec<(String, PathBuf)> = ["digits_mlp", "digits_cnn", "resnet_tiny"]
        .iter()
        .map(|m| (m.to_string(), root.join("tests/models").join(m)))
        .collect();
    let resnet18 = std::env::var_os("QOPT_RESNET18ISH")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/models/resnet18ish"));
    if resnet18.join("model.onnx").exists() {
        models.push(("resnet18ish".to_string(), resnet18));
    } else {
        println!(
            "resnet18ish: skipped, no {} (see this file's header)",
            resnet18.join("model.onnx").display()
        );
    }
    for (name, dir) in models {
        if only.is_empty() || only.contains(&name) {
            if let Err(e) = bench_model(&name, &dir) {
                println!("{name}: error: {e}");
            }
        }
    }
}

fn bench_model(name: &str, dir: &Path) -> Result<(), String> {
    let bytes = std::fs::read(dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let mut ctx = Context::new();
    let module = import_model(&mut ctx, &bytes, &ImportOptions::default()).map_err(|e| e.to_string())?;
    let raw = read_npy_file(dir.join("test.npy")).map_err(|e| e.to_string())?;
    let test = Tensor::from_raw(&raw).map_err(|e| e.to_string())?;
    let shape = input_shape(&ctx, &module);
    let samples: Vec<Tensor> =
        (0..test.shape()[0]).map(|i| sample(&test, i, &shape)).collect::<Result<_, _>>()?;
    let kernels = KernelRegistry::standard();
    let mut interp = Interpreter::new(&ctx, &module, &kernels);
    let mut run =
        |x: &Tensor| interp.run("main", std::slice::from_ref(x)).map(|_| ()).map_err(|e| e.to_string());

    run(&samples[0])?;
    let runs = if shape.iter().product::<usize>() > 100_000 { 20 } else { 200 };
    let mut times: Vec<Duration> = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        run(&samples[0])?;
        times.push(start.elapsed());
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{name}: latency: median {:.3} ms, min {:.3} ms, max {:.3} ms ({runs} runs, input {shape:?})",
        ms(times[runs / 2]),
        ms(times[0]),
        ms(times[runs - 1])
    );
    let start = Instant::now();
    for x in &samples {
        run(x)?;
    }
    println!("{name}: {} test samples in {:.1} ms", samples.len(), ms(start.elapsed()));
    Ok(())
}

/// The static shape of `@main`'s first argument.
fn input_shape(ctx: &Context, module: &Module) -> Vec<usize> {
    let func = module.lookup_symbol(ctx, "main").expect("the importer names its function @main");
    let entry = module.first_block(module.region(func, 0));
    let ty = module.value_type(module.block_args(entry)[0]);
    ctx.tensor_shape(ty).map(|s| s.iter().map(|&d| d.max(1) as usize).collect()).unwrap_or_default()
}

/// Sample `i` of a stacked f32 dataset, reshaped to the model's input shape.
fn sample(data: &Tensor, i: usize, shape: &[usize]) -> Result<Tensor, String> {
    let Tensor::F32(a) = data else { return Err("test data must be float32".into()) };
    let row: Vec<f32> = a.index_axis(ndarray::Axis(0), i).iter().copied().collect();
    Tensor::from_f32(shape, row).map_err(|e| e.to_string())
}
