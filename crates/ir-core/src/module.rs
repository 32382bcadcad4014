//! The IR body: arenas of ops, values, blocks, regions and operand slots, and the
//! edits that keep them consistent.
//!
//! Invariants kept by every method here:
//! - ops in a block form a doubly linked list (`prev`/`next` ids, `first`/`last`
//!   on the block), so insert, erase and move are O(1) and never touch operands;
//! - each operand slot ([`UseId`]) is a node of its value's use list, a doubly
//!   linked list in operand-creation order whose head's `prev` points at its tail
//!   (append is O(1) without a tail field); only this module edits operands, so
//!   the lists are always right and replace-all-uses is O(uses);
//! - an op's results are consecutive values, allocated with the op; its regions
//!   are consecutive regions, allocated with the op; its operands are consecutive
//!   slots (changing their number moves them to fresh slots);
//! - erased entities keep their arena slot (ids are never reused) and are marked.

use crate::attributes::Attribute;
use crate::context::{Context, OpName};
use crate::entity::{Arena, BlockId, EntityId, OpId, RegionId, UseId, ValueId};
use crate::location::{Location, SrcPos};
use crate::types::Type;
use smallvec::SmallVec;

const BLOCK_ARG_FLAG: u32 = 1 << 31;
const OP_ERASED: u16 = 1;

/// One operation.
#[derive(Clone, Debug)]
pub(crate) struct Operation {
    pub(crate) name: OpName,
    pub(crate) attrs: Attribute,
    pub(crate) loc: Location,
    pub(crate) pos: SrcPos,
    pub(crate) parent: BlockId,
    pub(crate) prev: OpId,
    pub(crate) next: OpId,
    pub(crate) operands_start: u32,
    pub(crate) num_operands: u32,
    pub(crate) results_start: u32,
    pub(crate) num_results: u32,
    pub(crate) regions_start: u32,
    pub(crate) num_regions: u16,
    pub(crate) flags: u16,
}

/// One SSA value.
#[derive(Clone, Debug)]
pub(crate) struct ValueData {
    pub(crate) ty: Type,
    /// The defining op (for results) or block (for arguments).
    pub(crate) owner: u32,
    /// Result or argument number; the high bit marks a block argument.
    pub(crate) index: u32,
    pub(crate) first_use: UseId,
}

/// One operand slot, which is also a node of its value's use list.
#[derive(Clone, Debug)]
pub(crate) struct UseData {
    pub(crate) value: ValueId,
    pub(crate) owner: OpId,
    pub(crate) next: UseId,
    pub(crate) prev: UseId,
}

#[derive(Clone, Debug)]
pub(crate) struct BlockData {
    pub(crate) parent: RegionId,
    pub(crate) prev: BlockId,
    pub(crate) next: BlockId,
    pub(crate) first_op: OpId,
    pub(crate) last_op: OpId,
    pub(crate) args: SmallVec<[ValueId; 2]>,
}

#[derive(Clone, Debug)]
pub(crate) struct RegionData {
    pub(crate) parent: OpId,
    pub(crate) first_block: BlockId,
    pub(crate) last_block: BlockId,
}

/// Where a value comes from.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ValueDef {
    /// Result `index` of `op`.
    Result {
        /// The defining op.
        op: OpId,
        /// Result number.
        index: u32,
    },
    /// Argument `index` of `block`.
    BlockArg {
        /// The block.
        block: BlockId,
        /// Argument number.
        index: u32,
    },
}

/// One use of a value: operand `index` of `op`.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Use {
    /// The using op.
    pub op: OpId,
    /// Operand number.
    pub index: u32,
    /// The operand slot.
    pub slot: UseId,
}

/// Everything needed to create an op.
#[derive(Clone, Debug)]
pub struct OperationState {
    /// Op name.
    pub name: OpName,
    /// Operands.
    pub operands: SmallVec<[ValueId; 4]>,
    /// Result types.
    pub result_types: SmallVec<[Type; 2]>,
    /// Attribute dictionary.
    pub attrs: Attribute,
    /// Location.
    pub loc: Location,
    /// Position in the parsed input, if any.
    pub pos: SrcPos,
    /// Number of (initially empty) regions.
    pub num_regions: usize,
}

