//! `quant-lint`: analysis only. Reports, as warnings located at the op (its
//! location names the ONNX node), what keeps a module from being a clean
//! integer model, each with a `fix:` note naming the pass or option that
//! removes it:
//!
//! - leftover `quantize → dequantize` and `dequantize → quantize` pairs;
//! - a dequantized constant feeding a float op (weights left float);
//! - float islands: float compute ops between quantized values, with why
//!   (an op with no qnn counterpart before the first quantize or after the
//!   last dequantize is float by design and not reported)
//!   they stayed float (skipped by the user: marked `qnn.skip`; no `qnn`
//!   counterpart; a float operand; a float user; parameters that differ
//!   where they must agree or that the pattern does not take: operands of a
//!   data-movement op, an i32 bias not in units of `s_x·s_w`, a per-axis
//!   activation, a lookup input wider than 8 bits). A relu or clip after a
//!   skipped op belongs to it and is not reported again;
//! - bad parameters: a scale that is not a positive normal number, a
//!   narrow-range constant holding values outside its range;
//! - `qnn.concat` inputs whose parameters differ from the output's;
//! - observers left without statistics;
//! - a quantized type that cuts off more than `clip-threshold` (default 0.25)
//!   of the range calibration observed (`insert-fakeq` records it as
//!   `calibrated_min` / `calibrated_max` on the fake_quant, `expand-fakeq`
//!   keeps it on the quantize);
//! - accumulator overflow of `qnn.conv2d` / `qnn.dense` (and relu forms): the
//!   worst case `Σ_k |w_k − zp_w[c]| · max|x − zp_x| + |b[c]|` per output
//!   channel against the `accumulator-bits` option (default 32; a vendor with
//!   i16 or i24 accumulators sets it);
//! - a `qnn.add` whose operand scales are more than 2^31 apart: the finer
//!   operand's multiplier rounds to 0 and the sum ignores it
//!   (`quant_params::add_operand_dropped`, `quant-semantics.md` §7.1).
//!
//! The module is never changed. `werror=true` turns the warnings into errors
//! (exit 1). Statistics describe the integer shape: `qnn-ops`, `float-ops`
//! (float compute ops left), `quantizes`, `dequantizes`, `requantizes`,
//! `weight-bytes` (quantized constants as stored) and `weight-bytes-as-f32`
//! (the same constants in f32), and `warnings`; and how the x86 backend will
//! multiply on AVX2 CPUs without VNNI: `x86-vpmaddubsw-layers` (conv and
//! dense whose weights prove the fast u8 × s8 instruction exact,
//! `quant_params::u8_s8_pairs_exact`), `x86-vpmaddwd-layers` (the exact i16
//! path; depthwise convs always take it). `x86-schemes=true` adds a note per
//! layer saying which and, for the exact path, the first pair of weights
//! that rules the fast one out; for a 3×3 stride-1 one-group conv, whether
//! the weights allow exact Winograd F(2×2,3×3)
//! (`quant_params::winograd_f2x3_exact`) or the first channel that does not;
//! and a note per op the backend would run by a host call in the
//! interpreter's kernel (a float island, 16-bit storage), with the reason.

use crate::fuse::patterns::{bias_scales_match, is_i32_bias, FusionPatterns};
use crate::quantizable::quantizable;
use crate::records::hints::{is_kept_float, is_skipped};
use qopt_codegen_x86::{host_call_ops, Lowerings, Target, TargetCpu};
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{
    accumulator_overflow, add_operand_dropped, params, per_tensor, quant_element, storage_range,
    AccumulatorOverflow, AddOperandDropped,
};
use qopt_dialect_qnn::MAX_LOOKUP_BITS;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::interfaces::{FusedActivation, LookupActivation};
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::BadOptionValue;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    constant_value, dense_values_i128, static_num_elements, AttrData, Context, Diagnostic, Diagnostics,
    FxHashSet, Module, OpId, Pass, PassContext, PassOutcome, QuantParams, Severity, SrcPos, Traits, TypeData,
    ValueId,
};

/// The `quant-lint` pass; see the module docs.
pub struct QuantLint;

const INFO: PassInfo = PassInfo {
    name: "quant-lint",
    summary: "report what keeps the module from a clean integer model (analysis only; warnings with fixes)",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
    description: "Warns, at the op, about leftover quantize/dequantize pairs, weights left float, float islands \
     (with the reason), scales that are not positive normal numbers, narrow-range constants out of \
     range, concat inputs with other parameters than the output, observers without statistics, \
     types that cut off more than `clip-threshold` of their calibrated range, accumulators that can \
     overflow `accumulator-bits` and qnn.add operands whose scales are more than 2^31 apart. Each warning has a `fix:` note. Never \
     changes the module; `werror=true` makes the warnings errors. Statistics: `qnn-ops`, \
     `float-ops`, `quantizes`, `dequantizes`, `requantizes`, `weight-bytes`, `weight-bytes-as-f32`, \
     `warnings`.",
};

