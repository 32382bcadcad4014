//! `calibrate{data=PATH}`: runs a function (`@main`) in the reference
//! interpreter over a data set and accumulates statistics into the attributes
//! of every `qnn.observe` it passes through.
//!
//! - **Data** (`crate::runs::dataset`): a `.npy` whose leading dimension counts
//!   samples, an `.npz` with one member per argument, or a directory of such
//!   files taken in name order. Each interpreter call takes the function's
//!   batch of samples (`batch-size` sets it when the batch dimension is
//!   dynamic); `batches=N` stops after N calls.
//! - **Streaming.** Files are memory-mapped and read one batch at a time; only
//!   the observers' statistics persist, so memory does not grow with the
//!   number of samples.
//! - **Parallel and deterministic.** Calls are grouped into chunks of
//!   [`chunk_calls`] in sample order; worker threads (`threads`, default: every
//!   core) each run their own interpreter on whole chunks, every chunk starting
//!   from empty statistics, and this thread folds the chunks into the stored
//!   statistics strictly in chunk order ([`Observer::merge`]). The chunking does
//!   not depend on the thread count, so 1 and 2 threads write the same bytes.
//! - **Incremental.** Statistics already in the IR are the starting point:
//!   calibrating on A, saving, and calibrating on B gives the IR of one run on
//!   A followed by B (observers merge exactly, see `histogram.rs`).
//! - **Any IR.** Observers may sit behind `qnn.fake_quant` ops (calibrating a
//!   partly quantized graph) or see quantized values (recorded dequantized).
//!
//! Errors write nothing: non-finite input data (naming file, sample and
//! element), data of the wrong shape or dtype (naming the argument and its
//! type), an empty data set, a non-finite value reaching an observer (naming
//! its location), an unknown observer kind. An observer that saw no data gets a
//! warning at its location. Statistics: `calibration-samples`,
//! `calibration-batches`, `observers`. A progress bar (samples, samples/s, ETA)
//! is drawn on standard error only when it is a terminal.
//!
//! ```text
//! // before
//! %o = qnn.observe(%x) {observer = "minmax"} : (tensor<1x8xf32>) -> tensor<1x8xf32> loc("main.arg0")
//! // after calibrate{data=calib.npy}
//! %o = qnn.observe(%x) {max = 3.5 : f32, min = -1.25 : f32, observer = "minmax", samples = 200} : ...
//! ```

use crate::calibration::batch::{value_range, ObservedBatch};
use crate::calibration::methods::{Observer, QuantMethods};
use crate::calibration::stats::ObserverStats;
use crate::runs::data::{check_counts, chunk_calls, DataSettings};
use crate::runs::data::{worker_threads, COUNT_OPTIONS};
use crate::runs::dataset::Dataset;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_interp::progress::{Progress, REDRAW_EVERY};
use qopt_interp::{dequantize_tensor, Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::{OptionSpec, PassOptions};
use qopt_ir_core::BadOptionValue;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    Context, Diagnostic, FxHashMap, Module, OpId, Pass, PassContext, PassError, PassOutcome, QuantType,
    Severity, TypeData,
};
use std::borrow::Cow;
use std::time::{Duration, Instant};

