//! `accel.conv2d_relu`, the accelerator's fused int8 convolution + relu
//! engine, and [`check_conv`], the contract that says what the engine takes.
//!
//! The contract is the one source of truth: the op's verifier calls it with
//! the parameters the op implies (padding from the kernel, dilation 1, one
//! group, the engine's rounding), and `accel-lower` calls it with the
//! parameters of the `qnn.conv2d_relu` it would replace. So the pass never
//! builds an op that fails verification, and the reasons it gives for keeping
//! an op are the verifier's own words.
//!
//! What the engine computes is exactly `qnn.conv2d_relu` with those implied
//! parameters (`docs/quant-semantics.md` §6): the accelerator adds nothing to
//! the arithmetic, it only restricts shapes and types.

use qopt_dialect_fp::attrs;
use qopt_dialect_fp::shape::{conv_out, is_dynamic, shape_to_string, tensor_parts};
use qopt_dialect_qnn::quant_params;
use qopt_dialect_qnn::Rounding;
use qopt_ir_core::interfaces::QuantizableOp;
use qopt_ir_core::{type_to_string, Arity, Context, OpDef, OpView, QuantType, Signedness, Traits, Type};

/// How the engine rounds ties when it requantizes: fixed in silicon.
pub const ACCEL_ROUNDING: Rounding = Rounding::HalfAwayFromZero;

/// The only attribute `accel.conv2d_relu` has.
const STRIDE: &str = "stride";

/// The kernel sizes the engine takes (square kernels only).
pub const KERNEL_SIZES: [i64; 2] = [3, 1];

/// The strides the engine takes (the same along both spatial axes).
pub const STRIDES: [i64; 2] = [1, 2];

/// The padding the engine applies on every side of a `kernel`×`kernel`
/// convolution: 'same' for 3x3 (1), none for 1x1.
pub fn implied_pad(kernel: i64) -> i64 {
    kernel / 2
}

pub(crate) fn ops() -> Vec<OpDef> {
    vec![OpDef::new("accel.conv2d_relu", "the accelerator's fused int8 conv2d + relu engine (NCHW, batch 1)")
        .description(
            "`accel.conv2d_relu(x, w, b) {stride = [s, s]}` computes `qnn.conv2d_relu(x, w, b)` with \
             'same' padding for 3x3 kernels (`pad = [1, 1, 1, 1]`), no padding for 1x1 kernels, \
             dilation 1, one group and ties rounded half away from zero (`docs/quant-semantics.md` §6); \
             those parameters are fixed by the hardware and have no attributes. What the engine takes:\n\n\
             - `x`: `tensor<1xCxHxWx!qnn.uniform<i8:f32, s:zp>>`, i8 storage quantized per tensor, a \
               static shape, batch 1, `C` a multiple of 8;\n\
             - `w`: `tensor<OxCxKxKx...>` with i8 storage, quantized per tensor or per axis 0, `K` 3 \
               or 1, `O` a multiple of 8;\n\
             - `b`: `tensor<Oxi32>`, in units of `s_x × s_w[o]` (required: the lowering supplies zeros \
               when the model has no bias);\n\
             - `stride = [s, s]` with `s` 1 or 2 (required);\n\
             - the result: `tensor<1xOxH'xW'>` with i8 storage quantized per tensor.\n\n\
             The result type is written, not inferred: its scale and zero point are chosen by \
             calibration. The verifier names the first rule an op breaks.\n\n\
             ```\n%y = accel.conv2d_relu(%x, %w, %b) {stride = [1, 1]} : \
             (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>, tensor<16x8x3x3x!qnn.uniform<i8:f32, 0.01:0>>, \
             tensor<16xi32>) -> tensor<1x16x4x4x!qnn.uniform<i8:f32, 0.1:-128>>\n```",
        )
        .operands(Arity::Exact(3))
        .traits(Traits::PURE)
        .verifier(verify_conv2d_relu)
        .interface(QuantizableOp::weighted(0, 1, Some(2), 0))]
}