impl OperationState {
    /// A state with no operands, results, attributes or regions.
    pub fn new(name: OpName) -> OperationState {
        OperationState {
            name,
            operands: SmallVec::new(),
            result_types: SmallVec::new(),
            attrs: Attribute::EMPTY_DICT,
            loc: Location::UNKNOWN,
            pos: SrcPos::NONE,
            num_regions: 0,
        }
    }
    /// Sets the operands.
    pub fn operands(mut self, operands: &[ValueId]) -> Self {
        self.operands = operands.into();
        self
    }
    /// Sets the result types.
    pub fn results(mut self, types: &[Type]) -> Self {
        self.result_types = types.into();
        self
    }
    /// Sets the attribute dictionary.
    pub fn attrs(mut self, attrs: Attribute) -> Self {
        self.attrs = attrs;
        self
    }
    /// Sets the location.
    pub fn loc(mut self, loc: Location) -> Self {
        self.loc = loc;
        self
    }
    /// Sets the number of regions.
    pub fn regions(mut self, n: usize) -> Self {
        self.num_regions = n;
        self
    }
}

/// Why an op could not be erased.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EraseError {
    /// A result still has uses.
    ResultInUse {
        /// The used result.
        value: ValueId,
        /// One of its users.
        user: OpId,
    },
}

impl std::fmt::Display for EraseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EraseError::ResultInUse { value, user } => {
                write!(f, "cannot erase op: its result {value} is still used by {user}")
            }
        }
    }
}

impl std::error::Error for EraseError {}

/// A module: the arenas, and the root `builtin.module` op whose single block holds
/// the top-level ops (functions).
#[derive(Clone)]
pub struct Module {
    pub(crate) ops: Arena<OpId, Operation>,
    pub(crate) values: Arena<ValueId, ValueData>,
    pub(crate) uses: Arena<UseId, UseData>,
    pub(crate) blocks: Arena<BlockId, BlockData>,
    pub(crate) regions: Arena<RegionId, RegionData>,
    root: OpId,
    source_name: Option<std::sync::Arc<str>>,
}

impl Default for Module {
    fn default() -> Self {
        Self::new()
    }
}

impl Module {
    /// An empty module: a `builtin.module` op with one region holding one empty block.
    pub fn new() -> Module {
        let mut m = Module {
            ops: Arena::default(),
            values: Arena::default(),
            uses: Arena::default(),
            blocks: Arena::default(),
            regions: Arena::default(),
            root: OpId::NONE,
            source_name: None,
        };
        let root = m.create_op(OperationState::new(OpName::MODULE).regions(1));
        let region = m.region(root, 0);
        m.append_block(region, &[]);
        m.root = root;
        m
    }

    /// Reserves arena room for about `ops` more ops (parser sizing hint).
    pub fn reserve_ops(&mut self, ops: usize) {
        self.ops.reserve(ops);
        self.values.reserve(ops);
        self.uses.reserve(ops * 2);
    }

    /// The `builtin.module` op.
    #[inline]
    pub fn root(&self) -> OpId {
        self.root
    }

    /// The block holding the module's top-level ops.
    pub fn body(&self) -> BlockId {
        self.regions[self.region(self.root, 0)].first_block
    }

    /// Replaces the root (used by the parser when the input has its own `module`).
    pub(crate) fn set_root(&mut self, root: OpId) {
        self.root = root;
    }

    /// The file the module was parsed from (what op positions refer to).
    pub fn source_name(&self) -> Option<&std::sync::Arc<str>> {
        self.source_name.as_ref()
    }

    /// Sets the file op positions refer to.
    pub fn set_source_name(&mut self, name: Option<std::sync::Arc<str>>) {
        self.source_name = name;
    }

    /// Sets the root's attributes.
    pub fn set_root_attrs(&mut self, attrs: Attribute) {
        self.ops[self.root].attrs = attrs;
    }

    // ---- creation ---------------------------------------------------------

    /// Creates a detached op (not in any block) from `state`.
    pub fn create_op(&mut self, state: OperationState) -> OpId {
        let id = self.ops.next_id();
        let results_start = self.values.len() as u32;
        for (i, &ty) in state.result_types.iter().enumerate() {
            self.values.push(ValueData { ty, owner: id.0, index: i as u32, first_use: UseId::NONE });
        }
        let operands_start = self.uses.len() as u32;
        for &v in &state.operands {
            let slot = self.uses.push(UseData { value: v, owner: id, next: UseId::NONE, prev: UseId::NONE });
            self.link_use(slot);
        }
        let regions_start = self.regions.len() as u32;
        for _ in 0..state.num_regions {
            self.regions.push(RegionData {
                parent: id,
                first_block: BlockId::NONE,
                last_block: BlockId::NONE,
            });
        }
        self.ops.push(Operation {
            name: state.name,
            attrs: state.attrs,
            loc: state.loc,
            pos: state.pos,
            parent: BlockId::NONE,
            prev: OpId::NONE,
            next: OpId::NONE,
            operands_start,
            num_operands: state.operands.len() as u32,
            results_start,
            num_results: state.result_types.len() as u32,
            regions_start,
            num_regions: state.num_regions as u16,
            flags: 0,
        })
    }