/// Named wall times of a calibration run's phases, for `--timing`.
type Phases = [(&'static str, Duration); 2];
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// The `calibrate` pass; see the module docs.
pub struct Calibrate;

const INFO: PassInfo = PassInfo {
    name: "calibrate",
    summary: "run @main over a data set and record statistics in the qnn.observe ops",
    preserves_semantics: false,
    // Observers are identities (`observe-is-identity`), whatever statistics
    // they hold.
    equivalence: Some(Relation::Exact),
    description: "Runs the function (`@main`) in the reference interpreter over the samples of `data` (a \
     .npy with samples along dimension 0, an .npz with one member per argument, or a directory \
     of such files) and folds what every `qnn.observe` sees into its attributes (`min`, `max`, \
     `samples`, `histogram`, ...). Statistics already present are merged with, so calibrating \
     again on more data adds to them. Both cores are used; the result does not depend on the \
     thread count.\n\n\
     ```\n\
     %o = qnn.observe(%x) {observer = \"minmax\"} ...\n\
     // -> %o = qnn.observe(%x) {max = 3.5 : f32, min = -1.25 : f32, observer = \"minmax\", samples = 200} ...\n\
     ```",
};

impl Pass for Calibrate {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        DataSettings::calibration_options()
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        check_counts(options, &COUNT_OPTIONS)
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let settings = Settings::read(options)?;
        let ctx: &Context = cx.ctx;
        let observers = find_observers(ctx, module)?;
        if observers.is_empty() {
            cx.warn_unlocated("calibrate found no qnn.observe op; run insert-observers first");
            return Ok(PassOutcome::Unchanged);
        }
        let data = settings.data.open(ctx, module)?;
        let (calls, leftover) = data.calls(settings.data.batches);
        let (dataset, per_call) = (&data.dataset, data.per_call);

        let run = CalibrationRun {
            ctx,
            module,
            func_name: &settings.data.func,
            dataset,
            per_call,
            calls,
            observers: &observers,
        };
        let (merged, phases) = run.execute(settings.threads)?;
        phases.into_iter().for_each(|(name, wall)| cx.add_phase(name, wall));
        leftover.into_iter().for_each(|w| cx.warn(w));

        let mut unobserved = Vec::new();
        for (observer, stats) in observers.iter().zip(merged) {
            if !stats.has_data() && stats.samples == 0 {
                unobserved.push(observer.op);
            }
            stats
                .store(cx.ctx, module, observer.op)
                .map_err(|e| PassError::at_op(cx.ctx, module, observer.op, e))?;
        }
        for op in unobserved {
            cx.warn_at(
                module,
                op,
                "this observer saw no data (it is not reached from the calibrated function)",
            );
        }
        cx.add_stat("calibration-samples", (calls * per_call) as u64);
        cx.add_stat("calibration-batches", calls as u64);
        cx.add_stat("observers", observers.len() as u64);
        Ok(PassOutcome::Changed)
    }
}

/// The options, checked.
struct Settings {
    data: DataSettings,
    threads: usize,
}

impl Settings {
    fn read(options: &PassOptions) -> Result<Settings, PassError> {
        let threads = worker_threads(options)?;
        Ok(Settings { data: DataSettings::read(options)?, threads })
    }
}

/// One `qnn.observe` to calibrate.
struct ObserverSite {
    op: OpId,
    stats: ObserverStats,
    observer: Arc<dyn Observer>,
    /// The observed value's quantized element type, if it is quantized.
    quant: Option<QuantType>,
}

/// Every `qnn.observe` of the module, with its stored statistics and observer.
fn find_observers(ctx: &Context, module: &Module) -> Result<Vec<ObserverSite>, PassError> {
    let methods = QuantMethods::of(ctx);
    let mut sites = Vec::new();
    let mut errors = Vec::new();
    for op in module.walk_preorder(module.root()) {
        if !module.op_is(ctx, op, qnn_op::OBSERVE) || module.num_operands(op) != 1 {
            continue;
        }
        let site = ObserverStats::load(ctx, module, op).and_then(|stats| {
            let observer = methods.find_observer(&stats.observer)?.clone();
            observer.check(&stats)?;
            let elem = ctx.element_type(module.value_type(module.operand(op, 0)));
            let quant = match ctx.type_data(elem) {
                TypeData::Quant(q) => Some(q.clone()),
                _ => None,
            };
            Ok(ObserverSite { op, stats, observer, quant })
        });
        match site {
            Ok(site) => sites.push(site),
            Err(e) => errors.push(Diagnostic::at_op(ctx, module, op, Severity::Error, e)),
        }
    }
    if errors.is_empty() {
        Ok(sites)
    } else {
        Err(qopt_ir_core::Diagnostics(errors).into())
    }
}

/// One calibration over a data set.
struct CalibrationRun<'a> {
    ctx: &'a Context,
    module: &'a Module,
    func_name: &'a str,
    dataset: &'a Dataset,
    per_call: usize,
    calls: usize,
    observers: &'a [ObserverSite],
}

