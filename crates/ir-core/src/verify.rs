//! The verifier: checks that a module (or one op and everything nested in it) is
//! well formed, and reports every problem it finds as a located [`Diagnostic`].
//!
//! Passes may assume verified IR, and the pass manager runs this after every pass
//! unless told not to, so it must be cheap: one pre-order walk numbers the ops, one
//! loop over that order checks each op. The common path allocates nothing per op,
//! formats no string and looks up each op's [`OpDef`] once; type checks are cached
//! per interned [`Type`]. Nothing here recurses over nesting depth (ops, regions or
//! types), so a 10,000-deep region nest verifies on a small stack.
//!
//! # Checks
//!
//! Module-wide:
//! - Use lists are consistent ([`Module::check_use_lists`]), once, when the whole
//!   module is verified. [`verify_op`] on a nested op checks only that each operand
//!   slot of the ops it visits records that op as its owner.
//!
//! Per op (pre-order, parents before children; all errors are collected):
//! - The op's attributes are a dictionary attribute.
//! - The op is registered. An op of a registered dialect that the dialect does not
//!   define is an error (with a "did you mean" suggestion of a close op name of
//!   that dialect). An op of an unregistered dialect is an error unless
//!   [`Context::allows_unregistered`]; such ops get only the generic checks below
//!   (attributes, operands, types, dominance).
//! - Operand, result and region counts match the [`OpDef`]'s [`crate::Arity`].
//! - Every operand refers to a live value: not a cleared slot, and not a result
//!   of an erased op.
//! - Every result type, block argument type and operand type is well formed
//!   (operands are reported only when their definition lies outside the verified
//!   op, since the definition reports them otherwise):
//!   - integer widths are 1..=64;
//!   - tensor dimensions are `>= 0` or [`crate::DYNAMIC`], and the element type is a
//!     scalar, quantized or dialect type, itself well formed;
//!   - function types have well-formed inputs and results;
//!   - quantized types: the storage width is 1..=32, `storage_min <= storage_max`
//!     and both lie in the storage type's range, zero points lie in
//!     `[storage_min, storage_max]`, per-axis scales and zero points are equally
//!     many and not none; then, if a dialect named `qnn` is registered, its
//!     [`Dialect::verify_type`] (scale > 0 and the like);
//!   - in a tensor, a per-axis quantized element type's axis is a dimension whose
//!     size (when static) equals the number of scales;
//!   - opaque types `!d.name<...>` go to dialect `d`'s `verify_type`; a type of an
//!     unregistered dialect is an error unless unregistered dialects are allowed.
//! - SSA dominance. qopt regions are straight-line: a block does not dominate
//!   the other blocks of its region (there are no branches between them). So a
//!   value used by op `U` must be
//!   - a result of an op before `U` in `U`'s block, or an argument of that block, or
//!   - a result or block argument in a block that encloses `U` (an ancestor block),
//!     where a result must come before the op of that block that contains `U`.
//!
//!   A use of an op's own result, of a later op's result, or of a value from a
//!   sibling block is an error.
//! - Isolation: ops nested in an op with [`Traits::ISOLATED_FROM_ABOVE`] use only
//!   values defined inside it.
//! - Terminators: in each block of each region of a registered op without
//!   [`Traits::NO_TERMINATOR`], a non-empty block ends with an op that has
//!   [`Traits::TERMINATOR`] (an unregistered last op is given the benefit of the
//!   doubt). Empty regions and empty blocks are fine (declarations). Anywhere, an op
//!   with [`Traits::TERMINATOR`] is the last op of its block.
//! - [`Traits::SAME_OPERANDS_AND_RESULT_TYPE`]: all operand and result types are
//!   one type.
//! - The op's own verifier ([`OpDef::verify`]).
//! - Result-type inference ([`OpDef::infer_types`]): the inferred result types
//!   equal the declared ones, and inference does not fail.
//!
//! The op's own verifier and inference run only when the structural checks that
//! they rely on passed (counts, live operands, well-formed operand and result
//! types, same-type trait), since they index operands by position. Inference runs
//! only when the op's own verifier passed, so one mistake gives one message.
//!
//! # Locations
//! Each diagnostic is located at the op: its parsed position ([`Module::op_pos`],
//! in [`Module::source_name`]) if it has one, otherwise the first file:line:col of
//! its [`crate::Location`]. A name or fused location (`loc("conv1")`) is added as a
//! note, so the user sees which layer the op came from.

use crate::attributes::{AttrData, Attribute};
use crate::context::{dialect_prefix, Context, OpName};
use crate::dialect::{Arity, Dialect, InferTypesFn, OpDef, OpView, Traits, VerifyFn};
use crate::entity::{BlockId, EntityId, OpId, UseId, ValueId};
use crate::hash::FxHashMap;
use crate::location::SrcPos;
use crate::module::{Module, SymbolTable, ValueDef};
use crate::pass::pipeline::nearest_name;
use crate::types::{IntType, Type, TypeData, DYNAMIC, MAX_DIM};
use crate::{type_to_string, Diagnostic, Diagnostics, Severity};
use std::fmt::Write as _;
use std::sync::Arc;

/// Verifies the whole module, from [`Module::root`]. Returns every error found.
pub fn verify(ctx: &mut Context, module: &Module) -> Result<(), Diagnostics> {
    verify_op(ctx, module, module.root())
}

/// Verifies `op` and everything nested in it. Values `op` and its nested ops use
/// from outside `op` are checked for dominance against the enclosing blocks.
/// Use lists are checked module-wide only when `op` is the module's root.
pub fn verify_op(ctx: &mut Context, module: &Module, op: OpId) -> Result<(), Diagnostics> {
    let _span = tracing::debug_span!("verify").entered();
    if op.index() >= module.ops.len() {
        let msg = format!("cannot verify {op}: it is not an op of this module");
        return Err(Diagnostics(vec![Diagnostic::error(module.source_name().cloned(), SrcPos::NONE, msg)]));
    }
    if module.is_erased(op) {
        let msg = format!("cannot verify {op}: it was erased");
        return Err(Diagnostics(vec![op_diagnostic(ctx, module, op, msg)]));
    }
    let whole_module = op == module.root();
    let mut v = Verifier::new(ctx, module);
    if whole_module {
        if let Err(msg) = module.check_use_lists() {
            v.error(ctx, op, format!("use lists are inconsistent: {msg}"));
        }
    }
    let ops: Vec<OpId> = module.walk_preorder(op).collect();
    for (i, &o) in ops.iter().enumerate() {
        v.order[o.index()] = i as u32;
    }
    for &o in &ops {
        v.check_op(ctx, o, !whole_module);
    }
    if v.diags.is_empty() {
        Ok(())
    } else {
        Err(Diagnostics(v.diags))
    }
}

/// Position not assigned (op outside the verified op, or not visited).
const UNNUMBERED: u32 = u32::MAX;

/// Per-type verdicts in `Verifier::type_state`.
const TYPE_UNKNOWN: u8 = 0;
const TYPE_OK: u8 = 1;
const TYPE_BAD: u8 = 2;

/// What the verifier needs of an [`OpDef`], copied out so the context can be
/// borrowed mutably for inference.
#[derive(Copy, Clone)]
struct DefFacts {
    operands: Arity,
    results: Arity,
    regions: Arity,
    traits: Traits,
    verify: Option<VerifyFn>,
    infer: Option<InferTypesFn>,
}

impl DefFacts {
    fn of(def: &OpDef) -> DefFacts {
        DefFacts {
            operands: def.operands,
            results: def.results,
            regions: def.regions,
            traits: def.traits,
            verify: def.verify,
            infer: def.infer_types,
        }
    }
}

