//! Inputs the importer rejects, each with its exact message: unsupported ops
//! (all listed at once), files that are not ONNX, dynamic dimensions with and
//! without a batch size, opsets, and node-level limits. Also keeps the small
//! models in `tests/onnx/` (used by qimport's CLI tests) equal to their builders.

mod common;

use common::*;

fn import_err(model: &Model, batch: Option<i64>) -> String {
    match import_text(&model.bytes(), batch) {
        Ok(text) => panic!("expected an error, got\n{text}"),
        Err(e) => e,
    }
}

/// Two unsupported op types, one used twice, and one of another domain.
fn unsupported_ops_model() -> Model {
    Model::new(17)
        .input("x", &[4])
        .node("Foo", "n1", &["x"], &["a"])
        .node("Relu", "r", &["a"], &["b"])
        .node("Bar", "n7", &["b"], &["c"])
        .node("Foo", "n2", &["c"], &["d"])
        .node("Foo", "", &["d"], &["unnamed_out"])
        .node_in("com.example", "Relu", "n9", &["unnamed_out"], &["e"])
        .output("e")
}

/// Input `x` is N×4 with a symbolic batch size.
fn dynamic_batch_model() -> Model {
    Model::new(17)
        .input_dims("x", FLOAT, &[D::P("N"), D::V(4)])
        .node("Relu", "relu", &["x"], &["y"])
        .output("y")
}

/// Input `x` is 1×W with an unknown width.
fn dynamic_width_model() -> Model {
    Model::new(17)
        .input_dims("x", FLOAT, &[D::V(1), D::Unknown])
        .node("Relu", "relu", &["x"], &["y"])
        .output("y")
}

#[test]
fn unsupported_ops_are_listed_together() {
    assert_eq!(
        import_err(&unsupported_ops_model(), None),
        "unsupported ONNX ops: Foo (nodes n1, n2, unnamed_out), Bar (node n7), com.example.Relu (node n9)"
    );
    // A long list names the first five nodes and counts the rest.
    let mut many = Model::new(17).input("x", &[1]);
    for i in 0..9 {
        many = many.node("Foo", &format!("f{i}"), &["x"], &[&format!("y{i}")]);
    }
    assert_eq!(
        import_err(&many.output("y0"), None),
        "unsupported ONNX ops: Foo (nodes f0, f1, f2, f3, f4 and 4 more)"
    );
}

/// A graph-valued attribute `name` holding one node per `(op_type, node name, extra attribute)`.
fn body(name: &str, nodes: &[(&str, &str, Option<Msg>)]) -> Msg {
    let mut graph = Msg::new().str(2, name);
    for (op_type, node_name, attr) in nodes {
        let mut node =
            Msg::new().str(1, "x").str(2, &format!("{node_name}_out")).str(3, node_name).str(4, op_type);
        if let Some(a) = attr {
            node = node.msg(5, a);
        }
        graph = graph.msg(1, &node);
    }
    Msg::new().str(1, name).int(20, 5).msg(6, &graph)
}

#[test]
fn ops_inside_subgraphs_are_listed() {
    // Loop's body holds a supported Relu, an unsupported NonMaxSuppression and
    // an If whose branch holds an unsupported TopK.
    let branch = body("then_branch", &[("TopK", "topk", None), ("Relu", "inner_relu", None)]);
    let loop_body = body(
        "body",
        &[("Relu", "r", None), ("NonMaxSuppression", "nms", None), ("If", "cond", Some(branch))],
    );
    let model = Model::new(17)
        .input("x", &[4])
        .node_attrs("Loop", "loop", &["", "", "x"], &["y"], &[loop_body])
        .output("y");
    assert_eq!(
        import_err(&model, None),
        "unsupported ONNX ops: Loop (node loop), NonMaxSuppression (node loop/body/nms), \
         If (node loop/body/cond), TopK (node loop/body/cond/then_branch/topk)"
    );
}

