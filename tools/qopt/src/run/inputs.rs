//! The inputs of a run: read from `.npy` files or a `.npz` archive, or
//! generated, then matched to the function's arguments and checked.
//!
//! - `--input FILE.npy`, repeated: one file per argument, in order.
//! - `--inputs FILE.npz`: if any member is named `arg<K>`, members are matched
//!   by those names (`arg0` for argument #0, ...; other members are ignored);
//!   otherwise members are taken in archive order, one per argument.
//! - `--random-inputs --seed N`: floats standard normal (Box–Muller), integers
//!   uniform over the storage range (a quantized type's, narrowed ranges
//!   included), booleans fair; dynamic dimensions get size 1. One SplitMix64
//!   stream runs through the arguments in order (`qopt_interp::random_arguments`,
//!   shared with `qopt --verify-numerics`).
//!
//! Checks, each error naming the argument: the count of inputs, the dtype
//! and shape against the argument's type (with `--batch` dimension 0 may be any
//! positive multiple of the model's), and NaN or ±inf in float inputs (an error
//! giving the first bad element, or a warning with `--allow-nonfinite`).

use super::model::{Model, Signature};
use qopt_interp::{random_arguments, DType, IntegerValues, RandomInputs, Tensor};
use qopt_ir_core::{Type, TypeData, DYNAMIC};
use qopt_npy::{self as npy, RawArray};
use std::path::{Path, PathBuf};

/// Where the inputs come from.
pub(crate) enum InputSource {
    /// One `.npy` file per argument.
    Files(Vec<PathBuf>),
    /// A `.npz` archive.
    Archive(PathBuf),
    /// Generated from a seed.
    Random(u64),
}

/// One input value and where it came from (for messages).
pub(crate) struct Input {
    /// `x.npy`, `in.npz:arg0`, `random (seed 3)`.
    pub origin: String,
    pub tensor: Tensor,
}

/// The inputs for `sig`'s arguments, in argument order; an error names a
/// missing argument or an unreadable file.
pub(crate) fn gather(model: &Model, sig: &Signature, source: &InputSource) -> Result<Vec<Input>, String> {
    let inputs = match source {
        InputSource::Files(paths) => paths.iter().map(|p| read_npy(p)).collect::<Result<Vec<_>, _>>()?,
        InputSource::Archive(path) => read_archive(path, sig)?,
        InputSource::Random(seed) => return random(model, sig, *seed),
    };
    if inputs.len() > sig.args.len() {
        return Err(format!(
            "{} inputs given, but @{} takes {} argument(s)",
            inputs.len(),
            sig.func,
            sig.args.len()
        ));
    }
    if let Some(&ty) = sig.args.get(inputs.len()) {
        let arg = sig.arg_name(inputs.len());
        return Err(format!("missing input for {arg} ({})", model.type_text(ty)));
    }
    Ok(inputs)
}

fn read_npy(path: &Path) -> Result<Input, String> {
    let origin = path.display().to_string();
    let raw = npy::read_npy_file(path).map_err(|e| format!("cannot read '{origin}': {e}"))?;
    let tensor = Tensor::from_raw(&raw).map_err(|e| format!("cannot read '{origin}': {}", e.message))?;
    Ok(Input { origin, tensor })
}

fn read_archive(path: &Path, sig: &Signature) -> Result<Vec<Input>, String> {
    let file = path.display().to_string();
    let members = npy::read_npz_file(path).map_err(|e| format!("cannot read '{file}': {e}"))?;
    let by_name = members.iter().any(|(name, _)| arg_index(name).is_some());
    let chosen: Vec<(String, RawArray)> = if by_name {
        let mut slots: Vec<Option<(String, RawArray)>> = vec![None; sig.args.len()];
        for (name, raw) in members {
            if let Some(slot) = arg_index(&name).and_then(|i| slots.get_mut(i)) {
                *slot = Some((name, raw));
            }
        }
        match slots.iter().position(Option::is_none) {
            Some(i) => {
                return Err(format!("missing input for {}: '{file}' has no member 'arg{i}'", sig.arg_name(i)))
            }
            None => slots.into_iter().flatten().collect(),
        }
    } else {
        members
    };
    chosen
        .into_iter()
        .map(|(name, raw)| {
            let origin = format!("{file}:{name}");
            let tensor =
                Tensor::from_raw(&raw).map_err(|e| format!("cannot read '{origin}': {}", e.message))?;
            Ok(Input { origin, tensor })
        })
        .collect()
}

/// `K` of a member named `argK`.
fn arg_index(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("arg")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Checks every input against its argument; returns the warnings to print.
/// With `batched`, dimension 0 may be any positive multiple of the argument's.
pub(crate) fn check(
    model: &Model,
    sig: &Signature,
    inputs: &[Input],
    batched: bool,
    allow_nonfinite: bool,
) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    for (i, (input, &ty)) in inputs.iter().zip(&sig.args).enumerate() {
        check_type(model, sig, i, input, ty, batched)?;
        if let Some(problem) = nonfinite(&input.tensor) {
            let message = format!("{} ('{}') {problem}", sig.arg_name(i), input.origin);
            if !allow_nonfinite {
                return Err(format!("{message}; pass --allow-nonfinite to run anyway"));
            }
            warnings.push(message);
        }
    }
    Ok(warnings)
}

