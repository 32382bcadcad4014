//! Typed reading of op attributes, for verifiers, type inference, folders and
//! other dialects (`qnn` reads its conv and pool attributes with these).
//!
//! Every reader comes in two forms: one over an [`OpView`] (verifiers) and one
//! with the `_in` suffix over `(ctx, attrs)` (type inference gets the context and
//! the attribute dictionary, not a view). A missing attribute gives the default;
//! an attribute of the wrong kind, length or range is an error whose message
//! names the attribute, so the verifier can report it as is:
//! `'stride' must have 2 elements, got 3`.
//!
//! Conventions of the `fp` dialect (and of `qnn`, which shares them): integer
//! arrays are arrays of integer attributes (`stride = [1, 1]`, normally `i64`),
//! integers are integer attributes, floats are float attributes of any float
//! type (`epsilon = 1.0e-5 : f32`), float arrays are arrays of float attributes
//! (`scales = [1.0, 2.0]`, f64 printing without a type), flags are
//! `true`/`false` and strings are string attributes. [`ConvAttrs`],
//! [`ConvTransposeAttrs`] and [`PoolAttrs`] read the window attributes of
//! convolutions, transposed convolutions and pools with their defaults, so
//! every dialect and the interpreter agree on them; their
//! `default_attributes` declare the same defaults to the equivalence checker
//! (the `AttributeDefaults` interface of the ops), from the same values.

use qopt_ir_core::{attr_to_string, AttrData, Attribute, Context, OpView};
use smallvec::SmallVec;

/// The attribute in which bias correction records, on a conv or dense, what
/// it subtracted from the bias and the means it measured (`qopt-passes`,
/// `quant/bias_record.rs`).
pub const BIAS_CORRECTION: &str = "qnn.bias_correction";

/// The attribute in which `absorb-bias` records, on the first conv or dense of
/// a pair, the per-channel minima of its result it measured and what it moved
/// out of its bias (`qopt-passes`, `quant/absorption_record.rs`).
pub const BIAS_ABSORPTION: &str = "qnn.bias_absorption";

/// [`BIAS_CORRECTION`] and [`BIAS_ABSORPTION`] record facts and never change
/// the op's values, so the weighted ops declare them annotations: the
/// equivalence checker leaves them out of their identity, and a pass may add
/// or drop them. (The checker reads [`BIAS_ABSORPTION`]'s minima separately,
/// through [`recorded_minima`], under `calibrated-range` only.)
pub const BIAS_CORRECTION_RECORD: qopt_ir_core::interfaces::Annotations =
    qopt_ir_core::interfaces::Annotations(&[BIAS_CORRECTION, BIAS_ABSORPTION]);

/// The range [`BIAS_ABSORPTION`] records for a weighted op's result along
/// `axis` (1 for the convolutions, −1 for `fp.dense`): the equivalence
/// checker assumes it under the `calibrated-range` relation.
pub const fn recorded_minima(axis: i64) -> qopt_ir_core::interfaces::RecordedRange {
    qopt_ir_core::interfaces::RecordedRange { axis, read: read_bias_absorption }
}

/// `channel_min` and `absorbed` (zeros when absent) of the op's
/// [`BIAS_ABSORPTION`] record: `channel_min` was measured with the original
/// bias, the stored one plus `absorbed`. `None` without a record, without
/// `channel_min`, or when a field is not a dense float vector of finite
/// values as long as the others (`absorb-bias` refuses such a record too).
fn read_bias_absorption(ctx: &Context, attrs: Attribute) -> Option<qopt_ir_core::interfaces::ChannelMinima> {
    let record = ctx.dict_get(attrs, BIAS_ABSORPTION)?;
    let field = |name: &str| -> Option<Option<Vec<f64>>> {
        let Some(attr) = ctx.dict_get(record, name) else { return Some(None) };
        let AttrData::Dense(d) = ctx.attr_data(attr) else { return None };
        let values = qopt_ir_core::dense_values_f64(ctx, d, ctx.element_type(d.ty))?;
        values.iter().all(|v| v.is_finite()).then_some(Some(values))
    };
    let min = field("channel_min")??;
    let offset = field("absorbed")?.unwrap_or_else(|| vec![0.0; min.len()]);
    (offset.len() == min.len()).then_some(qopt_ir_core::interfaces::ChannelMinima { min, offset })
}

