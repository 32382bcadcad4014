//! [`PairedRun`]: runs a function op by op over a whole data set in two
//! models at once, the fake-quant model as the IR stands and the float model
//! (every `qnn.fake_quant` is the identity, and chosen operands are replaced,
//! e.g. corrected biases by float ones), so a pass can see an op's results
//! on every sample in both models and change the fake-quant ones before any
//! later op runs. `bias-correct` is built on it.
//!
//! - **Op-major order.** Each op runs on every batch before the next op
//!   starts, so an op's results can depend on statistics over all the data
//!   of the ops before it, in one pass over the network (instead of one run
//!   of the whole network per layer). The price is memory: every live value
//!   is held for every sample, twice while the two models differ.
//! - **Sharing.** A value equal in both models (everything before the first
//!   `qnn.fake_quant`) is held once. A value that does not depend on the data
//!   (constants, `qnn.fake_quant` of a weight) is computed once, not per batch.
//! - **Kernels.** Ops run through the interpreter's kernels
//!   ([`KernelRegistry`]), on the same batches the interpreter would use, so
//!   the results are the interpreter's. Batches are spread over `threads`
//!   worker threads in contiguous ranges; each batch's result does not
//!   depend on the thread that computed it.
//! - **Scope.** One single-block function without `func.call` or ops with
//!   regions; anything else is an error at the op, before a kernel runs.
//!   Values are dropped after their last use.

use qopt_dialect_qnn::op_names as qnn_op;
use qopt_interp::{KernelContext, KernelRegistry, KernelResults, Tensor};
use qopt_ir_core::{AttrData, Context, FxHashMap, FxHashSet, Module, OpId, Traits, Type, ValueId};
use std::sync::Arc;

/// A value of the run: the same tensor for every batch, or one per batch.
#[derive(Clone)]
pub enum Batches {
    /// Independent of the data (a constant or a function of constants).
    Constant(Tensor),
    /// One tensor per batch, in batch order.
    PerBatch(Vec<Tensor>),
}

impl Batches {
    /// The tensor of batch `b`.
    fn get(&self, b: usize) -> &Tensor {
        match self {
            Batches::Constant(t) => t,
            Batches::PerBatch(v) => &v[b],
        }
    }
}

/// A value in the fake-quant and the float model; the two are the same
/// allocation while they are equal.
#[derive(Clone)]
struct Pair {
    quant: Arc<Batches>,
    float: Arc<Batches>,
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
}

/// One op's first result over every batch, as [`PairedRun::run`] hands it to
/// its visitor: the fake-quant model's tensors (which the visitor may change)
/// and the float model's.
pub struct VisitedResult<'r> {
    /// The fake-quant model's results, one per batch.
    pub quant: &'r mut [Tensor],
    /// The float model's results, one per batch.
    pub float: &'r [Tensor],
}

