//! Shape arithmetic shared by type inference of the `fp` dialect and of other
//! dialects (`qnn` infers its conv and pool shapes with these).
//!
//! Shapes are `&[i64]` with [`DYNAMIC`] (`-1`, printed `?`) for unknown sizes.
//! Every function accepts dynamic sizes: a check that needs a size it does not
//! know is skipped, and a size computed from an unknown one is unknown. Nothing
//! here panics on any input; bad shapes give an error message meant to follow
//! the op name (`'fp.conv2d' op <message>`).

use qopt_ir_core::{type_to_string, Context, FloatKind, Type, TypeData, DYNAMIC};

/// The shape and element type of a tensor type, `None` for any other type.
pub fn tensor_parts(ctx: &Context, ty: Type) -> Option<(&[i64], Type)> {
    match ctx.type_data(ty) {
        TypeData::Tensor { shape, element } => Some((shape, *element)),
        _ => None,
    }
}

/// The shape and element type of operand `index` (counted from 0, for the
/// message), or an error if it is not a tensor.
pub fn operand_tensor(ctx: &Context, ty: Type, index: usize) -> Result<(&[i64], Type), String> {
    tensor_parts(ctx, ty)
        .ok_or_else(|| format!("operand #{index} must be a tensor, got {}", type_to_string(ctx, ty)))
}

/// True for the float element types of the `fp` dialect: f16, bf16, f32, f64.
pub fn is_float_element(ctx: &Context, elem: Type) -> bool {
    matches!(
        ctx.type_data(elem),
        TypeData::Float(FloatKind::F16 | FloatKind::BF16 | FloatKind::F32 | FloatKind::F64)
    )
}

/// True for quantized element types (`!qnn.uniform<...>`).
pub fn is_quant_element(ctx: &Context, elem: Type) -> bool {
    matches!(ctx.type_data(elem), TypeData::Quant(_))
}

/// True if `d` is the dynamic size `?`.
#[inline]
pub fn is_dynamic(d: i64) -> bool {
    d == DYNAMIC
}

/// True if two sizes may be equal: equal, or either unknown.
#[inline]
pub fn dims_compatible(a: i64, b: i64) -> bool {
    a == b || is_dynamic(a) || is_dynamic(b)
}

/// `1x?x4`, the shape as a tensor type spells it (`scalar` for rank 0).
pub fn shape_to_string(shape: &[i64]) -> String {
    if shape.is_empty() {
        return "scalar".to_string();
    }
    let dims: Vec<String> =
        shape.iter().map(|&d| if is_dynamic(d) { "?".into() } else { d.to_string() }).collect();
    dims.join("x")
}

/// Number of elements, `None` if a size is unknown or the count overflows.
pub fn num_elements(shape: &[i64]) -> Option<i64> {
    shape.iter().try_fold(1i64, |acc, &d| if d < 0 { None } else { acc.checked_mul(d) })
}

/// The index of `axis` in a tensor of rank `rank`: `axis` may be negative
/// (counting from the back, ONNX style) and must lie in `[-rank, rank)`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} is out of range for rank {rank} (expected {} to {})", -r, r - 1));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// Numpy broadcasting of two shapes: aligned from the back, sizes must be equal
/// or one of them 1. With unknown sizes (MLIR's rule): `?` and `1` give `?`,
/// `?` and `n > 1` give `n` (the op fails at run time otherwise), `?` and `?`
/// give `?`.
pub fn broadcast(a: &[i64], b: &[i64]) -> Result<Vec<i64>, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let x = if i < rank - a.len() { 1 } else { a[i - (rank - a.len())] };
        let y = if i < rank - b.len() { 1 } else { b[i - (rank - b.len())] };
        out[i] = match (x, y) {
            _ if x == y => x,
            (1, _) => y,
            (_, 1) => x,
            (DYNAMIC, _) => y,
            (_, DYNAMIC) => x,
            _ => {
                return Err(format!(
                    "shapes {} and {} cannot be broadcast (dimension {i} of the result: {x} vs {y})",
                    shape_to_string(a),
                    shape_to_string(b)
                ))
            }
        };
    }
    Ok(out)
}

