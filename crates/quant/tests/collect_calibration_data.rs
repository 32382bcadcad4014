//! `collect-calibration-data` writes what the interpreter computes: the
//! archive, read back through `qopt_quant::runs::dataset`, holds for every sample
//! the inputs and outputs of `@main` and of each outlined function, equal to
//! direct interpreter runs; an unpartitioned module gives `@main`'s boundary
//! only; bad data and bad output paths are errors that write nothing.

use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::ScratchDir;
use qopt_ir_core::{parse_module, Context, Module, OpId, PipelineFailure};
use qopt_npy::{self as npy, RawArray};
use qopt_passes::{BackendSupport, BackendTargets};
use qopt_quant::runs::dataset::{ArgSpec, Dataset};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Runs `fp.dense`: partitioning digits_mlp for it gives three regions
/// with the relus between them left in `@main`.
struct DenseOnly;

impl BackendSupport for DenseOnly {
    fn name(&self) -> &'static str {
        "dense"
    }
    fn summary(&self) -> &'static str {
        "a test backend that runs fp.dense"
    }
    fn supports(&self, ctx: &Context, module: &Module, op: OpId) -> bool {
        ctx.op_name_str(module.op_name(op)) == "fp.dense"
    }
}

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// A fresh directory under the temp dir for one test, removed when dropped
/// (also when the test fails).
fn scratch(name: &str) -> ScratchDir {
    ScratchDir::new(&format!("collect-{name}"))
}

fn model(ctx: &mut Context) -> Module {
    let text = std::fs::read_to_string(repo("examples/digits_mlp.qir")).unwrap();
    parse_module(ctx, text.as_bytes(), "digits_mlp.qir").unwrap()
}

fn context() -> Context {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).unwrap();
    qopt_dialect_qnn::register(&mut ctx).unwrap();
    BackendTargets::install(&mut ctx).add(Arc::new(DenseOnly)).unwrap();
    ctx
}

fn run(ctx: &mut Context, module: &mut Module, pipeline: &str) -> Result<(), PipelineFailure> {
    let mut registry = PassRegistry::new();
    qopt_passes::register_generic_passes(&mut registry).unwrap();
    qopt_quant::register_quant_passes(&mut registry).unwrap();
    let manager = PassManager::parse(&registry, pipeline).unwrap_or_else(|e| panic!("{}", e.message));
    let mut inst = Instrumentation { reproducer_dir: None, ..Instrumentation::default() };
    manager.run(ctx, module, &mut inst).map(|_| ())
}

/// The first 20 digits of the calibration set, as a `.npy` in `dir`.
fn twenty_samples(dir: &Path) -> PathBuf {
    let all = npy::read_npy_file(repo("tests/models/digits_mlp/calib.npy")).unwrap();
    let values: Vec<f32> = all.to_vec().unwrap();
    let path = dir.join("calib20.npy");
    npy::write_npy_file(&path, &RawArray::from_elements(vec![20, 64], &values[..20 * 64]).unwrap()).unwrap();
    path
}

/// Every entry of member `name` (whose entries have `shape`) in `archive`.
fn entries(archive: &Path, name: &str, shape: &[usize]) -> Vec<Tensor> {
    let spec = ArgSpec::new(name, qopt_interp::DType::F32, shape.to_vec());
    let data = Dataset::open(archive, &[spec]).unwrap_or_else(|e| panic!("{name}: {e}"));
    (0..data.len()).map(|i| data.read_call(i).unwrap().remove(0)).collect()
}

