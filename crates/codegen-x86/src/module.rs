//! Compiling one function of a module into a [`Program`]: every op's
//! lowering is asked for a plan (and every op the backend cannot compile is
//! reported in one error), values are given places (inputs and outputs in
//! the caller's buffers, constants in rodata, the rest in one arena planned
//! by liveness, `arena.rs`), and each op's kernels are emitted and laid out
//! one after another.
//!
//! A [`Program`] is plain data: machine code, the kernel table, rodata and
//! the arena size. `runtime/` maps it and runs it in this process; an
//! object-file writer can write the same bytes out.

use crate::abi::{KernelCode, Place, BUFFER_ALIGN};
use crate::arena::{plan_arena, Lifetime};
use crate::buffer::ElementType;
use crate::error::{CodegenError, CodegenErrorKind};
use crate::host::{describe_op, host_module_text, host_place, tensor_bytes, HostBuffer, HostOp};
use crate::kernels::quant_params::ByteQuant;
use crate::lower::{buffer_element, describe_location, Emit, LowerOp, Lowerings, Plan, Rodata};
use crate::target::Target;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_host_calls::HostCallDescriptor;
use qopt_interp::progress::Progress;
use qopt_ir_core::{
    constant_value, type_to_string, AttrData, Context, DenseElements, FxHashMap, Module, OpId, Traits, Type,
    ValueId,
};

/// The shape and element type of one input or output of a compiled function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSignature {
    /// Element type of the buffer.
    pub element: ElementType,
    /// Static shape.
    pub shape: Vec<usize>,
    /// The IR type, as text (for messages and headers).
    pub type_text: String,
}

impl TensorSignature {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size of the buffer in bytes.
    pub fn bytes(&self) -> usize {
        self.len() * self.element.size()
    }
}

/// One kernel of a program, in the order the program runs them.
#[derive(Clone, Debug)]
pub struct KernelEntry {
    /// Offset of its first instruction in [`Program::code`].
    pub offset: usize,
    /// Length of its code in bytes.
    pub len: usize,
    /// Number of work items (see `abi.rs`).
    pub work: usize,
    /// What one work item is.
    pub work_item: &'static str,
    /// How it computes (for listings).
    pub strategy: String,
    /// The op it came from: an index into [`Program::ops`].
    pub op: usize,
    /// The op's name (as in `Program::ops[op]`).
    pub op_name: String,
    /// Where that op is (`line 3:5 loc("conv1")`).
    pub location: String,
    /// `Some(i)` when this step is no machine code but a host call running
    /// [`Program::host_ops`]`[i]` in the interpreter (`len` is 0, `work` 1).
    pub host: Option<usize>,
    /// Too little work to share: with several threads, thread 0 runs it
    /// alone, and a run of such kernels needs no barrier between them (a
    /// barrier costs about as much as the kernel; [`is_serial`]).
    pub serial: bool,
}

/// A kernel of an op with fewer multiply-accumulates than this and fewer
/// result bytes than [`SERIAL_BYTES`] runs on one thread: about a
/// microsecond of work, what a two-thread barrier costs.
pub const SERIAL_MACS: u64 = 1 << 19;
/// See [`SERIAL_MACS`].
pub const SERIAL_BYTES: u64 = 1 << 16;

/// Whether a kernel of an op with `macs` multiply-accumulates and
/// `result_bytes` of results is too small to share between threads.
pub fn is_serial(macs: u64, result_bytes: u64) -> bool {
    macs < SERIAL_MACS && result_bytes < SERIAL_BYTES
}

/// An op of the compiled function that has kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpEntry {
    /// Its name (`qnn.conv2d`).
    pub name: String,
    /// Where it is (`line 3:5 loc("conv1")`).
    pub location: String,
    /// The multiply-accumulates it performs (0 for ops that are not products).
    pub multiply_accumulates: u64,
}

