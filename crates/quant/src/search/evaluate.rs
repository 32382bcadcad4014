//! How `quantize-search` scores a model: its metric (accuracy against labels
//! or top-1 agreement with a reference) and output SQNR over the evaluation
//! data, run in parallel.

use crate::runs::data::CalibrationData;
use crate::search::settings::Settings;
use qopt_interp::{DType, Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::{Context, Module, PassError};
use qopt_npy::read_npy_file;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// A model's score on the evaluation data.
#[derive(Clone)]
pub(crate) struct Measurement {
    /// The metric, as a fraction (accuracy or agreement).
    pub(crate) metric: f64,
    /// Output SQNR against the float model, in dB (infinite when equal).
    pub(crate) sqnr_db: f64,
}

/// The evaluation data set, read call by call at each measurement (so
/// memory does not grow with its samples), and the float outputs.
pub(crate) struct Evaluation {
    pub(crate) func: String,
    /// The opened data set.
    pub(crate) data: CalibrationData,
    /// The interpreter calls each measurement makes.
    pub(crate) calls: usize,
    pub(crate) per_call: usize,
    pub(crate) threads: usize,
    pub(crate) float: Option<Outputs>,
    pub(crate) labels: String,
    pub(crate) reference: String,
}

/// The first result of a function over every call, flattened per sample.
pub(crate) struct Outputs {
    pub(crate) values: Vec<f64>,
    pub(crate) per_sample: usize,
}

impl Outputs {
    pub(crate) fn samples(&self) -> usize {
        self.values.len() / self.per_sample.max(1)
    }

    pub(crate) fn rows(&self) -> std::slice::ChunksExact<'_, f64> {
        self.values.chunks_exact(self.per_sample.max(1))
    }
}

/// What the metric compares the top-1 class with.
pub(crate) enum Target {
    /// Accuracy: one class index per sample.
    Labels(Vec<i64>),
    /// Agreement: the reference's top-1 class per sample; `float` when the
    /// reference is the float model.
    Agreement { classes: Vec<usize>, float: bool },
}

impl Target {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Target::Labels(_) => "accuracy",
            Target::Agreement { .. } => "top-1 agreement",
        }
    }

    /// Whether the top-1 class of `row`, the outputs of sample `sample`, is the target's.
    pub(crate) fn hit(&self, sample: usize, row: &[f64]) -> bool {
        let predicted = argmax(row);
        match self {
            Target::Labels(labels) => labels.get(sample).is_some_and(|&l| predicted as i64 == l),
            Target::Agreement { classes, .. } => classes.get(sample) == Some(&predicted),
        }
    }

    pub(crate) fn metric(&self, outputs: &Outputs) -> f64 {
        let predicted = outputs.rows().map(argmax);
        let hits = match self {
            Target::Labels(labels) => predicted.zip(labels).filter(|(p, &l)| *p as i64 == l).count(),
            Target::Agreement { classes, .. } => predicted.zip(classes).filter(|(p, c)| p == *c).count(),
        };
        hits as f64 / outputs.samples().max(1) as f64
    }
}

/// The index of the largest value (the first of equals).
pub(crate) fn argmax(row: &[f64]) -> usize {
    row.iter()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |best, (i, &v)| if v > best.1 { (i, v) } else { best })
        .0
}

impl Evaluation {
    /// Opens the evaluation samples for `module`'s function.
    pub(crate) fn open(ctx: &Context, module: &Module, settings: &Settings) -> Result<Evaluation, PassError> {
        let data = &settings.data;
        let opened = CalibrationData::open(ctx, module, &data.func, &settings.eval_data, data.batch_size)?;
        let (calls, _) = opened.calls(data.batches);
        let per_call = opened.per_call;
        Ok(Evaluation {
            func: data.func.clone(),
            data: opened,
            calls,
            per_call,
            threads: settings.threads,
            float: None,
            labels: settings.labels.clone(),
            reference: settings.reference.clone(),
        })
    }

    pub(crate) fn samples(&self) -> usize {
        self.calls * self.per_call
    }

