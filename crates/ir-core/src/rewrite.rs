//! Pattern rewriting: the [`RewritePattern`] trait, the [`Rewriter`] through which
//! patterns edit the IR (it keeps use lists right and records every change), and
//! the greedy worklist driver [`apply_patterns_greedily`] with folding, dead-op
//! removal and an iteration bound that reports non-convergence, after MLIR's
//! greedy pattern rewrite driver.

use crate::attributes::{AttrData, Attribute};
use crate::context::{Context, OpName};
use crate::dialect::{FoldResult, Traits};
use crate::entity::{BlockId, EntityId, OpId, ValueId};
use crate::hash::FxHashMap;
use crate::location::Location;
use crate::module::{EraseError, Module, OperationState};
use crate::types::Type;
use smallvec::SmallVec;

/// A rewrite: matches an op and, if it applies, edits the IR through the rewriter.
pub trait RewritePattern: Send + Sync {
    /// Kebab-case name stating the identity, e.g. `dq-q-to-requant` (for stats).
    fn name(&self) -> &str;
    /// The op name the pattern is rooted at; `None` = tried on every op.
    fn root(&self) -> Option<&str> {
        None
    }
    /// Higher benefit patterns are tried first.
    fn benefit(&self) -> u16 {
        1
    }
    /// Tries the pattern on `op`; returns true if it changed the IR. A pattern that
    /// returns false must not have changed anything.
    fn match_and_rewrite(&self, op: OpId, rewriter: &mut Rewriter<'_>) -> bool;
}

/// Where the rewriter inserts the ops it creates.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum InsertPoint {
    /// Right before an op.
    Before(OpId),
    /// Right after an op.
    After(OpId),
    /// At the end of a block.
    End(BlockId),
    /// Nowhere: created ops stay detached.
    Detached,
}

/// The changes a rewriter made since the last [`Rewriter::take_changes`].
#[derive(Default, Debug, Clone)]
pub struct Changes {
    /// Ops created.
    pub created: Vec<OpId>,
    /// Ops whose operands or attributes changed.
    pub modified: Vec<OpId>,
    /// Ops erased.
    pub erased: Vec<OpId>,
    /// Ops that lost a use (candidates for dead-op removal).
    pub lost_use: Vec<OpId>,
}

impl Changes {
    /// True if nothing changed.
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.modified.is_empty() && self.erased.is_empty()
    }
}

/// Edits the IR on behalf of patterns and passes; see the module docs.
pub struct Rewriter<'a> {
    /// The context for interning types and attributes.
    pub ctx: &'a mut Context,
    /// The module being rewritten. Edit through the rewriter's methods so changes
    /// are recorded; read freely.
    pub module: &'a mut Module,
    ip: InsertPoint,
    loc: Location,
    changes: Changes,
}

