//! `insert-observers`: puts one `qnn.observe` on every float value that a
//! quantized op would consume or produce, so that `calibrate` can record its
//! range.
//!
//! Observed values:
//! - the arguments of every function (graph inputs);
//! - the activation operands and the results of ops with the
//!   `QuantizableOp` interface (conv, dense, matmul, add, mul, concat, the
//!   average pools, the unary functions `fuse` tabulates: sigmoid,
//!   hard_swish, gelu, ...; those only when their operand arrives quantized,
//!   see [`arrives_quantized`]). A result whose only user is a [`FusedActivation`]
//!   (relu, clip) is observed after that activation instead, since the
//!   quantized op applies it before its output is quantized.
//!
//! Not observed: weights and biases (their ranges come from the constants in
//! `insert-fakeq`), constants in activation positions, values that are not
//! float tensors, and values already taken care of in the IR:
//! - a value produced or used by `qnn.fake_quant` (a person quantized it by
//!   hand) or by `qnn.observe` (already observed: the pass is idempotent);
//! - a value produced or used by `qnn.cast_hint {kind = "float"}` (kept float).
//!
//! **Storage hints.** A `qnn.cast_hint {kind = "iN"}` or `{kind = "uN"}` (N from
//! 2 to 16) asks for that storage for the hinted value. The pass removes the
//! hint (it is the identity) and records its kind as the attribute
//! `storage = "iN"` of the observer of the value, or of the observer after the
//! relu or clip chain that fuses into the value's producer (a hint between a
//! conv and its relu means the relu's result). `insert-fakeq` quantizes that
//! value to that storage, and the weights of the op producing it to
//! `min(N, 8)` bits (`docs/quantization.md` §13). A hint on a value no
//! quantized op reads or writes has no effect: the pass warns at it. Two hints
//! asking different storages of one value are an error.
//!
//! Options narrow what is quantized: `skip=[names]` leaves ops whose location
//! names one of `names` alone, and `ops=[op names]` quantizes only ops of
//! those kinds. The pass records each such decision in the IR, as the unit
//! attribute `qnn.skip` on the op (and on the relu or clip chain that would
//! fuse into it), so that the later passes, which read only the IR, keep the
//! op float too, and an op already carrying it is left alone like a skipped
//! one. A value with several users gets one observer, placed right
//! after its definition (at the start of the body for an argument), with the
//! location of its defining op (`loc("<func>.arg<N>")` for arguments).
//!
//! ```text
//! // before
//! %0 = fp.conv2d(%x, %w, %b) ... loc("conv1")
//! %1 = fp.relu(%0) ... loc("relu1")
//! // after insert-observers
//! %o0 = qnn.observe(%x) {observer = "minmax"} ... loc("main.arg0")
//! %0 = fp.conv2d(%o0, %w, %b) ... loc("conv1")
//! %1 = fp.relu(%0) ... loc("relu1")
//! %o1 = qnn.observe(%1) {observer = "minmax"} ... loc("relu1")
//! ```

use crate::calibration::methods::QuantMethods;
use crate::quantizable::{is_float_tensor, quantizable, runs_on_integers};
use crate::records::hints::{hinted_storage, is_kept_float, is_skipped, storage_text, SKIP, STORAGE};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::interfaces::{FusedActivation, LookupActivation};
use qopt_ir_core::pass::pipeline::nearest_name;
use qopt_ir_core::pass::{OptionKind, OptionSpec, OptionValue, PassOptions};
use qopt_ir_core::BadOptionValue;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    Attribute, Context, Diagnostic, Diagnostics, FxHashMap, FxHashSet, IntType, Location, Module, OpId,
    OpName, OperationState, Pass, PassContext, PassError, PassOutcome, Severity, Traits, ValueDef, ValueId,
};

/// The `insert-observers` pass; see the module docs.
pub struct InsertObservers;

/// Largest `bins` accepted (keeps histogram edges exact in f32).
pub const MAX_BINS: i64 = 1 << 20;