/// A compiled function: code, kernel table, rodata and the arena size.
#[derive(Clone, Debug)]
pub struct Program {
    /// The function's name (without `@`).
    pub function: String,
    /// Its inputs, in order: `io[0..inputs.len()]`.
    pub inputs: Vec<TensorSignature>,
    /// Its outputs, in order: `io[inputs.len()..]`.
    pub outputs: Vec<TensorSignature>,
    /// Every kernel's code, each starting on a 64-byte boundary (padding is
    /// `int3`).
    pub code: Vec<u8>,
    /// The kernels in run order.
    pub kernels: Vec<KernelEntry>,
    /// The ops the kernels come from, in run order.
    pub ops: Vec<OpEntry>,
    /// Read-only data (packed weights, tables, constants).
    pub rodata: Vec<u8>,
    /// Bytes of activation arena the program needs.
    pub arena_bytes: usize,
    /// The target the code was generated for.
    pub target: Target,
    /// The function's quantized interface, when it has one (see
    /// [`QuantizedInterface`]): what an entry taking and returning the
    /// quantized tensors needs.
    pub quantized: Option<QuantizedInterface>,
    /// The ops that run by host calls (`host.rs`), in run order.
    pub host_ops: Vec<HostOp>,
    /// The `.qir` text of one function per host op (empty when none).
    pub host_module: String,
}

/// The quantized tensors at the boundary of a function that quantizes each
/// argument first and dequantizes each result last.
///
/// It exists when every argument's only use is a `qnn.quantize` and every
/// returned value is a `qnn.dequantize` result returned once and used
/// nowhere else, each of those ops compiled to one kernel. An entry that
/// takes the quantized inputs and returns the quantized outputs runs the
/// program's kernels in order, except that it replaces the kernel of each
/// such quantize by a copy of the caller's quantized input into the
/// quantize's result ([`QuantizedTensor::place`]) and the kernel of each such
/// dequantize by a copy of its operand into the caller's quantized output.
/// Since no other kernel reads an argument's buffer or writes a result's,
/// the caller's float buffers are never touched.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedInterface {
    /// One per argument, in order: the result of its `qnn.quantize`.
    pub inputs: Vec<QuantizedTensor>,
    /// One per result, in order: the operand of its `qnn.dequantize`.
    pub outputs: Vec<QuantizedTensor>,
}

/// One quantized tensor of a [`QuantizedInterface`].
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedTensor {
    /// The index in [`Program::kernels`] of the quantize or dequantize
    /// kernel the copy replaces.
    pub kernel: usize,
    /// Where the tensor lives while the program runs: the quantize's result
    /// (the copy's destination) or the dequantize's operand (its source);
    /// never an `io` slot.
    pub place: Place,
    /// Its buffer: stored bytes (`i8` or `u8`) of the quantized type.
    pub signature: TensorSignature,
    /// Its scale, zero point and storage range.
    pub quant: ByteQuant,
}

/// Where a value's bytes come from.
#[derive(Copy, Clone, Debug)]
enum Source {
    /// An entry argument.
    Input,
    /// A constant op's value.
    Constant(OpId),
    /// Written by an op's kernels.
    Produced,
}

