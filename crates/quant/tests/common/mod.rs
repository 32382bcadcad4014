//! What the end-to-end tests of the quantization passes share: the
//! repository root, a context with qopt's dialects, running a pipeline on a
//! module, calibration data in a scratch directory, and reading ops and
//! constants back.

// Each test binary uses some of these.
#![allow(dead_code)]

use qopt_interp::Tensor;
use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::{
    constant_value, dense_values_f64, parse_module, verify, AttrData, Context, Module, OpId, ScratchDir,
};
use qopt_npy::write_npy_file;
use std::path::{Path, PathBuf};

/// The workspace root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[allow(unused_imports)]
pub use qopt_dialect_qnn::context;

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

/// Writes `samples` × `shape` f32 values to a scratch `.npy`; returns the directory
/// (removed when dropped) and the file's path.
pub fn write_data(name: &str, shape: &[usize], values: Vec<f32>) -> (ScratchDir, PathBuf) {
    let dir = ScratchDir::new("quant-data");
    let path = dir.join(format!("{name}.npy"));
    let tensor = Tensor::from_f32(shape, values).unwrap();
    write_npy_file(&path, &tensor.to_raw()).unwrap();
    (dir, path)
}

/// `text` parsed (a test input that must parse).
pub fn parse(ctx: &mut Context, text: &str) -> Module {
    parse_module(ctx, text.as_bytes(), "model.qir").unwrap_or_else(|e| panic!("{e:?}\n{text}"))
}

/// The ops named `name`, in order.
pub fn ops_named(ctx: &Context, module: &Module, name: &str) -> Vec<OpId> {
    module.ops_where(|op| module.op_is(ctx, op, name))
}

/// The values of the constant operand `i` of `op`.
pub fn constant_operand(ctx: &Context, module: &Module, op: OpId, i: usize) -> Vec<f64> {
    let attr = constant_value(ctx, module, module.operand(op, i)).expect("a constant operand");
    match ctx.attr_data(attr) {
        AttrData::Dense(d) => dense_values_f64(ctx, d, ctx.element_type(d.ty)).unwrap(),
        _ => panic!("not dense"),
    }
}
