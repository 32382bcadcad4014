//! Running a function: [`Interpreter`] and [`run_function`].
//!
//! A function body is compiled once into a plan: its ops in order, each with
//! dense slot numbers for operands and results and the slots whose last use it
//! is, so tensors are dropped as soon as nothing reads them (memory stays near
//! the live set, not the whole network). Constants (`ConstantLike` ops with a
//! dense `value`) become tensors once per attribute and are shared, also with
//! the interpreters [`Interpreter::fork`] makes for other threads. `func.call`
//! recurses, at most [`MAX_CALL_DEPTH`] deep; `func.return` gives the results.
//! A [`RunObserver`] ([`Interpreter::run_observed`]) sees every op's results
//! and every call's arguments as its callee starts.
//! Every op needs a kernel in the [`KernelRegistry`]; a missing one is reported
//! before anything runs.
//!
//! Invariants: nothing reachable from IR or input data panics; inputs are
//! checked against the signature (dtype and static dimensions) and every kernel
//! result against its op's result type, so a wrong kernel cannot poison later ops
//! silently.

use crate::error::{bail, InterpError};
use crate::registry::{Kernel, KernelContext, KernelRegistry};
use crate::tensor::Tensor;
use qopt_ir_core::{
    loc_to_string, AttrData, Attribute, Context, FxHashMap, Module, OpId, Traits, Type, TypeData, ValueId,
};
use smallvec::SmallVec;
use std::sync::Arc;

/// The deepest chain of `func.call`s the interpreter follows.
pub const MAX_CALL_DEPTH: usize = 256;

/// The most elements a value may have (2^31, 8 GiB of f32). A larger result
/// type is reported when the function is planned, before anything runs, rather
/// than failing an allocation in the middle of a run.
pub const MAX_ELEMENTS: u64 = 1 << 31;

/// Runs function `func` of `module` on `inputs` and returns its results.
pub fn run_function(
    ctx: &Context,
    module: &Module,
    func: &str,
    inputs: &[Tensor],
    kernels: &KernelRegistry,
) -> Result<Vec<Tensor>, InterpError> {
    Interpreter::new(ctx, module, kernels).run(func, inputs)
}

/// [`run_function`], calling `observe` after every op with the op and its results
/// (also for ops inside called functions).
pub fn run_function_with(
    ctx: &Context,
    module: &Module,
    func: &str,
    inputs: &[Tensor],
    kernels: &KernelRegistry,
    observe: &mut dyn FnMut(OpId, &[Tensor]),
) -> Result<Vec<Tensor>, InterpError> {
    Interpreter::new(ctx, module, kernels).run_with(func, inputs, observe)
}

/// What a run reports as it goes ([`Interpreter::run_observed`]): the
/// results of every op, and the arguments of every `func.call` as its callee
/// starts, at any call depth.
pub trait RunObserver {
    /// `op` ran (a kernel, a constant, or a `func.call` whose callee
    /// returned) and produced `results`.
    fn op_done(&mut self, op: OpId, results: &[Tensor]);
    /// The `func.call` `call` is about to run `callee` on `args`.
    fn call_entered(&mut self, call: OpId, callee: OpId, args: &[&Tensor]) {
        let _ = (call, callee, args);
    }
}

/// A closure over every op's results, as a [`RunObserver`].
struct OpHook<'f>(&'f mut dyn FnMut(OpId, &[Tensor]));

impl RunObserver for OpHook<'_> {
    fn op_done(&mut self, op: OpId, results: &[Tensor]) {
        (self.0)(op, results)
    }
}

/// An interpreter over one module; keeps compiled plans and constant tensors
/// between runs, so running many batches (calibration) pays for them once.
pub struct Interpreter<'a> {
    ctx: &'a Context,
    module: &'a Module,
    kernels: &'a KernelRegistry,
    constants: FxHashMap<Attribute, Arc<Tensor>>,
    plans: FxHashMap<OpId, Arc<Plan>>,
}

/// What a step does.
#[derive(Clone, Copy)]
enum Action {
    Constant(Attribute),
    Return,
    Call(OpId),
    Kernel(Kernel),
}

struct Step {
    op: OpId,
    action: Action,
    operands: SmallVec<[u32; 4]>,
    results: SmallVec<[u32; 2]>,
    result_types: SmallVec<[Type; 2]>,
    operand_types: SmallVec<[Type; 4]>,
    /// Slots whose last use is this step (including unused results).
    release: SmallVec<[u32; 4]>,
}

struct Plan {
    name: String,
    slots: usize,
    args: Vec<u32>,
    arg_types: Vec<Type>,
    steps: Vec<Step>,
}

