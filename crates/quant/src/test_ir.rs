//! The quantization passes' unit tests run pipelines of qopt's passes over IR
//! built with [`qopt_ir_core::test_ir`].

pub(crate) use qopt_ir_core::test_ir::{on_small_stack, test_context, TestIr};
use qopt_ir_core::PassRegistry;

/// The generic and the quantization passes.
pub(crate) fn registry() -> PassRegistry {
    let mut registry = PassRegistry::new();
    // invariant: a fresh registry has none of the names taken.
    let _ = qopt_passes::register_generic_passes(&mut registry);
    let _ = crate::register_quant_passes(&mut registry);
    registry
}