/// The parameters of a convolution as `qnn.conv2d_relu` spells them, for
/// [`check_conv`]. `pad: None` means "the padding the engine implies".
#[derive(Clone, Debug, PartialEq)]
pub struct ConvParams<'a> {
    /// `[stride_h, stride_w]`.
    pub stride: &'a [i64],
    /// `[top, left, bottom, right]`, or `None` for the implied padding.
    pub pad: Option<&'a [i64]>,
    /// `[dilation_h, dilation_w]`.
    pub dilation: &'a [i64],
    /// Number of groups.
    pub groups: i64,
    /// How requantization rounds ties.
    pub rounding: Rounding,
}

impl ConvParams<'_> {
    /// The parameters of `accel.conv2d_relu {stride = stride}`.
    pub fn implied(stride: &[i64]) -> ConvParams<'_> {
        ConvParams { stride, pad: None, dilation: &[1, 1], groups: 1, rounding: ACCEL_ROUNDING }
    }
}

/// A convolution the engine takes, as [`check_conv`] measured it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ConvContract {
    /// Input channels `C`.
    pub channels: i64,
    /// Output channels `O`.
    pub out_channels: i64,
    /// Kernel size `K` (3 or 1).
    pub kernel: i64,
    /// The stride `s` along both spatial axes (1 or 2).
    pub stride: i64,
    /// The result shape `1xOxH'xW'`.
    pub out_shape: [i64; 4],
}

/// Checks a convolution against the accelerator's contract (see the op's
/// description): operand types `x`, `w`, `b` (`None`: no bias, the lowering
/// will supply zeros), the result type and the parameters. Returns what the
/// engine would run, or every rule broken, in a fixed order (operands, then
/// parameters, then the result), each a sentence without the op's name.
pub fn check_conv(
    ctx: &Context,
    x: Type,
    w: Type,
    b: Option<Type>,
    result: Type,
    params: &ConvParams<'_>,
) -> Result<ConvContract, Vec<String>> {
    check_conv_with(ctx, x, w, b, result, params, Elements::Quantized)
}

/// Which element types [`check_conv_with`] demands of the operands and the result.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Elements {
    /// What the engine runs: i8 quantized input, weight and result, i32 bias.
    Quantized,
    /// A float (f32) convolution that the vendor's quantizer (`accel-quantize`)
    /// gives the engine's types; its shapes and parameters must already fit,
    /// and the bias is `tensor<Oxf32>`. Rounding is the quantizer's to choose,
    /// so `params.rounding` should be [`ACCEL_ROUNDING`].
    Float,
}