fn check_type(
    model: &Model,
    sig: &Signature,
    i: usize,
    input: &Input,
    ty: Type,
    batched: bool,
) -> Result<(), String> {
    let (shape, element) = tensor_parts(model, sig, i, ty)?;
    let want = DType::of_element(&model.ctx, element).map_err(|e| format!("{}: {e}", sig.arg_name(i)))?;
    let got = input.tensor.shape();
    let fits = |batched: bool| {
        let dim_fits = |(k, (&d, &n)): (usize, (&i64, &usize))| match (batched && k == 0, d == DYNAMIC) {
            (_, true) => !batched || n > 0,
            (true, false) => d > 0 && n > 0 && (n as u64).is_multiple_of(d as u64),
            (false, false) => d as u64 == n as u64,
        };
        input.tensor.dtype() == want
            && shape.len() == got.len()
            && shape.iter().zip(got).enumerate().all(dim_fits)
    };
    if fits(batched) {
        return Ok(());
    }
    let batch_note = if batched { " (with --batch, dimension 0 may be any positive multiple)" } else { "" };
    let batch_hint = if !batched && fits(true) {
        format!(
            "; it holds {} batches of that shape: add --batch to run them one at a time",
            got[0] / shape[0] as usize
        )
    } else {
        String::new()
    };
    Err(format!(
        "{} expects {}{batch_note}, got {} ('{}'){batch_hint}",
        sig.arg_name(i),
        model.type_text(ty),
        input.tensor.describe(),
        input.origin
    ))
}

/// The shape and element type of argument `i`, which must be a tensor.
fn tensor_parts<'m>(
    model: &'m Model,
    sig: &Signature,
    i: usize,
    ty: Type,
) -> Result<(&'m [i64], Type), String> {
    match model.ctx.type_data(ty) {
        TypeData::Tensor { shape, element } => Ok((shape, *element)),
        _ => Err(format!("{} has type {}; qrun passes tensors only", sig.arg_name(i), model.type_text(ty))),
    }
}

/// `has NaN at element [0, 3] (2 non-finite elements)` for a float tensor
/// with NaN or ±inf.
fn nonfinite(t: &Tensor) -> Option<String> {
    let values: Vec<f64> = match t {
        Tensor::F32(a) => a.iter().map(|&v| f64::from(v)).collect(),
        Tensor::F64(a) => a.iter().copied().collect(),
        _ => return None,
    };
    let first = values.iter().position(|v| !v.is_finite())?;
    let count = values.iter().filter(|v| !v.is_finite()).count();
    let what = match values[first] {
        v if v.is_nan() => "NaN",
        v if v > 0.0 => "+inf",
        _ => "-inf",
    };
    Some(format!("has {what} at element {:?} ({count} non-finite element(s))", unravel(first, t.shape())))
}

/// The coordinates of row-major element `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (slot, &d) in index.iter_mut().zip(shape).rev() {
        if d > 0 {
            *slot = flat % d;
            flat /= d;
        }
    }
    index
}

/// Deterministic inputs for every argument (see the module docs).
fn random(model: &Model, sig: &Signature, seed: u64) -> Result<Vec<Input>, String> {
    let how = RandomInputs { integers: IntegerValues::FullRange, dynamic_size: Some(1) };
    let tensors = random_arguments(&model.ctx, &sig.args, seed, &how)
        .map_err(|e| format!("cannot generate {}: {}", sig.arg_name(e.argument), e.message))?;
    Ok(tensors.into_iter().map(|tensor| Input { origin: format!("random (seed {seed})"), tensor }).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_of_flat_indices() {
        assert_eq!(unravel(0, &[2, 3]), [0, 0]);
        assert_eq!(unravel(5, &[2, 3]), [1, 2]);
        assert_eq!(unravel(7, &[2, 2, 2]), [1, 1, 1]);
        assert_eq!(unravel(0, &[]), Vec::<usize>::new());
    }

    #[test]
    fn archive_member_names() {
        assert_eq!(arg_index("arg0"), Some(0));
        assert_eq!(arg_index("arg12"), Some(12));
        assert_eq!(arg_index("arg"), None);
        assert_eq!(arg_index("args"), None);
        assert_eq!(arg_index("x"), None);
    }

    #[test]
    fn nonfinite_values_are_located() {
        let t = Tensor::from_f32(&[2, 2], vec![1.0, 2.0, f32::INFINITY, f32::NAN]).unwrap();
        assert_eq!(nonfinite(&t).unwrap(), "has +inf at element [1, 0] (2 non-finite element(s))");
        assert_eq!(nonfinite(&Tensor::from_f32(&[1], vec![0.0]).unwrap()), None);
    }
}
