//! Unit tests of the IR body ([`Module`] edits, use lists, walkers, cloning),
//! and the helpers that build and check IR for them and for the rewrite
//! machinery's tests (`rewrite_tests.rs`).
//!
//! IR is built programmatically against a tiny `test` dialect registered here, so
//! these tests depend on neither the parser nor the printer:
//! - `test.const` (ConstantLike, Pure): its result is its `value` attribute;
//! - `test.add` (Pure, Commutative): folds `add(c1, c2)` to a constant and
//!   `add(x, 0)` / `add(0, x)` to `x`;
//! - `test.neg` (Pure);
//! - `test.effect` (no traits, so it has side effects and is never dead);
//! - `test.region` (one region) and `test.multi` (any number of regions), holders
//!   for nested IR.
//!
//! After every edit the tests call [`assert_sound`], which checks the use lists
//! ([`Module::check_use_lists`]) and the prev/next links of every reachable block.
//! Each area has one helper that turns IR into something comparable:
//! [`ops_of`] (block order), [`uses_of`] (use lists), [`spell`] (walk orders),
//! [`body_names`] (greedy driver results).

// The test dialect is the shared one (`crate::testing`).
use crate::testing::TestDialect;
use crate::{
    constant_value, BlockId, Context, EraseError, FxHashMap, Module, OpId, OperationState, Type, ValueDef,
    ValueId,
};

// ---- building IR -------------------------------------------------------------

/// A context with the test dialect and an empty module.
pub(super) struct Ir {
    pub(super) ctx: Context,
    pub(super) m: Module,
    pub(super) i64: Type,
}

impl Ir {
    pub(super) fn new() -> Ir {
        let mut ctx = Context::new();
        ctx.register_dialect(TestDialect).expect("the test dialect registers once into a fresh context");
        let i64 = ctx.common().i64;
        Ir { ctx, m: Module::new(), i64 }
    }

    pub(super) fn body(&self) -> BlockId {
        self.m.body()
    }

    /// A detached op: `test.effect`/`test.region`/`test.multi` get no result, the
    /// others one i64 result; `test.region` gets its one region.
    pub(super) fn make(&mut self, name: &str, operands: &[ValueId]) -> OpId {
        let results = match name {
            "test.effect" | "test.region" | "test.multi" => Vec::new(),
            _ => vec![self.i64],
        };
        let regions = usize::from(name == "test.region");
        self.make_with(name, operands, &results, regions)
    }

    pub(super) fn make_with(
        &mut self,
        name: &str,
        operands: &[ValueId],
        results: &[Type],
        regions: usize,
    ) -> OpId {
        let name = self.ctx.op_name(name);
        self.m.create_op(OperationState::new(name).operands(operands).results(results).regions(regions))
    }

    /// Creates `name(operands)` at the end of `block`.
    pub(super) fn append(&mut self, block: BlockId, name: &str, operands: &[ValueId]) -> OpId {
        let op = self.make(name, operands);
        self.m.append_op(block, op);
        op
    }

    /// A detached `test.const` holding `value`.
    pub(super) fn make_const(&mut self, value: i64) -> OpId {
        let attr = self.ctx.i64_attr(value);
        let attrs = self.ctx.dict_attr(&[("value", attr)]);
        let name = self.ctx.op_name("test.const");
        self.m.create_op(OperationState::new(name).results(&[self.i64]).attrs(attrs))
    }

    /// The result of a `test.const` holding `value`, appended to `block`.
    pub(super) fn konst(&mut self, block: BlockId, value: i64) -> ValueId {
        let op = self.make_const(value);
        self.m.append_op(block, op);
        self.m.result(op, 0)
    }

    /// The single result of an op.
    pub(super) fn val(&self, op: OpId) -> ValueId {
        self.m.result(op, 0)
    }

    /// A `test.region` appended to `block`, with one block of `num_args` i64 args.
    pub(super) fn region_op(&mut self, block: BlockId, num_args: usize) -> (OpId, BlockId) {
        let op = self.append(block, "test.region", &[]);
        let region = self.m.region(op, 0);
        let inner = self.m.append_block(region, &vec![self.i64; num_args]);
        (op, inner)
    }

    pub(super) fn name_of(&self, op: OpId) -> &str {
        self.ctx.op_name_str(self.m.op_name(op))
    }

    pub(super) fn const_of(&self, v: ValueId) -> Option<i128> {
        constant_value(&self.ctx, &self.m, v).and_then(|a| self.ctx.attr_as_int(a))
    }
}

// ---- checking IR -------------------------------------------------------------

/// The ops of a block, front to back (bounded, so a cyclic list fails instead of hanging).
pub(super) fn ops_of(m: &Module, block: BlockId) -> Vec<OpId> {
    let ops: Vec<OpId> = m.block_ops(block).take(100_001).collect();
    assert!(ops.len() <= 100_000, "block {block} has a cyclic op list");
    ops
}

/// The uses of a value as (op, operand index), in list order.
pub(super) fn uses_of(m: &Module, v: ValueId) -> Vec<(OpId, u32)> {
    m.uses(v).map(|u| (u.op, u.index)).collect()
}

/// Checks that walking `block` backwards from `last_op` over `prev` gives the
/// reverse of walking forwards from `first_op` over `next`, and that every op
/// names `block` as its parent.
pub(super) fn check_block_links(m: &Module, block: BlockId, when: &str) {
    let forward = ops_of(m, block);
    let mut backward = Vec::new();
    let mut op = m.last_op(block);
    while op.is_some() && backward.len() <= forward.len() {
        backward.push(op);
        op = m.prev_op(op);
    }
    backward.reverse();
    assert_eq!(forward, backward, "{when}: prev links of {block} disagree with its next links");
    assert_eq!(m.first_op(block).expand(), forward.first().copied(), "{when}: first op of {block}");
    assert_eq!(m.last_op(block).expand(), forward.last().copied(), "{when}: last op of {block}");
    for op in forward {
        assert_eq!(m.op_block(op), block, "{when}: {op} is linked into {block} but names another parent");
        assert!(!m.is_erased(op), "{when}: erased {op} is still linked into {block}");
    }
}

/// Use lists are consistent and every block reachable from the root (plus the
/// root itself) has consistent links.
pub(super) fn assert_sound(m: &Module, when: &str) {
    if let Err(e) = m.check_use_lists() {
        panic!("{when}: use lists are broken: {e}");
    }
    assert_tree_links(m, m.root(), when);
}

