//! The `qexport` binary's contract: exit codes (0 written, 1 bad input or an
//! export that cannot be written, 2 usage), the summary line, the one error
//! that lists every problem at its line, and atomic output: nothing is
//! written, and an existing file is left as it was, when anything fails.

mod common;

use common::{repo_path, scratch, text};
use std::path::Path;
use std::process::{Command, Output};

fn qexport(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qexport")).args(args).output().expect("qexport runs")
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path.to_string_lossy().into_owned()
}

const QUANTIZED: &str = r#"module {
  func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x2xf32> {
    %0 = qnn.quantize(%arg0) : (tensor<1x4xf32>) -> tensor<1x4x!qnn.uniform<i8:f32, 0.0625:-1>> loc("q")
    %1 = fp.constant() {value = dense<[[1, -2, 3, -4], [5, 6, -7, 8]]> : tensor<2x4x!qnn.uniform<i8:f32:0, {0.125:0, 0.25:0}>>} : () -> tensor<2x4x!qnn.uniform<i8:f32:0, {0.125:0, 0.25:0}>> loc("w")
    %2 = fp.constant() {value = dense<[7, -9]> : tensor<2xi32>} : () -> tensor<2xi32> loc("b")
    %3 = qnn.dense_relu(%0, %1, %2) : (tensor<1x4x!qnn.uniform<i8:f32, 0.0625:-1>>, tensor<2x4x!qnn.uniform<i8:f32:0, {0.125:0, 0.25:0}>>, tensor<2xi32>) -> tensor<1x2x!qnn.uniform<i8:f32, 0.125:-128>> loc("fc")
    %4 = qnn.dequantize(%3) : (tensor<1x2x!qnn.uniform<i8:f32, 0.125:-128>>) -> tensor<1x2xf32> loc("out")
    func.return %4 : tensor<1x2xf32>
  }
}
"#;

