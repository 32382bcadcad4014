//! The checker's own arithmetic on constants, in f64: what [`Builtin`]s
//! evaluate to. It is written independently of the passes it checks (fold-bn
//! computes its folded weights with its own code; this is the definition the
//! result is compared with).

use crate::lang::Builtin;
use ndarray::{ArrayD, Axis, IxDyn};
use qopt_interp::Tensor;
use std::sync::Arc;

/// How many leading children of `f` are values (the rest are integer leaves).
pub fn value_arity(f: Builtin) -> usize {
    match f {
        Builtin::Sqrt | Builtin::ChanAbsMax | Builtin::ChanSum => 1,
        _ => 2,
    }
}

/// The value of `f` on `operands` (its value children) with `axis` (its
/// integer child, for the channel builtins); `None` when the shapes do not
/// fit.
pub fn evaluate(f: Builtin, operands: &[Arc<Tensor>], axis: Option<i64>) -> Option<Tensor> {
    let a = as_f64(&operands[0])?;
    let value = match f {
        Builtin::Sqrt => a.mapv(f64::sqrt),
        Builtin::Add | Builtin::Sub | Builtin::Mul | Builtin::Div => {
            let b = as_f64(&operands[1])?;
            let shape = broadcast_shape(a.shape(), b.shape())?;
            let (a, b) = (a.broadcast(IxDyn(&shape))?, b.broadcast(IxDyn(&shape))?);
            match f {
                Builtin::Add => &a + &b,
                Builtin::Sub => &a - &b,
                Builtin::Mul => &a * &b,
                _ => &a / &b,
            }
        }
        Builtin::ChanAbsMax => {
            let axis = channel_axis(a.ndim(), axis?)?;
            let ranges: Vec<f64> = a
                .axis_iter(Axis(axis))
                .map(|lane| {
                    let range =
                        lane.iter().fold(0.0f64, |m, x| if x.is_nan() { f64::NAN } else { m.max(x.abs()) });
                    if range == 0.0 {
                        1.0
                    } else {
                        range
                    }
                })
                .collect();
            ndarray::Array1::from(ranges).into_dyn()
        }
        Builtin::ChanSum => {
            let axis = channel_axis(a.ndim(), axis?)?;
            let sums: Vec<f64> = a.axis_iter(Axis(axis)).map(|lane| lane.sum()).collect();
            ndarray::Array1::from(sums).into_dyn()
        }
        Builtin::ChanMul | Builtin::ChanAdd | Builtin::ChanDiv => {
            let v = as_f64(&operands[1])?;
            let axis = channel_axis(a.ndim(), axis?)?;
            if v.ndim() > 1 {
                return None;
            }
            let len = v.len();
            let v = v.into_shape_with_order(IxDyn(&[len])).ok()?;
            let n = a.shape()[axis];
            if v.len() != n && v.len() != 1 {
                return None;
            }
            let mut out = a;
            for (i, mut lane) in out.axis_iter_mut(Axis(axis)).enumerate() {
                let s = v[[if v.len() == 1 { 0 } else { i }]];
                match f {
                    Builtin::ChanMul => lane.mapv_inplace(|x| x * s),
                    Builtin::ChanDiv => lane.mapv_inplace(|x| x / s),
                    _ => lane.mapv_inplace(|x| x + s),
                }
            }
            out
        }
    };
    Some(Tensor::F64(value))
}

/// `axis` of a rank-`rank` value, negative from the back, if it is one.
fn channel_axis(rank: usize, axis: i64) -> Option<usize> {
    let rank = rank as i64;
    let axis = if axis < 0 { axis + rank } else { axis };
    (0..rank).contains(&axis).then_some(axis as usize)
}

/// A bound on the magnitudes of the terms each element of `f`'s value was
/// computed from, given its operands' `values` and their bounds
/// (`magnitudes`; `None` for a value's own magnitude): sums and differences
/// add their terms' bounds, products and quotients scale them, a square root
/// takes the root. Rounding in a different order errs at this scale. `None`
/// when the bound is the value's own magnitude.
pub fn magnitude(
    f: Builtin,
    values: &[Arc<Tensor>],
    magnitudes: &[Option<Arc<Tensor>>],
    axis: Option<i64>,
) -> Option<Tensor> {
    let bound = |i: usize| -> Option<Arc<Tensor>> {
        match magnitudes.get(i)? {
            Some(m) => Some(m.clone()),
            None => Some(Arc::new(Tensor::F64(as_f64(&values[i])?.mapv(f64::abs)))),
        }
    };
    let absolute = |i: usize| Some(Arc::new(Tensor::F64(as_f64(&values[i])?.mapv(f64::abs))));
    // Products, quotients and roots of values without a bound of their own
    // are bounded by their own magnitude: nothing to carry (and nothing to
    // compute over a layer's weights).
    let summed = matches!(f, Builtin::Add | Builtin::Sub | Builtin::ChanAdd | Builtin::ChanSum);
    if !summed && magnitudes.iter().all(Option::is_none) {
        return None;
    }
    match f {
        Builtin::Sqrt => Some(Tensor::F64(as_f64(&*bound(0)?)?.mapv(f64::sqrt))),
        Builtin::Add | Builtin::Sub => evaluate(Builtin::Add, &[bound(0)?, bound(1)?], axis),
        Builtin::Mul => evaluate(Builtin::Mul, &[bound(0)?, bound(1)?], axis),
        Builtin::Div => evaluate(Builtin::Div, &[bound(0)?, absolute(1)?], axis),
        Builtin::ChanMul => evaluate(Builtin::ChanMul, &[bound(0)?, bound(1)?], axis),
        Builtin::ChanAdd => evaluate(Builtin::ChanAdd, &[bound(0)?, bound(1)?], axis),
        Builtin::ChanDiv => evaluate(Builtin::ChanDiv, &[bound(0)?, absolute(1)?], axis),
        // A sum of its terms' bounds.
        Builtin::ChanSum => evaluate(Builtin::ChanSum, &[bound(0)?], axis),
        // A largest magnitude is one of its terms' own: nothing to carry.
        Builtin::ChanAbsMax => None,
    }
}