    /// Appends a block with arguments of the given types to `region`.
    pub fn append_block(&mut self, region: RegionId, arg_types: &[Type]) -> BlockId {
        let block = self.create_block(arg_types);
        self.link_block_at_end(region, block);
        block
    }

    fn create_block(&mut self, arg_types: &[Type]) -> BlockId {
        let id = self.blocks.next_id();
        let args = arg_types
            .iter()
            .enumerate()
            .map(|(i, &ty)| {
                self.values.push(ValueData {
                    ty,
                    owner: id.0,
                    index: i as u32 | BLOCK_ARG_FLAG,
                    first_use: UseId::NONE,
                })
            })
            .collect();
        self.blocks.push(BlockData {
            parent: RegionId::NONE,
            prev: BlockId::NONE,
            next: BlockId::NONE,
            first_op: OpId::NONE,
            last_op: OpId::NONE,
            args,
        })
    }

    pub(crate) fn unlink_block(&mut self, block: BlockId) {
        let BlockData { parent, prev, next, .. } = self.blocks[block].clone();
        if parent.is_none() {
            return;
        }
        if prev.is_some() {
            self.blocks[prev].next = next;
        } else {
            self.regions[parent].first_block = next;
        }
        if next.is_some() {
            self.blocks[next].prev = prev;
        } else {
            self.regions[parent].last_block = prev;
        }
        let b = &mut self.blocks[block];
        b.parent = RegionId::NONE;
        b.prev = BlockId::NONE;
        b.next = BlockId::NONE;
    }

    pub(crate) fn link_block_at_end(&mut self, region: RegionId, block: BlockId) {
        let last = self.regions[region].last_block;
        self.blocks[block].parent = region;
        self.blocks[block].prev = last;
        self.blocks[block].next = BlockId::NONE;
        if last.is_some() {
            self.blocks[last].next = block;
        } else {
            self.regions[region].first_block = block;
        }
        self.regions[region].last_block = block;
    }

    /// Adds an argument of type `ty` to `block` and returns it.
    pub fn add_block_arg(&mut self, block: BlockId, ty: Type) -> ValueId {
        let index = self.blocks[block].args.len() as u32;
        let v = self.values.push(ValueData {
            ty,
            owner: block.0,
            index: index | BLOCK_ARG_FLAG,
            first_use: UseId::NONE,
        });
        self.blocks[block].args.push(v);
        v
    }

    // ---- placement --------------------------------------------------------

    /// Appends a detached op at the end of `block`.
    pub fn append_op(&mut self, block: BlockId, op: OpId) {
        debug_assert!(self.ops[op].parent.is_none(), "op is already in a block");
        let last = self.blocks[block].last_op;
        self.link_op(block, op, last, OpId::NONE);
    }

    /// Inserts a detached op right before `anchor`.
    pub fn insert_op_before(&mut self, anchor: OpId, op: OpId) {
        debug_assert!(self.ops[op].parent.is_none(), "op is already in a block");
        let block = self.ops[anchor].parent;
        let prev = self.ops[anchor].prev;
        self.link_op(block, op, prev, anchor);
    }

    /// Inserts a detached op right after `anchor`.
    pub fn insert_op_after(&mut self, anchor: OpId, op: OpId) {
        debug_assert!(self.ops[op].parent.is_none(), "op is already in a block");
        let block = self.ops[anchor].parent;
        let next = self.ops[anchor].next;
        self.link_op(block, op, anchor, next);
    }

    fn link_op(&mut self, block: BlockId, op: OpId, prev: OpId, next: OpId) {
        let o = &mut self.ops[op];
        o.parent = block;
        o.prev = prev;
        o.next = next;
        if prev.is_some() {
            self.ops[prev].next = op;
        } else {
            self.blocks[block].first_op = op;
        }
        if next.is_some() {
            self.ops[next].prev = op;
        } else {
            self.blocks[block].last_op = op;
        }
    }