/// Block links of every block nested in `op` (for detached clones as well).
pub(super) fn assert_tree_links(m: &Module, op: OpId, when: &str) {
    for o in m.walk_preorder(op) {
        for r in m.regions(o) {
            assert_eq!(m.region_op(r), o, "{when}: region of {o} names another owner");
            for b in m.blocks(r) {
                assert_eq!(m.block_region(b), r, "{when}: {b} names another region");
                check_block_links(m, b, when);
            }
        }
    }
}

// ---- use lists -----------------------------------------------------------------

#[test]
fn uses_are_listed_in_creation_order_and_a_double_use_appears_twice() {
    let mut ir = Ir::new();
    let body = ir.body();
    let v = ir.konst(body, 7);
    let n = ir.append(body, "test.neg", &[v]);
    let a = ir.append(body, "test.add", &[v, v]);
    let s = ir.append(body, "test.effect", &[ir.val(a), v]);
    assert_sound(&ir.m, "after building");
    assert_eq!(
        uses_of(&ir.m, v),
        vec![(n, 0), (a, 0), (a, 1), (s, 1)],
        "uses in the order operands were made"
    );
    assert_eq!(uses_of(&ir.m, ir.val(a)), vec![(s, 0)], "add's result has one use");
    assert!(ir.m.has_uses(v) && !ir.m.has_uses(ir.val(n)), "has_uses agrees with the lists");
    assert!(ir.m.op_has_uses(a) && !ir.m.op_has_uses(n), "op_has_uses agrees with the lists");
    let slots: Vec<_> = ir.m.uses(v).map(|u| u.slot).collect();
    let mut unique = slots.clone();
    unique.dedup();
    assert_eq!(slots, unique, "each use is its own operand slot, even for a double use");
}

#[test]
fn set_operand_unlinks_from_head_middle_and_tail() {
    let mut ir = Ir::new();
    let body = ir.body();
    let v = ir.konst(body, 1);
    let w = ir.konst(body, 2);
    let users: Vec<OpId> = (0..4).map(|_| ir.append(body, "test.neg", &[v])).collect();
    let [u0, u1, u2, u3] = users[..] else { unreachable!("four users were made") };

    // Middle, head, then tail: the three cases of the unlink code.
    ir.m.set_operand(u1, 0, w);
    assert_sound(&ir.m, "after moving the middle use");
    assert_eq!(uses_of(&ir.m, v), vec![(u0, 0), (u2, 0), (u3, 0)], "middle use gone from v");
    ir.m.set_operand(u0, 0, w);
    assert_sound(&ir.m, "after moving the head use");
    assert_eq!(uses_of(&ir.m, v), vec![(u2, 0), (u3, 0)], "head use gone from v");
    ir.m.set_operand(u3, 0, w);
    assert_sound(&ir.m, "after moving the tail use");
    assert_eq!(uses_of(&ir.m, v), vec![(u2, 0)], "tail use gone from v");
    assert_eq!(
        uses_of(&ir.m, w),
        vec![(u1, 0), (u0, 0), (u3, 0)],
        "moved uses are appended to w in edit order"
    );

    // After removing the tail, appending must go after the new tail.
    let late = ir.append(body, "test.neg", &[v]);
    assert_eq!(uses_of(&ir.m, v), vec![(u2, 0), (late, 0)], "append after a tail removal lands at the end");
    ir.m.set_operand(u2, 0, w);
    ir.m.set_operand(late, 0, w);
    assert_sound(&ir.m, "after emptying v");
    assert!(!ir.m.has_uses(v), "v lost its last use");
    let again = ir.append(body, "test.neg", &[v]);
    assert_eq!(uses_of(&ir.m, v), vec![(again, 0)], "an emptied list starts afresh");
    assert_sound(&ir.m, "after reusing v");
}

#[test]
fn set_operand_to_the_same_value_keeps_the_use_in_place() {
    let mut ir = Ir::new();
    let body = ir.body();
    let v = ir.konst(body, 1);
    let a = ir.append(body, "test.neg", &[v]);
    let b = ir.append(body, "test.neg", &[v]);
    ir.m.set_operand(a, 0, v);
    assert_sound(&ir.m, "after a no-op set_operand");
    assert_eq!(uses_of(&ir.m, v), vec![(a, 0), (b, 0)], "a no-op edit does not reorder the use list");
}

#[test]
fn set_operands_with_the_same_count_rewires_each_slot() {
    let mut ir = Ir::new();
    let body = ir.body();
    let x = ir.konst(body, 1);
    let y = ir.konst(body, 2);
    let a = ir.append(body, "test.add", &[x, y]);
    let other = ir.append(body, "test.neg", &[y]);
    ir.m.set_operands(a, &[y, x]);
    assert_sound(&ir.m, "after swapping operands");
    assert_eq!(ir.m.operands(a).collect::<Vec<_>>(), vec![y, x], "operands swapped");
    assert_eq!(uses_of(&ir.m, x), vec![(a, 1)], "x is now operand 1");
    assert_eq!(uses_of(&ir.m, y), vec![(other, 0), (a, 0)], "y is operand 0 of a, after its older use");

    ir.m.set_operands(a, &[x, x]);
    assert_sound(&ir.m, "after using x twice");
    assert_eq!(uses_of(&ir.m, x), vec![(a, 1), (a, 0)], "x used twice by a, in edit order");
    assert_eq!(uses_of(&ir.m, y), vec![(other, 0)], "y keeps only its other user");
}

