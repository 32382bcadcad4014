//! [`PairedRun`]: runs a function over a whole data set in two models at
//! once, the fake-quant model as the IR stands and the float model (every
//! `qnn.fake_quant` is the identity, and chosen operands are replaced, e.g.
//! corrected biases by float ones), so a pass can gather statistics of
//! chosen ops' results over every sample in both models and shift the
//! fake-quant ones per channel before any later op runs. `bias-correct` and
//! `absorb-bias` are built on it.
//!
//! - **Sweeps.** A watcher ([`Watcher`]) sees each watched op's result batch
//!   by batch, in batch order, and when the op has run on every batch it may
//!   return a per-channel shift of the fake-quant result ([`ChannelShift`]),
//!   which every later op sees. So with [`Sweeps::PerWatchedOp`] the function
//!   is cut after each watched op into segments, and each segment runs over
//!   every batch (a sweep) before the next starts; with [`Sweeps::One`] (no
//!   shifts) one sweep runs every op. No sweep runs the ops after the last
//!   watched op.
//! - **Memory.** A sweep runs batch-major: a worker takes one batch, reads its
//!   inputs (the function's arguments straight from the data set, the values
//!   a later segment still needs from the previous sweep's scratch file), runs
//!   the segment's ops on that batch only, and writes the values later
//!   segments need to this sweep's scratch file (two files in the temporary
//!   directory, `std::env::temp_dir()`, used in turn and removed at the end or
//!   on an interrupt). A shift is applied when the shifted value is read back.
//!   So memory holds the live values of at most `threads` batches, the values
//!   that do not depend on the data, the watcher's statistics and one file
//!   offset per batch: it does not grow with the data, the scratch file does
//!   (the values live across one segment boundary, for every sample).
//! - **Order.** The watcher is called in batch order, whatever thread ran the
//!   batch, and the scratch file is written in batch order, so the results do
//!   not depend on the thread count; each batch's tensors are what the op-major
//!   run this replaced computed, bit for bit.
//! - **Sharing.** A value equal in both models (everything before the first
//!   `qnn.fake_quant`) is held and written once. A value that does not depend
//!   on the data (constants, `qnn.fake_quant` of a weight) is computed once,
//!   not per batch.
//! - **Kernels.** Ops run through the interpreter's kernels
//!   ([`KernelRegistry`]), on the batches the interpreter would use, so the
//!   results are the interpreter's.
//! - **Scope.** One single-block function without `func.call` or ops with
//!   regions; anything else is an error at the op, before a kernel runs.

