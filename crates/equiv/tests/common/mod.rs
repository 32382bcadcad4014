//! What the equivalence tests share: a context with qopt's dialects,
//! parsing, reading files of the repository, and running a pipeline of
//! qopt's passes on a module.

use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::{parse_module, verify, Context, Module};
use std::path::Path;

/// A context with the fp and qnn dialects (unregistered ops allowed, for
/// broken passes that make them).
pub fn context() -> Context {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).unwrap();
    qopt_dialect_qnn::register(&mut ctx).unwrap();
    ctx.set_allow_unregistered(true);
    ctx
}

/// `text` parsed and verified.
pub fn parse(ctx: &mut Context, text: &str) -> Module {
    let module = parse_module(ctx, text.as_bytes(), "test.qir").unwrap_or_else(|d| panic!("{d}\n{text}"));
    verify(ctx, &module).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    module
}

/// The text of `relative`, a path from the repository root.
pub fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The generic and quantization passes.
pub fn registry() -> PassRegistry {
    let mut registry = PassRegistry::new();
    qopt_passes::register_generic_passes(&mut registry).unwrap();
    qopt_quant::register_quant_passes(&mut registry).unwrap();
    registry
}

/// Runs `pipeline` on `module` in place; false when a pass fails.
pub fn try_run(ctx: &mut Context, module: &mut Module, pipeline: &str) -> bool {
    let manager = PassManager::parse(&registry(), pipeline).unwrap_or_else(|e| panic!("{}", e.message));
    let mut inst = Instrumentation { reproducer_dir: None, ..Instrumentation::default() };
    manager.run(ctx, module, &mut inst).is_ok()
}

/// Runs `pipeline` on `module` in place; panics when a pass fails.
pub fn run(ctx: &mut Context, module: &mut Module, pipeline: &str) {
    assert!(try_run(ctx, module, pipeline), "{pipeline} failed");
}

/// Runs `pipeline` on `module` in place and verifies the result.
pub fn run_pipeline(ctx: &mut Context, module: &mut Module, pipeline: &str) {
    assert!(try_run(ctx, module, pipeline), "{pipeline} failed");
    verify(ctx, module).expect("the result verifies");
}