#[test]
fn set_operands_with_a_different_count_moves_to_fresh_slots() {
    let mut ir = Ir::new();
    let body = ir.body();
    let x = ir.konst(body, 1);
    let y = ir.konst(body, 2);
    let z = ir.konst(body, 3);
    let s = ir.append(body, "test.effect", &[x, y]);
    let later = ir.append(body, "test.neg", &[x]);

    ir.m.set_operands(s, &[z, y, x]);
    assert_sound(&ir.m, "after growing the operand list");
    assert_eq!(ir.m.operands(s).collect::<Vec<_>>(), vec![z, y, x], "three operands now");
    assert_eq!(uses_of(&ir.m, x), vec![(later, 0), (s, 2)], "x: old slot gone, new use at index 2 appended");
    assert_eq!(uses_of(&ir.m, y), vec![(s, 1)], "y: one use, at index 1");
    assert_eq!(uses_of(&ir.m, z), vec![(s, 0)], "z: one use, at index 0");

    ir.m.set_operands(s, &[y]);
    assert_sound(&ir.m, "after shrinking the operand list");
    assert_eq!(uses_of(&ir.m, x), vec![(later, 0)], "x lost the sink's use");
    assert_eq!(uses_of(&ir.m, y), vec![(s, 0)], "y is the only operand");
    assert!(!ir.m.has_uses(z), "z lost its use");

    ir.m.set_operands(s, &[]);
    assert_sound(&ir.m, "after clearing the operand list");
    assert_eq!(ir.m.num_operands(s), 0, "no operands left");
    assert!(!ir.m.has_uses(y), "y lost its use");
}

#[test]
fn replace_all_uses_moves_every_use_to_the_end_of_the_new_list() {
    let mut ir = Ir::new();
    let body = ir.body();
    let old = ir.konst(body, 1);
    let new = ir.konst(body, 2);
    let n0 = ir.append(body, "test.neg", &[new]);
    let a = ir.append(body, "test.add", &[old, old]);
    let s = ir.append(body, "test.effect", &[new, old]);

    ir.m.replace_all_uses(old, new);
    assert_sound(&ir.m, "after replace_all_uses");
    assert!(!ir.m.has_uses(old), "old has no uses left");
    assert_eq!(
        uses_of(&ir.m, new),
        vec![(n0, 0), (s, 0), (a, 0), (a, 1), (s, 1)],
        "new keeps its uses and gains old's, in old's order"
    );
    assert_eq!(ir.m.operands(a).collect::<Vec<_>>(), vec![new, new], "both operands of add rewired");

    ir.m.replace_all_uses(new, new);
    assert_sound(&ir.m, "after replacing a value by itself");
    assert_eq!(uses_of(&ir.m, new).len(), 5, "replacing a value by itself changes nothing");

    ir.m.replace_all_uses(old, new);
    assert_sound(&ir.m, "after replacing a value without uses");
    assert_eq!(uses_of(&ir.m, new).len(), 5, "replacing a value without uses changes nothing");
}

#[test]
fn replace_all_uses_works_for_block_arguments() {
    let mut ir = Ir::new();
    let (_, inner) = ir.region_op(ir.body(), 2);
    let (a0, a1) = (ir.m.block_args(inner)[0], ir.m.block_args(inner)[1]);
    let s = ir.append(inner, "test.effect", &[a0, a1, a0]);
    ir.m.replace_all_uses(a0, a1);
    assert_sound(&ir.m, "after replacing a block argument");
    assert_eq!(uses_of(&ir.m, a1), vec![(s, 1), (s, 0), (s, 2)], "a1 gains a0's uses after its own");
    assert!(!ir.m.has_uses(a0), "a0 has no uses left");
}

#[test]
fn replace_uses_where_moves_only_accepted_uses() {
    let mut ir = Ir::new();
    let body = ir.body();
    let old = ir.konst(body, 1);
    let new = ir.konst(body, 2);
    let a = ir.append(body, "test.add", &[old, old]);
    let n = ir.append(body, "test.neg", &[old]);
    let s = ir.append(body, "test.effect", &[old]);

    ir.m.replace_uses_where(old, new, |u| u.op == a && u.index == 1);
    assert_sound(&ir.m, "after replacing one operand of add");
    assert_eq!(uses_of(&ir.m, old), vec![(a, 0), (n, 0), (s, 0)], "only add's operand 1 moved");
    assert_eq!(uses_of(&ir.m, new), vec![(a, 1)], "new got add's operand 1");

    ir.m.replace_uses_where(old, new, |u| u.op != n);
    assert_sound(&ir.m, "after replacing all but neg's use");
    assert_eq!(uses_of(&ir.m, old), vec![(n, 0)], "neg keeps old");
    assert_eq!(uses_of(&ir.m, new), vec![(a, 1), (a, 0), (s, 0)], "new gained the accepted uses in order");

    ir.m.replace_uses_where(old, new, |_| false);
    assert_eq!(uses_of(&ir.m, old), vec![(n, 0)], "a predicate that rejects everything changes nothing");
    assert_sound(&ir.m, "after a rejecting predicate");
}

#[test]
fn values_know_where_they_are_defined() {
    let mut ir = Ir::new();
    let body = ir.body();
    let (r, inner) = ir.region_op(body, 1);
    let arg = ir.m.block_args(inner)[0];
    let late = ir.m.add_block_arg(inner, ir.i64);
    let n = ir.append(inner, "test.neg", &[late]);
    assert_eq!(ir.m.block_args(inner), &[arg, late], "add_block_arg appends");
    assert_eq!(ir.m.value_def(late), ValueDef::BlockArg { block: inner, index: 1 }, "second argument");
    assert_eq!(ir.m.value_def(ir.val(n)), ValueDef::Result { op: n, index: 0 }, "first result");
    assert_eq!(ir.m.defining_op(arg), OpId::NONE, "block arguments have no defining op");
    assert_eq!(ir.m.defining_op(ir.val(n)), n, "results know their op");
    assert_eq!(ir.m.value_block(late), inner, "an argument is available in its block");
    assert_eq!(ir.m.value_block(ir.val(n)), inner, "a result is available in its op's block");
    assert_eq!(ir.m.parent_op(n), r, "neg's parent is the region op");
    assert_eq!(ir.m.parent_op(r), ir.m.root(), "the region op's parent is the module");
    assert_eq!(ir.m.parent_op(ir.m.root()), OpId::NONE, "the root has no parent");
    assert_eq!(uses_of(&ir.m, late), vec![(n, 0)], "a late argument can be used");
    assert_sound(&ir.m, "after adding a block argument");
}

// ---- erase and replace ---------------------------------------------------------------