use crate::channels::channel_blocks_mut;
use crate::runs::data::CalibrationData;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_interp::progress::{Progress, REDRAW_EVERY};
use qopt_interp::{DType, Kernel, KernelContext, KernelRegistry, KernelResults, Tensor};
use qopt_ir_core::{
    AttrData, Context, FxHashMap, FxHashSet, Module, OpId, ScratchGuard, Traits, Type, ValueId,
};
use qopt_npy::RawArray;
use std::fs::File;
use std::io::{BufWriter, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// A value in the fake-quant and the float model; the two are the same
/// allocation while they are equal.
#[derive(Clone)]
struct Pair {
    quant: Arc<Tensor>,
    float: Arc<Tensor>,
}

impl Pair {
    fn shared(tensor: Tensor) -> Pair {
        let shared = Arc::new(tensor);
        Pair { quant: shared.clone(), float: shared }
    }

    fn is_shared(&self) -> bool {
        Arc::ptr_eq(&self.quant, &self.float)
    }
}

/// What failed: a message, at the op to blame when there is one.
pub struct RunFailure {
    /// The op that failed.
    pub op: Option<OpId>,
    /// What went wrong.
    pub message: String,
}

impl RunFailure {
    fn at(op: OpId, message: impl Into<String>) -> RunFailure {
        RunFailure { op: Some(op), message: message.into() }
    }

    fn whole(message: impl Into<String>) -> RunFailure {
        RunFailure { op: None, message: message.into() }
    }
}

/// `delta[c]` subtracted (as f32) from every value of channel `c` on `axis`.
pub struct ChannelShift {
    /// The channel axis.
    pub axis: usize,
    /// One amount per channel.
    pub delta: Vec<f64>,
}

impl ChannelShift {
    /// Shifts `tensor`, an f32 tensor with `delta.len()` channels on `axis`.
    pub fn apply(&self, tensor: &mut Tensor) -> Result<(), String> {
        if self.delta.iter().all(|&d| d == 0.0) {
            return Ok(());
        }
        let shape = tensor.shape().to_vec();
        if shape.get(self.axis) != Some(&self.delta.len()) {
            return Err(format!(
                "a result of shape {shape:?} does not have {} channels on axis {}",
                self.delta.len(),
                self.axis
            ));
        }
        let Tensor::F32(array) = tensor else { return Err("the result is not an f32 tensor".into()) };
        let Some(values) = array.as_slice_mut() else { return Err("the result is not contiguous".into()) };
        for (channel, run) in channel_blocks_mut(values, &shape, self.axis) {
            let d = self.delta[channel] as f32;
            run.iter_mut().for_each(|v| *v -= d);
        }
        Ok(())
    }
}

/// What a pass does with the watched ops' results.
pub trait Watcher: Send {
    /// One batch of a watched op's first result, in the fake-quant and the
    /// float model; called in batch order for each op.
    fn observe(&mut self, op: OpId, quant: &Tensor, float: &Tensor) -> Result<(), String>;

    /// Called once `op` has run on every batch: the shift of its fake-quant
    /// result that later ops see, if any (only under [`Sweeps::PerWatchedOp`]).
    fn finish(&mut self, op: OpId) -> Result<Option<ChannelShift>, String>;
}

/// A watched result written unshifted, and the shift to apply when it is read.
type Pending = (ValueId, ChannelShift);

/// How the function is cut into sweeps; see the module docs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Sweeps {
    /// One sweep per watched op, so each op's shift reaches the later ops.
    PerWatchedOp,
    /// One sweep; the watcher returns no shifts.
    One,
}

/// A step of the run: an op with its kernel and types, looked up once.
struct Step {
    op: OpId,
    /// `None` for a constant.
    kernel: Option<Kernel>,
    operand_types: Vec<Type>,
    result_types: Vec<Type>,
    fake_quant: bool,
}

/// A paired run of one function (see the module docs).
pub struct PairedRun<'a> {
    ctx: &'a Context,
    module: &'a Module,
    /// The function's ops, before its `func.return`.
    steps: Vec<Step>,
    /// The function's arguments.
    args: Vec<ValueId>,
    threads: usize,
}

/// The data a run reads: `calls` interpreter calls of `data`.
pub struct RunData<'d> {
    /// The opened data set.
    pub data: &'d CalibrationData,
    /// The calls to run (from the first).
    pub calls: usize,
}