/// Integers read from an integer array attribute.
pub type IntArray = SmallVec<[i64; 4]>;

fn describe(ctx: &Context, attr: Attribute) -> String {
    let text = attr_to_string(ctx, attr);
    if text.len() > 60 {
        let cut =
            text.char_indices().take_while(|(i, _)| *i < 57).last().map_or(0, |(i, c)| i + c.len_utf8());
        format!("{}...", &text[..cut])
    } else {
        text
    }
}

fn read_int(ctx: &Context, attr: Attribute) -> Option<i64> {
    ctx.attr_as_int(attr).and_then(|v| i64::try_from(v).ok())
}

// ---- integer arrays ---------------------------------------------------------

/// The integer array `name`, or `None` if the op does not have it. `len`, when
/// given, is the required number of elements.
pub fn opt_int_array_in(
    ctx: &Context,
    attrs: Attribute,
    name: &str,
    len: Option<usize>,
) -> Result<Option<IntArray>, String> {
    let Some(attr) = ctx.dict_get(attrs, name) else { return Ok(None) };
    let bad = || format!("'{name}' must be an array of integers, got {}", describe(ctx, attr));
    let items = ctx.attr_as_array(attr).ok_or_else(bad)?;
    let mut out = IntArray::with_capacity(items.len());
    for &item in items {
        out.push(read_int(ctx, item).ok_or_else(bad)?);
    }
    if let Some(len) = len {
        if out.len() != len {
            let plural = if len == 1 { "" } else { "s" };
            return Err(format!("'{name}' must have {len} element{plural}, got {}", out.len()));
        }
    }
    Ok(Some(out))
}

/// [`opt_int_array_in`] over an op.
pub fn opt_int_array(view: &OpView<'_>, name: &str, len: Option<usize>) -> Result<Option<IntArray>, String> {
    opt_int_array_in(view.ctx, view.attrs(), name, len)
}

/// The integer array `name` (`default` when missing; `len`, when given, is the
/// required number of elements of a present attribute).
pub fn int_array_in(
    ctx: &Context,
    attrs: Attribute,
    name: &str,
    len: Option<usize>,
    default: &[i64],
) -> Result<IntArray, String> {
    Ok(opt_int_array_in(ctx, attrs, name, len)?.unwrap_or_else(|| default.into()))
}

/// [`int_array_in`] over an op.
pub fn int_array(
    view: &OpView<'_>,
    name: &str,
    len: Option<usize>,
    default: &[i64],
) -> Result<IntArray, String> {
    int_array_in(view.ctx, view.attrs(), name, len, default)
}

/// [`int_array_in`] whose every element must be at least `min` (`stride` ≥ 1,
/// `pad` ≥ 0, ...).
pub fn int_array_at_least_in(
    ctx: &Context,
    attrs: Attribute,
    name: &str,
    len: Option<usize>,
    default: &[i64],
    min: i64,
) -> Result<IntArray, String> {
    let values = int_array_in(ctx, attrs, name, len, default)?;
    check_at_least(name, &values, min)?;
    Ok(values)
}

/// [`int_array_at_least_in`] over an op.
pub fn int_array_at_least(
    view: &OpView<'_>,
    name: &str,
    len: Option<usize>,
    default: &[i64],
    min: i64,
) -> Result<IntArray, String> {
    int_array_at_least_in(view.ctx, view.attrs(), name, len, default, min)
}

/// An error naming `name` if some value is below `min`.
pub fn check_at_least(name: &str, values: &[i64], min: i64) -> Result<(), String> {
    match values.iter().find(|&&v| v < min) {
        Some(v) => Err(format!("'{name}' values must be at least {min}, got {v}")),
        None => Ok(()),
    }
}

// ---- integers ---------------------------------------------------------------

/// The integer `name`, or `None` if missing.
pub fn opt_int_in(ctx: &Context, attrs: Attribute, name: &str) -> Result<Option<i64>, String> {
    let Some(attr) = ctx.dict_get(attrs, name) else { return Ok(None) };
    read_int(ctx, attr)
        .map(Some)
        .ok_or_else(|| format!("'{name}' must be an integer, got {}", describe(ctx, attr)))
}

/// [`opt_int_in`] over an op.
pub fn opt_int(view: &OpView<'_>, name: &str) -> Result<Option<i64>, String> {
    opt_int_in(view.ctx, view.attrs(), name)
}

