//! Import-time evaluation of nodes whose inputs are all constant: the shape
//! computations that exporters write into graphs.
//!
//! PyTorch, Paddle and TF converters compute target shapes at run time
//! (`Shape → Gather → Unsqueeze → Concat → Reshape`, `ConstantOfShape`,
//! `Range`, `Equal` / `Where` on shape vectors, `Cast` between integer and
//! float). Once every graph input has a static shape (`--input-shape`), each
//! such value is a constant, and the importer evaluates the node here instead
//! of converting it. Its results are bound as constant data, like
//! initializers, so that `Reshape`, `Resize`, `Expand` and the rest see
//! constant operands. An evaluator also covers elementwise arithmetic and
//! shape ops on constant weights, which then fold away.
//!
//! Arithmetic follows ONNX Runtime: integers compute in i64 and wrap to their
//! element type's width when stored (as a cast does), integer division
//! truncates; floats compute in f64 and round once to their element type
//! after every node, which is exactly the f32 result for +, −, ×, ÷ and √.
//!
//! A node whose result would exceed [`FOLD_LIMIT`] elements is not evaluated:
//! the importer converts it into IR ops when it can ([`Fail::TooLarge`]).

use crate::attrs::NodeAttrs;
use crate::onnx::data_type as dt;
use crate::ops::normalize_axis;
use crate::tensor::{element_bytes, float_kind, TensorData};
use qopt_ir_core::{bits_to_f64, f64_to_bits};

/// The most elements one evaluated result may have.
pub(crate) const FOLD_LIMIT: usize = 1 << 22;

/// Why a node was not evaluated.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Fail {
    /// The result would have this many elements, more than [`FOLD_LIMIT`].
    TooLarge(usize),
    /// The node is malformed or its values cannot be computed.
    Error(String),
}

impl From<String> for Fail {
    fn from(message: String) -> Fail {
        Fail::Error(message)
    }
}

impl From<&str> for Fail {
    fn from(message: &str) -> Fail {
        Fail::Error(message.to_string())
    }
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::TooLarge(n) => write!(
                f,
                "its result would hold {n} elements, more than the {FOLD_LIMIT} that qimport evaluates at import"
            ),
            Fail::Error(message) => f.write_str(message),
        }
    }
}

type Folded = Result<Vec<Tensor>, Fail>;

/// Evaluates one node type over its constant inputs.
pub(crate) type FoldFn = fn(&FoldCx<'_>) -> Folded;

/// The op types evaluated on constants, sorted.
const FOLDERS: &[(&str, FoldFn)] = &[
    ("Abs", |cx| unary(cx, |v| v.wrapping_abs(), f64::abs)),
    ("Add", |cx| arithmetic(cx, |a, b| Ok(a.wrapping_add(b)), |a, b| a + b)),
    ("And", |cx| logical(cx, |a, b| a && b)),
    ("Cast", cast),
    ("CastLike", cast_like),
    ("Ceil", |cx| float_unary(cx, f64::ceil)),
    ("Concat", concat),
    ("ConstantOfShape", constant_of_shape),
    ("Div", |cx| arithmetic(cx, int_div, |a, b| a / b)),
    ("Equal", |cx| compare(cx, |o| o == std::cmp::Ordering::Equal)),
    ("Expand", expand),
    ("Flatten", flatten),
    ("Floor", |cx| float_unary(cx, f64::floor)),
    ("Gather", gather),
    ("Greater", |cx| compare(cx, |o| o == std::cmp::Ordering::Greater)),
    ("GreaterOrEqual", |cx| compare(cx, |o| o != std::cmp::Ordering::Less)),
    ("Less", |cx| compare(cx, |o| o == std::cmp::Ordering::Less)),
    ("LessOrEqual", |cx| compare(cx, |o| o != std::cmp::Ordering::Greater)),
    ("Max", |cx| variadic(cx, |a, b| Ok(a.max(b)), nan_max)),
    ("Min", |cx| variadic(cx, |a, b| Ok(a.min(b)), nan_min)),
    ("Mod", modulo),
    ("Mul", |cx| arithmetic(cx, |a, b| Ok(a.wrapping_mul(b)), |a, b| a * b)),
    ("Neg", |cx| unary(cx, |v| v.wrapping_neg(), |v| -v)),
    ("Not", not),
    ("Or", |cx| logical(cx, |a, b| a || b)),
    ("Range", range),
    ("Reciprocal", |cx| float_unary(cx, f64::recip)),
    ("Reshape", reshape),
    ("Round", |cx| float_unary(cx, f64::round_ties_even)),
    ("Slice", slice),
    ("Sqrt", |cx| float_unary(cx, f64::sqrt)),
    ("Squeeze", squeeze),
    ("Sub", |cx| arithmetic(cx, |a, b| Ok(a.wrapping_sub(b)), |a, b| a - b)),
    ("Sum", |cx| variadic(cx, |a, b| Ok(a.wrapping_add(b)), |a, b| a + b)),
    ("Transpose", transpose),
    ("Unsqueeze", unsqueeze),
    ("Where", where_),
    ("Xor", |cx| logical(cx, |a, b| a != b)),
];

/// The evaluator of `op_type`, if it has one.
pub(crate) fn folder(op_type: &str) -> Option<FoldFn> {
    FOLDERS.binary_search_by_key(&op_type, |(name, _)| *name).ok().map(|i| FOLDERS[i].1)
}

/// The op types with an evaluator, sorted.
pub(crate) fn folded_op_types() -> impl Iterator<Item = &'static str> {
    FOLDERS.iter().map(|(name, _)| *name)
}

/// A node being evaluated: its attributes, opset and constant inputs
/// (`None` for an omitted optional input).
pub(crate) struct FoldCx<'a> {
    pub attrs: NodeAttrs<'a>,
    pub opset: i64,
    pub inputs: Vec<Option<Tensor>>,
}

