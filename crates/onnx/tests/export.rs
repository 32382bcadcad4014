//! The exporter on small hand-written modules: the written graphs as
//! snapshots of their node lists (`dump`), the re-import of each, and every
//! refusal with its message. The models of `tests/models`, and the QDQ round
//! trips that need `fuse`, are `tools/qopt/tests/onnx_roundtrip.rs`.

use qopt_interp::{Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::{parse_module, verify, Context, Dialect, Module};
use qopt_onnx::{decode_model, export_module, ExportError, ExportFormat, ExportOptions, Exported};

fn parse(text: &str) -> (Context, Module) {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).unwrap();
    qopt_dialect_qnn::register(&mut ctx).unwrap();
    let module = parse_module(&mut ctx, text.as_bytes(), "case.qir").unwrap_or_else(|d| panic!("{d}"));
    verify(&mut ctx, &module).unwrap_or_else(|d| panic!("{d}"));
    (ctx, module)
}

fn export(text: &str, format: ExportFormat) -> Exported {
    let (ctx, module) = parse(text);
    let options = ExportOptions { format, ..ExportOptions::default() };
    export_module(&ctx, &module, &options).unwrap_or_else(|e| panic!("{e}"))
}

fn export_error(text: &str, options: &ExportOptions) -> String {
    let (ctx, module) = parse(text);
    match export_module(&ctx, &module, options) {
        Ok(_) => panic!("the export should fail"),
        Err(e) => e.to_string(),
    }
}

/// The model as text: opsets, graph inputs and outputs, initializers (with
/// their values when they have at most 8), then one line per node.
fn dump(bytes: &[u8]) -> String {
    let model = decode_model(bytes).unwrap();
    let graph = model.graph.unwrap();
    let mut out = String::new();
    let opsets: Vec<String> = model
        .opset_import
        .iter()
        .map(|o| format!("{} {}", if o.domain.is_empty() { "ai.onnx" } else { &o.domain }, o.version))
        .collect();
    out.push_str(&format!("ir_version {}; opsets {}\n", model.ir_version, opsets.join(", ")));
    for (what, values) in [("input", &graph.input), ("output", &graph.output)] {
        for v in values {
            let t = v.tensor.as_ref().unwrap();
            let dims: Vec<String> = t
                .shape
                .as_ref()
                .unwrap()
                .iter()
                .map(|d| match d {
                    qopt_onnx::Dim::Value(v) => v.to_string(),
                    other => format!("{other:?}"),
                })
                .collect();
            out.push_str(&format!(
                "{what} {}: {}[{}]\n",
                v.name,
                qopt_onnx::data_type::name(t.elem_type),
                dims.join(", ")
            ));
        }
    }
    for t in &graph.initializer {
        let raw = t.raw_data.unwrap_or_default();
        let shown = if raw.len() <= 8 { format!(" = {raw:02x?}") } else { String::new() };
        out.push_str(&format!(
            "initializer {}: {}{:?}{shown}\n",
            t.name,
            qopt_onnx::data_type::name(t.data_type),
            t.dims
        ));
    }
    for n in &graph.node {
        let op = if n.domain.is_empty() { n.op_type.clone() } else { format!("{}.{}", n.domain, n.op_type) };
        let attrs: Vec<String> = n
            .attribute
            .iter()
            .map(|a| {
                let value = match (a.f, a.i, a.s) {
                    (Some(f), _, _) => format!("{f}"),
                    (_, Some(i), _) => format!("{i}"),
                    (_, _, Some(s)) => format!("\"{}\"", String::from_utf8_lossy(s)),
                    _ => format!("{:?}", a.ints),
                };
                format!("{}={value}", a.name)
            })
            .collect();
        let attrs = if attrs.is_empty() { String::new() } else { format!(" {{{}}}", attrs.join(", ")) };
        out.push_str(&format!(
            "{}: {op}({}) -> {}{attrs}\n",
            n.name,
            n.input.join(", "),
            n.output.join(", ")
        ));
    }
    out
}

/// Imports `bytes` and runs both modules' `@main` on `input`: the outputs
/// must be equal bit for bit.
fn assert_runs_the_same(text: &str, bytes: &[u8], input: Tensor) {
    assert_runs_the_same_on(text, bytes, &[input]);
}

