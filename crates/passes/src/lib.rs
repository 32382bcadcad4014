//! qopt's generic passes, each in the module named after its flag, which ask
//! ops for traits ([`qopt_ir_core::Traits`]), folders and patterns, never for
//! their names (the exceptions are `simplify-inference`, which rewrites
//! `fp.batch_norm` into `fp` arithmetic, `recognize-gelu` /
//! `recognize-hard-swish`, which fuse `fp` arithmetic into one activation,
//! `recognize-dense` and `div-to-mul`);
//! and `partition`, which outlines what a backend runs ([`BackendSupport`],
//! registered in [`BackendTargets`]) into functions of their own. The
//! quantization passes are in the `qopt-quant` crate.
//!
//! A pass is its module, declared below, plus one line in the `passes!` list.
//! `docs/passes.md` is generated from the registry
//! (`qopt --emit-pass-docs docs/passes.md`; a test keeps it current): every
//! pass with its summary, options and whether it keeps the module's meaning.
//! [`register_generic_passes`] adds them all to a [`PassRegistry`]; the `qopt`
//! driver does so in `Driver::new`.

#![warn(missing_docs)]

mod backend_support;
mod each_op;
mod fp_chains;

pub use backend_support::{BackendSupport, BackendTargets, QnnIntegerTarget, QNN_TARGET};

#[cfg(test)]
mod test_ir;

use qopt_ir_core::{Pass, PassRegistry};
use std::sync::Arc;

// Declared here, not by the macro below, so that rustfmt (which does not
// expand macros) finds and formats every pass file.
mod canonicalize;
mod conv1d_to_conv2d;
mod cse;
mod dce;
mod div_to_mul;
mod fold_constant;
mod partition;
mod recognize_dense;
mod recognize_gelu;
mod recognize_hard_swish;
mod simplify_inference;
mod symbol_dce;

/// Re-exports the passes of the modules above and lists them in
/// `generic_passes()`: one `module::Pass` line per pass.
macro_rules! passes {
    ($($module:ident :: $pass:ident),* $(,)?) => {
        $(pub use $module::$pass;)*
        /// The generic passes, in the order listed.
        fn generic_passes() -> Vec<Arc<dyn Pass>> {
            vec![$(Arc::new($pass)),*]
        }
    };
}

passes! {
    canonicalize::Canonicalize,
    cse::Cse,
    dce::Dce,
    symbol_dce::SymbolDce,
    fold_constant::FoldConstant,
    simplify_inference::SimplifyInference,
    recognize_dense::RecognizeDense,
    div_to_mul::DivToMul,
    conv1d_to_conv2d::Conv1dToConv2d,
    recognize_gelu::RecognizeGelu,
    recognize_hard_swish::RecognizeHardSwish,
    partition::Partition,
}

/// Registers every generic pass. Fails only if a name is already taken in
/// `registry`.
pub fn register_generic_passes(registry: &mut PassRegistry) -> Result<(), String> {
    generic_passes().into_iter().try_for_each(|pass| registry.register(pass))
}