    /// Takes an op out of its block, keeping it (and its uses) alive.
    pub fn detach_op(&mut self, op: OpId) {
        let Operation { parent, prev, next, .. } = self.ops[op];
        if parent.is_none() {
            return;
        }
        if prev.is_some() {
            self.ops[prev].next = next;
        } else {
            self.blocks[parent].first_op = next;
        }
        if next.is_some() {
            self.ops[next].prev = prev;
        } else {
            self.blocks[parent].last_op = prev;
        }
        let o = &mut self.ops[op];
        o.parent = BlockId::NONE;
        o.prev = OpId::NONE;
        o.next = OpId::NONE;
    }

    /// Moves an op (in a block or detached) right before `anchor`.
    pub fn move_op_before(&mut self, op: OpId, anchor: OpId) {
        if op == anchor {
            return;
        }
        self.detach_op(op);
        self.insert_op_before(anchor, op);
    }

    /// Moves an op (in a block or detached) right after `anchor`.
    pub fn move_op_after(&mut self, op: OpId, anchor: OpId) {
        if op == anchor {
            return;
        }
        self.detach_op(op);
        self.insert_op_after(anchor, op);
    }

    /// Moves an op (in a block or detached) to the end of `block`.
    pub fn move_op_to_end(&mut self, op: OpId, block: BlockId) {
        self.detach_op(op);
        self.append_op(block, op);
    }

    // ---- use lists --------------------------------------------------------

    fn link_use(&mut self, slot: UseId) {
        let v = self.uses[slot].value;
        if v.is_none() {
            return;
        }
        let head = self.values[v].first_use;
        if head.is_none() {
            self.values[v].first_use = slot;
            self.uses[slot].prev = slot;
            self.uses[slot].next = UseId::NONE;
        } else {
            let tail = self.uses[head].prev;
            self.uses[tail].next = slot;
            self.uses[slot].prev = tail;
            self.uses[slot].next = UseId::NONE;
            self.uses[head].prev = slot;
        }
    }

    fn unlink_use(&mut self, slot: UseId) {
        let UseData { value, next, prev, .. } = self.uses[slot];
        if value.is_none() {
            return;
        }
        let head = self.values[value].first_use;
        if head == slot {
            self.values[value].first_use = next;
            if next.is_some() {
                self.uses[next].prev = prev; // prev of the old head is the tail
            }
        } else {
            self.uses[prev].next = next;
            if next.is_some() {
                self.uses[next].prev = prev;
            } else {
                self.uses[head].prev = prev; // removed the tail
            }
        }
        let u = &mut self.uses[slot];
        u.next = UseId::NONE;
        u.prev = UseId::NONE;
    }

    /// Sets operand `index` of `op` to `value`.
    pub fn set_operand(&mut self, op: OpId, index: usize, value: ValueId) {
        let slot = self.operand_slot(op, index);
        if self.uses[slot].value == value {
            return;
        }
        self.unlink_use(slot);
        self.uses[slot].value = value;
        self.link_use(slot);
    }

    /// Replaces all operands of `op`.
    pub fn set_operands(&mut self, op: OpId, values: &[ValueId]) {
        let Operation { operands_start, num_operands, .. } = self.ops[op];
        if values.len() == num_operands as usize {
            for (i, &v) in values.iter().enumerate() {
                self.set_operand(op, i, v);
            }
            return;
        }
        for i in 0..num_operands {
            let slot = UseId(operands_start + i);
            self.unlink_use(slot);
            self.uses[slot].value = ValueId::NONE;
        }
        let start = self.uses.len() as u32;
        for &v in values {
            let slot = self.uses.push(UseData { value: v, owner: op, next: UseId::NONE, prev: UseId::NONE });
            self.link_use(slot);
        }
        self.ops[op].operands_start = start;
        self.ops[op].num_operands = values.len() as u32;
    }

    /// Makes every use of `old` a use of `new`. O(uses of `old`).
    pub fn replace_all_uses(&mut self, old: ValueId, new: ValueId) {
        if old == new {
            return;
        }
        let mut slot = self.values[old].first_use;
        while slot.is_some() {
            let next = self.uses[slot].next;
            self.uses[slot].value = new;
            self.uses[slot].next = UseId::NONE;
            self.uses[slot].prev = UseId::NONE;
            self.link_use(slot);
            slot = next;
        }
        self.values[old].first_use = UseId::NONE;
    }

    /// Makes every use of `old` that `keep` accepts a use of `new`.
    pub fn replace_uses_where(&mut self, old: ValueId, new: ValueId, mut keep: impl FnMut(Use) -> bool) {
        let uses: Vec<Use> = self.uses(old).collect();
        for u in uses {
            if keep(u) {
                self.set_operand(u.op, u.index as usize, new);
            }
        }
    }