const INFO: PassInfo = PassInfo {
    name: "insert-observers",
    summary: "put a qnn.observe on every float value a quantized op would consume or produce",
    preserves_semantics: false,
    // Observers are identities (`observe-is-identity`), whatever statistics
    // they hold.
    equivalence: Some(Relation::Exact),
    description: "Inserts one `qnn.observe` on each function argument and on each activation operand and \
     result of an op with the QuantizableOp interface (a result used only by a relu or clip is \
     observed after it). Weights, biases, constants, values already fake-quantized or observed, \
     and values marked `qnn.cast_hint {kind = \"float\"}` are left alone. A hint \
     `qnn.cast_hint {kind = \"i16\"}` (any iN or uN, N from 2 to 16) is removed and recorded as \
     `storage = \"i16\"` on the observer of its value (after a fused relu or clip), which \
     `insert-fakeq` then quantizes to that storage. Ops that `skip` names \
     or `ops` leaves out get the unit attribute `qnn.skip` (with the relu or clip after them), \
     which every quantization pass honours, so they stay float to the end; ops already carrying \
     it are left alone. `calibrate` fills the observers with statistics; `insert-fakeq` turns them \
     into `qnn.fake_quant`.\n\n\
     ```\n\
     %0 = fp.conv2d(%x, %w, %b) ...\n\
     // -> %o = qnn.observe(%x) {observer = \"minmax\"} ...; %0 = fp.conv2d(%o, %w, %b) ...\n\
     ```",
};

impl Pass for InsertObservers {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![
            OptionSpec::new("observer", OptionKind::String, "minmax").help(
                "how statistics are gathered: minmax, moving-average, histogram, or a registered observer",
            ),
            OptionSpec::new("bins", OptionKind::Int, "2048").help("histogram bins (observer=histogram)"),
            OptionSpec::new("averaging-constant", OptionKind::Float, "0.01")
                .help("weight of the newest batch (observer=moving-average), in (0, 1]"),
            OptionSpec::new("skip", OptionKind::List(Box::new(OptionKind::String)), "[]")
                .help("location names of ops to leave unquantized (marked qnn.skip)"),
            OptionSpec::new("ops", OptionKind::List(Box::new(OptionKind::String)), "[]")
                .help("op names to quantize (default: every op with the QuantizableOp interface)"),
        ]
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        check_values(options)
    }

    /// The observer and the ops named are registered.
    fn check_options_against(&self, ctx: &Context, options: &PassOptions) -> Result<(), BadOptionValue> {
        QuantMethods::of(ctx)
            .find_observer(options.string("observer"))
            .map_err(|e| BadOptionValue::new("observer", e))?;
        op_names(ctx, options).map(|_| ()).map_err(|e| BadOptionValue::new("ops", e))
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let config = Config::read(cx.ctx, options)?;
        config.check_skip_names(cx.ctx, module)?;
        let attrs = config.observer_attrs(cx.ctx);
        let observe = cx.ctx.op_name(qnn_op::OBSERVE);
        let funcs: Vec<OpId> =
            module.top_level_ops().filter(|&op| module.op_name(op) == OpName::FUNC).collect();
        let (mut inserted, mut skipped, mut hinted, mut removed_hints) = (0u64, 0u64, 0u64, 0u64);
        for func in funcs {
            if module.num_regions(func) == 0 {
                continue;
            }
            let region = module.region(func, 0);
            let Some(body) = module.blocks(region).next() else { continue };
            let mut hints = remove_storage_hints(cx.ctx, module, body)?;
            skipped += mark_skipped(cx.ctx, module, body, &config);
            resolve_targets(cx.ctx, module, &mut hints);
            let mut wanted = hinted_values(&hints)?;
            let func_name = module
                .op_attr(cx.ctx, func, "sym_name")
                .and_then(|a| cx.ctx.attr_as_str(a))
                .unwrap_or("func")
                .to_string();
            for value in observed_values(cx.ctx, module, body) {
                let loc = match module.value_def(value) {
                    ValueDef::Result { op, .. } => module.op_loc(op),
                    ValueDef::BlockArg { index, .. } => cx.ctx.name_loc(&format!("{func_name}.arg{index}")),
                };
                let mut attrs = match mean_axis(cx.ctx, module, value) {
                    Some(axis) => {
                        let axis = cx.ctx.i64_attr(axis as i64);
                        cx.ctx.dict_set(attrs, "mean_axis", axis)
                    }
                    None => attrs,
                };
                if let Some(storage) = wanted.remove(&value) {
                    let text = cx.ctx.string_attr(&storage_text(storage));
                    attrs = cx.ctx.dict_set(attrs, STORAGE, text);
                    hinted += 1;
                }
                insert_observer(module, value, body, observe, attrs, loc);
                inserted += 1;
            }
            hinted += hint_existing_observers(cx.ctx, module, &mut wanted);
            for hint in &hints {
                if wanted.contains_key(&hint.target) {
                    let kind = storage_text(hint.storage);
                    cx.warn(Diagnostic {
                        message: format!(
                            "qnn.cast_hint {{kind = \"{kind}\"}} has no effect: no quantized op reads or writes \
                             this value"
                        ),
                        ..hint.at.clone()
                    });
                }
            }
            removed_hints += hints.len() as u64;
        }
        if inserted == 0 {
            if let Some(op) = first_quantized_op(cx.ctx, module) {
                cx.warn_at(
                    module,
                    op,
                    "nothing to observe: the model is already quantized (it computes with qnn ops and has no \
                     float op left to quantize); quantize and its passes take a float model",
                );
            }
        }
        cx.add_stat("observers", inserted);
        cx.add_stat("skipped-ops", skipped);
        cx.add_stat("storage-hints", hinted);
        Ok(PassOutcome::from_changed(inserted + skipped + removed_hints > 0))
    }
}