/// Whether the bound `magnitude` is at most `value`'s own magnitude
/// everywhere (its terms did not cancel).
pub fn bounded_by_itself(magnitude: &Tensor, value: &Tensor) -> bool {
    magnitude.shape() == value.shape()
        && magnitude.to_f64_vec().iter().zip(value.to_f64_vec()).all(|(m, v)| *m <= v.abs())
}

/// A tensor's values as an f64 array (floats and integers).
fn as_f64(t: &Tensor) -> Option<ArrayD<f64>> {
    match t {
        Tensor::F64(a) => Some(a.clone()),
        Tensor::F32(a) => Some(a.mapv(f64::from)),
        Tensor::Bool(_) => None,
        _ => ArrayD::from_shape_vec(IxDyn(t.shape()), t.to_f64_vec()).ok(),
    }
}

/// The numpy broadcast of two shapes.
fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], v: Vec<f32>) -> Arc<Tensor> {
        Arc::new(Tensor::from_f32(shape, v).unwrap())
    }

    #[test]
    fn arithmetic_broadcasts_and_channels_scale_along_their_axis() {
        let sum =
            evaluate(Builtin::Add, &[t(&[2, 1], vec![1.0, 2.0]), t(&[3], vec![10.0, 20.0, 30.0])], None);
        assert_eq!(sum.unwrap().to_f64_vec(), [11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
        let x = t(&[1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let scaled = evaluate(Builtin::ChanMul, &[x.clone(), t(&[2], vec![10.0, 100.0])], Some(1)).unwrap();
        assert_eq!(scaled.to_f64_vec(), [10.0, 20.0, 300.0, 400.0]);
        let shifted = evaluate(Builtin::ChanAdd, &[x.clone(), t(&[2], vec![1.0, -1.0])], Some(-2)).unwrap();
        assert_eq!(shifted.to_f64_vec(), [2.0, 3.0, 2.0, 3.0]);
        assert!(evaluate(Builtin::ChanMul, &[x.clone(), t(&[3], vec![1.0; 3])], Some(1)).is_none());
        let divided = evaluate(Builtin::ChanDiv, &[x, t(&[2], vec![2.0, 4.0])], Some(1)).unwrap();
        assert_eq!(divided.to_f64_vec(), [0.5, 1.0, 0.75, 1.0]);
    }

    /// Each index of the axis gets its largest magnitude; an all-zero
    /// channel gets 1, so dividing by the ranges never divides by 0.
    #[test]
    fn channel_ranges_are_largest_magnitudes_and_one_for_zero_channels() {
        let w = t(&[3, 2], vec![1.0, -3.0, 0.0, 0.0, 0.5, 0.25]);
        let rows = evaluate(Builtin::ChanAbsMax, std::slice::from_ref(&w), Some(0)).unwrap();
        assert_eq!(rows.shape(), [3]);
        assert_eq!(rows.to_f64_vec(), [3.0, 1.0, 0.5]);
        let columns = evaluate(Builtin::ChanAbsMax, &[w], Some(-1)).unwrap();
        assert_eq!(columns.to_f64_vec(), [1.0, 3.0]);
    }

    /// Each index of the axis gets the sum over every other axis; its bound
    /// on the terms sums their magnitudes.
    #[test]
    fn channel_sums_add_up_each_index_of_the_axis() {
        let w = t(&[2, 2, 2], vec![1.0, -3.0, 0.5, 0.5, 2.0, 2.0, -4.0, 1.0]);
        let outputs = evaluate(Builtin::ChanSum, std::slice::from_ref(&w), Some(0)).unwrap();
        assert_eq!(outputs.to_f64_vec(), [-1.0, 1.0]);
        let inputs = evaluate(Builtin::ChanSum, std::slice::from_ref(&w), Some(-2)).unwrap();
        assert_eq!(inputs.to_f64_vec(), [2.0, -2.0]);
        assert!(evaluate(Builtin::ChanSum, std::slice::from_ref(&w), Some(3)).is_none());
        let bound = magnitude(Builtin::ChanSum, &[w], &[None], Some(0)).unwrap();
        assert_eq!(bound.to_f64_vec(), [5.0, 9.0]);
    }
}
#[cfg(test)]
mod magnitude_tests {
    use super::*;

    #[test]
    fn sums_add_their_terms_and_products_scale_them() {
        let a = Arc::new(Tensor::from_f32(&[2], vec![1.0, -2.0]).unwrap());
        let b = Arc::new(Tensor::from_f32(&[1], vec![-1.5]).unwrap());
        let m = magnitude(Builtin::Add, &[a.clone(), b.clone()], &[None, None], None).unwrap();
        assert_eq!(m.to_f64_vec(), [2.5, 3.5]);
        let sum = Arc::new(m);
        let m = magnitude(Builtin::Mul, &[a.clone(), b.clone()], &[Some(sum), None], None).unwrap();
        assert_eq!(m.to_f64_vec(), [3.75, 5.25]);
        // A product of plain values is bounded by itself.
        assert!(magnitude(Builtin::Mul, &[a, b], &[None, None], None).is_none());
    }
}