    /// Replaces each result of `op` by the matching value of `new` and erases `op`.
    pub fn replace_op(&mut self, op: OpId, new: &[ValueId]) -> Result<(), EraseError> {
        debug_assert_eq!(new.len(), self.num_results(op));
        for (i, &v) in new.iter().enumerate() {
            let r = self.result(op, i);
            self.replace_all_uses(r, v);
        }
        self.erase_op(op)
    }

    // ---- erase and clone --------------------------------------------------

    /// Erases `op` and everything nested in it. Refuses (changing nothing) if a
    /// result of `op` or of a nested op is used outside the erased ops.
    pub fn erase_op(&mut self, op: OpId) -> Result<(), EraseError> {
        let doomed: Vec<OpId> = self.walk_preorder(op).collect();
        for &d in &doomed {
            for r in self.results(d) {
                for u in self.uses(r) {
                    if !self.is_ancestor_or_self(op, u.op) {
                        return Err(EraseError::ResultInUse { value: r, user: u.op });
                    }
                }
            }
        }
        self.detach_op(op);
        for &d in &doomed {
            let Operation { operands_start, num_operands, .. } = self.ops[d];
            for i in 0..num_operands {
                let slot = UseId(operands_start + i);
                self.unlink_use(slot);
                self.uses[slot].value = ValueId::NONE;
            }
        }
        for &d in &doomed {
            self.ops[d].flags |= OP_ERASED;
            self.ops[d].parent = BlockId::NONE;
            for r in self.results(d) {
                self.values[r].first_use = UseId::NONE;
            }
        }
        Ok(())
    }

    /// True if `op` was erased.
    #[inline]
    pub fn is_erased(&self, op: OpId) -> bool {
        self.ops[op].flags & OP_ERASED != 0
    }

    /// True if `ancestor` is `op` or contains it.
    pub fn is_ancestor_or_self(&self, ancestor: OpId, mut op: OpId) -> bool {
        loop {
            if op == ancestor {
                return true;
            }
            op = self.parent_op(op);
            if op.is_none() {
                return false;
            }
        }
    }

    /// Deep-copies `op` (with its regions) as a detached op. Operands defined
    /// outside `op` are looked up in `mapping` (and kept if absent); the mapping is
    /// extended with old→new for every result and block argument copied.
    pub fn clone_op(&mut self, op: OpId, mapping: &mut crate::hash::FxHashMap<ValueId, ValueId>) -> OpId {
        let root = self.clone_single(op, mapping);
        // (old op, new op) pairs whose regions still need copying.
        let mut pending: Vec<(OpId, OpId)> = vec![(op, root)];
        let mut copies: Vec<(OpId, OpId)> = vec![(op, root)];
        while let Some((old, new)) = pending.pop() {
            for r in 0..self.num_regions(old) {
                let old_region = self.region(old, r);
                let new_region = self.region(new, r);
                let mut b = self.regions[old_region].first_block;
                while b.is_some() {
                    let arg_types: SmallVec<[Type; 4]> =
                        self.blocks[b].args.iter().map(|&a| self.values[a].ty).collect();
                    let nb = self.append_block(new_region, &arg_types);
                    for i in 0..arg_types.len() {
                        mapping.insert(self.blocks[b].args[i], self.blocks[nb].args[i]);
                    }
                    let mut o = self.blocks[b].first_op;
                    while o.is_some() {
                        let c = self.clone_single(o, mapping);
                        self.append_op(nb, c);
                        pending.push((o, c));
                        copies.push((o, c));
                        o = self.ops[o].next;
                    }
                    b = self.blocks[b].next;
                }
            }
        }
        // Operands that referred forward to values cloned later: look each original
        // operand up in the now complete mapping, once.
        for (original, copy) in copies {
            for i in 0..self.num_operands(original) {
                let v = self.operand(original, i);
                let mapped = mapping.get(&v).copied().unwrap_or(v);
                self.set_operand(copy, i, mapped);
            }
        }
        root
    }

    fn clone_single(&mut self, op: OpId, mapping: &mut crate::hash::FxHashMap<ValueId, ValueId>) -> OpId {
        let o = self.ops[op].clone();
        let state = OperationState {
            name: o.name,
            operands: self.operands(op).map(|v| *mapping.get(&v).unwrap_or(&v)).collect(),
            result_types: self.results(op).map(|v| self.values[v].ty).collect(),
            attrs: o.attrs,
            loc: o.loc,
            pos: o.pos,
            num_regions: o.num_regions as usize,
        };
        let new = self.create_op(state);
        for i in 0..o.num_results as usize {
            mapping.insert(self.result(op, i), self.result(new, i));
        }
        new
    }