impl<'a> Rewriter<'a> {
    /// A rewriter over `module` with a detached insertion point.
    pub fn new(ctx: &'a mut Context, module: &'a mut Module) -> Rewriter<'a> {
        Rewriter {
            ctx,
            module,
            ip: InsertPoint::Detached,
            loc: Location::UNKNOWN,
            changes: Changes::default(),
        }
    }

    /// Sets where new ops go.
    pub fn set_insertion_point(&mut self, ip: InsertPoint) {
        self.ip = ip;
    }
    /// The insertion point.
    pub fn insertion_point(&self) -> InsertPoint {
        self.ip
    }
    /// Sets the location given to new ops that do not name one.
    pub fn set_loc(&mut self, loc: Location) {
        self.loc = loc;
    }
    /// Builds the constant `attr` of type `ty` before the insertion point: the
    /// dialect named `first` (the folded op's own) is asked first, then every other
    /// registered dialect; `None` if none can build it.
    pub fn materialize_constant(
        &mut self,
        first: &str,
        attr: Attribute,
        ty: Type,
        loc: Location,
    ) -> Option<ValueId> {
        let mut order: Vec<std::sync::Arc<str>> = vec![first.into()];
        order.extend(self.ctx.dialects().map(|d| d.name()).filter(|&d| d != first).map(Into::into));
        for name in order {
            let Some(dialect) = self.ctx.dialect_arc(&name) else { continue };
            if let Some(v) = dialect.materialize_constant(self, attr, ty, loc) {
                return Some(v);
            }
        }
        None
    }
    /// Takes the recorded changes, leaving none.
    pub fn take_changes(&mut self) -> Changes {
        std::mem::take(&mut self.changes)
    }
    /// True if any change was recorded since the last `take_changes`.
    pub fn has_changes(&self) -> bool {
        !self.changes.is_empty()
    }

    /// Creates an op from `state` at the insertion point (location defaults to the
    /// rewriter's). Does not run result-type inference; see [`Self::create_inferred`].
    pub fn create(&mut self, mut state: OperationState) -> OpId {
        if state.loc.is_unknown() {
            state.loc = self.loc;
        }
        let op = self.module.create_op(state);
        match self.ip {
            InsertPoint::Before(anchor) => self.module.insert_op_before(anchor, op),
            InsertPoint::After(anchor) => {
                self.module.insert_op_after(anchor, op);
                self.ip = InsertPoint::After(op);
            }
            InsertPoint::End(block) => self.module.append_op(block, op),
            InsertPoint::Detached => {}
        }
        self.changes.created.push(op);
        op
    }

    /// Creates op `name` with `operands` and `attrs`, inferring result types with
    /// the op's registered inference. Errors if the op is unknown or inference fails.
    pub fn create_inferred(
        &mut self,
        name: &str,
        operands: &[ValueId],
        attrs: Attribute,
    ) -> Result<OpId, String> {
        let op_name = self.ctx.op_name(name);
        let infer = self
            .ctx
            .op_def(op_name)
            .and_then(|d| d.infer_types)
            .ok_or_else(|| format!("op '{name}' has no result-type inference"))?;
        let types: SmallVec<[Type; 4]> = operands.iter().map(|&v| self.module.value_type(v)).collect();
        let results = infer(self.ctx, &types, attrs)?;
        Ok(self.create(OperationState::new(op_name).operands(operands).results(&results).attrs(attrs)))
    }

    /// Replaces every use of each result of `op` by `values` and erases `op`.
    pub fn replace_op(&mut self, op: OpId, values: &[ValueId]) -> Result<(), EraseError> {
        for (i, &v) in values.iter().enumerate() {
            let r = self.module.result(op, i);
            self.replace_all_uses(r, v);
        }
        self.erase_op(op)
    }

    /// Makes every use of `old` a use of `new`, recording the users as modified.
    pub fn replace_all_uses(&mut self, old: ValueId, new: ValueId) {
        for u in self.module.uses(old) {
            self.changes.modified.push(u.op);
        }
        let def = self.module.defining_op(old);
        if def.is_some() {
            self.changes.lost_use.push(def);
        }
        self.module.replace_all_uses(old, new);
    }

    /// Erases `op` (refusing if its results are still used).
    pub fn erase_op(&mut self, op: OpId) -> Result<(), EraseError> {
        let operand_defs: SmallVec<[OpId; 4]> =
            self.module.operands(op).map(|v| self.module.defining_op(v)).filter(|d| d.is_some()).collect();
        self.module.erase_op(op)?;
        self.changes.erased.push(op);
        self.changes.lost_use.extend(operand_defs);
        Ok(())
    }

    /// Sets operand `index` of `op`.
    pub fn set_operand(&mut self, op: OpId, index: usize, value: ValueId) {
        let old = self.module.defining_op(self.module.operand(op, index));
        if old.is_some() {
            self.changes.lost_use.push(old);
        }
        self.module.set_operand(op, index, value);
        self.changes.modified.push(op);
    }

    /// Replaces the attribute dictionary of `op`.
    pub fn set_attrs(&mut self, op: OpId, attrs: Attribute) {
        self.module.set_op_attrs(op, attrs);
        self.changes.modified.push(op);
    }

    /// Records that a pattern changed `op` in place by other means.
    pub fn mark_modified(&mut self, op: OpId) {
        self.changes.modified.push(op);
    }
}

