//! Each supported op on small hand-built models: attribute forms, opset
//! differences and the lowering choices, as golden snapshots of the imported
//! IR (`check`). The reference models cover only a few ops; these cover the rest.

mod common;

use common::*;

/// Imports `model` (which must succeed) and snapshots the IR under `name`.
fn check(name: &str, model: Model) {
    let text = import_text(&model.bytes(), None).unwrap_or_else(|e| panic!("{name}: {e}"));
    insta::assert_snapshot!(name, text);
}

fn weights(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.5 - 1.0).collect()
}

#[test]
fn conv() {
    // SAME_UPPER with stride 2 and kernel 2 on 5: output 3, one padding at the end.
    check(
        "conv_same_upper_groups",
        Model::new(17)
            .input("x", &[1, 4, 5, 5])
            .init(tensor_f32("w", &[6, 2, 2, 2], &weights(48)))
            .node_attrs(
                "Conv",
                "conv",
                &["x", "w"],
                &["y"],
                &[attr_str("auto_pad", "SAME_UPPER"), attr_ints("strides", &[2, 2]), attr_int("group", 2)],
            )
            .output("y"),
    );
    check(
        "conv_same_lower_dilated",
        Model::new(17)
            .input("x", &[1, 1, 6, 6])
            .init(tensor_f32("w", &[1, 1, 2, 2], &weights(4)))
            .node_attrs(
                "Conv",
                "conv",
                &["x", "w"],
                &["y"],
                &[attr_str("auto_pad", "SAME_LOWER"), attr_ints("dilations", &[2, 2])],
            )
            .output("y"),
    );
    check(
        "conv1d_bias",
        Model::new(11)
            .input("x", &[1, 2, 8])
            .init(tensor_f32("w", &[3, 2, 3], &weights(18)))
            .init(tensor_f32("b", &[3], &[0.1, 0.2, 0.3]))
            .node_attrs("Conv", "conv", &["x", "w", "b"], &["y"], &[attr_ints("pads", &[1, 1])])
            .output("y"),
    );
}

#[test]
fn conv_transpose() {
    // ONNX's test_convtranspose_output_shape: strides [3, 2] give 9×7; the
    // output shape 10×8 asks for one more row and column, at the end.
    check(
        "conv_transpose_output_shape",
        Model::new(17)
            .input("x", &[1, 1, 3, 3])
            .init(tensor_f32("w", &[1, 2, 3, 3], &weights(18)))
            .node_attrs(
                "ConvTranspose",
                "up",
                &["x", "w"],
                &["y"],
                &[attr_ints("strides", &[3, 2]), attr_ints("output_shape", &[10, 8])],
            )
            .output("y"),
    );
    // SAME_UPPER with stride 2: 3 → 6 of the full 7, the odd padding at the
    // end; two groups of 2 input channels and 1 output channel, a bias.
    check(
        "conv_transpose_same_upper_groups",
        Model::new(17)
            .input("x", &[1, 4, 3, 3])
            .init(tensor_f32("w", &[4, 1, 3, 3], &weights(36)))
            .init(tensor_f32("b", &[2], &[0.1, 0.2]))
            .node_attrs(
                "ConvTranspose",
                "up",
                &["x", "w", "b"],
                &["y"],
                &[attr_str("auto_pad", "SAME_UPPER"), attr_ints("strides", &[2, 2]), attr_int("group", 2)],
            )
            .output("y"),
    );
    // An N×C×L output_shape with NOTSET: the odd padding at the beginning
    // (2·4 + 4 = 12 → 9: pads [2, 1]); explicit pads are ignored.
    check(
        "conv_transpose1d_output_shape",
        Model::new(11)
            .input("x", &[1, 2, 5])
            .init(tensor_f32("w", &[2, 3, 4], &weights(24)))
            .node_attrs(
                "ConvTranspose",
                "up",
                &["x", "w"],
                &["y"],
                &[
                    attr_ints("strides", &[2]),
                    attr_ints("pads", &[5, 5]),
                    attr_ints("output_shape", &[1, 3, 9]),
                ],
            )
            .output("y"),
    );
    // Explicit pads, dilation and output padding pass through.
    check(
        "conv_transpose_pads_dilation",
        Model::new(17)
            .input("x", &[1, 2, 4, 4])
            .init(tensor_f32("w", &[2, 1, 2, 3], &weights(12)))
            .node_attrs(
                "ConvTranspose",
                "up",
                &["x", "w"],
                &["y"],
                &[
                    attr_ints("strides", &[2, 1]),
                    attr_ints("dilations", &[1, 2]),
                    attr_ints("pads", &[0, 1, 1, 0]),
                    attr_ints("output_padding", &[1, 1]),
                    attr_ints("kernel_shape", &[2, 3]),
                ],
            )
            .output("y"),
    );
}

