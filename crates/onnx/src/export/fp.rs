//! Float ops: each `fp` op becomes the ONNX op (or the few ops) the importer
//! makes it from, so that importing the file gives the op back with the
//! same attributes. One exporter per op in [`EXPORTS`].
//!
//! An exporter gets the tensor names of the op's operands and of its
//! results; [`export`] chooses them. For float operands they are the values
//! themselves. On quantized tensors (the quant-agnostic ops), ops that move
//! values the same way in ONNX on integers of 8 or 16 bits ([`MOVES_STORED`];
//! max pooling on 8-bit ones only, the integers ONNX's `MaxPool` takes) run
//! on the stored integers; the others (`Relu`, `Pad`, 4-bit storage) run on
//! the dequantized values and are quantized back to the result's type, which
//! is exact: their results lie on the operand's grid, and quantizing a
//! dequantized value of at most 16 bits gives it back
//! (`docs/quant-semantics.md` §10).

use super::graph::AttrValue;
use super::types::{encode_float, is_f32};
use super::OpCx;
use crate::onnx::data_type as dt;
use qopt_dialect_fp::attrs::{self, ConvAttrs, ConvTransposeAttrs, PoolAttrs};
use qopt_dialect_fp::op_names as fp_op;

/// Writes one op: `inputs` name the operands, `outputs` the results.
type ExportFn = fn(&mut OpCx<'_, '_>, &[String], &[String]) -> Result<(), String>;

/// Every exported fp op (but `fp.constant`, which becomes an initializer where it is used).
const EXPORTS: &[(&str, ExportFn)] = &[
    (fp_op::ABS, |cx, i, o| unary(cx, "Abs", i, o)),
    (fp_op::ADD, |cx, i, o| binary(cx, "Add", i, o)),
    (fp_op::AVG_POOL2D, avg_pool),
    (fp_op::BATCH_MATMUL, |cx, i, o| binary(cx, "MatMul", i, o)),
    (fp_op::BATCH_NORM, batch_norm),
    (fp_op::BIAS_ADD, bias_add),
    (fp_op::CLIP, clip),
    (fp_op::CONCAT, concat),
    (fp_op::CONV1D, |cx, i, o| conv(cx, 1, i, o)),
    (fp_op::CONV2D, |cx, i, o| conv(cx, 2, i, o)),
    (fp_op::CONV_TRANSPOSE1D, |cx, i, o| conv_transpose(cx, 1, i, o)),
    (fp_op::CONV_TRANSPOSE2D, |cx, i, o| conv_transpose(cx, 2, i, o)),
    (fp_op::DENSE, dense),
    (fp_op::DEPTH_TO_SPACE, |cx, i, o| depth_space(cx, "DepthToSpace", i, o)),
    (fp_op::DIV, |cx, i, o| binary(cx, "Div", i, o)),
    (fp_op::ERF, |cx, i, o| unary(cx, "Erf", i, o)),
    (fp_op::EXP, |cx, i, o| unary(cx, "Exp", i, o)),
    (fp_op::FLATTEN, flatten),
    (fp_op::GATHER, gather),
    (fp_op::GELU, gelu),
    (fp_op::GLOBAL_AVG_POOL2D, |cx, i, o| unary(cx, "GlobalAveragePool", i, o)),
    (fp_op::HARD_SIGMOID, hard_sigmoid),
    (fp_op::LEAKY_RELU, leaky_relu),
    (fp_op::HARD_SWISH, |cx, i, o| unary(cx, "HardSwish", i, o)),
    (fp_op::INSTANCE_NORM, instance_norm),
    (fp_op::LAYER_NORM, layer_norm),
    (fp_op::LOG, |cx, i, o| unary(cx, "Log", i, o)),
    (fp_op::MATMUL, |cx, i, o| binary(cx, "MatMul", i, o)),
    (fp_op::MAX, |cx, i, o| binary(cx, "Max", i, o)),
    (fp_op::MAX_POOL1D, |cx, i, o| max_pool(cx, 1, i, o)),
    (fp_op::MAX_POOL2D, |cx, i, o| max_pool(cx, 2, i, o)),
    (fp_op::MIN, |cx, i, o| binary(cx, "Min", i, o)),
    (fp_op::MUL, |cx, i, o| binary(cx, "Mul", i, o)),
    (fp_op::NEG, |cx, i, o| unary(cx, "Neg", i, o)),
    (fp_op::PAD, pad),
    (fp_op::POW, |cx, i, o| binary(cx, "Pow", i, o)),
    (fp_op::PRELU, |cx, i, o| binary(cx, "PRelu", i, o)),
    (fp_op::RECIPROCAL, |cx, i, o| unary(cx, "Reciprocal", i, o)),
    (fp_op::REDUCE_MAX, |cx, i, o| reduce(cx, "ReduceMax", 18, i, o)),
    (fp_op::REDUCE_MEAN, |cx, i, o| reduce(cx, "ReduceMean", 18, i, o)),
    (fp_op::REDUCE_MIN, |cx, i, o| reduce(cx, "ReduceMin", 18, i, o)),
    (fp_op::REDUCE_SUM, |cx, i, o| reduce(cx, "ReduceSum", 13, i, o)),
    (fp_op::RELU, |cx, i, o| unary(cx, "Relu", i, o)),
    (fp_op::RESHAPE, reshape),
    (fp_op::RESIZE, resize),
    (fp_op::SIGMOID, |cx, i, o| unary(cx, "Sigmoid", i, o)),
    (fp_op::SOFTMAX, softmax),
    (fp_op::SOFTPLUS, |cx, i, o| unary(cx, "Softplus", i, o)),
    (fp_op::SPACE_TO_DEPTH, |cx, i, o| depth_space(cx, "SpaceToDepth", i, o)),
    (fp_op::SPLIT, split),
    (fp_op::SQRT, |cx, i, o| unary(cx, "Sqrt", i, o)),
    (fp_op::STRIDED_SLICE, strided_slice),
    (fp_op::SUB, |cx, i, o| binary(cx, "Sub", i, o)),
    (fp_op::TANH, |cx, i, o| unary(cx, "Tanh", i, o)),
    (fp_op::TILE, tile),
    (fp_op::TRANSPOSE, transpose),
];

