//! qopt's passes. For now the generic clean-up passes; each lives in the module
//! named after its flag and asks ops for traits ([`qopt_ir_core::Traits`]),
//! folders and patterns, never for their names. The one exception is
//! `simplify-inference`, which rewrites the `fp` dialect's `fp.batch_norm` into
//! `fp` arithmetic (hence the dependency on `qopt-dialect-fp`):
//!
//! | flag | does |
//! |---|---|
//! | `canonicalize` | folds, erases dead pure ops and applies every dialect's canonicalization patterns to a fixed point (`max-iterations`, `fold`) |
//! | `dce` | erases pure ops whose results are unused, and then what only they used |
//! | `cse` | merges equal pure ops (commutative operands in either order), reusing values from enclosing blocks |
//! | `symbol-dce` | erases private functions that no live code refers to |
//! | `fold-constant` | evaluates ops whose operands are all constants through their folders, to a fixed point (`max-elements`) |
//! | `simplify-inference` | rewrites `fp.batch_norm` with constant parameters into a per-channel `fp.mul` and `fp.add` |
//!
//! All six keep the module's meaning ([`Pass::preserves_semantics`]).
//! [`register_generic_passes`] adds them to a [`PassRegistry`]; the `qopt` driver
//! does so in `Driver::new`.

#![warn(missing_docs)]

mod canonicalize;
mod cse;
mod dce;
mod fold_constant;
mod fp_constants;
pub mod quant;
mod simplify_inference;
mod symbol_dce;

#[cfg(test)]
mod test_dialect;
#[cfg(test)]
mod test_ir;

pub use canonicalize::Canonicalize;
pub use cse::Cse;
pub use dce::Dce;
pub use fold_constant::FoldConstant;
pub use simplify_inference::SimplifyInference;
pub use symbol_dce::SymbolDce;

use qopt_ir_core::{Pass, PassRegistry};
use std::sync::Arc;

/// Registers `canonicalize`, `cse`, `dce`, `symbol-dce`, `fold-constant` and
/// `simplify-inference`. Fails only if one of those names is already taken in
/// `registry`.
pub fn register_generic_passes(registry: &mut PassRegistry) -> Result<(), String> {
    let passes: [Arc<dyn Pass>; 6] = [
        Arc::new(Canonicalize),
        Arc::new(Cse),
        Arc::new(Dce),
        Arc::new(SymbolDce),
        Arc::new(FoldConstant),
        Arc::new(SimplifyInference),
    ];
    for pass in passes {
        registry.register(pass)?;
    }
    quant::register_quant_passes(registry)
}