/// [`assert_runs_the_same`] for functions of several arguments.
fn assert_runs_the_same_on(text: &str, bytes: &[u8], inputs: &[Tensor]) {
    let (ctx, module) = parse(text);
    let mut imported_ctx = Context::new();
    let imported = qopt_onnx::import_model(&mut imported_ctx, bytes, &qopt_onnx::ImportOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let kernels = KernelRegistry::standard();
    let want = Interpreter::new(&ctx, &module, &kernels).run("main", inputs).unwrap();
    let got = Interpreter::new(&imported_ctx, &imported, &kernels).run("main", inputs).unwrap();
    assert_eq!(want.len(), got.len());
    for (w, g) in want.iter().zip(&got) {
        let (w, g) = (w.to_f64_vec(), g.to_f64_vec());
        assert!(w.iter().zip(&g).all(|(a, b)| a.to_bits() == b.to_bits()), "{w:?}\n{g:?}");
    }
}

/// `n` deterministic values in [-2, 2) for inputs.
fn ramp(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let values = (0..n).map(|i| ((i * 37 % 101) as f32 / 101.0) * 4.0 - 2.0).collect();
    Tensor::from_f32(shape, values).unwrap()
}

fn list(n: usize, f: impl Fn(usize) -> String) -> String {
    (0..n).map(f).collect::<Vec<_>>().join(", ")
}

/// A dense literal of `shape` (nested brackets) with element `i` from `f`.
fn nested(shape: &[usize], f: impl Fn(usize) -> String) -> String {
    let values: Vec<String> = (0..shape.iter().product()).map(f).collect();
    let mut level: Vec<String> = values;
    for &size in shape.iter().rev() {
        level = level.chunks(size).map(|c| format!("[{}]", c.join(", "))).collect();
    }
    level.concat()
}

fn float_model() -> String {
    format!(
        r#"module {{
  func.func @main(%arg0: tensor<1x2x6x6xf32>) -> tensor<1x3xf32> {{
    %0 = fp.constant() {{value = dense<{w1}> : tensor<4x2x3x3xf32>}} : () -> tensor<4x2x3x3xf32> loc("w1")
    %1 = fp.constant() {{value = dense<[0.125, -0.25, 0.5, 0.0]> : tensor<4xf32>}} : () -> tensor<4xf32> loc("b1")
    %2 = fp.conv2d(%arg0, %0, %1) {{pad = [1, 1, 1, 1], stride = [2, 2]}} : (tensor<1x2x6x6xf32>, tensor<4x2x3x3xf32>, tensor<4xf32>) -> tensor<1x4x3x3xf32> loc("conv1")
    %3 = fp.relu(%2) : (tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32> loc("relu1")
    %4 = fp.max_pool2d(%3) {{kernel = [2, 2]}} : (tensor<1x4x3x3xf32>) -> tensor<1x4x2x2xf32> loc("pool1")
    %5 = fp.flatten(%4) : (tensor<1x4x2x2xf32>) -> tensor<1x16xf32> loc("flatten1")
    %6 = fp.constant() {{value = dense<{w2}> : tensor<3x16xf32>}} : () -> tensor<3x16xf32> loc("w2")
    %7 = fp.dense(%5, %6) : (tensor<1x16xf32>, tensor<3x16xf32>) -> tensor<1x3xf32> loc("fc")
    %8 = fp.clip(%7) {{max = 6.0 : f32, min = -6.0 : f32}} : (tensor<1x3xf32>) -> tensor<1x3xf32> loc("clip")
    %9 = fp.softmax(%8) {{axis = -1}} : (tensor<1x3xf32>) -> tensor<1x3xf32> loc("softmax")
    func.return %9 : tensor<1x3xf32>
  }}
}}"#,
        w1 = nested(&[4, 2, 3, 3], |i| format!("{:.3}", (i as f32 * 0.37).sin() * 0.5)),
        w2 = nested(&[3, 16], |i| format!("{:.3}", (i as f32 * 0.11).cos() * 0.25)),
    )
}

#[test]
fn float_ops_become_the_onnx_ops_they_come_from() {
    let text = float_model();
    let exported = export(&text, ExportFormat::Qdq);
    insta::assert_snapshot!("float", dump(&exported.bytes));
    assert_runs_the_same(&text, &exported.bytes, ramp(&[1, 2, 6, 6]));
}

