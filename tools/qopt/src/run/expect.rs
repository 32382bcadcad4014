//! `--expect REF`: checks a run's outputs against stored reference arrays
//! (a `.npy` for a function with one output, or a `.npz` with a member per
//! output, named as the outputs are), element by element as numpy's
//! `allclose` does: `|out − ref| ≤ atol + rtol·|ref|`. NaN matches only NaN.
//! The report gives the worst element (largest excess over its tolerance),
//! so a user needs no Python to check a model against a reference.
//!
//! Without `--atol`, each output's `atol` scales with its reference:
//! `max(1e-8, 8·ε·max|ref|)`, ε the machine epsilon of the output's float
//! type (2^-23 for f32; integer outputs keep 1e-8). A float model computes
//! its sums in another order than ONNX Runtime does, so its outputs differ
//! by a few units in the last place of the largest partial sums, which an
//! absolute 1e-8 (numpy's default) refuses on values of 23: digits_mlp's
//! 9.5e-6 against ONNX Runtime is within 8·ε·23.4 = 2.2e-5. One step of a
//! quantized output (its scale) stays far outside it: 8·ε·max|ref| is
//! below 2.4e-4 steps for a reference within 255 steps of zero.

use super::tensor_text::number;
use qopt_interp::Tensor;
use qopt_npy::{self as npy, RawArray};
use std::fmt::Write as _;
use std::path::Path;

/// The tolerances of `--rtol` and `--atol`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Tolerance {
    pub rtol: f64,
    /// `--atol`; `None` scales it with each reference (see the module docs).
    pub atol: Option<f64>,
}

/// The multiple of the machine epsilon times the largest reference
/// magnitude that is the default `atol`.
pub(crate) const SCALED_ATOL_EPSILONS: f64 = 8.0;

/// numpy's `atol`, the least the scaled default gives.
const MIN_ATOL: f64 = 1e-8;

impl Tolerance {
    /// The `atol` for an output of type `dtype` against `reference`.
    fn atol_for(&self, dtype: npy::DType, reference: &[f64]) -> f64 {
        if let Some(atol) = self.atol {
            return atol;
        }
        let epsilon = match dtype {
            npy::DType::F32 => f64::from(f32::EPSILON),
            npy::DType::F64 => f64::EPSILON,
            _ => 0.0,
        };
        let largest = reference.iter().filter(|v| v.is_finite()).fold(0.0f64, |m, v| m.max(v.abs()));
        MIN_ATOL.max(SCALED_ATOL_EPSILONS * epsilon * largest)
    }
}

/// How one output compares with its reference.
#[derive(Debug)]
pub(crate) struct OutputCheck {
    pub name: String,
    pub elements: usize,
    /// The `atol` used (`--atol`, or scaled with the reference).
    pub atol: f64,
    /// Elements outside the tolerance.
    pub mismatches: usize,
    pub max_abs_error: f64,
    /// The element furthest beyond its tolerance (or, when all are within
    /// it, the one with the largest error): index, got, expected.
    pub worst: Option<(Vec<usize>, f64, f64)>,
}

/// The whole check: one entry per output.
#[derive(Debug)]
pub(crate) struct ExpectReport {
    pub reference: String,
    pub tolerance: Tolerance,
    pub outputs: Vec<OutputCheck>,
}

impl ExpectReport {
    /// Whether every element of every output is within tolerance.
    pub fn passed(&self) -> bool {
        self.outputs.iter().all(|o| o.mismatches == 0)
    }

    /// One line per output.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for o in &self.outputs {
            let verdict = if o.mismatches == 0 { "ok" } else { "MISMATCH" };
            let _ = write!(
                out,
                "expect {}: {verdict}, {} of {} values outside rtol {} atol {}{}, max abs error {}",
                o.name,
                o.mismatches,
                o.elements,
                number(self.tolerance.rtol),
                number(o.atol),
                if self.tolerance.atol.is_none() { " (8 ε·max|ref|)" } else { "" },
                number(o.max_abs_error)
            );
            if let Some((index, got, want)) = &o.worst {
                let _ = write!(out, "; worst at {index:?}: got {}, expected {}", number(*got), number(*want));
            }
            out.push('\n');
        }
        out
    }
}