/// The quant-agnostic ops whose ONNX op moves stored integers of 8 and 16
/// bits exactly as the op moves values (resize only in nearest mode, which
/// is the only mode that is quant-agnostic).
const MOVES_STORED: &[&str] = &[
    fp_op::CONCAT,
    fp_op::DEPTH_TO_SPACE,
    fp_op::FLATTEN,
    fp_op::GATHER,
    fp_op::RESHAPE,
    fp_op::RESIZE,
    fp_op::SPACE_TO_DEPTH,
    fp_op::SPLIT,
    fp_op::STRIDED_SLICE,
    fp_op::TILE,
    fp_op::TRANSPOSE,
];

/// True if `name` is an fp op the exporter writes.
pub(super) fn is_exported(name: &str) -> bool {
    EXPORTS.iter().any(|(n, _)| *n == name)
}

/// Writes fp op `name`: on float values, or on quantized ones as the module doc says.
pub(super) fn export(cx: &mut OpCx<'_, '_>, name: &str) -> Result<(), String> {
    let write = EXPORTS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f).ok_or("no export")?;
    let operands = cx.operands();
    let results = cx.results();
    let quantized = results.iter().find_map(|&r| cx.quant(r));
    let Some(q) = quantized else {
        let mut inputs = Vec::with_capacity(operands.len());
        for &v in &operands {
            inputs.push(cx.float(v)?);
        }
        let outputs: Vec<String> = results.iter().map(|_| cx.fresh_value("")).collect();
        write(cx, &inputs, &outputs)?;
        for (&r, name) in results.iter().zip(outputs) {
            cx.bind(r, name);
        }
        return Ok(());
    };
    let width = q.storage.width;
    let on_stored = (MOVES_STORED.contains(&name) && matches!(width, 8 | 16))
        || ([fp_op::MAX_POOL1D, fp_op::MAX_POOL2D].contains(&name) && width == 8);
    let mut inputs = Vec::with_capacity(operands.len());
    for &v in &operands {
        inputs.push(if on_stored { cx.stored(v)? } else { cx.float(v)? });
    }
    if on_stored {
        let outputs: Vec<String> = results.iter().map(|_| cx.fresh_value("")).collect();
        write(cx, &inputs, &outputs)?;
        for (&r, name) in results.iter().zip(outputs) {
            cx.bind(r, name);
        }
        return Ok(());
    }
    let floats: Vec<String> = results.iter().map(|_| cx.fresh_value("float")).collect();
    write(cx, &inputs, &floats)?;
    for (&r, float) in results.iter().zip(floats) {
        let output = cx.fresh_value("");
        cx.quantize_into(float.clone(), r, output.clone())?;
        cx.bind(r, output);
    }
    Ok(())
}

