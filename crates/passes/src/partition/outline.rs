//! Moving one region of a block into a new private function and calling it
//! in its place (TVM's PartitionGraph for one region).
//!
//! - **Arguments** are the region's live-ins: values defined outside it
//!   (block arguments or results of ops left outside) that its ops read, in
//!   the order of first use. Constants are not arguments: every constant a
//!   region op reads is cloned into the function (weights travel with the
//!   region), and the original is erased once nothing outside uses it, so a
//!   constant used only inside is in effect moved.
//! - **Results** are the region's live-outs: results of its ops used outside
//!   it, in program order.
//! - **The call** goes right after the region's last op, with the location
//!   `loc("<function name>")`. Outside ops between the region's first and last
//!   op that read what the region computes move after the call, in their
//!   order; the region is convex (see `regions.rs`), so none of them feeds it
//!   and every op still comes after what it reads.
//! - **Ops keep their locations** and attributes; only their block changes.

use qopt_ir_core::{
    BlockId, Context, FxHashMap, FxHashSet, Module, OpId, OpName, OperationState, Traits, Type, ValueId,
};

/// What outlining one region did, for the pass's statistics.
pub struct Outlined {
    /// The new function.
    pub function: OpId,
    /// Constants cloned into it.
    pub cloned_constants: usize,
}

/// Whether `op` is a constant: constant-like, without operands.
pub fn is_constant(ctx: &Context, module: &Module, op: OpId) -> bool {
    module.num_operands(op) == 0
        && ctx.op_def(module.op_name(op)).is_some_and(|d| d.has(Traits::CONSTANT_LIKE))
}

/// Moves `region` (ops of one block) into a new private function `@name`
/// placed right after `anchor` (a top-level op), and calls it where the
/// region was.
pub fn outline_region(
    ctx: &mut Context,
    module: &mut Module,
    region: &[OpId],
    name: &str,
    anchor: OpId,
) -> Outlined {
    let members: FxHashSet<OpId> = region.iter().copied().collect();
    // Outlining an earlier region may have moved some of these ops after its
    // call; take them in the block's current order.
    let block = module.op_block(region[0]);
    let region: Vec<OpId> = module.block_ops(block).filter(|op| members.contains(op)).collect();
    let region = region.as_slice();
    let (live_ins, constants) = live_ins_and_constants(ctx, module, region, &members);
    let live_outs: Vec<ValueId> = region
        .iter()
        .flat_map(|&op| module.results(op).collect::<Vec<_>>())
        .filter(|&v| module.uses(v).any(|u| !members.contains(&u.op)))
        .collect();
    let in_types: Vec<Type> = live_ins.iter().map(|&v| module.value_type(v)).collect();
    let out_types: Vec<Type> = live_outs.iter().map(|&v| module.value_type(v)).collect();

    let function = create_function(ctx, module, name, &in_types, &out_types, anchor);
    let body = module.first_block(module.region(function, 0));

    let mut cloned_constants = 0;
    for constant in constants {
        let original = module.result(constant, 0);
        let copy = module.clone_op(constant, &mut FxHashMap::default());
        module.append_op(body, copy);
        module.replace_uses_where(original, module.result(copy, 0), |u| members.contains(&u.op));
        if !module.has_uses(original) {
            // invariant: the constant has no uses left, so erasing it cannot fail.
            let _ = module.erase_op(constant);
        }
        cloned_constants += 1;
    }

    // invariant: regions are grown from one supported op each, so none is empty.
    let last = *region.last().expect("a region has at least one op");
    let callee = ctx.symbol_ref_attr(name);
    let attrs = ctx.dict_attr(&[("callee", callee)]);
    let call = module.create_op(
        OperationState::new(OpName::CALL)
            .operands(&live_ins)
            .results(&out_types)
            .attrs(attrs)
            .loc(ctx.name_loc(name)),
    );
    module.insert_op_after(last, call);
    move_dependents_after(module, region, &members, call);

    for (i, &v) in live_outs.iter().enumerate() {
        let result = module.result(call, i);
        module.replace_uses_where(v, result, |u| !members.contains(&u.op));
    }
    let args = module.block_args(body).to_vec();
    for (&v, &arg) in live_ins.iter().zip(&args) {
        module.replace_uses_where(v, arg, |u| members.contains(&u.op));
    }
    for &op in region {
        module.move_op_to_end(op, body);
    }
    let ret = module.create_op(OperationState::new(OpName::RETURN).operands(&live_outs));
    module.append_op(body, ret);
    Outlined { function, cloned_constants }
}

/// The values the region reads from outside (first use first), and the
/// constants among their definitions, which are cloned instead.
fn live_ins_and_constants(
    ctx: &Context,
    module: &Module,
    region: &[OpId],
    members: &FxHashSet<OpId>,
) -> (Vec<ValueId>, Vec<OpId>) {
    let mut live_ins = Vec::new();
    let mut constants = Vec::new();
    let mut seen: FxHashSet<ValueId> = FxHashSet::default();
    for &op in region {
        for v in module.operands(op) {
            let def = module.defining_op(v);
            if (def.is_some() && members.contains(&def)) || !seen.insert(v) {
                continue;
            }
            if def.is_some() && is_constant(ctx, module, def) {
                constants.push(def);
            } else {
                live_ins.push(v);
            }
        }
    }
    (live_ins, constants)
}

/// A private `func.func @name` with one empty block, after `anchor`.
fn create_function(
    ctx: &mut Context,
    module: &mut Module,
    name: &str,
    inputs: &[Type],
    results: &[Type],
    anchor: OpId,
) -> OpId {
    let sym = ctx.string_attr(name);
    let private = ctx.string_attr("private");
    let fty = ctx.function_type(inputs, results);
    let fty = ctx.type_attr(fty);
    let attrs = ctx.dict_attr(&[("sym_name", sym), ("sym_visibility", private), ("function_type", fty)]);
    let function = module.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
    module.insert_op_after(anchor, function);
    let region = module.region(function, 0);
    module.append_block(region, inputs);
    function
}

/// Moves the outside ops between the region's first and last op that read,
/// directly or not, a value the region computes, to just after `call`,
/// keeping their order.
fn move_dependents_after(module: &mut Module, region: &[OpId], members: &FxHashSet<OpId>, call: OpId) {
    // invariant: regions are grown from one supported op each, so none is empty.
    let (first, last) = (region[0], *region.last().expect("a region has at least one op"));
    let block: BlockId = module.op_block(first);
    let mut tainted: FxHashSet<ValueId> = FxHashSet::default();
    let mut dependents = Vec::new();
    let mut inside = false;
    for op in module.block_ops(block) {
        inside |= op == first;
        if !inside {
            continue;
        }
        if op == last {
            break;
        }
        if members.contains(&op) || module.operands(op).any(|v| tainted.contains(&v)) {
            tainted.extend(module.results(op));
            if !members.contains(&op) {
                dependents.push(op);
            }
        }
    }
    let mut anchor = call;
    for op in dependents {
        module.move_op_after(op, anchor);
        anchor = op;
    }
}