/// A set of patterns indexed by root op name, ready to apply.
pub struct PatternSet {
    patterns: Vec<Box<dyn RewritePattern>>,
    by_root: FxHashMap<OpName, Vec<usize>>,
    any_root: Vec<usize>,
}

impl PatternSet {
    /// Indexes `patterns` (interning their root names), highest benefit first.
    pub fn new(ctx: &mut Context, mut patterns: Vec<Box<dyn RewritePattern>>) -> PatternSet {
        patterns.sort_by_key(|p| std::cmp::Reverse(p.benefit()));
        let mut by_root: FxHashMap<OpName, Vec<usize>> = FxHashMap::default();
        let mut any_root = Vec::new();
        for (i, p) in patterns.iter().enumerate() {
            match p.root() {
                Some(name) => by_root.entry(ctx.op_name(name)).or_default().push(i),
                None => any_root.push(i),
            }
        }
        PatternSet { patterns, by_root, any_root }
    }

    /// The patterns of every registered dialect's canonicalization set.
    pub fn canonicalization(ctx: &mut Context) -> PatternSet {
        let patterns: Vec<Box<dyn RewritePattern>> =
            ctx.dialects().flat_map(|d| d.canonicalization_patterns()).collect();
        PatternSet::new(ctx, patterns)
    }

    /// Number of patterns.
    pub fn len(&self) -> usize {
        self.patterns.len()
    }

    /// True if there are no patterns.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    fn candidates(&self, name: OpName) -> impl Iterator<Item = usize> + '_ {
        let rooted = self.by_root.get(&name).map(|v| v.as_slice()).unwrap_or(&[]);
        // Merge the two benefit-sorted lists so benefit order holds across both.
        let mut a = rooted.iter().copied().peekable();
        let mut b = self.any_root.iter().copied().peekable();
        std::iter::from_fn(move || match (a.peek(), b.peek()) {
            (Some(&x), Some(&y)) => {
                if x < y {
                    a.next()
                } else {
                    b.next()
                }
            }
            (Some(_), None) => a.next(),
            (None, Some(_)) => b.next(),
            (None, None) => None,
        })
    }
}

/// Limits and switches of the greedy driver.
#[derive(Clone, Debug)]
pub struct GreedyConfig {
    /// Full sweeps over the IR before giving up.
    pub max_iterations: u32,
    /// Rewrites (pattern applications, folds, erasures) before giving up, in all.
    pub max_rewrites: u64,
    /// Rewrites per op in scope within one sweep before giving up: a pattern pair
    /// that undoes itself keeps re-queueing its op and would never end a sweep.
    pub max_rewrites_per_op: u64,
    /// Fold ops through their registered folders.
    pub fold: bool,
    /// Erase pure ops whose results are unused.
    pub remove_dead: bool,
}

impl Default for GreedyConfig {
    fn default() -> Self {
        GreedyConfig {
            max_iterations: 10,
            max_rewrites: 10_000_000,
            max_rewrites_per_op: 32,
            fold: true,
            remove_dead: true,
        }
    }
}

/// What the greedy driver did.
#[derive(Clone, Debug, Default)]
pub struct GreedyStats {
    /// Sweeps run.
    pub iterations: u32,
    /// Ops folded.
    pub folded: u64,
    /// Dead ops erased.
    pub dead_erased: u64,
    /// Successful pattern applications per pattern name.
    pub pattern_hits: Vec<(String, u64)>,
    /// True if a sweep made no change before the bounds were hit.
    pub converged: bool,
}

impl GreedyStats {
    /// Total successful pattern applications.
    pub fn rewrites(&self) -> u64 {
        self.pattern_hits.iter().map(|h| h.1).sum()
    }
    /// True if anything changed.
    pub fn changed(&self) -> bool {
        self.folded + self.dead_erased + self.rewrites() > 0
    }
}