/// Reads `path` and compares `outputs` (named `names`) with it.
pub(crate) fn check(
    path: &Path,
    outputs: &[Tensor],
    names: &[String],
    tolerance: Tolerance,
) -> Result<ExpectReport, String> {
    let file = path.display().to_string();
    let is_npz = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npz"));
    let references: Vec<RawArray> = if is_npz {
        let members = npy::read_npz_file(path).map_err(|e| format!("cannot read '{file}': {e}"))?;
        let mut slots: Vec<Option<RawArray>> = vec![None; names.len()];
        let mut present = Vec::with_capacity(members.len());
        for (member, array) in members {
            if let Some(k) = names.iter().position(|n| *n == member) {
                slots[k] = Some(array);
            }
            present.push(member);
        }
        match slots.iter().position(Option::is_none) {
            Some(k) => {
                let name = &names[k];
                return Err(format!(
                    "--expect '{file}' has no member '{name}' for output '{name}' (members: {})",
                    present.join(", ")
                ));
            }
            None => slots.into_iter().flatten().collect(),
        }
    } else {
        if outputs.len() != 1 {
            return Err(format!(
                "--expect '{file}' is one array, but the function returns {} outputs; give an .npz with members {}",
                outputs.len(),
                names.join(", ")
            ));
        }
        vec![npy::read_npy_file(path).map_err(|e| format!("cannot read '{file}': {e}"))?]
    };
    let outputs = outputs
        .iter()
        .zip(names)
        .zip(&references)
        .map(|((out, name), reference)| compare(out, name, reference, tolerance, &file))
        .collect::<Result<_, _>>()?;
    Ok(ExpectReport { reference: file, tolerance, outputs })
}

/// Compares one output with its reference array. Shapes must be equal, or
/// equal once dimensions of size 1 are dropped (`[N, 1, 10]` against `[N, 10]`).
fn compare(
    out: &Tensor,
    name: &str,
    reference: &RawArray,
    tolerance: Tolerance,
    file: &str,
) -> Result<OutputCheck, String> {
    let squeezed = |shape: &[usize]| shape.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
    if squeezed(out.shape()) != squeezed(&reference.shape) {
        return Err(format!(
            "output '{name}' has shape {:?}, but its reference in '{file}' has shape {:?}",
            out.shape(),
            reference.shape
        ));
    }
    let want = Tensor::from_raw(reference)
        .map_err(|e| format!("cannot read the reference of '{name}' in '{file}': {}", e.message))?
        .to_f64_vec();
    let got = out.to_f64_vec();
    let atol = tolerance.atol_for(out.dtype(), &want);
    let mut check = OutputCheck {
        name: name.to_string(),
        elements: got.len(),
        atol,
        mismatches: 0,
        max_abs_error: 0.0,
        worst: None,
    };
    // The worst element: the largest excess over its tolerance; NaN against a
    // number is the worst there is.
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let (error, excess) = match (g.is_nan(), w.is_nan()) {
            (true, true) => continue,
            (false, false) if g == w => (0.0, f64::NEG_INFINITY),
            (false, false) => {
                let error = (g - w).abs();
                (error, error - (atol + tolerance.rtol * w.abs()))
            }
            _ => (f64::INFINITY, f64::INFINITY),
        };
        if excess > 0.0 || excess.is_nan() {
            check.mismatches += 1;
        }
        if error > check.max_abs_error {
            check.max_abs_error = error;
        }
        if worst.is_none_or(|(_, e)| excess > e) {
            worst = Some((i, excess));
        }
    }
    check.worst = worst.map(|(i, _)| (unravel(i, out.shape()), got[i], want[i]));
    Ok(check)
}