fn check_window(kernel: i64, stride: i64, pad_begin: i64, pad_end: i64, dilation: i64) -> Result<(), String> {
    if kernel < 1 && !is_dynamic(kernel) {
        return Err(format!("kernel size must be at least 1, got {kernel}"));
    }
    if stride < 1 {
        return Err(format!("stride must be at least 1, got {stride}"));
    }
    if dilation < 1 {
        return Err(format!("dilation must be at least 1, got {dilation}"));
    }
    if pad_begin < 0 || pad_end < 0 {
        return Err(format!("padding must be non-negative, got {pad_begin} and {pad_end}"));
    }
    Ok(())
}

/// `(padded input - dilated kernel)` for a window: the span the window's start
/// can move over; `None` when any size is unknown.
fn window_span(
    input: i64,
    kernel: i64,
    pad_begin: i64,
    pad_end: i64,
    dilation: i64,
) -> Result<Option<i64>, String> {
    if is_dynamic(input) || is_dynamic(kernel) {
        return Ok(None);
    }
    if input < 0 {
        return Err(format!("input size must be non-negative, got {input}"));
    }
    let padded = input.checked_add(pad_begin).and_then(|v| v.checked_add(pad_end));
    let effective = dilation.checked_mul(kernel - 1).and_then(|v| v.checked_add(1));
    let (Some(padded), Some(effective)) = (padded, effective) else {
        return Err("window sizes overflow".to_string());
    };
    if effective > padded {
        return Err(format!(
            "window of {effective} (kernel {kernel}, dilation {dilation}) is larger than the padded input of {padded}"
        ));
    }
    Ok(Some(padded - effective))
}

/// The output size of a convolution along one spatial axis (ONNX):
/// `(input + pad_begin + pad_end - dilation * (kernel - 1) - 1) / stride + 1`,
/// rounded down. Unknown input or kernel gives unknown output. Errors when the
/// dilated kernel does not fit the padded input, or a parameter is out of range.
pub fn conv_out(
    input: i64,
    kernel: i64,
    stride: i64,
    pad_begin: i64,
    pad_end: i64,
    dilation: i64,
) -> Result<i64, String> {
    check_window(kernel, stride, pad_begin, pad_end, dilation)?;
    Ok(match window_span(input, kernel, pad_begin, pad_end, dilation)? {
        None => DYNAMIC,
        Some(span) => span / stride + 1,
    })
}

/// The output size of a transposed convolution along one spatial axis (ONNX
/// ConvTranspose with explicit pads):
/// `stride · (input - 1) + output_padding + dilation · (kernel - 1) + 1 - pad_begin - pad_end`.
/// Unknown input or kernel gives unknown output. Errors when a parameter is
/// out of range (stride and dilation ≥ 1, paddings ≥ 0, input ≥ 1), when the
/// paddings remove the whole output, or on overflow.
pub fn conv_transpose_out(
    input: i64,
    kernel: i64,
    stride: i64,
    pad_begin: i64,
    pad_end: i64,
    dilation: i64,
    output_padding: i64,
) -> Result<i64, String> {
    check_window(kernel, stride, pad_begin, pad_end, dilation)?;
    if output_padding < 0 {
        return Err(format!("output padding must be non-negative, got {output_padding}"));
    }
    if is_dynamic(input) || is_dynamic(kernel) {
        return Ok(DYNAMIC);
    }
    if input < 1 {
        return Err(format!("input size must be at least 1, got {input}"));
    }
    let full = (|| {
        stride
            .checked_mul(input - 1)?
            .checked_add(output_padding)?
            .checked_add(dilation.checked_mul(kernel - 1)?)?
            .checked_add(1)
    })()
    .ok_or("window sizes overflow")?;
    let pads = pad_begin.checked_add(pad_end).ok_or("window sizes overflow")?;
    if pads >= full {
        return Err(format!(
            "paddings {pad_begin} and {pad_end} remove the whole output of {full} (input {input}, \
             kernel {kernel}, stride {stride}, dilation {dilation}, output padding {output_padding})"
        ));
    }
    Ok(full - pads)
}

