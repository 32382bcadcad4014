//! The `quantize` pipeline end to end on the test models (`tests/models`), as a
//! user runs it: `qimport`, `qopt --pass='quantize{data=calib.npy}'`, `qrun`.
//! Each model must come out as integer ops with exactly one `qnn.quantize`
//! and one `qnn.dequantize`, with `quant-lint` silent, and at least as
//! accurate as ONNX Runtime's int8 model on the same calibration data
//! (its outputs are `ref_ort_int8.npy`): top-1 accuracy and SQNR against
//! the float outputs for the digits models, SQNR + 1 dB for resnet_tiny.
//! Running the expanded passes one by one, saving in between, gives the
//! same bytes as the pipeline.

mod common;

use common::{repo, scratch};
use qopt_driver::Driver;
use qopt_ir_core::pass::pipeline::{parse_pipeline, print_pipeline};
use qopt_ir_core::ScratchDir;
use qopt_npy::{self as npy, RawArray};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs a tool; panics with its stderr on failure; returns stderr.
fn run(tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool).args(args).output().expect("the tool starts");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{tool} {args:?} failed:\n{stderr}");
    stderr
}

fn floats(array: &RawArray) -> Vec<f64> {
    match array.to_vec::<f32>() {
        Ok(v) => v.into_iter().map(f64::from).collect(),
        Err(_) => array.to_vec::<i64>().expect("f32 or i64").into_iter().map(|v| v as f64).collect(),
    }
}

/// SQNR of `out` against `reference` in dB.
fn sqnr(out: &[f64], reference: &[f64]) -> f64 {
    let signal: f64 = reference.iter().map(|r| r * r).sum();
    let noise: f64 = out.iter().zip(reference).map(|(o, r)| (o - r) * (o - r)).sum();
    10.0 * (signal / noise).log10()
}

/// Top-1 accuracy of rows of `classes` scores against `labels`.
fn accuracy(scores: &[f64], labels: &[f64], classes: usize) -> f64 {
    let hits = scores
        .chunks(classes)
        .zip(labels)
        .filter(|(row, &label)| {
            let best = row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i);
            best == Some(label as usize)
        })
        .count();
    hits as f64 / labels.len() as f64
}

/// Quantizes one test model and checks the bars; returns the integer model's
/// path and the directory that holds it.
fn quantize(model: &str) -> (ScratchDir, PathBuf) {
    let dir = scratch(model);
    let data = repo().join("tests/models").join(model);
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let float = dir.join("model.qir");
    run(env!("CARGO_BIN_EXE_qimport"), &[&path(&data.join("model.onnx")), "-o", &path(&float)]);
    let int8 = dir.join("model.int8.qir");
    let pipeline = format!("--pass=quantize{{data={}}}", path(&data.join("calib.npy")));
    let stderr = run(env!("CARGO_BIN_EXE_qopt"), &[&path(&float), &pipeline, "--stats", "-o", &path(&int8)]);
    assert!(!stderr.contains("warning:"), "{model}: quant-lint is not silent:\n{stderr}");
    let text = std::fs::read_to_string(&int8).unwrap();
    assert_eq!(text.matches("= qnn.quantize(").count(), 1, "{model}:\n{text}");
    assert_eq!(text.matches("= qnn.dequantize(").count(), 1, "{model}:\n{text}");
    for float_op in
        ["fp.conv2d", "fp.dense", "fp.add", "fp.mul", "fp.concat", "fp.avg_pool2d", "fp.global_avg_pool2d"]
    {
        assert!(!text.contains(&format!("= {float_op}(")), "{model}: {float_op} stayed float:\n{text}");
    }
    assert!(stderr.contains("0 float-ops") && stderr.contains("0 warnings"), "{model}: {stderr}");

    let scores = dir.join("scores.npz");
    run(
        env!("CARGO_BIN_EXE_qrun"),
        &[&path(&int8), "--input", &path(&data.join("test.npy")), "--batch", "-o", &path(&scores)],
    );
    let ours = floats(&npy::read_npz_file(&scores).unwrap()[0].1);
    let reference = floats(&npy::read_npy_file(data.join("ref_fp32.npy")).unwrap());
    let ort = floats(&npy::read_npy_file(data.join("ref_ort_int8.npy")).unwrap());
    let (ours_db, ort_db) = (sqnr(&ours, &reference), sqnr(&ort, &reference));
    let labels_path = data.join("test_labels.npy");
    if labels_path.exists() {
        let labels = floats(&npy::read_npy_file(&labels_path).unwrap());
        let classes = ours.len() / labels.len();
        let (a, b) = (accuracy(&ours, &labels, classes), accuracy(&ort, &labels, classes));
        assert!(a >= b, "{model}: accuracy {a} below ONNX Runtime's {b}");
        assert!(ours_db >= ort_db, "{model}: SQNR {ours_db:.2} dB below ONNX Runtime's {ort_db:.2} dB");
    } else {
        assert!(ours_db >= ort_db + 1.0, "{model}: SQNR {ours_db:.2} dB, ONNX Runtime {ort_db:.2} dB + 1 dB");
    }
    (dir, int8)
}

