//! `cse`: common-subexpression elimination. A pure op equal to an earlier op
//! that dominates it is erased, and its results are replaced by the earlier op's.
//!
//! Two ops are equal when they have the same name, the same attribute dictionary
//! (one interned handle), the same operand values and the same result types; for
//! a [`Traits::COMMUTATIVE`] op with two operands the operands are compared as a
//! sorted pair, so `add(%a, %b)` and `add(%b, %a)` are equal. Only registered
//! [`Traits::PURE`] ops that are not terminators and have no regions take part:
//! merging ops with side effects (or unregistered ops, assumed to have them) would
//! change the program.
//!
//! Scopes follow dominance in qopt's straight-line regions: an op in a block sees
//! the earlier ops of its block and of every enclosing block (before the op that
//! holds it), so a value computed outside a region is reused inside it. The blocks
//! of one region do not see each other, and an [`Traits::ISOLATED_FROM_ABOVE`] op
//! (a function) starts an empty scope. The scoped hash table is one map from the
//! hash of a key (which carries the isolation scope) to the ops that have it;
//! keys are computed again from the ops when candidates are compared, so an
//! entry costs an op id, not a copy of the key. A stack of frames (one per block
//! being visited) remembers which ops each block added; popping a frame removes
//! them. The walk over the region tree is that explicit stack, never recursion.
//!
//! Statistic: `eliminated` (ops erased).
//!
//! ```text
//! // before
//! %0 = test.add(%x, %y) : (i64, i64) -> i64
//! %1 = test.add(%y, %x) : (i64, i64) -> i64
//! test.effect(%0, %1) : (i64, i64) -> ()
//! // after
//! %0 = test.add(%x, %y) : (i64, i64) -> i64
//! test.effect(%0, %0) : (i64, i64) -> ()
//! ```

use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    Attribute, BlockId, Context, FxHashMap, FxHasher, Module, OpId, OpName, Pass, PassContext, PassOutcome,
    Traits, Type, ValueId,
};
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};

/// The `cse` pass; see the module docs.
pub struct Cse;

const INFO: PassInfo = PassInfo {
    name: "cse",
    summary: "merge equal pure ops, reusing the dominating one",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
    description: "Erases a pure op without regions when an equal op (same name, attributes, operands \
     and result types; commutative operands in either order) dominates it, replacing its \
     results by that op's. Values from enclosing blocks are reused inside regions.\n\n\
     ```\n\
     %0 = test.add(%x, %y) : (i64, i64) -> i64\n\
     %1 = test.add(%y, %x) : (i64, i64) -> i64   // uses of %1 become %0\n\
     ```",
};

impl Pass for Cse {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let eliminated = eliminate_common_subexpressions(cx.ctx, module);
        cx.add_stat("eliminated", eliminated);
        Ok(PassOutcome::from_changed(eliminated > 0))
    }
}

/// What makes two ops equal (see the module docs). `scope` numbers the nearest
/// isolated-from-above ancestor, so ops never match across isolation.
#[derive(Clone, PartialEq, Eq, Hash)]
struct OpKey {
    scope: u32,
    name: OpName,
    attrs: Attribute,
    operands: SmallVec<[ValueId; 4]>,
    result_types: SmallVec<[Type; 2]>,
}

/// The ops seen so far in scope, by the hash of their keys. An op's key cannot
/// change while it is in the table: only later ops' results are replaced.
#[derive(Default)]
struct KnownOps {
    by_hash: FxHashMap<u64, SmallVec<[(OpId, u32); 1]>>,
}

impl KnownOps {
    fn hash(key: &OpKey) -> u64 {
        let mut hasher = FxHasher::default();
        key.hash(&mut hasher);
        hasher.finish()
    }

    /// An earlier op whose key is `key`.
    fn find(&self, ctx: &Context, module: &Module, key: &OpKey) -> Option<OpId> {
        let candidates = self.by_hash.get(&Self::hash(key))?;
        candidates
            .iter()
            .find(|&&(op, scope)| op_key(ctx, module, op, scope).as_ref() == Some(key))
            .map(|&(op, _)| op)
    }

    fn insert(&mut self, key: &OpKey, op: OpId) {
        self.by_hash.entry(Self::hash(key)).or_default().push((op, key.scope));
    }

    fn remove(&mut self, key: &OpKey, op: OpId) {
        let hash = Self::hash(key);
        if let Some(ops) = self.by_hash.get_mut(&hash) {
            ops.retain(|(o, _)| *o != op);
            if ops.is_empty() {
                self.by_hash.remove(&hash);
            }
        }
    }
}

/// A block being visited: the next op to look at, and the ops this block
/// added to the table.
struct Frame {
    next: OpId,
    scope: u32,
    added: Vec<OpId>,
}