/// Compiles function `@function` of `module` with `lowerings` for `target`.
pub fn compile(
    ctx: &Context,
    module: &Module,
    function: &str,
    lowerings: &Lowerings,
    target: &Target,
) -> Result<Program, CodegenError> {
    let invalid = |m: String| CodegenError::new(CodegenErrorKind::InvalidInput, m);
    let func = module
        .lookup_symbol(ctx, function)
        .ok_or_else(|| invalid(format!("the module has no function @{function}")))?;
    if module.num_regions(func) != 1 {
        return Err(invalid(format!("@{function} has no body")));
    }
    let blocks: Vec<_> = module.blocks(module.region(func, 0)).collect();
    let [entry] = blocks[..] else {
        return Err(CodegenError::new(
            CodegenErrorKind::Unsupported,
            format!("@{function} has {} blocks; compiled functions have one", blocks.len()),
        ));
    };

    let signature_of = |v: ValueId, what: &str| -> Result<TensorSignature, CodegenError> {
        let ty = module.value_type(v);
        let unsupported = |m: String| CodegenError::new(CodegenErrorKind::Unsupported, m);
        let element = buffer_element(ctx, ty).ok_or_else(|| {
            unsupported(format!(
                "{what} has type {}, which compiled code does not hold",
                type_to_string(ctx, ty)
            ))
        })?;
        let shape = static_shape(ctx, ty).ok_or_else(|| {
            unsupported(format!(
                "{what} has type {}, which is not statically shaped",
                type_to_string(ctx, ty)
            ))
        })?;
        Ok(TensorSignature { element, shape, type_text: type_to_string(ctx, ty) })
    };

    // Sources of values, roots of aliases, and each op's plan.
    let mut source: FxHashMap<ValueId, Source> = FxHashMap::default();
    let mut root: FxHashMap<ValueId, ValueId> = FxHashMap::default();
    let mut inputs = Vec::new();
    for (i, &arg) in module.block_args(entry).iter().enumerate() {
        inputs.push(signature_of(arg, &format!("argument {i} of @{function}"))?);
        source.insert(arg, Source::Input);
        root.insert(arg, arg);
    }
    let mut steps: Vec<(OpId, Step)> = Vec::new();
    let mut returned: Option<Vec<ValueId>> = None;
    let mut failures: Vec<String> = Vec::new();
    for op in module.block_ops(entry) {
        let name = ctx.op_name_str(module.op_name(op));
        if name == "func.return" {
            returned = Some(module.operands(op).collect());
            continue;
        }
        if is_constant(ctx, module, op) {
            for r in module.results(op) {
                source.insert(r, Source::Constant(op));
                root.insert(r, r);
            }
            continue;
        }
        match plan_op(ctx, module, op, lowerings, target) {
            Err(e) => {
                // The interpreter runs it when its buffers are ones compiled
                // code holds; otherwise it is listed, and the loop goes on
                // so that every such op is.
                match host_call_refusal(ctx, module, op, &e) {
                    None => steps.push((op, Step::Host { reason: host_call_reason(name, &e) })),
                    Some(why) => failures.push(format!("  {}: {why}", describe_location(ctx, module, op))),
                }
                for r in module.results(op) {
                    source.insert(r, Source::Produced);
                    root.insert(r, r);
                }
            }
            Ok(plan) => {
                for r in module.results(op) {
                    if plan == Plan::Alias {
                        let of = module.operand(op, 0);
                        let r0 = *root.get(&of).ok_or_else(|| {
                            invalid(format!("{name} uses a value defined outside @{function}"))
                        })?;
                        root.insert(r, r0);
                    } else {
                        source.insert(r, Source::Produced);
                        root.insert(r, r);
                    }
                }
                steps.push((op, Step::Lowered(plan)));
            }
        }
    }
    if !failures.is_empty() {
        return Err(CodegenError::new(
            CodegenErrorKind::Unsupported,
            format!(
                "@{function} cannot be compiled for x86-64: {} op{} neither compiled nor run by a host call:\n{}",
                failures.len(),
                if failures.len() == 1 { "" } else { "s" },
                failures.join("\n")
            ),
        ));
    }
    let returned = returned.ok_or_else(|| invalid(format!("@{function} has no func.return")))?;
    let mut outputs = Vec::new();
    for (j, &v) in returned.iter().enumerate() {
        outputs.push(signature_of(v, &format!("result {j} of @{function}"))?);
    }
    let root_of = |v: ValueId| -> Result<ValueId, CodegenError> {
        root.get(&v).copied().ok_or_else(|| invalid(format!("@{function} uses a value defined outside it")))
    };

    // Places: outputs first (a produced value returned is written straight
    // into the caller's buffer), then the arena by liveness.
    let n_in = inputs.len();
    let mut place: FxHashMap<ValueId, Place> = FxHashMap::default();
    for (i, &arg) in module.block_args(entry).iter().enumerate() {
        place.insert(arg, Place::Io(i));
    }
    let mut copies_to_outputs: Vec<(ValueId, usize)> = Vec::new();
    for (j, &v) in returned.iter().enumerate() {
        let r = root_of(v)?;
        match (source[&r], place.contains_key(&r)) {
            (Source::Produced, false) => {
                place.insert(r, Place::Io(n_in + j));
            }
            _ => copies_to_outputs.push((r, j)),
        }
    }

    let mut lifetimes: Vec<Lifetime> = Vec::new();
    let mut lifetime_owner: Vec<ArenaUse> = Vec::new();
    let mut last_use: FxHashMap<ValueId, usize> = FxHashMap::default();
    for (i, (op, step)) in steps.iter().enumerate() {
        let compile_time = compile_time_operands(step);
        for (k, v) in module.operands(*op).enumerate() {
            if matches!(step, Step::Lowered(Plan::Alias)) && k > 0 || compile_time.contains(&k) {
                continue;
            }
            last_use.insert(root_of(v)?, i);
        }
    }
    let end_step = steps.len();
    for &(r, _) in &copies_to_outputs {
        last_use.insert(r, end_step);
    }
    for (i, (op, step)) in steps.iter().enumerate() {
        let scratch_bytes = match step {
            Step::Lowered(Plan::Kernels { scratch_bytes, .. }) => Some(*scratch_bytes),
            Step::Host { .. } => Some(0),
            Step::Lowered(Plan::Alias) => None,
        };
        if let Some(scratch_bytes) = scratch_bytes {
            for r in module.results(*op) {
                if place.contains_key(&r) {
                    continue;
                }
                let bytes = signature_of(r, "a result")?.bytes();
                lifetimes.push(Lifetime {
                    first: i,
                    last: last_use.get(&r).copied().unwrap_or(i).max(i),
                    bytes,
                });
                lifetime_owner.push(ArenaUse::Value(r));
            }
            if scratch_bytes > 0 {
                lifetimes.push(Lifetime { first: i, last: i, bytes: scratch_bytes });
                lifetime_owner.push(ArenaUse::Scratch(i));
            }
        }
    }
    let (offsets, arena_bytes) = plan_arena(&lifetimes);
    let mut scratch_of: FxHashMap<usize, Place> = FxHashMap::default();
    for (owner, offset) in lifetime_owner.iter().zip(offsets) {
        match *owner {
            ArenaUse::Value(v) => {
                place.insert(v, Place::Arena(offset));
            }
            ArenaUse::Scratch(step) => {
                scratch_of.insert(step, Place::Arena(offset));
            }
        }
    }

    // Emission.
    let mut rodata = Rodata::default();
    let mut kernels: Vec<(OpId, Emitted)> = Vec::new();
    let mut host_ops: Vec<HostOp> = Vec::new();
    let mut host_op_ids: Vec<OpId> = Vec::new();
    let mut macs: FxHashMap<OpId, u64> = FxHashMap::default();
    let mut result_bytes: FxHashMap<OpId, u64> = FxHashMap::default();
    // A large model takes seconds to emit: a bar over its layers on a terminal.
    let progress = Progress::new(steps.len(), "ops").with_label("x86 codegen");
    for (i, (op, step)) in steps.iter().enumerate() {
        progress.advance();
        progress.redraw();
        match step {
            Step::Lowered(Plan::Kernels { .. }) => {}
            Step::Lowered(Plan::Alias) => continue,
            Step::Host { reason } => {
                let buffer = |v: ValueId, at: Place| -> Result<HostBuffer, CodegenError> {
                    Ok(HostBuffer { place: at, signature: signature_of(v, "a host call's buffer")? })
                };
                let mut operands = Vec::new();
                for v in module.operands(*op) {
                    let at = run_time_place(ctx, module, root_of(v)?, &source, &mut place, &mut rodata)?;
                    operands.push(buffer(v, at)?);
                }
                let results =
                    module.results(*op).map(|r| buffer(r, place[&r])).collect::<Result<Vec<_>, _>>()?;
                kernels.push((*op, Emitted::Host(host_ops.len())));
                host_ops.push(HostOp {
                    function: format!("host{}", host_ops.len()),
                    operands,
                    results,
                    describe: describe_op(ctx, module, *op),
                    reason: reason.clone(),
                    descriptor: 0,
                });
                host_op_ids.push(*op);
                continue;
            }
        };
        let compile_time = compile_time_operands(step);
        let mut operands = Vec::new();
        for (k, v) in module.operands(*op).enumerate() {
            if compile_time.contains(&k) {
                operands.push(None);
                continue;
            }
            operands.push(Some(run_time_place(ctx, module, root_of(v)?, &source, &mut place, &mut rodata)?));
        }
        let results = module.results(*op).map(|r| place[&r]).collect();
        let mut emit = Emit {
            operands,
            results,
            scratch: scratch_of.get(&i).copied(),
            rodata: &mut rodata,
            kernels: Vec::new(),
        };
        let name = ctx.op_name_str(module.op_name(*op));
        let view = LowerOp { ctx, module, op: *op, target };
        let lowering = lowerings.get(name).ok_or_else(|| view.unsupported("no x86 lowering"))?;
        macs.insert(*op, lowering.multiply_accumulates(&view));
        let mut bytes = 0u64;
        for r in module.results(*op) {
            bytes += signature_of(r, "a result")?.bytes() as u64;
        }
        result_bytes.insert(*op, bytes);
        lowering.emit(&view, &mut emit).map_err(|e| {
            CodegenError::new(e.kind, format!("{}: {}", describe_location(ctx, module, *op), e.message))
        })?;
        kernels.extend(emit.kernels.into_iter().map(|k| (*op, Emitted::Code(k))));
    }
    progress.finish();
    let host_module =
        put_host_calls(ctx, module, (&host_op_ids, &mut host_ops), n_in + outputs.len(), &mut rodata);
    for (r, j) in copies_to_outputs {
        let src = run_time_place(ctx, module, r, &source, &mut place, &mut rodata)?;
        let bytes = outputs[j].bytes();
        let code = crate::kernels::copy::emit_copy(src, Place::Io(n_in + j), bytes)?;
        let op = match source[&r] {
            Source::Constant(op) => op,
            _ => func,
        };
        *result_bytes.entry(op).or_default() += bytes as u64;
        kernels.push((op, Emitted::Code(code)));
    }

    let kernel_ops: Vec<OpId> = kernels.iter().map(|(op, _)| *op).collect();
    let quantized =
        quantized_interface(ctx, module, (module.block_args(entry), &returned), &kernel_ops, (&root, &place));

    // Layout.
    let mut code = Vec::new();
    let mut entries = Vec::new();
    let mut ops: Vec<OpEntry> = Vec::new();
    let mut last_op = None;
    for (op, emitted) in kernels {
        let offset = code.len().next_multiple_of(BUFFER_ALIGN);
        let (k, host) = match emitted {
            Emitted::Code(k) => (k, None),
            Emitted::Host(i) => (host_call_step(&host_ops[i]), Some(i)),
        };
        code.resize(offset, 0xCC);
        code.extend_from_slice(&k.code);
        let (name, location) =
            (ctx.op_name_str(module.op_name(op)).to_string(), describe_location(ctx, module, op));
        if last_op != Some(op) {
            let multiply_accumulates = macs.get(&op).copied().unwrap_or(0);
            ops.push(OpEntry { name: name.clone(), location: location.clone(), multiply_accumulates });
            last_op = Some(op);
        }
        entries.push(KernelEntry {
            offset,
            len: k.code.len(),
            work: k.work,
            work_item: k.work_item,
            strategy: k.strategy,
            op: ops.len() - 1,
            op_name: name,
            location,
            host,
            serial: host.is_some()
                || is_serial(
                    macs.get(&op).copied().unwrap_or(0),
                    result_bytes.get(&op).copied().unwrap_or(0),
                ),
        });
    }
    Ok(Program {
        function: function.to_string(),
        inputs,
        outputs,
        code,
        kernels: entries,
        ops,
        rodata: rodata.bytes,
        arena_bytes,
        target: *target,
        quantized,
        host_module,
        host_ops,
    })
}

