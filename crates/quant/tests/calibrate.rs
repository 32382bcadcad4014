//! End-to-end properties of `calibrate` and `insert-fakeq` on the digits MLP
//! (`examples/digits_mlp.qir`, calibration data `tests/models/digits_mlp/calib.npy`):
//!
//! - one thread and two give byte-identical IR, for every observer kind;
//! - calibrating on A, printing, parsing and calibrating on B gives the IR of
//!   one run on A + B (the data split into two files of 70 and 130 samples);
//! - saving after `calibrate` and running `insert-fakeq` on the saved file
//!   gives the same bytes as the whole pipeline in one run;
//! - a property test: on random data of any size and every observer kind,
//!   one thread and two give the same bytes (`determinism`).

mod common;

use common::{context, repo, run_pipeline};
use qopt_ir_core::ScratchDir;
use qopt_ir_core::{module_to_string, parse_module};
use qopt_npy::{read_npy_file, write_npy_file, RawArray};
use std::path::{Path, PathBuf};

/// Parses `text`, runs `pipeline`, and prints the result.
fn run(text: &str, pipeline: &str) -> String {
    let mut ctx = context();
    let mut module = parse_module(&mut ctx, text.as_bytes(), "model.qir").expect("the model parses");
    run_pipeline(&mut ctx, &mut module, pipeline);
    module_to_string(&ctx, &module)
}

fn model() -> String {
    std::fs::read_to_string(repo().join("examples/digits_mlp.qir")).unwrap()
}

fn calib() -> PathBuf {
    repo().join("tests/models/digits_mlp/calib.npy")
}

/// A fresh directory under the temp dir for one test, removed when dropped
/// (also when the test fails).
fn scratch(name: &str) -> ScratchDir {
    ScratchDir::new(&format!("calibrate-{name}"))
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
        assert!(
            whole.contains("mean_count = 200"),
            "{observers}: the dense inputs' channel means are merged too"
        );
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

mod determinism {
    //! Property: for random data (any number of samples, any values) and every
    //! observer kind, calibrating with one thread and with two gives the same bytes.

    use super::{run, scratch};
    use proptest::prelude::*;
    use qopt_npy::{write_npy_file, RawArray};

    /// A small network: dense → relu → dense, every value observed.
    const MODEL: &str = r#"func.func @main(%x: tensor<1x4xf32>) -> tensor<1x3xf32> {
  %w = fp.constant() {value = dense<[[0.5, -1.0, 0.25, 2.0], [1.5, 0.0, -0.5, 1.0]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %d = fp.dense(%x, %w) : (tensor<1x4xf32>, tensor<2x4xf32>) -> tensor<1x2xf32>
  %r = fp.relu(%d) : (tensor<1x2xf32>) -> tensor<1x2xf32>
  %v = fp.constant() {value = dense<[[1.0, -2.0], [0.5, 0.5], [-1.0, 3.0]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %y = fp.dense(%r, %v) : (tensor<1x2xf32>, tensor<3x2xf32>) -> tensor<1x3xf32>
  func.return %y : tensor<1x3xf32>
}
"#;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn thread_count_never_changes_the_result(
            values in prop::collection::vec(-1.0e4f32..1.0e4, 4..1600),
            kind in 0usize..3,
        ) {
            let samples = values.len() / 4;
            let dir = scratch("prop");
            let data = dir.join(format!("{samples}-{kind}.npy"));
            let raw = RawArray::from_elements(vec![samples, 4], &values[..samples * 4]).unwrap();
            write_npy_file(&data, &raw).unwrap();
            let observers = ["insert-observers", "insert-observers{observer=histogram bins=64}",
                "insert-observers{observer=moving-average averaging-constant=0.3}"][kind];
            let observed = run(MODEL, observers);
            let one = run(&observed, &format!("calibrate{{data=\"{}\" threads=1}}", data.display()));
            let two = run(&observed, &format!("calibrate{{data=\"{}\" threads=2}}", data.display()));
            std::fs::remove_file(&data).ok();
            prop_assert_eq!(one, two);
        }
    }
}