struct Verifier<'m> {
    module: &'m Module,
    /// Pre-order number of each op inside the verified op, by op index.
    order: Vec<u32>,
    /// Positions of ops in blocks outside the verified op (numbered on demand, one
    /// whole block at a time, when a use inside refers to a value out there).
    outer_pos: FxHashMap<OpId, u32>,
    /// `TYPE_*` verdict per type index; types are dense interner indices, so this
    /// beats a hash map on the hot path.
    type_state: Vec<u8>,
    /// Why each bad type is bad.
    type_errors: FxHashMap<Type, String>,
    /// The dialect that checks quantized types, if registered.
    qnn: Option<Arc<dyn Dialect>>,
    /// Scratch: operand types for inference.
    operand_types: Vec<Type>,
    /// Scratch for the type walk.
    type_stack: Vec<(Type, bool)>,
    /// Top-level symbols, for op verifiers that look them up (`func.call`).
    symbols: SymbolTable,
    /// Attribute dictionaries whose types were already checked, and whether they
    /// were all well formed.
    checked_attrs: crate::hash::FxHashMap<Attribute, bool>,
    /// Innermost bad types already reported (see [`Verifier::cause`]).
    reported_causes: crate::hash::FxHashSet<Type>,
    diags: Vec<Diagnostic>,
}

