//! One side of a `qopt --verify-numerics` comparison: the module's entry
//! function run in the reference interpreter on N deterministic random
//! inputs ([`SampleRuns::run`]), with what the comparison needs to know about
//! its results.
//!
//! - **Entry function**: `@main` if the module has one, else its only public
//!   function with a body (the one `qrun` runs by default).
//! - **Inputs**: input `k` is [`qopt_interp::random_arguments`] seeded with
//!   `seed + k`: floats standard normal, quantized values uniform over the
//!   storage range, booleans fair, plain integers in `0..=7`
//!   ([`IntegerValues::Small`]). A dynamic dimension is not guessed: the side
//!   is not run.
//! - **Kernels**: those installed in the context (a downstream dialect's
//!   included), else the standard ones.
//! - **Progress**: on a terminal, a bar over the inputs of each side.
//! - **Threads**: the inputs are spread over the cores, one forked
//!   interpreter per thread (sharing plans and constant tensors); the results
//!   and the error reported (the first input's, in input order) do not depend
//!   on the thread count or timing.
//!
//! Every reason a side cannot run (no entry function, a dynamic or huge
//! argument, a missing kernel, an error while running, more output elements
//! than [`MAX_KEPT_ELEMENTS`]) is a message, never a panic.

use crate::difference::QuantGrid;
use qopt_interp::progress::{Progress, REDRAW_EVERY};
use qopt_interp::{
    check_random_arguments, random_arguments, IntegerValues, Interpreter, KernelRegistry, RandomInputs,
    Tensor,
};
use qopt_ir_core::{
    function_signature, static_num_elements, type_to_string, Context, Module, OpId, OpView, Type,
};
use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The most output elements one side keeps for comparison, over all its
/// inputs (2^26: 256 MiB of f32).
pub const MAX_KEPT_ELEMENTS: u64 = 1 << 26;

/// How inputs are drawn: small plain integers, no guessed dynamic sizes.
const INPUTS: RandomInputs = RandomInputs { integers: IntegerValues::Small, dynamic_size: None };

/// The entry function of a module run on every input.
#[derive(Clone, Debug)]
pub struct SampleRuns {
    /// The function's name, without `@`.
    pub function: String,
    /// Its argument types.
    pub args: Vec<Type>,
    /// Its result types.
    pub results: Vec<Type>,
    /// The quantization grid of each result, if it has one.
    pub grids: Vec<Option<QuantGrid>>,
    /// The op producing each result (`OpId::NONE` for an argument), to locate
    /// messages.
    pub producers: Vec<OpId>,
    /// The results of each input, in input order.
    pub outputs: Vec<Vec<Tensor>>,
}

impl SampleRuns {
    /// Runs the entry function of `module` on `count` inputs, input `k` drawn
    /// with seed `seed + k`; an error says why it cannot run.
    pub fn run(ctx: &Context, module: &Module, count: u32, seed: u64) -> Result<SampleRuns, String> {
        let (func, function) = entry_function(ctx, module)?;
        let view = OpView::new(ctx, module, func);
        let (args, results) = function_signature(&view).map_err(|e| format!("@{function}: {e}"))?;
        let (args, results) = (args.to_vec(), results.to_vec());
        let (grids, producers) = result_grids(ctx, module, func, &results);
        check_random_arguments(ctx, &args, &INPUTS)
            .map_err(|e| format!("argument #{} of @{function} {}", e.argument, e.message))?;
        let kernels = KernelRegistry::of_or_standard(ctx).into_owned();
        let mut interpreter = Interpreter::new(ctx, module, &kernels);
        interpreter.prepare(&function).map_err(|e| e.to_string())?;
        let limit_message = || {
            format!(
                "the results of {count} inputs have more than {MAX_KEPT_ELEMENTS} elements to keep for the \
                 comparison; ask for fewer inputs"
            )
        };
        let static_elements: Option<u64> = results
            .iter()
            .map(|&ty| static_num_elements(ctx, ty))
            .try_fold(0u64, |sum, n| sum.checked_add(n?));
        // Results of static shapes are counted before anything runs.
        if let Some(per_input) = static_elements {
            if per_input.checked_mul(u64::from(count)).is_none_or(|n| n > MAX_KEPT_ELEMENTS) {
                return Err(limit_message());
            }
        }
        let job = Job {
            ctx,
            function: &function,
            args: &args,
            seed,
            kept: AtomicU64::new(0),
            over: AtomicBool::new(false),
            progress: Progress::new(count as usize, "inputs").with_label("verify-numerics"),
        };
        let outputs = job.run_all(&interpreter, count)?;
        if job.over.load(Ordering::Relaxed) {
            return Err(limit_message());
        }
        Ok(SampleRuns { function, args, results, grids, producers, outputs })
    }

    /// `@main(tensor<1x4xf32>) -> tensor<1x2xf32>`, for messages.
    pub fn signature_text(&self, ctx: &Context) -> String {
        let list =
            |types: &[Type]| types.iter().map(|&t| type_to_string(ctx, t)).collect::<Vec<_>>().join(", ");
        format!("@{}({}) -> ({})", self.function, list(&self.args), list(&self.results))
    }
}