/// Every fp op but `fp.gelu` (`tests/data/export/fp_ops.qir`) comes back
/// from ONNX as itself and runs bit for bit, at opset 17 (reduction axes as
/// attributes) and 21 (as inputs).
#[test]
fn every_fp_op_round_trips() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/export/fp_ops.qir");
    let text = std::fs::read_to_string(path).unwrap();
    let (ctx, module) = parse(&text);
    let covered: Vec<&str> = qopt_dialect_fp::FpDialect
        .ops()
        .iter()
        .map(|d| d.name)
        .filter(|&name| name != qopt_dialect_fp::op_names::GELU && !text.contains(&format!("= {name}(")))
        .collect();
    assert!(covered.is_empty(), "fp_ops.qir lacks {covered:?}");
    let inputs = [
        ramp(&[1, 4, 4, 4]),
        Tensor::from_f32(&[1, 4, 4, 4], (0..64).map(|i| (i as f32 - 30.0) / 9.0).collect()).unwrap(),
    ];
    for opset in [None, Some(21)] {
        let options = ExportOptions { opset, ..ExportOptions::default() };
        let exported = export_module(&ctx, &module, &options).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(exported.opset, opset.unwrap_or(17));
        assert_runs_the_same_on(&text, &exported.bytes, &inputs);
    }
}

const Q_IN: &str = "!qnn.uniform<i8:f32, 0.03125:-3>";
const Q_W: &str = "!qnn.uniform<i8:f32:0, {0.0625:0, 0.125:0, 0.25:0, 0.5:0}>";

/// A quantized conv with a fused ReLU6 whose clamp binds, a plain conv, an
/// add, a concat, an average pool, a max pool on the integers, a relu on
/// them, a global pool, a dense with a relu, a requantize and a lookup.
fn quantized_model() -> String {
    format!(
        r#"module {{
  func.func @main(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x3xf32> {{
    %0 = qnn.quantize(%arg0) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4x{Q_IN}> loc("input_q")
    %1 = fp.constant() {{value = dense<{w}> : tensor<4x2x2x2x{Q_W}>}} : () -> tensor<4x2x2x2x{Q_W}> loc("w")
    %2 = fp.constant() {{value = dense<[10, -20, 30, 0]> : tensor<4xi32>}} : () -> tensor<4xi32> loc("b")
    %3 = qnn.conv2d_relu(%0, %1, %2) {{pad = [0, 0, 1, 1], relu_max = 6.0 : f32}} : (tensor<1x2x4x4x{Q_IN}>, tensor<4x2x2x2x{Q_W}>, tensor<4xi32>) -> tensor<1x4x4x4x!qnn.uniform<i8:f32, 0.046875:-128>> loc("conv_relu6")
    %4 = qnn.conv2d(%0, %1) {{pad = [0, 0, 1, 1]}} : (tensor<1x2x4x4x{Q_IN}>, tensor<4x2x2x2x{Q_W}>) -> tensor<1x4x4x4x!qnn.uniform<i8:f32, 0.0625:2>> loc("conv")
    %5 = qnn.add(%3, %4) : (tensor<1x4x4x4x!qnn.uniform<i8:f32, 0.046875:-128>>, tensor<1x4x4x4x!qnn.uniform<i8:f32, 0.0625:2>>) -> tensor<1x4x4x4x!qnn.uniform<i8:f32, 0.09375:-10>> loc("add")
    %6 = qnn.concat(%5, %4) {{axis = 1}} : (tensor<1x4x4x4x!qnn.uniform<i8:f32, 0.09375:-10>>, tensor<1x4x4x4x!qnn.uniform<i8:f32, 0.0625:2>>) -> tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.09375:-10>> loc("concat")
    %7 = qnn.avg_pool2d(%6) {{kernel = [2, 2], stride = [2, 2]}} : (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.09375:-10>>) -> tensor<1x8x2x2x!qnn.uniform<i8:f32, 0.0625:-20>> loc("avg")
    %8 = fp.max_pool2d(%7) {{kernel = [2, 1]}} : (tensor<1x8x2x2x!qnn.uniform<i8:f32, 0.0625:-20>>) -> tensor<1x8x1x2x!qnn.uniform<i8:f32, 0.0625:-20>> loc("max")
    %9 = fp.relu(%8) : (tensor<1x8x1x2x!qnn.uniform<i8:f32, 0.0625:-20>>) -> tensor<1x8x1x2x!qnn.uniform<i8:f32, 0.0625:-20>> loc("relu")
    %10 = qnn.global_avg_pool2d(%9) : (tensor<1x8x1x2x!qnn.uniform<i8:f32, 0.0625:-20>>) -> tensor<1x8x1x1x!qnn.uniform<i8:f32, 0.03125:-100>> loc("gap")
    %11 = fp.flatten(%10) : (tensor<1x8x1x1x!qnn.uniform<i8:f32, 0.03125:-100>>) -> tensor<1x8x!qnn.uniform<i8:f32, 0.03125:-100>> loc("flatten")
    %12 = fp.constant() {{value = dense<{w2}> : tensor<3x8x!qnn.uniform<i8:f32, 0.015625:0>>}} : () -> tensor<3x8x!qnn.uniform<i8:f32, 0.015625:0>> loc("w2")
    %13 = qnn.dense_relu(%11, %12) : (tensor<1x8x!qnn.uniform<i8:f32, 0.03125:-100>>, tensor<3x8x!qnn.uniform<i8:f32, 0.015625:0>>) -> tensor<1x3x!qnn.uniform<u8:f32, 0.0078125:5>> loc("fc")
    %14 = qnn.requantize(%13) : (tensor<1x3x!qnn.uniform<u8:f32, 0.0078125:5>>) -> tensor<1x3x!qnn.uniform<i8:f32, 0.015625:-7>> loc("requantize")
    %15 = qnn.lookup(%14) {{table = dense<[{table}]> : tensor<256xi8>}} : (tensor<1x3x!qnn.uniform<i8:f32, 0.015625:-7>>) -> tensor<1x3x!qnn.uniform<i8:f32, 0.0078125:0>> loc("lookup")
    %16 = qnn.dequantize(%15) : (tensor<1x3x!qnn.uniform<i8:f32, 0.0078125:0>>) -> tensor<1x3xf32> loc("output")
    func.return %16 : tensor<1x3xf32>
  }}
}}"#,
        w = nested(&[4, 2, 2, 2], |i| format!("{}", (i as i32 * 29 % 61) - 30)),
        w2 = nested(&[3, 8], |i| format!("{}", (i as i32 * 17 % 41) - 20)),
        table = list(256, |i| format!("{}", ((i as i32 - 128) * 3 / 4).clamp(-128, 127))),
    )
}