#[test]
fn every_function_boundary_matches_direct_interpreter_runs() {
    let dir = scratch("boundaries");
    let data = twenty_samples(&dir);
    let out = dir.join("boundary.npz");
    let mut ctx = context();
    let mut module = model(&mut ctx);
    run(&mut ctx, &mut module, "partition{target=dense}").unwrap();
    let before = qopt_ir_core::module_to_string(&ctx, &module);
    let pipeline = format!("collect-calibration-data{{data={} out={}}}", data.display(), out.display());
    run(&mut ctx, &mut module, &pipeline).unwrap();
    assert_eq!(qopt_ir_core::module_to_string(&ctx, &module), before, "the module is unchanged");

    let names: Vec<String> = npy::read_npz_file(&out).unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "main/input0",
            "dense_0/input0",
            "dense_0/output0",
            "dense_1/input0",
            "dense_1/output0",
            "dense_2/input0",
            "dense_2/output0",
            "main/output0"
        ]
    );
    let kernels = KernelRegistry::standard();
    let main_in = entries(&out, "main/input0", &[1, 64]);
    let main_out = entries(&out, "main/output0", &[1, 10]);
    assert_eq!(main_in.len(), 20);
    let samples = npy::read_npy_file(&data).unwrap().to_vec::<f32>().unwrap();
    for (i, input) in main_in.iter().enumerate() {
        let expected = RawArray::from_elements(vec![1, 64], &samples[i * 64..(i + 1) * 64]).unwrap();
        assert_eq!(input, &Tensor::from_raw(&expected).unwrap(), "main/input0[{i}]");
        let output = run_function(&ctx, &module, "main", std::slice::from_ref(input), &kernels).unwrap();
        assert_eq!(output[0], main_out[i], "main/output0[{i}]");
    }
    for (region, width_in, width_out) in [("dense_0", 64, 128), ("dense_1", 128, 64), ("dense_2", 64, 10)] {
        let inputs = entries(&out, &format!("{region}/input0"), &[1, width_in]);
        let outputs = entries(&out, &format!("{region}/output0"), &[1, width_out]);
        assert_eq!((inputs.len(), outputs.len()), (20, 20), "{region}");
        for (i, (x, y)) in inputs.iter().zip(&outputs).enumerate() {
            let direct = run_function(&ctx, &module, region, std::slice::from_ref(x), &kernels).unwrap();
            assert_eq!(direct[0], *y, "{region}/output0[{i}]");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unpartitioned_module_gives_main_boundary_only() {
    let dir = scratch("unpartitioned");
    let data = twenty_samples(&dir);
    let out = dir.join("main.npz");
    let mut ctx = context();
    let mut module = model(&mut ctx);
    let pipeline =
        format!("collect-calibration-data{{data={} out={} batches=5}}", data.display(), out.display());
    run(&mut ctx, &mut module, &pipeline).unwrap();
    let arrays = npy::read_npz_file(&out).unwrap();
    let shapes: Vec<(&str, &[usize])> =
        arrays.iter().map(|(n, a)| (n.as_str(), a.shape.as_slice())).collect();
    assert_eq!(shapes, [("main/input0", &[5, 1, 64][..]), ("main/output0", &[5, 1, 10][..])]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The error of a failing pipeline, as text.
fn failure(pipeline: &str) -> String {
    let mut ctx = context();
    let mut module = model(&mut ctx);
    match run(&mut ctx, &mut module, pipeline) {
        Ok(()) => panic!("{pipeline} succeeded"),
        Err(e) => format!("{e:?}"),
    }
}

#[test]
fn bad_data_and_bad_output_paths_write_nothing() {
    let dir = scratch("errors");
    let data = twenty_samples(&dir);
    let out = dir.join("kept.npz");
    std::fs::write(&out, b"previous output").unwrap();

    let missing = dir.join("missing.npy");
    let error =
        failure(&format!("collect-calibration-data{{data={} out={}}}", missing.display(), out.display()));
    assert!(error.contains("missing.npy"), "{error}");

    let mut values = npy::read_npy_file(&data).unwrap().to_vec::<f32>().unwrap();
    values[3 * 64 + 5] = f32::NAN;
    let nan = dir.join("nan.npy");
    npy::write_npy_file(&nan, &RawArray::from_elements(vec![20, 64], &values).unwrap()).unwrap();
    let error = failure(&format!("collect-calibration-data{{data={} out={}}}", nan.display(), out.display()));
    assert!(error.contains("sample 3") && error.contains("NaN"), "{error}");

    let nowhere = dir.join("no-such-dir").join("out.npz");
    let error =
        failure(&format!("collect-calibration-data{{data={} out={}}}", data.display(), nowhere.display()));
    assert!(error.contains("'out': cannot write") && error.contains("no-such-dir"), "{error}");

    assert_eq!(std::fs::read(&out).unwrap(), b"previous output", "the old output is untouched");
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["calib20.npy", "kept.npz", "nan.npy"], "no scratch files are left");
    std::fs::remove_dir_all(&dir).unwrap();
}