impl<'m> Verifier<'m> {
    fn new(ctx: &Context, module: &'m Module) -> Verifier<'m> {
        Verifier {
            module,
            order: vec![UNNUMBERED; module.ops.len()],
            outer_pos: FxHashMap::default(),
            type_state: Vec::new(),
            type_errors: FxHashMap::default(),
            qnn: ctx.dialect_arc("qnn"),
            operand_types: Vec::new(),
            type_stack: Vec::new(),
            symbols: SymbolTable::build(ctx, module),
            checked_attrs: Default::default(),
            reported_causes: Default::default(),
            diags: Vec::new(),
        }
    }

    fn error(&mut self, ctx: &Context, op: OpId, message: String) {
        self.diags.push(op_diagnostic(ctx, self.module, op, message));
    }

    // ---- one op -----------------------------------------------------------

    fn check_op(&mut self, ctx: &mut Context, op: OpId, check_slot_owners: bool) {
        let m = self.module;
        let name = m.ops[op].name;
        let attrs = m.ops[op].attrs;
        let facts = ctx.op_def(name).map(DefFacts::of);
        // False once something the op's verifier or inference relies on is wrong.
        let mut sound = facts.is_some();

        if !matches!(ctx.attr_data(attrs), AttrData::Dict(_)) {
            self.error(ctx, op, format!("'{}' op attributes must be a dictionary", ctx.op_name_str(name)));
            sound = false;
        }

        if facts.is_none() {
            self.check_unregistered(ctx, op, name);
        }

        let num_operands = m.num_operands(op);
        let num_results = m.num_results(op);
        let num_regions = m.num_regions(op);
        if let Some(f) = facts {
            for (what, arity, found) in [
                ("operand", f.operands, num_operands),
                ("result", f.results, num_results),
                ("region", f.regions, num_regions),
            ] {
                if !arity.accepts(found) {
                    let plural = if arity == Arity::Exact(1) { "" } else { "s" };
                    let msg = format!(
                        "'{}' op expects {arity} {what}{plural}, found {found}",
                        ctx.op_name_str(name)
                    );
                    self.error(ctx, op, msg);
                    sound = false;
                }
            }
        }

        sound &= self.check_operands(ctx, op, check_slot_owners);

        for (i, r) in m.results(op).enumerate() {
            let ty = m.value_type(r);
            if !self.type_ok(ctx, ty) {
                let msg = format!(
                    "result #{i} of '{}' has {}",
                    ctx.op_name_str(name),
                    self.bad_type_to_string(ctx, ty)
                );
                self.error(ctx, op, msg);
                sound = false;
            }
        }

        self.check_regions(ctx, op, facts);

        // After the regions, so that a bad type a function's arguments already
        // reported is not reported again through its `function_type`.
        if attrs != Attribute::EMPTY_DICT {
            sound &= match self.checked_attrs.get(&attrs) {
                Some(&ok) => ok,
                None => {
                    let ok = self.check_attr_types(ctx, op, attrs);
                    self.checked_attrs.insert(attrs, ok);
                    ok
                }
            };
        }

        let Some(f) = facts else { return };

        if f.traits.contains(Traits::TERMINATOR) && m.ops[op].next.is_some() {
            let msg = format!("terminator '{}' must be the last op of its block", ctx.op_name_str(name));
            self.error(ctx, op, msg);
        }

        if sound && f.traits.contains(Traits::SAME_OPERANDS_AND_RESULT_TYPE) {
            sound = self.check_same_type(ctx, op);
        }
        if !sound {
            return;
        }

        if name == OpName::MODULE {
            self.check_unique_symbols(ctx, op);
        }

        if let Some(verify_fn) = f.verify {
            if let Err(msg) = verify_fn(&OpView { ctx: &*ctx, module: m, op, symbols: Some(&self.symbols) }) {
                let msg = prefix_op(ctx.op_name_str(name), &msg);
                self.error(ctx, op, msg);
                return;
            }
        }

        if let Some(infer) = f.infer {
            self.check_inferred(ctx, op, infer);
        }
    }

    /// Symbol names (`sym_name`) of the ops directly in `module` are unique: a
    /// second definition is an error at it, with a note at the first.
    fn check_unique_symbols(&mut self, ctx: &Context, module: OpId) {
        let m = self.module;
        let mut first: FxHashMap<&str, OpId> = FxHashMap::default();
        for block in m.blocks(m.region(module, 0)) {
            for op in m.block_ops(block) {
                let Some(name) = m.op_attr(ctx, op, "sym_name").and_then(|a| ctx.attr_as_str(a)) else {
                    continue;
                };
                match first.get(name) {
                    None => {
                        first.insert(name, op);
                    }
                    Some(&earlier) => {
                        let message = format!("symbol '@{name}' is defined twice in the module");
                        let note = op_diagnostic(ctx, m, earlier, format!("'@{name}' is first defined here"));
                        self.diags.push(op_diagnostic(ctx, m, op, message).with_note(note));
                    }
                }
            }
        }
    }

    /// The op has no definition: report it unless its dialect is unregistered and
    /// that is allowed.
    fn check_unregistered(&mut self, ctx: &Context, op: OpId, name: OpName) {
        let text = ctx.op_name_str(name);
        if let Some(dialect) = ctx.dialect_of(name) {
            let dialect_name = dialect.name();
            let mut msg = format!("unknown op '{text}' in dialect '{dialect_name}'");
            if let Some(s) = suggest_op(ctx, dialect_name, text) {
                let _ = write!(msg, "; did you mean '{s}'?");
            }
            self.error(ctx, op, msg);
        } else if !ctx.allows_unregistered() {
            let msg = format!("unregistered op '{text}' (use --allow-unregistered-dialect to accept it)");
            self.error(ctx, op, msg);
        }
    }

    /// Operand slots, liveness, operand types, dominance and isolation. Returns false
    /// if an operand is unusable by the op's own verifier (dead or badly typed).
    fn check_operands(&mut self, ctx: &Context, op: OpId, check_slot_owners: bool) -> bool {
        let m = self.module;
        let o = &m.ops[op];
        let (start, count) = (o.operands_start as usize, o.num_operands as usize);
        if start + count > m.uses.len() {
            let msg = format!("'{}' op has operand slots outside the operand arena", ctx.op_name_str(o.name));
            self.error(ctx, op, msg);
            return false;
        }
        let mut sound = true;
        for i in 0..count {
            let slot = UseId::from_index(start + i);
            let u = &m.uses[slot];
            if check_slot_owners && u.owner != op {
                let msg = format!(
                    "operand #{i} of '{}' records another owner ({})",
                    self.op_text(ctx, op),
                    u.owner
                );
                self.error(ctx, op, msg);
            }
            let v = u.value;
            if v.is_none() || v.index() >= m.values.len() {
                let msg = format!(
                    "operand #{i} of '{}' is not a value (was its definition erased?)",
                    self.op_text(ctx, op)
                );
                self.error(ctx, op, msg);
                sound = false;
                continue;
            }
            let def = m.value_def(v);
            if let ValueDef::Result { op: d, .. } = def {
                if d.index() >= m.ops.len() || m.is_erased(d) {
                    let msg = format!(
                        "operand #{i} of '{}' uses {v}, a result of an erased op",
                        self.op_text(ctx, op)
                    );
                    self.error(ctx, op, msg);
                    sound = false;
                    continue;
                }
            }
            let ty = m.value_type(v);
            if !self.type_ok(ctx, ty) {
                sound = false;
                if !self.defined_inside(def) {
                    let msg = format!(
                        "operand #{i} of '{}' has {}",
                        self.op_text(ctx, op),
                        self.bad_type_to_string(ctx, ty)
                    );
                    self.error(ctx, op, msg);
                }
            }
            self.check_dominance(ctx, op, i, v, def);
        }
        sound
    }

    /// True if the value is defined inside the op being verified (so its definition
    /// is checked there).
    fn defined_inside(&self, def: ValueDef) -> bool {
        let m = self.module;
        match def {
            ValueDef::Result { op, .. } => self.order[op.index()] != UNNUMBERED,
            ValueDef::BlockArg { block, .. } => {
                let region = m.blocks[block].parent;
                region.is_some() && {
                    let owner = m.regions[region].parent;
                    owner.is_some() && self.order[owner.index()] != UNNUMBERED
                }
            }
        }
    }

    /// Block argument types and terminators of the op's regions.
    fn check_regions(&mut self, ctx: &Context, op: OpId, facts: Option<DefFacts>) {
        let m = self.module;
        let needs_terminator = facts.is_some_and(|f| !f.traits.contains(Traits::NO_TERMINATOR));
        for (ri, region) in m.regions(op).enumerate() {
            let mut block = m.regions[region].first_block;
            let mut bi = 0usize;
            while block.is_some() {
                for (ai, &arg) in m.blocks[block].args.iter().enumerate() {
                    let ty = m.value_type(arg);
                    if !self.type_ok(ctx, ty) {
                        let msg = format!(
                            "argument #{ai} of block #{bi} in region #{ri} of '{}' has {}",
                            self.op_text(ctx, op),
                            self.bad_type_to_string(ctx, ty)
                        );
                        self.error(ctx, op, msg);
                    }
                }
                let last = m.blocks[block].last_op;
                if needs_terminator && last.is_some() {
                    let last_def = ctx.op_def(m.ops[last].name);
                    if last_def.is_some_and(|d| !d.has(Traits::TERMINATOR)) {
                        let msg = format!(
                            "block must end with a terminator; '{}' is not one",
                            ctx.op_name_str(m.ops[last].name)
                        );
                        self.error(ctx, last, msg);
                    }
                }
                block = m.blocks[block].next;
                bi += 1;
            }
        }
    }

    fn check_same_type(&mut self, ctx: &Context, op: OpId) -> bool {
        let m = self.module;
        let mut all = m
            .operands(op)
            .enumerate()
            .map(|(i, v)| ("operand", i, m.value_type(v)))
            .chain(m.results(op).enumerate().map(|(i, v)| ("result", i, m.value_type(v))));
        let Some((first_what, first_i, first_ty)) = all.next() else { return true };
        for (what, i, ty) in all {
            if ty != first_ty {
                let msg = format!(
                    "'{}' op requires all operands and results to have the same type; \
                     {what} #{i} is {} but {first_what} #{first_i} is {}",
                    self.op_text(ctx, op),
                    type_to_string(ctx, ty),
                    type_to_string(ctx, first_ty)
                );
                self.error(ctx, op, msg);
                return false;
            }
        }
        true
    }

    fn check_inferred(&mut self, ctx: &mut Context, op: OpId, infer: InferTypesFn) {
        let m = self.module;
        self.operand_types.clear();
        self.operand_types.extend(m.operands(op).map(|v| m.value_type(v)));
        let inferred = match infer(ctx, &self.operand_types, m.ops[op].attrs) {
            Ok(types) => types,
            Err(msg) => {
                let msg = prefix_op(ctx.op_name_str(m.ops[op].name), &msg);
                self.error(ctx, op, msg);
                return;
            }
        };
        let declared = m.results(op);
        let name = ctx.op_name_str(m.ops[op].name);
        if inferred.len() != declared.len() {
            let msg = format!(
                "'{name}' op inferred {} result types but the op declares {}",
                inferred.len(),
                declared.len()
            );
            self.error(ctx, op, msg);
            return;
        }
        let single = inferred.len() == 1;
        for (i, (&want, r)) in inferred.iter().zip(declared).enumerate() {
            let have = m.value_type(r);
            if want != have {
                let which = if single { String::new() } else { format!(" #{i}") };
                let msg = format!(
                    "'{name}' op inferred result{which} type {} but the op declares {}",
                    type_to_string(ctx, want),
                    type_to_string(ctx, have)
                );
                self.error(ctx, op, msg);
            }
        }
    }

    // ---- dominance --------------------------------------------------------

    /// Checks that value `v` (operand `i` of `user`) dominates `user` and, if an
    /// isolated-from-above op lies between them, that it is defined inside it.
    fn check_dominance(&mut self, ctx: &Context, user: OpId, i: usize, v: ValueId, def: ValueDef) {
        let m = self.module;
        let (def_block, def_op) = match def {
            ValueDef::Result { op, .. } => (m.ops[op].parent, op),
            ValueDef::BlockArg { block, .. } => (block, OpId::NONE),
        };
        if def_block.is_none() {
            let msg = format!(
                "operand #{i} of '{}' uses {v}, which is defined outside any block",
                self.op_text(ctx, user)
            );
            self.error(ctx, user, msg);
            return;
        }
        let user_block = m.ops[user].parent;
        if def_block == user_block {
            if def_op.is_none() || self.before(def_op, user) {
                return;
            }
            let msg = format!("operand #{i} of '{}' uses {v} before it is defined", self.op_text(ctx, user));
            let mut diag = op_diagnostic(ctx, m, user, msg);
            if m.op_pos(def_op).is_some() {
                let note = Diagnostic::error(
                    m.source_name().cloned(),
                    m.op_pos(def_op),
                    format!("{v} is defined here"),
                );
                diag = diag.with_note(note);
            }
            self.diags.push(diag);
            return;
        }
        // Walk up from the user through the ops whose regions enclose it, until an
        // op sits in the defining block.
        let mut cur = user;
        loop {
            let block = m.ops[cur].parent;
            if block.is_none() {
                break;
            }
            let region = m.blocks[block].parent;
            if region.is_none() {
                break;
            }
            let parent = m.regions[region].parent;
            if parent.is_none() {
                break;
            }
            if ctx.op_def(m.ops[parent].name).is_some_and(|d| d.has(Traits::ISOLATED_FROM_ABOVE))
                && !block_is_inside(m, def_block, parent)
            {
                let msg = format!(
                    "'{}' uses a value defined outside the enclosing isolated-from-above '{}' (operand #{i}, {v})",
                    self.op_text(ctx, user),
                    self.op_text(ctx, parent)
                );
                self.error(ctx, user, msg);
                return;
            }
            if m.ops[parent].parent == def_block {
                if def_op.is_none() || self.before(def_op, parent) {
                    return;
                }
                break;
            }
            cur = parent;
        }
        let msg = format!(
            "operand #{i} of '{}' uses {v}, a value that does not dominate it",
            self.op_text(ctx, user)
        );
        let mut diag = op_diagnostic(ctx, m, user, msg);
        if same_region_as_ancestor(m, def_block, user) {
            let note = Diagnostic::error(
                diag.file.clone(),
                diag.pos,
                format!(
                    "{v} is defined in another block of an enclosing region; qopt regions are straight-line, \
                     so a block does not dominate its sibling blocks"
                ),
            );
            diag = diag.with_note(note);
        }
        self.diags.push(diag);
    }

    /// True if `a` comes before `b`; both are in one block.
    fn before(&mut self, a: OpId, b: OpId) -> bool {
        let (pa, pb) = (self.order[a.index()], self.order[b.index()]);
        if pa != UNNUMBERED && pb != UNNUMBERED {
            return pa < pb;
        }
        // A block outside the verified op: number it once.
        if !self.outer_pos.contains_key(&a) {
            let m = self.module;
            let mut op = m.blocks[m.ops[a].parent].first_op;
            let mut n = 0u32;
            while op.is_some() {
                self.outer_pos.insert(op, n);
                n += 1;
                op = m.ops[op].next;
            }
        }
        match (self.outer_pos.get(&a), self.outer_pos.get(&b)) {
            (Some(x), Some(y)) => x < y,
            _ => false,
        }
    }

    // ---- types ------------------------------------------------------------

    /// True if `t` is well formed (cached).
    #[inline]
    fn type_ok(&mut self, ctx: &Context, t: Type) -> bool {
        match self.type_state.get(t.as_u32() as usize) {
            Some(&TYPE_OK) => true,
            Some(&TYPE_BAD) => false,
            _ => self.check_type(ctx, t),
        }
    }

    fn state(&self, t: Type) -> u8 {
        self.type_state.get(t.as_u32() as usize).copied().unwrap_or(TYPE_UNKNOWN)
    }

    fn set_state(&mut self, t: Type, state: u8) {
        let i = t.as_u32() as usize;
        if i >= self.type_state.len() {
            self.type_state.resize(i + 1, TYPE_UNKNOWN);
        }
        self.type_state[i] = state;
    }

    /// Checks `t` and the types inside it, children first, with an explicit stack.
    fn check_type(&mut self, ctx: &Context, t: Type) -> bool {
        let mut stack = std::mem::take(&mut self.type_stack);
        stack.clear();
        stack.push((t, false));
        while let Some((ty, children_done)) = stack.pop() {
            if self.state(ty) != TYPE_UNKNOWN {
                continue;
            }
            if !children_done {
                stack.push((ty, true));
                for_each_child(ctx, ty, |c| {
                    if self.state(c) == TYPE_UNKNOWN {
                        stack.push((c, false));
                    }
                });
                continue;
            }
            match self.check_own(ctx, ty) {
                Ok(()) => self.set_state(ty, TYPE_OK),
                Err(msg) => {
                    self.set_state(ty, TYPE_BAD);
                    self.type_errors.insert(ty, msg);
                }
            }
        }
        self.type_stack = stack;
        self.state(t) == TYPE_OK
    }

    /// Checks one type whose children already have a verdict.
    fn check_own(&self, ctx: &Context, t: Type) -> Result<(), String> {
        match ctx.type_data(t) {
            TypeData::Float(_) | TypeData::Index | TypeData::None => Ok(()),
            TypeData::Int(i) => check_int_width(*i),
            TypeData::Tensor { shape, element } => {
                for (i, &d) in shape.iter().enumerate() {
                    if d < 0 && d != DYNAMIC {
                        return Err(format!("dimension #{i} is {d}; sizes are >= 0 or ? (dynamic)"));
                    }
                    if d > MAX_DIM {
                        return Err(format!("dimension #{i} is {d}; the largest size is 2^48 = {MAX_DIM}"));
                    }
                }
                let mut static_dims = shape.iter().filter(|&&d| d != DYNAMIC);
                if static_dims.try_fold(1i64, |n, &d| n.checked_mul(d)).is_none() {
                    return Err("its element count does not fit 63 bits".to_string());
                }
                match ctx.type_data(*element) {
                    TypeData::Float(_)
                    | TypeData::Int(_)
                    | TypeData::Index
                    | TypeData::Quant(_)
                    | TypeData::Opaque { .. } => {}
                    _ => {
                        return Err(format!(
                            "tensor element type {} is not a scalar, quantized or dialect type",
                            type_to_string(ctx, *element)
                        ))
                    }
                }
                self.child_ok(ctx, *element, "element type")?;
                if let TypeData::Quant(q) = ctx.type_data(*element) {
                    q.check_axis_fits(shape)?;
                }
                Ok(())
            }
            TypeData::Function { inputs, results } => {
                for (i, &ty) in inputs.iter().enumerate() {
                    self.child_ok(ctx, ty, &format!("input #{i}"))?;
                }
                for (i, &ty) in results.iter().enumerate() {
                    self.child_ok(ctx, ty, &format!("result #{i}"))?;
                }
                Ok(())
            }
            TypeData::Quant(q) => {
                q.check_structure()?;
                match &self.qnn {
                    Some(qnn) => qnn.verify_type(ctx, t),
                    None => Ok(()),
                }
            }
            TypeData::Opaque { name, .. } => {
                let dialect = dialect_prefix(name);
                match ctx.dialect(dialect) {
                    Some(d) => d.verify_type(ctx, t),
                    None if ctx.allows_unregistered() => Ok(()),
                    None => Err(format!(
                        "it belongs to unregistered dialect '{dialect}' (use --allow-unregistered-dialect to accept it)"
                    )),
                }
            }
        }
    }

    fn child_ok(&self, ctx: &Context, child: Type, what: &str) -> Result<(), String> {
        if self.state(child) == TYPE_BAD {
            let why = self.type_errors.get(&child).map_or("", String::as_str);
            return Err(format!("{what} {} is invalid: {why}", type_to_string(ctx, child)));
        }
        Ok(())
    }

    /// Types held by attributes (`function_type`, type attributes, the type of a
    /// dense constant), nested arrays and dictionaries included, are well formed.
    /// Each attribute dictionary is walked once (see `checked_attrs`). Returns
    /// whether all of them are.
    fn check_attr_types(&mut self, ctx: &Context, op: OpId, attrs: Attribute) -> bool {
        let mut ok = true;
        let mut stack: Vec<(Attribute, crate::Symbol)> =
            ctx.dict_entries(attrs).iter().map(|&(k, v)| (v, k)).collect();
        while let Some((a, key)) = stack.pop() {
            let ty = match ctx.attr_data(a) {
                AttrData::Type(t) => Some(*t),
                AttrData::Dense(d) => Some(d.ty),
                AttrData::Array(items) => {
                    stack.extend(items.iter().map(|&i| (i, key)));
                    None
                }
                AttrData::Dict(entries) => {
                    stack.extend(entries.iter().map(|&(_, v)| (v, key)));
                    None
                }
                _ => None,
            };
            if let Some(t) = ty {
                if !self.type_ok(ctx, t) {
                    ok = false;
                    if self.reported_causes.contains(&self.cause(ctx, t)) {
                        continue;
                    }
                    let msg = format!(
                        "attribute '{}' of '{}' holds an {}",
                        ctx.symbol_str(key),
                        self.op_text(ctx, op),
                        self.bad_type_to_string(ctx, t)
                    );
                    self.error(ctx, op, msg);
                }
            }
        }
        ok
    }

    /// The innermost bad type inside the bad type `t`: the one whose own check
    /// failed, as opposed to those that are bad because a component is.
    fn cause(&self, ctx: &Context, mut t: Type) -> Type {
        loop {
            let mut bad_child = None;
            for_each_child(ctx, t, |c| {
                if bad_child.is_none() && self.state(c) == TYPE_BAD {
                    bad_child = Some(c);
                }
            });
            match bad_child {
                Some(c) => t = c,
                None => return t,
            }
        }
    }

    /// `invalid type T: why`, for a type known to be bad; remembers its cause as
    /// reported.
    fn bad_type_to_string(&mut self, ctx: &Context, t: Type) -> String {
        let cause = self.cause(ctx, t);
        self.reported_causes.insert(cause);
        let why = self.type_errors.get(&t).map_or("", String::as_str);
        format!("invalid type {}: {why}", type_to_string(ctx, t))
    }

    fn op_text<'c>(&self, ctx: &'c Context, op: OpId) -> &'c str {
        ctx.op_name_str(self.module.ops[op].name)
    }
}