#[test]
fn dynamic_dimensions() {
    assert_eq!(
        import_err(&dynamic_batch_model(), None),
        "input 'x' has a dynamic size 'N' in dimension 0; fix it with --batch N or --input-shape x=..."
    );
    let text = import_text(&dynamic_batch_model().bytes(), Some(8)).unwrap();
    assert!(text.contains("func.func @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32>"), "{text}");
    for batch in [None, Some(1)] {
        assert_eq!(
            import_err(&dynamic_width_model(), batch),
            "input 'x' has a dynamic size in dimension 1; fix it with --input-shape x=..."
        );
    }
    let no_shape =
        Model::new(17).input_dims("x", FLOAT, &[D::Unknown]).node("Relu", "r", &["x"], &["y"]).output("y");
    assert_eq!(
        import_err(&no_shape, None),
        "input 'x' has a dynamic size in dimension 0; fix it with --batch N or --input-shape x=..."
    );
    let static_batch = Model::new(17)
        .input_dims("x", FLOAT, &[D::V(1), D::V(4)])
        .node("Relu", "r", &["x"], &["y"])
        .output("y");
    assert_eq!(
        import_err(&static_batch, Some(8)),
        "input 'x' has a static batch of 1; --batch 8 cannot change it"
    );
    assert!(import_text(&static_batch.bytes(), Some(1)).is_ok(), "--batch equal to the static batch is fine");
}

#[test]
fn input_shapes_fix_any_dynamic_dimension() {
    let shaped = |shapes: &[(&str, &[i64])]| qopt_onnx::ImportOptions {
        input_shapes: shapes.iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect(),
        ..Default::default()
    };
    // Paddle writes -1 for a dynamic size; symbolic and unset sizes are dynamic too.
    let model = Model::new(17)
        .input_dims("x", FLOAT, &[D::V(-1), D::V(3), D::P("h"), D::Unknown])
        .node("Relu", "r", &["x"], &["y"])
        .output("y");
    let text = import_with(&model.bytes(), &shaped(&[("x", &[1, 3, 48, 192])])).unwrap();
    assert!(text.contains("%arg0: tensor<1x3x48x192xf32>"), "{text}");
    let e = import_with(&model.bytes(), &shaped(&[("x", &[1, 4, 48, 192])])).unwrap_err();
    assert_eq!(e, "input 'x' has size 3 in dimension 1, but --input-shape says 4");
    let e = import_with(&model.bytes(), &shaped(&[("x", &[1, 3, 48])])).unwrap_err();
    assert_eq!(e, "--input-shape gives input 'x' 3 dimensions, the model declares 4");
    let e = import_with(&model.bytes(), &shaped(&[("image", &[1, 3, 48, 192])])).unwrap_err();
    assert_eq!(e, "--input-shape names 'image', which is not an input of the model (inputs: x)");
    // An input declared without any shape takes the whole --input-shape.
    let no_shape = Model::new(17).input_unranked("x", FLOAT).node("Relu", "r", &["x"], &["y"]).output("y");
    let text = import_with(&no_shape.bytes(), &shaped(&[("x", &[2, 5])])).unwrap();
    assert!(text.contains("%arg0: tensor<2x5xf32>"), "{text}");
}

#[test]
fn files_that_are_not_onnx_models() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "the file holds no graph (is it an ONNX model?)"),
        (
            b"hello, this is not a model\n",
            "not a valid ONNX model: at byte 2: field 13 uses the group wire type, which ONNX never uses \
             (in ModelProto)",
        ),
        (&[0x3A, 0x05, 0x0A], "not a valid ONNX model: at byte 1: field 7 says it has 5 bytes but only 1 remain (in ModelProto)"),
    ];
    for (bytes, expected) in cases {
        assert_eq!(import_text(bytes, None).unwrap_err(), *expected);
    }
    let model =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/models/digits_mlp/model.onnx"))
            .unwrap();
    let truncated = import_text(&model[..model.len() / 2], None).unwrap_err();
    assert!(truncated.starts_with("not a valid ONNX model: at byte "), "{truncated}");
}

