//! Walkers over nested ops: pre-order (parents before children) and post-order
//! (children before parents).
//!
//! Both use an explicit stack whose depth is the nesting depth, never the call
//! stack, so 10,000-deep region nests walk fine. They borrow the module; to edit
//! while walking, collect first (`let ops: Vec<_> = m.walk_preorder(root).collect()`).

use crate::entity::{BlockId, OpId};
use crate::module::Module;

impl Module {
    /// `op` and every op nested in it, parents first, in program order.
    pub fn walk_preorder(&self, op: OpId) -> PreOrder<'_> {
        PreOrder { module: self, root: op, stack: vec![op] }
    }

    /// `op` and every op nested in it, children first (so `op` comes last).
    pub fn walk_postorder(&self, op: OpId) -> PostOrder<'_> {
        PostOrder { module: self, root: op, stack: vec![(op, false)] }
    }

    /// The first op nested in `op` (in its first non-empty block), or `NONE`.
    pub fn first_nested_op(&self, op: OpId) -> OpId {
        for r in self.regions(op) {
            for b in self.blocks(r) {
                let first = self.first_op(b);
                if first.is_some() {
                    return first;
                }
            }
        }
        OpId::NONE
    }

    /// The op after `op` in program order within `op`'s parent: the next op of the
    /// block, else the first op of a later non-empty block or region of the parent.
    pub fn next_in_parent(&self, op: OpId) -> OpId {
        let next = self.next_op(op);
        if next.is_some() {
            return next;
        }
        let block = self.op_block(op);
        if block.is_none() {
            return OpId::NONE;
        }
        let mut b = self.blocks[block].next;
        while b.is_some() {
            let first = self.first_op(b);
            if first.is_some() {
                return first;
            }
            b = self.blocks[b].next;
        }
        let region = self.block_region(block);
        let parent = self.region_op(region);
        let mut after = false;
        for r in self.regions(parent) {
            if after {
                for b in self.blocks(r) {
                    let first = self.first_op(b);
                    if first.is_some() {
                        return first;
                    }
                }
            }
            after |= r == region;
        }
        OpId::NONE
    }

    /// The block holding `op`'s parent op chain up to (not including) `ancestor_block`:
    /// the op in `ancestor_block` that contains `op`, or `NONE` if none does.
    pub fn ancestor_in_block(&self, ancestor_block: BlockId, mut op: OpId) -> OpId {
        loop {
            let b = self.op_block(op);
            if b == ancestor_block {
                return op;
            }
            if b.is_none() {
                return OpId::NONE;
            }
            op = self.parent_op(op);
            if op.is_none() {
                return OpId::NONE;
            }
        }
    }
}

/// Pre-order walk; see [`Module::walk_preorder`].
pub struct PreOrder<'a> {
    module: &'a Module,
    root: OpId,
    stack: Vec<OpId>,
}

impl Iterator for PreOrder<'_> {
    type Item = OpId;
    fn next(&mut self) -> Option<OpId> {
        let op = self.stack.pop()?;
        if op != self.root {
            let sibling = self.module.next_in_parent(op);
            if sibling.is_some() {
                self.stack.push(sibling);
            }
        }
        let child = self.module.first_nested_op(op);
        if child.is_some() {
            self.stack.push(child);
        }
        Some(op)
    }
}

/// Post-order walk; see [`Module::walk_postorder`].
pub struct PostOrder<'a> {
    module: &'a Module,
    root: OpId,
    stack: Vec<(OpId, bool)>,
}

impl Iterator for PostOrder<'_> {
    type Item = OpId;
    fn next(&mut self) -> Option<OpId> {
        loop {
            let (op, expanded) = self.stack.pop()?;
            if expanded {
                if op != self.root {
                    let sibling = self.module.next_in_parent(op);
                    if sibling.is_some() {
                        self.stack.push((sibling, false));
                    }
                }
                return Some(op);
            }
            self.stack.push((op, true));
            let child = self.module.first_nested_op(op);
            if child.is_some() {
                self.stack.push((child, false));
            }
        }
    }
}