#[test]
fn quantized_ops_in_qdq_form() {
    let exported = export(&quantized_model(), ExportFormat::Qdq);
    insta::assert_snapshot!("quantized_qdq", dump(&exported.bytes));
}

#[test]
fn quantized_ops_in_qoperator_form_run_the_same_when_imported() {
    let text = quantized_model();
    let exported = export(&text, ExportFormat::QOperator);
    insta::assert_snapshot!("quantized_qoperator", dump(&exported.bytes));
    assert_runs_the_same(&text, &exported.bytes, ramp(&[1, 2, 4, 4]));
}

/// A lookup is exact in ONNX (Cast, Gather of the dequantized table,
/// QuantizeLinear), and so is its import: every one of the 256 stored
/// inputs gives the table's entry back, in both formats.
#[test]
fn a_lookup_table_comes_back_exactly() {
    let table = list(256, |i| format!("{}", ((i * 7919) % 256) as i32 - 128));
    let text = format!(
        r#"module {{
  func.func @main(%arg0: tensor<1x256xf32>) -> tensor<1x256xf32> {{
    %0 = qnn.quantize(%arg0) : (tensor<1x256xf32>) -> tensor<1x256x!qnn.uniform<i8:f32, 1.0:0>> loc("q")
    %1 = qnn.lookup(%0) {{table = dense<[{table}]> : tensor<256xi8>}} : (tensor<1x256x!qnn.uniform<i8:f32, 1.0:0>>) -> tensor<1x256x!qnn.uniform<i8:f32, 0.5:3>> loc("lut")
    %2 = qnn.dequantize(%1) : (tensor<1x256x!qnn.uniform<i8:f32, 0.5:3>>) -> tensor<1x256xf32> loc("dq")
    func.return %2 : tensor<1x256xf32>
  }}
}}"#
    );
    let every_stored_value =
        Tensor::from_f32(&[1, 256], (0..256).map(|i| i as f32 - 128.0).collect()).unwrap();
    for format in [ExportFormat::Qdq, ExportFormat::QOperator] {
        let exported = export(&text, format);
        assert_eq!(
            exported.op_types,
            ["QuantizeLinear", "Cast", "DequantizeLinear", "Gather", "QuantizeLinear", "DequantizeLinear"]
        );
        assert_runs_the_same(&text, &exported.bytes, every_stored_value.clone());
    }
}