/// A value during execution.
enum Slot<'t> {
    Empty,
    Borrowed(&'t Tensor),
    Shared(Arc<Tensor>),
    Owned(Tensor),
}

impl Slot<'_> {
    fn get(&self) -> Option<&Tensor> {
        match self {
            Slot::Empty => None,
            Slot::Borrowed(t) => Some(t),
            Slot::Shared(t) => Some(t),
            Slot::Owned(t) => Some(t),
        }
    }
    fn into_owned(self) -> Option<Tensor> {
        match self {
            Slot::Empty => None,
            Slot::Borrowed(t) => Some(t.clone()),
            Slot::Shared(t) => Some(Arc::try_unwrap(t).unwrap_or_else(|t| (*t).clone())),
            Slot::Owned(t) => Some(t),
        }
    }
}

impl<'a> Interpreter<'a> {
    /// An interpreter for `module` with `kernels`.
    pub fn new(ctx: &'a Context, module: &'a Module, kernels: &'a KernelRegistry) -> Interpreter<'a> {
        Interpreter { ctx, module, kernels, constants: FxHashMap::default(), plans: FxHashMap::default() }
    }

    /// Compiles function `func` and turns every constant it uses into a
    /// tensor now instead of on its first run (so a caller can time the setup
    /// apart from the runs, and [`fork`](Self::fork) shares the result).
    pub fn prepare(&mut self, func: &str) -> Result<(), InterpError> {
        let op = self.lookup_function(func)?;
        let plan = self.plan(op)?;
        for step in &plan.steps {
            if let Action::Constant(value) = step.action {
                self.constant(value).map_err(|e| self.op_error(step.op, e))?;
            }
        }
        Ok(())
    }

    /// An interpreter for the same module and kernels that shares this one's
    /// compiled functions and constant tensors (reference-counted, not
    /// copied): one per worker thread, with one copy of the weights.
    pub fn fork(&self) -> Interpreter<'a> {
        Interpreter {
            ctx: self.ctx,
            module: self.module,
            kernels: self.kernels,
            constants: self.constants.clone(),
            plans: self.plans.clone(),
        }
    }

    /// Runs function `func` on `inputs`.
    pub fn run(&mut self, func: &str, inputs: &[Tensor]) -> Result<Vec<Tensor>, InterpError> {
        self.run_with(func, inputs, &mut |_, _| {})
    }

    /// Runs function `func` on `inputs`, calling `observe` after every op.
    pub fn run_with(
        &mut self,
        func: &str,
        inputs: &[Tensor],
        observe: &mut dyn FnMut(OpId, &[Tensor]),
    ) -> Result<Vec<Tensor>, InterpError> {
        self.run_observed(func, inputs, &mut OpHook(observe))
    }

    /// Runs function `func` on `inputs`, telling `observer` every op's
    /// results and every call's arguments.
    pub fn run_observed(
        &mut self,
        func: &str,
        inputs: &[Tensor],
        observer: &mut dyn RunObserver,
    ) -> Result<Vec<Tensor>, InterpError> {
        let op = self.lookup_function(func)?;
        let plan = self.plan(op)?;
        if inputs.len() != plan.arg_types.len() {
            bail!("@{} takes {} argument(s), got {}", plan.name, plan.arg_types.len(), inputs.len());
        }
        for (i, (t, &ty)) in inputs.iter().zip(&plan.arg_types).enumerate() {
            t.check_type(self.ctx, ty)
                .map_err(|e| InterpError::new(format!("argument #{i} (%arg{i}) {}", e.message)))?;
        }
        let args: Vec<&Tensor> = inputs.iter().collect();
        self.execute(plan, &args, observer)
    }

    /// The `func.func` named `name`.
    pub fn lookup_function(&self, name: &str) -> Result<OpId, InterpError> {
        let name = name.strip_prefix('@').unwrap_or(name);
        match self.module.lookup_symbol(self.ctx, name) {
            Some(op) if self.ctx.op_name_str(self.module.op_name(op)) == "func.func" => Ok(op),
            Some(_) => bail!("@{name} is not a function"),
            None => bail!("no function @{name} in the module"),
        }
    }

    fn location(&self, op: OpId) -> Option<String> {
        let text = loc_to_string(self.ctx, self.module.op_loc(op));
        if !text.is_empty() {
            return Some(text);
        }
        let pos = self.module.op_pos(op);
        pos.is_some().then(|| format!("line {}:{}", pos.line, pos.col))
    }

