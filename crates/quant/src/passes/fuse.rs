//! `fuse`: the realize step; float ops between `qnn.dequantize` and
//! `qnn.quantize` become integer ops. What it does, step by step, is in
//! [`crate::fuse`].

use crate::fuse::fuse_module;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::{Module, Pass, PassContext, PassInfo, PassOutcome, PassResult};

/// The `fuse` pass; see the module docs and [`crate::fuse`].
pub struct Fuse;

const INFO: PassInfo = PassInfo {
    name: "fuse",
    summary: "turn dequantize → float op → quantize into integer qnn ops (the realize step)",
    preserves_semantics: false,
    // Checked against the `qnn` ops' definitions as quantize(float op(dequantize)):
    // the wiring, attributes and types are proven, the integer rounding is not.
    equivalence: Some(Relation::Requantization),
    description: "Rewrites `dequantize → fp.conv2d → [relu | clip(0, c)] → quantize` into `qnn.conv2d` or \
     `qnn.conv2d_relu` (with `relu_max = c`), `fp.dense` and `fp.conv_transpose2d` likewise, `fp.add` / \
     `fp.sub` / `fp.mul` / `fp.concat` \
     of dequantized operands into `qnn.add` / `qnn.sub` / `qnn.mul` / `qnn.concat`, unary activations with the \
     LookupActivation interface (hard_swish, sigmoid, tanh, gelu, ...) of at most 8-bit inputs into \
     `qnn.lookup` tables computed by their own kernels (bit-exact), runs quant-agnostic ops \
     (reshape, transpose, max_pool, relu, ...) on the integers, and turns each remaining \
     `quantize(dequantize(q))` into `q` (equal types) or `qnn.requantize(q)` (one per value and type), \
     and merges conversions of one value to one type, so nothing is quantized twice with equal \
     parameters. Patterns come from a registry a downstream crate extends. `qnn.stop_fusion` is \
     never fused across. Statistics: one per pattern under its name (`fused-conv2d`), \
     `quant-agnostic-ops`, `requantizes`, `pairs-removed`, `conversions-merged`.",
};

impl Pass for Fuse {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let stats = fuse_module(cx.ctx, module)?;
        let changed = stats.total() > 0;
        for (name, n) in stats.fused {
            cx.add_stat(name, n);
        }
        cx.add_stat("quant-agnostic-ops", stats.agnostic);
        cx.add_stat("requantizes", stats.requantizes);
        cx.add_stat("pairs-removed", stats.pairs_removed);
        cx.add_stat("conversions-merged", stats.merged);
        Ok(PassOutcome::from_changed(changed))
    }
}