#[test]
fn opsets() {
    let relu = |opset| Model::new(opset).input("x", &[2]).node("Relu", "r", &["x"], &["y"]).output("y");
    for opset in [11, 21, 22, 28] {
        assert!(import_text(&relu(opset).bytes(), None).is_ok(), "opset {opset}");
    }
    for opset in [10, 29] {
        assert_eq!(
            import_err(&relu(opset), None),
            format!("ONNX opset {opset} is not supported (qimport supports opsets 11 to 28)")
        );
    }
}

#[test]
fn node_errors_name_the_node() {
    let cases: Vec<(Model, &str)> = vec![
        (
            Model::new(17).input("x", &[1, 1, 4, 4]).node_attrs("MaxPool", "pool", &["x"], &["y", "idx"], &[attr_ints("kernel_shape", &[2, 2])]).output("y"),
            "node 'pool' (MaxPool): the Indices output is not supported",
        ),
        (
            // An attribute the converter never reads (here: one no opset defines) is refused.
            Model::new(17).input("x", &[2]).node_attrs("Relu", "r", &["x"], &["y"], &[attr_int("fancy", 1)]).output("y"),
            "node 'r' (Relu): attribute 'fancy' is not supported (qimport does not implement it for Relu)",
        ),
        (
            Model::new(17).input("x", &[2]).node_attrs("Relu", "r", &["x"], &["y"], &[attr_graph("body")]).output("y"),
            "node 'r' (Relu): attribute 'body' is a subgraph; subgraphs are not supported",
        ),
        (
            Model::new(17).input("x", &[2]).node("Relu", "r", &["later"], &["y"]).node("Relu", "s", &["x"], &["later"]).output("y"),
            "node 'r' (Relu): value 'later' is not defined before its use (not a graph input, an initializer \
             or the output of an earlier node; ONNX nodes must be in topological order)",
        ),
        (
            Model::new(17).input("x", &[2, 3]).input("shape", &[2]).node("Reshape", "reshape", &["x", "shape"], &["y"]).output("y"),
            "node 'reshape' (Reshape): input #1 ('shape') must be a constant (an initializer or a Constant node)",
        ),
        (
            Model::new(17).input_dims("q", INT8, &[D::V(4)]).init(tensor_f32("s", &[], &[0.5])).node("DequantizeLinear", "dq", &["q", "s"], &["y"]).output("y"),
            "node 'dq' (DequantizeLinear): input #0 has type tensor<4xi8>; it must be a constant or the output of a QuantizeLinear",
        ),
        (
            Model::new(13)
                .input("x", &[1, 2, 3, 3])
                .init(tensor_f32("s", &[2], &[1.0, 1.0]))
                .node_attrs("BatchNormalization", "bn", &["x", "s", "s", "s", "s"], &["y", "mean"], &[attr_int("training_mode", 1)])
                .output("y"),
            "node 'bn' (BatchNormalization): training mode (running mean and variance outputs) is not supported",
        ),
        (
            Model::new(17).input("x", &[2, 3]).node("Relu", "r", &["x"], &["y"]).output_shape("y", &[3, 2]),
            "value 'y' is declared with shape [3, 2] but the imported graph computes tensor<2x3xf32>",
        ),
        (
            Model::new(17).input("x", &[1, 1, 4, 4]).node_attrs("AveragePool", "avg", &["x"], &["y"], &[attr_ints("kernel_shape", &[2, 2]), attr_str("auto_pad", "SAME")]).output("y"),
            "node 'avg' (AveragePool): auto_pad 'SAME' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
        ),
        (
            Model::new(17)
                .input("x", &[1, 1, 3, 3])
                .init(tensor_f32("w", &[1, 1, 3, 3], &[1.0; 9]))
                .node_attrs("ConvTranspose", "up", &["x", "w"], &["y"], &[attr_ints("strides", &[2, 2]), attr_ints("output_shape", &[9, 7])])
                .output("y"),
            "node 'up' (ConvTranspose): output size 9 along dimension 2 is 2 more than the 7 the input, kernel and \
             output padding give; at most 1 more (smaller than the stride or the dilation, whichever is larger) \
             can be added",
        ),
        (
            Model::new(17)
                .input("x", &[1, 1, 3, 3])
                .init(tensor_f32("w", &[1, 1, 3, 3], &[1.0; 9]))
                .node_attrs("ConvTranspose", "up", &["x", "w"], &["y"], &[attr_ints("strides", &[2, 1]), attr_ints("output_padding", &[1, 1])])
                .output("y"),
            "node 'up' (ConvTranspose): fp.conv_transpose2d: 'output_padding' values must be smaller than the \
             stride or the dilation, whichever is larger (1 along dimension 3), got 1",
        ),
        (
            Model::new(17).input("x", &[2, 3]).node_attrs("Concat", "cat", &["x", "x"], &["y"], &[attr_float("axis", 1.0)]).output("y"),
            "node 'cat' (Concat): attribute 'axis' must be INT, got FLOAT",
        ),
        (
            Model::new(17).input("x", &[2, 3]).input("y", &[4]).node("Add", "add", &["x", "y"], &["z"]).output("z"),
            "node 'add' (Add): fp.add: shapes 2x3 and 4 cannot be broadcast (dimension 1 of the result: 3 vs 4)",
        ),
        (
            Model::new(13).input("x", &[1, 1, 2, 2]).input("s", &[4]).node("Resize", "rs", &["x", "", "s"], &["y"]).output("y"),
            "node 'rs' (Resize): input #2 ('s') must be a constant (an initializer or a Constant node)",
        ),
        (
            Model::new(13)
                .input("x", &[1, 1, 2, 2])
                .init(tensor_f32("s", &[4], &[1.0, 1.0, 2.0, 2.0]))
                .node_attrs("Resize", "rs", &["x", "", "s"], &["y"], &[attr_str("coordinate_transformation_mode", "tf_crop_and_resize")])
                .output("y"),
            "node 'rs' (Resize): coordinate_transformation_mode 'tf_crop_and_resize' (a crop to the roi input, \
             extrapolation_value outside it) is not supported",
        ),
        (
            Model::new(13)
                .input("x", &[1, 1, 2, 2])
                .init(tensor_f32("s", &[4], &[1.0, 1.0, 2.0, 2.0]))
                .init(tensor_i64("n", &[4], &[1, 1, 4, 4]))
                .node("Resize", "rs", &["x", "", "s", "n"], &["y"])
                .output("y"),
            "node 'rs' (Resize): only one of the scales and sizes inputs may be given",
        ),
        (
            Model::new(18)
                .input("x", &[1, 1, 2, 2])
                .init(tensor_f32("s", &[4], &[1.0, 1.0, 0.5, 0.5]))
                .node_attrs("Resize", "rs", &["x", "", "s"], &["y"], &[attr_int("antialias", 1)])
                .output("y"),
            "node 'rs' (Resize): exclude_outside and antialias are not supported with mode 'nearest' (they apply \
             to linear and cubic interpolation)",
        ),
        (
            Model::new(13).input("x", &[1, 1, 2, 2]).node("Resize", "rs", &["x"], &["y"]).output("y"),
            "node 'rs' (Resize): needs the scales or the sizes input",
        ),
    ];
    for (model, expected) in cases {
        assert_eq!(import_err(&model, None), expected);
    }
}