/// What went wrong in a chunk: a message, at an observer when one is to blame.
struct ChunkError {
    op: Option<OpId>,
    message: String,
}

impl From<String> for ChunkError {
    fn from(message: String) -> ChunkError {
        ChunkError { op: None, message }
    }
}

/// What a chunk produced: statistics per observer, or the first error.
type ChunkResult = Result<Vec<ObserverStats>, ChunkError>;

/// The merge that chunks take turns at, in chunk order.
struct MergeState {
    /// The chunk whose turn it is.
    next: usize,
    /// The stored statistics with every chunk before `next` folded in.
    merged: Vec<ObserverStats>,
    /// The first error, in chunk order.
    error: Option<ChunkError>,
    /// Workers still running.
    running: usize,
}

/// Locks `m`, going on after a panic elsewhere (the pass manager reports it).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl CalibrationRun<'_> {
    /// Runs every call and returns each observer's stored statistics merged
    /// with everything seen, in sample order, and how long the phases took
    /// (`prepare`: compiling the function and loading its constants, once for
    /// all workers; `run-samples`: running and merging).
    fn execute(&self, threads: usize) -> Result<(Vec<ObserverStats>, Phases), PassError> {
        let per_chunk = chunk_calls(self.calls);
        let chunks = self.calls.div_ceil(per_chunk);
        let workers = threads.clamp(1, chunks.max(1));
        let kernels = &*KernelRegistry::of_or_standard(self.ctx);
        let start = Instant::now();
        let mut prepared = Interpreter::new(self.ctx, self.module, kernels);
        prepared.prepare(self.func_name).map_err(|e| e.to_string())?;
        let prepare = start.elapsed();
        let start = Instant::now();
        let index: FxHashMap<OpId, usize> =
            self.observers.iter().enumerate().map(|(i, o)| (o.op, i)).collect();
        let merged: Vec<ObserverStats> = self.observers.iter().map(|o| o.stats.clone()).collect();
        let progress = Progress::new(self.calls * self.per_call, "samples").with_label("calibrate");
        let next = AtomicUsize::new(0);
        let abort = AtomicBool::new(false);
        let state = Mutex::new(MergeState { next: 0, merged, error: None, running: workers });
        let turn = Condvar::new();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let (next, abort, index, progress, state, turn) =
                    (&next, &abort, &index, &progress, &state, &turn);
                let mut interp = prepared.fork();
                scope.spawn(move || {
                    loop {
                        let chunk = next.fetch_add(1, Ordering::Relaxed);
                        if chunk >= chunks {
                            break;
                        }
                        // A claimed chunk always takes its turn, so later chunks never wait forever.
                        let result = if abort.load(Ordering::Relaxed) {
                            Ok(Vec::new())
                        } else {
                            self.run_chunk(
                                &mut interp,
                                index,
                                chunk * per_chunk..(chunk + 1) * per_chunk,
                                progress,
                            )
                        };
                        let mut merge = lock(state);
                        while merge.next != chunk {
                            merge = turn.wait(merge).unwrap_or_else(PoisonError::into_inner);
                        }
                        // The worker that computed a chunk merges it, so its
                        // statistics are freed where they were allocated.
                        let failure = match result {
                            Ok(partials) if merge.error.is_none() && !partials.is_empty() => {
                                self.merge(&mut merge.merged, partials).err()
                            }
                            Ok(_) => None,
                            Err(e) => Some(e),
                        };
                        if let Some(e) = failure {
                            abort.store(true, Ordering::Relaxed);
                            merge.error.get_or_insert(e);
                        }
                        merge.next += 1;
                        turn.notify_all();
                    }
                    lock(state).running -= 1;
                    turn.notify_all();
                });
            }
            // This thread only draws the progress bar until the workers are done.
            let mut merge = lock(&state);
            while merge.running > 0 {
                merge = turn.wait_timeout(merge, REDRAW_EVERY).map_or_else(|e| e.into_inner().0, |(m, _)| m);
                progress.redraw();
            }
        });
        progress.finish();
        let phases = [("prepare", prepare), ("run-samples", start.elapsed())];
        let state = state.into_inner().unwrap_or_else(PoisonError::into_inner);
        match state.error {
            Some(ChunkError { op: Some(op), message }) => {
                Err(PassError::at_op(self.ctx, self.module, op, message))
            }
            Some(ChunkError { op: None, message }) => Err(message.into()),
            None => Ok((state.merged, phases)),
        }
    }

    /// Folds one chunk's statistics into `merged`.
    fn merge(&self, merged: &mut [ObserverStats], partials: Vec<ObserverStats>) -> Result<(), ChunkError> {
        for ((site, stats), mut partial) in self.observers.iter().zip(merged.iter_mut()).zip(partials) {
            let later_means = partial.means.take();
            let located = |message| ChunkError { op: Some(site.op), message };
            site.observer.merge(stats, partial).map_err(located)?;
            if let (Some(means), Some(later)) = (stats.means.as_mut(), later_means) {
                means.merge(&later).map_err(located)?;
            }
        }
        Ok(())
    }

    /// Runs the calls `calls` (a chunk) from empty statistics.
    fn run_chunk(
        &self,
        interp: &mut Interpreter<'_>,
        index: &FxHashMap<OpId, usize>,
        calls: std::ops::Range<usize>,
        progress: &Progress,
    ) -> ChunkResult {
        let mut partials: Vec<ObserverStats> = self.observers.iter().map(|o| o.stats.empty_like()).collect();
        for call in calls.start..calls.end.min(self.calls) {
            let start = call * self.per_call;
            let inputs = self.dataset.read(start, self.per_call).map_err(|e| e.to_string())?;
            let mut failure: Option<ChunkError> = None;
            let mut hook = |op: OpId, results: &[Tensor]| {
                if failure.is_some() {
                    return;
                }
                let Some(&i) = index.get(&op) else { return };
                let site = &self.observers[i];
                let Some(tensor) = results.first() else { return };
                let observed = match real_values(tensor, site.quant.as_ref()) {
                    Ok(values) => values,
                    Err(message) => {
                        failure = Some(ChunkError { op: Some(site.op), message });
                        return;
                    }
                };
                let range = value_range(&observed);
                if range.is_none() && !observed.is_empty() {
                    let at = observed.iter().position(|v| !v.is_finite()).unwrap_or(0);
                    let samples = format!("samples {start}..{}", start + self.per_call);
                    let message = format!("element {at} is {} in the batch of {samples}", observed[at]);
                    failure = Some(ChunkError { op: Some(site.op), message });
                    return;
                }
                let batch = ObservedBatch { values: &observed, shape: tensor.shape(), range };
                let partial = &mut partials[i];
                let observed = site.observer.observe(partial, &batch);
                let observed = match (observed, partial.means.as_mut()) {
                    (Ok(()), Some(means)) => means.observe(&batch),
                    (result, _) => result,
                };
                if let Err(message) = observed {
                    failure = Some(ChunkError { op: Some(site.op), message });
                }
            };
            interp.run_with(self.func_name, &inputs, &mut hook).map_err(|e| {
                format!("running @{} on samples {start}..{}: {e}", self.func_name, start + self.per_call)
            })?;
            if let Some(e) = failure {
                return Err(e);
            }
            (0..self.per_call).for_each(|_| progress.advance());
        }
        Ok(partials)
    }
}

/// The real values of an observed tensor: float values as f32, quantized
/// values dequantized as `qnn.dequantize` does (`quant-semantics.md` §3.2).
fn real_values<'t>(tensor: &'t Tensor, quant: Option<&QuantType>) -> Result<Cow<'t, [f32]>, String> {
    if let Some(q) = quant {
        let real = dequantize_tensor(tensor, q).map_err(|e| e.message)?;
        return Ok(Cow::Owned(real.to_f64_vec().into_iter().map(|v| v as f32).collect()));
    }
    match tensor {
        Tensor::F32(a) => Ok(match a.as_slice() {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(a.iter().copied().collect()),
        }),
        Tensor::F64(a) => Ok(Cow::Owned(a.iter().map(|&v| v as f32).collect())),
        other => Err(format!("observed a {} tensor where floats were expected", other.dtype())),
    }
}