/// The multi-index of flat index `i` in `shape` (C order).
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (k, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            index[k] = i % d;
            i /= d;
        }
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIGHT: Tolerance = Tolerance { rtol: 1e-5, atol: Some(1e-8) };
    const SCALED: Tolerance = Tolerance { rtol: 1e-5, atol: None };

    fn raw(t: &Tensor) -> RawArray {
        t.to_raw()
    }

    #[test]
    fn equal_arrays_pass_and_the_worst_element_is_found() {
        let out = Tensor::from_f32(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let same = compare(&out, "y", &raw(&out), TIGHT, "r.npy").unwrap();
        assert_eq!((same.mismatches, same.max_abs_error), (0, 0.0));
        let off = Tensor::from_f32(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.5, 6.001]).unwrap();
        let c = compare(&out, "y", &raw(&off), TIGHT, "r.npy").unwrap();
        assert_eq!(c.mismatches, 2);
        assert_eq!(c.max_abs_error, 0.5);
        assert_eq!(c.worst, Some((vec![1, 1], 5.0, 5.5)));
        let loose =
            compare(&out, "y", &raw(&off), Tolerance { rtol: 0.2, atol: Some(0.0) }, "r.npy").unwrap();
        assert_eq!(loose.mismatches, 0);
    }

    #[test]
    fn nan_matches_only_nan_and_shapes_may_differ_by_unit_dimensions() {
        let out = Tensor::from_f32(&[2, 1, 2], vec![f32::NAN, 1.0, 2.0, f32::NAN]).unwrap();
        let want = Tensor::from_f32(&[2, 2], vec![f32::NAN, 1.0, 2.0, 3.0]).unwrap();
        let c = compare(&out, "y", &raw(&want), TIGHT, "r.npy").unwrap();
        assert_eq!(c.mismatches, 1);
        assert_eq!(c.worst.as_ref().map(|w| w.0.clone()), Some(vec![1, 0, 1]));
        let other = Tensor::from_f32(&[4], vec![0.0; 4]).unwrap();
        let e = compare(&out, "y", &raw(&other), TIGHT, "r.npy").unwrap_err();
        assert!(
            e.contains("output 'y' has shape [2, 1, 2], but its reference in 'r.npy' has shape [4]"),
            "{e}"
        );
    }

    /// The default atol scales with the reference: last-place differences
    /// of a float model on large values pass, one quantization step fails.
    #[test]
    fn the_default_atol_scales_with_the_reference() {
        // digits_mlp's worst element against ONNX Runtime: a small output
        // beside large ones, off by the rounding of the large partial sums.
        let reference = Tensor::from_f32(&[3], vec![23.4, 0.0632838, -1.0]).unwrap();
        let near = Tensor::from_f32(&[3], vec![23.4, 0.0632875, -1.0]).unwrap();
        let c = compare(&near, "y", &raw(&reference), SCALED, "r.npy").unwrap();
        assert_eq!(c.mismatches, 0, "{c:?}");
        assert!((c.atol - 8.0 * f64::from(f32::EPSILON) * f64::from(23.4f32)).abs() < 1e-12);
        assert_eq!(compare(&near, "y", &raw(&reference), TIGHT, "r.npy").unwrap().mismatches, 1);
        // One step of a quantized output (scale 0.1) beside values of 12.7.
        let steps = Tensor::from_f32(&[2], vec![12.7, -12.8]).unwrap();
        let one_off = Tensor::from_f32(&[2], vec![12.6, -12.8]).unwrap();
        assert_eq!(compare(&one_off, "y", &raw(&steps), SCALED, "r.npy").unwrap().mismatches, 1);
        // All zeros: numpy's 1e-8.
        let zeros = Tensor::from_f32(&[2], vec![0.0, 0.0]).unwrap();
        assert_eq!(compare(&zeros, "y", &raw(&zeros), SCALED, "r.npy").unwrap().atol, 1e-8);
    }
}