impl<'a> PairedRun<'a> {
    /// A run of function `func`, checked: one block, a kernel for every op,
    /// no calls or regions.
    pub fn new(
        ctx: &'a Context,
        module: &'a Module,
        kernels: &'a KernelRegistry,
        func: OpId,
        threads: usize,
    ) -> Result<PairedRun<'a>, RunFailure> {
        let whole = |message: &str| RunFailure { op: Some(func), message: message.to_string() };
        if module.num_regions(func) != 1 {
            return Err(whole("the function has no body"));
        }
        let blocks: Vec<_> = module.blocks(module.region(func, 0)).collect();
        let [entry] = blocks.as_slice() else {
            return Err(whole("the function must have exactly one block"));
        };
        let mut steps = Vec::new();
        for op in module.block_ops(*entry) {
            let name = ctx.op_name_str(module.op_name(op));
            if name == "func.return" {
                break;
            }
            if name == "func.call" {
                return Err(RunFailure::at(
                    op,
                    "calls are not supported here; the model must be one function",
                ));
            }
            if module.num_regions(op) > 0 {
                return Err(RunFailure::at(op, "ops with regions are not supported here"));
            }
            let kernel = match constant_of(ctx, module, op) {
                Some(_) => None,
                None => Some(
                    kernels
                        .get(name)
                        .ok_or_else(|| RunFailure::at(op, format!("no interpreter kernel runs '{name}'")))?,
                ),
            };
            steps.push(Step {
                op,
                kernel,
                operand_types: module.operands(op).map(|v| module.value_type(v)).collect(),
                result_types: module.results(op).map(|v| module.value_type(v)).collect(),
                fake_quant: name == qnn_op::FAKE_QUANT,
            });
        }
        let args = module.block_args(*entry).to_vec();
        Ok(PairedRun { ctx, module, steps, args, threads: threads.max(1) })
    }

    /// Runs the function on the calls of `data`, showing the watcher the
    /// first result of every op in `watched` batch by batch and applying the
    /// shifts it returns (see the module docs). `float_operands` replaces one
    /// operand of an op in the float model. A watcher's error stops the run.
    /// `label` names the progress bar.
    pub fn run(
        &self,
        data: RunData<'_>,
        watched: &FxHashSet<OpId>,
        float_operands: &FxHashMap<OpId, (usize, Tensor)>,
        sweeps: Sweeps,
        watcher: &mut dyn Watcher,
        label: &'static str,
    ) -> Result<(), RunFailure> {
        let Some(last) = self.steps.iter().rposition(|s| watched.contains(&s.op)) else { return Ok(()) };
        let steps = &self.steps[..=last];
        let plan = Plan::new(self.module, &self.args, steps, watched, sweeps);
        let constants = self.constants(steps, &plan.dependent, float_operands)?;
        if let Some(step) = steps.iter().find(|s| watched.contains(&s.op) && !plan.dependent.contains(&s.op))
        {
            return Err(RunFailure::at(step.op, "its result does not depend on the data"));
        }
        let per_call = data.data.per_call;
        let progress =
            Progress::new(plan.segments.len() * data.calls * per_call, "samples").with_label(label);
        let scratch = Scratch::create()?;
        // The previous sweep's file offsets, and the shift its last layer's result awaits.
        let mut previous: Option<(Vec<u64>, Option<Pending>)> = None;
        let result = (|| {
            for (s, segment) in plan.segments.iter().enumerate() {
                let context = SweepContext {
                    run: self,
                    data: &data,
                    steps: &steps[segment.start..=segment.end],
                    first_step: segment.start,
                    plan: &plan,
                    live_in: s.checked_sub(1).map_or(&[][..], |p| &plan.segments[p].live_out),
                    live_out: &segment.live_out,
                    constants: &constants,
                    float_operands,
                    watched,
                    read_path: scratch.path(s + 1),
                    read_offsets: previous.as_ref().map(|p| &p.0),
                    pending: previous.as_ref().and_then(|p| p.1.as_ref()),
                    progress: &progress,
                };
                let offsets = context.sweep(scratch.path(s), watcher)?;
                let mut shift = None;
                for step in context.steps.iter().filter(|st| watched.contains(&st.op)) {
                    let found = watcher.finish(step.op).map_err(|m| RunFailure::at(step.op, m))?;
                    match (found, sweeps) {
                        (Some(found), Sweeps::PerWatchedOp) => {
                            shift = Some((self.module.result(step.op, 0), found))
                        }
                        (Some(_), Sweeps::One) => {
                            return Err(RunFailure::at(step.op, "a shift in a run of one sweep"));
                        }
                        (None, _) => {}
                    }
                }
                previous = Some((offsets, shift));
            }
            Ok(())
        })();
        progress.finish();
        result
    }

    /// The values that do not depend on the data, each computed once.
    fn constants(
        &self,
        steps: &[Step],
        dependent: &FxHashSet<OpId>,
        float_operands: &FxHashMap<OpId, (usize, Tensor)>,
    ) -> Result<FxHashMap<ValueId, Pair>, RunFailure> {
        let mut values = FxHashMap::default();
        for step in steps.iter().filter(|s| !dependent.contains(&s.op)) {
            let results = self.step(step, &values, None, float_operands.get(&step.op))?;
            values.extend(self.module.results(step.op).zip(results));
        }
        Ok(values)
    }

    /// Runs `step` in both models on operands from `values` (then
    /// `constants`); `float_operand` replaces one operand in the float model.
    fn step(
        &self,
        step: &Step,
        values: &FxHashMap<ValueId, Pair>,
        constants: Option<&FxHashMap<ValueId, Pair>>,
        float_operand: Option<&(usize, Tensor)>,
    ) -> Result<Vec<Pair>, RunFailure> {
        let (ctx, module, op) = (self.ctx, self.module, step.op);
        let Some(kernel) = step.kernel else {
            let value = constant_of(ctx, module, op).ok_or_else(|| RunFailure::at(op, "not a constant"))?;
            let AttrData::Dense(d) = ctx.attr_data(value) else {
                return Err(RunFailure::at(op, "the constant's value is not dense"));
            };
            let tensor = Tensor::from_dense(ctx, d).map_err(|e| RunFailure::at(op, e.message))?;
            return Ok(vec![Pair::shared(tensor)]);
        };
        let operands = module
            .operands(op)
            .map(|v| {
                values
                    .get(&v)
                    .or_else(|| constants.and_then(|c| c.get(&v)))
                    .ok_or_else(|| RunFailure::at(op, "uses a value defined outside the function"))
            })
            .collect::<Result<Vec<&Pair>, _>>()?;
        let call = |tensors: Vec<&Tensor>| -> Result<KernelResults, RunFailure> {
            let mut kc = KernelContext::new(ctx, module.op_attrs(op), &step.result_types)
                .with_operand_types(&step.operand_types);
            let results = kernel(&mut kc, &tensors).map_err(|e| RunFailure::at(op, e.message))?;
            if results.len() != step.result_types.len() {
                return Err(RunFailure::at(op, "the kernel returned the wrong number of results"));
            }
            Ok(results)
        };
        let quant = call(operands.iter().map(|p| &*p.quant).collect())?;
        if step.fake_quant {
            // The float model does not quantize.
            let float =
                operands.first().map(|p| p.float.clone()).ok_or_else(|| RunFailure::at(op, "no operand"))?;
            return Ok(quant
                .into_iter()
                .map(|q| Pair { quant: Arc::new(q), float: float.clone() })
                .collect());
        }
        if float_operand.is_none() && operands.iter().all(|p| p.is_shared()) {
            return Ok(quant.into_iter().map(Pair::shared).collect());
        }
        let float_tensors = operands
            .iter()
            .enumerate()
            .map(|(i, p)| match float_operand {
                Some((at, t)) if *at == i => t,
                _ => &*p.float,
            })
            .collect();
        let float = call(float_tensors)?;
        Ok(quant
            .into_iter()
            .zip(float)
            .map(|(q, f)| Pair { quant: Arc::new(q), float: Arc::new(f) })
            .collect())
    }
}