impl Pass for QuantLint {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![
            OptionSpec::new("werror", OptionKind::Bool, "false")
                .help("report the findings as errors (exit 1)"),
            OptionSpec::new("accumulator-bits", OptionKind::Int, "32")
                .help("width of the signed accumulator of conv and dense, 8 to 64"),
            OptionSpec::new("x86-schemes", OptionKind::Bool, "false").help(
                "a note per conv and dense: whether the x86 backend multiplies it with vpmaddubsw (weights \
                 proven exact) or the exact vpmaddwd path on AVX2 CPUs without VNNI, and why; for 3×3 \
                 stride-1 convs, whether exact Winograd F(2×2,3×3) applies; and a note per op the x86 \
                 backend runs by a host call in the interpreter, with why",
            ),
            OptionSpec::new("overflow-error", OptionKind::Bool, "false").help(
                "an accumulator that can overflow is an error (exit 1) rather than a warning: the \
                 integer model would wrap where the float one does not (quantize sets it)",
            ),
            OptionSpec::new("clip-threshold", OptionKind::Float, "0.25").help(
                "warn when a quantized type cuts off more than this fraction of its calibrated range, in [0, 1]",
            ),
        ]
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        let bits = options.int("accumulator-bits");
        if !(8..=64).contains(&bits) {
            return Err(BadOptionValue::new(
                "accumulator-bits",
                format!("accumulator-bits must be 8 to 64, got {bits}"),
            ));
        }
        let clip_threshold = options.float("clip-threshold");
        if !(0.0..=1.0).contains(&clip_threshold) {
            let message = format!("clip-threshold must be in [0, 1], got {clip_threshold}");
            return Err(BadOptionValue::new("clip-threshold", message));
        }
        Ok(())
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        self.check_options(options)?;
        let bits = options.int("accumulator-bits");
        let clip_threshold = options.float("clip-threshold");
        let ctx: &Context = cx.ctx;
        let mut lint = Lint {
            ctx,
            module,
            findings: Vec::new(),
            overflows: Vec::new(),
            notes: Vec::new(),
            stats: Shape::default(),
            between_quantized: None,
        };
        let x86_notes = options.bool("x86-schemes");
        let mut notes: Vec<Diagnostic> = Vec::new();
        let ops: Vec<OpId> = module.walk_preorder(module.root()).collect();
        for op in ops {
            lint.count(op);
            lint.pairs(op);
            lint.island(op);
            lint.scales(op);
            lint.narrow_constant(op);
            lint.concat(op);
            lint.observer(op);
            lint.accumulator(op, bits as u32);
            lint.add_scale_gap(op);
            lint.clipping(op, clip_threshold);
            if let Some(note) = lint.x86_scheme(op) {
                if x86_notes {
                    notes.push(note);
                }
            }
        }
        if x86_notes {
            notes.extend(host_call_notes(ctx, module));
        }
        notes.append(&mut lint.notes);
        let (mut findings, overflows, stats) = (lint.findings, lint.overflows, lint.stats);
        let overflow_error = options.bool("overflow-error") && !overflows.is_empty();
        if !overflow_error {
            findings.extend(overflows.iter().cloned());
        }
        let n = findings.len() as u64;
        for (name, value) in [
            ("qnn-ops", stats.qnn_ops),
            ("float-ops", stats.float_ops),
            ("quantizes", stats.quantizes),
            ("dequantizes", stats.dequantizes),
            ("requantizes", stats.requantizes),
            ("weight-bytes", stats.weight_bytes),
            ("weight-bytes-as-f32", stats.weight_bytes_f32),
            ("x86-vpmaddubsw-layers", stats.x86_byte_layers),
            ("x86-vpmaddwd-layers", stats.x86_word_layers),
            ("warnings", n),
        ] {
            cx.add_stat(name, value);
        }
        if options.bool("werror") && !findings.is_empty() {
            let errors =
                findings.into_iter().map(|d| Diagnostic { severity: Severity::Error, ..d }).collect();
            return Err(Diagnostics(errors).into());
        }
        findings.into_iter().chain(notes).for_each(|d| cx.warn(d));
        if overflow_error {
            let errors =
                overflows.into_iter().map(|d| Diagnostic { severity: Severity::Error, ..d }).collect();
            return Err(Diagnostics(errors).into());
        }
        Ok(PassOutcome::Unchanged)
    }
}

#[derive(Default)]
struct Shape {
    qnn_ops: u64,
    float_ops: u64,
    quantizes: u64,
    dequantizes: u64,
    requantizes: u64,
    weight_bytes: u64,
    weight_bytes_f32: u64,
    x86_byte_layers: u64,
    x86_word_layers: u64,
}

struct Lint<'a> {
    ctx: &'a Context,
    module: &'a Module,
    findings: Vec<Diagnostic>,
    /// Accumulators that can overflow, kept apart for `overflow-error`.
    overflows: Vec<Diagnostic>,
    /// What a pass decided on purpose, said as notes (not warnings).
    notes: Vec<Diagnostic>,
    stats: Shape,
    /// Float ops with quantized values on both sides (computed on first use).
    between_quantized: Option<FxHashSet<OpId>>,
}