/// 16-bit activations and 4-bit weights need opset 21 (INT16 and INT4
/// QuantizeLinear / DequantizeLinear), which the export picks; their
/// initializers are packed two to a byte and read back.
#[test]
fn four_and_sixteen_bit_types_export_at_opset_21() {
    let text = r#"module {
  func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
    %0 = qnn.quantize(%arg0) : (tensor<1x4xf32>) -> tensor<1x4x!qnn.uniform<i16:f32, 0.0009765625:-7>> loc("q16")
    %1 = fp.constant() {value = dense<[-8, 7, 3, -1, 0]> : tensor<5x!qnn.uniform<i4:f32, 0.25:0>>} : () -> tensor<5x!qnn.uniform<i4:f32, 0.25:0>> loc("w4")
    %2 = qnn.dequantize(%1) : (tensor<5x!qnn.uniform<i4:f32, 0.25:0>>) -> tensor<5xf32> loc("w4_dq")
    %3 = fp.strided_slice(%2) {begin = [1], end = [5]} : (tensor<5xf32>) -> tensor<4xf32> loc("slice")
    %4 = qnn.dequantize(%0) : (tensor<1x4x!qnn.uniform<i16:f32, 0.0009765625:-7>>) -> tensor<1x4xf32> loc("dq16")
    %5 = fp.mul(%4, %3) : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32> loc("mul")
    func.return %5 : tensor<1x4xf32>
  }
}"#;
    let exported = export(text, ExportFormat::Qdq);
    assert_eq!(exported.opset, 21);
    insta::assert_snapshot!("int4_int16", dump(&exported.bytes));
    assert_runs_the_same(text, &exported.bytes, ramp(&[1, 4]));
}

/// A fake-quant model holds its 4- and 16-bit types only in `qnn.fake_quant`'s
/// `type` attribute (its results are f32); the export still writes INT4,
/// UINT4 and INT16 QuantizeLinear and so must pick opset 21 (at 17 the
/// file fails `onnx.checker` and ONNX Runtime refuses it).
#[test]
fn a_fake_quant_to_four_or_sixteen_bits_needs_opset_21() {
    for ty in ["i4:f32, 0.25:0", "u4:f32, 0.25:3", "i16:f32, 0.0009765625:-7"] {
        let text = format!(
            r#"module {{
  func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {{
    %0 = qnn.fake_quant(%arg0) {{type = !qnn.uniform<{ty}>}} : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("fq")
    func.return %0 : tensor<2x3xf32>
  }}
}}"#
        );
        let exported = export(&text, ExportFormat::Qdq);
        assert_eq!(exported.opset, 21, "{ty}");
        assert_runs_the_same(&text, &exported.bytes, ramp(&[2, 3]));
        let (ctx, module) = parse(&text);
        let at_17 = ExportOptions { opset: Some(17), ..ExportOptions::default() };
        let message = export_module(&ctx, &module, &at_17).unwrap_err().to_string();
        assert!(message.contains("quantization needs opset 21, not 17"), "{message}");
    }
}

/// The graph's inputs and outputs keep the names the function records
/// (`arg_names`, `result_names`: the ONNX model's, from qimport), with the
/// output's node writing it under that name; names missing, empty or given
/// twice fall back to generated ones, and every name stays unique.
#[test]
fn graph_inputs_and_outputs_keep_the_recorded_names() {
    let names = |bytes: &[u8]| {
        let graph = decode_model(bytes).unwrap().graph.unwrap();
        let io =
            |values: &[qopt_onnx::ValueInfo]| values.iter().map(|v| v.name.to_string()).collect::<Vec<_>>();
        (
            io(&graph.input),
            io(&graph.output),
            graph.node.iter().flat_map(|n| n.output.clone()).collect::<Vec<_>>(),
        )
    };
    let model = |attrs: &str| {
        format!(
            r#"module {{
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) attributes {{{attrs}}} {{
    %0 = fp.add(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("sum_out")
    %1 = fp.relu(%0) : (tensor<4xf32>) -> tensor<4xf32> loc("relu")
    func.return %1, %0, %1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }}
}}"#
        )
    };
    let given =
        model(r#"arg_names = ["input", "input.1"], result_names = ["scores", "sum_out", "scores:1"]"#);
    let exported = export(&given, ExportFormat::Qdq);
    let (inputs, outputs, node_outputs) = names(&exported.bytes);
    assert_eq!(inputs, ["input", "input.1"]);
    assert_eq!(outputs, ["scores", "sum_out", "scores:1"]);
    assert_eq!(node_outputs, ["sum_out", "scores", "scores:1"]);
    assert_runs_the_same_on(&given, &exported.bytes, &[ramp(&[4]), ramp(&[4])]);
    // Missing, empty and repeated names: generated ones, unique.
    for attrs in ["", r#"arg_names = ["x", "x"], result_names = ["", "x", "y"]"#] {
        let exported = export(&model(attrs), ExportFormat::Qdq);
        let (inputs, outputs, _) = names(&exported.bytes);
        let mut all: Vec<&String> = inputs.iter().chain(&outputs).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 5, "{attrs}: {inputs:?} {outputs:?}");
    }
    let (inputs, outputs, _) = names(&export(&model(""), ExportFormat::Qdq).bytes);
    assert_eq!(
        (inputs, outputs),
        (vec!["arg0".to_string(), "arg1".into()], vec!["relu".into(), "sum_out".into(), "output2".into()])
    );
}

