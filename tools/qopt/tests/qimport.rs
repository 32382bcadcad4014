//! The `qimport` binary's contract: exit codes (0 ok, 1 bad input, 2 usage),
//! output to stdout or atomically to `-o`, `--batch`, and error messages that
//! name the model file.

mod common;

use common::{repo_path, scratch, text};
use std::process::{Command, Output};

fn qimport(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qimport")).args(args).output().expect("qimport runs")
}

#[test]
fn imports_to_stdout_and_exits_0() {
    let out = qimport(&[&repo_path("tests/models/digits_mlp/model.onnx")]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let expected = std::fs::read_to_string(repo_path("examples/digits_mlp.qir")).unwrap();
    assert_eq!(text(&out.stdout), expected);
    // One summary line on stderr: 5 ops (3 dense, 2 relu), the weights and
    // biases of the three layers (64·128 + 128 + 128·64 + 64 + 64·10 + 10), and
    // the signature.
    let model = repo_path("tests/models/digits_mlp/model.onnx");
    assert_eq!(
        text(&out.stderr),
        format!("qimport: {model}: 5 ops, 17226 parameters; inputs 1x64xf32; outputs 1x10xf32\n")
    );
}

#[test]
fn dash_output_is_standard_output() {
    let dir = scratch("dash-output");
    let out = Command::new(env!("CARGO_BIN_EXE_qimport"))
        .current_dir(&dir)
        .args([&repo_path("tests/models/digits_mlp/model.onnx"), "-o", "-"])
        .output()
        .expect("qimport runs");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), std::fs::read_to_string(repo_path("examples/digits_mlp.qir")).unwrap());
    assert!(!dir.join("-").exists(), "`-o -` wrote a file named '-'");
}