impl FoldCx<'_> {
    fn input(&self, i: usize) -> Result<&Tensor, Fail> {
        self.inputs
            .get(i)
            .and_then(Option::as_ref)
            .ok_or_else(|| Fail::Error(format!("input #{i} is missing")))
    }

    fn opt_input(&self, i: usize) -> Option<&Tensor> {
        self.inputs.get(i).and_then(Option::as_ref)
    }

    fn present(&self) -> impl Iterator<Item = &Tensor> {
        self.inputs.iter().flatten()
    }

    /// `axes` of Squeeze / Unsqueeze / Reduce*: an input from `since`, an attribute before.
    fn axes(&self, since: i64) -> Result<Option<Vec<i64>>, Fail> {
        if self.opset >= since {
            self.opt_input(1).map(Tensor::ints).transpose()
        } else {
            Ok(self.attrs.opt_ints("axes")?)
        }
    }
}

/// A constant tensor computed on.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tensor {
    pub dims: Vec<usize>,
    /// A `TensorProto.DataType` value.
    pub data_type: i32,
    pub values: Values,
}

/// The elements: every integer type and `bool` as i64, every float type as f64.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Values {
    Int(Vec<i64>),
    Float(Vec<f64>),
}

impl Values {
    fn len(&self) -> usize {
        match self {
            Values::Int(v) => v.len(),
            Values::Float(v) => v.len(),
        }
    }

    /// The elements at `indices`, in order.
    fn take(&self, indices: &[usize]) -> Values {
        match self {
            Values::Int(v) => Values::Int(indices.iter().map(|&i| v[i]).collect()),
            Values::Float(v) => Values::Float(indices.iter().map(|&i| v[i]).collect()),
        }
    }
}

impl Tensor {
    /// Reads constant data.
    pub fn from_data(data: &TensorData) -> Result<Tensor, String> {
        let dims = data
            .dims
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("constant '{}' has dimension {d}", data.name)))
            .collect::<Result<_, _>>()?;
        let values = if float_kind(data.data_type).is_some() {
            Values::Float(data.floats()?)
        } else {
            Values::Int(data.ints()?)
        };
        Ok(Tensor { dims, data_type: data.data_type, values })
    }

    /// Writes the elements in `data_type`'s byte layout as constant data named `name`.
    pub fn into_data(self, name: &str) -> Result<TensorData, String> {
        let width = element_bytes(self.data_type)
            .ok_or_else(|| format!("element type {} is not supported", dt::name(self.data_type)))?;
        let mut bytes = Vec::with_capacity(self.values.len() * width);
        match (&self.values, float_kind(self.data_type)) {
            (Values::Float(v), Some(kind)) => {
                v.iter().for_each(|&x| bytes.extend_from_slice(&f64_to_bits(x, kind).to_le_bytes()[..width]))
            }
            (Values::Int(v), None) => {
                v.iter().for_each(|&x| bytes.extend_from_slice(&x.to_le_bytes()[..width]))
            }
            _ => {
                return Err(format!(
                    "internal: values do not match element type {}",
                    dt::name(self.data_type)
                ))
            }
        }
        let dims = self.dims.iter().map(|&d| d as i64).collect();
        Ok(TensorData::new(name, dims, self.data_type, bytes))
    }

    /// A tensor of `data_type` holding `values`, each rounded or wrapped to the type.
    fn new(dims: Vec<usize>, data_type: i32, values: Values) -> Result<Tensor, Fail> {
        let values = match (values, float_kind(data_type)) {
            (Values::Float(v), Some(kind)) => {
                Values::Float(v.into_iter().map(|x| bits_to_f64(f64_to_bits(x, kind), kind)).collect())
            }
            (Values::Int(v), None) => Values::Int(v.into_iter().map(|x| wrap_int(x, data_type)).collect()),
            (Values::Int(v), Some(kind)) => {
                Values::Float(v.into_iter().map(|x| bits_to_f64(f64_to_bits(x as f64, kind), kind)).collect())
            }
            (Values::Float(v), None) => {
                Values::Int(v.into_iter().map(|x| float_to_int(x, data_type)).collect::<Result<_, _>>()?)
            }
        };
        Ok(Tensor { dims, data_type, values })
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    /// The elements of an integer tensor.
    fn ints(&self) -> Result<Vec<i64>, Fail> {
        match &self.values {
            Values::Int(v) => Ok(v.clone()),
            Values::Float(_) => {
                Err(Fail::Error(format!("expected integers, got {}", dt::name(self.data_type))))
            }
        }
    }

    /// The single element of a one-element tensor, as f64.
    fn scalar(&self) -> Result<f64, Fail> {
        match (&self.values, self.len()) {
            (Values::Int(v), 1) => Ok(v[0] as f64),
            (Values::Float(v), 1) => Ok(v[0]),
            (_, n) => Err(Fail::Error(format!("expected a scalar, got {n} elements"))),
        }
    }

    /// The same elements under `dims` (same count).
    fn reshaped(&self, dims: Vec<usize>) -> Tensor {
        Tensor { dims, ..self.clone() }
    }

    fn gathered(&self, dims: Vec<usize>, indices: &[usize]) -> Tensor {
        Tensor { dims, data_type: self.data_type, values: self.values.take(indices) }
    }
}

/// `value` wrapped to integer type `data_type` (`bool`: nonzero is 1).
fn wrap_int(value: i64, data_type: i32) -> i64 {
    match data_type {
        dt::BOOL => i64::from(value != 0),
        dt::INT8 => value as i8 as i64,
        dt::UINT8 => value as u8 as i64,
        dt::INT16 => value as i16 as i64,
        dt::UINT16 => value as u16 as i64,
        dt::INT32 => value as i32 as i64,
        dt::UINT32 => value as u32 as i64,
        _ => value,
    }
}

/// A float cast to integer type `data_type`: truncated toward zero; values
/// the type cannot hold are an error (ONNX leaves them undefined).
fn float_to_int(value: f64, data_type: i32) -> Result<i64, Fail> {
    if data_type == dt::BOOL {
        return Ok(i64::from(value != 0.0));
    }
    let t = value.trunc();
    let (lo, hi) = match data_type {
        dt::INT8 => (-128.0, 127.0),
        dt::UINT8 => (0.0, 255.0),
        dt::INT16 => (-32768.0, 32767.0),
        dt::UINT16 => (0.0, 65535.0),
        dt::INT32 => (-2147483648.0, 2147483647.0),
        dt::UINT32 => (0.0, 4294967295.0),
        _ => (-9223372036854775808.0, 9223372036854774784.0),
    };
    if !(lo..=hi).contains(&t) {
        return Err(Fail::Error(format!("the value {value} does not fit {}", dt::name(data_type))));
    }
    Ok(t as i64)
}