/// The integer `name`, `default` when missing.
pub fn int_in(ctx: &Context, attrs: Attribute, name: &str, default: i64) -> Result<i64, String> {
    Ok(opt_int_in(ctx, attrs, name)?.unwrap_or(default))
}

/// [`int_in`] over an op.
pub fn int(view: &OpView<'_>, name: &str, default: i64) -> Result<i64, String> {
    int_in(view.ctx, view.attrs(), name, default)
}

// ---- floats -----------------------------------------------------------------

/// The float `name` widened to f64, or `None` if missing. NaN is rejected: no
/// attribute of these dialects means anything with it.
pub fn opt_float_in(ctx: &Context, attrs: Attribute, name: &str) -> Result<Option<f64>, String> {
    let Some(attr) = ctx.dict_get(attrs, name) else { return Ok(None) };
    match ctx.attr_as_f64(attr) {
        Some(v) if v.is_nan() => Err(format!("'{name}' must not be NaN")),
        Some(v) => Ok(Some(v)),
        None => Err(format!("'{name}' must be a float (like 1.0 : f32), got {}", describe(ctx, attr))),
    }
}

/// [`opt_float_in`] over an op.
pub fn opt_float(view: &OpView<'_>, name: &str) -> Result<Option<f64>, String> {
    opt_float_in(view.ctx, view.attrs(), name)
}

/// The float `name`, `default` when missing.
pub fn float_in(ctx: &Context, attrs: Attribute, name: &str, default: f64) -> Result<f64, String> {
    Ok(opt_float_in(ctx, attrs, name)?.unwrap_or(default))
}

/// [`float_in`] over an op.
pub fn float(view: &OpView<'_>, name: &str, default: f64) -> Result<f64, String> {
    float_in(view.ctx, view.attrs(), name, default)
}

/// The float array `name` (each element a float attribute of any float type,
/// widened to f64), or `None` if the op does not have it. `len`, when given, is
/// the required number of elements. NaN elements are rejected.
pub fn opt_float_array_in(
    ctx: &Context,
    attrs: Attribute,
    name: &str,
    len: Option<usize>,
) -> Result<Option<SmallVec<[f64; 4]>>, String> {
    let Some(attr) = ctx.dict_get(attrs, name) else { return Ok(None) };
    let bad = || format!("'{name}' must be an array of floats, got {}", describe(ctx, attr));
    let items = ctx.attr_as_array(attr).ok_or_else(bad)?;
    let mut out = SmallVec::with_capacity(items.len());
    for &item in items {
        let v = ctx.attr_as_f64(item).ok_or_else(bad)?;
        if v.is_nan() {
            return Err(format!("'{name}' must not contain NaN"));
        }
        out.push(v);
    }
    if let Some(len) = len {
        if out.len() != len {
            let plural = if len == 1 { "" } else { "s" };
            return Err(format!("'{name}' must have {len} element{plural}, got {}", out.len()));
        }
    }
    Ok(Some(out))
}

// ---- strings and flags ------------------------------------------------------

/// The string `name`, `default` when missing.
pub fn string_in<'c>(
    ctx: &'c Context,
    attrs: Attribute,
    name: &str,
    default: &'c str,
) -> Result<&'c str, String> {
    let Some(attr) = ctx.dict_get(attrs, name) else { return Ok(default) };
    ctx.attr_as_str(attr).ok_or_else(|| format!("'{name}' must be a string, got {}", describe(ctx, attr)))
}

/// [`string_in`] over an op.
pub fn string<'c>(view: &OpView<'c>, name: &str, default: &'c str) -> Result<&'c str, String> {
    string_in(view.ctx, view.attrs(), name, default)
}

/// The string `name` (or `default`), which must be one of `allowed`.
pub fn one_of_in<'c>(
    ctx: &'c Context,
    attrs: Attribute,
    name: &str,
    default: &'c str,
    allowed: &[&str],
) -> Result<&'c str, String> {
    let value = string_in(ctx, attrs, name, default)?;
    if allowed.contains(&value) {
        return Ok(value);
    }
    let list: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
    Err(format!("'{name}' must be one of {}, got \"{value}\"", list.join(", ")))
}

/// [`one_of_in`] over an op.
pub fn one_of<'c>(
    view: &OpView<'c>,
    name: &str,
    default: &'c str,
    allowed: &[&str],
) -> Result<&'c str, String> {
    one_of_in(view.ctx, view.attrs(), name, default, allowed)
}