/// Calls `f` on each type directly inside `t`.
fn for_each_child(ctx: &Context, t: Type, mut f: impl FnMut(Type)) {
    match ctx.type_data(t) {
        TypeData::Tensor { element, .. } => f(*element),
        TypeData::Function { inputs, results } => inputs.iter().chain(results.iter()).for_each(|&c| f(c)),
        _ => {}
    }
}

fn check_int_width(i: IntType) -> Result<(), String> {
    if (1..=64).contains(&i.width) {
        Ok(())
    } else {
        Err(format!("integer width {} is outside 1..=64", i.width))
    }
}

/// True if `block` is nested (at any depth) in a region of `op`.
fn block_is_inside(m: &Module, block: BlockId, op: OpId) -> bool {
    if block.is_none() {
        return false;
    }
    let mut b = block;
    loop {
        let region = m.blocks[b].parent;
        if region.is_none() {
            return false;
        }
        let owner = m.regions[region].parent;
        if owner.is_none() {
            return false;
        }
        if owner == op {
            return true;
        }
        b = m.ops[owner].parent;
        if b.is_none() {
            return false;
        }
    }
}

/// True if `block` is in the region of `user`'s block or of one of its ancestors'
/// blocks (so it is a sibling of a block that encloses the user). Error path only.
fn same_region_as_ancestor(m: &Module, block: BlockId, user: OpId) -> bool {
    let target = m.blocks[block].parent;
    if target.is_none() {
        return false;
    }
    let mut op = user;
    loop {
        let b = m.ops[op].parent;
        if b.is_none() {
            return false;
        }
        let region = m.blocks[b].parent;
        if region == target {
            return true;
        }
        if region.is_none() {
            return false;
        }
        op = m.regions[region].parent;
        if op.is_none() {
            return false;
        }
    }
}