#[test]
fn erase_refuses_while_a_result_is_used_and_changes_nothing() {
    let mut ir = Ir::new();
    let body = ir.body();
    let c = ir.konst(body, 1);
    let c_op = ir.m.defining_op(c);
    let n = ir.append(body, "test.neg", &[c]);
    let before = ops_of(&ir.m, body);

    assert_eq!(
        ir.m.erase_op(c_op),
        Err(EraseError::ResultInUse { value: c, user: n }),
        "the const is still used by neg"
    );
    assert_sound(&ir.m, "after a refused erase");
    assert_eq!(ops_of(&ir.m, body), before, "the block is unchanged");
    assert!(!ir.m.is_erased(c_op), "the const is not marked erased");
    assert_eq!(uses_of(&ir.m, c), vec![(n, 0)], "the use is still there");

    assert_eq!(ir.m.erase_op(n), Ok(()), "neg has no users");
    assert_sound(&ir.m, "after erasing the user");
    assert!(!ir.m.has_uses(c), "erasing the user removed its use");
    assert_eq!(ir.m.erase_op(c_op), Ok(()), "the const is unused now");
    assert_sound(&ir.m, "after erasing the const");
    assert!(ops_of(&ir.m, body).is_empty(), "both ops are gone from the block");
    assert!(ir.m.is_erased(c_op) && ir.m.is_erased(n), "both are marked erased");
    assert_eq!(ir.m.op_block(n), BlockId::NONE, "erased ops have no block");
}

#[test]
fn erase_of_an_op_that_uses_a_value_twice_removes_both_uses() {
    let mut ir = Ir::new();
    let body = ir.body();
    let c = ir.konst(body, 1);
    let first = ir.append(body, "test.neg", &[c]);
    let a = ir.append(body, "test.add", &[c, c]);
    let last = ir.append(body, "test.neg", &[c]);
    assert_eq!(ir.m.erase_op(a), Ok(()), "add is unused");
    assert_sound(&ir.m, "after erasing add");
    assert_eq!(uses_of(&ir.m, c), vec![(first, 0), (last, 0)], "both of add's uses are gone, the rest stay");
    assert_eq!(ops_of(&ir.m, body), vec![ir.m.defining_op(c), first, last], "add is unlinked from the block");
}

#[test]
fn erase_of_an_op_with_regions_removes_nested_ops_and_uses() {
    let mut ir = Ir::new();
    let body = ir.body();
    let outer = ir.konst(body, 1);
    let (r, inner) = ir.region_op(body, 1);
    let arg = ir.m.block_args(inner)[0];
    let n = ir.append(inner, "test.neg", &[outer]);
    let (nested, deeper) = ir.region_op(inner, 0);
    let a = ir.append(deeper, "test.add", &[ir.val(n), arg]);
    let s = ir.append(deeper, "test.effect", &[ir.val(a), outer]);
    let keep = ir.append(body, "test.effect", &[outer]);
    assert_eq!(ir.m.count_ops(), 8, "root, const, region, neg, nested region, add, sink, sink");

    assert_eq!(ir.m.erase_op(r), Ok(()), "nothing outside the region op uses its nested results");
    assert_sound(&ir.m, "after erasing the region op");
    assert_eq!(uses_of(&ir.m, outer), vec![(keep, 0)], "uses from inside the erased op are gone");
    assert!(!ir.m.has_uses(arg), "the region's block argument has no uses left");
    for op in [r, n, nested, a, s] {
        assert!(ir.m.is_erased(op), "{op} nested in the erased op is marked erased");
    }
    let walked: Vec<OpId> = ir.m.walk_preorder(ir.m.root()).collect();
    assert_eq!(walked, vec![ir.m.root(), ir.m.defining_op(outer), keep], "walks skip erased ops");
    assert_eq!(ir.m.count_ops(), 3, "count_ops skips erased ops");
}

#[test]
fn erase_refuses_when_a_nested_result_is_used_outside() {
    // Not valid SSA (an outer op sees a nested value), but the erase check must
    // still protect the use lists.
    let mut ir = Ir::new();
    let body = ir.body();
    let (r, inner) = ir.region_op(body, 0);
    let c = ir.konst(inner, 3);
    let user = ir.append(body, "test.effect", &[c]);
    assert_eq!(
        ir.m.erase_op(r),
        Err(EraseError::ResultInUse { value: c, user }),
        "a nested result is used by an op outside"
    );
    assert_sound(&ir.m, "after the refused erase");
    assert!(!ir.m.is_erased(r) && !ir.m.is_erased(ir.m.defining_op(c)), "nothing was marked erased");
    assert_eq!(ops_of(&ir.m, body), vec![r, user], "the region op is still in the block");
}

#[test]
fn erase_of_a_detached_op_removes_its_uses() {
    let mut ir = Ir::new();
    let c = ir.konst(ir.body(), 5);
    let loose = ir.make("test.neg", &[c]);
    assert_eq!(uses_of(&ir.m, c), vec![(loose, 0)], "detached ops own uses too");
    assert_eq!(ir.m.erase_op(loose), Ok(()), "a detached unused op can be erased");
    assert_sound(&ir.m, "after erasing a detached op");
    assert!(!ir.m.has_uses(c), "its use is gone");
}

#[test]
fn module_replace_op_rewires_results_then_erases() {
    let mut ir = Ir::new();
    let body = ir.body();
    let x = ir.konst(body, 1);
    let n = ir.append(body, "test.neg", &[x]);
    let s = ir.append(body, "test.effect", &[ir.val(n), ir.val(n)]);
    assert_eq!(ir.m.replace_op(n, &[x]), Ok(()), "neg's results can all be replaced");
    assert_sound(&ir.m, "after replace_op");
    assert!(ir.m.is_erased(n), "neg is erased");
    assert_eq!(uses_of(&ir.m, x), vec![(s, 0), (s, 1)], "neg's own use of x is gone; the sink's moved to x");
    assert_eq!(ops_of(&ir.m, body), vec![ir.m.defining_op(x), s], "neg left the block");
}

// ---- placement ---------------------------------------------------------------------

