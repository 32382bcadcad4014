//! Elementwise ops: `Add`, `Sub`, `Mul`, `Div` → the fp ops of the same name
//! (numpy broadcasting, as ONNX); `Relu`, `Sigmoid`, `Tanh` → `fp.relu`,
//! `fp.sigmoid`, `fp.tanh`; `Clip` → `fp.clip` with constant bounds (inputs
//! from opset 11, attributes before); `LeakyRelu` → `fp.leaky_relu`, one
//! activation that quantizes to an exact lookup table, and so does `PRelu`
//! with a constant slope of one value (PyTorch's `nn.PReLU()`; any other
//! slope → `fp.prelu`); `Max(x, c)` and `Min(x, c)` with a one-value
//! constant `c` → `fp.clip` with that bound.

use super::AttrList;
use super::ConvertFn;
use crate::import::NodeCx;
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::{Attribute, Context, Type, TypeData};

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] = &[
    ("Abs", |cx| unary(cx, fp_op::ABS)),
    ("Add", add),
    ("Cast", cast),
    ("Clip", clip),
    ("Div", div),
    ("Erf", |cx| unary(cx, fp_op::ERF)),
    ("Exp", |cx| unary(cx, fp_op::EXP)),
    ("Gelu", gelu),
    ("HardSigmoid", hard_sigmoid),
    ("HardSwish", |cx| unary(cx, fp_op::HARD_SWISH)),
    ("LeakyRelu", leaky_relu),
    ("Log", |cx| unary(cx, fp_op::LOG)),
    ("Max", |cx| bound_or_variadic(cx, fp_op::MAX, "min")),
    ("Mean", mean),
    ("Min", |cx| bound_or_variadic(cx, fp_op::MIN, "max")),
    ("Mul", mul),
    ("Neg", |cx| unary(cx, fp_op::NEG)),
    ("Pow", |cx| binary(cx, fp_op::POW)),
    ("PRelu", prelu),
    ("Reciprocal", |cx| unary(cx, fp_op::RECIPROCAL)),
    ("Relu", relu),
    ("Sigmoid", sigmoid),
    ("Softplus", |cx| unary(cx, fp_op::SOFTPLUS)),
    ("Sqrt", |cx| unary(cx, fp_op::SQRT)),
    ("Sub", sub),
    ("Sum", |cx| variadic(cx, fp_op::ADD)),
    ("Tanh", tanh),
];

/// `Cast` of a computed value to its own element type forwards it; a cast
/// of a quantized value to INT32 or INT64 gives its stored integers for a
/// table lookup ([`super::lookup`]); other casts of computed values are not
/// supported (casts of constants are evaluated at import, see [`crate::fold`]).
fn cast(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let to = cx.attrs().opt_int("to")?.ok_or("needs a 'to' attribute")?;
    cx.attrs().int("saturate", 1)?;
    cx.attrs().string("round_mode", "up")?;
    if super::lookup::cast_stored_integers(cx, to)? {
        return Ok(());
    }
    let from = cx.input_data_type(0)?;
    if i64::from(from) != to {
        return Err(format!(
            "casting a computed {} value to {} is not supported",
            crate::onnx::data_type::name(from),
            i32::try_from(to).map_or_else(|_| to.to_string(), crate::onnx::data_type::name)
        ));
    }
    cx.forward_input()
}

fn binary(cx: &mut NodeCx<'_, '_>, op: &str) -> Result<(), String> {
    let a = cx.input(0)?;
    let b = cx.input(1)?;
    let y = cx.emit(op, &[a, b], Attribute::EMPTY_DICT)?;
    cx.set_output(0, y)
}

fn unary(cx: &mut NodeCx<'_, '_>, op: &str) -> Result<(), String> {
    let x = cx.input(0)?;
    let y = cx.emit(op, &[x], Attribute::EMPTY_DICT)?;
    cx.set_output(0, y)
}

pub(super) fn add(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    binary(cx, fp_op::ADD)
}

pub(super) fn sub(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    binary(cx, fp_op::SUB)
}

pub(super) fn mul(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    binary(cx, fp_op::MUL)
}

pub(super) fn div(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    binary(cx, fp_op::DIV)
}