/// Applies `patterns`, folders and dead-op removal to every op nested in `scope`
/// until nothing changes. Returns the stats; `converged` is false if the
/// iteration or rewrite bound stopped it first (callers report that as an error).
pub fn apply_patterns_greedily(
    ctx: &mut Context,
    module: &mut Module,
    scope: OpId,
    patterns: &PatternSet,
    config: &GreedyConfig,
) -> GreedyStats {
    let mut stats = GreedyStats::default();
    let mut hits = vec![0u64; patterns.patterns.len()];
    let mut rewrites = 0u64;
    let mut rewriter = Rewriter::new(ctx, module);
    let mut in_list: Vec<bool> = Vec::new();
    let mut worklist: Vec<OpId> = Vec::new();
    'sweeps: while stats.iterations < config.max_iterations {
        stats.iterations += 1;
        let mut changed = false;
        // Program order (pre-order list reversed, popped from the back): operands
        // are simplified before their users are visited.
        worklist.clear();
        in_list.clear();
        in_list.resize(rewriter.module.ops.len(), false);
        for op in rewriter.module.walk_preorder(scope) {
            if op != scope {
                worklist.push(op);
                in_list[op.index()] = true;
            }
        }
        worklist.reverse();
        let sweep_bound =
            rewrites.saturating_add((worklist.len() as u64 + 1).saturating_mul(config.max_rewrites_per_op));
        while let Some(op) = worklist.pop() {
            if let Some(flag) = in_list.get_mut(op.index()) {
                *flag = false;
            }
            if rewriter.module.is_erased(op) || rewriter.module.op_block(op).is_none() {
                continue;
            }
            if rewrites >= config.max_rewrites || rewrites >= sweep_bound {
                break 'sweeps;
            }
            let applied = try_dead(&mut rewriter, op, config, &mut stats)
                || try_fold(&mut rewriter, op, config, &mut stats)
                || try_patterns(&mut rewriter, op, patterns, &mut hits);
            if !applied {
                continue;
            }
            changed = true;
            rewrites += 1;
            let changes = rewriter.take_changes();
            let module = &*rewriter.module;
            let push = |op: OpId, worklist: &mut Vec<OpId>, in_list: &mut Vec<bool>| {
                if op.is_none() || module.is_erased(op) {
                    return;
                }
                if in_list.len() <= op.index() {
                    in_list.resize(module.ops.len(), false);
                }
                if !in_list[op.index()] {
                    in_list[op.index()] = true;
                    worklist.push(op);
                }
            };
            // New and changed ops, and the users of their results, may match now;
            // an op that only lost a use may have become dead (its users have not
            // changed, so they are not revisited: a shared constant stays O(1)).
            for &o in changes.created.iter().chain(&changes.modified) {
                push(o, &mut worklist, &mut in_list);
                if !module.is_erased(o) {
                    for r in module.results(o) {
                        for u in module.uses(r) {
                            push(u.op, &mut worklist, &mut in_list);
                        }
                    }
                }
            }
            for &o in &changes.lost_use {
                push(o, &mut worklist, &mut in_list);
            }
        }
        if !changed {
            stats.converged = true;
            break;
        }
    }
    stats.pattern_hits = patterns
        .patterns
        .iter()
        .zip(hits)
        .filter(|(_, n)| *n > 0)
        .map(|(p, n)| (p.name().to_string(), n))
        .collect();
    stats
}

fn is_trivially_dead(ctx: &Context, module: &Module, op: OpId) -> bool {
    let Some(def) = ctx.op_def(module.op_name(op)) else { return false };
    def.has(Traits::PURE)
        && !def.has(Traits::TERMINATOR)
        && module.num_regions(op) == 0
        && !module.op_has_uses(op)
}

fn try_dead(rewriter: &mut Rewriter<'_>, op: OpId, config: &GreedyConfig, stats: &mut GreedyStats) -> bool {
    if !config.remove_dead || !is_trivially_dead(rewriter.ctx, rewriter.module, op) {
        return false;
    }
    if rewriter.erase_op(op).is_ok() {
        stats.dead_erased += 1;
        return true;
    }
    false
}