fn unary(cx: &mut OpCx<'_, '_>, op_type: &'static str, i: &[String], o: &[String]) -> Result<(), String> {
    cx.node(op_type, vec![i[0].clone()], o.to_vec(), Vec::new());
    Ok(())
}

fn binary(cx: &mut OpCx<'_, '_>, op_type: &'static str, i: &[String], o: &[String]) -> Result<(), String> {
    cx.node(op_type, i.to_vec(), o.to_vec(), Vec::new());
    Ok(())
}

/// Float attribute `name` of the op (`default` when it leaves it out) as
/// the f32 ONNX attributes are, which it must be exactly.
fn f32_attr(cx: &OpCx<'_, '_>, name: &str, default: f64) -> Result<AttrValue, String> {
    let value = attrs::float_in(cx.ctx(), cx.attrs(), name, default)?;
    if is_f32(value) {
        return Ok(AttrValue::Float(value as f32));
    }
    Err(if cx.ctx().dict_get(cx.attrs(), name).is_none() {
        format!(
            "attribute '{name}' is left out, and its default {value} is not an f32 value, as ONNX attributes \
             are; write it as {name} = {} : f32 to export the op",
            value as f32
        )
    } else {
        format!("attribute '{name}' = {value} is not an f32 value, as ONNX attributes are")
    })
}

/// The ONNX float type of result 0, for scalar initializers beside it.
fn result_float_type(cx: &OpCx<'_, '_>) -> Result<i32, String> {
    let r = cx.result();
    match cx.quant(r) {
        Some(_) => Ok(dt::FLOAT),
        None => cx.data_type(r),
    }
}

fn conv(cx: &mut OpCx<'_, '_>, n: usize, i: &[String], o: &[String]) -> Result<(), String> {
    let attributes = conv_attributes(cx, n)?;
    cx.node("Conv", i.to_vec(), o.to_vec(), attributes);
    Ok(())
}

/// The ONNX attributes of the op's `n`-d convolution window (`Conv`,
/// `QLinearConv`), its kernel size from the weight (operand 1).
pub(super) fn conv_attributes(cx: &OpCx<'_, '_>, n: usize) -> Result<Vec<(&'static str, AttrValue)>, String> {
    let a = ConvAttrs::read_in(cx.ctx(), cx.attrs(), n)?;
    let kernel = cx.shape(cx.operand(1)?)?[2..].to_vec();
    Ok(vec![
        ("dilations", AttrValue::Ints(a.dilation.to_vec())),
        ("group", AttrValue::Int(a.groups)),
        ("kernel_shape", AttrValue::Ints(kernel)),
        ("pads", AttrValue::Ints(a.pad.to_vec())),
        ("strides", AttrValue::Ints(a.stride.to_vec())),
    ])
}

fn conv_transpose(cx: &mut OpCx<'_, '_>, n: usize, i: &[String], o: &[String]) -> Result<(), String> {
    let attributes = conv_transpose_attributes(cx, n)?;
    cx.node("ConvTranspose", i.to_vec(), o.to_vec(), attributes);
    Ok(())
}

/// The ONNX attributes of the op's `n`-d transposed convolution
/// (`ConvTranspose`), its kernel size from the weight (operand 1).
pub(super) fn conv_transpose_attributes(
    cx: &OpCx<'_, '_>,
    n: usize,
) -> Result<Vec<(&'static str, AttrValue)>, String> {
    let a = ConvTransposeAttrs::read_in(cx.ctx(), cx.attrs(), n)?;
    let kernel = cx.shape(cx.operand(1)?)?[2..].to_vec();
    let w = &a.window;
    Ok(vec![
        ("dilations", AttrValue::Ints(w.dilation.to_vec())),
        ("group", AttrValue::Int(w.groups)),
        ("kernel_shape", AttrValue::Ints(kernel)),
        ("output_padding", AttrValue::Ints(a.output_padding.to_vec())),
        ("pads", AttrValue::Ints(w.pad.to_vec())),
        ("strides", AttrValue::Ints(w.stride.to_vec())),
    ])
}