/// The pass's options, checked.
struct Config {
    observer: String,
    bins: i64,
    averaging_constant: f64,
    skip: Vec<String>,
    ops: Vec<OpName>,
}

/// The ranges of `bins` and `averaging-constant` ([`Pass::check_options`]).
fn check_values(options: &PassOptions) -> Result<(), BadOptionValue> {
    let bins = options.int("bins");
    if !(1..=MAX_BINS).contains(&bins) {
        return Err(BadOptionValue::new(
            "bins",
            format!("'bins' must be between 1 and {MAX_BINS}, got {bins}"),
        ));
    }
    let averaging_constant = options.float("averaging-constant");
    if !(averaging_constant > 0.0 && averaging_constant <= 1.0) {
        let message = format!("'averaging-constant' must be in (0, 1], got {averaging_constant}");
        return Err(BadOptionValue::new("averaging-constant", message));
    }
    // An option its observer does not read would be silently ignored.
    let observer = options.string("observer");
    for (option, reader) in [("bins", "histogram"), ("averaging-constant", "moving-average")] {
        if options.is_explicit(option) && observer != reader {
            let message = format!(
                "'{option}' is read only by observer={reader}, and the observer is '{observer}': \
                 add observer={reader} or leave '{option}' out"
            );
            return Err(BadOptionValue::new(option, message));
        }
    }
    Ok(())
}

/// The ops `ops` names, or an error naming one that is not registered.
fn op_names(ctx: &Context, options: &PassOptions) -> Result<Vec<OpName>, String> {
    let mut ops = Vec::new();
    for value in options.list("ops") {
        let OptionValue::String(name) = value else { continue };
        match ctx.lookup_op_name(name).filter(|&op| ctx.op_def(op).is_some()) {
            Some(op) => ops.push(op),
            None => {
                let known: Vec<&str> = ctx.op_defs().iter().map(|d| d.name).collect();
                let hint = nearest_name(name, known.iter().copied())
                    .map(|n| format!("; did you mean '{n}'?"))
                    .unwrap_or_default();
                return Err(format!("'ops' names an unknown op '{name}'{hint}"));
            }
        }
    }
    Ok(ops)
}