/// Puts the host module of `ops` (with their [`HostOp`]s) and each op's
/// descriptor into `rodata`, recording where; returns the module's text
/// (empty when there are none). The io table has `io_slots` slots.
fn put_host_calls(
    ctx: &Context,
    module: &Module,
    (ops, host_ops): (&[OpId], &mut [HostOp]),
    io_slots: usize,
    rodata: &mut Rodata,
) -> String {
    if ops.is_empty() {
        return String::new();
    }
    let text = host_module_text(ctx, module, ops);
    let text_offset = rodata.push_offset(text.as_bytes());
    for (function, op) in host_ops.iter_mut().enumerate() {
        let descriptor = HostCallDescriptor {
            text_offset,
            text_len: text.len(),
            function,
            io_slots,
            operands: op.operands.iter().map(|b| host_place(b.place)).collect(),
            results: op.results.iter().map(|b| host_place(b.place)).collect(),
        };
        op.descriptor = rodata.push_offset(&descriptor.encode());
    }
    text
}

/// The lowering's plan for `op`, or why there is none.
fn plan_op(
    ctx: &Context,
    module: &Module,
    op: OpId,
    lowerings: &Lowerings,
    target: &Target,
) -> Result<Plan, CodegenError> {
    let view = LowerOp { ctx, module, op, target };
    match lowerings.get(view.name()) {
        None => Err(view.unsupported("no x86 lowering")),
        Some(lowering) => lowering.plan(&view),
    }
}