/// The element count of `dims`, if within [`FOLD_LIMIT`].
fn checked_count(dims: &[usize]) -> Result<usize, Fail> {
    let n = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).unwrap_or(usize::MAX);
    if n > FOLD_LIMIT {
        return Err(Fail::TooLarge(n));
    }
    Ok(n)
}

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// For every element of a tensor of `out_dims` in row-major order, the
/// source index `source` gives for its multi-index.
fn index_map(out_dims: &[usize], mut source: impl FnMut(&[usize]) -> usize) -> Result<Vec<usize>, Fail> {
    let n = checked_count(out_dims)?;
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; out_dims.len()];
    for _ in 0..n {
        out.push(source(&index));
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < out_dims[d] {
                break;
            }
            index[d] = 0;
        }
    }
    Ok(out)
}

/// The numpy broadcast of several shapes.
fn broadcast_dims<'a>(shapes: impl IntoIterator<Item = &'a [usize]>) -> Result<Vec<usize>, Fail> {
    let mut out: Vec<usize> = Vec::new();
    for dims in shapes {
        if dims.len() > out.len() {
            let mut wider = vec![1; dims.len() - out.len()];
            wider.extend_from_slice(&out);
            out = wider;
        }
        let offset = out.len() - dims.len();
        for (i, &d) in dims.iter().enumerate() {
            let o = &mut out[offset + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(Fail::Error(format!("shapes {dims:?} and {out:?} do not broadcast")));
            }
        }
    }
    Ok(out)
}

/// `t`'s elements broadcast to `out_dims` (which `t` broadcasts to).
fn broadcast_to(t: &Tensor, out_dims: &[usize]) -> Result<Values, Fail> {
    if t.dims == out_dims {
        return Ok(t.values.clone());
    }
    let offset = out_dims.len() - t.dims.len();
    let in_strides = strides(&t.dims);
    let indices = index_map(out_dims, |index| {
        t.dims
            .iter()
            .enumerate()
            .map(|(i, &d)| if d == 1 { 0 } else { index[offset + i] * in_strides[i] })
            .sum()
    })?;
    Ok(t.values.take(&indices))
}

/// The operands broadcast to one shape, with that shape.
fn broadcast_all(tensors: &[&Tensor]) -> Result<(Vec<usize>, Vec<Values>), Fail> {
    let dims = broadcast_dims(tensors.iter().map(|t| t.dims.as_slice()))?;
    checked_count(&dims)?;
    let values = tensors.iter().map(|t| broadcast_to(t, &dims)).collect::<Result<_, _>>()?;
    Ok((dims, values))
}

fn same_type(a: &Tensor, b: &Tensor) -> Result<(), Fail> {
    if a.data_type != b.data_type {
        return Err(Fail::Error(format!(
            "operands have different element types ({} and {})",
            dt::name(a.data_type),
            dt::name(b.data_type)
        )));
    }
    Ok(())
}

fn int_div(a: i64, b: i64) -> Result<i64, Fail> {
    if b == 0 {
        return Err("integer division by zero".into());
    }
    Ok(a.wrapping_div(b))
}

fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// An elementwise binary op on two operands of one type, with broadcasting.
fn arithmetic(cx: &FoldCx<'_>, int: fn(i64, i64) -> Result<i64, Fail>, float: fn(f64, f64) -> f64) -> Folded {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    same_type(a, b)?;
    Ok(vec![binary(a, b, a.data_type, int, float)?])
}

fn binary(
    a: &Tensor,
    b: &Tensor,
    data_type: i32,
    int: impl Fn(i64, i64) -> Result<i64, Fail>,
    float: impl Fn(f64, f64) -> f64,
) -> Result<Tensor, Fail> {
    let (dims, values) = broadcast_all(&[a, b])?;
    let values = match (&values[0], &values[1]) {
        (Values::Int(x), Values::Int(y)) => {
            Values::Int(x.iter().zip(y).map(|(&p, &q)| int(p, q)).collect::<Result<_, _>>()?)
        }
        (Values::Float(x), Values::Float(y)) => {
            Values::Float(x.iter().zip(y).map(|(&p, &q)| float(p, q)).collect())
        }
        _ => return Err("operands mix integers and floats".into()),
    };
    Tensor::new(dims, data_type, values)
}

/// Max, Min, Sum: any number of operands of one type, broadcast together.
fn variadic(cx: &FoldCx<'_>, int: fn(i64, i64) -> Result<i64, Fail>, float: fn(f64, f64) -> f64) -> Folded {
    let mut operands = cx.present();
    let mut acc = operands.next().ok_or("the node has no inputs")?.clone();
    for t in operands {
        same_type(&acc, t)?;
        acc = binary(&acc, t, acc.data_type, int, float)?;
    }
    Ok(vec![acc])
}

fn compare(cx: &FoldCx<'_>, holds: fn(std::cmp::Ordering) -> bool) -> Folded {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    same_type(a, b)?;
    let (dims, values) = broadcast_all(&[a, b])?;
    let out: Vec<i64> = match (&values[0], &values[1]) {
        (Values::Int(x), Values::Int(y)) => {
            x.iter().zip(y).map(|(p, q)| i64::from(holds(p.cmp(q)))).collect()
        }
        (Values::Float(x), Values::Float(y)) => {
            x.iter().zip(y).map(|(p, q)| i64::from(p.partial_cmp(q).is_some_and(holds))).collect()
        }
        _ => return Err("operands mix integers and floats".into()),
    };
    Ok(vec![Tensor::new(dims, dt::BOOL, Values::Int(out))?])
}

fn logical(cx: &FoldCx<'_>, op: fn(bool, bool) -> bool) -> Folded {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    if a.data_type != dt::BOOL || b.data_type != dt::BOOL {
        return Err("logical ops take BOOL operands".into());
    }
    Ok(vec![binary(a, b, dt::BOOL, |p, q| Ok(i64::from(op(p != 0, q != 0))), |_, _| 0.0)?])
}