impl Lint<'_> {
    fn name(&self, op: OpId) -> &str {
        self.ctx.op_name_str(self.module.op_name(op))
    }

    fn warn(&mut self, op: OpId, message: String, fix: &str) {
        let fix = Diagnostic::warning(None, SrcPos::NONE, format!("fix: {fix}"));
        let d = Diagnostic::at_op(self.ctx, self.module, op, Severity::Warning, message).with_note(fix);
        self.findings.push(d);
    }

    fn is_constant(&self, op: OpId) -> bool {
        self.ctx.op_def(self.module.op_name(op)).is_some_and(|d| d.has(Traits::CONSTANT_LIKE))
    }

    fn defining(&self, value: ValueId, name: &str) -> Option<OpId> {
        let def = self.module.defining_op(value);
        (!def.is_none() && self.name(def) == name).then_some(def)
    }

    fn count(&mut self, op: OpId) {
        let name = self.name(op).to_string();
        match name.as_str() {
            qnn_op::QUANTIZE => self.stats.quantizes += 1,
            qnn_op::DEQUANTIZE => self.stats.dequantizes += 1,
            qnn_op::REQUANTIZE => self.stats.requantizes += 1,
            _ => {}
        }
        if name.starts_with("qnn.") {
            self.stats.qnn_ops += 1;
        } else if self.is_float_compute(op) {
            self.stats.float_ops += 1;
        }
        if self.is_constant(op) && self.module.num_results(op) == 1 {
            let ty = self.module.value_type(self.module.result(op, 0));
            if let (Some(q), Some(n)) = (quant_element(self.ctx, ty), static_num_elements(self.ctx, ty)) {
                self.stats.weight_bytes += n * u64::from(q.storage.width).div_ceil(8);
                self.stats.weight_bytes_f32 += n * 4;
            }
        }
    }

    /// An `fp` op that computes (not a constant, not data movement) on floats.
    fn is_float_compute(&self, op: OpId) -> bool {
        let name = self.name(op);
        if !name.starts_with("fp.") || self.is_constant(op) {
            return false;
        }
        let agnostic = qopt_dialect_fp::is_quant_agnostic(self.ctx, self.module, op);
        let float_result = self.module.results(op).any(|r| {
            let ty = self.module.value_type(r);
            matches!(self.ctx.type_data(self.ctx.element_type(ty)), TypeData::Float(_))
        });
        !agnostic && float_result
    }

    fn pairs(&mut self, op: OpId) {
        if self.module.num_operands(op) != 1 {
            return;
        }
        let source = self.module.operand(op, 0);
        match self.name(op) {
            qnn_op::DEQUANTIZE if self.defining(source, qnn_op::QUANTIZE).is_some() => self.warn(
                op,
                "a quantize → dequantize pair is left: the value is rounded but computed on in float".into(),
                "run fuse after quantize-constants; if the op using it stays float, see its warning",
            ),
            qnn_op::QUANTIZE if self.defining(source, qnn_op::DEQUANTIZE).is_some() => self.warn(
                op,
                "a dequantize → quantize pair is left".into(),
                "run fuse: it removes the pair or makes it one qnn.requantize",
            ),
            qnn_op::DEQUANTIZE => {
                let def = self.module.defining_op(source);
                let float_users = self
                    .module
                    .users(self.module.result(op, 0))
                    .into_iter()
                    .any(|u| self.name(u).starts_with("fp."));
                if !def.is_none() && self.is_constant(def) && float_users {
                    self.warn(
                        op,
                        "quantized weights are dequantized for a float op: the layer runs in float".into(),
                        "the op using them stays float (see its warning); fuse turns it into a qnn op",
                    );
                }
            }
            _ => {}
        }
    }

    /// A float `fp` op with a dequantized operand or a quantized user.
    fn island(&mut self, op: OpId) {
        let name = self.name(op);
        let float_result = self.module.results(op).any(|r| {
            let ty = self.module.value_type(r);
            matches!(self.ctx.type_data(self.ctx.element_type(ty)), TypeData::Float(_))
        });
        if !name.starts_with("fp.") || self.is_constant(op) || !float_result {
            return;
        }
        let operands: Vec<ValueId> = self.module.operands(op).collect();
        let dequantized: Vec<bool> =
            operands.iter().map(|&v| self.defining(v, qnn_op::DEQUANTIZE).is_some()).collect();
        let results: Vec<ValueId> = self.module.results(op).collect();
        let result_users: Vec<OpId> = results.iter().flat_map(|&r| self.module.users(r)).collect();
        let quantized_user =
            result_users.iter().any(|&u| self.name(u) == qnn_op::QUANTIZE || self.through_activation(u));
        if !dequantized.contains(&true) && !quantized_user {
            return;
        }
        if result_users.iter().any(|&u| is_kept_float(self.ctx, self.module, u)) {
            return;
        }
        let name = self.name(op).to_string();
        if is_skipped(self.ctx, self.module, op) {
            if self.activation_of_skipped(op) {
                return;
            }
            self.warn(
                op,
                format!("float island: {name} stays float between quantized values: skipped by the user"),
                "it is marked qnn.skip (insert-observers' skip=[...] or ops=[...] put it there, or a person \
                 did): leave it out of those options, or remove the attribute, to quantize it",
            );
            return;
        }
        let has_pattern = self
            .ctx
            .op_def(self.module.op_name(op))
            .is_some_and(|def| FusionPatterns::of(self.ctx).for_op(def).next().is_some());
        let agnostic = qopt_dialect_fp::is_quant_agnostic(self.ctx, self.module, op);
        // An op with no qnn counterpart before the first quantize (input
        // preprocessing) or after the last dequantize (a softmax or box
        // decoding head) stays float by design: only one with quantized values
        // on both sides is an island.
        if !has_pattern && !agnostic && !self.between_quantized().contains(&op) {
            return;
        }
        let (why, fix) = if agnostic && !has_pattern {
            let types: Vec<_> = operands
                .iter()
                .filter_map(|&v| self.defining(v, qnn_op::DEQUANTIZE))
                .map(|d| self.module.value_type(self.module.operand(d, 0)))
                .map(|t| self.ctx.element_type(t))
                .collect();
            let per_axis = types.iter().any(|&t| {
                quant_element(self.ctx, t).is_some_and(|q| !matches!(q.params, QuantParams::PerTensor { .. }))
            });
            if dequantized.contains(&false) {
                ("an operand is not quantized".to_string(), "quantize the operand's producer".to_string())
            } else if types.windows(2).any(|w| w[0] != w[1]) {
                (
                    "the quantization parameters of its operands differ".to_string(),
                    "run propagate-qparams, then fuse".to_string(),
                )
            } else if per_axis {
                (
                    "an operand is quantized per axis".to_string(),
                    "quantize the operand per tensor".to_string(),
                )
            } else {
                ("it can run on the integers but was not rewritten".to_string(), "run fuse".to_string())
            }
        } else if !has_pattern {
            (
                format!("{name} has no qnn counterpart"),
                "keep it float on purpose with qnn.cast_hint {kind = \"float\"}, or register a QuantPattern for it"
                    .to_string(),
            )
        } else if let Some(i) = dequantized.iter().position(|&d| !d) {
            (
                format!("operand #{i} is not quantized"),
                "quantize that operand (insert-observers must see its producer), or run quantize-constants"
                    .to_string(),
            )
        } else if !quantized_user {
            ("its result is used as float".to_string(), "observe the result (insert-observers)".to_string())
        } else if result_users
            .iter()
            .any(|&u| self.name(u) != qnn_op::QUANTIZE && !self.through_activation(u))
        {
            (
                "its result also has float users".to_string(),
                "quantize every use of the result, or keep the layer float on purpose".to_string(),
            )
        } else {
            self.parameter_mismatch(op, &operands).unwrap_or_else(|| {
                (
                    "its quantization parameters do not fit the pattern".to_string(),
                    "run the quantize pipeline's passes in order (quantize-constants before fuse)"
                        .to_string(),
                )
            })
        };
        self.warn(op, format!("float island: {name} stays float between quantized values: {why}"), &fix);
    }

    /// The float (`fp`) ops that a dequantized value reaches through float
    /// ops and that reach a quantize through float ops: one walk forward and
    /// one backward over the module, in its (topological) op order.
    fn between_quantized(&mut self) -> &FxHashSet<OpId> {
        let (ctx, module) = (self.ctx, self.module);
        self.between_quantized.get_or_insert_with(|| {
            let is_float_op = |op: OpId| {
                let name = ctx.op_name_str(module.op_name(op));
                name.starts_with("fp.") && name != fp_op::CONSTANT
            };
            let ops: Vec<OpId> = module.walk_preorder(module.root()).filter(|&op| is_float_op(op)).collect();
            let mut after_dequantize = FxHashSet::default();
            for &op in &ops {
                let fed = module.operands(op).any(|v| {
                    let d = module.defining_op(v);
                    !d.is_none()
                        && (ctx.op_name_str(module.op_name(d)) == qnn_op::DEQUANTIZE
                            || after_dequantize.contains(&d))
                });
                if fed {
                    after_dequantize.insert(op);
                }
            }
            let mut before_quantize = FxHashSet::default();
            for &op in ops.iter().rev() {
                let feeds = module.results(op).flat_map(|r| module.users(r)).any(|u| {
                    ctx.op_name_str(module.op_name(u)) == qnn_op::QUANTIZE || before_quantize.contains(&u)
                });
                if feeds {
                    before_quantize.insert(op);
                }
            }
            after_dequantize.retain(|op| before_quantize.contains(op));
            after_dequantize
        })
    }

    /// Which parameters kept the pattern from `op`, whose operands are all
    /// dequantized and whose result is only quantized, when that can be told:
    /// a per-axis activation, a lookup input wider than a table takes, or an
    /// i32 bias whose parameters differ from `s_x·s_w`.
    fn parameter_mismatch(&self, op: OpId, operands: &[ValueId]) -> Option<(String, String)> {
        let source = |v: ValueId| {
            let d = self.defining(v, qnn_op::DEQUANTIZE)?;
            quant_element(self.ctx, self.module.value_type(self.module.operand(d, 0)))
        };
        let q = quantizable(self.ctx, self.module, op)?;
        let lookup = self
            .ctx
            .op_def(self.module.op_name(op))
            .is_some_and(|d| d.interfaces.get::<LookupActivation>().is_some());
        for i in q.activation_operands(operands.len()) {
            let qt = source(operands[i])?;
            if !matches!(qt.params, QuantParams::PerTensor { .. }) {
                return Some((
                    format!("operand #{i} is quantized per axis"),
                    "quantize activations per tensor (an observer without 'axis')".to_string(),
                ));
            }
            if lookup && qt.storage.width > MAX_LOOKUP_BITS {
                return Some((
                    format!(
                        "its input is stored in {} bits, more than a lookup table takes ({MAX_LOOKUP_BITS})",
                        qt.storage.width
                    ),
                    "quantize the input to at most 8 bits (activation-type)".to_string(),
                ));
            }
        }
        if let (Some(w), Some(b), [x]) = (q.weight, q.bias, q.activations.as_slice()) {
            if b < operands.len() && w < operands.len() {
                let (qx, qw, qb) = (source(operands[*x])?, source(operands[w])?, source(operands[b])?);
                if is_i32_bias(qb) && !bias_scales_match(qx, qw, qb) {
                    return Some((
                        "the parameters of its i32 bias differ from s_x·s_w (it was quantized for other \
                         activation or weight parameters)"
                            .to_string(),
                        "change parameters on the fake-quant model, then run expand-fakeq and \
                         quantize-constants: the bias is quantized for the parameters it meets"
                            .to_string(),
                    ));
                }
            }
        }
        None
    }

    /// Whether `op` is a relu or clip after an op marked skipped: it stays
    /// float as part of that layer, which is reported once, at the layer.
    fn activation_of_skipped(&self, op: OpId) -> bool {
        let fused = self
            .ctx
            .op_def(self.module.op_name(op))
            .is_some_and(|d| d.interfaces.get::<FusedActivation>().is_some());
        let producer = match self.module.operands(op).next() {
            Some(v) => self.module.defining_op(v),
            None => return false,
        };
        fused && !producer.is_none() && is_skipped(self.ctx, self.module, producer)
    }

    /// Whether `user` is a relu or clip whose result is quantized.
    fn through_activation(&self, user: OpId) -> bool {
        matches!(self.name(user), fp_op::RELU | fp_op::CLIP)
            && self.module.num_results(user) == 1
            && self
                .module
                .users(self.module.result(user, 0))
                .iter()
                .any(|&u| self.name(u) == qnn_op::QUANTIZE)
    }

    /// Scales that are not positive normal numbers, on results of this op.
    fn scales(&mut self, op: OpId) {
        for r in self.module.results(op).collect::<Vec<_>>() {
            let ty = self.module.value_type(r);
            let Some(q) = quant_element(self.ctx, ty) else { continue };
            if let Some(bad) = params(q).into_iter().find(|p| !(p.scale.is_normal() && p.scale > 0.0)) {
                let scale = bad.scale;
                self.warn(
                    op,
                    format!("scale {scale:e} is not a positive normal number: f32 arithmetic on it is inexact"),
                    "re-calibrate, or fix the scale by hand (a constant range gets a valid scale from insert-fakeq)",
                );
                break;
            }
        }
    }

    /// A narrow-range quantized constant holding values outside its range.
    fn narrow_constant(&mut self, op: OpId) {
        if !self.is_constant(op) || self.module.num_results(op) != 1 {
            return;
        }
        let result = self.module.result(op, 0);
        let Some(q) = quant_element(self.ctx, self.module.value_type(result)) else { return };
        let (lo, hi) = (q.storage.min_value(), q.storage.max_value());
        if i128::from(q.storage_min) == lo && i128::from(q.storage_max) == hi {
            return;
        }
        let Some(value) = constant_value(self.ctx, self.module, result) else { return };
        let AttrData::Dense(d) = self.ctx.attr_data(value) else { return };
        let Some(values) = dense_values_i128(self.ctx, d) else { return };
        let (min, max) = (i128::from(q.storage_min), i128::from(q.storage_max));
        if let Some((i, v)) = values.iter().enumerate().find(|(_, &v)| v < min || v > max) {
            self.warn(
                op,
                format!("element {i} is {v}, outside the narrow range [{min}, {max}] of its type"),
                "re-quantize the constant with quantize-constants, or widen the type's range",
            );
        }
    }

    fn concat(&mut self, op: OpId) {
        if self.name(op) != qnn_op::CONCAT || self.module.num_results(op) != 1 {
            return;
        }
        let out = self.module.value_type(self.module.result(op, 0));
        let out_q = quant_element(self.ctx, out).cloned();
        if self.concat_ranges(op) {
            return;
        }
        let differing: Vec<usize> = self
            .module
            .operands(op)
            .enumerate()
            .filter(|&(_, v)| quant_element(self.ctx, self.module.value_type(v)).cloned() != out_q)
            .map(|(i, _)| i)
            .collect();
        if !differing.is_empty() {
            self.warn(
                op,
                format!(
                    "concat inputs {differing:?} have other parameters than the output: each is requantized"
                ),
                "run propagate-qparams before expand-fakeq: concat inputs then share one set of parameters",
            );
        }
    }

    /// A concat whose inputs span very different ranges: an input that keeps
    /// fewer than `MIN_LEVELS` levels of the output's scale is a warning (its
    /// values are rounded away); an output stored wider than its inputs for
    /// that reason (`insert-fakeq`'s wide concats) is a note naming the
    /// narrow inputs. True when either was said.
    fn concat_ranges(&mut self, op: OpId) -> bool {
        use crate::passes::insert_fakeq::wide_concat::MIN_LEVELS;
        let quant = |v: ValueId| {
            let q = quant_element(self.ctx, self.module.value_type(v))?;
            let p = per_tensor(q)?;
            let (qmin, qmax) = storage_range(q);
            Some((q.storage.width, p.scale, (qmax - qmin) as f64 * p.scale))
        };
        let Some((out_width, out_scale, out_range)) = quant(self.module.result(op, 0)) else { return false };
        let inputs: Option<Vec<_>> = self.module.operands(op).map(quant).collect();
        let Some(inputs) = inputs else { return false };
        let names = |k: usize| {
            let def = self.module.defining_op(self.module.operand(op, k));
            let names =
                if def.is_none() { Vec::new() } else { self.ctx.location_names(self.module.op_loc(def)) };
            if names.is_empty() {
                format!("input {k}")
            } else {
                format!("input {k} ({})", names.join(", "))
            }
        };
        let (mut narrow, mut widened) = (Vec::new(), Vec::new());
        for (k, &(width, _, range)) in inputs.iter().enumerate() {
            let levels = range / out_scale;
            let levels_at_8_bits = 255.0 * range / out_range;
            if levels < MIN_LEVELS {
                narrow.push(format!("{} keeps {levels:.1} levels", names(k)));
            } else if out_width > width && levels_at_8_bits < MIN_LEVELS {
                widened.push(format!("{} would keep {levels_at_8_bits:.1} at 8 bits", names(k)));
            }
        }
        if !narrow.is_empty() {
            self.warn(
                op,
                format!(
                    "concat joins ranges too different for one scale: {} of its output's scale, so its values \
                     are rounded away",
                    narrow.join("; ")
                ),
                "store the output wider (qnn.cast_hint {kind = \"i16\"} on it) or keep it float",
            );
        }
        if !widened.is_empty() {
            let message = format!(
                "concat output stored in {out_width} bits on purpose: its inputs' ranges differ too much for 8 ({})",
                widened.join("; ")
            );
            self.notes.push(Diagnostic::at_op(self.ctx, self.module, op, Severity::Note, message));
        }
        !narrow.is_empty() || !widened.is_empty()
    }

    fn observer(&mut self, op: OpId) {
        if !self.module.op_is(self.ctx, op, qnn_op::OBSERVE) {
            return;
        }
        let has = |name| self.module.op_attr(self.ctx, op, name).is_some();
        if !has("min") && !has("histogram") {
            self.warn(
                op,
                "this observer has no statistics".into(),
                "run calibrate{data=...} on data that reaches it",
            );
        }
    }

    /// A quantize or fake_quant whose type represents less of the range
    /// calibration observed (`calibrated_min`, `calibrated_max`) than
    /// `1 − threshold` of it.
    fn clipping(&mut self, op: OpId, threshold: f64) {
        let name = self.name(op);
        if !matches!(name, qnn_op::QUANTIZE | qnn_op::FAKE_QUANT) {
            return;
        }
        let float = |n| self.module.op_attr(self.ctx, op, n).and_then(|a| self.ctx.attr_as_f64(a));
        let (Some(lo), Some(hi)) = (float("calibrated_min"), float("calibrated_max")) else { return };
        let ty = if name == qnn_op::QUANTIZE {
            self.module.value_type(self.module.result(op, 0))
        } else {
            match self.module.op_attr(self.ctx, op, "type").map(|a| self.ctx.attr_data(a)) {
                Some(AttrData::Type(t)) => *t,
                _ => return,
            }
        };
        let Some(q) = quant_element(self.ctx, ty) else { return };
        let [p] = params(q)[..] else { return };
        let (rlo, rhi) = (
            (q.storage_min - p.zero_point) as f64 * p.scale,
            (q.storage_max - p.zero_point) as f64 * p.scale,
        );
        let span = hi - lo;
        let cut = (rlo - lo).max(0.0) + (hi - rhi).max(0.0);
        if span > 0.0 && cut / span > threshold {
            self.warn(
                op,
                format!(
                    "the quantized type cuts off {:.0} % of the calibrated range [{lo}, {hi}]: it represents \
                     [{rlo:.6}, {rhi:.6}]",
                    100.0 * cut / span
                ),
                "use a range method that clips less (method=minmax keeps the whole range, a higher percentile \
                 less of it), or accept it with a higher clip-threshold",
            );
        }
    }

    /// Which multiply the x86 backend uses for a conv or dense with constant
    /// quantized weights on AVX2 without VNNI; counts it and returns the
    /// note for `x86-schemes`.
    fn x86_scheme(&mut self, op: OpId) -> Option<Diagnostic> {
        let name = self.name(op);
        if !matches!(name, qnn_op::CONV2D | qnn_op::CONV2D_RELU | qnn_op::DENSE | qnn_op::DENSE_RELU)
            || self.module.num_operands(op) < 2
        {
            return None;
        }
        let w = self.module.operand(op, 1);
        let qw = quant_element(self.ctx, self.module.value_type(w))?;
        let shape = self.ctx.tensor_shape(self.module.value_type(w))?.to_vec();
        let values = match constant_value(self.ctx, self.module, w).map(|a| self.ctx.attr_data(a)) {
            Some(AttrData::Dense(d)) => dense_values_i128(self.ctx, d)?,
            _ => return None,
        };
        let channels = usize::try_from(*shape.first()?).ok()?.max(1);
        let in_channels =
            self.ctx.tensor_shape(self.module.value_type(self.module.operand(op, 0)))?.get(1).copied();
        let groups =
            self.module.op_attr(self.ctx, op, "groups").and_then(|a| self.ctx.attr_as_int(a)).unwrap_or(1);
        let depthwise = (name == qnn_op::CONV2D || name == qnn_op::CONV2D_RELU)
            && groups > 1
            && shape.get(1) == Some(&1)
            && in_channels == Some(groups as i64)
            && channels as i128 == groups;
        let w_params = params(qw);
        let mut blocker = None;
        if !depthwise {
            for (c, row) in values.chunks((values.len() / channels).max(1)).enumerate() {
                let zp = i128::from(w_params.get(c).or(w_params.first())?.zero_point);
                let centered: Vec<i64> = row.iter().map(|&v| (v - zp) as i64).collect();
                if !qopt_dialect_qnn::quant_params::u8_s8_pairs_exact(&centered) {
                    let at = centered
                        .chunks(2)
                        .position(|p| {
                            p.iter().any(|w| !(-128..=127).contains(w))
                                || 255 * p.iter().map(|w| w.unsigned_abs()).sum::<u64>() > 32767
                        })
                        .unwrap_or(0);
                    blocker = Some((c, 2 * at, centered[2 * at..(2 * at + 2).min(centered.len())].to_vec()));
                    break;
                }
            }
        }
        let winograd = (!depthwise && self.winograd_shaped(op, &shape)).then(|| {
            winograd_note(&values, channels, |c| w_params.get(c).or(w_params.first()).map(|p| p.zero_point))
        });
        let message = if depthwise {
            self.stats.x86_word_layers += 1;
            "x86 (AVX2, no VNNI): depthwise, exact direct kernel on i16 (vpmaddwd)".to_string()
        } else if let Some((c, k, pair)) = blocker {
            self.stats.x86_word_layers += 1;
            format!(
                "x86 (AVX2, no VNNI): exact vpmaddwd path; vpmaddubsw could saturate: output channel {c}, taps {k}..{} \
                 have centered weights {pair:?} (255·(|a|+|b|) must be ≤ 32767); insert-fakeq{{reduce-range}} keeps \
                 every layer on vpmaddubsw",
                k + pair.len() - 1
            )
        } else {
            self.stats.x86_byte_layers += 1;
            "x86 (AVX2, no VNNI): vpmaddubsw, exact for these weights (255·(|a|+|b|) ≤ 32767 for every pair)"
                .to_string()
        };
        let message = match winograd.flatten() {
            Some(winograd) => format!("{message}; {winograd}"),
            None => message,
        };
        Some(Diagnostic::at_op(self.ctx, self.module, op, Severity::Note, message))
    }

    /// Whether a conv has the window x86's Winograd F(2×2, 3×3) takes: a 3×3
    /// weight, stride and dilation 1, one group.
    fn winograd_shaped(&self, op: OpId, weight_shape: &[i64]) -> bool {
        let ones = |key: &str| {
            self.module
                .op_attr(self.ctx, op, key)
                .and_then(|a| self.ctx.attr_as_i64_array(a))
                .is_none_or(|v| v == [1, 1])
        };
        let groups =
            self.module.op_attr(self.ctx, op, "groups").and_then(|a| self.ctx.attr_as_int(a)).unwrap_or(1);
        matches!(self.name(op), qnn_op::CONV2D | qnn_op::CONV2D_RELU)
            && weight_shape.len() == 4
            && weight_shape[2..] == [3, 3]
            && groups == 1
            && ones("stride")
            && ones("dilation")
    }

    /// Warns where a `qnn.add` ignores an operand ([`add_operand_dropped`]).
    fn add_scale_gap(&mut self, op: OpId) {
        if !matches!(self.name(op), qnn_op::ADD | qnn_op::SUB)
            || self.module.num_operands(op) != 2
            || self.module.num_results(op) != 1
        {
            return;
        }
        let q = |v| quant_element(self.ctx, self.module.value_type(v));
        let (a, b, out) = (self.module.operand(op, 0), self.module.operand(op, 1), self.module.result(op, 0));
        let (Some(qa), Some(qb), Some(qout)) = (q(a), q(b), q(out)) else { return };
        if let Some(AddOperandDropped { operand, scale, other_scale }) = add_operand_dropped(qa, qb, qout) {
            self.warn(
                op,
                format!(
                    "operand #{operand} (scale {scale:e}) contributes nothing: the other's scale {other_scale:e} is \
                     more than 2^31 times larger, so its multiplier rounds to 0 (quant-semantics.md §7.1)"
                ),
                "give both operands scales within 2^31 of each other (re-calibrate, or requantize the coarser one)",
            );
        }
    }

    /// Warns where the worst |accumulator| of a quantized conv or dense
    /// exceeds a signed `bits`-bit accumulator ([`accumulator_overflow`]).
    fn accumulator(&mut self, op: OpId, bits: u32) {
        let name = self.name(op);
        let weight_axis = match name {
            qnn_op::CONV2D | qnn_op::CONV2D_RELU | qnn_op::DENSE | qnn_op::DENSE_RELU => 0,
            qnn_op::CONV_TRANSPOSE2D | qnn_op::CONV_TRANSPOSE2D_RELU => 1,
            _ => return,
        };
        if self.module.num_operands(op) < 2 {
            return;
        }
        let (x, w) = (self.module.operand(op, 0), self.module.operand(op, 1));
        let bias = self.module.operands(op).nth(2);
        if let Some(AccumulatorOverflow { channel, bound, limit }) =
            accumulator_overflow(self.ctx, self.module, x, (w, weight_axis), bias, bits)
        {
            let message = format!(
                "the i{bits} accumulator can overflow: output channel {channel} reaches |acc| ≤ {bound} \
                 (limit {limit}), and the integer model would wrap where the float one does not"
            );
            let fix = Diagnostic::warning(
                None,
                SrcPos::NONE,
                "fix: use narrower activations or weights (activation-type, weight-type: i16 activations \
                 take i8 weights), keep the layer float (skip=[...]), or split the layer",
            );
            let d = Diagnostic::at_op(self.ctx, self.module, op, Severity::Warning, message).with_note(fix);
            self.overflows.push(d);
        }
    }
}