/// `fp.dense(x, w, b)` is `Gemm(x, w, b) {transB = 1}` on a matrix `x`;
/// another rank is reshaped to a matrix and back around it (a dense layer
/// works row by row, so the values are the same).
fn dense(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let x_shape = cx.shape(cx.operand(0)?)?;
    let y_shape = cx.shape(cx.result())?;
    gemm_reshaped(
        cx,
        &x_shape,
        &y_shape,
        |cx, x, y| {
            let mut inputs = vec![x];
            inputs.extend(i[1..].iter().cloned());
            cx.node("Gemm", inputs, vec![y], vec![("transB", AttrValue::Int(1))]);
            Ok(())
        },
        &i[0],
        &o[0],
    )
}

/// Runs `gemm` on `x` (shape `x_shape`) into `y` (shape `y_shape`), through
/// reshapes to and from a matrix when `x` is not one.
pub(super) fn gemm_reshaped(
    cx: &mut OpCx<'_, '_>,
    x_shape: &[i64],
    y_shape: &[i64],
    gemm: impl FnOnce(&mut OpCx<'_, '_>, String, String) -> Result<(), String>,
    x: &str,
    y: &str,
) -> Result<(), String> {
    if x_shape.len() == 2 {
        return gemm(cx, x.to_string(), y.to_string());
    }
    let k = *x_shape.last().ok_or("a dense input of rank 0")?;
    let rows: i64 = x_shape[..x_shape.len() - 1].iter().product();
    let to_matrix = cx.ints("matrix_shape", &[rows, k]);
    let x2 = cx.fresh_value("matrix");
    cx.node("Reshape", vec![x.to_string(), to_matrix], vec![x2.clone()], Vec::new());
    let y2 = cx.fresh_value("matrix_out");
    gemm(cx, x2, y2.clone())?;
    let back = cx.ints("shape", y_shape);
    cx.node("Reshape", vec![y2, back], vec![y.to_string()], Vec::new());
    Ok(())
}

fn batch_norm(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let epsilon = f32_attr(cx, "epsilon", qopt_dialect_fp::BATCH_NORM_EPSILON)?;
    cx.node("BatchNormalization", i.to_vec(), o.to_vec(), vec![("epsilon", epsilon)]);
    Ok(())
}

/// `fp.bias_add(x, b) {axis}`: `Add(x, Reshape(b, [C, 1, …]))`, the vector
/// broadcast along `axis`.
fn bias_add(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let rank = cx.shape(cx.operand(0)?)?.len();
    let axis = attrs::int_in(cx.ctx(), cx.attrs(), "axis", 1)?;
    let axis = qopt_dialect_fp::shape::normalize_axis(axis, rank)?;
    let channels = cx.shape(cx.operand(1)?)?;
    let mut target = channels;
    target.extend(std::iter::repeat_n(1, rank - 1 - axis));
    let shape = cx.ints("bias_shape", &target);
    let b = cx.fresh_value("bias");
    cx.node("Reshape", vec![i[1].clone(), shape], vec![b.clone()], Vec::new());
    cx.node("Add", vec![i[0].clone(), b], o.to_vec(), Vec::new());
    Ok(())
}

fn clip(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let data_type = result_float_type(cx)?;
    let mut inputs = vec![i[0].clone()];
    for bound in ["min", "max"] {
        match attrs::opt_float_in(cx.ctx(), cx.attrs(), bound)? {
            Some(v) => {
                let raw = encode_float(v, data_type)?;
                inputs.push(cx.initializer(bound, Vec::new(), data_type, raw));
            }
            None => inputs.push(String::new()),
        }
    }
    while inputs.last().is_some_and(String::is_empty) {
        inputs.pop();
    }
    cx.node("Clip", inputs, o.to_vec(), Vec::new());
    Ok(())
}