fn not(cx: &FoldCx<'_>) -> Folded {
    let a = cx.input(0)?;
    if a.data_type != dt::BOOL {
        return Err("Not takes a BOOL operand".into());
    }
    Ok(vec![Tensor::new(
        a.dims.clone(),
        dt::BOOL,
        Values::Int(a.ints()?.iter().map(|&v| i64::from(v == 0)).collect()),
    )?])
}

/// `Mod`: with `fmod = 0` the result takes the divisor's sign (Python's and
/// numpy's `%`), with `fmod = 1` the dividend's (C's `fmod`). Until opset 28
/// ONNX required `fmod = 1` for floats; opset 28 defines `fmod = 0` for them
/// too, as `np.mod`: `fmod(a, b)`, plus `b` when that is nonzero and of the
/// other sign, and a zero result takes `b`'s sign.
fn modulo(cx: &FoldCx<'_>) -> Folded {
    let fmod = cx.attrs.int("fmod", 0)? != 0;
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    same_type(a, b)?;
    if !fmod && matches!(a.values, Values::Float(_)) && cx.opset < 28 {
        return Err("Mod of floats needs fmod = 1 before opset 28".into());
    }
    let int = move |p: i64, q: i64| -> Result<i64, Fail> {
        if q == 0 {
            return Err("integer modulo by zero".into());
        }
        let r = p.wrapping_rem(q);
        Ok(if !fmod && r != 0 && ((r < 0) != (q < 0)) { r + q } else { r })
    };
    let float = move |p: f64, q: f64| -> f64 {
        let r = p % q;
        if fmod {
            r
        } else if r == 0.0 {
            0.0f64.copysign(q)
        } else if (r < 0.0) != (q < 0.0) {
            r + q
        } else {
            r
        }
    };
    Ok(vec![binary(a, b, a.data_type, int, float)?])
}

fn unary(cx: &FoldCx<'_>, int: fn(i64) -> i64, float: fn(f64) -> f64) -> Folded {
    let a = cx.input(0)?;
    let values = match &a.values {
        Values::Int(v) => Values::Int(v.iter().map(|&x| int(x)).collect()),
        Values::Float(v) => Values::Float(v.iter().map(|&x| float(x)).collect()),
    };
    Ok(vec![Tensor::new(a.dims.clone(), a.data_type, values)?])
}

fn float_unary(cx: &FoldCx<'_>, float: fn(f64) -> f64) -> Folded {
    let a = cx.input(0)?;
    let Values::Float(v) = &a.values else {
        return Err(Fail::Error(format!("expected a float operand, got {}", dt::name(a.data_type))));
    };
    Ok(vec![Tensor::new(a.dims.clone(), a.data_type, Values::Float(v.iter().map(|&x| float(x)).collect()))?])
}

fn where_(cx: &FoldCx<'_>) -> Folded {
    let (c, x, y) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    same_type(x, y)?;
    let (dims, values) = broadcast_all(&[c, x, y])?;
    let Values::Int(cond) = &values[0] else { return Err("the condition must be BOOL".into()) };
    let values = match (&values[1], &values[2]) {
        (Values::Int(a), Values::Int(b)) => Values::Int(
            cond.iter().zip(a.iter().zip(b)).map(|(&k, (&p, &q))| if k != 0 { p } else { q }).collect(),
        ),
        (Values::Float(a), Values::Float(b)) => Values::Float(
            cond.iter().zip(a.iter().zip(b)).map(|(&k, (&p, &q))| if k != 0 { p } else { q }).collect(),
        ),
        _ => return Err("operands mix integers and floats".into()),
    };
    Ok(vec![Tensor::new(dims, x.data_type, values)?])
}

fn cast_to(a: &Tensor, to: i32) -> Folded {
    // 4-bit targets are read (quantized weights) but not computed on.
    if element_bytes(to).is_none() || to == dt::INT4 || to == dt::UINT4 {
        return Err(Fail::Error(format!("casting to {} is not supported", dt::name(to))));
    }
    Ok(vec![Tensor::new(a.dims.clone(), to, a.values.clone())?])
}

/// `saturate` and `round_mode` concern float8 targets only, which are not supported.
fn cast(cx: &FoldCx<'_>) -> Folded {
    let to = cx.attrs.opt_int("to")?.ok_or("needs a 'to' attribute")?;
    cx.attrs.int("saturate", 1)?;
    cx.attrs.string("round_mode", "up")?;
    cast_to(cx.input(0)?, i32::try_from(to).map_err(|_| format!("'to' = {to} is not an element type"))?)
}

fn cast_like(cx: &FoldCx<'_>) -> Folded {
    cx.attrs.int("saturate", 1)?;
    cx.attrs.string("round_mode", "up")?;
    cast_to(cx.input(0)?, cx.input(1)?.data_type)
}

fn concat(cx: &FoldCx<'_>) -> Folded {
    let axis = cx.attrs.opt_int("axis")?.ok_or("needs an 'axis' attribute")?;
    let parts: Vec<&Tensor> = cx.present().collect();
    let first = *parts.first().ok_or("the node has no inputs")?;
    let rank = first.dims.len();
    let axis = normalize_axis(axis, rank)?;
    let mut dims = first.dims.clone();
    dims[axis] = 0;
    for t in &parts {
        same_type(first, t)?;
        let same_other = t.dims.len() == rank
            && t.dims.iter().zip(&first.dims).enumerate().all(|(i, (a, b))| i == axis || a == b);
        if !same_other {
            return Err(Fail::Error(format!(
                "cannot concatenate shapes {:?} and {:?} on axis {axis}",
                first.dims, t.dims
            )));
        }
        dims[axis] += t.dims[axis];
    }
    checked_count(&dims)?;
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    let mut values = match first.values {
        Values::Int(_) => Values::Int(Vec::new()),
        Values::Float(_) => Values::Float(Vec::new()),
    };
    for o in 0..outer {
        for t in &parts {
            let chunk = t.dims[axis] * inner;
            let range = o * chunk..(o + 1) * chunk;
            match (&mut values, &t.values) {
                (Values::Int(out), Values::Int(v)) => out.extend_from_slice(&v[range]),
                (Values::Float(out), Values::Float(v)) => out.extend_from_slice(&v[range]),
                _ => return Err("operands mix integers and floats".into()),
            }
        }
    }
    Ok(vec![Tensor { dims, data_type: first.data_type, values }])
}