pub(super) fn relu(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    unary(cx, fp_op::RELU)
}

pub(super) fn sigmoid(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    unary(cx, fp_op::SIGMOID)
}

pub(super) fn tanh(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    unary(cx, fp_op::TANH)
}

/// A float attribute of the element type `elem` (f32 if `elem` is not a float).
pub(super) fn float_attr(ctx: &mut Context, value: f64, elem: Type) -> Attribute {
    let ty = if matches!(ctx.type_data(elem), TypeData::Float(_)) { elem } else { ctx.common().f32 };
    ctx.float_attr(value, ty)
}

pub(super) fn clip(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    let x = cx.input(0)?;
    let elem = cx.element(x);
    let bound = |cx: &NodeCx<'_, '_>, input: usize, attr: &str| -> Result<Option<f64>, String> {
        if let Some(v) = attrs.opt_float(attr)? {
            return Ok(Some(f64::from(v)));
        }
        let Some(data) = cx.const_input(input)? else { return Ok(None) };
        match data.floats()?[..] {
            [v] => Ok(Some(v)),
            _ => Err(format!("input #{input} ('{}') must hold one value", data.name)),
        }
    };
    let mut min = bound(cx, 1, "min")?;
    let max = bound(cx, 2, "max")?;
    // ONNX: "When 'min' is greater than 'max', the clip operator sets all the
    // 'input' values to the value of 'max'" (Min(max, Max(x, min))), which is
    // clipping to [max, max]; fp.clip requires min ≤ max.
    if let (Some(lo), Some(hi)) = (min, max) {
        if lo > hi {
            min = Some(hi);
        }
    }
    let ctx = cx.ctx();
    let mut list = AttrList::default();
    for (name, value) in [("min", min), ("max", max)] {
        if let Some(v) = value {
            let a = float_attr(ctx, v, elem);
            list.push(name, a);
        }
    }
    let dict = list.dict(ctx);
    let y = cx.emit(fp_op::CLIP, &[x], dict)?;
    cx.set_output(0, y)
}

/// `Gelu` (opset 20): `fp.gelu`, with `approximate = "tanh"` when the node
/// asks for it.
pub(super) fn gelu(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let approximate = cx.attrs().string("approximate", "none")?;
    let attrs = match approximate.as_str() {
        "none" => Attribute::EMPTY_DICT,
        "tanh" => {
            let value = cx.ctx().string_attr("tanh");
            cx.ctx().dict_attr(&[("approximate", value)])
        }
        other => return Err(format!("approximate = '{other}' is not 'none' or 'tanh'")),
    };
    let x = cx.input(0)?;
    let y = cx.emit(fp_op::GELU, &[x], attrs)?;
    cx.set_output(0, y)
}

/// `HardSigmoid`: `fp.hard_sigmoid` with the node's `alpha` and `beta`
/// (ONNX defaults 0.2 and 0.5).
pub(super) fn hard_sigmoid(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let alpha = f64::from(cx.attrs().float("alpha", 0.2)?);
    let beta = f64::from(cx.attrs().float("beta", 0.5)?);
    let x = cx.input(0)?;
    let f32_ty = cx.ctx().common().f32;
    let (alpha, beta) = (cx.ctx().float_attr(alpha, f32_ty), cx.ctx().float_attr(beta, f32_ty));
    let attrs = cx.ctx().dict_attr(&[("alpha", alpha), ("beta", beta)]);
    let y = cx.emit(fp_op::HARD_SIGMOID, &[x], attrs)?;
    cx.set_output(0, y)
}