fn concat(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let axis = attrs::opt_int_in(cx.ctx(), cx.attrs(), "axis")?.ok_or("fp.concat has no 'axis'")?;
    cx.node("Concat", i.to_vec(), o.to_vec(), vec![("axis", AttrValue::Int(axis))]);
    Ok(())
}

fn depth_space(
    cx: &mut OpCx<'_, '_>,
    op_type: &'static str,
    i: &[String],
    o: &[String],
) -> Result<(), String> {
    let blocksize = attrs::opt_int_in(cx.ctx(), cx.attrs(), "blocksize")?.ok_or("no 'blocksize'")?;
    let mode = attrs::string_in(cx.ctx(), cx.attrs(), "mode", "DCR")?.to_string();
    let mut attributes = vec![("blocksize", AttrValue::Int(blocksize))];
    // SpaceToDepth has a mode only from opset 28; DCR is what it did before.
    if op_type == "DepthToSpace" || mode != "DCR" {
        attributes.push(("mode", AttrValue::String(mode)));
    }
    cx.node(op_type, vec![i[0].clone()], o.to_vec(), attributes);
    Ok(())
}

fn flatten(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let axis = attrs::int_in(cx.ctx(), cx.attrs(), "axis", 1)?;
    cx.node("Flatten", vec![i[0].clone()], o.to_vec(), vec![("axis", AttrValue::Int(axis))]);
    Ok(())
}

fn gather(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let axis = attrs::int_in(cx.ctx(), cx.attrs(), "axis", 0)?;
    cx.node("Gather", i.to_vec(), o.to_vec(), vec![("axis", AttrValue::Int(axis))]);
    Ok(())
}

fn gelu(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let approximate = attrs::string_in(cx.ctx(), cx.attrs(), "approximate", "none")?.to_string();
    cx.node("Gelu", vec![i[0].clone()], o.to_vec(), vec![("approximate", AttrValue::String(approximate))]);
    Ok(())
}

fn hard_sigmoid(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let attributes = vec![("alpha", f32_attr(cx, "alpha", 0.2)?), ("beta", f32_attr(cx, "beta", 0.5)?)];
    cx.node("HardSigmoid", vec![i[0].clone()], o.to_vec(), attributes);
    Ok(())
}

fn leaky_relu(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let attributes = vec![("alpha", f32_attr(cx, "alpha", 0.01)?)];
    cx.node("LeakyRelu", vec![i[0].clone()], o.to_vec(), attributes);
    Ok(())
}

fn instance_norm(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let epsilon = f32_attr(cx, "epsilon", qopt_dialect_fp::BATCH_NORM_EPSILON)?;
    cx.node("InstanceNormalization", i.to_vec(), o.to_vec(), vec![("epsilon", epsilon)]);
    Ok(())
}

fn layer_norm(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let axis = attrs::int_in(cx.ctx(), cx.attrs(), "axis", -1)?;
    let attributes = vec![
        ("axis", AttrValue::Int(axis)),
        ("epsilon", f32_attr(cx, "epsilon", qopt_dialect_fp::BATCH_NORM_EPSILON)?),
    ];
    cx.node("LayerNormalization", i.to_vec(), o.to_vec(), attributes);
    Ok(())
}

fn max_pool(cx: &mut OpCx<'_, '_>, n: usize, i: &[String], o: &[String]) -> Result<(), String> {
    let a = PoolAttrs::read_in(cx.ctx(), cx.attrs(), n, true)?;
    let attributes = vec![
        ("ceil_mode", AttrValue::Int(i64::from(a.ceil_mode))),
        ("dilations", AttrValue::Ints(a.dilation.to_vec())),
        ("kernel_shape", AttrValue::Ints(a.kernel.to_vec())),
        ("pads", AttrValue::Ints(a.pad.to_vec())),
        ("strides", AttrValue::Ints(a.stride.to_vec())),
    ];
    cx.node("MaxPool", vec![i[0].clone()], o.to_vec(), attributes);
    Ok(())
}