/// A paired run of one function (see the module docs).
pub struct PairedRun<'a> {
    ctx: &'a Context,
    module: &'a Module,
    kernels: &'a KernelRegistry,
    /// The function's ops, up to its `func.return`.
    steps: Vec<OpId>,
    /// The function's arguments.
    args: Vec<ValueId>,
    threads: usize,
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
                steps.push(op);
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
            if constant_of(ctx, module, op).is_none() && kernels.get(name).is_none() {
                return Err(RunFailure::at(op, format!("no interpreter kernel runs '{name}'")));
            }
            steps.push(op);
        }
        let args = module.block_args(*entry).to_vec();
        Ok(PairedRun { ctx, module, kernels, steps, args, threads: threads.max(1) })
    }

    /// Runs the function on `inputs` (per batch, one tensor per argument),
    /// calling `visit` with the first result of every op in `watched` once it
    /// has run on every batch, before any later op runs. A visitor's error
    /// stops the run.
    pub fn run(
        &self,
        inputs: Vec<Vec<Tensor>>,
        watched: &FxHashSet<OpId>,
        float_operands: &FxHashMap<OpId, (usize, Tensor)>,
        visit: &mut dyn FnMut(OpId, VisitedResult<'_>) -> Result<(), RunFailure>,
    ) -> Result<(), RunFailure> {
        let (ctx, module) = (self.ctx, self.module);
        let batches = inputs.len();
        let mut values: FxHashMap<ValueId, Pair> = FxHashMap::default();
        let mut per_arg: Vec<Vec<Tensor>> =
            (0..self.args.len()).map(|_| Vec::with_capacity(batches)).collect();
        for batch in inputs {
            if batch.len() != self.args.len() {
                return Err(RunFailure {
                    op: None,
                    message: "a batch has the wrong number of inputs".into(),
                });
            }
            per_arg.iter_mut().zip(batch).for_each(|(arg, t)| arg.push(t));
        }
        for (&arg, tensors) in self.args.iter().zip(per_arg) {
            let shared = Arc::new(Batches::PerBatch(tensors));
            values.insert(arg, Pair { quant: shared.clone(), float: shared });
        }
        let last_use = self.last_uses();
        for (index, &op) in self.steps.iter().enumerate() {
            if ctx.op_name_str(module.op_name(op)) == "func.return" {
                break;
            }
            let results = self.step(op, &values, float_operands.get(&op), batches)?;
            for (value, pair) in module.results(op).zip(results) {
                values.insert(value, pair);
            }
            if watched.contains(&op) {
                let value = module.result(op, 0);
                let pair = values.get_mut(&value).ok_or_else(|| RunFailure::at(op, "no result"))?;
                let float = pair.float.clone();
                let (Batches::PerBatch(quant), Batches::PerBatch(float)) =
                    (Arc::make_mut(&mut pair.quant), &*float)
                else {
                    return Err(RunFailure::at(op, "its result does not depend on the data"));
                };
                visit(op, VisitedResult { quant, float })?;
            }
            for value in module.operands(op).chain(module.results(op)) {
                if last_use.get(&value).is_none_or(|&last| last <= index) {
                    values.remove(&value);
                }
            }
        }
        Ok(())
    }

    /// The index of the last step using each value.
    fn last_uses(&self) -> FxHashMap<ValueId, usize> {
        let mut last = FxHashMap::default();
        for (index, &op) in self.steps.iter().enumerate() {
            for value in self.module.operands(op) {
                last.insert(value, index);
            }
        }
        last
    }

    /// Runs `op` in both models; `float_operand` replaces one operand in the
    /// float model.
    fn step(
        &self,
        op: OpId,
        values: &FxHashMap<ValueId, Pair>,
        float_operand: Option<&(usize, Tensor)>,
        batches: usize,
    ) -> Result<Vec<Pair>, RunFailure> {
        let (ctx, module) = (self.ctx, self.module);
        if let Some(value) = constant_of(ctx, module, op) {
            let AttrData::Dense(d) = ctx.attr_data(value) else {
                return Err(RunFailure::at(op, "the constant's value is not dense"));
            };
            let tensor = Tensor::from_dense(ctx, d).map_err(|e| RunFailure::at(op, e.message))?;
            let shared = Arc::new(Batches::Constant(tensor));
            return Ok(vec![Pair { quant: shared.clone(), float: shared }]);
        }
        let operands = module
            .operands(op)
            .map(|v| {
                values
                    .get(&v)
                    .cloned()
                    .ok_or_else(|| RunFailure::at(op, "uses a value defined outside the function"))
            })
            .collect::<Result<Vec<Pair>, _>>()?;
        let quant_operands: Vec<&Batches> = operands.iter().map(|p| &*p.quant).collect();
        let quant = self.run_kernel(op, &quant_operands, batches)?;
        let name = ctx.op_name_str(module.op_name(op));
        if name == qnn_op::FAKE_QUANT {
            // The float model does not quantize.
            let float =
                operands.first().map(|p| p.float.clone()).ok_or_else(|| RunFailure::at(op, "no operand"))?;
            return Ok(quant
                .into_iter()
                .map(|q| Pair { quant: Arc::new(q), float: float.clone() })
                .collect());
        }
        let same = float_operand.is_none() && operands.iter().all(|p| Arc::ptr_eq(&p.quant, &p.float));
        if same {
            return Ok(quant
                .into_iter()
                .map(|q| {
                    let shared = Arc::new(q);
                    Pair { quant: shared.clone(), float: shared }
                })
                .collect());
        }
        let replaced = float_operand.map(|(i, t)| (*i, Batches::Constant(t.clone())));
        let float_operands: Vec<&Batches> = operands
            .iter()
            .enumerate()
            .map(|(i, p)| match &replaced {
                Some((at, t)) if *at == i => t,
                _ => &*p.float,
            })
            .collect();
        let float = self.run_kernel(op, &float_operands, batches)?;
        Ok(quant
            .into_iter()
            .zip(float)
            .map(|(q, f)| Pair { quant: Arc::new(q), float: Arc::new(f) })
            .collect())
    }

    /// Runs `op`'s kernel on every batch of `operands` (once when none
    /// depends on the data), returning each result over the batches.
    fn run_kernel(
        &self,
        op: OpId,
        operands: &[&Batches],
        batches: usize,
    ) -> Result<Vec<Batches>, RunFailure> {
        let (ctx, module) = (self.ctx, self.module);
        let name = ctx.op_name_str(module.op_name(op));
        let kernel =
            self.kernels.get(name).ok_or_else(|| RunFailure::at(op, format!("no kernel runs '{name}'")))?;
        let operand_types: Vec<Type> = module.operands(op).map(|v| module.value_type(v)).collect();
        let result_types: Vec<Type> = module.results(op).map(|v| module.value_type(v)).collect();
        let attrs = module.op_attrs(op);
        let call = |b: usize| -> Result<KernelResults, RunFailure> {
            let tensors: Vec<&Tensor> = operands.iter().map(|o| o.get(b)).collect();
            let mut kc = KernelContext::new(ctx, attrs, &result_types).with_operand_types(&operand_types);
            let results = kernel(&mut kc, &tensors).map_err(|e| RunFailure::at(op, e.message))?;
            if results.len() != result_types.len() {
                return Err(RunFailure::at(op, "the kernel returned the wrong number of results"));
            }
            Ok(results)
        };
        if operands.iter().all(|o| matches!(o, Batches::Constant(_))) {
            return Ok(call(0)?.into_iter().map(Batches::Constant).collect());
        }
        let per_batch = self.map_batches(batches, &call)?;
        let mut columns: Vec<Vec<Tensor>> =
            (0..result_types.len()).map(|_| Vec::with_capacity(batches)).collect();
        for results in per_batch {
            columns.iter_mut().zip(results).for_each(|(column, t)| column.push(t));
        }
        Ok(columns.into_iter().map(Batches::PerBatch).collect())
    }

    /// `call` on batches `0..batches`, in contiguous ranges on the worker
    /// threads, results in batch order.
    fn map_batches(
        &self,
        batches: usize,
        call: &(dyn Fn(usize) -> Result<KernelResults, RunFailure> + Sync),
    ) -> Result<Vec<KernelResults>, RunFailure> {
        let workers = self.threads.min(batches).max(1);
        if workers == 1 {
            return (0..batches).map(call).collect();
        }
        let per_worker = batches.div_ceil(workers);
        let parts: Vec<Result<Vec<KernelResults>, RunFailure>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let range = w * per_worker..((w + 1) * per_worker).min(batches);
                    scope.spawn(move || range.map(call).collect::<Result<Vec<_>, _>>())
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(RunFailure { op: None, message: "a worker panicked".into() }))
                })
                .collect()
        });
        let mut all = Vec::with_capacity(batches);
        for part in parts {
            all.extend(part?);
        }
        Ok(all)
    }
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