/// The runs of one side, spread over the cores: each thread has its own
/// interpreter (a fork sharing the plans and constant tensors) and takes a
/// contiguous range of inputs, so results come back in input order.
struct Job<'a> {
    ctx: &'a Context,
    function: &'a str,
    args: &'a [Type],
    seed: u64,
    /// Output elements kept so far, over every thread.
    kept: AtomicU64,
    /// Set once `kept` passed [`MAX_KEPT_ELEMENTS`]: every thread stops.
    over: AtomicBool,
    /// Inputs run, drawn on a terminal.
    progress: Progress,
}

impl Job<'_> {
    /// The results of every input in order, or the error of the first input
    /// that failed (each input runs, so the error does not depend on timing).
    /// The calling thread draws the progress bar while the workers run.
    fn run_all(&self, interpreter: &Interpreter<'_>, count: u32) -> Result<Vec<Vec<Tensor>>, String> {
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        let threads = u32::try_from(cores).unwrap_or(1).clamp(1, count.max(1));
        let results = if threads == 1 {
            self.run_range(&mut interpreter.fork(), 0..count, None).into_iter().collect()
        } else {
            let caller = std::thread::current();
            let per_thread: Vec<Vec<Result<Vec<Tensor>, String>>> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let mut worker = interpreter.fork();
                        let range = t * count / threads..(t + 1) * count / threads;
                        let caller = caller.clone();
                        scope.spawn(move || {
                            let results = self.run_range(&mut worker, range, Some(&caller));
                            caller.unpark();
                            results
                        })
                    })
                    .collect();
                while !handles.iter().all(|h| h.is_finished()) {
                    self.progress.redraw();
                    std::thread::park_timeout(REDRAW_EVERY);
                }
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| vec![Err("an interpreter thread panicked".to_string())])
                    })
                    .collect()
            });
            per_thread.into_iter().flatten().collect()
        };
        self.progress.finish();
        results
    }

    /// The results of inputs `range`, until the kept elements are too many.
    /// A worker thread counts on the bar and wakes `caller`, which draws it;
    /// without one (`None`) this thread draws.
    fn run_range(
        &self,
        worker: &mut Interpreter<'_>,
        range: Range<u32>,
        caller: Option<&std::thread::Thread>,
    ) -> Vec<Result<Vec<Tensor>, String>> {
        let mut results = Vec::with_capacity(range.len());
        for k in range {
            if self.over.load(Ordering::Relaxed) {
                break;
            }
            let result = self.run_one(worker, k);
            self.progress.advance();
            match caller {
                Some(caller) => caller.unpark(),
                None => self.progress.redraw(),
            }
            if let Ok(values) = &result {
                let elements: u64 = values.iter().map(|t| t.len() as u64).sum();
                if self.kept.fetch_add(elements, Ordering::Relaxed) + elements > MAX_KEPT_ELEMENTS {
                    self.over.store(true, Ordering::Relaxed);
                }
            }
            results.push(result);
        }
        results
    }

    fn run_one(&self, worker: &mut Interpreter<'_>, k: u32) -> Result<Vec<Tensor>, String> {
        let function = self.function;
        let inputs = random_arguments(self.ctx, self.args, self.seed.wrapping_add(u64::from(k)), &INPUTS)
            .map_err(|e| format!("argument #{} of @{function} {}", e.argument, e.message))?;
        worker.run(function, &inputs).map_err(|e| format!("input #{k}: {e}"))
    }
}

/// `@main`, else the only public function with a body.
fn entry_function(ctx: &Context, module: &Module) -> Result<(OpId, String), String> {
    let mut public = Vec::new();
    for op in module.top_level_ops() {
        if ctx.op_name_str(module.op_name(op)) != "func.func"
            || module.num_regions(op) != 1
            || module.first_block(module.region(op, 0)).is_none()
        {
            continue;
        }
        let Some(name) = module.op_attr(ctx, op, "sym_name").and_then(|a| ctx.attr_as_str(a)) else {
            continue;
        };
        if name == "main" {
            return Ok((op, name.to_string()));
        }
        let private =
            module.op_attr(ctx, op, "sym_visibility").and_then(|a| ctx.attr_as_str(a)) == Some("private");
        if !private {
            public.push((op, name.to_string()));
        }
    }
    match public.len() {
        1 => Ok(public.remove(0)),
        0 => Err("the module has no @main and no public function with a body".to_string()),
        n => {
            let names: Vec<String> = public.iter().take(4).map(|(_, name)| format!("@{name}")).collect();
            let more = if n > 4 { ", ..." } else { "" };
            Err(format!("the module has no @main and {n} public functions ({}{more})", names.join(", ")))
        }
    }
}

/// The grid and producer of each result of `func`, read off its
/// `func.return` (none found: no grids, no producers).
fn result_grids(
    ctx: &Context,
    module: &Module,
    func: OpId,
    results: &[Type],
) -> (Vec<Option<QuantGrid>>, Vec<OpId>) {
    let body = module.first_block(module.region(func, 0));
    let terminator = module.last_op(body);
    let returned: Vec<_> =
        if terminator.is_some() && ctx.op_name_str(module.op_name(terminator)) == "func.return" {
            module.operands(terminator).collect()
        } else {
            Vec::new()
        };
    results
        .iter()
        .enumerate()
        .map(|(i, &ty)| match returned.get(i) {
            Some(&value) => {
                let producer = module.defining_op(value);
                (QuantGrid::of_result(ctx, module, ty, producer), producer)
            }
            None => (QuantGrid::of_result(ctx, module, ty, OpId::NONE), OpId::NONE),
        })
        .unzip()
}