/// The refusal `e` of op `name` as a host call's reason (without the name).
fn host_call_reason(name: &str, e: &CodegenError) -> String {
    let reason = e.message.strip_prefix(name).and_then(|m| m.strip_prefix(": "));
    reason.unwrap_or(&e.message).to_string()
}

/// The ops of `@function` that compiling it with `lowerings` for `target`
/// would run by host calls, each with the reason, found by planning alone
/// (no code is generated): what `quant-lint{x86-schemes}` notes.
pub fn host_call_ops(
    ctx: &Context,
    module: &Module,
    function: &str,
    lowerings: &Lowerings,
    target: &Target,
) -> Vec<(OpId, String)> {
    let Some(func) = module.lookup_symbol(ctx, function).filter(|&f| module.num_regions(f) == 1) else {
        return Vec::new();
    };
    let mut hosted = Vec::new();
    for block in module.blocks(module.region(func, 0)) {
        for op in module.block_ops(block) {
            let name = ctx.op_name_str(module.op_name(op));
            if name == "func.return" || is_constant(ctx, module, op) {
                continue;
            }
            if let Err(e) = plan_op(ctx, module, op, lowerings, target) {
                if host_call_refusal(ctx, module, op, &e).is_none() {
                    hosted.push((op, host_call_reason(name, &e)));
                }
            }
        }
    }
    hosted
}

