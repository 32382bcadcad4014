//! Unit tests of the dialect and the registration; the pass and the binary
//! are tested end to end by `tests/toy_opt.rs`.

use super::*;
use qopt_ir_core::{parse_module, verify, Traits};

/// Wraps one example op line in a function whose arguments are its operands
/// (`%x: T` for each operand name and type of the signature).
fn example_module(line: &str) -> String {
    let open = line.find('(').unwrap();
    let close = open + line[open..].find(')').unwrap();
    let names: Vec<&str> = line[open + 1..close].split(", ").collect();
    let sig = line.rfind(" : (").unwrap();
    let arrow = line.rfind(") -> ").unwrap();
    // Types contain ", " only inside `<...>`: split at depth 0.
    let (mut types, mut depth, mut start) = (Vec::new(), 0i32, sig + 4);
    for (i, c) in line[..arrow].char_indices().skip(sig + 4) {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ',' if depth == 0 => {
                types.push(line[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    types.push(line[start..arrow].trim());
    assert_eq!(names.len(), types.len(), "operands and types of {line}");
    let args: Vec<String> = names.iter().zip(&types).map(|(n, t)| format!("{n}: {t}")).collect();
    format!(
        "module {{\n  func.func @example({}) {{\n    {line}\n    func.return\n  }}\n}}\n",
        args.join(", ")
    )
}

/// Every op has a summary and a `.qir` example, and every example verifies.
#[test]
fn description_examples_verify() {
    let defs = AccelDialect.ops();
    assert_eq!(defs.len(), 3);
    for def in defs {
        assert!(!def.summary.is_empty(), "{} has no summary", def.name);
        let block =
            def.description.split("```\n").nth(1).unwrap_or_else(|| panic!("{} has no example", def.name));
        let line = block.lines().find(|l| l.contains(def.name)).expect("the example uses the op");
        let text = example_module(line.trim());
        let mut ctx = Context::new();
        register_dialects(&mut ctx).unwrap();
        let module = parse_module(&mut ctx, text.as_bytes(), "example.qir")
            .unwrap_or_else(|d| panic!("{}: example does not parse:\n{d}\n{text}", def.name));
        verify(&mut ctx, &module)
            .unwrap_or_else(|d| panic!("{}: example does not verify:\n{d}\n{text}", def.name));
    }
}

#[test]
fn traits_and_patterns() {
    let defs = AccelDialect.ops();
    let def = |name: &str| defs.iter().find(|d| d.name == name).unwrap();
    assert!(def("accel.conv2d_relu").has(Traits::PURE));
    assert!(def("accel.conv2d_relu").infer_types.is_none(), "the output scale is chosen, not inferred");
    for dma in ["accel.dma_in", "accel.dma_out"] {
        assert!(def(dma).has(Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE | Traits::QUANT_AGNOSTIC));
        assert!(def(dma).infer_types.is_some());
    }
    let names: Vec<String> =
        AccelDialect.canonicalization_patterns().iter().map(|p| p.name().to_string()).collect();
    assert_eq!(names, ["dma-out-in"]);
}

/// Registering twice, or into a context that already has `fp` and `qnn`, is fine.
#[test]
fn registration_is_idempotent() {
    let mut ctx = Context::new();
    qopt_dialect_qnn::register(&mut ctx).unwrap();
    register_dialects(&mut ctx).unwrap();
    register_dialects(&mut ctx).unwrap();
    let names: Vec<&str> = ctx.dialects().map(|d| d.name()).collect();
    assert_eq!(names.iter().filter(|&&n| n == "accel").count(), 1);
    assert!(names.contains(&"fp") && names.contains(&"qnn"));

    let mut driver = Driver::new("toy-opt");
    register(&mut driver);
    register(&mut driver);
    assert!(driver.passes_mut().get("accel-lower").is_some());
    let ctx = driver.new_context().unwrap();
    assert!(ctx.dialect("accel").is_some());
}

/// The contract reports every broken rule, in order.
#[test]
fn contract_lists_every_reason() {
    let mut ctx = Context::new();
    register_dialects(&mut ctx).unwrap();
    let text = "module {\n  func.func @f(%x: tensor<1x6x4x4x!qnn.uniform<u8:f32, 0.1:0>>, \
                %w: tensor<4x6x5x5x!qnn.uniform<i8:f32, 0.1:0>>) {\n    func.return\n  }\n}\n";
    let module = parse_module(&mut ctx, text.as_bytes(), "t.qir").unwrap();
    let entry =
        module.walk_preorder(module.root()).find(|&op| module.num_regions(op) > 0 && op != module.root());
    let block = module.first_block(module.region(entry.unwrap(), 0));
    let args = module.block_args(block);
    let (x, w) = (module.value_type(args[0]), module.value_type(args[1]));
    let params = ConvParams::implied(&[1, 2]);
    let problems = check_conv(&ctx, x, w, None, x, &params).unwrap_err();
    assert_eq!(
        problems,
        [
            "input channels must be a positive multiple of 8, got 6",
            "input must have i8 storage, got u8 (the accelerator computes on i8)",
            "5x5 kernels are not supported (the accelerator takes 3x3 and 1x1)",
            "output channels must be a positive multiple of 8, got 4",
            "stride [1, 2] is not supported (the accelerator takes [1, 1] and [2, 2])",
            "result must have i8 storage, got u8 (the accelerator computes on i8)",
        ]
    );
}