/// One error lists every op and value ONNX cannot express, each at its op.
#[test]
fn every_problem_is_listed_at_once() {
    let text = r#"module {
  func.func @helper(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    func.return %arg0 : tensor<4xf32>
  }
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4x!qnn.uniform<i8:f32, 0.5:0>>) -> tensor<4xf32> {
    %0 = func.call @helper(%arg0) : (tensor<4xf32>) -> tensor<4xf32> loc("call")
    %1 = qnn.quantize(%0) : (tensor<4xf32>) -> tensor<4x!qnn.uniform<i8<-127:127>:f32, 0.5:0>> loc("narrow")
    %2 = qnn.quantize(%0) : (tensor<4xf32>) -> tensor<4x!qnn.uniform<i5:f32, 0.5:0>> loc("five_bits")
    %3 = qnn.quantize(%0) : (tensor<4xf32>) -> tensor<4x!qnn.uniform<i8:f32, 0.1:0>> loc("not_f32_scale")
    %4 = qnn.add(%3, %arg1) {rounding = "half_to_even"} : (tensor<4x!qnn.uniform<i8:f32, 0.1:0>>, tensor<4x!qnn.uniform<i8:f32, 0.5:0>>) -> tensor<4x!qnn.uniform<i8:f32, 0.5:0>> loc("add")
    %5 = qnn.dequantize(%1) : (tensor<4x!qnn.uniform<i8<-127:127>:f32, 0.5:0>>) -> tensor<4xf32> loc("dq")
    func.return %5 : tensor<4xf32>
  }
}"#;
    insta::assert_snapshot!("problems", export_error(text, &ExportOptions::default()));
}

#[test]
fn an_opset_below_what_an_op_needs_is_a_problem_at_the_op() {
    let text = r#"module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = fp.gelu(%arg0) : (tensor<4xf32>) -> tensor<4xf32> loc("gelu")
    func.return %0 : tensor<4xf32>
  }
}"#;
    let options = ExportOptions { opset: Some(17), ..ExportOptions::default() };
    assert_eq!(
        export_error(text, &options),
        "1 op cannot be exported to ONNX:\n  'gelu' (fp.gelu): Gelu needs opset 20, not 17"
    );
    let exported = export(text, ExportFormat::Qdq);
    assert_eq!(exported.opset, 20);
    assert_runs_the_same(text, &exported.bytes, ramp(&[4]));
    let (ctx, module) = parse(text);
    let missing = ExportOptions { function: "@nope".into(), ..ExportOptions::default() };
    assert_eq!(export_module(&ctx, &module, &missing).unwrap_err(), ExportError::NoFunction("nope".into()));
    let old = ExportOptions { opset: Some(13), ..ExportOptions::default() };
    assert_eq!(export_module(&ctx, &module, &old).unwrap_err(), ExportError::Opset(13));
}

/// `qnn.fake_quant` is a QuantizeLinear → DequantizeLinear pair, per axis
/// here, and imports as `qnn.quantize` and `qnn.dequantize`, which compute
/// the same (`docs/quant-semantics.md` §3.4).
#[test]
fn fake_quant_is_a_quantize_dequantize_pair() {
    let text = r#"module {
  func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = qnn.fake_quant(%arg0) {type = !qnn.uniform<i8:f32:0, {0.125:3, 0.5:-2}>} : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("fq")
    func.return %0 : tensor<2x3xf32>
  }
}"#;
    let exported = export(text, ExportFormat::Qdq);
    assert_eq!(exported.op_types, ["QuantizeLinear", "DequantizeLinear"]);
    assert_runs_the_same(text, &exported.bytes, ramp(&[2, 3]));
}