#[test]
fn bad_tensors() {
    let external = Msg::new().packed_i64(1, &[2]).int(2, 1).str(8, "w").int(14, 1);
    let model =
        Model::new(17).input("x", &[2]).init(external).node("Add", "add", &["x", "w"], &["y"]).output("y");
    assert_eq!(
        import_err(&model, None),
        "tensor 'w': its data is stored in an external file, which qimport does not read (save the model \
         with its data inside the .onnx file)"
    );
    let short = tensor_raw("w", FLOAT, &[2], &[0, 0, 0, 0]);
    let model =
        Model::new(17).input("x", &[2]).init(short).node("Add", "add", &["x", "w"], &["y"]).output("y");
    assert_eq!(import_err(&model, None), "tensor 'w': raw_data has 4 bytes but 2 elements of FLOAT need 8");
    let huge = tensor_raw("w", FLOAT, &[i64::MAX, 4], &[]);
    let model = Model::new(17).input("x", &[2]).init(huge).output("x");
    assert_eq!(import_err(&model, None), "tensor 'w': the element count overflows");
}

#[test]
fn fixtures_for_the_cli_tests_are_up_to_date() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx");
    for (name, model) in [
        ("dynamic_batch.onnx", dynamic_batch_model()),
        ("dynamic_width.onnx", dynamic_width_model()),
        ("unsupported_ops.onnx", unsupported_ops_model()),
    ] {
        let path = dir.join(name);
        if std::env::var_os("QOPT_UPDATE_FIXTURES").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, model.bytes()).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert!(committed == model.bytes(), "{name} is stale: rerun with QOPT_UPDATE_FIXTURES=1");
    }
}