#[test]
fn gemm_and_matmul() {
    check(
        "gemm_constant_b_transposed_at_import",
        Model::new(13)
            .input("a", &[2, 3])
            .init(tensor_f32("b", &[3, 4], &weights(12)))
            .init(tensor_f32("c", &[1, 4], &[1.0, 2.0, 3.0, 4.0]))
            .node("Gemm", "fc", &["a", "b", "c"], &["y"])
            .output("y"),
    );
    check(
        "gemm_general",
        Model::new(13)
            .input("a", &[3, 2])
            .input("b", &[4, 3])
            .input("c", &[2, 4])
            .node_attrs(
                "Gemm",
                "fc",
                &["a", "b", "c"],
                &["y"],
                &[
                    attr_int("transA", 1),
                    attr_int("transB", 1),
                    attr_float("alpha", 0.5),
                    attr_float("beta", 2.0),
                ],
            )
            .output("y"),
    );
    check(
        "gemm_computed_b",
        Model::new(13)
            .input("a", &[2, 3])
            .input("b", &[3, 4])
            .node("Gemm", "fc", &["a", "b"], &["y"])
            .output("y"),
    );
    check(
        "matmul_vectors",
        Model::new(13)
            .input("v", &[3])
            .input("m", &[2, 3, 4])
            .input("u", &[4])
            .node("MatMul", "left", &["v", "m"], &["vm"])
            .node("MatMul", "right", &["m", "u"], &["mu"])
            .output("vm")
            .output("mu"),
    );
}