#[test]
fn writes_qdq_and_qoperator_files_and_says_what_it_wrote() {
    let dir = scratch("formats");
    let input = write(&dir, "m.qir", QUANTIZED);
    for (format, nodes) in [
        ("qdq", "8 nodes (DequantizeLinear 4, QuantizeLinear 2, Gemm 1, Relu 1)"),
        ("qoperator", "3 nodes (DequantizeLinear 1, QuantizeLinear 1, com.microsoft.QGemm 1)"),
    ] {
        let output = dir.join(format!("m.{format}.onnx"));
        let out = qexport(&[&input, "-o", output.to_str().unwrap(), &format!("--format={format}")]);
        assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
        let label = if format == "qdq" { "QDQ" } else { "QOperator" };
        assert!(
            text(&out.stderr).starts_with(&format!(
                "qexport: {input} -> {}: {label}, opset 17, {nodes}",
                output.display()
            )),
            "{}",
            text(&out.stderr)
        );
        let bytes = std::fs::read(&output).unwrap();
        let mut ctx = qopt_ir_core::Context::new();
        qopt_onnx::import_model(&mut ctx, &bytes, &qopt_onnx::ImportOptions::default()).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The default form is QDQ, except the layers whose int8 weights could
/// saturate ONNX Runtime's u8 × s8 kernels (x86 without VNNI), which become
/// QLinear ops; the summary says which and whether ONNX Runtime computes
/// every layer without saturation, and warns when the chosen form leaves a
/// layer to those kernels.
#[test]
fn the_default_form_is_one_onnx_runtime_computes_without_saturation() {
    let dir = scratch("auto");
    let output = dir.join("m.onnx");
    let out_path = output.to_str().unwrap();
    let exact = write(&dir, "exact.qir", QUANTIZED);
    // 255 · (127 + 127) > 32767: vpmaddubsw saturates on these weights.
    let saturating = write(&dir, "saturating.qir", &QUANTIZED.replace("[5, 6, -7, 8]", "[127, 127, -7, 8]"));
    let unsigned = write(
        &dir,
        "unsigned.qir",
        &QUANTIZED
            .replace("[5, 6, -7, 8]", "[127, 127, -7, 8]")
            .replace("i8:f32, 0.0625:-1", "u8:f32, 0.0625:127")
            .replace("i8:f32, 0.125:-128", "u8:f32, 0.125:0"),
    );
    let no_saturation =
        "; ONNX Runtime's int8 kernels compute every layer without saturation on x86 (AVX2, no VNNI)\n";
    for (input, args, form, note) in [
        (&exact, vec![], "QDQ, opset 17, 8 nodes", no_saturation.to_string()),
        (
            &saturating,
            vec![],
            "QDQ with 1 of 1 conv/dense layers as QLinear ops (their int8 weights could saturate ONNX Runtime's \
             u8 × s8 kernels), opset 17, 3 nodes (DequantizeLinear 1, QuantizeLinear 1, com.microsoft.QGemm 1)",
            no_saturation.to_string(),
        ),
        (
            &saturating,
            vec!["--format=qdq"],
            "QDQ, opset 17, 8 nodes",
            "; warning: on x86 without VNNI, ONNX Runtime's u8 × s8 kernels can saturate in 1 layer (fc), so its \
             default session may differ from qrun by more than one output step (--format=auto avoids it)\n"
                .to_string(),
        ),
        // With uint8 activations a QLinear op would take the same kernels: QDQ, and a warning.
        (
            &unsigned,
            vec![],
            "QDQ, opset 17, 8 nodes",
            "; warning: on x86 without VNNI, ONNX Runtime's u8 × s8 kernels can saturate in 1 layer (fc), so its \
             default session may differ from qrun by more than one output step (int8 activations or \
             quantize{reduce-range} avoid it)\n"
                .to_string(),
        ),
    ] {
        let mut all = vec![input.as_str(), "-o", out_path];
        all.extend(args);
        let out = qexport(&all);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(stderr.starts_with(&format!("qexport: {input} -> {out_path}: {form}")), "{stderr}");
        assert!(stderr.ends_with(&note), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_float_model_exports_from_its_qir() {
    let dir = scratch("float");
    let output = dir.join("mlp.onnx");
    let out = qexport(&[&repo_path("examples/digits_mlp.qir"), "-o", output.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains("QDQ, opset 17, 5 nodes (Gemm 3, Relu 2), 6 initializers"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every op and value ONNX cannot express is one error: the first line at
/// the first offender, a note with source line and caret at each.
#[test]
fn problems_are_one_error_and_nothing_is_written() {
    let dir = scratch("problems");
    let bad = QUANTIZED
        .replace("0.125:-128", "0.1:-128")
        .replace("qnn.dense_relu(%0, %1, %2) :", "qnn.dense_relu(%0, %1, %2) {rounding = \"half_up\"} :");
    let input = write(&dir, "bad.qir", &bad);
    let output = dir.join("out.onnx");
    std::fs::write(&output, "previous").unwrap();
    let out = qexport(&[&input, "-o", output.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let first = stderr.lines().next().unwrap();
    assert_eq!(first, format!("{input}:6:10: error: 1 op cannot be exported to ONNX:"));
    assert!(stderr.contains(&format!(
        "{input}:6:10: note: 'fc' (qnn.dense_relu): rounding = \"half_up\" cannot be written"
    )));
    assert!(stderr.contains(
        "'fc' (qnn.dense_relu): result: !qnn.uniform<i8:f32, 0.1:-128>: scale 0.1 is not an f32 value"
    ));
    assert_eq!(stderr.matches(": note: ").count(), 2, "{stderr}");
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "previous", "the old output is untouched");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "no temporary file left");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A model whose i32 accumulator can wrap (qopt wraps it, ONNX computes the
/// unwrapped sum) or whose `qnn.add` ignores an operand (scales more than
/// 2^31 apart; ONNX adds it) would be another model in ONNX: refused at the
/// op, naming the channel and the bound or the scales, and nothing written.
#[test]
fn arithmetic_onnx_would_compute_otherwise_is_refused_at_the_op() {
    let dir = scratch("arithmetic");
    let output = dir.join("out.onnx");
    let wrapping = write(&dir, "wrap.qir", &QUANTIZED.replace("dense<[7, -9]>", "dense<[7, 2147483647]>"));
    let gap = write(
        &dir,
        "gap.qir",
        r#"func.func @main(%a: tensor<1x8xf32>, %b: tensor<1x8xf32>) -> tensor<1x8xf32> {
  %0 = qnn.quantize(%a) : (tensor<1x8xf32>) -> tensor<1x8x!qnn.uniform<i8:f32, 0.05000000074505806:0>>
  %1 = qnn.quantize(%b) : (tensor<1x8xf32>) -> tensor<1x8x!qnn.uniform<i8:f32, 1.0e10:0>>
  %2 = qnn.add(%0, %1) : (tensor<1x8x!qnn.uniform<i8:f32, 0.05000000074505806:0>>, tensor<1x8x!qnn.uniform<i8:f32, 1.0e10:0>>) -> tensor<1x8x!qnn.uniform<i8:f32, 0.05000000074505806:0>> loc("residual")
  %3 = qnn.dequantize(%2) : (tensor<1x8x!qnn.uniform<i8:f32, 0.05000000074505806:0>>) -> tensor<1x8xf32>
  func.return %3 : tensor<1x8xf32>
}
"#,
    );
    for (input, line, note) in [
        (
            &wrapping,
            "6:10",
            "'fc' (qnn.dense_relu): the i32 accumulator can wrap: output channel 1 reaches |acc| ≤ 2147486975 \
             (limit 2147483647)",
        ),
        (
            &gap,
            "4:8",
            "'residual' (qnn.add): operand #0 (scale 5.000000074505806e-2) contributes nothing: the other's scale 1e10 is more \
             than 2^31 times larger",
        ),
    ] {
        for format in ["qdq", "qoperator"] {
            let out = qexport(&[input, "-o", output.to_str().unwrap(), &format!("--format={format}")]);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert!(stderr.starts_with(&format!("{input}:{line}: error: 1 op cannot be exported")), "{stderr}");
            assert!(stderr.contains(&format!("{input}:{line}: note: {note}")), "{stderr}");
            assert!(!output.exists(), "nothing is written");
        }
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "no temporary file left");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_exits_1_naming_it() {
    let dir = scratch("bad-input");
    let output = dir.join("out.onnx");
    let out_path = output.to_str().unwrap();
    let missing = dir.join("missing.qir");
    let out = qexport(&[missing.to_str().unwrap(), "-o", out_path]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with(&format!("qexport: error: cannot read '{}'", missing.display())));
    let broken = write(&dir, "broken.qir", "module {\n  func.func @main( {\n}\n");
    let out = qexport(&[&broken, "-o", out_path]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with(&format!("{broken}:2:")), "{}", text(&out.stderr));
    let input = write(&dir, "m.qir", QUANTIZED);
    let out = qexport(&[&input, "-o", out_path, "--function", "helper"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), format!("qexport: error: {input}: no function @helper in the module\n"));
    assert!(!output.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unwritable_output_exits_1_and_leaves_no_file() {
    let dir = scratch("unwritable");
    let input = write(&dir, "m.qir", QUANTIZED);
    let target = dir.join("no-such-dir").join("m.onnx");
    let out = qexport(&[&input, "-o", target.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with(&format!("qexport: error: cannot write {}: ", target.display())));
    assert!(!target.exists());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "only the input is there");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usage_errors_exit_2() {
    let dir = scratch("usage");
    let input = write(&dir, "m.qir", QUANTIZED);
    let output = dir.join("out.onnx");
    let out_path = output.to_str().unwrap();
    for args in [
        vec![input.as_str()],
        vec![input.as_str(), "-o", out_path, "--format=onnx"],
        vec![input.as_str(), "-o", out_path, "--opset", "12"],
        vec![input.as_str(), "-o", out_path, "--opset", "x"],
        vec![input.as_str(), "-o", out_path, "--frobnicate"],
    ] {
        let out = qexport(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
    }
    let out = qexport(&[&input, "-o", out_path, "--opset", "12"]);
    assert!(text(&out.stderr).contains("opset 12 is not supported (opsets 17 to 28)"));
    assert!(!output.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `qexport m.qir -o - | head -c 10`: when the reader of standard output
/// goes away, qexport ends quietly with 141 (128 + SIGPIPE), as the other
/// tools do, instead of reporting "Broken pipe" with exit 1.
#[cfg(unix)]
#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let dir = scratch("closed-pipe");
    // A 400 KB initializer: far more than a pipe's buffer holds.
    let values: Vec<String> = (0..100_000).map(|i| format!("{}.5", i % 7)).collect();
    let model = write(
        &dir,
        "big.qir",
        &format!(
            "func.func @main(%x: tensor<100000xf32>) -> tensor<100000xf32> {{\n  \
             %c = fp.constant() {{value = dense<[{}]> : tensor<100000xf32>}} : () -> tensor<100000xf32> loc(\"c\")\n  \
             %y = fp.add(%x, %c) : (tensor<100000xf32>, tensor<100000xf32>) -> tensor<100000xf32> loc(\"add\")\n  \
             func.return %y : tensor<100000xf32>\n}}\n",
            values.join(", ")
        ),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_qexport"))
        .args([model.as_str(), "-o", "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qexport starts");
    let mut head = [0u8; 10];
    child.stdout.take().expect("stdout is piped").read_exact(&mut head).expect("qexport writes");
    // The read end is closed here, when the handle is dropped.
    let out = child.wait_with_output().expect("qexport finishes");
    assert_eq!(out.status.code(), Some(141), "stderr: {}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "nothing is reported: {}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