/// The key of `op` in `scope` if it may be merged at all.
fn op_key(ctx: &Context, module: &Module, op: OpId, scope: u32) -> Option<OpKey> {
    let def = ctx.op_def(module.op_name(op))?;
    if !def.has(Traits::PURE) || def.has(Traits::TERMINATOR) || module.num_regions(op) > 0 {
        return None;
    }
    let mut operands: SmallVec<[ValueId; 4]> = module.operands(op).collect();
    if def.has(Traits::COMMUTATIVE) && operands.len() == 2 {
        operands.sort_unstable();
    }
    Some(OpKey {
        scope,
        name: module.op_name(op),
        attrs: module.op_attrs(op),
        operands,
        result_types: module.results(op).map(|r| module.value_type(r)).collect(),
    })
}

/// Runs CSE over the whole module; returns how many ops were erased.
fn eliminate_common_subexpressions(ctx: &Context, module: &mut Module) -> u64 {
    let mut known = KnownOps::default();
    let mut frames: Vec<Frame> = Vec::new();
    let mut next_scope = 0u32;
    let mut eliminated = 0u64;
    let root = module.root();
    push_region_frames(ctx, module, root, &mut frames, &mut next_scope, 0);
    while let Some(frame) = frames.last_mut() {
        let op = frame.next;
        if op.is_none() {
            // The block is done: what it added is out of scope for later blocks.
            let scope = frame.scope;
            for added in std::mem::take(&mut frame.added) {
                if let Some(key) = op_key(ctx, module, added, scope) {
                    known.remove(&key, added);
                }
            }
            frames.pop();
            continue;
        }
        frame.next = module.next_op(op);
        let scope = frame.scope;
        if let Some(key) = op_key(ctx, module, op, scope) {
            match known.find(ctx, module, &key) {
                Some(earlier) => {
                    if replace_with(module, op, earlier) {
                        eliminated += 1;
                    }
                }
                None => {
                    known.insert(&key, op);
                    frame.added.push(op);
                }
            }
            continue;
        }
        // Blocks of regions go on top, first block last so it is visited first;
        // each sees this block's entries, and none sees a sibling's.
        push_region_frames(ctx, module, op, &mut frames, &mut next_scope, scope);
    }
    eliminated
}

/// Pushes one frame per block of `op`'s regions (first block on top).
fn push_region_frames(
    ctx: &Context,
    module: &Module,
    op: OpId,
    frames: &mut Vec<Frame>,
    next_scope: &mut u32,
    scope: u32,
) {
    if module.num_regions(op) == 0 {
        return;
    }
    let isolated = ctx.op_def(module.op_name(op)).is_some_and(|def| def.has(Traits::ISOLATED_FROM_ABOVE));
    let scope = if isolated {
        *next_scope += 1;
        *next_scope
    } else {
        scope
    };
    let blocks: SmallVec<[BlockId; 4]> = module.regions(op).flat_map(|r| module.blocks(r)).collect();
    for &block in blocks.iter().rev() {
        frames.push(Frame { next: module.first_op(block), scope, added: Vec::new() });
    }
}

/// Replaces every result of `op` by the matching result of `earlier` and erases
/// `op`; false (nothing changed) if erasing is refused.
fn replace_with(module: &mut Module, op: OpId, earlier: OpId) -> bool {
    let pairs: SmallVec<[(ValueId, ValueId); 2]> = module.results(op).zip(module.results(earlier)).collect();
    for (old, new) in pairs {
        module.replace_all_uses(old, new);
    }
    // invariant: every use was just moved to `earlier`, so erasing cannot fail.
    module.erase_op(op).is_ok()
}

#[cfg(test)]
mod tests {
    use crate::test_ir::{on_small_stack, registry, TestIr};

    /// 10,000 pairs of equal ops in a chain, then the same computation repeated
    /// at the bottom of a 10,000-deep nest of regions, merge on a small stack.
    #[test]
    fn a_10000_op_chain_and_nest_merge() {
        on_small_stack(|| {
            let mut ir = TestIr::default();
            let (_, entry) = ir.function("chain", 1, 1);
            let x = ir.module.block_args(entry)[0];
            let mut value = x;
            for _ in 0..10_000 {
                let a = ir.op(entry, "test.mul", &[value, x], 1)[0];
                let b = ir.op(entry, "test.mul", &[value, x], 1)[0];
                value = ir.op(entry, "test.add", &[a, b], 1)[0];
            }
            let first = ir.op(entry, "test.neg", &[x], 1)[0];
            let mut block = entry;
            for _ in 0..10_000 {
                let nest = ir.op_with(block, "test.region_op", &[], 0, 1, &[]);
                block = ir.module.first_block(ir.module.region(nest, 0));
            }
            let again = ir.op(block, "test.neg", &[x], 1)[0];
            let effect = ir.op_with(block, "test.effect", &[again, first], 0, 0, &[]);
            ir.ret(entry, &[value]);
            // Not printed: 10,000 levels of indentation make 100 MB of text.
            let stats = ir.run_unprinted(&registry(), "cse").unwrap();
            assert_eq!(stats, [("eliminated", 10_001)]);
            assert_eq!(ir.module.operands(effect).collect::<Vec<_>>(), [first, first]);
            assert_eq!(ir.module.count_ops(), 1 + 1 + 2 * 10_000 + 1 + 10_000 + 1 + 1);
        });
    }
}