/// Which ops depend on the data, and the segments of the run.
struct Plan {
    /// Ops whose results depend on the function's arguments.
    dependent: FxHashSet<OpId>,
    /// Values the function's arguments.
    args: FxHashMap<ValueId, usize>,
    /// For each value, the index of the last step using it.
    last_use: FxHashMap<ValueId, usize>,
    segments: Vec<Segment>,
}

/// Steps `start..=end`, and the data-dependent values they (or earlier
/// segments) define that later segments use, in a fixed order.
struct Segment {
    start: usize,
    end: usize,
    live_out: Vec<ValueId>,
}

impl Plan {
    fn new(
        module: &Module,
        args: &[ValueId],
        steps: &[Step],
        watched: &FxHashSet<OpId>,
        sweeps: Sweeps,
    ) -> Plan {
        let args: FxHashMap<ValueId, usize> = args.iter().enumerate().map(|(i, &a)| (a, i)).collect();
        let mut dependent_values: FxHashSet<ValueId> = args.keys().copied().collect();
        let mut dependent = FxHashSet::default();
        let mut last_use = FxHashMap::default();
        for (index, step) in steps.iter().enumerate() {
            if step.kernel.is_some() && module.operands(step.op).any(|v| dependent_values.contains(&v)) {
                dependent.insert(step.op);
                dependent_values.extend(module.results(step.op));
            }
            for value in module.operands(step.op) {
                last_use.insert(value, index);
            }
        }
        let ends: Vec<usize> = match sweeps {
            Sweeps::PerWatchedOp => {
                steps.iter().enumerate().filter(|(_, s)| watched.contains(&s.op)).map(|(i, _)| i).collect()
            }
            Sweeps::One => vec![steps.len() - 1],
        };
        let mut segments = Vec::with_capacity(ends.len());
        let mut start = 0;
        for end in ends {
            let live_out = steps[..=end]
                .iter()
                .filter(|s| dependent.contains(&s.op))
                .flat_map(|s| module.results(s.op))
                .filter(|v| last_use.get(v).is_some_and(|&l| l > end))
                .collect();
            segments.push(Segment { start, end, live_out });
            start = end + 1;
        }
        Plan { dependent, args, last_use, segments }
    }
}