/// `PRelu(x, slope)`: with a constant float slope whose elements are one
/// finite value and which does not broadcast `x` to a larger shape, the
/// same function as `LeakyRelu {alpha = slope}` (`x < 0 ? slope·x : x`
/// element by element, one f32 product), so `fp.leaky_relu`, which
/// quantizes to a lookup; otherwise `fp.prelu`.
fn prelu(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    if cx.node_input_count() == 2 && cx.is_const_input(1) && !cx.is_const_input(0) {
        let x = cx.input(0)?;
        let (elem, shape) = (cx.element(x), cx.shape(x)?);
        if let Some(data) = cx.const_input(1)? {
            let f32_elem = elem == cx.ctx().common().f32;
            let fits = data.dims.len() <= shape.len()
                && data.dims.iter().rev().zip(shape.iter().rev()).all(|(&d, &s)| d == 1 || d == s);
            if let (true, true, Ok(values)) = (f32_elem, fits, data.floats()) {
                if let Some(&first) = values.first() {
                    if first.is_finite() && values.iter().all(|&v| v.to_bits() == first.to_bits()) {
                        let alpha = cx.ctx().float_attr(first, elem);
                        let attrs = cx.ctx().dict_attr(&[("alpha", alpha)]);
                        let y = cx.emit(fp_op::LEAKY_RELU, &[x], attrs)?;
                        return cx.set_output(0, y);
                    }
                }
            }
        }
    }
    binary(cx, fp_op::PRELU)
}

/// `Max(x, c)` / `Min(x, c)` (either order) of a float `x` and a constant
/// holding one finite value that does not broadcast `x`: `fp.clip` with that
/// bound (`bound` is `"min"` for Max, `"max"` for Min), one activation the
/// quantizer folds into the layer before it or a lookup, instead of a binary
/// op with a constant operand. Anything else is [`variadic`].
fn bound_or_variadic(cx: &mut NodeCx<'_, '_>, op: &str, bound: &str) -> Result<(), String> {
    if cx.node_input_count() == 2 {
        for (x_at, c_at) in [(0, 1), (1, 0)] {
            if !cx.is_const_input(c_at) || cx.is_const_input(x_at) {
                continue;
            }
            let x = cx.input(x_at)?;
            let elem = cx.element(x);
            let Some(data) = cx.const_input(c_at)? else { continue };
            let scalar =
                matches!(cx.ctx().type_data(elem), TypeData::Float(_)) && data.dims.iter().all(|&d| d == 1);
            let value = match data.floats().ok().as_deref() {
                Some(&[v]) if scalar && v.is_finite() && data.dims.len() <= cx.shape(x)?.len() => v,
                _ => continue,
            };
            let attr = float_attr(cx.ctx(), value, elem);
            let attrs = cx.ctx().dict_attr(&[(bound, attr)]);
            let y = cx.emit(fp_op::CLIP, &[x], attrs)?;
            return cx.set_output(0, y);
        }
    }
    variadic(cx, op)
}

/// An N-ary op (`Max`, `Min`, `Sum`) of one or more inputs as a left-to-right
/// chain of the binary `op`, broadcasting at each step; one input is passed
/// through.
fn variadic(cx: &mut NodeCx<'_, '_>, op: &str) -> Result<(), String> {
    let inputs = cx.node_input_count();
    if inputs == 0 {
        return Err("needs at least one input".into());
    }
    let mut acc = cx.input(0)?;
    for i in 1..inputs {
        let next = cx.input(i)?;
        acc = cx.emit(op, &[acc, next], Attribute::EMPTY_DICT)?;
    }
    cx.set_output(0, acc)
}

/// `Mean`: the chained sum divided by the number of inputs.
pub(super) fn mean(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let inputs = cx.node_input_count();
    if inputs == 0 {
        return Err("needs at least one input".into());
    }
    let mut acc = cx.input(0)?;
    for i in 1..inputs {
        let next = cx.input(i)?;
        acc = cx.emit(fp_op::ADD, &[acc, next], Attribute::EMPTY_DICT)?;
    }
    if inputs > 1 {
        let elem = cx.element(acc);
        let n = cx.scalar(inputs as f64, elem)?;
        acc = cx.emit(fp_op::DIV, &[acc, n], Attribute::EMPTY_DICT)?;
    }
    cx.set_output(0, acc)
}

/// `LeakyRelu`: `fp.leaky_relu` with the node's `alpha` (ONNX default 0.01).
pub(super) fn leaky_relu(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let alpha = f64::from(cx.attrs().float("alpha", 0.01)?);
    let x = cx.input(0)?;
    let f32_ty = cx.ctx().common().f32;
    let alpha = cx.ctx().float_attr(alpha, f32_ty);
    let attrs = cx.ctx().dict_attr(&[("alpha", alpha)]);
    let y = cx.emit(fp_op::LEAKY_RELU, &[x], attrs)?;
    cx.set_output(0, y)
}