/// The constant a value holds, if its defining op is constant-like.
pub fn constant_value(ctx: &Context, module: &Module, v: ValueId) -> Option<Attribute> {
    let def = module.defining_op(v);
    if def.is_none() {
        return None;
    }
    let op_def = ctx.op_def(module.op_name(def))?;
    if !op_def.has(Traits::CONSTANT_LIKE) {
        return None;
    }
    module.op_attr(ctx, def, "value")
}

fn try_fold(rewriter: &mut Rewriter<'_>, op: OpId, config: &GreedyConfig, stats: &mut GreedyStats) -> bool {
    if !config.fold {
        return false;
    }
    let name = rewriter.module.op_name(op);
    let Some(def) = rewriter.ctx.op_def(name) else { return false };
    if def.has(Traits::CONSTANT_LIKE) {
        return false;
    }
    let Some(fold) = def.fold else { return false };
    let constants: SmallVec<[Option<Attribute>; 4]> =
        rewriter.module.operands(op).map(|v| constant_value(rewriter.ctx, rewriter.module, v)).collect();
    let Some(results) = fold(rewriter.ctx, rewriter.module, op, &constants) else { return false };
    if results.len() != rewriter.module.num_results(op) {
        return false;
    }
    // A folder answering with the op's own result means "unchanged".
    if results.iter().any(|r| matches!(r, FoldResult::Value(v) if rewriter.module.defining_op(*v) == op)) {
        return false;
    }
    let Some(dialect) = rewriter.ctx.dialect_of(name).map(|d| d.name()) else { return false };
    let saved_ip = rewriter.insertion_point();
    rewriter.set_insertion_point(InsertPoint::Before(op));
    let loc = rewriter.module.op_loc(op);
    let mut values: SmallVec<[ValueId; 2]> = SmallVec::new();
    let mut created_before = Vec::new();
    for (i, r) in results.iter().enumerate() {
        match *r {
            FoldResult::Value(v) => values.push(v),
            FoldResult::Constant(attr) => {
                let ty = rewriter.module.value_type(rewriter.module.result(op, i));
                let materialized = rewriter.materialize_constant(dialect, attr, ty, loc);
                match materialized {
                    Some(v) => {
                        created_before.push(v);
                        values.push(v)
                    }
                    None => {
                        rewriter.set_insertion_point(saved_ip);
                        // Undo constants made for earlier results.
                        for v in created_before {
                            let d = rewriter.module.defining_op(v);
                            let _ = rewriter.erase_op(d);
                        }
                        let _ = rewriter.take_changes();
                        return false;
                    }
                }
            }
        }
    }
    rewriter.set_insertion_point(saved_ip);
    if rewriter.replace_op(op, &values).is_ok() {
        stats.folded += 1;
        true
    } else {
        false
    }
}

fn try_patterns(rewriter: &mut Rewriter<'_>, op: OpId, patterns: &PatternSet, hits: &mut [u64]) -> bool {
    let name = rewriter.module.op_name(op);
    for i in patterns.candidates(name) {
        let pattern = &patterns.patterns[i];
        rewriter.set_insertion_point(InsertPoint::Before(op));
        rewriter.set_loc(rewriter.module.op_loc(op));
        if pattern.match_and_rewrite(op, rewriter) {
            hits[i] += 1;
            return true;
        }
    }
    false
}

/// True if `attr` is a splat or dense constant whose every element is `value`
/// (helper for folders such as `x * 1 -> x`).
pub fn is_splat_of(ctx: &Context, attr: Attribute, value: f64) -> bool {
    match ctx.attr_data(attr) {
        AttrData::Dense(d) => {
            let elem = ctx.element_type(d.ty);
            crate::dense::dense_values_f64(ctx, d, elem).is_some_and(|vals| vals.iter().all(|&v| v == value))
        }
        _ => false,
    }
}