    // ---- reading ----------------------------------------------------------

    /// The op's name.
    #[inline]
    pub fn op_name(&self, op: OpId) -> OpName {
        self.ops[op].name
    }
    /// The op's attribute dictionary.
    #[inline]
    pub fn op_attrs(&self, op: OpId) -> Attribute {
        self.ops[op].attrs
    }
    /// Replaces the op's attribute dictionary.
    #[inline]
    pub fn set_op_attrs(&mut self, op: OpId, attrs: Attribute) {
        self.ops[op].attrs = attrs;
    }
    /// One attribute of the op.
    pub fn op_attr(&self, ctx: &Context, op: OpId, key: &str) -> Option<Attribute> {
        ctx.dict_get(self.ops[op].attrs, key)
    }
    /// The op's location.
    #[inline]
    pub fn op_loc(&self, op: OpId) -> Location {
        self.ops[op].loc
    }
    /// Sets the op's location.
    pub fn set_op_loc(&mut self, op: OpId, loc: Location) {
        self.ops[op].loc = loc;
    }
    /// Where the op was in the parsed input.
    #[inline]
    pub fn op_pos(&self, op: OpId) -> SrcPos {
        self.ops[op].pos
    }
    /// The block holding the op (`NONE` if detached).
    #[inline]
    pub fn op_block(&self, op: OpId) -> BlockId {
        self.ops[op].parent
    }
    /// The op whose region holds this op's block (`NONE` for the root or detached ops).
    pub fn parent_op(&self, op: OpId) -> OpId {
        let b = self.ops[op].parent;
        if b.is_none() {
            return OpId::NONE;
        }
        let r = self.blocks[b].parent;
        if r.is_none() {
            return OpId::NONE;
        }
        self.regions[r].parent
    }
    /// The next op in the block.
    #[inline]
    pub fn next_op(&self, op: OpId) -> OpId {
        self.ops[op].next
    }
    /// The previous op in the block.
    #[inline]
    pub fn prev_op(&self, op: OpId) -> OpId {
        self.ops[op].prev
    }
    /// Number of operands.
    #[inline]
    pub fn num_operands(&self, op: OpId) -> usize {
        self.ops[op].num_operands as usize
    }
    /// Operand `i`.
    #[inline]
    pub fn operand(&self, op: OpId, i: usize) -> ValueId {
        self.uses[self.operand_slot(op, i)].value
    }
    #[inline]
    fn operand_slot(&self, op: OpId, i: usize) -> UseId {
        let o = &self.ops[op];
        assert!(i < o.num_operands as usize, "operand index out of range"); // invariant: callers index within arity
        UseId(o.operands_start + i as u32)
    }
    /// The operands.
    pub fn operands(&self, op: OpId) -> impl ExactSizeIterator<Item = ValueId> + '_ {
        let o = &self.ops[op];
        (o.operands_start..o.operands_start + o.num_operands).map(move |s| self.uses[UseId(s)].value)
    }
    /// Number of results.
    #[inline]
    pub fn num_results(&self, op: OpId) -> usize {
        self.ops[op].num_results as usize
    }
    /// Result `i`.
    #[inline]
    pub fn result(&self, op: OpId, i: usize) -> ValueId {
        let o = &self.ops[op];
        assert!(i < o.num_results as usize, "result index out of range"); // invariant: callers index within arity
        ValueId(o.results_start + i as u32)
    }
    /// The results.
    pub fn results(&self, op: OpId) -> impl DoubleEndedIterator<Item = ValueId> + ExactSizeIterator + Clone {
        let o = &self.ops[op];
        (o.results_start..o.results_start + o.num_results).map(ValueId)
    }
    /// Number of regions.
    #[inline]
    pub fn num_regions(&self, op: OpId) -> usize {
        self.ops[op].num_regions as usize
    }
    /// Region `i`.
    #[inline]
    pub fn region(&self, op: OpId, i: usize) -> RegionId {
        let o = &self.ops[op];
        assert!(i < o.num_regions as usize, "region index out of range"); // invariant: callers index within arity
        RegionId(o.regions_start + i as u32)
    }
    /// The regions.
    pub fn regions(&self, op: OpId) -> impl DoubleEndedIterator<Item = RegionId> + ExactSizeIterator {
        let o = &self.ops[op];
        (o.regions_start..o.regions_start + o.num_regions as u32).map(RegionId)
    }
    /// The op owning a region.
    #[inline]
    pub fn region_op(&self, region: RegionId) -> OpId {
        self.regions[region].parent
    }
    /// The blocks of a region in order.
    pub fn blocks(&self, region: RegionId) -> BlockIter<'_> {
        BlockIter { module: self, next: self.regions[region].first_block }
    }
    /// The first block of a region (`NONE` if empty).
    #[inline]
    pub fn first_block(&self, region: RegionId) -> BlockId {
        self.regions[region].first_block
    }
    /// The region holding a block.
    #[inline]
    pub fn block_region(&self, block: BlockId) -> RegionId {
        self.blocks[block].parent
    }
    /// The ops of a block in order.
    pub fn block_ops(&self, block: BlockId) -> OpIter<'_> {
        OpIter { module: self, next: self.blocks[block].first_op }
    }
    /// The first op of a block.
    #[inline]
    pub fn first_op(&self, block: BlockId) -> OpId {
        self.blocks[block].first_op
    }
    /// The last op of a block.
    #[inline]
    pub fn last_op(&self, block: BlockId) -> OpId {
        self.blocks[block].last_op
    }
    /// The arguments of a block.
    #[inline]
    pub fn block_args(&self, block: BlockId) -> &[ValueId] {
        &self.blocks[block].args
    }
    /// The type of a value.
    #[inline]
    pub fn value_type(&self, v: ValueId) -> Type {
        self.values[v].ty
    }
    /// Changes the type of a value (passes that propagate types use this; the
    /// verifier checks the result).
    pub fn set_value_type(&mut self, v: ValueId, ty: Type) {
        self.values[v].ty = ty;
    }
    /// Where a value is defined.
    #[inline]
    pub fn value_def(&self, v: ValueId) -> ValueDef {
        let d = &self.values[v];
        if d.index & BLOCK_ARG_FLAG != 0 {
            ValueDef::BlockArg { block: BlockId(d.owner), index: d.index & !BLOCK_ARG_FLAG }
        } else {
            ValueDef::Result { op: OpId(d.owner), index: d.index }
        }
    }
    /// The op defining `v`, or `NONE` for a block argument.
    #[inline]
    pub fn defining_op(&self, v: ValueId) -> OpId {
        match self.value_def(v) {
            ValueDef::Result { op, .. } => op,
            ValueDef::BlockArg { .. } => OpId::NONE,
        }
    }
    /// The block in which `v` becomes available.
    pub fn value_block(&self, v: ValueId) -> BlockId {
        match self.value_def(v) {
            ValueDef::Result { op, .. } => self.ops[op].parent,
            ValueDef::BlockArg { block, .. } => block,
        }
    }
    /// The uses of a value, in the order they were made.
    pub fn uses(&self, v: ValueId) -> UseIter<'_> {
        UseIter { module: self, next: self.values[v].first_use }
    }
    /// Every op of the module (nested ones included, in pre-order) for which
    /// `keep` holds: the candidates a pass collects before it edits.
    pub fn ops_where(&self, mut keep: impl FnMut(OpId) -> bool) -> Vec<OpId> {
        self.walk_preorder(self.root()).filter(|&op| keep(op)).collect()
    }
    /// The ops using `v`, each once, in use order.
    pub fn users(&self, v: ValueId) -> Vec<OpId> {
        let mut seen = crate::hash::FxHashSet::default();
        self.uses(v).map(|u| u.op).filter(|&op| seen.insert(op)).collect()
    }
    /// Whether `op` is the op named `name` (`"fp.conv2d"`).
    pub fn op_is(&self, ctx: &Context, op: OpId, name: &str) -> bool {
        ctx.op_name_str(self.op_name(op)) == name
    }
    /// True if the value has at least one use.
    #[inline]
    pub fn has_uses(&self, v: ValueId) -> bool {
        self.values[v].first_use.is_some()
    }
    /// True if any result of `op` has a use.
    pub fn op_has_uses(&self, op: OpId) -> bool {
        self.results(op).any(|r| self.has_uses(r))
    }
    /// The top-level ops of the module.
    pub fn top_level_ops(&self) -> OpIter<'_> {
        self.block_ops(self.body())
    }
    /// The top-level op with `sym_name` = `name`.
    pub fn lookup_symbol(&self, ctx: &Context, name: &str) -> Option<OpId> {
        self.top_level_ops()
            .find(|&op| self.op_attr(ctx, op, "sym_name").and_then(|a| ctx.attr_as_str(a)) == Some(name))
    }
    /// Number of live ops (walks the module).
    pub fn count_ops(&self) -> usize {
        self.walk_preorder(self.root).count()
    }
    /// Bytes held by the arenas.
    pub fn heap_bytes(&self) -> usize {
        self.ops.heap_bytes()
            + self.values.heap_bytes()
            + self.uses.heap_bytes()
            + self.blocks.heap_bytes()
            + self.regions.heap_bytes()
    }

    /// Checks that every use list holds exactly the operand slots that refer to its
    /// value, in a well-formed doubly linked chain. Returns a message for the first
    /// inconsistency. Used by the verifier.
    pub fn check_use_lists(&self) -> Result<(), String> {
        let mut seen = vec![false; self.uses.len()];
        for v in self.values.ids() {
            let head = self.values[v].first_use;
            let mut slot = head;
            let mut prev = UseId::NONE;
            let mut steps = 0usize;
            while slot.is_some() {
                if slot.index() >= self.uses.len() {
                    return Err(format!("use list of {v} points outside the operand arena"));
                }
                let u = &self.uses[slot];
                if u.value != v {
                    return Err(format!("use list of {v} holds an operand of {}", u.owner));
                }
                if prev.is_some() && u.prev != prev {
                    return Err(format!("use list of {v} has a broken back link"));
                }
                if seen[slot.index()] {
                    return Err(format!("use list of {v} is cyclic"));
                }
                seen[slot.index()] = true;
                prev = slot;
                slot = u.next;
                steps += 1;
                if steps > self.uses.len() {
                    return Err(format!("use list of {v} is cyclic"));
                }
            }
            if head.is_some() && self.uses[head].prev != prev {
                return Err(format!("use list of {v} does not record its tail"));
            }
        }
        for op in self.ops.ids() {
            if self.is_erased(op) {
                continue;
            }
            let o = &self.ops[op];
            for s in o.operands_start..o.operands_start + o.num_operands {
                let slot = UseId(s);
                if self.uses[slot].owner != op {
                    return Err(format!("operand slot of {op} records another owner"));
                }
                if self.uses[slot].value.is_none() {
                    return Err(format!("{op} has an operand that is no value"));
                }
                if !seen[slot.index()] {
                    return Err(format!("operand of {op} is missing from its value's use list"));
                }
            }
        }
        Ok(())
    }
}