/// The flag `name` (`true` / `false`), `default` when missing.
pub fn boolean_in(ctx: &Context, attrs: Attribute, name: &str, default: bool) -> Result<bool, String> {
    let Some(attr) = ctx.dict_get(attrs, name) else { return Ok(default) };
    match ctx.attr_data(attr) {
        AttrData::Bool(b) => Ok(*b),
        _ => Err(format!("'{name}' must be true or false, got {}", describe(ctx, attr))),
    }
}

/// [`boolean_in`] over an op.
pub fn boolean(view: &OpView<'_>, name: &str, default: bool) -> Result<bool, String> {
    boolean_in(view.ctx, view.attrs(), name, default)
}

// ---- window attributes of convolutions and pools ----------------------------

/// The checked window attributes of a convolution over `n` spatial dimensions
/// (`fp.conv1d`, `fp.conv2d`, and the `qnn` convolutions): `stride` (default
/// ones, each ≥ 1), `pad` (`n` begin paddings then `n` end paddings, ONNX
/// `pads` order; default zeros, each ≥ 0), `dilation` (default ones, each ≥ 1)
/// and `groups` (default 1, ≥ 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvAttrs {
    /// Step per spatial dimension.
    pub stride: IntArray,
    /// Begin paddings, then end paddings.
    pub pad: IntArray,
    /// Kernel dilation per spatial dimension.
    pub dilation: IntArray,
    /// Channel groups.
    pub groups: i64,
}

impl ConvAttrs {
    /// What a convolution over `n` spatial dimensions reads for the window
    /// attributes it leaves out: stride and dilation ones, no padding, one
    /// group. The one source of these defaults: [`read_in`](Self::read_in)
    /// reads missing attributes as these, and
    /// [`default_attributes`](Self::default_attributes) declares them to the
    /// equivalence checker.
    pub fn defaults(n: usize) -> ConvAttrs {
        ConvAttrs {
            stride: smallvec::smallvec![1; n],
            pad: smallvec::smallvec![0; 2 * n],
            dilation: smallvec::smallvec![1; n],
            groups: 1,
        }
    }

    /// [`defaults`](Self::defaults) as attributes by name, for the
    /// [`AttributeDefaults`](qopt_ir_core::interfaces::AttributeDefaults)
    /// interface of the convolution ops.
    pub fn default_attributes(ctx: &mut Context, n: usize) -> Vec<(&'static str, Attribute)> {
        let d = Self::defaults(n);
        vec![
            ("stride", ctx.i64_array_attr(&d.stride)),
            ("pad", ctx.i64_array_attr(&d.pad)),
            ("dilation", ctx.i64_array_attr(&d.dilation)),
            ("groups", ctx.i64_attr(d.groups)),
        ]
    }

    /// Reads and checks the attributes of a convolution over `n` spatial dimensions.
    pub fn read_in(ctx: &Context, attrs: Attribute, n: usize) -> Result<ConvAttrs, String> {
        let d = Self::defaults(n);
        let stride = int_array_at_least_in(ctx, attrs, "stride", Some(n), &d.stride, 1)?;
        let pad = int_array_at_least_in(ctx, attrs, "pad", Some(2 * n), &d.pad, 0)?;
        let dilation = int_array_at_least_in(ctx, attrs, "dilation", Some(n), &d.dilation, 1)?;
        let groups = int_in(ctx, attrs, "groups", d.groups)?;
        if groups < 1 {
            return Err(format!("'groups' must be at least 1, got {groups}"));
        }
        Ok(ConvAttrs { stride, pad, dilation, groups })
    }

    /// [`Self::read_in`] over an op.
    pub fn read(view: &OpView<'_>, n: usize) -> Result<ConvAttrs, String> {
        Self::read_in(view.ctx, view.attrs(), n)
    }
}

/// The checked attributes of a transposed convolution over `n` spatial
/// dimensions (`fp.conv_transpose1d`, `fp.conv_transpose2d`): the window of
/// [`ConvAttrs`] (`stride`, `pad`, `dilation`, `groups`, with the same
/// defaults and ranges; `pad` crops the full output) and `output_padding`
/// (default zeros), extra positions at the end of each spatial dimension,
/// each at least 0 and smaller than the larger of that dimension's stride
/// and dilation (as ONNX Runtime and PyTorch require).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvTransposeAttrs {
    /// The window: stride, paddings, dilation, groups.
    pub window: ConvAttrs,
    /// Extra positions at the end of each spatial dimension.
    pub output_padding: IntArray,
}

