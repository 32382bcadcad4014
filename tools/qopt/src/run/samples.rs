//! `--batch`: inputs that hold many samples along dimension 0 are cut into
//! chunks of the model's batch size (its static dimension 0, or 1 if that is
//! dynamic), and the chunks' outputs are stacked back along dimension 0.
//!
//! Both work on the row-major bytes of [`RawArray`]: in C order the rows of
//! a range along dimension 0 are one contiguous byte range, so cutting and
//! stacking copy byte ranges and never look at elements.

use super::model::{Model, Signature};
use qopt_interp::Tensor;
use qopt_ir_core::DYNAMIC;
use qopt_npy::RawArray;
use std::borrow::Cow;

/// The inputs of one run, whole or cut into chunks.
pub(crate) enum Samples {
    /// One run on the inputs as they are.
    Whole(Vec<Tensor>),
    /// Per argument its samples and the rows one run takes; `chunks` runs.
    Batched { arrays: Vec<(RawArray, usize)>, chunks: usize },
}

impl Samples {
    /// Cuts `inputs` (already checked: dimension 0 a positive multiple of the
    /// model's) into runs; every argument must give the same number of runs.
    pub fn batched(model: &Model, sig: &Signature, inputs: Vec<Tensor>) -> Result<Samples, String> {
        let mut arrays = Vec::with_capacity(inputs.len());
        let mut chunks = None;
        for (i, (t, &ty)) in inputs.iter().zip(&sig.args).enumerate() {
            let model_rows = model.ctx.tensor_shape(ty).and_then(|s| s.first().copied());
            let rows = match model_rows {
                Some(d) if d != DYNAMIC => usize::try_from(d).unwrap_or(1).max(1),
                _ => 1,
            };
            let Some(&n) = t.shape().first() else {
                return Err(format!(
                    "{} is a scalar; --batch cuts inputs along dimension 0",
                    sig.arg_name(i)
                ));
            };
            let runs = n / rows;
            match chunks {
                Some(c) if c != runs => {
                    return Err(format!(
                    "with --batch every argument needs as many samples: {} gives {runs} run(s) of {rows}, \
                         argument #0 gives {c}",
                    sig.arg_name(i)
                ))
                }
                _ => chunks = Some(runs),
            }
            arrays.push((t.to_raw(), rows));
        }
        match chunks {
            Some(chunks) if chunks > 0 => Ok(Samples::Batched { arrays, chunks }),
            Some(_) => Err("--batch needs at least one sample".to_string()),
            None => Err(format!("--batch needs an argument to cut, and @{} takes none", sig.func)),
        }
    }

    /// The number of runs.
    pub fn chunks(&self) -> usize {
        match self {
            Samples::Whole(_) => 1,
            Samples::Batched { chunks, .. } => *chunks,
        }
    }

    /// How many samples `--batch` cut the inputs into (dimension 0 of the
    /// first argument); `None` for a single run on the inputs as they are.
    pub fn count(&self) -> Option<usize> {
        match self {
            Samples::Whole(_) => None,
            Samples::Batched { arrays, chunks } => Some(arrays.first().map_or(*chunks, |a| a.0.shape[0])),
        }
    }

    /// The inputs of run `i`.
    pub fn chunk(&self, i: usize) -> Result<Cow<'_, [Tensor]>, String> {
        match self {
            Samples::Whole(inputs) => Ok(Cow::Borrowed(inputs)),
            Samples::Batched { arrays, .. } => {
                let tensors = arrays
                    .iter()
                    .map(|(raw, rows)| {
                        let row_bytes = raw.data.len() / raw.shape[0].max(1);
                        let data = raw.data[i * rows * row_bytes..(i + 1) * rows * row_bytes].to_vec();
                        let mut shape = raw.shape.clone();
                        shape[0] = *rows;
                        let part = RawArray { dtype: raw.dtype, shape, data };
                        Tensor::from_raw(&part).map_err(|e| e.message)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Cow::Owned(tensors))
            }
        }
    }

    /// `sample 3` or `samples 6..=7`: which samples run `i` takes, for messages.
    pub fn describe(&self, i: usize) -> Option<String> {
        match self {
            Samples::Whole(_) => None,
            Samples::Batched { arrays, .. } => match arrays.first().map_or(1, |a| a.1) {
                1 => Some(format!("sample {i}")),
                rows => Some(format!("samples {}..={}", i * rows, (i + 1) * rows - 1)),
            },
        }
    }
}

/// Stacks the outputs of consecutive runs along dimension 0: output `k` of
/// the result holds output `k` of every run in order.
pub(crate) fn stack(runs: Vec<Vec<Tensor>>) -> Result<Vec<Tensor>, String> {
    let Some(first) = runs.first() else { return Ok(Vec::new()) };
    let mut stacked: Vec<RawArray> = Vec::with_capacity(first.len());
    for (k, t) in first.iter().enumerate() {
        if t.rank() == 0 {
            return Err(format!("output #{k} is a scalar; --batch stacks outputs along dimension 0"));
        }
        let mut shape = t.shape().to_vec();
        shape[0] = 0;
        stacked.push(RawArray { dtype: t.dtype(), shape, data: Vec::new() });
    }
    for run in &runs {
        for (k, (t, acc)) in run.iter().zip(stacked.iter_mut()).enumerate() {
            let raw = t.to_raw();
            if raw.dtype != acc.dtype || raw.shape.get(1..) != acc.shape.get(1..) {
                return Err(format!(
                    "output #{k} changes from {} {:?} to {} {:?} between runs; it cannot be stacked",
                    acc.dtype, acc.shape, raw.dtype, raw.shape
                ));
            }
            acc.shape[0] += raw.shape[0];
            acc.data.extend_from_slice(&raw.data);
        }
    }
    stacked.iter().map(|raw| Tensor::from_raw(raw).map_err(|e| e.message)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacking_concatenates_along_dimension_0() {
        let run = |a: f32| vec![Tensor::from_f32(&[1, 2], vec![a, a + 1.0]).unwrap()];
        let out = stack(vec![run(0.0), run(10.0), run(20.0)]).unwrap();
        assert_eq!(out[0], Tensor::from_f32(&[3, 2], vec![0.0, 1.0, 10.0, 11.0, 20.0, 21.0]).unwrap());
        let bad = vec![run(0.0), vec![Tensor::from_f32(&[1, 3], vec![0.0; 3]).unwrap()]];
        assert!(stack(bad).unwrap_err().contains("cannot be stacked"));
    }
}
