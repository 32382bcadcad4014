//! The passes' unit tests run pipelines of the generic passes, over IR built
//! with [`qopt_ir_core::test_ir`].

pub(crate) use qopt_ir_core::test_ir::{on_small_stack, test_context, RunOutput, TestIr};
use qopt_ir_core::PassRegistry;

/// The generic passes.
pub(crate) fn registry() -> PassRegistry {
    let mut registry = PassRegistry::new();
    // invariant: a fresh registry has none of the names taken.
    let _ = crate::register_generic_passes(&mut registry);
    registry
}

/// Parses `input`, runs `pipeline` of the generic passes over it and prints the result.
pub(crate) fn check_pass(pipeline: &str, input: &str) -> Result<RunOutput, String> {
    qopt_ir_core::test_ir::check_pass(&registry(), pipeline, input)
}