/// `ConstantOfShape`: the `value` attribute (one element; default f32 0) repeated.
fn constant_of_shape(cx: &FoldCx<'_>) -> Folded {
    let dims = to_dims(&cx.input(0)?.ints()?)?;
    let fill = match cx.attrs.opt_tensor("value")? {
        Some(t) => Tensor::from_data(&TensorData::from_proto(t)?)?,
        None => Tensor { dims: vec![1], data_type: dt::FLOAT, values: Values::Float(vec![0.0]) },
    };
    if fill.len() != 1 {
        return Err(Fail::Error(format!("the value attribute has {} elements, not 1", fill.len())));
    }
    let n = checked_count(&dims)?;
    Ok(vec![fill.gathered(dims, &vec![0; n])])
}

/// Sizes from a shape tensor (each ≥ 0).
fn to_dims(values: &[i64]) -> Result<Vec<usize>, Fail> {
    values
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| Fail::Error(format!("the shape has a negative size {d}"))))
        .collect()
}

/// `Range`: `start + i·delta` for `i` in `0..max(⌈(limit − start) / delta⌉, 0)`.
///
/// Each float element is `start + (i · delta)` as ONNX writes it, two roundings
/// in the type the loop runs in: f32 for FLOAT, f64 for DOUBLE, and for
/// FLOAT16 and BFLOAT16 (opset 27) the `stash_type` (FLOAT by default, or
/// DOUBLE), the result then rounded to the element type. `stash_type` has no
/// effect on other types.
fn range(cx: &FoldCx<'_>) -> Folded {
    let (start, limit, delta) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    same_type(start, limit)?;
    same_type(start, delta)?;
    let stash = if cx.opset >= 27 { cx.attrs.int("stash_type", i64::from(dt::FLOAT))? } else { 0 };
    let (s, l, d) = (start.scalar()?, limit.scalar()?, delta.scalar()?);
    if d == 0.0 || !d.is_finite() || !s.is_finite() || !l.is_finite() {
        return Err(Fail::Error(format!("Range({s}, {l}, {d}) has no finite length")));
    }
    let count = ((l - s) / d).ceil().max(0.0);
    if count > FOLD_LIMIT as f64 {
        return Err(Fail::TooLarge(count as usize));
    }
    let n = count as usize;
    let in_f32 = match start.data_type {
        dt::FLOAT => true,
        dt::FLOAT16 | dt::BFLOAT16 if stash == i64::from(dt::FLOAT) => true,
        dt::FLOAT16 | dt::BFLOAT16 if stash != i64::from(dt::DOUBLE) => {
            return Err(Fail::Error(format!(
                "stash_type {} is not FLOAT or DOUBLE",
                i32::try_from(stash).map_or_else(|_| stash.to_string(), dt::name)
            )))
        }
        _ => false,
    };
    let values = match (&start.values, &delta.values) {
        (Values::Int(a), Values::Int(b)) => {
            Values::Int((0..n as i64).map(|i| a[0].wrapping_add(i.wrapping_mul(b[0]))).collect())
        }
        // `i` < 2^22 is exact in f32.
        _ if in_f32 => Values::Float((0..n).map(|i| f64::from(s as f32 + i as f32 * d as f32)).collect()),
        _ => Values::Float((0..n).map(|i| s + i as f64 * d).collect()),
    };
    Ok(vec![Tensor::new(vec![n], start.data_type, values)?])
}

/// `Expand`: broadcast the input and the target shape together.
fn expand(cx: &FoldCx<'_>) -> Folded {
    let x = cx.input(0)?;
    let shape = to_dims(&cx.input(1)?.ints()?)?;
    let dims = broadcast_dims([x.dims.as_slice(), shape.as_slice()])?;
    checked_count(&dims)?;
    let values = broadcast_to(x, &dims)?;
    Ok(vec![Tensor { dims, data_type: x.data_type, values }])
}

fn flatten(cx: &FoldCx<'_>) -> Folded {
    let x = cx.input(0)?;
    let rank = x.dims.len();
    let axis = cx.attrs.int("axis", 1)?;
    let r = rank as i64;
    if axis < -r || axis > r {
        return Err(Fail::Error(format!("axis {axis} is out of range for rank {rank}")));
    }
    let axis = if axis < 0 { axis + r } else { axis } as usize;
    let outer: usize = x.dims[..axis].iter().product();
    Ok(vec![x.reshaped(vec![outer, x.len() / outer.max(1)])])
}

fn gather(cx: &FoldCx<'_>) -> Folded {
    let (data, indices) = (cx.input(0)?, cx.input(1)?);
    let rank = data.dims.len();
    let axis = normalize_axis(cx.attrs.int("axis", 0)?, rank)?;
    let size = data.dims[axis];
    let picks = indices
        .ints()?
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + size as i64 } else { i };
            usize::try_from(j).ok().filter(|&j| j < size).ok_or_else(|| {
                Fail::Error(format!("index {i} is out of range for a dimension of size {size}"))
            })
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let mut dims = data.dims[..axis].to_vec();
    dims.extend_from_slice(&indices.dims);
    dims.extend_from_slice(&data.dims[axis + 1..]);
    let in_strides = strides(&data.dims);
    let k = indices.dims.len();
    let idx_strides = strides(&indices.dims);
    let sources = index_map(&dims, |index| {
        let pick: usize = (0..k).map(|i| index[axis + i] * idx_strides[i]).sum();
        let mut src = picks[pick] * in_strides[axis];
        for i in 0..axis {
            src += index[i] * in_strides[i];
        }
        for i in axis + 1..rank {
            src += index[i + k - 1] * in_strides[i];
        }
        src
    })?;
    Ok(vec![data.gathered(dims, &sources)])
}