#[test]
fn elementwise() {
    check(
        "arithmetic_and_activations",
        Model::new(14)
            .input("a", &[2, 3])
            .input("b", &[3])
            .init(tensor_f32("two", &[], &[2.0]))
            .node("Add", "add", &["a", "b"], &["s"])
            .node("Sub", "sub", &["s", "b"], &["d"])
            .node("Mul", "mul", &["d", "two"], &["m"])
            .node("Div", "div", &["m", "two"], &["q"])
            .node("Sigmoid", "sigmoid", &["q"], &["g"])
            .node("Tanh", "tanh", &["g"], &["t"])
            .node_attrs("LeakyRelu", "leaky", &["t"], &["l"], &[attr_float("alpha", 0.2)])
            .output("l"),
    );
    // Max and Min with a one-value constant are clips (YOLO-style exports);
    // with a constant that varies, or two activations, they stay binary ops.
    check(
        "max_min_with_a_constant",
        Model::new(13)
            .input("x", &[2, 3])
            .input("y", &[2, 3])
            .init(tensor_f32("zero", &[1, 1], &[0.0]))
            .init(tensor_f32("six", &[], &[6.0]))
            .init(tensor_f32("row", &[3], &[1.0, 2.0, 3.0]))
            .node("Max", "floor", &["x", "zero"], &["a"])
            .node("Min", "ceiling", &["six", "a"], &["b"])
            .node("Max", "rows", &["b", "row"], &["c"])
            .node("Min", "pair", &["c", "y"], &["d"])
            .output("d"),
    );
    // PRelu with a slope of one value (PyTorch's nn.PReLU()) is a leaky relu;
    // a slope per channel stays fp.prelu.
    check(
        "prelu",
        Model::new(13)
            .input("x", &[1, 2, 3])
            .init(tensor_f32("one_slope", &[1], &[0.25]))
            .init(tensor_f32("splat", &[2, 1], &[0.5, 0.5]))
            .init(tensor_f32("per_channel", &[2, 1], &[0.5, 0.125]))
            .node("PRelu", "single", &["x", "one_slope"], &["a"])
            .node("PRelu", "splat", &["a", "splat"], &["b"])
            .node("PRelu", "channels", &["b", "per_channel"], &["c"])
            .output("c"),
    );
    check(
        "gelu",
        Model::new(20)
            .input("x", &[2, 3])
            .node("Gelu", "gelu", &["x"], &["g"])
            .node_attrs("Gelu", "gelu_tanh", &["g"], &["t"], &[attr_str("approximate", "tanh")])
            .output("t"),
    );
    check(
        "unary_math",
        Model::new(17)
            .input("x", &[2, 3])
            .node("Abs", "abs", &["x"], &["a"])
            .node("Exp", "exp", &["a"], &["e"])
            .node("Log", "log", &["e"], &["l"])
            .node("Sqrt", "sqrt", &["l"], &["s"])
            .node("Reciprocal", "recip", &["s"], &["r"])
            .node("Neg", "neg", &["r"], &["n"])
            .node("Softplus", "softplus", &["n"], &["p"])
            .node("HardSwish", "hswish", &["p"], &["h"])
            .node_attrs("HardSigmoid", "hsig", &["h"], &["g"], &[attr_float("alpha", 0.25)])
            .output("g"),
    );
    // Erf, as PyTorch exports GELU before opset 20: x · 0.5 · (1 + erf(x / √2)).
    check(
        "erf",
        Model::new(13)
            .input("x", &[2, 3])
            .init(tensor_f32("sqrt2", &[], &[std::f32::consts::SQRT_2]))
            .init(tensor_f32("one", &[], &[1.0]))
            .init(tensor_f32("half", &[], &[0.5]))
            .node("Div", "div", &["x", "sqrt2"], &["d"])
            .node("Erf", "erf", &["d"], &["e"])
            .node("Add", "add", &["e", "one"], &["a"])
            .node("Mul", "mul", &["x", "a"], &["m"])
            .node("Mul", "mul_half", &["m", "half"], &["y"])
            .output("y"),
    );
    check(
        "nary_and_binary",
        Model::new(17)
            .input("a", &[2, 3])
            .input("b", &[3])
            .input("c", &[1, 3])
            .init(tensor_f32("slope", &[1], &[0.25]))
            .init(tensor_f32("two", &[], &[2.0]))
            .node("Max", "max3", &["a", "b", "c"], &["m"])
            .node("Min", "min2", &["m", "b"], &["n"])
            .node("Sum", "sum1", &["n"], &["s"])
            .node("Mean", "mean2", &["s", "a"], &["e"])
            .node("Pow", "pow", &["e", "two"], &["p"])
            .node("PRelu", "prelu", &["p", "slope"], &["r"])
            .output("r"),
    );
    check(
        "reductions",
        Model::new(17)
            .input("x", &[2, 3, 4])
            .init(tensor_i64("last", &[1], &[-1]))
            .node_attrs("ReduceMean", "mean_attr", &["x"], &["m"], &[attr_ints("axes", &[1])])
            .node_attrs("ReduceSum", "sum_input", &["m", "last"], &["s"], &[attr_int("keepdims", 0)])
            .node("ReduceMax", "max_all", &["s"], &["a"])
            .node_attrs("ReduceMin", "min_noop", &["a"], &["n"], &[attr_int("noop_with_empty_axes", 1)])
            .output("n"),
    );
    check(
        "layer_norm",
        Model::new(17)
            .input("x", &[1, 4, 8])
            .init(tensor_f32("gamma", &[8], &[1.0; 8]))
            .init(tensor_f32("beta", &[8], &[0.5; 8]))
            .node_attrs(
                "LayerNormalization",
                "ln",
                &["x", "gamma", "beta"],
                &["y"],
                &[attr_float("epsilon", 1e-6)],
            )
            .output("y"),
    );
    check(
        "instance_norm",
        Model::new(17)
            .input("x", &[1, 2, 3, 3])
            .init(tensor_f32("s", &[2], &[1.0, 0.5]))
            .init(tensor_f32("b", &[2], &[0.0, 0.25]))
            .node("InstanceNormalization", "in", &["x", "s", "b"], &["y"])
            .output("y"),
    );
    check(
        "gather_embedding",
        Model::new(17)
            .input("x", &[1, 4])
            .init(tensor_f32("table", &[5, 3], &weights(15)))
            .init(tensor_i64("ids", &[1, 2], &[4, 0]))
            .node("Gather", "embed", &["table", "ids"], &["e"])
            .node_attrs("Gather", "cols", &["x", "ids"], &["c"], &[attr_int("axis", 1)])
            .output("e")
            .output("c"),
    );
    check(
        "depth_space_tile",
        Model::new(17)
            .input("x", &[1, 8, 2, 3])
            .init(tensor_i64("reps", &[4], &[1, 1, 2, 1]))
            .node_attrs(
                "DepthToSpace",
                "d2s",
                &["x"],
                &["d"],
                &[attr_int("blocksize", 2), attr_str("mode", "CRD")],
            )
            .node_attrs("SpaceToDepth", "s2d", &["d"], &["s"], &[attr_int("blocksize", 2)])
            .node("Tile", "tile", &["s", "reps"], &["t"])
            .output("t"),
    );
    // SpaceToDepth's mode (opset 28): CRD is kept, the DCR default left out.
    check(
        "space_to_depth_modes",
        Model::new(28)
            .input("x", &[1, 2, 4, 4])
            .node_attrs(
                "SpaceToDepth",
                "crd",
                &["x"],
                &["a"],
                &[attr_int("blocksize", 2), attr_str("mode", "CRD")],
            )
            .node_attrs(
                "SpaceToDepth",
                "dcr",
                &["x"],
                &["b"],
                &[attr_int("blocksize", 2), attr_str("mode", "DCR")],
            )
            .output("a")
            .output("b"),
    );
    // ONNX: min above max sets every value to max, which fp.clip does with min = max.
    check(
        "clip_min_above_max",
        Model::new(13)
            .input("x", &[4])
            .init(tensor_f32("lo", &[], &[2.0]))
            .init(tensor_f32("hi", &[], &[1.0]))
            .node("Clip", "clip", &["x", "lo", "hi"], &["y"])
            .output("y"),
    );
    check(
        "clip_forms",
        Model::new(13)
            .input("x", &[4])
            .init(tensor_f32("lo", &[], &[0.0]))
            .init(tensor_f32("hi", &[], &[6.0]))
            .node("Clip", "relu6", &["x", "lo", "hi"], &["a"])
            .node("Clip", "min_only", &["a", "lo"], &["b"])
            .node("Clip", "max_only", &["b", "", "hi"], &["c"])
            .node_attrs("Clip", "attr_form", &["c"], &["d"], &[attr_float("min", -1.0)])
            .output("d"),
    );
}