#[test]
fn insert_before_after_and_at_end_keep_links_right() {
    let mut ir = Ir::new();
    let body = ir.body();
    let b = ir.append(body, "test.effect", &[]);
    let a = ir.make("test.effect", &[]);
    ir.m.insert_op_before(b, a);
    assert_sound(&ir.m, "after inserting before the first op");
    let d = ir.make("test.effect", &[]);
    ir.m.insert_op_after(b, d);
    assert_sound(&ir.m, "after inserting after the last op");
    let c = ir.make("test.effect", &[]);
    ir.m.insert_op_after(b, c);
    assert_sound(&ir.m, "after inserting in the middle (after)");
    let bc = ir.make("test.effect", &[]);
    ir.m.insert_op_before(c, bc);
    assert_sound(&ir.m, "after inserting in the middle (before)");
    let e = ir.append(body, "test.effect", &[]);
    assert_sound(&ir.m, "after appending");
    assert_eq!(ops_of(&ir.m, body), vec![a, b, bc, c, d, e], "block order");
    assert_eq!((ir.m.first_op(body), ir.m.last_op(body)), (a, e), "first and last");
    assert_eq!((ir.m.prev_op(a), ir.m.next_op(e)), (OpId::NONE, OpId::NONE), "ends have no neighbours");
    assert_eq!((ir.m.prev_op(bc), ir.m.next_op(bc)), (b, c), "a middle op knows both neighbours");
}

#[test]
fn detach_unlinks_first_middle_last_and_only_ops() {
    let mut ir = Ir::new();
    let body = ir.body();
    let ops: Vec<OpId> = (0..4).map(|_| ir.append(body, "test.effect", &[])).collect();
    let [o0, o1, o2, o3] = ops[..] else { unreachable!("four ops were made") };

    ir.m.detach_op(o1);
    assert_sound(&ir.m, "after detaching a middle op");
    assert_eq!(ops_of(&ir.m, body), vec![o0, o2, o3], "middle op gone");
    assert_eq!(
        (ir.m.op_block(o1), ir.m.prev_op(o1), ir.m.next_op(o1)),
        (BlockId::NONE, OpId::NONE, OpId::NONE),
        "a detached op has no block and no neighbours"
    );
    assert!(!ir.m.is_erased(o1), "detaching is not erasing");
    ir.m.detach_op(o0);
    assert_sound(&ir.m, "after detaching the first op");
    assert_eq!(ops_of(&ir.m, body), vec![o2, o3], "first op gone");
    ir.m.detach_op(o3);
    assert_sound(&ir.m, "after detaching the last op");
    assert_eq!(ops_of(&ir.m, body), vec![o2], "last op gone");
    ir.m.detach_op(o2);
    assert_sound(&ir.m, "after detaching the only op");
    assert!(ops_of(&ir.m, body).is_empty(), "block empty");
    assert_eq!(
        (ir.m.first_op(body), ir.m.last_op(body)),
        (OpId::NONE, OpId::NONE),
        "empty block has no ends"
    );
    ir.m.detach_op(o2);
    assert_sound(&ir.m, "after detaching a detached op");

    ir.m.append_op(body, o3);
    ir.m.append_op(body, o0);
    assert_eq!(ops_of(&ir.m, body), vec![o3, o0], "detached ops can be placed again");
    assert_sound(&ir.m, "after re-placing detached ops");
}

#[test]
fn detach_keeps_the_ops_uses() {
    let mut ir = Ir::new();
    let body = ir.body();
    let c = ir.konst(body, 1);
    let n = ir.append(body, "test.neg", &[c]);
    let s = ir.append(body, "test.effect", &[ir.val(n)]);
    ir.m.detach_op(n);
    assert_sound(&ir.m, "after detaching a used op");
    assert_eq!(uses_of(&ir.m, c), vec![(n, 0)], "the detached op still uses c");
    assert_eq!(uses_of(&ir.m, ir.val(n)), vec![(s, 0)], "and is still used by the sink");
}

#[test]
fn move_within_a_block_across_blocks_and_from_detached() {
    let mut ir = Ir::new();
    let body = ir.body();
    let ops: Vec<OpId> = (0..4).map(|_| ir.append(body, "test.effect", &[])).collect();
    let [o0, o1, o2, o3] = ops[..] else { unreachable!("four ops were made") };

    ir.m.move_op_before(o3, o0);
    assert_sound(&ir.m, "after moving the last op to the front");
    assert_eq!(ops_of(&ir.m, body), vec![o3, o0, o1, o2], "o3 moved to the front");
    ir.m.move_op_after(o3, o2);
    assert_sound(&ir.m, "after moving the first op to the back");
    assert_eq!(ops_of(&ir.m, body), vec![o0, o1, o2, o3], "o3 moved back");
    ir.m.move_op_after(o1, o0);
    assert_sound(&ir.m, "after moving an op after its own predecessor");
    assert_eq!(ops_of(&ir.m, body), vec![o0, o1, o2, o3], "moving next to its own neighbour changes nothing");
    ir.m.move_op_before(o1, o2);
    assert_sound(&ir.m, "after moving an op before its own successor");
    assert_eq!(ops_of(&ir.m, body), vec![o0, o1, o2, o3], "still unchanged");
    ir.m.move_op_to_end(o0, body);
    assert_sound(&ir.m, "after moving the first op to the end");
    assert_eq!(ops_of(&ir.m, body), vec![o1, o2, o3, o0], "o0 at the end");
    ir.m.move_op_to_end(o0, body);
    assert_eq!(ops_of(&ir.m, body), vec![o1, o2, o3, o0], "moving the last op to the end changes nothing");

    let (r, inner) = ir.region_op(body, 0);
    ir.m.move_op_to_end(o2, inner);
    assert_sound(&ir.m, "after moving into an empty nested block");
    assert_eq!(ops_of(&ir.m, inner), vec![o2], "o2 is in the nested block");
    assert_eq!(ir.m.parent_op(o2), r, "o2's parent is the region op");
    ir.m.move_op_before(o1, o2);
    ir.m.move_op_after(o3, o2);
    assert_sound(&ir.m, "after moving two more ops into the nested block");
    assert_eq!(ops_of(&ir.m, inner), vec![o1, o2, o3], "nested order");
    assert_eq!(ops_of(&ir.m, body), vec![o0, r], "outer order");

    let loose = ir.make("test.effect", &[]);
    ir.m.move_op_before(loose, o0);
    assert_sound(&ir.m, "after moving a detached op");
    assert_eq!(ops_of(&ir.m, body), vec![loose, o0, r], "a detached op can be moved into place");
}