impl Config {
    fn read(ctx: &mut Context, options: &PassOptions) -> Result<Config, PassError> {
        let observer = options.string("observer").to_string();
        QuantMethods::of(ctx).find_observer(&observer)?;
        check_values(options)?;
        let bins = options.int("bins");
        let averaging_constant = options.float("averaging-constant");
        let strings = |name: &str| -> Vec<String> {
            options
                .list(name)
                .iter()
                .filter_map(|v| match v {
                    OptionValue::String(s) => Some(s.clone()),
                    _ => None,
                })
                .collect()
        };
        let skip = strings("skip");
        let ops = op_names(ctx, options)?;
        Ok(Config { observer, bins, averaging_constant, skip, ops })
    }

    /// The attributes of each new observer.
    fn observer_attrs(&self, ctx: &mut Context) -> Attribute {
        let kind = ctx.string_attr(&self.observer);
        let mut entries: Vec<(&str, Attribute)> = vec![("observer", kind)];
        if self.observer == "histogram" {
            entries.push(("bins", ctx.i64_attr(self.bins)));
        }
        if self.observer == "moving-average" {
            let f32_ty = ctx.common().f32;
            entries.push(("averaging_constant", ctx.float_attr(self.averaging_constant, f32_ty)));
        }
        ctx.dict_attr(&entries)
    }

    /// An error for a `skip` name no op that computes has in its location: a
    /// misspelt layer would otherwise be quantized without a word.
    fn check_skip_names(&self, ctx: &Context, module: &Module) -> Result<(), PassError> {
        if self.skip.is_empty() {
            return Ok(());
        }
        let mut names: Vec<&str> = Vec::new();
        for op in module.walk_preorder(module.root()) {
            if computes(ctx, module, op) {
                names.extend(ctx.location_names(module.op_loc(op)));
            }
        }
        let unmatched: Vec<&String> = self.skip.iter().filter(|s| !names.contains(&s.as_str())).collect();
        let Some(first) = unmatched.first() else { return Ok(()) };
        names.sort_unstable();
        names.dedup();
        let hint = match nearest_name(first, names.iter().copied()) {
            Some(near) => format!("did you mean '{near}'?"),
            None => {
                let shown: Vec<&str> = names.iter().copied().take(12).collect();
                let more = if names.len() > shown.len() { ", ..." } else { "" };
                format!("the op locations are: {}{more}", shown.join(", "))
            }
        };
        let listed: Vec<String> = unmatched.iter().map(|s| format!("'{s}'")).collect();
        Err(format!(
            "'skip' names {} that no op's location has, so it would skip nothing; {hint}",
            listed.join(", ")
        )
        .into())
    }

    /// Whether `skip` names `op`'s location (an op that computes: not a
    /// constant, not a `qnn` or `func` op), or `op` is quantizable and `ops`
    /// leaves its kind out.
    fn leaves_out(&self, ctx: &Context, module: &Module, op: OpId) -> bool {
        let computes = computes(ctx, module, op);
        let named = !self.skip.is_empty()
            && ctx.location_names(module.op_loc(op)).iter().any(|n| self.skip.iter().any(|s| s == n));
        let other_kind = !self.ops.is_empty()
            && !self.ops.contains(&module.op_name(op))
            && quantizable(ctx, module, op).is_some();
        computes && (named || other_kind)
    }
}

/// The first op that computes on quantized values (a `qnn` op other than
/// the quantization passes' own markers), if any.
fn first_quantized_op(ctx: &Context, module: &Module) -> Option<OpId> {
    module.walk_preorder(module.root()).find(|&op| {
        let name = ctx.op_name_str(module.op_name(op));
        name.starts_with("qnn.") && ![qnn_op::OBSERVE, qnn_op::CAST_HINT, qnn_op::FAKE_QUANT].contains(&name)
    })
}

/// Whether `op` computes something `skip` can name: not a constant, not a
/// `qnn` or `func` op.
fn computes(ctx: &Context, module: &Module, op: OpId) -> bool {
    let name = ctx.op_name_str(module.op_name(op));
    !name.starts_with("qnn.")
        && !name.starts_with("func.")
        && module.num_results(op) > 0
        && !ctx.op_def(module.op_name(op)).is_some_and(|d| d.traits.contains(Traits::CONSTANT_LIKE))
}