#[test]
fn norms_and_pools() {
    check(
        "batch_norm_and_softmax",
        Model::new(13)
            .input("x", &[1, 2, 3, 3])
            .init(tensor_f32("s", &[2], &[1.0, 2.0]))
            .init(tensor_f32("b", &[2], &[0.0, 1.0]))
            .init(tensor_f32("m", &[2], &[0.5, 0.5]))
            .init(tensor_f32("v", &[2], &[1.0, 4.0]))
            .node_attrs(
                "BatchNormalization",
                "bn",
                &["x", "s", "b", "m", "v"],
                &["n"],
                &[attr_float("epsilon", 1e-3)],
            )
            .node_attrs("Softmax", "softmax", &["n"], &["y"], &[attr_int("axis", 1)])
            .output("y"),
    );
    // Before opset 13, Softmax normalizes over every dimension from `axis` on.
    check(
        "softmax_opset11",
        Model::new(11)
            .input("x", &[2, 3, 4])
            .node("Softmax", "coerced", &["x"], &["a"])
            .node_attrs("Softmax", "last", &["a"], &["b"], &[attr_int("axis", -1)])
            .output("b"),
    );
    check(
        "pools",
        Model::new(17)
            .input("x", &[1, 2, 7, 7])
            .input("l", &[1, 2, 9])
            .node_attrs(
                "AveragePool",
                "avg",
                &["x"],
                &["a"],
                &[
                    attr_ints("kernel_shape", &[3, 3]),
                    attr_ints("strides", &[2, 2]),
                    attr_ints("pads", &[1, 1, 1, 1]),
                    attr_int("ceil_mode", 1),
                    attr_int("count_include_pad", 1),
                ],
            )
            .node_attrs(
                "MaxPool",
                "max_same",
                &["a"],
                &["m"],
                &[attr_ints("kernel_shape", &[2, 2]), attr_str("auto_pad", "SAME_UPPER")],
            )
            .node("GlobalAveragePool", "gap", &["m"], &["g"])
            .node_attrs(
                "MaxPool",
                "max1d",
                &["l"],
                &["p"],
                &[attr_ints("kernel_shape", &[2]), attr_ints("strides", &[2]), attr_ints("dilations", &[2])],
            )
            .output("g")
            .output("p"),
    );
}