/// `'name' op message` for a message from an op's verifier or inference. A message
/// that already starts with the quoted name is kept; one that starts with the bare
/// name (`func.func needs ...`) gets it quoted.
fn prefix_op(name: &str, msg: &str) -> String {
    if let Some(rest) = msg.strip_prefix(name).and_then(|r| r.strip_prefix(' ')) {
        return format!("'{name}' op {rest}");
    }
    let quoted_first =
        msg.strip_prefix('\'').and_then(|rest| rest.strip_prefix(name)).is_some_and(|r| r.starts_with('\''));
    if quoted_first {
        msg.to_string()
    } else {
        format!("'{name}' op {msg}")
    }
}

// ---- locations --------------------------------------------------------------

fn op_diagnostic(ctx: &Context, module: &Module, op: OpId, message: String) -> Diagnostic {
    Diagnostic::at_op(ctx, module, op, Severity::Error, message)
}

// ---- suggestions ------------------------------------------------------------

/// A registered op of `dialect` whose name is close to `unknown`, for "did you mean"
/// (the same distance rule as pass and option names).
fn suggest_op(ctx: &Context, dialect: &str, unknown: &str) -> Option<&'static str> {
    let typed = unknown.split_once('.').map_or(unknown, |(_, rest)| rest);
    let suffix = |name: &'static str| name.strip_prefix(dialect).and_then(|r| r.strip_prefix('.'));
    let defs = ctx.op_defs();
    let best = nearest_name(typed, defs.iter().filter_map(|d| suffix(d.name)))?;
    defs.iter().map(|d| d.name).find(|&n| suffix(n) == Some(best))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{FloatKind, QuantParams, QuantType, Signedness};
    use crate::{loc_to_string, LocationData};
    use crate::{OperationState, RegionId};

    // The shared test dialect has one op per structural property the verifier checks.
    use crate::testing::TestDialect;

    fn setup() -> (Context, Module) {
        let mut ctx = Context::new();
        assert!(ctx.register_dialect(TestDialect).is_ok());
        (ctx, Module::new())
    }

    fn check(ctx: &mut Context, m: &Module) -> Vec<String> {
        match verify(ctx, m) {
            Ok(()) => Vec::new(),
            Err(d) => d.0.into_iter().map(|d| d.message).collect(),
        }
    }

    fn t4(ctx: &mut Context) -> Type {
        let f32 = ctx.common().f32;
        ctx.tensor_type(&[4], f32)
    }

    /// Appends a new op to `block`.
    fn op(
        ctx: &mut Context,
        m: &mut Module,
        block: BlockId,
        name: &str,
        operands: &[ValueId],
        results: &[Type],
    ) -> OpId {
        let name = ctx.op_name(name);
        let o = m.create_op(OperationState::new(name).operands(operands).results(results));
        m.append_op(block, o);
        o
    }

    /// Appends a `test.region`-like op with one region holding one block.
    fn region_op(ctx: &mut Context, m: &mut Module, block: BlockId, name: &str) -> (OpId, RegionId, BlockId) {
        let n = ctx.op_name(name);
        let o = m.create_op(OperationState::new(n).regions(1));
        m.append_op(block, o);
        let r = m.region(o, 0);
        let b = m.append_block(r, &[]);
        (o, r, b)
    }

    /// A `func.func @name` in the module body; returns it and its entry block.
    fn func(
        ctx: &mut Context,
        m: &mut Module,
        name: &str,
        inputs: &[Type],
        results: &[Type],
    ) -> (OpId, BlockId) {
        let fty = ctx.function_type(inputs, results);
        let fty = ctx.type_attr(fty);
        let sym = ctx.string_attr(name);
        let attrs = ctx.dict_attr(&[("sym_name", sym), ("function_type", fty)]);
        let f = m.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
        let body = m.body();
        m.append_op(body, f);
        let region = m.region(f, 0);
        let entry = m.append_block(region, inputs);
        (f, entry)
    }

    fn result(m: &Module, op: OpId) -> ValueId {
        m.result(op, 0)
    }

    #[test]
    fn valid_func_with_return() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let (_, entry) = func(&mut ctx, &mut m, "main", &[t, t], &[t]);
        let args = m.block_args(entry).to_vec();
        let add = op(&mut ctx, &mut m, entry, "test.add", &args, &[t]);
        let sum = result(&m, add);
        op(&mut ctx, &mut m, entry, "func.return", &[sum], &[]);
        // A declaration (a body region without blocks) is fine too.
        let name = ctx.string_attr("ext");
        let fn_ty = ctx.function_type(&[t], &[t]);
        let fn_ty = ctx.type_attr(fn_ty);
        let attrs = ctx.dict_attr(&[("sym_name", name), ("function_type", fn_ty)]);
        let decl = m.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
        let body = m.body();
        m.append_op(body, decl);
        assert_eq!(check(&mut ctx, &m), Vec::<String>::new());
        // An empty entry block is a body without its return.
        func(&mut ctx, &mut m, "empty", &[t], &[t]);
        assert_eq!(check(&mut ctx, &m), ["'func.func' op function body must end with 'func.return'"]);
    }

    #[test]
    fn types_inside_attributes_are_verified_once() {
        let (mut ctx, mut m) = setup();
        let bad = ctx.intern_type(TypeData::Opaque { name: "nodialect.t".into(), body: "".into() });
        let bad = ctx.tensor_type(&[4], bad);
        // A declaration has no arguments: its `function_type` is where the type is.
        let fty = ctx.function_type(&[bad], &[]);
        let fty = ctx.type_attr(fty);
        let sym = ctx.string_attr("ext");
        let attrs = ctx.dict_attr(&[("sym_name", sym), ("function_type", fty)]);
        let decl = m.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
        let body = m.body();
        m.append_op(body, decl);
        let errors = check(&mut ctx, &m);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("attribute 'function_type' of 'func.func' holds an invalid type"),
            "{errors:?}"
        );
        assert!(errors[0]
            .ends_with("unregistered dialect 'nodialect' (use --allow-unregistered-dialect to accept it)"));
        // A function with a body reports the argument, not its signature again.
        let (mut ctx, mut m) = setup();
        let bad = ctx.intern_type(TypeData::Opaque { name: "nodialect.t".into(), body: "".into() });
        let (_, entry) = func(&mut ctx, &mut m, "main", &[bad], &[]);
        op(&mut ctx, &mut m, entry, "func.return", &[], &[]);
        let errors = check(&mut ctx, &m);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("argument #0 of block #0 in region #0 of 'func.func'"), "{errors:?}");
    }

    #[test]
    fn empty_function_body_is_a_declaration() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let fty = ctx.function_type(&[t], &[t]);
        let fty = ctx.type_attr(fty);
        let sym = ctx.string_attr("ext");
        let attrs = ctx.dict_attr(&[("sym_name", sym), ("function_type", fty)]);
        let f = m.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
        let body = m.body();
        m.append_op(body, f);
        assert_eq!(check(&mut ctx, &m), Vec::<String>::new());
    }

    #[test]
    fn wrong_arity() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let v = result(&m, c);
        op(&mut ctx, &mut m, body, "test.add", &[v, v, v], &[t]);
        assert_eq!(check(&mut ctx, &m), ["'test.add' op expects 2 operands, found 3"]);
    }

    #[test]
    fn unknown_op_with_suggestion() {
        let (mut ctx, mut m) = setup();
        let body = m.body();
        op(&mut ctx, &mut m, body, "test.ad", &[], &[]);
        op(&mut ctx, &mut m, body, "test.zzzzzz", &[], &[]);
        assert_eq!(
            check(&mut ctx, &m),
            [
                "unknown op 'test.ad' in dialect 'test'; did you mean 'test.add'?",
                "unknown op 'test.zzzzzz' in dialect 'test'",
            ]
        );
    }

    #[test]
    fn unregistered_op_with_and_without_allowance() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        op(&mut ctx, &mut m, body, "foo.bar", &[], &[t]);
        assert_eq!(
            check(&mut ctx, &m),
            ["unregistered op 'foo.bar' (use --allow-unregistered-dialect to accept it)"]
        );
        ctx.set_allow_unregistered(true);
        assert_eq!(check(&mut ctx, &m), Vec::<String>::new());
        // Allowing unregistered dialects does not accept unknown ops of registered ones.
        op(&mut ctx, &mut m, body, "test.nope", &[], &[]);
        assert_eq!(check(&mut ctx, &m), ["unknown op 'test.nope' in dialect 'test'"]);
    }

    #[test]
    fn use_before_def() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let name = ctx.op_name("test.const");
        let c = m.create_op(OperationState::new(name).results(&[t]));
        let v = result(&m, c);
        op(&mut ctx, &mut m, body, "test.add", &[v, v], &[t]);
        m.append_op(body, c);
        let msgs = check(&mut ctx, &m);
        assert_eq!(
            msgs,
            [
                format!("operand #0 of 'test.add' uses {v} before it is defined"),
                format!("operand #1 of 'test.add' uses {v} before it is defined"),
            ]
        );
    }

    #[test]
    fn use_of_own_result_is_not_dominated() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let v = result(&m, c);
        let inf = op(&mut ctx, &mut m, body, "test.infer", &[v], &[t]);
        let own = result(&m, inf);
        m.set_operand(inf, 0, own);
        assert_eq!(
            check(&mut ctx, &m),
            [format!("operand #0 of 'test.infer' uses {own} before it is defined")]
        );
    }

    #[test]
    fn values_of_enclosing_blocks_dominate() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let v = result(&m, c);
        let (_, region, inner) = region_op(&mut ctx, &mut m, body, "test.region");
        let _ = region;
        let arg = m.add_block_arg(inner, t);
        op(&mut ctx, &mut m, inner, "test.add", &[v, arg], &[t]);
        op(&mut ctx, &mut m, inner, "test.term", &[], &[]);
        assert_eq!(check(&mut ctx, &m), Vec::<String>::new());
    }

    #[test]
    fn value_defined_after_the_enclosing_op_does_not_dominate() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let (_, _, inner) = region_op(&mut ctx, &mut m, body, "test.region");
        let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let v = result(&m, c);
        op(&mut ctx, &mut m, inner, "test.infer", &[v], &[t]);
        op(&mut ctx, &mut m, inner, "test.term", &[], &[]);
        assert_eq!(
            check(&mut ctx, &m),
            [format!("operand #0 of 'test.infer' uses {v}, a value that does not dominate it")]
        );
    }

    #[test]
    fn sibling_block_value_does_not_dominate() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let (_, region, first) = region_op(&mut ctx, &mut m, body, "test.region");
        let c = op(&mut ctx, &mut m, first, "test.const", &[], &[t]);
        let v = result(&m, c);
        op(&mut ctx, &mut m, first, "test.term", &[], &[]);
        let second = m.append_block(region, &[]);
        op(&mut ctx, &mut m, second, "test.add", &[v, v], &[t]);
        op(&mut ctx, &mut m, second, "test.term", &[], &[]);
        let diags = verify(&mut ctx, &m).err().map(|d| d.0).unwrap_or_default();
        assert_eq!(diags.len(), 2);
        assert_eq!(
            diags[0].message,
            format!("operand #0 of 'test.add' uses {v}, a value that does not dominate it")
        );
        assert!(diags[0].notes[0].message.contains("straight-line"));
    }

    #[test]
    fn isolated_from_above_violation() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let v = result(&m, c);
        let (_, _, inner) = region_op(&mut ctx, &mut m, body, "test.isolated");
        let (_, _, deeper) = region_op(&mut ctx, &mut m, inner, "test.region");
        op(&mut ctx, &mut m, deeper, "test.infer", &[v], &[t]);
        op(&mut ctx, &mut m, deeper, "test.term", &[], &[]);
        assert_eq!(
            check(&mut ctx, &m),
            [format!(
                "'test.infer' uses a value defined outside the enclosing isolated-from-above 'test.isolated' \
                 (operand #0, {v})"
            )]
        );
    }

    #[test]
    fn function_may_not_use_another_functions_values() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let (_, a) = func(&mut ctx, &mut m, "a", &[t], &[t]);
        let x = m.block_args(a)[0];
        op(&mut ctx, &mut m, a, "func.return", &[x], &[]);
        let (_, b) = func(&mut ctx, &mut m, "b", &[], &[t]);
        op(&mut ctx, &mut m, b, "func.return", &[x], &[]);
        assert_eq!(
            check(&mut ctx, &m),
            [format!(
                "'func.return' uses a value defined outside the enclosing isolated-from-above 'func.func' \
                 (operand #0, {x})"
            )]
        );
    }

    #[test]
    fn missing_terminator() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let (_, _, inner) = region_op(&mut ctx, &mut m, body, "test.region");
        op(&mut ctx, &mut m, inner, "test.const", &[], &[t]);
        // An empty region of a terminator-needing op is fine.
        region_op(&mut ctx, &mut m, body, "test.region");
        assert_eq!(check(&mut ctx, &m), ["block must end with a terminator; 'test.const' is not one"]);
    }

    #[test]
    fn terminator_not_last() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let (_, entry) = func(&mut ctx, &mut m, "f", &[t], &[t]);
        let x = m.block_args(entry)[0];
        op(&mut ctx, &mut m, entry, "func.return", &[x], &[]);
        op(&mut ctx, &mut m, entry, "func.return", &[x], &[]);
        assert_eq!(check(&mut ctx, &m), ["terminator 'func.return' must be the last op of its block"]);
    }

    #[test]
    fn same_operands_and_result_type_violation() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let i8 = ctx.int_type(8, Signedness::Signless);
        let ti8 = ctx.tensor_type(&[4], i8);
        let body = m.body();
        let a = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let b = op(&mut ctx, &mut m, body, "test.const", &[], &[ti8]);
        let (a, b) = (result(&m, a), result(&m, b));
        op(&mut ctx, &mut m, body, "test.add", &[a, b], &[t]);
        assert_eq!(
            check(&mut ctx, &m),
            ["'test.add' op requires all operands and results to have the same type; \
              operand #1 is tensor<4xi8> but operand #0 is tensor<4xf32>"]
        );
    }

    #[test]
    fn inference_mismatch() {
        let (mut ctx, mut m) = setup();
        let f32 = ctx.common().f32;
        let t = ctx.tensor_type(&[1, DYNAMIC, 4], f32);
        let other = ctx.tensor_type(&[2], f32);
        let body = m.body();
        let a = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let a = result(&m, a);
        op(&mut ctx, &mut m, body, "test.infer", &[a], &[other]);
        assert_eq!(
            check(&mut ctx, &m),
            ["'test.infer' op inferred result type tensor<1x?x4xf32> but the op declares tensor<2xf32>"]
        );
    }

    fn quant(ctx: &mut Context, zero_point: i64) -> Type {
        ctx.quant_type(QuantType {
            storage: IntType { width: 8, signedness: Signedness::Signless },
            storage_min: -128,
            storage_max: 127,
            expressed: FloatKind::F32,
            params: QuantParams::PerTensor { scale: 0.5, zero_point },
        })
    }

    #[test]
    fn bad_quant_type() {
        let (mut ctx, mut m) = setup();
        let q = quant(&mut ctx, 300);
        let t = ctx.tensor_type(&[4], q);
        let body = m.body();
        op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let msg = "result #0 of 'test.const' has invalid type tensor<4x!qnn.uniform<i8:f32, 0.5:300>>: \
                   element type !qnn.uniform<i8:f32, 0.5:300> is invalid: \
                   zero point 300 is outside the storage range [-128, 127]";
        // Reported at each op (the verdict is cached, not the report).
        assert_eq!(check(&mut ctx, &m), [msg, msg]);
        let good = quant(&mut ctx, -3);
        assert_eq!(type_to_string(&ctx, good), "!qnn.uniform<i8:f32, 0.5:-3>");
    }

    #[test]
    fn quant_types_go_to_the_qnn_dialect() {
        struct Qnn;
        impl Dialect for Qnn {
            fn name(&self) -> &'static str {
                "qnn"
            }
            fn ops(&self) -> Vec<OpDef> {
                Vec::new()
            }
            fn verify_type(&self, ctx: &Context, ty: Type) -> Result<(), String> {
                match ctx.type_data(ty) {
                    TypeData::Quant(QuantType { params: QuantParams::PerTensor { scale, .. }, .. })
                        if *scale <= 0.0 =>
                    {
                        Err(format!("scale {scale} is not positive"))
                    }
                    _ => Ok(()),
                }
            }
        }
        let (mut ctx, mut m) = setup();
        assert!(ctx.register_dialect(Qnn).is_ok());
        let q = ctx.quant_type(QuantType {
            storage: IntType { width: 8, signedness: Signedness::Unsigned },
            storage_min: 0,
            storage_max: 255,
            expressed: FloatKind::F32,
            params: QuantParams::PerTensor { scale: -1.0, zero_point: 0 },
        });
        let body = m.body();
        op(&mut ctx, &mut m, body, "test.const", &[], &[q]);
        assert_eq!(
            check(&mut ctx, &m),
            ["result #0 of 'test.const' has invalid type !qnn.uniform<u8:f32, -1.0:0>: scale -1 is not positive"]
        );
    }

    #[test]
    fn malformed_types() {
        let (mut ctx, mut m) = setup();
        let f32 = ctx.common().f32;
        let neg = ctx.tensor_type(&[2, -5], f32);
        let opaque = ctx.intern_type(TypeData::Opaque { name: "foo.thing".into(), body: "".into() });
        let per_axis = ctx.quant_type(QuantType {
            storage: IntType { width: 8, signedness: Signedness::Signless },
            storage_min: -127,
            storage_max: 127,
            expressed: FloatKind::F32,
            params: QuantParams::PerAxis {
                axis: 0,
                scales: Box::new([0.1, 0.2]),
                zero_points: Box::new([0]),
            },
        });
        let body = m.body();
        op(&mut ctx, &mut m, body, "test.const", &[], &[neg]);
        op(&mut ctx, &mut m, body, "test.const", &[], &[opaque]);
        op(&mut ctx, &mut m, body, "test.const", &[], &[per_axis]);
        assert_eq!(
            check(&mut ctx, &m),
            [
                "result #0 of 'test.const' has invalid type tensor<2x-5xf32>: dimension #1 is -5; \
                 sizes are >= 0 or ? (dynamic)",
                "result #0 of 'test.const' has invalid type !foo.thing: it belongs to unregistered dialect 'foo' \
                 (use --allow-unregistered-dialect to accept it)",
                "result #0 of 'test.const' has invalid type !qnn.uniform<i8<-127:127>:f32:0, {0.1:0, 0.2:?}>: \
                 per-axis parameters have 2 scales but 1 zero points",
            ]
        );
    }

    #[test]
    fn func_return_type_mismatch() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let i8 = ctx.int_type(8, Signedness::Signless);
        let ti8 = ctx.tensor_type(&[4], i8);
        let (_, entry) = func(&mut ctx, &mut m, "f", &[ti8], &[t]);
        let x = m.block_args(entry)[0];
        op(&mut ctx, &mut m, entry, "func.return", &[x], &[]);
        assert_eq!(
            check(&mut ctx, &m),
            ["'func.return' op type of return operand #0 does not match the function's result type"]
        );
    }

    #[test]
    fn call_to_missing_function() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let (_, entry) = func(&mut ctx, &mut m, "f", &[t], &[t]);
        let x = m.block_args(entry)[0];
        let callee = ctx.symbol_ref_attr("missing");
        let attrs = ctx.dict_attr(&[("callee", callee)]);
        let call = m.create_op(OperationState::new(OpName::CALL).operands(&[x]).results(&[t]).attrs(attrs));
        m.append_op(entry, call);
        let r = result(&m, call);
        op(&mut ctx, &mut m, entry, "func.return", &[r], &[]);
        assert_eq!(check(&mut ctx, &m), ["'func.call' op no function named '@missing' in the module"]);
    }

    #[test]
    fn attributes_must_be_a_dictionary() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let not_dict = ctx.i64_attr(3);
        m.set_op_attrs(c, not_dict);
        assert_eq!(check(&mut ctx, &m), ["'test.const' op attributes must be a dictionary"]);
    }

    #[test]
    fn all_errors_are_collected() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let v = result(&m, c);
        op(&mut ctx, &mut m, body, "test.add", &[v], &[t]);
        op(&mut ctx, &mut m, body, "test.infer", &[v, v], &[t]);
        assert_eq!(
            check(&mut ctx, &m),
            ["'test.add' op expects 2 operands, found 1", "'test.infer' op expects 1 operand, found 2"]
        );
    }

    #[test]
    fn diagnostics_are_located_at_the_op() {
        let (mut ctx, mut m) = setup();
        m.set_source_name(Some(Arc::from("model.qir")));
        let t = t4(&mut ctx);
        let body = m.body();
        let name = ctx.op_name("test.add");
        let mut state = OperationState::new(name).results(&[t]);
        state.pos = SrcPos { line: 3, col: 5 };
        state.loc = ctx.name_loc("conv1");
        let o = m.create_op(state);
        m.append_op(body, o);
        // No parsed position: the location's file:line:col is used.
        let mut state = OperationState::new(name).results(&[t]);
        state.loc = ctx.file_loc("model.onnx", 12, 0);
        let o = m.create_op(state);
        m.append_op(body, o);
        let diags = verify(&mut ctx, &m).err().map(|d| d.0).unwrap_or_default();
        assert_eq!(diags.len(), 2);
        assert_eq!(diags[0].to_string(), "model.qir:3:5: error: 'test.add' op expects 2 operands, found 0");
        assert_eq!(diags[0].notes.len(), 1);
        assert_eq!(diags[0].notes[0].message, "op location: loc(\"conv1\")");
        assert_eq!(diags[0].notes[0].severity, crate::Severity::Note);
        assert_eq!(diags[1].to_string(), "model.onnx:12:0: error: 'test.add' op expects 2 operands, found 0");
        assert!(diags[1].notes.is_empty());
    }

    #[test]
    fn use_of_erased_value() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let v = result(&m, c);
        let user = op(&mut ctx, &mut m, body, "test.infer", &[v], &[t]);
        // Erase the user first, then detach and erase the def; then point a new op at it.
        assert!(m.erase_op(user).is_ok());
        assert!(m.erase_op(c).is_ok());
        let name = ctx.op_name("test.infer");
        // Build a slot referring to the erased result without going through the use list.
        let o = m.create_op(OperationState::new(name).operands(&[v]).results(&[t]));
        m.append_op(body, o);
        let msgs = check(&mut ctx, &m);
        assert!(
            msgs.contains(&format!("operand #0 of 'test.infer' uses {v}, a result of an erased op")),
            "{msgs:?}"
        );
    }

    #[test]
    fn verify_op_checks_against_enclosing_blocks() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
        let v = result(&m, c);
        let (outer, _, inner) = region_op(&mut ctx, &mut m, body, "test.region");
        op(&mut ctx, &mut m, inner, "test.add", &[v, v], &[t]);
        op(&mut ctx, &mut m, inner, "test.term", &[], &[]);
        assert_eq!(verify_op(&mut ctx, &m, outer), Ok(()));
        // Move the const after the region op: now it does not dominate the use.
        m.move_op_to_end(c, body);
        let errs = verify_op(&mut ctx, &m, outer).err().map(|d| d.0.len());
        assert_eq!(errs, Some(2));
    }

    #[test]
    fn deep_nest_verifies_without_stack_overflow() {
        let handle = std::thread::Builder::new().stack_size(2 << 20).spawn(|| {
            let (mut ctx, mut m) = setup();
            let t = t4(&mut ctx);
            let mut block = m.body();
            let c = op(&mut ctx, &mut m, block, "test.const", &[], &[t]);
            let v = result(&m, c);
            for _ in 0..10_000 {
                let (_, _, inner) = region_op(&mut ctx, &mut m, block, "test.region");
                if block != m.body() {
                    op(&mut ctx, &mut m, block, "test.term", &[], &[]);
                }
                block = inner;
            }
            // The deepest op uses a value from the outermost block.
            op(&mut ctx, &mut m, block, "test.add", &[v, v], &[t]);
            op(&mut ctx, &mut m, block, "test.term", &[], &[]);
            check(&mut ctx, &m)
        });
        let msgs = handle.map(|h| h.join());
        assert!(matches!(msgs, Ok(Ok(ref v)) if v.is_empty()), "{msgs:?}");
    }

    #[test]
    fn op_verifier_messages_name_the_op_once() {
        assert_eq!(
            prefix_op("func.func", "func.func needs a 'sym_name' string attribute"),
            "'func.func' op needs a 'sym_name' string attribute"
        );
        assert_eq!(
            prefix_op("func.return", "'func.return' must be inside a 'func.func'"),
            "'func.return' must be inside a 'func.func'"
        );
        assert_eq!(prefix_op("func.call", "no function named '@f'"), "'func.call' op no function named '@f'");
    }

    #[test]
    fn use_of_a_detached_op_result() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let body = m.body();
        let name = ctx.op_name("test.const");
        let detached = m.create_op(OperationState::new(name).results(&[t]));
        let v = result(&m, detached);
        op(&mut ctx, &mut m, body, "test.infer", &[v], &[t]);
        assert_eq!(
            check(&mut ctx, &m),
            [format!("operand #0 of 'test.infer' uses {v}, which is defined outside any block")]
        );
    }

    #[test]
    fn op_name_suggestions() {
        let (ctx, _) = setup();
        assert_eq!(suggest_op(&ctx, "test", "test.reigon"), Some("test.region"));
        assert_eq!(suggest_op(&ctx, "test", "test.cons"), Some("test.const"));
        assert_eq!(suggest_op(&ctx, "test", "test.xyz"), None);
    }

    #[test]
    fn location_and_type_to_string() {
        let (mut ctx, _) = setup();
        let a = ctx.name_loc("a");
        let f = ctx.file_loc("m.onnx", 3, 1);
        let b = ctx.symbol("b");
        let named = ctx.intern_loc(LocationData::Name { name: b, child: f });
        let fused = ctx.fused_loc(&[a, named]);
        assert_eq!(loc_to_string(&ctx, fused), "loc(fused[\"a\", \"b\"(\"m.onnx\":3:1)])");
        let f32 = ctx.common().f32;
        let i32 = ctx.common().i32;
        let fty = ctx.function_type(&[f32, i32], &[f32]);
        assert_eq!(type_to_string(&ctx, fty), "(f32, i32) -> f32");
        let fty2 = ctx.function_type(&[], &[f32, i32]);
        assert_eq!(type_to_string(&ctx, fty2), "() -> (f32, i32)");
        let scalar = ctx.tensor_type(&[], f32);
        assert_eq!(type_to_string(&ctx, scalar), "tensor<f32>");
    }

    /// Release-mode timing of a 1,000,000-op function:
    /// `cargo test --release -p qopt-ir-core verify::tests::million -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn million_ops_timing() {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let (_, entry) = func(&mut ctx, &mut m, "big", &[t], &[t]);
        let mut x = m.block_args(entry)[0];
        for i in 0..1_000_000u32 {
            let o = if i & 1 == 0 {
                op(&mut ctx, &mut m, entry, "test.add", &[x, x], &[t])
            } else {
                op(&mut ctx, &mut m, entry, "test.infer", &[x], &[t])
            };
            x = result(&m, o);
        }
        op(&mut ctx, &mut m, entry, "func.return", &[x], &[]);
        let start = std::time::Instant::now();
        let r = verify(&mut ctx, &m);
        let took = start.elapsed();
        println!("verified {} ops in {took:?}", m.count_ops());
        assert!(r.is_ok());
    }
}