/// The passes `quantize{data=<calib>}` expands to in qopt's pass registry,
/// each as pipeline text with its options.
fn quantize_expansion(calib: &Path) -> Vec<String> {
    let mut driver = Driver::new("qopt");
    let pipeline =
        driver.passes_mut().get_pipeline("quantize").expect("qopt registers the quantize pipeline");
    let quoted = calib.to_string_lossy().replace('\\', "\\\\").replace('"', "\\\"");
    let text = format!("quantize{{data=\"{quoted}\"}}");
    let [element] = &parse_pipeline(&text).unwrap()[..] else { panic!("{text}") };
    let options = element.resolve_options(&pipeline.options).unwrap();
    let steps = parse_pipeline(&(pipeline.expand)(&options)).unwrap();
    steps.into_iter().map(|step| print_pipeline(&[step])).collect()
}

#[test]
fn digits_mlp_quantizes_to_integer_ops() {
    quantize("digits_mlp");
}

#[test]
fn digits_cnn_quantizes_to_integer_ops_and_the_passes_one_by_one_agree() {
    let (_dir, int8) = quantize("digits_cnn");
    // The expansion of the registry's `quantize` pipeline (what `--list-passes`
    // describes and `--pass=quantize{...}` runs), one pass per run, saving between.
    let dir = int8.parent().unwrap().to_path_buf();
    let calib = repo().join("tests/models/digits_cnn/calib.npy");
    let passes = quantize_expansion(&calib);
    assert!(passes.iter().any(|p| p.starts_with("calibrate{data=")), "{passes:?}");
    let mut current = dir.join("model.qir");
    for (i, pass) in passes.iter().enumerate() {
        let next = dir.join(format!("step{i}.qir"));
        let (from, to) = (current.to_string_lossy().into_owned(), next.to_string_lossy().into_owned());
        run(env!("CARGO_BIN_EXE_qopt"), &[&from, &format!("--pass={pass}"), "-o", &to]);
        current = next;
    }
    assert_eq!(std::fs::read(&current).unwrap(), std::fs::read(&int8).unwrap(), "one by one differs");

    // Layer by layer against the float model: each fused conv (conv, batch
    // norm and relu, merged by fold-bn and fuse) is compared at the relu.
    let table =
        compare_table(&dir.join("model.qir"), &int8, &repo().join("tests/models/digits_cnn/test.npy"));
    for layer in ["block1_relu9", "block2_relu18", "block3_relu29", "residual19", "gap30", "fc34"] {
        let db = row_sqnr(&table, layer);
        assert!(db > 30.0, "{layer}: {db} dB\n{table}");
    }
}

/// The table of `qrun float --input test --batch --compare int8`.
fn compare_table(float: &Path, int8: &Path, test: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_qrun"))
        .arg(float)
        .args([
            "--input".as_ref(),
            test.as_os_str(),
            "--batch".as_ref(),
            "--compare".as_ref(),
            int8.as_os_str(),
        ])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{table}");
    table
}

/// The SQNR in dB of the row of `table` for the value located `layer`.
fn row_sqnr(table: &str, layer: &str) -> f64 {
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("loc(\"{layer}\")")))
        .unwrap_or_else(|| panic!("{layer}:\n{table}"));
    row.split_whitespace().nth_back(3).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{row}"))
}

/// resnet_tiny's residual blocks end in add → relu. The relu's output type
/// clamps at 0, so `fuse` makes one `qnn.add` computing the relu's value and
/// locates it there: `--compare` measures it against the float relu (as the
/// fused convs against theirs), not against the float add before the relu,
/// which the integer model does not compute (that gave 1.5 to 15 dB rows).
#[test]
fn resnet_tiny_quantizes_to_integer_ops_and_compares_adds_at_their_relu() {
    let (_dir, int8) = quantize("resnet_tiny");
    let dir = int8.parent().unwrap().to_path_buf();
    let table =
        compare_table(&dir.join("model.qir"), &int8, &repo().join("tests/models/resnet_tiny/test.npy"));
    for layer in ["relu25", "relu42", "relu66", "relu83", "relu107", "relu124"] {
        let db = row_sqnr(&table, layer);
        assert!(db > 30.0, "{layer}: {db} dB\n{table}");
    }
    let adds: Vec<&str> = table.lines().filter(|l| l.starts_with("loc(\"add")).collect();
    assert!(adds.is_empty(), "float adds compared with values after their relu: {adds:?}\n{table}");
}