fn reshape(cx: &FoldCx<'_>) -> Folded {
    let x = cx.input(0)?;
    let target = cx.input(1)?.ints()?;
    let allow_zero = cx.attrs.int("allowzero", 0)? != 0;
    let mut dims = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                dims.push(1);
            }
            0 if !allow_zero => dims.push(
                *x.dims
                    .get(i)
                    .ok_or_else(|| Fail::Error(format!("shape entry {i} copies a missing dimension")))?,
            ),
            d => dims.push(usize::try_from(d).map_err(|_| Fail::Error(format!("invalid shape entry {d}")))?),
        }
    }
    let cannot = || Fail::Error(format!("cannot reshape {:?} to {target:?}", x.dims));
    // Target sizes come from the model: their product may overflow.
    let elements = |dims: &[usize]| dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let known = elements(&dims).ok_or_else(cannot)?;
    if let Some(i) = infer {
        if known == 0 || x.len() % known != 0 {
            return Err(cannot());
        }
        dims[i] = x.len() / known;
    }
    if elements(&dims) != Some(x.len()) {
        return Err(cannot());
    }
    Ok(vec![x.reshaped(dims)])
}

/// `Slice` (opset ≥ 10: starts, ends, axes, steps as inputs), bounds clamped as ONNX says.
fn slice(cx: &FoldCx<'_>) -> Folded {
    let x = cx.input(0)?;
    let rank = x.dims.len();
    let starts = cx.input(1)?.ints()?;
    let ends = cx.input(2)?.ints()?;
    let axes = match cx.opt_input(3) {
        Some(t) => t.ints()?,
        None => (0..starts.len() as i64).collect(),
    };
    let steps = match cx.opt_input(4) {
        Some(t) => t.ints()?,
        None => vec![1; starts.len()],
    };
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err("starts, ends, axes and steps differ in length".into());
    }
    let mut first = vec![0i64; rank];
    let mut step = vec![1i64; rank];
    let mut dims = x.dims.clone();
    for i in 0..starts.len() {
        let a = normalize_axis(axes[i], rank)?;
        let size = x.dims[a] as i64;
        let s = steps[i];
        if s == 0 {
            return Err("a slice step is 0".into());
        }
        let resolve = |v: i64| if v < 0 { v.saturating_add(size) } else { v };
        let (b, e) = if s > 0 {
            (resolve(starts[i]).clamp(0, size), resolve(ends[i]).clamp(0, size))
        } else {
            (resolve(starts[i]).clamp(0, size - 1), resolve(ends[i]).clamp(-1, size - 1))
        };
        let count = if s > 0 { (e - b + s - 1).max(0) / s } else { (b - e - s - 1).max(0) / -s };
        first[a] = b;
        step[a] = s;
        dims[a] = count as usize;
    }
    let in_strides = strides(&x.dims);
    let sources = index_map(&dims, |index| {
        (0..rank).map(|d| (first[d] + index[d] as i64 * step[d]) as usize * in_strides[d]).sum()
    })?;
    Ok(vec![x.gathered(dims, &sources)])
}

fn squeeze(cx: &FoldCx<'_>) -> Folded {
    let x = cx.input(0)?;
    let rank = x.dims.len();
    let mut keep = vec![true; rank];
    match cx.axes(13)? {
        Some(axes) => {
            for axis in axes {
                let a = normalize_axis(axis, rank)?;
                if x.dims[a] != 1 {
                    return Err(Fail::Error(format!("cannot squeeze dimension {a} of size {}", x.dims[a])));
                }
                keep[a] = false;
            }
        }
        None => keep.iter_mut().zip(&x.dims).for_each(|(k, &d)| *k = d != 1),
    }
    let dims = x.dims.iter().zip(&keep).filter(|(_, &k)| k).map(|(&d, _)| d).collect();
    Ok(vec![x.reshaped(dims)])
}

fn unsqueeze(cx: &FoldCx<'_>) -> Folded {
    let x = cx.input(0)?;
    let axes = cx.axes(13)?.ok_or("axes are missing")?;
    let rank = x.dims.len() + axes.len();
    let mut inserted = vec![false; rank];
    for axis in axes {
        let a = normalize_axis(axis, rank)?;
        if std::mem::replace(&mut inserted[a], true) {
            return Err(Fail::Error(format!("axis {a} is listed twice")));
        }
    }
    let mut old = x.dims.iter();
    let dims = inserted.iter().map(|&new| if new { 1 } else { old.next().copied().unwrap_or(1) }).collect();
    Ok(vec![x.reshaped(dims)])
}