#[test]
fn blocks_of_a_region_are_kept_in_order() {
    let mut ir = Ir::new();
    let m = ir.make_with("test.multi", &[], &[], 2);
    ir.m.append_op(ir.m.body(), m);
    let r0 = ir.m.region(m, 0);
    let r1 = ir.m.region(m, 1);
    let b0 = ir.m.append_block(r0, &[]);
    let b1 = ir.m.append_block(r0, &[ir.i64, ir.i64]);
    let b2 = ir.m.append_block(r0, &[]);
    assert_eq!(ir.m.blocks(r0).collect::<Vec<_>>(), vec![b0, b1, b2], "blocks in append order");
    assert_eq!(ir.m.first_block(r0), b0, "first block");
    assert_eq!(ir.m.first_block(r1), BlockId::NONE, "an empty region has no first block");
    assert_eq!(ir.m.blocks(r1).count(), 0, "an empty region has no blocks");
    assert_eq!(ir.m.block_args(b1).len(), 2, "b1 has two arguments");
    assert_eq!(ir.m.regions(m).collect::<Vec<_>>(), vec![r0, r1], "regions in order");
    assert_sound(&ir.m, "after building blocks");
}

// ---- clone -----------------------------------------------------------------------------

/// A `test.region` with one result, whose block has argument `a` and holds
/// `n = neg(a)`, `s = add(n, outer)`, a nested `test.region` whose block has
/// argument `b` and holds `sink(a, b, s, outer)`, and `sink(s)`.
struct CloneFixture {
    ir: Ir,
    outer: ValueId,
    op: OpId,
    block: BlockId,
    arg: ValueId,
    nested_block: BlockId,
}

impl CloneFixture {
    pub(super) fn new() -> CloneFixture {
        let mut ir = Ir::new();
        let body = ir.body();
        let outer = ir.konst(body, 10);
        let i64 = ir.i64;
        let op = ir.make_with("test.region", &[], &[i64], 1);
        ir.m.append_op(body, op);
        let block = ir.m.append_block(ir.m.region(op, 0), &[i64]);
        let arg = ir.m.block_args(block)[0];
        let n = ir.append(block, "test.neg", &[arg]);
        let s = ir.append(block, "test.add", &[ir.val(n), outer]);
        let (_, nested_block) = ir.region_op(block, 1);
        let b = ir.m.block_args(nested_block)[0];
        ir.append(nested_block, "test.effect", &[arg, b, ir.val(s), outer]);
        ir.append(block, "test.effect", &[ir.val(s)]);
        assert_sound(&ir.m, "after building the clone fixture");
        CloneFixture { ir, outer, op, block, arg, nested_block }
    }

    /// Names and operands of every op nested in `op`, in pre-order, with values
    /// spelled relative to that op: `arg0`, `inner0` (nested block argument),
    /// `opN` (result of the N-th op in pre-order) or `outside` for anything else.
    pub(super) fn shape(&self, op: OpId) -> Vec<String> {
        let m = &self.ir.m;
        let ops: Vec<OpId> = m.walk_preorder(op).collect();
        let entry = m.first_block(m.region(op, 0));
        let spell_value = |v: ValueId| match m.value_def(v) {
            ValueDef::BlockArg { block, index } if block == entry => format!("arg{index}"),
            ValueDef::BlockArg { block, index } if ops.contains(&m.region_op(m.block_region(block))) => {
                format!("inner{index}")
            }
            ValueDef::Result { op: d, .. } => match ops.iter().position(|&o| o == d) {
                Some(i) => format!("op{i}"),
                None => "outside".to_string(),
            },
            ValueDef::BlockArg { .. } => "outside".to_string(),
        };
        ops.iter()
            .map(|&o| {
                let operands: Vec<String> = m.operands(o).map(spell_value).collect();
                format!("{}({})", self.ir.name_of(o), operands.join(", "))
            })
            .collect()
    }
}

#[test]
fn clone_op_copies_regions_and_remaps_inner_values() {
    let mut fx = CloneFixture::new();
    let original_shape = fx.shape(fx.op);
    let original_ops: Vec<OpId> = fx.ir.m.walk_preorder(fx.op).collect();
    let arg_uses_before = uses_of(&fx.ir.m, fx.arg);

    let mut mapping = FxHashMap::default();
    let clone = fx.ir.m.clone_op(fx.op, &mut mapping);
    assert_eq!(fx.ir.m.op_block(clone), BlockId::NONE, "the clone starts detached");
    assert_tree_links(&fx.ir.m, clone, "in the clone");
    assert_sound(&fx.ir.m, "after cloning");
    assert_eq!(fx.shape(clone), original_shape, "the clone has the same ops, wired the same way");
    assert_eq!(
        fx.shape(clone),
        vec![
            "test.region()",
            "test.neg(arg0)",
            "test.add(op1, outside)",
            "test.region()",
            "test.effect(arg0, inner0, op2, outside)",
            "test.effect(op2)",
        ],
        "the clone's shape spelled out"
    );
    let cloned_ops: Vec<OpId> = fx.ir.m.walk_preorder(clone).collect();
    assert!(cloned_ops.iter().all(|o| !original_ops.contains(o)), "every cloned op is a new op");

    let new_block = fx.ir.m.first_block(fx.ir.m.region(clone, 0));
    let new_arg = fx.ir.m.block_args(new_block)[0];
    assert_ne!(new_arg, fx.arg, "the clone has its own block argument");
    assert_eq!(mapping.get(&fx.arg), Some(&new_arg), "the mapping records old -> new block arguments");
    assert_eq!(
        mapping.get(&fx.ir.m.result(fx.op, 0)),
        Some(&fx.ir.m.result(clone, 0)),
        "the mapping records old -> new results of the root"
    );
    let new_nested_arg = mapping[&fx.ir.m.block_args(fx.nested_block)[0]];
    assert_eq!(
        fx.ir.m.value_def(new_nested_arg),
        ValueDef::BlockArg { block: fx.ir.m.op_block(cloned_ops[4]), index: 0 },
        "the nested block argument maps to the clone's nested block argument"
    );
    let outer_users: Vec<OpId> = fx.ir.m.uses(fx.outer).map(|u| u.op).collect();
    assert!(
        outer_users.contains(&cloned_ops[2]) && outer_users.contains(&cloned_ops[4]),
        "the clone uses the outer value directly when the mapping does not name it"
    );
    assert_eq!(uses_of(&fx.ir.m, fx.arg), arg_uses_before, "the original's block argument keeps its uses");
    assert_eq!(fx.ir.m.walk_preorder(fx.op).collect::<Vec<_>>(), original_ops, "the original is untouched");
    assert_eq!(ops_of(&fx.ir.m, fx.block).len(), 4, "the original block still has four ops");

    fx.ir.m.append_op(fx.ir.m.body(), clone);
    assert_sound(&fx.ir.m, "after placing the clone");
}