/// MobileNetV3 (`tests/import-models/mobilenetv3_torch`, PyTorch's export:
/// HardSwish after most convolutions, squeeze-excite gates of
/// conv → relu → conv → HardSigmoid → Mul) quantizes to an integer-only model:
/// `fold-bn` folds each hard sigmoid's affine part into the conv before it
/// (leaving `clip(0, 1)`, fused as `qnn.conv2d_relu {relu_max = 1.0}`), every
/// hard swish becomes a `qnn.lookup`, the gates' products `qnn.mul`, so one
/// `qnn.quantize` and one `qnn.dequantize` are left and `quant-lint` is
/// silent. Calibrated on 8 perturbed copies of the test input, the integer
/// model's output stays above 30 dB SQNR against the float model's on it.
#[test]
fn mobilenetv3_quantizes_to_integer_only() {
    let dir = scratch("mobilenetv3");
    let data = repo().join("tests/import-models/mobilenetv3_torch");
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let float = dir.join("model.qir");
    let args = std::fs::read_to_string(data.join("args")).unwrap();
    let mut qimport: Vec<String> = vec![path(&data.join("model.onnx")), "-o".into(), path(&float)];
    qimport.extend(args.split_whitespace().map(str::to_string));
    let qimport: Vec<&str> = qimport.iter().map(String::as_str).collect();
    run(env!("CARGO_BIN_EXE_qimport"), &qimport);

    // Calibration data: the test input, each value scaled by a random factor
    // in [0.75, 1.25] and shifted by up to ±0.25, 8 times (splitmix64).
    let input = npy::read_npy_file(data.join("input_0.npy")).unwrap();
    let pixels = input.to_vec::<f32>().unwrap();
    let mut state = 0x00C0_FFEE_u64;
    let mut unit = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    let mut samples = Vec::with_capacity(8 * pixels.len());
    for _ in 0..8 {
        samples.extend(pixels.iter().map(|&p| p * (1.0 + 0.25 * unit()) + 0.25 * unit()));
    }
    let calib = dir.join("calib.npy");
    let shape = [&[8][..], &input.shape[1..]].concat();
    npy::write_npy_file(&calib, &RawArray::from_elements(shape, &samples).unwrap()).unwrap();

    let int8 = dir.join("model.int8.qir");
    let pipeline = format!("--pass=quantize{{data={}}}", path(&calib));
    let stderr = run(env!("CARGO_BIN_EXE_qopt"), &[&path(&float), &pipeline, "--stats", "-o", &path(&int8)]);
    assert!(!stderr.contains("warning:"), "quant-lint is not silent:\n{stderr}");
    for stat in ["5 folded-hard-sigmoids", "11 fused-lookup", "5 fused-mul", "0 float-ops", "0 warnings"] {
        assert!(stderr.contains(stat), "no '{stat}':\n{stderr}");
    }
    let text = std::fs::read_to_string(&int8).unwrap();
    assert_eq!(text.matches("= qnn.quantize(").count(), 1, "{text}");
    assert_eq!(text.matches("= qnn.dequantize(").count(), 1, "{text}");
    assert_eq!(text.matches("= qnn.lookup(").count(), 11, "{text}");
    assert_eq!(text.matches("{relu_max = 1.0 : f32}").count(), 5, "{text}");
    for float_op in
        ["fp.hard_swish", "fp.hard_sigmoid", "fp.clip", "fp.conv2d", "fp.dense", "fp.mul", "fp.add"]
    {
        assert!(!text.contains(&format!("= {float_op}(")), "{float_op} stayed float:\n{text}");
    }

    let out = Command::new(env!("CARGO_BIN_EXE_qrun"))
        .arg(&float)
        .arg("--input")
        .arg(data.join("input_0.npy"))
        .arg("--compare")
        .arg(&int8)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}");
    let row = table.lines().find(|l| l.starts_with("output #0")).unwrap_or_else(|| panic!("{table}"));
    let db: f64 =
        row.split_whitespace().nth_back(3).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{row}"));
    assert!(db > 30.0, "output SQNR {db} dB\n{table}");
}

/// `bias-correct` names a correction it rejects (one that would raise the
/// layer's quantized output error on the data) at `-v`, located at the
/// layer, and not as a warning: the model is quantize-skip's first case,
/// where fc2's correction is rejected on its six samples.
#[test]
fn a_rejected_bias_correction_is_named_at_verbose_not_warned() {
    let dir = scratch("rejected-correction");
    let text = std::fs::read_to_string(repo().join("tests/passes/quantize-skip.qir")).unwrap();
    let first = &text[..text.find("// -----").unwrap_or(text.len())];
    let model = dir.join("m.qir");
    std::fs::write(&model, first).unwrap();
    let data = repo().join("tests/passes/data/calib-x4.npy");
    let pipeline = format!("--pass=quantize{{data={}}}", data.display());
    let (model, q) = (model.to_str().unwrap(), dir.join("q.qir"));
    let stderr = run(env!("CARGO_BIN_EXE_qopt"), &[model, &pipeline, "-v", "-o", q.to_str().unwrap()]);
    let line =
        stderr.lines().find(|l| l.contains("bias correction rejected")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("m.qir:22:9: note:") && line.contains("kept = false"), "{line}");
    assert!(!stderr.contains("warning:"), "{stderr}");
}