/// [`check_conv`] with the element types `elements` demands: every other
/// rule (shapes, channel multiples, kernel, stride, padding, dilation,
/// groups, rounding) is the same contract.
pub fn check_conv_with(
    ctx: &Context,
    x: Type,
    w: Type,
    b: Option<Type>,
    result: Type,
    params: &ConvParams<'_>,
    elements: Elements,
) -> Result<ConvContract, Vec<String>> {
    let element = |ty: Type, what: &str, per_axis_ok: bool| match elements {
        Elements::Quantized => i8_element(ctx, ty, what, per_axis_ok),
        Elements::Float => f32_element(ctx, ty, what),
    };
    let mut problems = Vec::new();
    let mut note = |r: Result<(), String>| {
        if let Err(e) = r {
            problems.push(e);
        }
    };

    // Operands. Each check needs only its own operand, so all of them report.
    let input = static_nchw(ctx, x, "input", "1xCxHxW");
    let weight = static_nchw(ctx, w, "weight", "OxCxKxK");
    let (mut channels, mut out_channels, mut kernel) = (None, None, None);
    match &input {
        Ok(shape) => {
            if shape[0] != 1 {
                note(Err(format!("batch size must be 1, got {}", shape[0])));
            }
            note(multiple_of_8("input channels", shape[1]));
            channels = Some(shape[1]);
        }
        Err(e) => note(Err(e.clone())),
    }
    note(element(x, "input", false));
    match &weight {
        Ok(shape) => {
            let (kh, kw) = (shape[2], shape[3]);
            if kh != kw || !KERNEL_SIZES.contains(&kh) {
                note(Err(format!("{kh}x{kw} kernels are not supported (the accelerator takes 3x3 and 1x1)")));
            } else {
                kernel = Some(kh);
            }
            note(multiple_of_8("output channels", shape[0]));
            out_channels = Some(shape[0]);
            // A grouped convolution's weight sees C / groups channels; that
            // mismatch is the groups rule's to report, not this one's.
            if let Some(c) = channels {
                if shape[1].checked_mul(params.groups) != Some(c) {
                    note(Err(format!("the weight has {} input channels but the input has {c}", shape[1])));
                }
            }
        }
        Err(e) => note(Err(e.clone())),
    }
    note(element(w, "weight", true));
    if let (Some(b), Some(o)) = (b, out_channels) {
        let bias_element = match elements {
            Elements::Quantized => ctx.common().i32,
            Elements::Float => ctx.common().f32,
        };
        note(bias(ctx, b, o, bias_element));
    }

    // Parameters.
    let stride = match params.stride {
        [s, t] if s == t && STRIDES.contains(s) => Some(*s),
        other => {
            note(Err(format!(
                "stride {} is not supported (the accelerator takes [1, 1] and [2, 2])",
                list(other)
            )));
            None
        }
    };
    let mut pad_ok = true;
    if let (Some(pad), Some(k)) = (params.pad, kernel) {
        let p = implied_pad(k);
        if pad != [p; 4] {
            pad_ok = false;
            note(Err(format!(
                "pad {} is not supported for {k}x{k} kernels (the accelerator pads them by {})",
                list(pad),
                list(&[p; 4])
            )));
        }
    }
    if params.dilation != [1, 1] {
        note(Err(format!(
            "dilation {} is not supported (the accelerator takes [1, 1])",
            list(params.dilation)
        )));
    }
    if params.groups != 1 {
        note(Err(format!(
            "grouped convolutions (groups = {}) are not supported (the accelerator takes groups = 1)",
            params.groups
        )));
    }
    if params.rounding != ACCEL_ROUNDING {
        note(Err(format!(
            "rounding \"{}\" is not supported (the accelerator rounds \"{}\")",
            params.rounding.name(),
            ACCEL_ROUNDING.name()
        )));
    }

    // The result: its element always; its shape once everything it follows
    // from is known to be right (else the expected shape means nothing).
    note(element(result, "result", false));
    let mut contract = None;
    if let (Ok(in_shape), Some(o), Some(k), Some(s), true) = (&input, out_channels, kernel, stride, pad_ok) {
        match spatial(in_shape, k, s) {
            Ok((h, w)) => {
                let want = [1, o, h, w];
                match tensor_parts(ctx, result) {
                    Some((got, _)) if got == want => {}
                    Some((got, _)) => note(Err(format!(
                        "result shape must be {} (1xOxH'xW' of the convolution), got {}",
                        shape_to_string(&want),
                        shape_to_string(got)
                    ))),
                    None => {
                        note(Err(format!("result must be a tensor, got {}", type_to_string(ctx, result))))
                    }
                }
                contract = Some(ConvContract {
                    channels: in_shape[1],
                    out_channels: o,
                    kernel: k,
                    stride: s,
                    out_shape: want,
                });
            }
            Err(e) => note(Err(e)),
        }
    }
    match contract {
        Some(c) if problems.is_empty() => Ok(c),
        _ => Err(problems),
    }
}