/// Two scratch files in the temporary directory, removed when dropped.
struct Scratch {
    paths: [PathBuf; 2],
    _guards: [ScratchGuard; 2],
}

impl Scratch {
    fn create() -> Result<Scratch, RunFailure> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir();
        let paths = [0, 1].map(|i| dir.join(format!(".qopt-paired-run-{}-{n}-{i}", std::process::id())));
        let guards = [ScratchGuard::new(&paths[0]), ScratchGuard::new(&paths[1])];
        Ok(Scratch { paths, _guards: guards })
    }

    /// The file sweep `sweep` writes.
    fn path(&self, sweep: usize) -> &Path {
        &self.paths[sweep % 2]
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for path in &self.paths {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// One sweep: a segment of steps over every batch.
struct SweepContext<'s, 'a> {
    run: &'s PairedRun<'a>,
    data: &'s RunData<'s>,
    steps: &'s [Step],
    /// The index of `steps[0]` in the whole run.
    first_step: usize,
    plan: &'s Plan,
    live_in: &'s [ValueId],
    live_out: &'s [ValueId],
    constants: &'s FxHashMap<ValueId, Pair>,
    float_operands: &'s FxHashMap<OpId, (usize, Tensor)>,
    watched: &'s FxHashSet<OpId>,
    /// The previous sweep's file and its offset per batch (and one past the last).
    read_path: &'s Path,
    read_offsets: Option<&'s Vec<u64>>,
    /// The shift of a value written by the previous sweep, applied on reading.
    pending: Option<&'s Pending>,
    progress: &'s Progress,
}

/// The turn-taking state of a sweep's workers.
struct Turns<'w> {
    /// The batch whose turn it is.
    next: usize,
    error: Option<RunFailure>,
    running: usize,
    watcher: &'w mut dyn Watcher,
    out: BufWriter<File>,
    offsets: Vec<u64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one batch produced: the watched results and the live values' bytes.
type BatchOutput = (Vec<(OpId, Pair)>, Vec<u8>);

impl SweepContext<'_, '_> {
    /// Runs the segment over every batch, writing `path`; returns its offsets.
    fn sweep(&self, path: &Path, watcher: &mut dyn Watcher) -> Result<Vec<u64>, RunFailure> {
        let calls = self.data.calls;
        let io = |e: std::io::Error| RunFailure::whole(format!("scratch file {}: {e}", path.display()));
        let out = BufWriter::new(File::create(path).map_err(io)?);
        let workers = self.run.threads.clamp(1, calls.max(1));
        let state =
            Mutex::new(Turns { next: 0, error: None, running: workers, watcher, out, offsets: vec![0] });
        let (claim, abort, turn) = (AtomicUsize::new(0), AtomicBool::new(false), Condvar::new());
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let (claim, abort, state, turn) = (&claim, &abort, &state, &turn);
                scope.spawn(move || {
                    let mut reader = None;
                    loop {
                        let batch = claim.fetch_add(1, Ordering::Relaxed);
                        if batch >= calls {
                            break;
                        }
                        // A claimed batch always takes its turn, so later batches never wait forever.
                        let output = if abort.load(Ordering::Relaxed) {
                            None
                        } else {
                            Some(self.batch(batch, &mut reader))
                        };
                        let mut turns = lock(state);
                        while turns.next != batch {
                            turns = turn.wait(turns).unwrap_or_else(PoisonError::into_inner);
                        }
                        let failure = match output {
                            Some(Ok(output)) if turns.error.is_none() => {
                                Self::merge(&mut turns, output).err()
                            }
                            Some(Err(e)) => Some(e),
                            _ => None,
                        };
                        if let Some(e) = failure {
                            abort.store(true, Ordering::Relaxed);
                            turns.error.get_or_insert(e);
                        }
                        turns.next += 1;
                        drop(turns);
                        (0..self.data.data.per_call).for_each(|_| self.progress.advance());
                        turn.notify_all();
                    }
                    lock(state).running -= 1;
                    turn.notify_all();
                });
            }
            // This thread only draws the progress bar until the workers are done.
            let mut turns = lock(&state);
            while turns.running > 0 {
                turns = turn.wait_timeout(turns, REDRAW_EVERY).map_or_else(|e| e.into_inner().0, |(m, _)| m);
                self.progress.redraw();
            }
        });
        let turns = state.into_inner().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = turns.error {
            return Err(e);
        }
        turns.out.into_inner().map_err(|e| io(e.into_error()))?;
        Ok(turns.offsets)
    }

    /// Hands one batch's watched results to the watcher and appends its live values.
    fn merge(turns: &mut Turns<'_>, (seen, bytes): BatchOutput) -> Result<(), RunFailure> {
        for (op, pair) in &seen {
            turns.watcher.observe(*op, &pair.quant, &pair.float).map_err(|m| RunFailure::at(*op, m))?;
        }
        turns.out.write_all(&bytes).map_err(|e| RunFailure::whole(format!("writing a scratch file: {e}")))?;
        let end = turns.offsets.last().copied().unwrap_or(0) + bytes.len() as u64;
        turns.offsets.push(end);
        Ok(())
    }

    /// Runs the segment on batch `batch`.
    fn batch(&self, batch: usize, reader: &mut Option<File>) -> Result<BatchOutput, RunFailure> {
        let (module, plan) = (self.run.module, self.plan);
        let mut values: FxHashMap<ValueId, Pair> = FxHashMap::default();
        let uses_args = self.steps.iter().any(|s| module.operands(s.op).any(|v| plan.args.contains_key(&v)));
        if uses_args {
            let per_call = self.data.data.per_call;
            let inputs = self
                .data
                .data
                .dataset
                .read(batch * per_call, per_call)
                .map_err(|e| RunFailure::whole(e.to_string()))?;
            if inputs.len() != self.run.args.len() {
                return Err(RunFailure::whole("a batch has the wrong number of inputs"));
            }
            values.extend(self.run.args.iter().copied().zip(inputs.into_iter().map(Pair::shared)));
        }
        if let Some(offsets) = self.read_offsets {
            self.read_live(batch, offsets, reader, &mut values)?;
        }
        let mut seen = Vec::new();
        for (i, step) in self.steps.iter().enumerate() {
            if !plan.dependent.contains(&step.op) {
                continue;
            }
            let results =
                self.run.step(step, &values, Some(self.constants), self.float_operands.get(&step.op))?;
            if self.watched.contains(&step.op) {
                let first = results.first().ok_or_else(|| RunFailure::at(step.op, "no result"))?;
                seen.push((step.op, first.clone()));
            }
            values.extend(module.results(step.op).zip(results));
            let index = self.first_step + i;
            for value in module.operands(step.op) {
                if plan.last_use.get(&value).is_none_or(|&last| last <= index) {
                    values.remove(&value);
                }
            }
        }
        let mut bytes = Vec::new();
        for value in self.live_out {
            let pair = values.get(value).ok_or_else(|| RunFailure::whole("a live value was not computed"))?;
            encode(pair, &mut bytes);
        }
        Ok((seen, bytes))
    }

    /// Reads the live values of `batch` from the previous sweep's file.
    fn read_live(
        &self,
        batch: usize,
        offsets: &[u64],
        reader: &mut Option<File>,
        values: &mut FxHashMap<ValueId, Pair>,
    ) -> Result<(), RunFailure> {
        let bad = |e: String| RunFailure::whole(format!("scratch file {}: {e}", self.read_path.display()));
        let (Some(&start), Some(&end)) = (offsets.get(batch), offsets.get(batch + 1)) else {
            return Err(bad(format!("no entry for batch {batch}")));
        };
        if reader.is_none() {
            *reader = Some(File::open(self.read_path).map_err(|e| bad(e.to_string()))?);
        }
        let Some(file) = reader.as_mut() else { return Err(bad("not open".into())) };
        let mut bytes = vec![0u8; usize::try_from(end - start).map_err(|e| bad(e.to_string()))?];
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.read_exact(&mut bytes))
            .map_err(|e| bad(e.to_string()))?;
        let mut at = &bytes[..];
        for &value in self.live_in {
            let mut pair = decode(&mut at).map_err(bad)?;
            if let Some((shifted, shift)) = self.pending.filter(|(v, _)| *v == value) {
                let op = module_def(self.run.module, *shifted);
                shift.apply(Arc::make_mut(&mut pair.quant)).map_err(|m| RunFailure { op, message: m })?;
            }
            values.insert(value, pair);
        }
        Ok(())
    }
}