#[test]
fn writes_output_file_atomically() {
    let dir = scratch("output");
    let target = dir.join("out.qir");
    let out =
        qimport(&[&repo_path("tests/models/digits_cnn/ort_qdq_minmax.onnx"), "-o", target.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let written = std::fs::read_to_string(&target).unwrap();
    assert!(written.contains("qnn.quantize"));
    // A failed import leaves an existing output untouched.
    let out = qimport(&[&repo_path("tests/onnx/unsupported_ops.onnx"), "-o", target.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), written);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_models_exit_1_naming_the_file() {
    let dir = scratch("bad");
    let not_onnx = dir.join("notes.onnx");
    std::fs::write(&not_onnx, "hello, this is not a model\n").unwrap();
    let truncated = dir.join("truncated.onnx");
    let model = std::fs::read(repo_path("tests/models/digits_mlp/model.onnx")).unwrap();
    std::fs::write(&truncated, &model[..1000]).unwrap();
    let missing = dir.join("missing.onnx");
    let unsupported = repo_path("tests/onnx/unsupported_ops.onnx");
    let cases = [
        (
            not_onnx.to_str().unwrap().to_string(),
            "not a valid ONNX model: at byte 2: field 13 uses the group wire type, which ONNX never uses (in ModelProto)",
        ),
        (
            truncated.to_str().unwrap().to_string(),
            "not a valid ONNX model: at byte 15: field 7 says it has 69332 bytes but only 982 remain (in ModelProto)",
        ),
        (missing.to_str().unwrap().to_string(), "cannot read the file: No such file or directory (os error 2)"),
        (
            unsupported.clone(),
            "unsupported ONNX ops: Foo (nodes n1, n2, unnamed_out), Bar (node n7), com.example.Relu (node n9)",
        ),
    ];
    for (path, message) in cases {
        let out = qimport(&[&path]);
        assert_eq!(out.status.code(), Some(1), "{path}");
        assert_eq!(text(&out.stderr), format!("qimport: error: {path}: {message}\n"));
        assert!(out.stdout.is_empty());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn batch_fixes_a_dynamic_batch_dimension() {
    let model = repo_path("tests/onnx/dynamic_batch.onnx");
    let out = qimport(&[&model]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "qimport: error: {model}: input 'x' has a dynamic size 'N' in dimension 0; fix it with --batch N or \
             --input-shape x=...\n"
        )
    );
    let out = qimport(&[&model, "--batch", "3"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("func.func @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32>"));
    let width = repo_path("tests/onnx/dynamic_width.onnx");
    let out = qimport(&[&width]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr)
        .contains("input 'x' has a dynamic size in dimension 1; fix it with --input-shape x="));
    // --input-shape fixes any dimension.
    let out = qimport(&[&width, "--input-shape", "x=1x6"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("%arg0: tensor<1x6xf32>"), "{}", text(&out.stdout));
}

#[test]
fn usage_errors_exit_2() {
    let model = repo_path("tests/models/digits_mlp/model.onnx");
    for args in [
        &[][..],
        &[model.as_str(), "--batch", "0"],
        &[model.as_str(), "--batch", "x"],
        &["--bogus"],
        &[model.as_str(), "--input-shape", "x"],
        &[model.as_str(), "--input-shape", "x=1x0"],
        &[model.as_str(), "--input-shape", "=1x2"],
        &[model.as_str(), "--list-ops"],
        &["--list-ops", "-o", "x.qir"],
        &[model.as_str(), "--list-evaluated-ops"],
        &["--list-ops", "--list-evaluated-ops"],
    ] {
        let out = qimport(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty());
    }
    let out = qimport(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("--batch <N>"));
}

#[test]
fn list_ops_prints_the_supported_op_types() {
    let out = qimport(&["--list-ops"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(out.stderr.is_empty());
    let expected: String = qopt_onnx::supported_op_types().map(|name| format!("{name}\n")).collect();
    assert_eq!(text(&out.stdout), expected);
    let listed: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    for op in ["Conv", "Relu", "Reshape", "QuantizeLinear"] {
        assert!(listed.iter().any(|l| l == op), "{op} missing from {listed:?}");
    }
}

#[test]
fn list_evaluated_ops_prints_a_subset_of_the_supported_ones() {
    let out = qimport(&["--list-evaluated-ops"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(out.stderr.is_empty());
    let expected: String = qopt_onnx::evaluated_op_types().map(|name| format!("{name}\n")).collect();
    assert_eq!(text(&out.stdout), expected);
    let supported: Vec<&str> = qopt_onnx::supported_op_types().collect();
    let listed: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    for op in &listed {
        assert!(supported.contains(&op.as_str()), "{op} is evaluated but not supported");
    }
    for op in ["Cast", "Equal", "Where", "Range", "ConstantOfShape"] {
        assert!(listed.iter().any(|l| l == op), "{op} missing from {listed:?}");
    }
    assert!(!listed.iter().any(|l| l == "Conv"));
}

#[test]
fn a_batch_too_large_for_qir_text_is_refused() {
    let model = repo_path("tests/onnx/dynamic_batch.onnx");
    let out = qimport(&[&model, "--batch", "4611686018427387904", "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    let out = qimport(&[&model, "--input-shape", "x=281474976710657x4"]);
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is not a size from 1 to 2^48"), "{}", text(&out.stderr));
    // The largest size imports, and the module it prints names the graph's
    // input and output.
    let out = qimport(&[&model, "--batch", "281474976710656"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("attributes {arg_names = [\"x\"], result_names = [\"y\"]}"));
}

#[test]
fn an_output_over_the_model_is_refused() {
    let dir = scratch("over-input");
    let model = dir.join("model.onnx");
    std::fs::copy(repo_path("tests/models/digits_mlp/model.onnx"), &model).unwrap();
    let before = std::fs::read(&model).unwrap();
    let out = qimport(&[model.to_str().unwrap(), "-o", model.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("writing it would replace the input"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&model).unwrap(), before, "the model is untouched");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Inputs the fuzzers found crashes with (`tests/onnx/fuzz-regressions`):
/// each is now a clean import error, exit 1.
#[test]
fn fuzz_regressions_are_errors_not_crashes() {
    let dir = repo_path("tests/onnx/fuzz-regressions");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let out = qimport(&[path.to_str().unwrap(), "-o", "/dev/null"]);
        assert_eq!(out.status.code(), Some(1), "{}: {}", path.display(), text(&out.stderr));
        assert!(text(&out.stderr).starts_with("qimport: error: "), "{}", text(&out.stderr));
        checked += 1;
    }
    assert!(checked > 0, "no regression inputs in {dir}");
}