impl ConvTransposeAttrs {
    /// What a transposed convolution over `n` spatial dimensions reads for
    /// the attributes it leaves out: the window of [`ConvAttrs::defaults`]
    /// and no output padding (the source for
    /// [`read_in`](Self::read_in) and
    /// [`default_attributes`](Self::default_attributes)).
    pub fn defaults(n: usize) -> ConvTransposeAttrs {
        ConvTransposeAttrs { window: ConvAttrs::defaults(n), output_padding: smallvec::smallvec![0; n] }
    }

    /// [`defaults`](Self::defaults) as attributes by name, for the
    /// [`AttributeDefaults`](qopt_ir_core::interfaces::AttributeDefaults)
    /// interface of the transposed convolution ops.
    pub fn default_attributes(ctx: &mut Context, n: usize) -> Vec<(&'static str, Attribute)> {
        let mut out = ConvAttrs::default_attributes(ctx, n);
        out.push(("output_padding", ctx.i64_array_attr(&Self::defaults(n).output_padding)));
        out
    }

    /// Reads and checks the attributes of a transposed convolution over `n`
    /// spatial dimensions.
    pub fn read_in(ctx: &Context, attrs: Attribute, n: usize) -> Result<ConvTransposeAttrs, String> {
        let window = ConvAttrs::read_in(ctx, attrs, n)?;
        let default_padding = Self::defaults(n).output_padding;
        let output_padding =
            int_array_at_least_in(ctx, attrs, "output_padding", Some(n), &default_padding, 0)?;
        for i in 0..n {
            let limit = window.stride[i].max(window.dilation[i]);
            if output_padding[i] >= limit {
                return Err(format!(
                    "'output_padding' values must be smaller than the stride or the dilation, whichever \
                     is larger ({limit} along dimension {}), got {}",
                    2 + i,
                    output_padding[i]
                ));
            }
        }
        Ok(ConvTransposeAttrs { window, output_padding })
    }

    /// [`Self::read_in`] over an op.
    pub fn read(view: &OpView<'_>, n: usize) -> Result<ConvTransposeAttrs, String> {
        Self::read_in(view.ctx, view.attrs(), n)
    }
}

/// The checked window attributes of a pool over `n` spatial dimensions:
/// `kernel` (required, each ≥ 1), `stride` (default ones, as in ONNX), `pad` (begin
/// paddings then end paddings, default zeros, each smaller than the dilated
/// kernel so every window sees input), `dilation` (max pooling only, default
/// ones), `ceil_mode` and `count_include_pad` (average pooling only), both
/// default false.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolAttrs {
    /// Window size per spatial dimension.
    pub kernel: IntArray,
    /// Step per spatial dimension.
    pub stride: IntArray,
    /// Begin paddings, then end paddings.
    pub pad: IntArray,
    /// Window dilation (ones for average pooling).
    pub dilation: IntArray,
    /// Round the output size up (see [`crate::shape::pool_out`]).
    pub ceil_mode: bool,
    /// Average pooling: padding positions count in the divisor.
    pub count_include_pad: bool,
}

impl PoolAttrs {
    /// The `ceil_mode` and `count_include_pad` a pool reads when it leaves
    /// them out (`stride`, `pad` and `dilation` default as for a
    /// convolution, [`ConvAttrs::defaults`]).
    const DEFAULT_FLAGS: bool = false;

    /// What a pool over `n` spatial dimensions reads for the attributes it
    /// leaves out, by name, for the
    /// [`AttributeDefaults`](qopt_ir_core::interfaces::AttributeDefaults)
    /// interface of the pooling ops: `stride`, `pad`, `dilation` (max pools
    /// only), `ceil_mode` and `count_include_pad` (average pools only), the
    /// values [`read_in`](Self::read_in) uses.
    pub fn default_attributes(ctx: &mut Context, n: usize, max: bool) -> Vec<(&'static str, Attribute)> {
        let window = ConvAttrs::defaults(n);
        let flag = ctx.bool_attr(Self::DEFAULT_FLAGS);
        let mut out = vec![
            ("stride", ctx.i64_array_attr(&window.stride)),
            ("pad", ctx.i64_array_attr(&window.pad)),
            ("ceil_mode", flag),
        ];
        out.push(if max {
            ("dilation", ctx.i64_array_attr(&window.dilation))
        } else {
            ("count_include_pad", flag)
        });
        out
    }

