//! `partition{target=NAME}`: outlines the maximal connected regions of ops
//! that a backend runs into private functions `@NAME_0`, `@NAME_1`, ...,
//! called where the regions were (TVM's AnnotateTarget, MergeCompilerRegions
//! and PartitionGraph as one pass).
//!
//! - **Support** comes from the backend's [`BackendSupport`] predicate,
//!   found by name in the context's [`BackendTargets`] (a downstream crate
//!   registers its own; `qnn` is built in). An unknown target is an error
//!   listing the registered ones.
//! - **Which functions:** every public function with a body (`@main` in an
//!   imported model); the functions it creates are private, so running the
//!   pass again leaves them alone. Function names skip any that are taken.
//! - **Regions** (`regions.rs`): supported ops joined along data edges,
//!   never into a cycle through an op left outside. Constants, `func.*` ops
//!   and ops with regions are never members.
//! - **`qnn.stop_fusion`** stays outside every region, so its operand and its
//!   users fall into different regions: it is a region boundary, as the op
//!   says (nothing merges its producer and consumers).
//! - **`qnn.cast_hint`** stays outside every region too, so each one is a
//!   region boundary with the hint kept in the calling function, on the value
//!   that crosses it: the hint states what kind of value (`"i8"`,
//!   `"activation"`, `"float"`, ...) a boundary carries, which is where TVM's
//!   QuantizePartition puts it (always beside a stop_fusion), and where the
//!   backend's own quantizer reads it.
//! - **Outlining** (`outline.rs`): arguments are the region's live-ins,
//!   results its live-outs; constants are cloned into the function; ops keep
//!   their locations; the call has `loc("<function>")`.
//!
//! The pass keeps the module's meaning exactly: `--verify-equiv` proves it
//! (the checker expands calls to functions of the module). Statistics:
//! `regions`, `outlined-ops`, `cloned-constants`.
//!
//! ```text
//! // before (partition{target=qnn}; fp.tanh is not supported)
//! %0 = qnn.conv2d_relu(%x, %w, %b) ... loc("conv1")
//! %1 = qnn.dequantize(%0) ...          loc("dq")
//! %2 = fp.tanh(%1) ...                 loc("tanh")
//! // after
//! %0 = func.call @qnn_0(%x) ...        loc("qnn_0")
//! %1 = qnn.dequantize(%0) ...          loc("dq")
//! %2 = fp.tanh(%1) ...                 loc("tanh")
//! func.func private @qnn_0(%arg0: ...) -> ... {
//!   %w = fp.constant ...               (cloned from @main)
//!   %0 = qnn.conv2d_relu(%arg0, %w, %b) ... loc("conv1")
//!   func.return %0 ...
//! }
//! ```

mod outline;
mod regions;

use crate::backend_support::BackendTargets;
use outline::{is_constant, outline_region};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{BadOptionValue, Context, Module, OpId, OpName, Pass, PassContext, PassOutcome};

/// The `partition` pass; see the module docs.
pub struct Partition;

const INFO: PassInfo = PassInfo {
    name: "partition",
    summary: "outline the regions a backend supports into private functions @TARGET_0, @TARGET_1, ... called in their place",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
    description: "For every public function, groups the ops that the backend `target` supports (its \
     `BackendSupport` predicate, registered by name; `qnn` is built in: integer qnn ops and \
     quant-agnostic ops on quantized values) into maximal connected regions that never form a \
     cycle with the ops left outside, and moves each region into a private function \
     `@<target>_<k>` called in its place. A region's arguments are the values it reads from \
     outside, its results the values used outside; constants it reads are cloned into it. \
     `qnn.stop_fusion` and `qnn.cast_hint` stay outside every region, so each is a region \
     boundary (the hint stays on the boundary value). Ops keep their locations; the call is \
     located at the function's name.\n\n\
     ```\n\
     %0 = qnn.conv2d_relu(%x, %w, %b) ... loc(\"conv1\")\n\
     %1 = qnn.dequantize(%0) ...\n\
     // -> %0 = func.call @qnn_0(%x) ... loc(\"qnn_0\")\n\
     //    func.func private @qnn_0(%arg0: ...) -> ... { ... qnn.conv2d_relu ... }\n\
     ```",
};

impl Pass for Partition {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![OptionSpec::new("target", OptionKind::String, "")
            .required()
            .help("the backend whose supported ops are outlined (a registered BackendSupport, e.g. qnn)")]
    }

    /// An unknown target is a usage error listing the registered ones.
    fn check_options_against(&self, ctx: &Context, options: &PassOptions) -> Result<(), BadOptionValue> {
        BackendTargets::of(ctx)
            .find(options.string("target"))
            .map(|_| ())
            .map_err(|e| BadOptionValue::new("target", e))
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let target_name = options.string("target");
        let target = BackendTargets::of(cx.ctx).find(target_name)?.clone();
        let functions: Vec<OpId> =
            module.top_level_ops().filter(|&op| is_public_function_with_body(cx.ctx, module, op)).collect();
        let mut next_index = 0usize;
        let (mut regions_made, mut outlined_ops, mut cloned) = (0u64, 0u64, 0u64);
        for function in functions {
            let block = module.first_block(module.region(function, 0));
            let ctx: &Context = cx.ctx;
            let found = regions::find_regions(
                module,
                block,
                |op| !is_constant(ctx, module, op),
                |op| outlinable(ctx, module, op) && target.supports(ctx, module, op),
            );
            let mut anchor = function;
            for region in found {
                let name = free_name(cx.ctx, module, target.name(), &mut next_index);
                let outlined = outline_region(cx.ctx, module, &region, &name, anchor);
                anchor = outlined.function;
                regions_made += 1;
                outlined_ops += region.len() as u64;
                cloned += outlined.cloned_constants as u64;
            }
        }
        cx.add_stat("regions", regions_made);
        cx.add_stat("outlined-ops", outlined_ops);
        cx.add_stat("cloned-constants", cloned);
        Ok(PassOutcome::from_changed(regions_made > 0))
    }
}

/// A `func.func` with a body whose `sym_visibility` is absent or `"public"`.
fn is_public_function_with_body(ctx: &Context, module: &Module, op: OpId) -> bool {
    if module.op_name(op) != OpName::FUNC || module.num_regions(op) != 1 {
        return false;
    }
    if module.first_block(module.region(op, 0)).is_none() {
        return false;
    }
    let visibility = module.op_attr(ctx, op, "sym_visibility").and_then(|a| ctx.attr_as_str(a));
    matches!(visibility, None | Some("public"))
}

/// Whether `op` may join a region at all, whatever the target says:
/// not a `func.*` op, no regions, not a region boundary marker.
fn outlinable(ctx: &Context, module: &Module, op: OpId) -> bool {
    let name = module.op_name(op);
    if name == OpName::FUNC || name == OpName::RETURN || name == OpName::CALL || module.num_regions(op) > 0 {
        return false;
    }
    !matches!(ctx.op_name_str(name), qnn_op::STOP_FUSION | qnn_op::CAST_HINT)
}

/// The first `<prefix>_<k>` from `*next` on that names no symbol of the module.
fn free_name(ctx: &Context, module: &Module, prefix: &str, next: &mut usize) -> String {
    loop {
        let name = format!("{prefix}_{next}");
        *next += 1;
        if module.lookup_symbol(ctx, &name).is_none() {
            return name;
        }
    }
}