/// One step of the compiled function.
enum Step {
    /// Its lowering's plan.
    Lowered(Plan),
    /// A host call: the op has no lowering, or its lowering refused it.
    Host { reason: String },
}

/// What one step of the function became.
enum Emitted {
    /// A kernel of machine code.
    Code(KernelCode),
    /// A host call: the index into [`Program::host_ops`].
    Host(usize),
}

/// The empty kernel a host call stands in the kernel table as: one work
/// item, no code.
fn host_call_step(op: &HostOp) -> KernelCode {
    KernelCode {
        code: Vec::new(),
        work: 1,
        work_item: "op",
        strategy: format!("host call: the interpreter's kernel ({})", op.reason),
    }
}

/// Why `op`, which the backend does not compile (`refusal`: no lowering, a
/// case its lowering does not handle, or a CPU feature the target lacks),
/// cannot run by a host call either; `None` when it can: it has no regions, and every
/// operand and result is a statically shaped tensor compiled code holds.
fn host_call_refusal(ctx: &Context, module: &Module, op: OpId, refusal: &CodegenError) -> Option<String> {
    if !matches!(refusal.kind, CodegenErrorKind::Unsupported | CodegenErrorKind::MissingCpuFeatures) {
        return Some(refusal.message.clone());
    }
    if module.num_regions(op) > 0 || module.op_attr(ctx, op, "callee").is_some() {
        return Some(format!(
            "{} (and an op with regions or a callee cannot run by a host call)",
            refusal.message
        ));
    }
    let held = |v: ValueId| {
        let ty = module.value_type(v);
        buffer_element(ctx, ty).is_some() && static_shape(ctx, ty).is_some()
    };
    if module.operands(op).chain(module.results(op)).all(held) {
        return None;
    }
    Some(format!(
        "{} (and a host call needs statically shaped tensors of f32, f64, integers or booleans)",
        refusal.message
    ))
}

/// The [`QuantizedInterface`] of a function with arguments `args` returning
/// `returned`, whose kernels came from `kernel_ops` in order, when it has
/// one; `root` and `place` are the compiler's maps after emission.
fn quantized_interface(
    ctx: &Context,
    module: &Module,
    (args, returned): (&[ValueId], &[ValueId]),
    kernel_ops: &[OpId],
    (root, place): (&FxHashMap<ValueId, ValueId>, &FxHashMap<ValueId, Place>),
) -> Option<QuantizedInterface> {
    if args.is_empty() && returned.is_empty() {
        return None;
    }
    let op_named = |op: OpId, name: &str| ctx.op_name_str(module.op_name(op)) == name;
    let only_kernel_of = |op: OpId| {
        let mut of_op = kernel_ops.iter().enumerate().filter(|(_, &k)| k == op).map(|(i, _)| i);
        match (of_op.next(), of_op.next()) {
            (Some(i), None) => Some(i),
            _ => None,
        }
    };
    let tensor = |kernel: usize, v: ValueId| -> Option<QuantizedTensor> {
        let r = *root.get(&v)?;
        let at = *place.get(&r)?;
        if matches!(at, Place::Io(_)) {
            return None;
        }
        let ty = module.value_type(v);
        let q = qopt_dialect_qnn::quant_params::quant_element(ctx, ty)?;
        let quant = ByteQuant::of(q, "a boundary tensor").ok()?;
        let shape = static_shape(ctx, ty)?;
        let signature = TensorSignature { element: quant.element, shape, type_text: type_to_string(ctx, ty) };
        Some(QuantizedTensor { kernel, place: at, signature, quant })
    };
    let mut inputs = Vec::new();
    for &arg in args {
        let mut uses = module.uses(arg);
        let (Some(u), None) = (uses.next(), uses.next()) else { return None };
        if !op_named(u.op, qnn_op::QUANTIZE) || u.index != 0 {
            return None;
        }
        inputs.push(tensor(only_kernel_of(u.op)?, module.result(u.op, 0))?);
    }
    let mut outputs = Vec::new();
    for &v in returned {
        let op = module.defining_op(v);
        if op == OpId::NONE || !op_named(op, qnn_op::DEQUANTIZE) {
            return None;
        }
        let mut uses = module.uses(v);
        let (Some(_), None) = (uses.next(), uses.next()) else { return None };
        outputs.push(tensor(only_kernel_of(op)?, module.operand(op, 0))?);
    }
    Some(QuantizedInterface { inputs, outputs })
}

