//! End-to-end properties of `calibrate` and `insert-fakeq` on the digits MLP
//! (`examples/digits_mlp.qir`, calibration data `tests/models/digits_mlp/calib.npy`):
//!
//! - one thread and two give byte-identical IR, for every observer kind;
//! - calibrating on A, printing, parsing and calibrating on B gives the IR of
//!   one run on A + B (the data split into two files of 70 and 130 samples);
//! - saving after `calibrate` and running `insert-fakeq` on the saved file
//!   gives the same bytes as the whole pipeline in one run.

use qopt_interp::npy::{read_npy_file, write_npy_file, RawArray};
use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::{module_to_string, parse_module, verify, Context};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn context() -> Context {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).unwrap();
    qopt_dialect_qnn::register(&mut ctx).unwrap();
    ctx
}

/// Parses `text`, runs `pipeline`, and prints the result.
fn run(text: &str, pipeline: &str) -> String {
    let mut ctx = context();
    let mut module = parse_module(&mut ctx, text.as_bytes(), "model.qir").expect("the model parses");
    let mut registry = PassRegistry::new();
    qopt_passes::register_generic_passes(&mut registry).unwrap();
    let manager =
        PassManager::parse(&registry, pipeline).unwrap_or_else(|e| panic!("{pipeline}: {}", e.message));
    let mut inst = Instrumentation { reproducer_dir: None, ..Instrumentation::default() };
    manager.run(&mut ctx, &mut module, &mut inst).unwrap_or_else(|e| panic!("{pipeline}: {e:?}"));
    verify(&mut ctx, &module).expect("the result verifies");
    module_to_string(&ctx, &module)
}

fn model() -> String {
    std::fs::read_to_string(repo().join("examples/digits_mlp.qir")).unwrap()
}

fn calib() -> PathBuf {
    repo().join("tests/models/digits_mlp/calib.npy")
}

/// A scratch directory for this test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qopt-calibrate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes rows [from, to) of the calibration data to `path`.
fn write_rows(path: &Path, from: usize, to: usize) {
    let all = read_npy_file(calib()).unwrap();
    let row: usize = all.shape[1..].iter().product::<usize>() * all.dtype.size();
    let mut shape = all.shape.clone();
    shape[0] = to - from;
    let part = RawArray::new(all.dtype, shape, all.data[from * row..to * row].to_vec()).unwrap();
    write_npy_file(path, &part).unwrap();
}

const OBSERVERS: [&str; 3] = [
    "insert-observers",
    "insert-observers{observer=histogram bins=256}",
    "insert-observers{observer=moving-average averaging-constant=0.1}",
];

#[test]
fn one_thread_and_two_give_the_same_bytes() {
    let data = calib();
    for observers in OBSERVERS {
        let observed = run(&model(), observers);
        let one = run(&observed, &format!("calibrate{{data=\"{}\" threads=1}}", data.display()));
        let two = run(&observed, &format!("calibrate{{data=\"{}\" threads=2}}", data.display()));
        assert_eq!(one, two, "{observers}: thread count changed the result");
        assert!(one.contains("samples = 200"), "{observers}: not every sample was seen:\n{one}");
    }
}

#[test]
fn calibrating_on_a_then_b_equals_a_plus_b() {
    let dir = scratch("split");
    let (a, b) = (dir.join("a.npy"), dir.join("b.npy"));
    write_rows(&a, 0, 70);
    write_rows(&b, 70, 200);
    for observers in OBSERVERS {
        let observed = run(&model(), observers);
        let whole = run(&observed, &format!("calibrate{{data=\"{}\"}}", calib().display()));
        let after_a = run(&observed, &format!("calibrate{{data=\"{}\"}}", a.display()));
        let after_b = run(&after_a, &format!("calibrate{{data=\"{}\"}}", b.display()));
        assert_ne!(after_a, whole, "{observers}: A alone should differ from A + B");
        assert_eq!(after_b, whole, "{observers}: A then B differs from A + B");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn insert_fakeq_on_saved_calibration_equals_one_run() {
    for observers in ["insert-observers", "insert-observers{observer=histogram}"] {
        let calibrate = format!("fold-bn,{observers},calibrate{{data=\"{}\"}}", calib().display());
        for fakeq in ["insert-fakeq", "insert-fakeq{method=percentile percentile=99.9 weight-method=minmax}"]
        {
            if fakeq.contains("percentile") && !observers.contains("histogram") {
                continue;
            }
            let whole = run(&model(), &format!("{calibrate},{fakeq}"));
            let saved = run(&model(), &calibrate);
            let resumed = run(&saved, fakeq);
            assert_eq!(resumed, whole, "{observers} then {fakeq}: a saved calibration gives other bytes");
            assert!(whole.contains("qnn.fake_quant") && !whole.contains("qnn.observe"));
        }
    }
}