#[test]
fn shape_ops() {
    check(
        "reshape_transpose_flatten_concat",
        Model::new(14)
            .input("x", &[2, 3, 4])
            .init(tensor_i64("shape", &[2], &[0, -1]))
            .node("Reshape", "reshape", &["x", "shape"], &["r"])
            .node_attrs("Transpose", "transpose", &["r"], &["t"], &[attr_ints("perm", &[1, 0])])
            .node("Transpose", "reverse", &["t"], &["u"])
            .node_attrs("Flatten", "flatten", &["x"], &["f"], &[attr_int("axis", 2)])
            .node_attrs("Concat", "concat", &["u", "u"], &["c"], &[attr_int("axis", -1)])
            .output("c")
            .output("f"),
    );
    check(
        "split_forms",
        Model::new(18)
            .input("x", &[2, 8])
            .init(tensor_i64("sizes", &[2], &[5, 3]))
            .node_attrs("Split", "by_input", &["x", "sizes"], &["a", "b"], &[attr_int("axis", 1)])
            .node_attrs(
                "Split",
                "by_count",
                &["x"],
                &["c", "d", "e"],
                &[attr_int("axis", 1), attr_int("num_outputs", 3)],
            )
            .node("Split", "even", &["x"], &["f", "g"])
            .output("a")
            .output("b")
            .output("e")
            .output("g"),
    );
    check(
        "split_opset11_attribute",
        Model::new(11)
            .input("x", &[6])
            .node_attrs("Split", "split", &["x"], &["a", "b"], &[attr_ints("split", &[2, 4])])
            .output("a")
            .output("b"),
    );
    check(
        "pad_and_slice",
        Model::new(18)
            .input("x", &[1, 3, 4, 4])
            .init(tensor_i64("pads", &[8], &[0, 0, 1, 2, 0, 0, 1, 2]))
            .init(tensor_f32("value", &[], &[0.5]))
            .init(tensor_i64("axes_pads", &[2], &[2, 3]))
            .init(tensor_i64("pads2", &[4], &[1, 1, 1, 1]))
            .init(tensor_i64("starts", &[2], &[1, -1]))
            .init(tensor_i64("ends", &[2], &[3, i64::MIN]))
            .init(tensor_i64("axes", &[2], &[1, 3]))
            .init(tensor_i64("steps", &[2], &[1, -2]))
            .node("Pad", "pad_const", &["x", "pads", "value"], &["p"])
            .node_attrs(
                "Pad",
                "pad_reflect",
                &["p", "pads2", "", "axes_pads"],
                &["q"],
                &[attr_str("mode", "reflect")],
            )
            .node_attrs("Pad", "pad_edge", &["q", "pads"], &["e"], &[attr_str("mode", "edge")])
            .node("Slice", "slice", &["e", "starts", "ends", "axes", "steps"], &["s"])
            .output("s"),
    );
    check(
        "squeeze_unsqueeze_identity",
        Model::new(13)
            .input("x", &[1, 3, 1, 2])
            .init(tensor_i64("axes", &[1], &[0]))
            .init(tensor_i64("new_axes", &[2], &[0, -1]))
            .node("Squeeze", "squeeze_all", &["x"], &["a"])
            .node("Squeeze", "squeeze_0", &["x", "axes"], &["b"])
            .node("Unsqueeze", "unsqueeze", &["a", "new_axes"], &["c"])
            .node("Identity", "identity", &["c"], &["d"])
            .output("d")
            .output("b"),
    );
    check(
        "squeeze_opset11_attribute",
        Model::new(11)
            .input("x", &[1, 3])
            .node_attrs("Squeeze", "squeeze", &["x"], &["a"], &[attr_ints("axes", &[0])])
            .node_attrs("Unsqueeze", "unsqueeze", &["a"], &["b"], &[attr_ints("axes", &[1])])
            .output("b"),
    );
}