    /// Reads and checks the attributes of a max pool (`max = true`: takes
    /// `dilation`) or an average pool (takes `count_include_pad`) over `n`
    /// spatial dimensions.
    pub fn read_in(ctx: &Context, attrs: Attribute, n: usize, max: bool) -> Result<PoolAttrs, String> {
        let kernel = opt_int_array_in(ctx, attrs, "kernel", Some(n))?
            .ok_or("needs a 'kernel' attribute (the window size)")?;
        check_at_least("kernel", &kernel, 1)?;
        let window = ConvAttrs::defaults(n);
        let stride = int_array_at_least_in(ctx, attrs, "stride", Some(n), &window.stride, 1)?;
        let pad = int_array_at_least_in(ctx, attrs, "pad", Some(2 * n), &window.pad, 0)?;
        let (dilation, count_include_pad) = if max {
            if ctx.dict_get(attrs, "count_include_pad").is_some() {
                return Err("does not take a 'count_include_pad' attribute".to_string());
            }
            (int_array_at_least_in(ctx, attrs, "dilation", Some(n), &window.dilation, 1)?, false)
        } else {
            if ctx.dict_get(attrs, "dilation").is_some() {
                return Err("does not take a 'dilation' attribute".to_string());
            }
            (window.dilation, boolean_in(ctx, attrs, "count_include_pad", Self::DEFAULT_FLAGS)?)
        };
        let ceil_mode = boolean_in(ctx, attrs, "ceil_mode", Self::DEFAULT_FLAGS)?;
        for i in 0..n {
            let extent = dilation[i].saturating_mul(kernel[i] - 1).saturating_add(1);
            for p in [pad[i], pad[n + i]] {
                if p >= extent {
                    return Err(format!(
                        "'pad' values must be smaller than the window ({extent} along dimension {}), got {p}",
                        2 + i
                    ));
                }
            }
        }
        Ok(PoolAttrs { kernel, stride, pad, dilation, ceil_mode, count_include_pad })
    }