#[test]
fn quantization_parameters_the_qnn_dialect_rejects() {
    let quantize = |scale: f32, zp: Msg| {
        Model::new(17)
            .input("x", &[2])
            .init(tensor_f32("s", &[], &[scale]))
            .init(zp)
            .node("QuantizeLinear", "q", &["x", "s", "zp"], &["y"])
            .output("y")
    };
    assert_eq!(
        import_err(&quantize(0.0, tensor_i8("zp", &[], &[0])), None),
        "node 'q' (QuantizeLinear): scale 0.0 is not a positive finite number"
    );
    assert_eq!(
        import_err(&quantize(1e-40, tensor_i8("zp", &[], &[0])), None),
        "node 'q' (QuantizeLinear): scale 9.99994610111476e-41 is not a normal f32 number (quantize and \
         dequantize compute in f32)"
    );
    assert_eq!(
        import_err(&quantize(0.5, tensor_i64("zp", &[], &[0])), None),
        "node 'q' (QuantizeLinear): quantized type INT64 is not supported"
    );
}

#[test]
fn opset_23_quantization_attributes() {
    let f16_scale = || tensor_raw("s", FLOAT16, &[], &half_bits(0.5));
    let quantize = |opset: i64, scale: Msg, attrs: Vec<Msg>| {
        Model::new(opset)
            .input("x", &[2])
            .init(scale)
            .init(tensor_i8("zp", &[], &[0]))
            .node_attrs("QuantizeLinear", "q", &["x", "s", "zp"], &["y"], &attrs)
            .output("y")
    };
    // f32 scales divide in f32, by default or when 'precision' says FLOAT.
    for attrs in [vec![], vec![attr_int("precision", 1)]] {
        assert!(import_text(&quantize(23, tensor_f32("s", &[], &[0.5]), attrs).bytes(), None).is_ok());
    }
    assert_eq!(
        import_err(&quantize(23, tensor_f32("s", &[], &[0.5]), vec![attr_int("precision", 16)]), None),
        "node 'q' (QuantizeLinear): the division x / y_scale runs in BFLOAT16 ('precision'); only FLOAT is \
         supported (qnn.quantize divides in f32)"
    );
    // From opset 23 an f16 scale means an f16 division unless 'precision' says otherwise.
    assert_eq!(
        import_err(&quantize(23, f16_scale(), vec![]), None),
        "node 'q' (QuantizeLinear): the division x / y_scale runs in FLOAT16 (the scale's type, the default \
         of 'precision'); only FLOAT is supported (qnn.quantize divides in f32)"
    );
    let dequantize = |attrs: Vec<Msg>| {
        Model::new(23)
            .init(tensor_i8("q", &[2], &[1, -1]))
            .init(tensor_f32("s", &[], &[0.5]))
            .node_attrs("DequantizeLinear", "dq", &["q", "s"], &["y"], &attrs)
            .output("y")
    };
    assert!(import_text(&dequantize(vec![attr_int("output_dtype", 1)]).bytes(), None).is_ok());
    assert_eq!(
        import_err(&dequantize(vec![attr_int("output_dtype", 10)]), None),
        "node 'dq' (DequantizeLinear): output_dtype FLOAT16 differs from the scale's type FLOAT; the output \
         has the scale's type"
    );
}