#[test]
fn constants() {
    check(
        "constant_nodes",
        Model::new(13)
            .input("x", &[2, 3])
            .node_attrs("Constant", "scale", &[], &["s"], &[attr_floats("value_floats", &[1.0, 2.0, 3.0])])
            .node_attrs("Constant", "shape", &[], &["shape"], &[attr_ints("value_ints", &[3, 2])])
            .node_attrs("Constant", "one", &[], &["one"], &[attr_float("value_float", 1.0)])
            .node_attrs(
                "Constant",
                "bias",
                &[],
                &["b"],
                &[attr_tensor("value", &tensor_f32("", &[3], &[0.0, 0.5, 1.0]))],
            )
            .node("Identity", "shape_alias", &["shape"], &["shape2"])
            .node("Mul", "mul", &["x", "s"], &["m"])
            .node("Add", "add", &["m", "b"], &["a"])
            .node("Sub", "sub", &["a", "one"], &["d"])
            .node("Reshape", "reshape", &["d", "shape2"], &["y"])
            .output("y"),
    );
}

#[test]
fn quantize_dequantize() {
    check(
        "qdq_conv_per_channel",
        Model::new(13)
            .input("x", &[1, 2, 3, 3])
            .init(tensor_f32("x_scale", &[], &[0.5]))
            .init(tensor_raw("x_zp", UINT8, &[], &[128]))
            .init(tensor_i8("w_q", &[2, 2, 1, 1], &[1, -2, 3, -4]))
            .init(tensor_f32("w_scale", &[2], &[0.25, 0.125]))
            .init(tensor_i8("w_zp", &[2], &[0, 0]))
            .init(tensor_i32("b_q", &[2], &[100, -100]))
            .init(tensor_f32("b_scale", &[2], &[0.125, 0.0625]))
            .init(tensor_i32("b_zp", &[2], &[0, 0]))
            .init(tensor_f32("y_scale", &[], &[0.1]))
            .node("QuantizeLinear", "x_q", &["x", "x_scale", "x_zp"], &["xq"])
            .node("DequantizeLinear", "x_dq", &["xq", "x_scale", "x_zp"], &["xd"])
            .node_attrs(
                "DequantizeLinear",
                "w_dq",
                &["w_q", "w_scale", "w_zp"],
                &["w"],
                &[attr_int("axis", 0)],
            )
            .node_attrs(
                "DequantizeLinear",
                "b_dq",
                &["b_q", "b_scale", "b_zp"],
                &["b"],
                &[attr_int("axis", 0)],
            )
            .node("Conv", "conv", &["xd", "w", "b"], &["c"])
            .node("QuantizeLinear", "y_q", &["c", "y_scale"], &["yq"])
            .node("DequantizeLinear", "y_dq", &["yq", "y_scale"], &["y"])
            .output("y"),
    );
}

#[test]
fn shape_subgraphs_fold_at_import() {
    // PyTorch's flatten with a dynamic batch: Shape → Gather → Unsqueeze →
    // Concat → Reshape; with --batch 2 the whole chain is constant.
    let flatten = Model::new(13)
        .input_dims("x", FLOAT, &[D::P("N"), D::V(3), D::V(2), D::V(2)])
        .init(tensor_i64("zero", &[], &[0]))
        .init(tensor_i64("axes", &[1], &[0]))
        .init(tensor_i64("rest", &[1], &[-1]))
        .node("Shape", "shape", &["x"], &["s"])
        .node("Gather", "batch", &["s", "zero"], &["n"])
        .node("Unsqueeze", "unsq", &["n", "axes"], &["n1"])
        .node_attrs("Concat", "cat", &["n1", "rest"], &["target"], &[attr_int("axis", 0)])
        .node("Reshape", "flat", &["x", "target"], &["y"])
        .output("y");
    let text = import_text(&flatten.bytes(), Some(2)).unwrap();
    insta::assert_snapshot!("shape_chain_flatten", text);

    // Paddle's -1 filling: ConstantOfShape, Equal, Where, Range, Cast, Mul
    // on shape vectors, then Expand of the data.
    let fill = Model::new(13)
        .input("x", &[1, 3, 1])
        .init(tensor_i64("two", &[1], &[2]))
        .init(tensor_i64("target", &[3], &[2, -1, 4]))
        .init(tensor_i64("minus1", &[], &[-1]))
        .init(tensor_i64("r0", &[], &[0]))
        .init(tensor_i64("r1", &[], &[3]))
        .init(tensor_i64("r2", &[], &[1]))
        .node("ConstantOfShape", "ones_shape", &["two"], &["zeros"])
        .node("Equal", "is_neg", &["target", "minus1"], &["mask"])
        .node("Shape", "xs", &["x"], &["x_shape"])
        .node("Where", "fix", &["mask", "x_shape", "target"], &["fixed"])
        .node("Range", "range", &["r0", "r1", "r2"], &["idx"])
        .node_attrs("Cast", "to_float", &["idx"], &["idx_f"], &[attr_int("to", i64::from(FLOAT))])
        .node("Expand", "expand", &["x", "fixed"], &["y"])
        .output("y")
        .output("zeros")
        .output("idx_f");
    let text = import_text(&fill.bytes(), None).unwrap();
    insta::assert_snapshot!("shape_where_expand_range", text);

    // A shape-only op on computed data is an error naming the input.
    let computed = Model::new(13)
        .input("x", &[2])
        .init(tensor_f32("zero", &[], &[0.0]))
        .node("Equal", "eq", &["x", "zero"], &["y"])
        .output("y");
    let err = import_text(&computed.bytes(), None).unwrap_err();
    assert!(
        err.contains("node 'eq' (Equal): input 'x' is computed from the model's inputs, and qimport evaluates Equal only on constants"),
        "{err}"
    );
}