/// The op defining `value`, if an op does.
fn module_def(module: &Module, value: ValueId) -> Option<OpId> {
    let op = module.defining_op(value);
    (!op.is_none()).then_some(op)
}

/// The storage types a scratch file holds, by code.
const DTYPES: [DType; 8] =
    [DType::F32, DType::F64, DType::I8, DType::U8, DType::I16, DType::I32, DType::I64, DType::Bool];

/// Appends `pair`: a byte saying whether the models share it, then one
/// tensor or two (fake-quant, float).
fn encode(pair: &Pair, out: &mut Vec<u8>) {
    let shared = pair.is_shared();
    out.push(u8::from(shared));
    encode_tensor(&pair.quant, out);
    if !shared {
        encode_tensor(&pair.float, out);
    }
}

/// Appends a tensor: dtype code, rank (u32), dims (u64), little-endian data.
fn encode_tensor(tensor: &Tensor, out: &mut Vec<u8>) {
    let head = |out: &mut Vec<u8>, dtype: DType, shape: &[usize]| {
        out.push(DTYPES.iter().position(|&d| d == dtype).unwrap_or(0) as u8);
        out.extend_from_slice(&(shape.len() as u32).to_le_bytes());
        shape.iter().for_each(|&d| out.extend_from_slice(&(d as u64).to_le_bytes()));
    };
    // The activations are f32: written without the `.npy` array in between.
    if let Some(values) = tensor.as_f32().and_then(|a| a.as_slice()) {
        head(out, DType::F32, tensor.shape());
        out.reserve(values.len() * 4);
        values.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        return;
    }
    let raw = tensor.to_raw();
    head(out, raw.dtype, &raw.shape);
    out.extend_from_slice(&raw.data);
}

