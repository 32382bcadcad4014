//! What the end-to-end tests of the quantization passes share: the
//! repository root, a context with qopt's dialects, and running a pipeline on
//! a module.

use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::{verify, Context, Module};
use std::path::{Path, PathBuf};

/// The workspace root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A context with the fp and qnn dialects.
pub fn context() -> Context {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).unwrap();
    qopt_dialect_qnn::register(&mut ctx).unwrap();
    ctx
}

/// Runs `pipeline` (qopt's generic and quantization passes) on `module` in place and verifies the result.
pub fn run_pipeline(ctx: &mut Context, module: &mut Module, pipeline: &str) {
    let mut registry = PassRegistry::new();
    qopt_passes::register_generic_passes(&mut registry).unwrap();
    qopt_quant::register_quant_passes(&mut registry).unwrap();
    let manager =
        PassManager::parse(&registry, pipeline).unwrap_or_else(|e| panic!("{pipeline}: {}", e.message));
    let mut inst = Instrumentation { reproducer_dir: None, ..Instrumentation::default() };
    manager.run(ctx, module, &mut inst).unwrap_or_else(|e| panic!("{pipeline}: {e:?}"));
    verify(ctx, module).expect("the result verifies");
}