/// `[1, 2]`, as an attribute prints.
fn list(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// The shape of a rank-4 tensor with every size known.
fn static_nchw(ctx: &Context, ty: Type, what: &str, layout: &str) -> Result<[i64; 4], String> {
    let Some((shape, _)) = tensor_parts(ctx, ty) else {
        return Err(format!("{what} must be a tensor, got {}", type_to_string(ctx, ty)));
    };
    let Ok(shape) = <[i64; 4]>::try_from(shape) else {
        return Err(format!("{what} must have rank 4 ({layout}), got {}", type_to_string(ctx, ty)));
    };
    if shape.iter().any(|&d| is_dynamic(d)) {
        return Err(format!(
            "{what} must have a static shape (DMA transfers need their sizes), got {}",
            shape_to_string(&shape)
        ));
    }
    Ok(shape)
}

fn multiple_of_8(what: &str, n: i64) -> Result<(), String> {
    if n % 8 == 0 && n > 0 {
        Ok(())
    } else {
        Err(format!("{what} must be a positive multiple of 8, got {n}"))
    }
}

/// The element of `ty` must be quantized with i8 storage, per tensor (or per
/// axis 0 when `per_axis_ok`).
fn i8_element(ctx: &Context, ty: Type, what: &str, per_axis_ok: bool) -> Result<(), String> {
    let Some(q) = quant_params::quant_element(ctx, ty) else {
        return Err(format!(
            "{what} must be quantized with i8 storage (!qnn.uniform<i8:...>), got {}",
            type_to_string(ctx, ty)
        ));
    };
    if !is_i8(q) {
        let sign = if q.storage.signedness == Signedness::Unsigned { 'u' } else { 'i' };
        return Err(format!(
            "{what} must have i8 storage, got {sign}{} (the accelerator computes on i8)",
            q.storage.width
        ));
    }
    match quant_params::axis(q) {
        None => Ok(()),
        Some(0) if per_axis_ok => Ok(()),
        Some(axis) if per_axis_ok => Err(format!(
            "{what} must be quantized per tensor or per axis 0 (output channels), got axis {axis}"
        )),
        Some(_) => Err(format!("{what} must be quantized per tensor, got {}", type_to_string(ctx, ty))),
    }
}

fn is_i8(q: &QuantType) -> bool {
    q.storage.width == 8 && q.storage.signedness == Signedness::Signless
}

fn bias(ctx: &Context, b: Type, out_channels: i64, element: Type) -> Result<(), String> {
    let ok = match tensor_parts(ctx, b) {
        Some((&[n], elem)) => n == out_channels && elem == element,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        let element = type_to_string(ctx, element);
        Err(format!("bias must be tensor<{out_channels}x{element}>, got {}", type_to_string(ctx, b)))
    }
}

/// The element of `ty` must be f32 (what the quantizer takes).
fn f32_element(ctx: &Context, ty: Type, what: &str) -> Result<(), String> {
    match tensor_parts(ctx, ty) {
        Some((_, elem)) if elem == ctx.common().f32 => Ok(()),
        _ => Err(format!("{what} must be an f32 tensor to be quantized, got {}", type_to_string(ctx, ty))),
    }
}

/// `H'` and `W'` for kernel `k` at stride `s` with the implied padding.
fn spatial(input: &[i64; 4], k: i64, s: i64) -> Result<(i64, i64), String> {
    let p = implied_pad(k);
    let along = |d: usize| conv_out(input[d], k, s, p, p, 1).map_err(|e| format!("along dimension {d}: {e}"));
    Ok((along(2)?, along(3)?))
}

fn verify_conv2d_relu(v: &OpView<'_>) -> Result<(), String> {
    let ctx = v.ctx;
    for &(key, _) in ctx.dict_entries(v.attrs()) {
        let key = ctx.symbol_str(key);
        if key != STRIDE {
            return Err(format!(
                "has no attribute '{key}': its only attribute is 'stride'; padding, dilation, groups and \
                 rounding are fixed by the hardware"
            ));
        }
    }
    let stride = attrs::opt_int_array(v, STRIDE, Some(2))?
        .ok_or("needs a 'stride = [s, s]' attribute (s = 1 or 2)")?;
    let b = Some(v.operand_type(2));
    let params = ConvParams::implied(&stride);
    match check_conv(ctx, v.operand_type(0), v.operand_type(1), b, v.result_type(0), &params) {
        Ok(_) => Ok(()),
        Err(problems) => Err(problems.into_iter().next().unwrap_or_default()),
    }
}