/// Puts [`SKIP`] on the ops of `body` that `config` leaves out, and on the
/// chain of fused activations (relu, clip) that is each one's only user: they
/// would belong to its quantized form, so they stay float with it. Returns
/// how many ops it marked.
fn mark_skipped(ctx: &mut Context, module: &mut Module, body: qopt_ir_core::BlockId, config: &Config) -> u64 {
    let unit = ctx.unit_attr();
    let ops: Vec<OpId> = module.block_ops(body).collect();
    let mut marked = 0u64;
    for op in ops {
        if !config.leaves_out(ctx, module, op) {
            continue;
        }
        let mut next = Some(op);
        while let Some(op) = next {
            if !is_skipped(ctx, module, op) {
                let attrs = ctx.dict_set(module.op_attrs(op), SKIP, unit);
                module.set_op_attrs(op, attrs);
                marked += 1;
            }
            next = match module.results(op).collect::<Vec<_>>()[..] {
                [result] => fused_activation_user(ctx, module, result),
                _ => None,
            };
        }
    }
    marked
}

/// A `qnn.cast_hint {kind = "iN" | "uN"}` taken out of the data flow.
struct StorageHint {
    /// A diagnostic at the (removed) hint, for its message to be filled in.
    at: Diagnostic,
    /// The hinted value.
    value: ValueId,
    /// The value whose observer gets the storage: the hinted value, or the
    /// result of the relu or clip chain that fuses into its producer
    /// ([`resolve_targets`]).
    target: ValueId,
    storage: IntType,
}

/// Removes every storage hint of `body`, routing its users to the hinted
/// value (a hint is the identity), so no hint separates a producer from its
/// relu or its consumers; returns them, each targeting its value.
fn remove_storage_hints(
    ctx: &Context,
    module: &mut Module,
    body: qopt_ir_core::BlockId,
) -> Result<Vec<StorageHint>, PassError> {
    let ops: Vec<OpId> = module.block_ops(body).collect();
    let mut hints = Vec::new();
    for op in ops {
        let Some(storage) = hinted_storage(ctx, module, op) else { continue };
        let at = Diagnostic::at_op(ctx, module, op, Severity::Warning, "");
        let (value, result) = (module.operand(op, 0), module.result(op, 0));
        module.replace_all_uses(result, value);
        module.erase_op(op).map_err(|e| format!("cannot remove a storage hint: {e:?}"))?;
        hints.push((at, value, storage));
    }
    Ok(hints
        .into_iter()
        .map(|(at, value, storage)| StorageHint { at, value, target: value, storage })
        .collect())
}

/// Moves each hint's target past the relu or clip chain fused into the
/// value's producer, once every hint is out of the way and the skipped ops
/// are marked (a skipped relu stays out of the chain).
fn resolve_targets(ctx: &Context, module: &Module, hints: &mut [StorageHint]) {
    for hint in hints {
        hint.target = after_fused_activations(ctx, module, hint.value);
    }
}

/// The storage each hinted value asks for; two different storages for one
/// value are an error at the second hint.
fn hinted_values(hints: &[StorageHint]) -> Result<FxHashMap<ValueId, IntType>, PassError> {
    let mut wanted: FxHashMap<ValueId, IntType> = FxHashMap::default();
    let mut errors = Vec::new();
    for hint in hints {
        match wanted.insert(hint.target, hint.storage) {
            Some(other) if other != hint.storage => errors.push(Diagnostic {
                severity: Severity::Error,
                message: format!(
                    "this value is hinted both \"{}\" and \"{}\"; keep one qnn.cast_hint",
                    storage_text(other),
                    storage_text(hint.storage)
                ),
                ..hint.at.clone()
            }),
            _ => {}
        }
    }
    if errors.is_empty() {
        Ok(wanted)
    } else {
        Err(Diagnostics(errors).into())
    }
}