#[test]
fn clone_op_uses_the_mapping_for_outside_values() {
    let mut fx = CloneFixture::new();
    let replacement = fx.ir.konst(fx.ir.body(), 20);
    let outer_uses_before = uses_of(&fx.ir.m, fx.outer);
    let mut mapping = FxHashMap::default();
    mapping.insert(fx.outer, replacement);
    let clone = fx.ir.m.clone_op(fx.op, &mut mapping);
    assert_sound(&fx.ir.m, "after cloning with a mapping");
    assert_eq!(
        uses_of(&fx.ir.m, fx.outer),
        outer_uses_before,
        "the clone does not use the mapped-away value"
    );
    let cloned_ops: Vec<OpId> = fx.ir.m.walk_preorder(clone).collect();
    assert_eq!(
        uses_of(&fx.ir.m, replacement),
        vec![(cloned_ops[2], 1), (cloned_ops[4], 3)],
        "the clone's add and nested sink use the replacement"
    );
}

#[test]
fn clone_op_resolves_forward_references_inside_the_clone() {
    // A graph-like block where `u` uses the result of `v`, defined after it.
    let mut ir = Ir::new();
    let (r, inner) = ir.region_op(ir.body(), 0);
    let u = ir.append(inner, "test.effect", &[]);
    let v = ir.make_const(4);
    ir.m.append_op(inner, v);
    ir.m.set_operands(u, &[ir.val(v)]);
    assert_sound(&ir.m, "after building a forward reference");

    let mut mapping = FxHashMap::default();
    let clone = ir.m.clone_op(r, &mut mapping);
    assert_sound(&ir.m, "after cloning a forward reference");
    let cloned = ops_of(&ir.m, ir.m.first_block(ir.m.region(clone, 0)));
    assert_eq!(
        ir.m.operand(cloned[0], 0),
        ir.val(cloned[1]),
        "the cloned user refers to the cloned definition, not the original"
    );
    assert_eq!(uses_of(&ir.m, ir.val(v)), vec![(u, 0)], "the original definition keeps only its own use");
}

#[test]

fn clone_op_twice_with_one_mapping_resolves_forward_references_to_the_newest_clone() {
    // Reusing one mapping across clones (unrolling, duplication) is what the
    // in/out mapping is for. At the second clone the mapping still holds the
    // first clone's `v -> v1`, so `u2` is created using `v1`; the fix-up pass
    // then looks up `v1` (not the original `v`) and finds nothing.
    let mut ir = Ir::new();
    let (r, inner) = ir.region_op(ir.body(), 0);
    let u = ir.append(inner, "test.effect", &[]);
    let v = ir.make_const(4);
    ir.m.append_op(inner, v);
    ir.m.set_operands(u, &[ir.val(v)]);

    let mut mapping = FxHashMap::default();
    let first = ir.m.clone_op(r, &mut mapping);
    let second = ir.m.clone_op(r, &mut mapping);
    assert_sound(&ir.m, "after cloning twice");
    for (clone, which) in [(first, "first"), (second, "second")] {
        let cloned = ops_of(&ir.m, ir.m.first_block(ir.m.region(clone, 0)));
        assert_eq!(
            ir.m.operand(cloned[0], 0),
            ir.val(cloned[1]),
            "the {which} clone's user must refer to its own cloned definition"
        );
    }
}

#[test]

fn clone_op_looks_each_operand_up_in_the_mapping_once() {
    // The doc promises one lookup per outside operand. With `x -> y` and
    // `y -> z` in the mapping, an op using `x` must be cloned using `y`.
    let mut ir = Ir::new();
    let body = ir.body();
    let x = ir.konst(body, 1);
    let y = ir.konst(body, 2);
    let z = ir.konst(body, 3);
    let n = ir.append(body, "test.neg", &[x]);
    let mut mapping = FxHashMap::default();
    mapping.insert(x, y);
    mapping.insert(y, z);
    let clone = ir.m.clone_op(n, &mut mapping);
    assert_sound(&ir.m, "after cloning with a chained mapping");
    assert_eq!(ir.m.operand(clone, 0), y, "x maps to y; y's own mapping must not be applied on top");
}

// ---- walkers ----------------------------------------------------------------------

/// Labels for ops, so walk orders compare as readable strings.
fn spell(labels: &[(OpId, &str)], ops: impl Iterator<Item = OpId>) -> Vec<String> {
    ops.map(|op| match labels.iter().find(|(o, _)| *o == op) {
        Some((_, l)) => l.to_string(),
        None => format!("unlabelled {op}"),
    })
    .collect()
}

/// ```text
/// module {                      (root)
///   A
///   W (3 regions) {
///     region 0: ^b0 (empty)  ^b1 { B  C { D }  E }  ^b2 (empty)  ^b3 { F }
///     region 1: no blocks
///     region 2: ^b { G (2 regions: one empty block; no blocks)  H }
///   }
///   Z
/// }
/// ```
struct WalkFixture {
    ir: Ir,
    labels: Vec<(OpId, &'static str)>,
}

impl WalkFixture {
    pub(super) fn new() -> WalkFixture {
        let mut ir = Ir::new();
        let body = ir.body();
        let mut labels = vec![(ir.m.root(), "root")];
        let mut leaf = |ir: &mut Ir, block: BlockId, label: &'static str| {
            let op = ir.append(block, "test.effect", &[]);
            labels.push((op, label));
            op
        };
        leaf(&mut ir, body, "A");
        let w = ir.make_with("test.multi", &[], &[], 3);
        ir.m.append_op(body, w);
        leaf(&mut ir, body, "Z");
        let (r0, r2) = (ir.m.region(w, 0), ir.m.region(w, 2));
        ir.m.append_block(r0, &[]);
        let b1 = ir.m.append_block(r0, &[]);
        ir.m.append_block(r0, &[]);
        let b3 = ir.m.append_block(r0, &[]);
        leaf(&mut ir, b1, "B");
        let (c, c_block) = ir.region_op(b1, 0);
        leaf(&mut ir, c_block, "D");
        leaf(&mut ir, b1, "E");
        leaf(&mut ir, b3, "F");
        let r2_block = ir.m.append_block(r2, &[]);
        let g = ir.make_with("test.multi", &[], &[], 2);
        ir.m.append_op(r2_block, g);
        ir.m.append_block(ir.m.region(g, 0), &[]);
        leaf(&mut ir, r2_block, "H");
        labels.extend([(w, "W"), (c, "C"), (g, "G")]);
        assert_sound(&ir.m, "after building the walk fixture");
        WalkFixture { ir, labels }
    }

