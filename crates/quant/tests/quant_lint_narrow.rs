//! `quant-lint` warns about a narrow-range quantized constant holding a value
//! outside its range. The parser refuses such a constant in text, so the test
//! builds it the way a pass would: by writing the dense data directly.

use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::{parse_module, DenseElements};

use qopt_dialect_qnn::context;

#[test]
fn a_narrow_constant_holding_the_excluded_value_is_reported() {
    let mut ctx = context();
    let text = "func.func @f() -> tensor<2x!qnn.uniform<i8<-127:127>:f32, 0.5:0>> {\n  \
        %c = fp.constant() {value = dense<[-127, 5]> : tensor<2x!qnn.uniform<i8<-127:127>:f32, 0.5:0>>} : () -> tensor<2x!qnn.uniform<i8<-127:127>:f32, 0.5:0>> loc(\"c\")\n  \
        func.return %c : tensor<2x!qnn.uniform<i8<-127:127>:f32, 0.5:0>>\n}\n";
    let mut module = parse_module(&mut ctx, text.as_bytes(), "narrow.qir").unwrap();
    let constant = module
        .walk_preorder(module.root())
        .find(|&op| ctx.op_name_str(module.op_name(op)) == "fp.constant")
        .expect("the constant");
    let ty = module.value_type(module.result(constant, 0));
    let dense = DenseElements::from_bytes(&ctx, ty, vec![0x80, 5]).unwrap();
    let value = ctx.dense_attr(dense);
    let attrs = ctx.dict_set(module.op_attrs(constant), "value", value);
    module.set_op_attrs(constant, attrs);

    let mut registry = PassRegistry::new();
    qopt_passes::register_generic_passes(&mut registry).unwrap();
    qopt_quant::register_quant_passes(&mut registry).unwrap();
    let manager = PassManager::parse(&registry, "quant-lint").unwrap();
    let mut inst = Instrumentation { reproducer_dir: None, ..Instrumentation::default() };
    let report = manager.run(&mut ctx, &mut module, &mut inst).unwrap();
    let warnings: Vec<&str> = report.warnings.iter().map(|w| w.message.as_str()).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("element 0 is -128, outside the narrow range [-127, 127] of its type")),
        "{warnings:?}"
    );
}
