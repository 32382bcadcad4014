//! `calibrate{data=PATH}`: runs a function (`@main`) in the reference
//! interpreter over a data set and accumulates statistics into the attributes
//! of every `qnn.observe` it passes through.
//!
//! - **Data** (`qopt_interp::dataset`): a `.npy` whose leading dimension counts
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

use super::methods::{value_range, ObservedBatch, Observer, QuantMethods};
use super::stats::ObserverStats;
use super::util::op_named;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_interp::dataset::{ArgSpec, Dataset};
use qopt_interp::progress::{Progress, REDRAW_EVERY};
use qopt_interp::{dequantize_tensor, DType, Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::BadOptionValue;
use qopt_ir_core::{
    type_to_string, AttrData, Context, Diagnostic, FxHashMap, Module, OpId, Pass, PassContext, PassError,
    PassOutcome, QuantType, Severity, TypeData, DYNAMIC,
};
use std::borrow::Cow;
use std::path::Path;
use std::time::{Duration, Instant};

/// Named wall times of a calibration run's phases, for `--timing`.
type Phases = [(&'static str, Duration); 2];
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Interpreter calls per chunk, the unit of parallel work and of merging: an
/// eighth of the calls, between 8 and 64, so small data sets still spread over
/// the cores and large ones merge rarely. It depends on the number of calls
/// only, never on the thread count, which keeps the result the same for any
/// number of threads.
pub fn chunk_calls(calls: usize) -> usize {
    (calls / 8).clamp(8, 64)
}

/// The `calibrate` pass; see the module docs.
pub struct Calibrate;

/// The options `names` are counts, so not negative ([`Pass::check_options`]
/// of the passes that run a data set).
pub(super) fn check_counts(options: &PassOptions, names: &[&'static str]) -> Result<(), BadOptionValue> {
    for &name in names {
        let v = options.int(name);
        if v < 0 {
            return Err(BadOptionValue::new(name, format!("'{name}' must be at least 0, got {v}")));
        }
        if name == "threads" && v > MAX_THREADS {
            let message = format!("'threads' must be 0 (every core) to {MAX_THREADS}, got {v}");
            return Err(BadOptionValue::new(name, message));
        }
    }
    Ok(())
}

/// The most worker threads a data pass takes, as `qrun --threads`.
pub(super) const MAX_THREADS: i64 = 256;

impl Pass for Calibrate {
    fn name(&self) -> &'static str {
        "calibrate"
    }

    fn summary(&self) -> &'static str {
        "run @main over a data set and record statistics in the qnn.observe ops"
    }

    /// Observers are identities (`observe-is-identity`), whatever statistics
    /// they hold.
    fn equivalence(&self) -> Option<qopt_ir_core::equivalence::Relation> {
        Some(qopt_ir_core::equivalence::Relation::Exact)
    }

    fn description(&self) -> &'static str {
        "Runs the function (`@main`) in the reference interpreter over the samples of `data` (a \
         .npy with samples along dimension 0, an .npz with one member per argument, or a directory \
         of such files) and folds what every `qnn.observe` sees into its attributes (`min`, `max`, \
         `samples`, `histogram`, ...). Statistics already present are merged with, so calibrating \
         again on more data adds to them. Both cores are used; the result does not depend on the \
         thread count.\n\n\
         ```\n\
         %o = qnn.observe(%x) {observer = \"minmax\"} ...\n\
         // -> %o = qnn.observe(%x) {max = 3.5 : f32, min = -1.25 : f32, observer = \"minmax\", samples = 200} ...\n\
         ```"
    }

    fn options(&self) -> Vec<OptionSpec> {
        let mut options = DataSettings::options(
            "calibration data: a .npy, an .npz (one member per argument) or a directory of them",
        );
        options.push(OptionSpec::new("threads", OptionKind::Int, "0").help("worker threads (0: every core)"));
        options
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        check_counts(options, &["batches", "batch-size", "threads"])
    }

    fn run(
        &self,
        cx: &mut PassContext<'_>,
        module: &mut Module,
        options: &PassOptions,
    ) -> Result<PassOutcome, PassError> {
        let settings = Settings::read(options)?;
        let ctx: &Context = cx.ctx;
        let observers = find_observers(ctx, module)?;
        if observers.is_empty() {
            cx.warn(Diagnostic::warning(
                None,
                qopt_ir_core::SrcPos::NONE,
                "calibrate found no qnn.observe op; run insert-observers first",
            ));
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
            stats.store(cx.ctx, module, observer.op).map_err(|e| at_op(cx.ctx, module, observer.op, e))?;
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
        let threads = match non_negative(options, "threads")? {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        Ok(Settings { data: DataSettings::read(options)?, threads })
    }
}

/// Option `name` as a count, refused when negative.
fn non_negative(options: &PassOptions, name: &str) -> Result<usize, PassError> {
    let v = options.int(name);
    usize::try_from(v).map_err(|_| format!("'{name}' must be at least 0, got {v}").into())
}

/// The options of a pass that runs a function over a data set (`calibrate`,
/// `collect-calibration-data`), checked: `data`, `batches`, `batch-size`, `func`.
pub(super) struct DataSettings {
    /// The data set's path.
    pub data: String,
    /// The most interpreter calls (0: every sample).
    pub batches: usize,
    /// Samples per call for a dynamic batch dimension (0: 1).
    pub batch_size: usize,
    /// The function to run, without `@`.
    pub func: String,
}

impl DataSettings {
    /// The four options; `data_help` says what the data is for.
    pub fn options(data_help: &'static str) -> Vec<OptionSpec> {
        vec![
            OptionSpec::new("data", OptionKind::String, "").required().reads_file().help(data_help),
            OptionSpec::new("batches", OptionKind::Int, "0")
                .help("stop after this many interpreter calls (0: use every sample)"),
            OptionSpec::new("batch-size", OptionKind::Int, "0").help(
                "samples per call when the batch dimension is dynamic (0: 1); must match a static batch",
            ),
            OptionSpec::new("func", OptionKind::String, "main").help("the function to run"),
        ]
    }

    /// The options of a pass that declared [`DataSettings::options`].
    pub fn read(options: &PassOptions) -> Result<DataSettings, PassError> {
        let data = options.string("data").to_string();
        if data.is_empty() {
            return Err("'data' must name a .npy, .npz or directory".into());
        }
        Ok(DataSettings {
            data,
            batches: non_negative(options, "batches")?,
            batch_size: non_negative(options, "batch-size")?,
            func: options.string("func").trim_start_matches('@').to_string(),
        })
    }

    /// Opens the data set for the function (see [`CalibrationData::open`]).
    pub fn open(&self, ctx: &Context, module: &Module) -> Result<CalibrationData, PassError> {
        CalibrationData::open(ctx, module, &self.func, &self.data, self.batch_size)
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
        if !op_named(ctx, module, op, qnn_op::OBSERVE) || module.num_operands(op) != 1 {
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

fn at_op(ctx: &Context, module: &Module, op: OpId, message: String) -> PassError {
    Diagnostic::at_op(ctx, module, op, Severity::Error, message).into()
}

/// The `func.func` named `name`.
fn lookup_function(ctx: &Context, module: &Module, name: &str) -> Result<OpId, PassError> {
    match module.lookup_symbol(ctx, name) {
        Some(op) if module.op_name(op) == qopt_ir_core::OpName::FUNC && module.num_regions(op) == 1 => Ok(op),
        Some(_) => Err(format!("@{name} is not a function with a body").into()),
        None => Err(format!("there is no function @{name} to calibrate (set 'func')").into()),
    }
}

/// What each argument of `func` expects from the data set.
fn arg_specs(
    ctx: &Context,
    module: &Module,
    func: OpId,
    batch_size: usize,
) -> Result<Vec<ArgSpec>, PassError> {
    let inputs = match module.op_attr(ctx, func, "function_type").map(|a| ctx.attr_data(a)) {
        Some(AttrData::Type(t)) => match ctx.type_data(*t) {
            TypeData::Function { inputs, .. } => inputs.to_vec(),
            _ => return Err("the function has no function type".into()),
        },
        _ => return Err("the function has no function type".into()),
    };
    let mut specs = Vec::new();
    for (i, ty) in inputs.into_iter().enumerate() {
        let shape = ctx.tensor_shape(ty).ok_or_else(|| format!("argument {i} is not a tensor"))?.to_vec();
        let dtype = DType::of_element(ctx, ctx.element_type(ty)).map_err(|e| e.message)?;
        let mut dims = Vec::with_capacity(shape.len());
        for (d, &size) in shape.iter().enumerate() {
            match (d, size) {
                (0, DYNAMIC) => dims.push(batch_size.max(1)),
                (_, DYNAMIC) => {
                    return Err(format!(
                    "argument {i} ({}) has a dynamic dimension {d}; only the batch dimension may be dynamic",
                    type_to_string(ctx, ty)
                )
                    .into())
                }
                (0, b) if batch_size > 0 && b as usize != batch_size => {
                    return Err(format!(
                        "'batch-size' is {batch_size}, but argument {i} has the static batch {b} ({}); \
                         leave 'batch-size' unset or use a function with a dynamic batch",
                        type_to_string(ctx, ty)
                    )
                    .into())
                }
                (_, n) => dims.push(n as usize),
            }
        }
        specs.push(ArgSpec::new(format!("arg{i}"), dtype, dims));
    }
    Ok(specs)
}

/// A function's calibration data set, opened against its arguments: what
/// `calibrate`, `collect-calibration-data`, `bias-correct`, `absorb-bias` and
/// `round-weights` run over.
pub(super) struct CalibrationData {
    /// The samples, streamed.
    pub dataset: Dataset,
    /// Samples per interpreter call (the function's batch).
    pub per_call: usize,
}

impl CalibrationData {
    /// Opens `data` for function `@func` of `module` (`batch_size` for a
    /// dynamic batch dimension, 0: 1). Fails on a missing function, data that
    /// does not fit its arguments, or fewer samples than one batch.
    pub fn open(
        ctx: &Context,
        module: &Module,
        func: &str,
        data: &str,
        batch_size: usize,
    ) -> Result<CalibrationData, PassError> {
        let op = lookup_function(ctx, module, func)?;
        let specs = arg_specs(ctx, module, op, batch_size)?;
        let dataset = Dataset::open(Path::new(data), &specs).map_err(|e| e.to_string())?;
        let per_call = dataset.batch().max(1);
        if dataset.len() / per_call == 0 {
            return Err(format!(
                "'{data}' has {} sample(s), fewer than one batch of {per_call}",
                dataset.len()
            )
            .into());
        }
        Ok(CalibrationData { dataset, per_call })
    }

    /// The interpreter calls to make (at most `batches` when it is not 0),
    /// and a warning when samples that do not fill a last batch go unused.
    pub fn calls(&self, batches: usize) -> (usize, Option<Diagnostic>) {
        let calls = self.dataset.len() / self.per_call;
        let leftover = self.dataset.len() % self.per_call;
        if batches > 0 {
            return (calls.min(batches), None);
        }
        let warning = (leftover > 0).then(|| {
            Diagnostic::warning(
                None,
                qopt_ir_core::SrcPos::NONE,
                format!("the last {leftover} sample(s) do not fill a batch of {} and are not used", self.per_call),
            )
        });
        (calls, warning)
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
        let standard;
        let kernels = match KernelRegistry::of(self.ctx) {
            Some(k) => k,
            None => {
                standard = KernelRegistry::standard();
                &standard
            }
        };
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
            Some(ChunkError { op: Some(op), message }) => Err(at_op(self.ctx, self.module, op, message)),
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