/// Reads what [`encode`] wrote, advancing `at`.
fn decode(at: &mut &[u8]) -> Result<Pair, String> {
    let shared = take(at, 1)?[0] != 0;
    let quant = decode_tensor(at)?;
    if shared {
        return Ok(Pair::shared(quant));
    }
    Ok(Pair { quant: Arc::new(quant), float: Arc::new(decode_tensor(at)?) })
}

fn decode_tensor(at: &mut &[u8]) -> Result<Tensor, String> {
    let dtype = *DTYPES.get(usize::from(take(at, 1)?[0])).ok_or("an unknown dtype")?;
    let rank = u32::from_le_bytes(take(at, 4)?.try_into().map_err(|_| "a short rank")?) as usize;
    let mut shape = Vec::with_capacity(rank.min(64));
    for _ in 0..rank {
        let d = u64::from_le_bytes(take(at, 8)?.try_into().map_err(|_| "a short dimension")?);
        shape.push(usize::try_from(d).map_err(|e| e.to_string())?);
    }
    let len =
        shape.iter().try_fold(dtype.size(), |n: usize, &d| n.checked_mul(d)).ok_or("a tensor too large")?;
    let data = take(at, len)?;
    if dtype == DType::F32 {
        let values = data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        return Tensor::from_f32(&shape, values).map_err(|e| e.message);
    }
    let raw = RawArray::new(dtype, shape, data.to_vec()).map_err(|e| e.to_string())?;
    Tensor::from_raw(&raw).map_err(|e| e.message)
}