    fn op_error(&self, op: OpId, e: InterpError) -> InterpError {
        e.at(self.ctx.op_name_str(self.module.op_name(op)), self.location(op))
    }

    /// The compiled plan of function `func` (built on first use).
    fn plan(&mut self, func: OpId) -> Result<Arc<Plan>, InterpError> {
        if let Some(p) = self.plans.get(&func) {
            return Ok(p.clone());
        }
        let plan = Arc::new(self.build_plan(func)?);
        self.plans.insert(func, plan.clone());
        Ok(plan)
    }

    fn build_plan(&self, func: OpId) -> Result<Plan, InterpError> {
        let (ctx, m) = (self.ctx, self.module);
        let name =
            m.op_attr(ctx, func, "sym_name").and_then(|a| ctx.attr_as_str(a)).unwrap_or("?").to_string();
        let arg_types = match m.op_attr(ctx, func, "function_type").map(|a| ctx.attr_data(a)) {
            Some(AttrData::Type(t)) => match ctx.type_data(*t) {
                TypeData::Function { inputs, .. } => inputs.to_vec(),
                _ => bail!("@{name} has a 'function_type' that is not a function type"),
            },
            _ => bail!("@{name} has no 'function_type'"),
        };
        if m.num_regions(func) != 1 {
            bail!("@{name} has no body region");
        }
        let region = m.region(func, 0);
        let blocks: Vec<_> = m.blocks(region).collect();
        let entry = match blocks.as_slice() {
            [] => bail!("@{name} is a declaration (no body) and cannot run"),
            [b] => *b,
            _ => bail!("@{name} has {} blocks; the interpreter runs single-block functions", blocks.len()),
        };
        let mut slot_of: FxHashMap<ValueId, u32> = FxHashMap::default();
        let mut next = 0u32;
        let mut new_slot = |v: ValueId, map: &mut FxHashMap<ValueId, u32>| {
            map.insert(v, next);
            next += 1;
            next - 1
        };
        let args: Vec<u32> = m.block_args(entry).iter().map(|&v| new_slot(v, &mut slot_of)).collect();
        if args.len() != arg_types.len() {
            bail!("@{name} has {} entry arguments but its type lists {}", args.len(), arg_types.len());
        }
        let mut steps = Vec::new();
        let mut returned = false;
        for op in m.block_ops(entry) {
            let op_name = ctx.op_name_str(m.op_name(op));
            let mut operands = SmallVec::new();
            for v in m.operands(op) {
                match slot_of.get(&v) {
                    Some(&s) => operands.push(s),
                    None => {
                        return Err(
                            self.op_error(op, InterpError::new("uses a value defined outside the function"))
                        )
                    }
                }
            }
            let action = match op_name {
                "func.return" => Action::Return,
                "func.call" => {
                    let callee = m
                        .op_attr(ctx, op, "callee")
                        .and_then(|a| match ctx.attr_data(a) {
                            AttrData::SymbolRef(s) => Some(ctx.symbol_str(*s).to_string()),
                            _ => None,
                        })
                        .ok_or_else(|| self.op_error(op, InterpError::new("needs a 'callee' symbol")))?;
                    Action::Call(self.lookup_function(&callee).map_err(|e| self.op_error(op, e))?)
                }
                _ => match self.constant_value(op) {
                    Some(value) => Action::Constant(value),
                    None => match self.kernels.get(op_name) {
                        Some(k) => Action::Kernel(k),
                        None => {
                            return Err(
                                self.op_error(op, InterpError::new(format!("no kernel for '{op_name}'")))
                            )
                        }
                    },
                },
            };
            let results = m.results(op).map(|v| new_slot(v, &mut slot_of)).collect();
            let result_types: SmallVec<[Type; 2]> = m.results(op).map(|v| m.value_type(v)).collect();
            for (i, &ty) in result_types.iter().enumerate() {
                let Some(shape) = ctx.tensor_shape(ty) else { continue };
                let elements =
                    shape.iter().filter(|&&d| d >= 0).try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
                if elements.is_none_or(|n| n > MAX_ELEMENTS) {
                    let msg = format!(
                        "result #{i} has type {}, more than the interpreter's limit of {MAX_ELEMENTS} elements",
                        qopt_ir_core::type_to_string(ctx, ty)
                    );
                    return Err(self.op_error(op, InterpError::new(msg)));
                }
            }
            let operand_types = m.operands(op).map(|v| m.value_type(v)).collect();
            steps.push(Step {
                op,
                action,
                operands,
                results,
                result_types,
                operand_types,
                release: SmallVec::new(),
            });
            if matches!(action, Action::Return) {
                returned = true;
                break;
            }
        }
        if !returned {
            bail!("@{name} does not end in func.return");
        }
        // Last use of every slot; unused results die right after their step.
        let mut last = vec![usize::MAX; next as usize];
        for (i, s) in steps.iter().enumerate() {
            for &o in &s.operands {
                last[o as usize] = i;
            }
        }
        for (i, s) in steps.iter().enumerate() {
            for &r in &s.results {
                if last[r as usize] == usize::MAX {
                    last[r as usize] = i;
                }
            }
        }
        for (slot, &i) in last.iter().enumerate() {
            if let Some(step) = steps.get_mut(i) {
                if !matches!(step.action, Action::Return) {
                    step.release.push(slot as u32);
                }
            }
        }
        Ok(Plan { name, slots: next as usize, args, arg_types, steps })
    }