/// The Winograd part of a 3×3 stride-1 layer's `x86-schemes` note, from its
/// raw weight values (`channels` rows) and each row's zero point: exact for
/// these weights (`quant_params::winograd_f2x3_exact`), or the first channel
/// that rules it out. `None` when a zero point is missing.
fn winograd_note(
    values: &[i128],
    channels: usize,
    zero_point: impl Fn(usize) -> Option<i64>,
) -> Option<String> {
    for (c, row) in values.chunks((values.len() / channels).max(1)).enumerate() {
        let zp = i128::from(zero_point(c)?);
        let centered: Vec<i64> = row.iter().map(|&v| (v - zp) as i64).collect();
        if !qopt_dialect_qnn::quant_params::winograd_f2x3_exact(&centered) {
            let sum: u64 = centered.iter().map(|w| w.unsigned_abs()).sum();
            return Some(format!(
                "3×3 stride 1: not Winograd, output channel {c} has 255·Σ|w| = {} (must be < 2^29)",
                255 * sum
            ));
        }
    }
    Some(
        "3×3 stride 1: exact Winograd F(2×2,3×3) on vpmaddwd also applies (255·Σ|w| < 2^29 in every channel); \
         the backend takes it with at least 16 input and output channels where it saves multiplies \
         (qrun --profile and qcompile --emit=asm name each layer's kernels)"
            .to_string(),
    )
}

/// A note per op of each function that the x86 backend (for x86-64-v3, with
/// the lowerings installed in the context) would run by a host call.
fn host_call_notes(ctx: &Context, module: &Module) -> Vec<Diagnostic> {
    let target = Target::named(TargetCpu::X86_64V3);
    let lowerings = Lowerings::of(ctx);
    let mut notes = Vec::new();
    for func in module.top_level_ops() {
        let Some(name) = module.op_attr(ctx, func, "sym_name").and_then(|a| ctx.attr_as_str(a)) else {
            continue;
        };
        for (op, reason) in host_call_ops(ctx, module, name, &lowerings, &target) {
            let message = format!(
                "x86: runs by a host call in the interpreter's kernel, not as machine code ({reason})"
            );
            notes.push(Diagnostic::at_op(ctx, module, op, Severity::Note, message));
        }
    }
    notes
}