/// The output size of a pooling window along one spatial axis (ONNX MaxPool /
/// AveragePool). Without `ceil_mode` it is [`conv_out`]. With `ceil_mode` the
/// division rounds up, but a last window that would start in the end padding
/// (at or after `input + pad_begin`) is dropped, as ONNX Runtime and PyTorch do.
pub fn pool_out(
    input: i64,
    kernel: i64,
    stride: i64,
    pad_begin: i64,
    pad_end: i64,
    dilation: i64,
    ceil_mode: bool,
) -> Result<i64, String> {
    check_window(kernel, stride, pad_begin, pad_end, dilation)?;
    let Some(span) = window_span(input, kernel, pad_begin, pad_end, dilation)? else { return Ok(DYNAMIC) };
    if !ceil_mode {
        return Ok(span / stride + 1);
    }
    let mut out = span / stride + i64::from(span % stride != 0) + 1;
    if (out as i128 - 1) * stride as i128 >= input as i128 + pad_begin as i128 {
        out -= 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    const Q: i64 = DYNAMIC;

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast(&[2, 3], &[3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast(&[4, 1, 5], &[3, 1]).unwrap(), vec![4, 3, 5]);
        assert_eq!(broadcast(&[], &[2, 2]).unwrap(), vec![2, 2]);
        assert_eq!(broadcast(&[1], &[]).unwrap(), vec![1]);
        assert_eq!(broadcast(&[0, 3], &[1, 3]).unwrap(), vec![0, 3]);
        assert_eq!(broadcast(&[Q, 3], &[1, 3]).unwrap(), vec![Q, 3]);
        assert_eq!(broadcast(&[Q, 3], &[5, 3]).unwrap(), vec![5, 3]);
        assert_eq!(broadcast(&[Q], &[Q]).unwrap(), vec![Q]);
        assert_eq!(broadcast(&[1, Q], &[4]).unwrap(), vec![1, 4]);
        assert_eq!(
            broadcast(&[2, 3], &[4]).unwrap_err(),
            "shapes 2x3 and 4 cannot be broadcast (dimension 1 of the result: 3 vs 4)"
        );
        assert!(broadcast(&[2, 1], &[3, 1]).is_err());
    }

    #[test]
    fn conv_sizes() {
        // 224, k7 s2 p3: ResNet stem.
        assert_eq!(conv_out(224, 7, 2, 3, 3, 1), Ok(112));
        assert_eq!(conv_out(5, 3, 1, 0, 0, 1), Ok(3));
        assert_eq!(conv_out(5, 3, 1, 1, 1, 1), Ok(5));
        // Rounds down; asymmetric padding.
        assert_eq!(conv_out(6, 3, 2, 0, 0, 1), Ok(2));
        assert_eq!(conv_out(6, 3, 2, 0, 1, 1), Ok(3));
        // Dilation 2 makes a 3-kernel span 5.
        assert_eq!(conv_out(7, 3, 1, 0, 0, 2), Ok(3));
        assert_eq!(conv_out(Q, 3, 1, 1, 1, 1), Ok(Q));
        assert_eq!(conv_out(8, Q, 1, 0, 0, 1), Ok(Q));
        assert_eq!(
            conv_out(2, 3, 1, 0, 0, 1).unwrap_err(),
            "window of 3 (kernel 3, dilation 1) is larger than the padded input of 2"
        );
        assert_eq!(conv_out(8, 3, 0, 0, 0, 1).unwrap_err(), "stride must be at least 1, got 0");
        assert_eq!(conv_out(8, 3, 1, -1, 0, 1).unwrap_err(), "padding must be non-negative, got -1 and 0");
        assert_eq!(conv_out(8, 3, 1, 0, 0, 0).unwrap_err(), "dilation must be at least 1, got 0");
        assert_eq!(conv_out(8, 0, 1, 0, 0, 1).unwrap_err(), "kernel size must be at least 1, got 0");
        assert!(conv_out(i64::MAX, 3, 1, 1, 1, 1).is_err());
    }

    #[test]
    fn conv_transpose_sizes() {
        // 3 → 5 with a 3-kernel; stride 2: 2·2 + 3 = 7; pads and output padding.
        assert_eq!(conv_transpose_out(3, 3, 1, 0, 0, 1, 0), Ok(5));
        assert_eq!(conv_transpose_out(3, 3, 2, 0, 0, 1, 0), Ok(7));
        assert_eq!(conv_transpose_out(3, 3, 2, 1, 0, 1, 1), Ok(7));
        assert_eq!(conv_transpose_out(3, 3, 3, 1, 1, 1, 0), Ok(7));
        // Dilation 2 makes a 2-kernel span 3: 1·2 + 3 = 5.
        assert_eq!(conv_transpose_out(3, 2, 1, 0, 0, 2, 0), Ok(5));
        assert_eq!(conv_transpose_out(Q, 3, 2, 0, 0, 1, 0), Ok(Q));
        assert_eq!(conv_transpose_out(4, Q, 2, 0, 0, 1, 0), Ok(Q));
        assert_eq!(
            conv_transpose_out(1, 1, 1, 1, 0, 1, 0).unwrap_err(),
            "paddings 1 and 0 remove the whole output of 1 (input 1, kernel 1, stride 1, dilation 1, \
             output padding 0)"
        );
        assert_eq!(
            conv_transpose_out(0, 3, 1, 0, 0, 1, 0).unwrap_err(),
            "input size must be at least 1, got 0"
        );
        assert_eq!(
            conv_transpose_out(3, 3, 1, 0, 0, 1, -1).unwrap_err(),
            "output padding must be non-negative, got -1"
        );
        assert_eq!(
            conv_transpose_out(3, 3, 1, -1, 0, 1, 0).unwrap_err(),
            "padding must be non-negative, got -1 and 0"
        );
        assert!(conv_transpose_out(i64::MAX, 3, 2, 0, 0, 1, 0).is_err());
        assert!(conv_transpose_out(3, 3, 1, i64::MAX, i64::MAX, 1, 0).is_err());
    }

    #[test]
    fn pool_sizes() {
        // 112, k3 s2 p1: ResNet max pool.
        assert_eq!(pool_out(112, 3, 2, 1, 1, 1, false), Ok(56));
        assert_eq!(pool_out(6, 2, 2, 0, 0, 1, false), Ok(3));
        // floor vs ceil.
        assert_eq!(pool_out(5, 2, 2, 0, 0, 1, false), Ok(2));
        assert_eq!(pool_out(5, 2, 2, 0, 0, 1, true), Ok(3));
        assert_eq!(pool_out(32, 3, 2, 0, 0, 1, true), Ok(16));
        assert_eq!(pool_out(32, 3, 2, 0, 0, 1, false), Ok(15));
        // Windows start at -1, 1, 3 (input coordinates); the last one still
        // covers input element 3.
        assert_eq!(pool_out(4, 2, 2, 1, 1, 1, true), Ok(3));
        // 5, k1 s2, pad end 1: span 5, ceil(5/2) + 1 = 4, but window 4 would
        // start at 6, past the input (5 + pad_begin 0): dropped.
        assert_eq!(pool_out(5, 1, 2, 0, 1, 1, true), Ok(3));
        assert_eq!(pool_out(5, 1, 2, 0, 1, 1, false), Ok(3));
        assert_eq!(pool_out(Q, 3, 2, 1, 1, 1, true), Ok(Q));
        assert_eq!(pool_out(7, 3, 1, 0, 0, 2, false), Ok(3));
        assert!(pool_out(1, 3, 1, 0, 0, 1, true).is_err());
    }

    #[test]
    fn axes() {
        assert_eq!(normalize_axis(-1, 4), Ok(3));
        assert_eq!(normalize_axis(-4, 4), Ok(0));
        assert_eq!(normalize_axis(3, 4), Ok(3));
        assert_eq!(normalize_axis(4, 4).unwrap_err(), "axis 4 is out of range for rank 4 (expected -4 to 3)");
        assert!(normalize_axis(-5, 4).is_err());
        assert!(normalize_axis(0, 0).is_err());
    }

    #[test]
    fn element_counts() {
        assert_eq!(num_elements(&[2, 3, 4]), Some(24));
        assert_eq!(num_elements(&[]), Some(1));
        assert_eq!(num_elements(&[2, Q]), None);
        assert_eq!(num_elements(&[i64::MAX, 2]), None);
        assert_eq!(shape_to_string(&[1, Q, 4]), "1x?x4");
        assert_eq!(shape_to_string(&[]), "scalar");
    }
}