    /// The dense `value` of a `ConstantLike` op.
    fn constant_value(&self, op: OpId) -> Option<Attribute> {
        let def = self.ctx.op_def(self.module.op_name(op))?;
        if !def.has(Traits::CONSTANT_LIKE) || self.module.num_operands(op) != 0 {
            return None;
        }
        let value = self.module.op_attr(self.ctx, op, "value")?;
        matches!(self.ctx.attr_data(value), AttrData::Dense(_)).then_some(value)
    }

    fn constant(&mut self, value: Attribute) -> Result<Arc<Tensor>, InterpError> {
        if let Some(t) = self.constants.get(&value) {
            return Ok(t.clone());
        }
        let AttrData::Dense(d) = self.ctx.attr_data(value) else { bail!("constant value is not dense") };
        let t = Arc::new(Tensor::from_dense(self.ctx, d)?);
        self.constants.insert(value, t.clone());
        Ok(t)
    }

    /// Runs `plan` on `args`. Calls push a frame on an explicit stack instead of
    /// recursing, so call depth never grows the native stack.
    fn execute<'t>(
        &mut self,
        plan: Arc<Plan>,
        args: &[&'t Tensor],
        observer: &mut dyn RunObserver,
    ) -> Result<Vec<Tensor>, InterpError> {
        let mut frames: Vec<Frame<'t>> = Vec::new();
        let mut frame = Frame::new(plan, args.iter().map(|&t| Slot::Borrowed(t)));
        loop {
            let plan = frame.plan.clone();
            let Some(step) = plan.steps.get(frame.pc) else {
                bail!("@{} ended without func.return", plan.name);
            };
            let outputs: SmallVec<[Tensor; 1]> = match step.action {
                Action::Return => {
                    let returned = frame.take_returned(step).map_err(|e| self.op_error(step.op, e))?;
                    match frames.pop() {
                        None => return Ok(returned),
                        Some(caller) => {
                            frame = caller;
                            returned.into_iter().collect()
                        }
                    }
                }
                Action::Constant(value) => {
                    let t = self.constant(value).map_err(|e| self.op_error(step.op, e))?;
                    t.check_type(self.ctx, step.result_types[0]).map_err(|e| {
                        self.op_error(step.op, InterpError::new(format!("constant {}", e.message)))
                    })?;
                    observer.op_done(step.op, std::slice::from_ref(&*t));
                    if let Some(&r) = step.results.first() {
                        frame.slots[r as usize] = Slot::Shared(t);
                    }
                    release(&mut frame.slots, &step.release);
                    frame.pc += 1;
                    continue;
                }
                Action::Call(callee) => {
                    if frames.len() + 1 >= MAX_CALL_DEPTH {
                        return Err(self.op_error(
                            step.op,
                            InterpError::new(format!("calls nest deeper than {MAX_CALL_DEPTH} (recursion?)")),
                        ));
                    }
                    let (op, operands) = (step.op, &step.operands);
                    let inner = self.plan(callee).map_err(|e| self.op_error(op, e))?;
                    if operands.len() != inner.arg_types.len() {
                        return Err(self.op_error(op, InterpError::new("argument count mismatch")));
                    }
                    let mut passed = Vec::with_capacity(operands.len());
                    for (i, (&s, &ty)) in operands.iter().zip(&inner.arg_types).enumerate() {
                        let slot = frame.share(s).map_err(|e| self.op_error(op, e))?;
                        if let Some(t) = slot.get() {
                            t.check_type(self.ctx, ty).map_err(|e| {
                                self.op_error(op, InterpError::new(format!("argument #{i} {}", e.message)))
                            })?;
                        }
                        passed.push(slot);
                    }
                    let entered: Vec<&Tensor> = passed.iter().filter_map(Slot::get).collect();
                    observer.call_entered(op, callee, &entered);
                    frames.push(std::mem::replace(&mut frame, Frame::new(inner, passed.into_iter())));
                    continue;
                }
                Action::Kernel(kernel) => {
                    let operands =
                        gather(&frame.slots, &step.operands).map_err(|e| self.op_error(step.op, e))?;
                    let attrs = self.module.op_attrs(step.op);
                    let mut kc = KernelContext::new(self.ctx, attrs, &step.result_types)
                        .with_operand_types(&step.operand_types);
                    kernel(&mut kc, &operands).map_err(|e| self.op_error(step.op, e))?
                }
            };
            // `frame` is the frame whose step at `pc` produced `outputs` (a kernel,
            // or a call that just returned).
            let plan = frame.plan.clone();
            let step = &plan.steps[frame.pc];
            if outputs.len() != step.results.len() {
                return Err(self.op_error(
                    step.op,
                    InterpError::new(format!(
                        "produced {} results, the op has {}",
                        outputs.len(),
                        step.results.len()
                    )),
                ));
            }
            for (i, (t, &ty)) in outputs.iter().zip(&step.result_types).enumerate() {
                t.check_type(self.ctx, ty).map_err(|e| {
                    let why = if matches!(step.action, Action::Kernel(_)) { " (kernel bug)" } else { "" };
                    self.op_error(step.op, InterpError::new(format!("result #{i} {}{why}", e.message)))
                })?;
            }
            observer.op_done(step.op, &outputs);
            for (&r, t) in step.results.iter().zip(outputs) {
                frame.slots[r as usize] = Slot::Owned(t);
            }
            release(&mut frame.slots, &step.release);
            frame.pc += 1;
        }
    }
}