/// What an arena interval holds.
#[derive(Copy, Clone)]
enum ArenaUse {
    Value(ValueId),
    Scratch(usize),
}

fn compile_time_operands(step: &Step) -> &[usize] {
    match step {
        Step::Lowered(Plan::Kernels { compile_time_operands, .. }) => compile_time_operands,
        Step::Lowered(Plan::Alias) | Step::Host { .. } => &[],
    }
}

fn is_constant(ctx: &Context, module: &Module, op: OpId) -> bool {
    module.num_operands(op) == 0
        && ctx.op_def(module.op_name(op)).is_some_and(|d| d.has(Traits::CONSTANT_LIKE))
        && module.num_results(op) == 1
        && constant_value(ctx, module, module.result(op, 0)).is_some()
}

fn static_shape(ctx: &Context, ty: Type) -> Option<Vec<usize>> {
    ctx.tensor_shape(ty)?.iter().map(|&d| usize::try_from(d).ok()).collect()
}

/// The run-time place of root value `r`, putting a constant's bytes into
/// rodata on first use.
fn run_time_place(
    ctx: &Context,
    module: &Module,
    r: ValueId,
    source: &FxHashMap<ValueId, Source>,
    place: &mut FxHashMap<ValueId, Place>,
    rodata: &mut Rodata,
) -> Result<Place, CodegenError> {
    if let Some(&p) = place.get(&r) {
        return Ok(p);
    }
    let Some(Source::Constant(op)) = source.get(&r).copied() else {
        return Err(CodegenError::new(
            CodegenErrorKind::InvalidInput,
            "a value is used before it is defined",
        ));
    };
    let value = constant_value(ctx, module, r);
    let Some(AttrData::Dense(dense)) = value.map(|v| ctx.attr_data(v)) else {
        return Err(CodegenError::new(
            CodegenErrorKind::Unsupported,
            format!("{}: only dense constants are compiled", describe_location(ctx, module, op)),
        ));
    };
    let bytes = constant_bytes(ctx, module.value_type(r), dense).map_err(|m| {
        CodegenError::new(
            CodegenErrorKind::Unsupported,
            format!("{}: {m}", describe_location(ctx, module, op)),
        )
    })?;
    let p = rodata.push(&bytes);
    place.insert(r, p);
    Ok(p)
}

/// A dense constant's elements as a buffer holds them: the bytes of the
/// interpreter's tensor for it.
fn constant_bytes(ctx: &Context, ty: Type, dense: &DenseElements) -> Result<Vec<u8>, String> {
    let element = buffer_element(ctx, ty).ok_or_else(|| {
        format!("a constant of type {} is not held by compiled code", type_to_string(ctx, ty))
    })?;
    let tensor = qopt_interp::Tensor::from_dense(ctx, dense).map_err(|e| e.to_string())?;
    let len = static_shape(ctx, ty).ok_or("a constant must be statically shaped")?.iter().product::<usize>();
    if tensor.len() != len || tensor.dtype() != element.dtype() {
        return Err(format!("a constant of type {} holds {}", type_to_string(ctx, ty), tensor.describe()));
    }
    Ok(tensor_bytes(&tensor))
}