/// Attributes ONNX defines but ignores in the cases qimport supports are read,
/// not rejected as unknown: `axis` of per-tensor Q/DQ, Resize's
/// `extrapolation_value` outside `tf_crop_and_resize`, Range's `stash_type`
/// (opset 27) on types it does not concern. Before opset 27 `stash_type` does
/// not exist, and stays an error.
#[test]
fn attributes_onnx_ignores_are_accepted() {
    let qdq = Model::new(17)
        .input("x", &[2, 3])
        .init(tensor_f32("s", &[], &[0.5]))
        .init(tensor_i8("zp", &[], &[0]))
        .node_attrs("QuantizeLinear", "q", &["x", "s", "zp"], &["y"], &[attr_int("axis", 1)])
        .node_attrs("DequantizeLinear", "dq", &["y", "s", "zp"], &["z"], &[attr_int("axis", 0)])
        .output("z");
    assert!(import_text(&qdq.bytes(), None).is_ok());
    let resize = Model::new(13)
        .input("x", &[1, 1, 2, 2])
        .init(tensor_f32("s", &[4], &[1.0, 1.0, 2.0, 2.0]))
        .node_attrs("Resize", "rs", &["x", "", "s"], &["y"], &[attr_float("extrapolation_value", 0.0)])
        .output("y");
    assert!(import_text(&resize.bytes(), None).is_ok());
    let range = |opset: i64| {
        Model::new(opset)
            .init(tensor_i64("a", &[], &[0]))
            .init(tensor_i64("b", &[], &[3]))
            .init(tensor_i64("d", &[], &[1]))
            .node_attrs("Range", "r", &["a", "b", "d"], &["y"], &[attr_int("stash_type", 1)])
            .output("y")
    };
    assert!(import_text(&range(27).bytes(), None).is_ok());
    assert_eq!(
        import_err(&range(26), None),
        "node 'r' (Range): attribute 'stash_type' is not supported (qimport does not implement it for Range)"
    );
}

/// The little-endian bytes of `v` as an IEEE half (exact for the values used here).
fn half_bits(v: f32) -> [u8; 2] {
    let bits = v.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mantissa = ((bits >> 13) & 0x3ff) as u16;
    (sign | ((exponent as u16) << 10) | mantissa).to_le_bytes()
}

/// The QOperator ops and table lookups the importer cannot express as qnn
/// ops: a float-output QGemm, a QLinearMatMul of two computed matrices, and
/// the stored integers of a quantized value read by anything but a lookup
/// Gather.
#[test]
fn qoperator_and_lookup_limits() {
    let quantized_x = || {
        Model::new(17)
            .input("x", &[1, 4])
            .init(tensor_f32("s", &[], &[0.5]))
            .init(tensor_i8("zp", &[], &[0]))
            .init(tensor_i8("w", &[2, 4], &[1, 2, 3, 4, 5, 6, 7, 8]))
            .node("QuantizeLinear", "q", &["x", "s", "zp"], &["xq"])
    };
    let float_output = quantized_x()
        .node_in("com.microsoft", "QGemm", "g", &["xq", "s", "zp", "w", "s", "zp"], &["y"])
        .output("y");
    assert_eq!(
        import_err(&float_output, None),
        "node 'g' (QGemm): QGemm without y_scale (a float output) is not supported"
    );
    let computed_b = quantized_x()
        .node("QuantizeLinear", "q2", &["x", "s", "zp"], &["bq"])
        .node("QLinearMatMul", "mm", &["xq", "s", "zp", "bq", "s", "zp", "s", "zp"], &["y"])
        .output("y");
    assert_eq!(
        import_err(&computed_b, None),
        "node 'mm' (QLinearMatMul): input #3 (B) must be a constant: qnn has no integer product of two computed \
         values"
    );
    let stored_integers = quantized_x()
        .node_attrs("Cast", "c", &["xq"], &["i"], &[attr_int("to", 6)])
        .node("Add", "add", &["i", "i"], &["y"])
        .output("y");
    assert_eq!(
        import_err(&stored_integers, None),
        "node 'add' (Add): value 'i' holds the stored integers of a quantized value (a Cast of it), which qimport \
         reads only as the indices of a Gather from a dequantized table (a lookup table)"
    );
}