/// The first `n` bytes of `at`, advancing it.
fn take<'b>(at: &mut &'b [u8], n: usize) -> Result<&'b [u8], String> {
    if at.len() < n {
        return Err("the entry is truncated".into());
    }
    let (head, rest) = at.split_at(n);
    *at = rest;
    Ok(head)
}

/// The dense `value` of a `ConstantLike` op without operands.
fn constant_of(ctx: &Context, module: &Module, op: OpId) -> Option<qopt_ir_core::Attribute> {
    let def = ctx.op_def(module.op_name(op))?;
    if !def.has(Traits::CONSTANT_LIKE) || module.num_operands(op) != 0 {
        return None;
    }
    let value = module.op_attr(ctx, op, "value")?;
    matches!(ctx.attr_data(value), AttrData::Dense(_)).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_entries_round_trip_bit_for_bit() {
        let f = Tensor::from_f32(&[2, 2], vec![1.5, -0.0, f32::MIN_POSITIVE, 3.0]).unwrap();
        let g = Tensor::from_f32(&[1], vec![7.0]).unwrap();
        let i = Tensor::from_raw(&RawArray::from_elements(vec![3], &[-1i64, 0, i64::MAX]).unwrap()).unwrap();
        let mut bytes = Vec::new();
        encode(&Pair::shared(f.clone()), &mut bytes);
        encode(&Pair { quant: Arc::new(g.clone()), float: Arc::new(f.clone()) }, &mut bytes);
        encode(&Pair::shared(i.clone()), &mut bytes);
        let mut at = &bytes[..];
        let first = decode(&mut at).unwrap();
        assert!(first.is_shared() && first.quant.bit_equal(&f));
        let second = decode(&mut at).unwrap();
        assert!(!second.is_shared() && second.quant.bit_equal(&g) && second.float.bit_equal(&f));
        let third = decode(&mut at).unwrap();
        assert!(third.is_shared() && third.quant.bit_equal(&i));
        assert!(at.is_empty());
        for cut in 0..bytes.len() {
            let mut short = &bytes[..cut];
            let decoded =
                decode(&mut short).and_then(|_| decode(&mut short)).and_then(|_| decode(&mut short));
            assert!(decoded.is_err(), "a prefix of {cut} bytes decoded");
        }
    }

    #[test]
    fn a_shift_moves_each_channel_by_its_amount() {
        let mut t = Tensor::from_f32(&[1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        ChannelShift { axis: 1, delta: vec![0.5, -1.0] }.apply(&mut t).unwrap();
        assert_eq!(t.as_f32().unwrap().iter().copied().collect::<Vec<_>>(), [0.5, 1.5, 4.0, 5.0]);
        assert!(ChannelShift { axis: 1, delta: vec![1.0; 3] }.apply(&mut t).is_err());
    }
}