/// Records the storage of each value in `wanted` that an observer already in
/// the IR observes (the pass runs again on observed IR) on that observer,
/// and takes it out of `wanted`. Returns how many it recorded.
fn hint_existing_observers(
    ctx: &mut Context,
    module: &mut Module,
    wanted: &mut FxHashMap<ValueId, IntType>,
) -> u64 {
    let mut recorded = 0;
    let values: Vec<ValueId> = wanted.keys().copied().collect();
    for value in values {
        let observer = module.users(value).into_iter().find(|&u| module.op_is(ctx, u, qnn_op::OBSERVE));
        if let (Some(observer), Some(storage)) = (observer, wanted.get(&value).copied()) {
            let text = ctx.string_attr(&storage_text(storage));
            let attrs = ctx.dict_set(module.op_attrs(observer), STORAGE, text);
            module.set_op_attrs(observer, attrs);
            wanted.remove(&value);
            recorded += 1;
        }
    }
    recorded
}

/// The only user of `value`, if it is a fused activation (relu, clip) with one result.
fn fused_activation_user(ctx: &Context, module: &Module, value: ValueId) -> Option<OpId> {
    let [user] = module.users(value)[..] else { return None };
    let def = ctx.op_def(module.op_name(user));
    let fused = def.is_some_and(|d| d.interfaces.get::<FusedActivation>().is_some());
    (fused && module.num_results(user) == 1).then_some(user)
}

/// The values of `body` to observe, in program order, without repeats.
fn observed_values(ctx: &Context, module: &Module, body: qopt_ir_core::BlockId) -> Vec<ValueId> {
    let mut seen = FxHashSet::default();
    let mut chosen = FxHashSet::default();
    let mut values = Vec::new();
    let mut take = |v: ValueId, values: &mut Vec<ValueId>, chosen: &mut FxHashSet<ValueId>| {
        if seen.insert(v) && wants_observer(ctx, module, v) {
            values.push(v);
            chosen.insert(v);
        }
    };
    for &arg in module.block_args(body) {
        if reaches_a_quantized_op(ctx, module, arg) {
            take(arg, &mut values, &mut chosen);
        }
    }
    let ops: Vec<OpId> = module.block_ops(body).collect();
    for op in ops {
        let Some(q) = quantizable(ctx, module, op) else { continue };
        if is_skipped(ctx, module, op) {
            continue;
        }
        let is_lookup =
            ctx.op_def(module.op_name(op)).is_some_and(|d| d.interfaces.get::<LookupActivation>().is_some());
        if is_lookup && !arrives_quantized(ctx, module, module.operand(op, 0), &chosen) {
            continue;
        }
        for i in q.activation_operands(module.num_operands(op)) {
            take(module.operand(op, i), &mut values, &mut chosen);
        }
        for result in module.results(op) {
            take(after_fused_activations(ctx, module, result), &mut values, &mut chosen);
        }
    }
    values
}

/// Whether `arg` is an activation operand of a quantizable op that is not
/// skipped, directly or through ops that run on the integers (reshape, max
/// pool, ...). An argument only skipped ops read stays float: quantizing it
/// would only round it.
fn reaches_a_quantized_op(ctx: &Context, module: &Module, arg: ValueId) -> bool {
    let mut seen = FxHashSet::default();
    let mut stack = vec![arg];
    while let Some(value) = stack.pop() {
        if !seen.insert(value) {
            continue;
        }
        for user in module.users(value) {
            if is_skipped(ctx, module, user) {
                continue;
            }
            if let Some(q) = quantizable(ctx, module, user) {
                let operands = q.activation_operands(module.num_operands(user));
                if operands.into_iter().any(|i| module.operand(user, i) == value) {
                    return true;
                }
            }
            if runs_on_integers(ctx, module, user) {
                stack.extend(module.results(user));
            }
        }
    }
    false
}