/// The attributes of `AveragePool` (and of `QLinearAveragePool`) for an
/// average pool whose attributes are `attrs`.
pub(super) fn avg_pool_attributes(cx: &OpCx<'_, '_>) -> Result<Vec<(&'static str, AttrValue)>, String> {
    let a = PoolAttrs::read_in(cx.ctx(), cx.attrs(), 2, false)?;
    Ok(vec![
        ("ceil_mode", AttrValue::Int(i64::from(a.ceil_mode))),
        ("count_include_pad", AttrValue::Int(i64::from(a.count_include_pad))),
        ("kernel_shape", AttrValue::Ints(a.kernel.to_vec())),
        ("pads", AttrValue::Ints(a.pad.to_vec())),
        ("strides", AttrValue::Ints(a.stride.to_vec())),
    ])
}

fn avg_pool(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let attributes = avg_pool_attributes(cx)?;
    cx.node("AveragePool", vec![i[0].clone()], o.to_vec(), attributes);
    Ok(())
}

/// `fp.pad`: `Pad(x, pads, value)` with the mode; on a quantized tensor the
/// value is real 0 of the dequantized input (the zero point once quantized).
fn pad(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let pads = attrs::opt_int_array_in(cx.ctx(), cx.attrs(), "pads", None)?.ok_or("fp.pad has no 'pads'")?;
    let mode = attrs::string_in(cx.ctx(), cx.attrs(), "mode", "constant")?.to_string();
    let value = attrs::float_in(cx.ctx(), cx.attrs(), "value", 0.0)?;
    let pads = cx.ints("pads", &pads);
    let mut inputs = vec![i[0].clone(), pads];
    if mode == "constant" && value != 0.0 {
        let data_type = result_float_type(cx)?;
        inputs.push(cx.float_scalar("value", value, data_type)?);
    }
    cx.node("Pad", inputs, o.to_vec(), vec![("mode", AttrValue::String(mode))]);
    Ok(())
}

/// `fp.reduce_*`: the axes are an input from opset `axes_input_since` on,
/// an attribute before; none reduce every axis.
fn reduce(
    cx: &mut OpCx<'_, '_>,
    op_type: &'static str,
    axes_input_since: i64,
    i: &[String],
    o: &[String],
) -> Result<(), String> {
    let axes = attrs::opt_int_array_in(cx.ctx(), cx.attrs(), "axes", None)?.unwrap_or_default();
    let keepdims = attrs::boolean_in(cx.ctx(), cx.attrs(), "keepdims", true)?;
    let mut inputs = vec![i[0].clone()];
    let mut attributes = vec![("keepdims", AttrValue::Int(i64::from(keepdims)))];
    if !axes.is_empty() {
        if cx.opset() >= axes_input_since {
            inputs.push(cx.ints("axes", &axes));
        } else {
            attributes.push(("axes", AttrValue::Ints(axes.to_vec())));
        }
    }
    cx.node(op_type, inputs, o.to_vec(), attributes);
    Ok(())
}

fn reshape(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let shape =
        attrs::opt_int_array_in(cx.ctx(), cx.attrs(), "shape", None)?.ok_or("fp.reshape has no 'shape'")?;
    let shape = cx.ints("shape", &shape);
    cx.node("Reshape", vec![i[0].clone(), shape], o.to_vec(), Vec::new());
    Ok(())
}