/// One function activation: its plan, its values and the step it is at.
struct Frame<'t> {
    plan: Arc<Plan>,
    slots: Vec<Slot<'t>>,
    pc: usize,
}

impl<'t> Frame<'t> {
    /// A frame at the first step of `plan`, with `args` in the argument slots.
    fn new(plan: Arc<Plan>, args: impl Iterator<Item = Slot<'t>>) -> Frame<'t> {
        let mut slots: Vec<Slot<'t>> = Vec::with_capacity(plan.slots);
        slots.resize_with(plan.slots, || Slot::Empty);
        for (&s, arg) in plan.args.iter().zip(args) {
            slots[s as usize] = arg;
        }
        Frame { plan, slots, pc: 0 }
    }

    /// A slot for a callee that reads slot `s` without copying its tensor: an
    /// owned tensor becomes shared between caller and callee.
    fn share(&mut self, s: u32) -> Result<Slot<'t>, InterpError> {
        let slot = self.slots.get_mut(s as usize).ok_or_else(|| InterpError::new("reads an unset value"))?;
        if let Slot::Owned(_) = slot {
            if let Slot::Owned(t) = std::mem::replace(slot, Slot::Empty) {
                *slot = Slot::Shared(Arc::new(t));
            }
        }
        match slot {
            Slot::Empty => bail!("reads an unset value"),
            Slot::Borrowed(t) => Ok(Slot::Borrowed(t)),
            Slot::Shared(t) => Ok(Slot::Shared(t.clone())),
            Slot::Owned(_) => bail!("reads an unset value"),
        }
    }

    /// The values a `func.return` step returns, moved out of their slots where
    /// nothing else reads them.
    fn take_returned(&mut self, step: &Step) -> Result<Vec<Tensor>, InterpError> {
        let mut out = Vec::with_capacity(step.operands.len());
        for (i, &s) in step.operands.iter().enumerate() {
            let again = step.operands[i + 1..].contains(&s);
            let slot = &mut self.slots[s as usize];
            let t =
                if again { slot.get().cloned() } else { std::mem::replace(slot, Slot::Empty).into_owned() };
            out.push(t.ok_or_else(|| InterpError::new("returns an unset value"))?);
        }
        Ok(out)
    }
}

fn gather<'s>(slots: &'s [Slot<'_>], operands: &[u32]) -> Result<SmallVec<[&'s Tensor; 4]>, InterpError> {
    operands
        .iter()
        .map(|&s| {
            slots.get(s as usize).and_then(Slot::get).ok_or_else(|| InterpError::new("reads an unset value"))
        })
        .collect()
}

fn release(slots: &mut [Slot<'_>], which: &[u32]) {
    for &s in which {
        if let Some(slot) = slots.get_mut(s as usize) {
            *slot = Slot::Empty;
        }
    }
}
