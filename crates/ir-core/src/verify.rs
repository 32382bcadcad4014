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
#[path = "verify_tests.rs"]
mod tests;