/// The top-level ops of a module by their `sym_name`, built once for many
/// lookups (valid while the module's top level is not edited).
#[derive(Default)]
pub struct SymbolTable {
    by_name: crate::hash::FxHashMap<Box<str>, OpId>,
}

impl SymbolTable {
    /// Indexes the top-level ops of `module` (the first op wins for a repeated name).
    pub fn build(ctx: &Context, module: &Module) -> SymbolTable {
        let mut by_name = crate::hash::FxHashMap::default();
        for op in module.top_level_ops() {
            if let Some(name) = module.op_attr(ctx, op, "sym_name").and_then(|a| ctx.attr_as_str(a)) {
                by_name.entry(name.into()).or_insert(op);
            }
        }
        SymbolTable { by_name }
    }

    /// The op named `name`.
    pub fn get(&self, name: &str) -> Option<OpId> {
        self.by_name.get(name).copied()
    }
}

/// Iterator over the ops of a block.
pub struct OpIter<'a> {
    module: &'a Module,
    next: OpId,
}

impl Iterator for OpIter<'_> {
    type Item = OpId;
    #[inline]
    fn next(&mut self) -> Option<OpId> {
        let op = self.next.expand()?;
        self.next = self.module.ops[op].next;
        Some(op)
    }
}

/// Iterator over the blocks of a region.
pub struct BlockIter<'a> {
    module: &'a Module,
    next: BlockId,
}

impl Iterator for BlockIter<'_> {
    type Item = BlockId;
    fn next(&mut self) -> Option<BlockId> {
        let b = self.next.expand()?;
        self.next = self.module.blocks[b].next;
        Some(b)
    }
}

/// Iterator over the uses of a value.
pub struct UseIter<'a> {
    module: &'a Module,
    next: UseId,
}

impl Iterator for UseIter<'_> {
    type Item = Use;
    #[inline]
    fn next(&mut self) -> Option<Use> {
        let slot = self.next.expand()?;
        let u = &self.module.uses[slot];
        self.next = u.next;
        let start = self.module.ops[u.owner].operands_start;
        Some(Use { op: u.owner, index: slot.0 - start, slot })
    }
}