    pub(super) fn op(&self, label: &str) -> OpId {
        self.labels.iter().find(|(_, l)| *l == label).map(|(o, _)| *o).expect("a label of the fixture")
    }

    pub(super) fn pre(&self, label: &str) -> Vec<String> {
        spell(&self.labels, self.ir.m.walk_preorder(self.op(label)))
    }

    pub(super) fn post(&self, label: &str) -> Vec<String> {
        spell(&self.labels, self.ir.m.walk_postorder(self.op(label)))
    }
}

#[test]
fn preorder_visits_parents_first_in_program_order() {
    let fx = WalkFixture::new();
    assert_eq!(
        fx.pre("root"),
        ["root", "A", "W", "B", "C", "D", "E", "F", "G", "H", "Z"],
        "pre-order of the whole module, skipping empty blocks and regions"
    );
    assert_eq!(fx.pre("W"), ["W", "B", "C", "D", "E", "F", "G", "H"], "a walk stays inside its root");
    assert_eq!(fx.pre("C"), ["C", "D"], "a one-op nest");
    assert_eq!(fx.pre("G"), ["G"], "an op with only empty regions");
    assert_eq!(fx.pre("E"), ["E"], "a leaf");
}

#[test]
fn postorder_visits_children_first_in_program_order() {
    let fx = WalkFixture::new();
    assert_eq!(
        fx.post("root"),
        ["A", "B", "D", "C", "E", "F", "G", "H", "W", "Z", "root"],
        "post-order of the whole module"
    );
    assert_eq!(fx.post("W"), ["B", "D", "C", "E", "F", "G", "H", "W"], "a walk stays inside its root");
    assert_eq!(fx.post("G"), ["G"], "an op with only empty regions");
    assert_eq!(fx.post("D"), ["D"], "a leaf");
}

#[test]
fn next_in_parent_skips_empty_blocks_and_regions_but_never_leaves_the_parent() {
    let fx = WalkFixture::new();
    let m = &fx.ir.m;
    let next = |label: &str| spell(&fx.labels, m.next_in_parent(fx.op(label)).expand().into_iter());
    assert_eq!(next("A"), ["W"], "next op in the same block");
    assert_eq!(next("E"), ["F"], "skips the empty block ^b2");
    assert_eq!(next("F"), ["G"], "skips the empty region 1");
    assert!(next("H").is_empty(), "the last op of the last region has nothing after it in W");
    assert!(next("D").is_empty(), "the only op of C's region has nothing after it in C");
    assert!(next("Z").is_empty(), "the last top-level op");
    assert_eq!(m.first_nested_op(fx.op("W")), fx.op("B"), "first nested op skips the empty first block");
    assert_eq!(m.first_nested_op(fx.op("G")), OpId::NONE, "G holds no ops");
    assert_eq!(m.ancestor_in_block(m.body(), fx.op("D")), fx.op("W"), "D lies inside W");
}

#[test]
fn walks_see_edits_made_between_walks() {
    let mut fx = WalkFixture::new();
    let (d, h, w) = (fx.op("D"), fx.op("H"), fx.op("W"));
    fx.ir.m.move_op_after(d, h);
    assert_eq!(fx.pre("W"), ["W", "B", "C", "E", "F", "G", "H", "D"], "D moved to the end of region 2");
    assert_eq!(
        fx.post("root"),
        ["A", "B", "C", "E", "F", "G", "H", "D", "W", "Z", "root"],
        "and in post-order"
    );
    assert_eq!(fx.ir.m.erase_op(w), Ok(()), "nothing uses W");
    assert_eq!(fx.pre("root"), ["root", "A", "Z"], "an erased subtree is not walked");
    assert_sound(&fx.ir.m, "after erasing W");
}

#[test]
fn walks_of_a_100000_deep_nest_use_no_recursion() {
    const DEPTH: usize = 100_000;
    let mut ir = Ir::new();
    let mut block = ir.body();
    let mut nest = Vec::with_capacity(DEPTH);
    for _ in 0..DEPTH {
        let (op, inner) = ir.region_op(block, 0);
        nest.push(op);
        block = inner;
    }
    let (outermost, innermost) = (nest[0], nest[DEPTH - 1]);
    let root = ir.m.root();

    let pre: Vec<OpId> = ir.m.walk_preorder(root).collect();
    assert_eq!(pre.len(), DEPTH + 1, "pre-order sees the root and every nested op");
    assert_eq!(pre[1..], nest[..], "pre-order goes outermost to innermost");
    let post: Vec<OpId> = ir.m.walk_postorder(root).collect();
    assert_eq!(post.len(), DEPTH + 1, "post-order sees the root and every nested op");
    assert_eq!((post[0], post[DEPTH]), (innermost, root), "post-order starts innermost and ends at the root");
    assert!(post.iter().rev().eq(pre.iter()), "for a chain, post-order is pre-order reversed");
    assert_eq!(ir.m.walk_preorder(nest[DEPTH / 2]).count(), DEPTH - DEPTH / 2, "a walk from the middle");
    assert_eq!(ir.m.count_ops(), DEPTH + 1, "count_ops walks the whole nest");
    assert_eq!(ir.m.ancestor_in_block(ir.m.body(), innermost), outermost, "ancestor lookup climbs the nest");

    let mut mapping = FxHashMap::default();
    let clone = ir.m.clone_op(outermost, &mut mapping);
    assert_eq!(ir.m.walk_postorder(clone).count(), DEPTH, "the deep nest clones without recursion");
    assert_eq!(ir.m.erase_op(clone), Ok(()), "the detached clone erases without recursion");
    assert_eq!(ir.m.erase_op(outermost), Ok(()), "the nest erases without recursion");
    assert_eq!(ir.m.count_ops(), 1, "only the root is left");
    assert!(ir.m.is_erased(innermost), "the innermost op was erased with the nest");
    assert!(ir.m.check_use_lists().is_ok(), "use lists stay consistent");
}