    /// The metric's target, checked against the float outputs' shape.
    pub(crate) fn target(&self, float: &Outputs) -> Result<Target, PassError> {
        let samples = float.samples();
        if float.per_sample < 2 {
            return Err(format!(
                "the first result of @{} has {} value(s) per sample; top-1 metrics need at least 2 classes",
                self.func, float.per_sample
            )
            .into());
        }
        if !self.labels.is_empty() {
            let raw = read_npy_file(&self.labels).map_err(|e| format!("'labels' ({}): {e}", self.labels))?;
            let labels: Vec<i64> = match raw.dtype {
                DType::I64 => raw.to_vec::<i64>().map_err(|e| format!("'labels' ({}): {e}", self.labels))?,
                DType::I32 => raw
                    .to_vec::<i32>()
                    .map_err(|e| format!("'labels' ({}): {e}", self.labels))?
                    .into_iter()
                    .map(i64::from)
                    .collect(),
                other => {
                    return Err(format!(
                        "'labels' ({}) holds {}; class indices must be int64 or int32",
                        self.labels,
                        other.name()
                    )
                    .into())
                }
            };
            if labels.len() < samples {
                return Err(format!(
                    "'labels' ({}) has {} entries, fewer than the {samples} evaluation samples",
                    self.labels,
                    labels.len()
                )
                .into());
            }
            if let Some((i, l)) = labels
                .iter()
                .take(samples)
                .enumerate()
                .find(|(_, &l)| l < 0 || l as usize >= float.per_sample)
            {
                return Err(format!(
                    "'labels' ({}) entry {i} is {l}, not a class of the {} outputs per sample",
                    self.labels, float.per_sample
                )
                .into());
            }
            return Ok(Target::Labels(labels[..samples].to_vec()));
        }
        if !self.reference.is_empty() {
            let raw = read_npy_file(&self.reference)
                .map_err(|e| format!("'reference' ({}): {e}", self.reference))?;
            let values =
                Tensor::from_raw(&raw).map_err(|e| format!("'reference' ({}): {e}", self.reference))?;
            // One row per sample, each as long as the model's outputs: a file
            // of other rows would only be cut into the wrong samples.
            let row: usize = values.shape().iter().skip(1).product();
            let one_per_sample = values.shape().len() == 1 && float.per_sample == 1;
            if !one_per_sample && (values.shape().len() < 2 || row != float.per_sample) {
                return Err(format!(
                    "'reference' ({}) has shape {:?}, but the model gives {} outputs per sample: the reference \
                     needs one row of {} per sample",
                    self.reference,
                    values.shape(),
                    float.per_sample,
                    float.per_sample
                )
                .into());
            }
            let values = values.to_f64_vec();
            if values.len() < samples * float.per_sample {
                return Err(format!(
                    "'reference' ({}) has {} values, fewer than {samples} samples of {} outputs",
                    self.reference,
                    values.len(),
                    float.per_sample
                )
                .into());
            }
            if values.iter().any(|v| !v.is_finite()) {
                return Err(format!("'reference' ({}) holds NaN or infinity", self.reference).into());
            }
            let classes = values.chunks_exact(float.per_sample).take(samples).map(argmax).collect();
            return Ok(Target::Agreement { classes, float: false });
        }
        Ok(Target::Agreement { classes: float.rows().map(argmax).collect(), float: true })
    }

    /// The float model's outputs over every call, kept: the reference of
    /// every later measurement.
    pub(crate) fn outputs(&self, ctx: &Context, module: &Module) -> Result<Outputs, PassError> {
        let mut values = Vec::new();
        let mut per_call_len = None;
        self.run_calls(ctx, module, &mut |_, call| {
            if *per_call_len.get_or_insert(call.len()) != call.len() {
                return Err(format!("the first result of @{} changes size between calls", self.func));
            }
            if let Some(i) = call.iter().position(|v| !v.is_finite()) {
                return Err(format!(
                    "the model computes NaN or infinity (output value {}) on the evaluation data",
                    values.len() + i
                ));
            }
            values.extend(call);
            Ok(())
        })?;
        let per_sample = per_call_len.unwrap_or(0) / self.per_call.max(1);
        Ok(Outputs { values, per_sample })
    }

    /// Runs `module`'s function over every call and hands each call's first
    /// result (as f64) to `consume` in call order. Workers (`threads`) take
    /// calls in turn and read their inputs from the data set, so at most one
    /// call per worker is held.
    pub(crate) fn run_calls(
        &self,
        ctx: &Context,
        module: &Module,
        consume: &mut Consumer<'_>,
    ) -> Result<(), PassError> {
        let kernels = &*KernelRegistry::of_or_standard(ctx);
        let mut prepared = Interpreter::new(ctx, module, kernels);
        prepared.prepare(&self.func).map_err(|e| e.to_string())?;
        let calls = self.calls;
        let workers = self.threads.clamp(1, calls.max(1));
        let claim = AtomicUsize::new(0);
        let abort = AtomicBool::new(false);
        // The call whose turn it is, and the first error.
        let state: Mutex<(usize, Option<String>, &mut Consumer<'_>)> = Mutex::new((0, None, consume));
        let turn = Condvar::new();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let mut interp = prepared.fork();
                let (claim, abort, state, turn) = (&claim, &abort, &state, &turn);
                let (func, dataset) = (&self.func, &self.data.dataset);
                scope.spawn(move || loop {
                    let call = claim.fetch_add(1, Ordering::Relaxed);
                    if call >= calls {
                        break;
                    }
                    // A claimed call always takes its turn, so later calls never wait forever.
                    let output = (!abort.load(Ordering::Relaxed)).then(|| -> Result<Vec<f64>, String> {
                        let inputs = dataset.read_call(call).map_err(|e| e.to_string())?;
                        let results = interp.run(func, &inputs).map_err(|e| e.to_string())?;
                        let first = results.first().ok_or_else(|| format!("@{func} returns nothing"))?;
                        if !matches!(first.dtype(), DType::F32 | DType::F64) {
                            return Err(format!(
                                "the first result of @{func} is {}; the search compares float outputs",
                                first.describe()
                            ));
                        }
                        Ok(first.to_f64_vec())
                    });
                    let mut guard = state.lock().unwrap_or_else(PoisonError::into_inner);
                    while guard.0 != call {
                        guard = turn.wait(guard).unwrap_or_else(PoisonError::into_inner);
                    }
                    let failure = match output {
                        Some(Ok(values)) if guard.1.is_none() => (guard.2)(call, values).err(),
                        Some(Err(e)) => Some(e),
                        _ => None,
                    };
                    if let Some(e) = failure {
                        abort.store(true, Ordering::Relaxed);
                        guard.1.get_or_insert(e);
                    }
                    guard.0 += 1;
                    drop(guard);
                    turn.notify_all();
                });
            }
        });
        let (_, error, _) = state.into_inner().unwrap_or_else(PoisonError::into_inner);
        match error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

/// What [`Evaluation::run_calls`] hands each call's outputs to.
pub(crate) type Consumer<'c> = dyn FnMut(usize, Vec<f64>) -> Result<(), String> + Send + 'c;