#[test]
fn resize() {
    // Opset 11: the roi and scales inputs are required, empty when unused.
    check(
        "resize_opset11",
        Model::new(11)
            .input("x", &[1, 2, 3, 4])
            .init(tensor_f32("roi", &[0], &[]))
            .init(tensor_f32("scales", &[4], &[1.0, 1.0, 2.0, 2.5]))
            .init(tensor_f32("none", &[0], &[]))
            .init(tensor_i64("sizes", &[4], &[1, 2, 5, 7]))
            .node("Resize", "nearest", &["x", "roi", "scales"], &["a"])
            .node_attrs(
                "Resize",
                "bilinear",
                &["x", "roi", "none", "sizes"],
                &["b"],
                &[attr_str("mode", "linear"), attr_str("coordinate_transformation_mode", "align_corners")],
            )
            .output("a")
            .output("b"),
    );
    // Opset 13: omitted inputs; cubic options; the nearest roundings.
    check(
        "resize_opset13",
        Model::new(13)
            .input("x", &[1, 2, 3, 4])
            .init(tensor_f32("scales", &[4], &[1.0, 1.0, 0.5, 1.5]))
            .init(tensor_i64("sizes", &[4], &[1, 2, 6, 3]))
            .node_attrs(
                "Resize",
                "cubic",
                &["x", "", "scales"],
                &["a"],
                &[
                    attr_str("mode", "cubic"),
                    attr_float("cubic_coeff_a", -0.5),
                    attr_int("exclude_outside", 1),
                ],
            )
            .node_attrs(
                "Resize",
                "floor",
                &["x", "", "", "sizes"],
                &["b"],
                &[
                    attr_str("nearest_mode", "floor"),
                    attr_str("coordinate_transformation_mode", "asymmetric"),
                ],
            )
            .node_attrs(
                "Resize",
                "tf",
                &["x", "", "scales"],
                &["c"],
                &[attr_str("coordinate_transformation_mode", "tf_half_pixel_for_nn")],
            )
            .output("a")
            .output("b")
            .output("c"),
    );
    // Opsets 18 and 19: axes, keep_aspect_ratio_policy, antialias, half_pixel_symmetric.
    check(
        "resize_opset19",
        Model::new(19)
            .input("x", &[1, 2, 3, 4])
            .init(tensor_f32("scales", &[2], &[1.5, 2.0]))
            .init(tensor_i64("sizes", &[2], &[7, 7]))
            .node_attrs(
                "Resize",
                "axes",
                &["x", "", "scales"],
                &["a"],
                &[attr_ints("axes", &[-1, 2]), attr_str("mode", "linear"), attr_int("antialias", 1)],
            )
            .node_attrs(
                "Resize",
                "aspect",
                &["x", "", "", "sizes"],
                &["b"],
                &[attr_ints("axes", &[2, 3]), attr_str("keep_aspect_ratio_policy", "not_larger")],
            )
            .node_attrs(
                "Resize",
                "symmetric",
                &["x", "", "scales"],
                &["c"],
                &[
                    attr_ints("axes", &[2, 3]),
                    attr_str("mode", "linear"),
                    attr_str("coordinate_transformation_mode", "half_pixel_symmetric"),
                ],
            )
            .output("a")
            .output("b")
            .output("c"),
    );
}