/// Whether `value` will be quantized: it is observed (`chosen`), comes from a
/// `qnn.fake_quant` or `qnn.observe`, or comes through ops that run on the
/// integers (reshape, max pool, relu, ...) from such a value. A
/// `LookupActivation` op is quantized only then: the table saves the float
/// op between the quantized value and its quantized result, while one after
/// a float op (a transposed convolution) would only add a quantize and a
/// dequantize around itself.
fn arrives_quantized(
    ctx: &Context,
    module: &Module,
    mut value: ValueId,
    chosen: &FxHashSet<ValueId>,
) -> bool {
    loop {
        if chosen.contains(&value) {
            return true;
        }
        let def = module.defining_op(value);
        if def.is_none() {
            return false;
        }
        if module.op_is(ctx, def, qnn_op::FAKE_QUANT) || module.op_is(ctx, def, qnn_op::OBSERVE) {
            return true;
        }
        if !runs_on_integers(ctx, module, def) || module.num_operands(def) == 0 {
            return false;
        }
        value = module.operand(def, 0);
    }
}

/// `value`, or the result of the chain of fused activations (relu, clip) that
/// is its only user. A fused activation belongs to its producer: `ops` need
/// not list it, but one marked skipped (`skip` named it) stays out.
fn after_fused_activations(ctx: &Context, module: &Module, mut value: ValueId) -> ValueId {
    let next = |value| fused_activation_user(ctx, module, value).filter(|&u| !is_skipped(ctx, module, u));
    while let Some(user) = next(value) {
        value = module.result(user, 0);
    }
    value
}

/// The channel axis along which the weighted ops using `value` as their
/// activation (conv, dense) read their input channels, when they agree: the
/// observer then records channel means there for bias correction.
fn mean_axis(ctx: &Context, module: &Module, value: ValueId) -> Option<usize> {
    let rank = ctx.tensor_shape(module.value_type(value))?.len();
    let mut axes = module.users(value).into_iter().filter_map(|user| {
        let q = quantizable(ctx, module, user).filter(|q| q.weight.is_some())?;
        let activation = *q.activations.first()?;
        let used = activation < module.num_operands(user) && module.operand(user, activation) == value;
        (used && !is_skipped(ctx, module, user)).then(|| q.channel_axis_for_rank(rank))
    });
    let first = axes.next()??;
    axes.all(|a| a == Some(first)).then_some(first)
}

/// Whether `value` needs an observer (see the module docs).
fn wants_observer(ctx: &Context, module: &Module, value: ValueId) -> bool {
    if !is_float_tensor(ctx, module.value_type(value)) {
        return false;
    }
    let def = module.defining_op(value);
    if !def.is_none() {
        let is_constant =
            ctx.op_def(module.op_name(def)).is_some_and(|d| d.traits.contains(Traits::CONSTANT_LIKE));
        if is_constant
            || module.op_is(ctx, def, qnn_op::FAKE_QUANT)
            || module.op_is(ctx, def, qnn_op::OBSERVE)
        {
            return false;
        }
        if is_kept_float(ctx, module, def) {
            return false;
        }
    }
    !module.users(value).iter().any(|&u| {
        module.op_is(ctx, u, qnn_op::FAKE_QUANT)
            || module.op_is(ctx, u, qnn_op::OBSERVE)
            || is_kept_float(ctx, module, u)
    })
}

/// Inserts `qnn.observe(value)` after its definition and routes every other use through it.
fn insert_observer(
    module: &mut Module,
    value: ValueId,
    body: qopt_ir_core::BlockId,
    observe: OpName,
    attrs: Attribute,
    loc: Location,
) {
    let ty = module.value_type(value);
    let op = module
        .create_op(OperationState::new(observe).operands(&[value]).results(&[ty]).attrs(attrs).loc(loc));
    match module.value_def(value) {
        ValueDef::Result { op: def, .. } => module.insert_op_after(def, op),
        ValueDef::BlockArg { .. } => {
            // After the observers already placed at the top, so arguments keep their order.
            let mut anchor = module.first_op(body);
            while !anchor.is_none()
                && module.op_name(anchor) == observe
                && module.num_operands(anchor) == 1
                && { matches!(module.value_def(module.operand(anchor, 0)), ValueDef::BlockArg { .. }) }
            {
                anchor = module.next_op(anchor);
            }
            if anchor.is_none() {
                module.append_op(body, op);
            } else {
                module.insert_op_before(anchor, op);
            }
        }
    }
    let observed = module.result(op, 0);
    module.replace_uses_where(value, observed, |u| u.op != op);
}