    /// [`Self::read_in`] over an op.
    pub fn read(view: &OpView<'_>, n: usize, max: bool) -> Result<PoolAttrs, String> {
        Self::read_in(view.ctx, view.attrs(), n, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(ctx: &mut Context, entries: &[(&str, Attribute)]) -> Attribute {
        ctx.dict_attr(entries)
    }

    #[test]
    fn int_arrays() {
        let mut ctx = Context::new();
        let stride = ctx.i64_array_attr(&[2, 1]);
        let bad_len = ctx.i64_array_attr(&[1, 1, 1]);
        let zero = ctx.i64_array_attr(&[0, 1]);
        let f = ctx.float_attr(1.0, ctx.common().f32);
        let not_ints = ctx.array_attr(&[f]);
        let attrs = dict(&mut ctx, &[("stride", stride), ("dil", bad_len), ("zero", zero), ("f", not_ints)]);
        assert_eq!(int_array_in(&ctx, attrs, "stride", Some(2), &[1, 1]).unwrap().as_slice(), &[2, 1]);
        assert_eq!(int_array_in(&ctx, attrs, "missing", Some(2), &[1, 1]).unwrap().as_slice(), &[1, 1]);
        assert_eq!(opt_int_array_in(&ctx, attrs, "missing", None).unwrap(), None);
        assert_eq!(
            int_array_in(&ctx, attrs, "dil", Some(2), &[1, 1]).unwrap_err(),
            "'dil' must have 2 elements, got 3"
        );
        assert_eq!(
            int_array_at_least_in(&ctx, attrs, "zero", Some(2), &[1, 1], 1).unwrap_err(),
            "'zero' values must be at least 1, got 0"
        );
        assert_eq!(
            int_array_in(&ctx, attrs, "f", None, &[]).unwrap_err(),
            "'f' must be an array of integers, got [1.0 : f32]"
        );
        assert_eq!(
            int_array_in(&ctx, attrs, "stride", Some(1), &[1]).unwrap_err(),
            "'stride' must have 1 element, got 2"
        );
    }

    /// A dictionary holding exactly the declared defaults reads as one
    /// holding none, and each declared name is one the reader reads (a
    /// malformed value under it is an error naming it): the declarations and
    /// the readers agree.
    #[test]
    fn declared_defaults_read_as_missing_attributes() {
        let mut ctx = Context::new();
        let malformed = ctx.string_attr("malformed");
        for n in [1, 2] {
            let kernel = ctx.i64_array_attr(&vec![2; n]);
            // (declared defaults, required attributes, the reader)
            type Entries = Vec<(&'static str, Attribute)>;
            type Read = fn(&Context, Attribute, usize) -> Result<String, String>;
            let readers: [(Entries, Entries, Read); 4] = [
                (ConvAttrs::default_attributes(&mut ctx, n), vec![], |c, a, n| {
                    ConvAttrs::read_in(c, a, n).map(|r| format!("{r:?}"))
                }),
                (ConvTransposeAttrs::default_attributes(&mut ctx, n), vec![], |c, a, n| {
                    ConvTransposeAttrs::read_in(c, a, n).map(|r| format!("{r:?}"))
                }),
                (PoolAttrs::default_attributes(&mut ctx, n, true), vec![("kernel", kernel)], |c, a, n| {
                    PoolAttrs::read_in(c, a, n, true).map(|r| format!("{r:?}"))
                }),
                (PoolAttrs::default_attributes(&mut ctx, n, false), vec![("kernel", kernel)], |c, a, n| {
                    PoolAttrs::read_in(c, a, n, false).map(|r| format!("{r:?}"))
                }),
            ];
            for (declared, required, read) in readers {
                let bare = dict(&mut ctx, &required);
                let spelled = dict(&mut ctx, &[declared.clone(), required.clone()].concat());
                assert!(read(&ctx, bare, n).is_ok(), "{:?}", read(&ctx, bare, n));
                assert_eq!(read(&ctx, spelled, n), read(&ctx, bare, n), "{declared:?}");
                for &(name, _) in &declared {
                    let bad = dict(&mut ctx, &[vec![(name, malformed)], required.clone()].concat());
                    let e = read(&ctx, bad, n).unwrap_err();
                    assert!(e.contains(&format!("'{name}'")), "{name}: {e}");
                }
            }
        }
        assert_eq!(ConvTransposeAttrs::defaults(2).window, ConvAttrs::defaults(2));
    }

    #[test]
    fn scalars() {
        let mut ctx = Context::new();
        let axis = ctx.i64_attr(-1);
        let eps = ctx.float_attr(1e-5, ctx.common().f32);
        let nan = ctx.float_attr(f64::NAN, ctx.common().f32);
        let mode = ctx.string_attr("reflect");
        let yes = ctx.bool_attr(true);
        let attrs =
            dict(&mut ctx, &[("axis", axis), ("epsilon", eps), ("nan", nan), ("mode", mode), ("ceil", yes)]);
        assert_eq!(int_in(&ctx, attrs, "axis", 1), Ok(-1));
        assert_eq!(int_in(&ctx, attrs, "groups", 1), Ok(1));
        assert_eq!(
            int_in(&ctx, attrs, "epsilon", 1).unwrap_err(),
            "'epsilon' must be an integer, got 1e-5 : f32"
        );
        assert_eq!(float_in(&ctx, attrs, "epsilon", 0.0), Ok(1e-5f32 as f64));
        assert_eq!(opt_float_in(&ctx, attrs, "min"), Ok(None));
        assert_eq!(opt_float_in(&ctx, attrs, "nan").unwrap_err(), "'nan' must not be NaN");
        assert_eq!(
            float_in(&ctx, attrs, "axis", 0.0).unwrap_err(),
            "'axis' must be a float (like 1.0 : f32), got -1"
        );
        assert_eq!(string_in(&ctx, attrs, "mode", "constant"), Ok("reflect"));
        assert_eq!(string_in(&ctx, attrs, "other", "constant"), Ok("constant"));
        assert_eq!(
            one_of_in(&ctx, attrs, "mode", "constant", &["constant", "edge"]).unwrap_err(),
            "'mode' must be one of \"constant\", \"edge\", got \"reflect\""
        );
        assert_eq!(boolean_in(&ctx, attrs, "ceil", false), Ok(true));
        assert_eq!(boolean_in(&ctx, attrs, "other", false), Ok(false));
        assert_eq!(
            boolean_in(&ctx, attrs, "axis", false).unwrap_err(),
            "'axis' must be true or false, got -1"
        );
    }
}