/// `fp.resize`: ONNX scales when they are f32 values that give the op's
/// sizes (the importer computes `floor(in · scale)`), else ONNX sizes when
/// the op's scales are `out / in` (what the importer computes from them).
fn resize(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let (ctx, attrs) = (cx.ctx(), cx.attrs());
    let input = cx.shape(cx.operand(0)?)?;
    let output = cx.shape(cx.result())?;
    let rank = input.len();
    let scales =
        attrs::opt_float_array_in(ctx, attrs, "scales", Some(rank))?.ok_or("fp.resize has no 'scales'")?;
    let by_scales = scales.iter().zip(&input).zip(&output).all(|((&s, &d), &out)| {
        is_f32(s) && qopt_dialect_fp::resize_scaled_size(d, f64::from(s as f32)).is_ok_and(|size| size == out)
    });
    let by_sizes =
        scales.iter().zip(&input).zip(&output).all(|((&s, &d), &out)| d > 0 && s == out as f64 / d as f64);
    let mut inputs = vec![i[0].clone(), String::new()];
    if by_scales {
        let raw: Vec<u8> = scales.iter().flat_map(|&s| (s as f32).to_le_bytes()).collect();
        inputs.push(cx.initializer("scales", vec![rank as i64], dt::FLOAT, raw));
    } else if by_sizes {
        inputs.push(String::new());
        inputs.push(cx.ints("sizes", &output));
    } else {
        return Err(format!(
            "its scales {scales:?} are neither f32 values giving the output size {output:?} nor output / input"
        ));
    }
    let mut attributes = Vec::new();
    for (name, default) in [
        ("mode", "nearest"),
        ("coordinate_transformation_mode", "half_pixel"),
        ("nearest_mode", "round_prefer_floor"),
    ] {
        let value = attrs::string_in(ctx, attrs, name, default)?;
        if value != default {
            attributes.push((name, AttrValue::String(value.to_string())));
        }
    }
    if attrs::opt_float_in(ctx, attrs, "cubic_coeff_a")?.is_some() {
        attributes.push(("cubic_coeff_a", f32_attr(cx, "cubic_coeff_a", -0.75)?));
    }
    for flag in ["exclude_outside", "antialias"] {
        if attrs::boolean_in(ctx, attrs, flag, false)? {
            attributes.push((flag, AttrValue::Int(1)));
        }
    }
    cx.node("Resize", inputs, o.to_vec(), attributes);
    Ok(())
}

fn softmax(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let axis = attrs::int_in(cx.ctx(), cx.attrs(), "axis", -1)?;
    cx.node("Softmax", vec![i[0].clone()], o.to_vec(), vec![("axis", AttrValue::Int(axis))]);
    Ok(())
}

fn split(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let axis = attrs::int_in(cx.ctx(), cx.attrs(), "axis", 0)?;
    let sizes =
        attrs::opt_int_array_in(cx.ctx(), cx.attrs(), "sizes", None)?.ok_or("fp.split has no 'sizes'")?;
    let sizes = cx.ints("split", &sizes);
    cx.node("Split", vec![i[0].clone(), sizes], o.to_vec(), vec![("axis", AttrValue::Int(axis))]);
    Ok(())
}

fn strided_slice(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let (ctx, attrs) = (cx.ctx(), cx.attrs());
    let begin = attrs::opt_int_array_in(ctx, attrs, "begin", None)?.ok_or("no 'begin'")?;
    let end = attrs::opt_int_array_in(ctx, attrs, "end", None)?.ok_or("no 'end'")?;
    let axes = attrs::opt_int_array_in(ctx, attrs, "axes", None)?;
    let strides = attrs::opt_int_array_in(ctx, attrs, "strides", None)?;
    let mut inputs = vec![i[0].clone(), cx.ints("starts", &begin), cx.ints("ends", &end)];
    match (axes, strides) {
        (axes, Some(strides)) => {
            let axes = axes.map(|a| a.to_vec()).unwrap_or_else(|| (0..begin.len() as i64).collect());
            inputs.push(cx.ints("axes", &axes));
            inputs.push(cx.ints("steps", &strides));
        }
        (Some(axes), None) => inputs.push(cx.ints("axes", &axes)),
        (None, None) => {}
    }
    cx.node("Slice", inputs, o.to_vec(), Vec::new());
    Ok(())
}

fn tile(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let repeats = attrs::opt_int_array_in(cx.ctx(), cx.attrs(), "repeats", None)?.ok_or("no 'repeats'")?;
    let repeats = cx.ints("repeats", &repeats);
    cx.node("Tile", vec![i[0].clone(), repeats], o.to_vec(), Vec::new());
    Ok(())
}

fn transpose(cx: &mut OpCx<'_, '_>, i: &[String], o: &[String]) -> Result<(), String> {
    let rank = cx.shape(cx.operand(0)?)?.len() as i64;
    let perm = attrs::opt_int_array_in(cx.ctx(), cx.attrs(), "perm", None)?
        .map(|p| p.to_vec())
        .unwrap_or_else(|| (0..rank).rev().collect());
    cx.node("Transpose", vec![i[0].clone()], o.to_vec(), vec![("perm", AttrValue::Ints(perm))]);
    Ok(())
}