fn transpose(cx: &FoldCx<'_>) -> Folded {
    let x = cx.input(0)?;
    let rank = x.dims.len();
    let perm = cx.attrs.opt_ints("perm")?.unwrap_or_else(|| (0..rank as i64).rev().collect());
    let mut seen = vec![false; rank];
    let perm: Vec<usize> = perm
        .iter()
        .map(|&p| {
            usize::try_from(p)
                .ok()
                .filter(|&p| p < rank && !std::mem::replace(&mut seen[p], true))
                .ok_or_else(|| Fail::Error(format!("perm {perm:?} is not a permutation of 0..{rank}")))
        })
        .collect::<Result<_, _>>()?;
    if perm.len() != rank {
        return Err(Fail::Error(format!("perm {perm:?} is not a permutation of 0..{rank}")));
    }
    let dims: Vec<usize> = perm.iter().map(|&p| x.dims[p]).collect();
    let in_strides = strides(&x.dims);
    let sources =
        index_map(&dims, |index| perm.iter().enumerate().map(|(i, &p)| index[i] * in_strides[p]).sum())?;
    Ok(vec![x.gathered(dims, &sources)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::NodeProto;

    fn ints(dims: &[usize], v: &[i64]) -> Tensor {
        Tensor { dims: dims.to_vec(), data_type: dt::INT64, values: Values::Int(v.to_vec()) }
    }

    fn floats(dims: &[usize], v: &[f64]) -> Tensor {
        Tensor { dims: dims.to_vec(), data_type: dt::FLOAT, values: Values::Float(v.to_vec()) }
    }

    fn run(op: &str, node: &NodeProto<'_>, opset: i64, inputs: Vec<Option<Tensor>>) -> Result<Tensor, Fail> {
        let cx = FoldCx { attrs: NodeAttrs::new(node), opset, inputs };
        Ok(folder(op).unwrap()(&cx)?.remove(0))
    }

    #[test]
    fn folders_are_sorted() {
        assert!(FOLDERS.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn shape_chain() {
        let node = NodeProto::default();
        let shape = ints(&[4], &[1, 3, 48, 192]);
        let idx = ints(&[], &[-2]);
        let h = run("Gather", &node, 13, vec![Some(shape.clone()), Some(idx)]).unwrap();
        assert_eq!((h.dims.clone(), h.values.clone()), (vec![], Values::Int(vec![48])));
        let two = ints(&[], &[2]);
        let h2 = run("Div", &node, 13, vec![Some(h), Some(two)]).unwrap();
        assert_eq!(h2.values, Values::Int(vec![24]));
        let u = run("Unsqueeze", &node, 13, vec![Some(h2), Some(ints(&[1], &[0]))]).unwrap();
        assert_eq!(u.dims, [1]);
        let c = run("Concat", &node_with_int("axis", 0), 13, vec![Some(ints(&[1], &[-1])), Some(u)]).unwrap();
        assert_eq!(c.values, Values::Int(vec![-1, 24]));
    }

    fn node_with_int(name: &str, value: i64) -> NodeProto<'static> {
        NodeProto {
            attribute: vec![crate::onnx::AttributeProto {
                name: name.into(),
                attr_type: crate::onnx::attr_type::INT,
                i: Some(value),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn integer_division_truncates_and_mod_follows_the_divisor() {
        let node = NodeProto::default();
        let d = run("Div", &node, 13, vec![Some(ints(&[2], &[-7, 7])), Some(ints(&[], &[2]))]).unwrap();
        assert_eq!(d.values, Values::Int(vec![-3, 3]));
        let m = run("Mod", &node, 13, vec![Some(ints(&[2], &[-7, 7])), Some(ints(&[], &[3]))]).unwrap();
        assert_eq!(m.values, Values::Int(vec![2, 1]));
        let f = run(
            "Mod",
            &node_with_int("fmod", 1),
            13,
            vec![Some(ints(&[2], &[-7, 7])), Some(ints(&[], &[3]))],
        )
        .unwrap();
        assert_eq!(f.values, Values::Int(vec![-1, 1]));
        assert!(run("Div", &node, 13, vec![Some(ints(&[], &[1])), Some(ints(&[], &[0]))]).is_err());
    }

    /// Opset 28 defines `fmod = 0` on floats as `np.mod` (ONNX's
    /// `test_mod_float*_mixed_sign_fmod_0` and `test_mod_float_edge_cases_fmod_0_*`).
    #[test]
    fn float_mod_follows_the_divisor_from_opset_28() {
        let node = NodeProto::default();
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        let x = floats(&[9], &[-4.5, 4.5, 0.0, -0.0, 6.0, -3.0, 3.0, inf, nan]);
        let y = floats(&[9], &[2.0, -2.0, -3.0, 3.0, -3.0, inf, inf, 2.0, 2.0]);
        let m = run("Mod", &node, 28, vec![Some(x.clone()), Some(y.clone())]).unwrap();
        let Values::Float(v) = m.values else { panic!("floats expected") };
        assert_eq!(&v[..7], &[1.5, -1.5, 0.0, 0.0, 0.0, inf, 3.0]);
        // Zeros take the divisor's sign.
        let signs: Vec<bool> = v[2..5].iter().map(|z| z.is_sign_negative()).collect();
        assert_eq!(signs, [true, false, true]);
        assert!(v[7].is_nan() && v[8].is_nan());
        // Division by zero is NaN, not an error, for floats.
        let z = run("Mod", &node, 28, vec![Some(floats(&[1], &[1.0])), Some(floats(&[1], &[0.0]))]).unwrap();
        assert!(matches!(&z.values, Values::Float(v) if v[0].is_nan()));
        // Before opset 28, ONNX requires fmod = 1 for floats.
        assert!(run("Mod", &node, 13, vec![Some(x.clone()), Some(y.clone())]).is_err());
        let f = run("Mod", &node_with_int("fmod", 1), 13, vec![Some(x), Some(y)]).unwrap();
        let Values::Float(v) = f.values else { panic!("floats expected") };
        assert_eq!(&v[..7], &[-0.5, 0.5, 0.0, -0.0, 0.0, -3.0, 3.0]);
    }

    #[test]
    fn slices_clamp_like_onnx() {
        let node = NodeProto::default();
        let x = ints(&[5], &[0, 1, 2, 3, 4]);
        let s = |b: i64, e: i64, st: i64| {
            run(
                "Slice",
                &node,
                13,
                vec![
                    Some(x.clone()),
                    Some(ints(&[1], &[b])),
                    Some(ints(&[1], &[e])),
                    None,
                    Some(ints(&[1], &[st])),
                ],
            )
            .unwrap()
            .values
        };
        assert_eq!(s(1, i64::MAX, 1), Values::Int(vec![1, 2, 3, 4]));
        assert_eq!(s(-1, i64::MIN, -1), Values::Int(vec![4, 3, 2, 1, 0]));
        assert_eq!(s(-2, -1, 1), Values::Int(vec![3]));
        assert_eq!(s(0, 5, 2), Values::Int(vec![0, 2, 4]));
        assert_eq!(s(3, 1, 1), Values::Int(vec![]));
    }

    #[test]
    fn where_equal_expand_range() {
        let node = NodeProto::default();
        let shape = ints(&[3], &[1, -1, 4]);
        let neg = run("Equal", &node, 13, vec![Some(shape.clone()), Some(ints(&[], &[-1]))]).unwrap();
        assert_eq!(neg.data_type, dt::BOOL);
        let fixed = run("Where", &node, 13, vec![Some(neg), Some(ints(&[], &[1])), Some(shape)]).unwrap();
        assert_eq!(fixed.values, Values::Int(vec![1, 1, 4]));
        let e = run("Expand", &node, 13, vec![Some(floats(&[1, 2], &[1.5, 2.5])), Some(ints(&[2], &[2, 1]))])
            .unwrap();
        assert_eq!((e.dims, e.values), (vec![2, 2], Values::Float(vec![1.5, 2.5, 1.5, 2.5])));
        let r = run(
            "Range",
            &node,
            13,
            vec![Some(ints(&[], &[10])), Some(ints(&[], &[1])), Some(ints(&[], &[-3]))],
        )
        .unwrap();
        assert_eq!(r.values, Values::Int(vec![10, 7, 4]));
    }

    /// ONNX's node tests of these declare opset 7 (1 for `Not`), which qimport
    /// does not read, so the conformance suite cannot exercise them.
    #[test]
    fn logical_ops_broadcast_booleans() {
        let node = NodeProto::default();
        let bools = |dims: &[usize], v: &[i64]| Tensor {
            dims: dims.to_vec(),
            data_type: dt::BOOL,
            values: Values::Int(v.to_vec()),
        };
        let a = bools(&[2, 2], &[0, 0, 1, 1]);
        let b = bools(&[2], &[0, 1]);
        for (op, want) in [("And", [0, 0, 0, 1]), ("Or", [0, 1, 1, 1]), ("Xor", [0, 1, 1, 0])] {
            let r = run(op, &node, 13, vec![Some(a.clone()), Some(b.clone())]).unwrap();
            assert_eq!(
                (r.data_type, r.dims, r.values),
                (dt::BOOL, vec![2, 2], Values::Int(want.to_vec())),
                "{op}"
            );
        }
        let n = run("Not", &node, 13, vec![Some(b)]).unwrap();
        assert_eq!(n.values, Values::Int(vec![1, 0]));
        assert!(run("And", &node, 13, vec![Some(ints(&[1], &[1])), Some(a)]).is_err());
    }

    /// Opset 27's `stash_type`: FLOAT16 and BFLOAT16 ranges loop in f32 by
    /// default, in f64 with DOUBLE; FLOAT ranges loop in f32.
    #[test]
    fn range_loops_in_the_stash_type() {
        let bf16 = |v: f64| Tensor { dims: vec![], data_type: dt::BFLOAT16, values: Values::Float(vec![v]) };
        // 2^40 + (2^17 + 1) · 2^15 = 2^40 + 2^32 + 2^15 is just above the bf16
        // midpoint 2^40 + 2^32, so it rounds up to 2^40 + 2^33; in f32 (ulp 2^17)
        // it is first rounded to the midpoint itself, which ties to even, 2^40.
        let (s, l, d) = (2f64.powi(40), 2f64.powi(40) + 2f64.powi(33), 2f64.powi(15));
        let i = (1 << 17) + 1;
        let inputs = || vec![Some(bf16(s)), Some(bf16(l)), Some(bf16(d))];
        let at = |t: Tensor| match t.values {
            Values::Float(v) => (v.len(), v[i]),
            Values::Int(_) => panic!("floats expected"),
        };
        let f32_loop = run("Range", &NodeProto::default(), 27, inputs()).unwrap();
        assert_eq!(at(f32_loop), (1 << 18, s));
        let stash = node_with_int("stash_type", i64::from(dt::FLOAT));
        assert_eq!(at(run("Range", &stash, 27, inputs()).unwrap()), (1 << 18, s));
        let double = node_with_int("stash_type", i64::from(dt::DOUBLE));
        assert_eq!(at(run("Range", &double, 27, inputs()).unwrap()), (1 << 18, s + 2f64.powi(33)));
        let half = node_with_int("stash_type", i64::from(dt::FLOAT16));
        assert!(run("Range", &half, 27, inputs()).is_err());
        // FLOAT: start + (i · delta) rounded twice in f32, not once from f64.
        // Element 9: 1 + 9 · 0.1f32 is 1.9000001 so, 1.9 when rounded once.
        let f = |v: f32| Some(floats(&[], &[f64::from(v)]));
        let r = run("Range", &NodeProto::default(), 13, vec![f(1.0), f(4.0), f(0.1)]).unwrap();
        let Values::Float(v) = r.values else { panic!("floats expected") };
        assert_eq!((v.len(), v[9]), (30, f64::from(1.900_000_1f32)));
        assert_ne!(v[9], f64::from((1.0 + 9.0 * f64::from(0.1f32)) as f32));
    }

    #[test]
    fn casts_round_and_check_range() {
        let node = node_with_int("to", i64::from(dt::INT32));
        let c = run("Cast", &node, 13, vec![Some(floats(&[3], &[2.9, -2.9, 0.0]))]).unwrap();
        assert_eq!(c.values, Values::Int(vec![2, -2, 0]));
        assert!(run("Cast", &node, 13, vec![Some(floats(&[1], &[f64::NAN]))]).is_err());
        let to_f32 = node_with_int("to", i64::from(dt::FLOAT));
        let f = run("Cast", &to_f32, 13, vec![Some(ints(&[1], &[16_777_217]))]).unwrap();
        assert_eq!(f.values, Values::Float(vec![16_777_216.0]));
    }

    #[test]
    fn gather_and_transpose_move_whole_rows() {
        let node = node_with_int("axis", 1);
        let x = floats(&[2, 3], &[0., 1., 2., 3., 4., 5.]);
        let g = run("Gather", &node, 13, vec![Some(x.clone()), Some(ints(&[2], &[2, 0]))]).unwrap();
        assert_eq!((g.dims, g.values), (vec![2, 2], Values::Float(vec![2., 0., 5., 3.])));
        let t = run("Transpose", &NodeProto::default(), 13, vec![Some(x)]).unwrap();
        assert_eq!((t.dims, t.values), (vec![3, 2], Values::Float(vec![0., 3., 1., 4., 2., 5.])));
    }

    #[test]
    fn huge_results_are_not_evaluated() {
        let node = NodeProto::default();
        let big = run("ConstantOfShape", &node, 13, vec![Some(ints(&[2], &[1 << 20, 1 << 20]))]);
        assert_eq!(big.unwrap_err(), Fail::TooLarge(1 << 40));
    }
}
