//! Unit tests of `verify.rs`.

use super::*;
use crate::types::{FloatKind, QuantParams, QuantType, Signedness};
use crate::{loc_to_string, LocationData};
use crate::{OperationState, RegionId};

// The shared test dialect has one op per structural property the verifier checks.
use crate::testing::TestDialect;

fn setup() -> (Context, Module) {
    let mut ctx = Context::new();
    assert!(ctx.register_dialect(TestDialect).is_ok());
    (ctx, Module::new())
}

fn check(ctx: &mut Context, m: &Module) -> Vec<String> {
    match verify(ctx, m) {
        Ok(()) => Vec::new(),
        Err(d) => d.0.into_iter().map(|d| d.message).collect(),
    }
}

fn t4(ctx: &mut Context) -> Type {
    let f32 = ctx.common().f32;
    ctx.tensor_type(&[4], f32)
}

/// Appends a new op to `block`.
fn op(
    ctx: &mut Context,
    m: &mut Module,
    block: BlockId,
    name: &str,
    operands: &[ValueId],
    results: &[Type],
) -> OpId {
    let name = ctx.op_name(name);
    let o = m.create_op(OperationState::new(name).operands(operands).results(results));
    m.append_op(block, o);
    o
}

/// Appends a `test.region`-like op with one region holding one block.
fn region_op(ctx: &mut Context, m: &mut Module, block: BlockId, name: &str) -> (OpId, RegionId, BlockId) {
    let n = ctx.op_name(name);
    let o = m.create_op(OperationState::new(n).regions(1));
    m.append_op(block, o);
    let r = m.region(o, 0);
    let b = m.append_block(r, &[]);
    (o, r, b)
}

/// A `func.func @name` in the module body; returns it and its entry block.
fn func(ctx: &mut Context, m: &mut Module, name: &str, inputs: &[Type], results: &[Type]) -> (OpId, BlockId) {
    let fty = ctx.function_type(inputs, results);
    let fty = ctx.type_attr(fty);
    let sym = ctx.string_attr(name);
    let attrs = ctx.dict_attr(&[("sym_name", sym), ("function_type", fty)]);
    let f = m.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
    let body = m.body();
    m.append_op(body, f);
    let region = m.region(f, 0);
    let entry = m.append_block(region, inputs);
    (f, entry)
}

fn result(m: &Module, op: OpId) -> ValueId {
    m.result(op, 0)
}

#[test]
fn valid_func_with_return() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let (_, entry) = func(&mut ctx, &mut m, "main", &[t, t], &[t]);
    let args = m.block_args(entry).to_vec();
    let add = op(&mut ctx, &mut m, entry, "test.add", &args, &[t]);
    let sum = result(&m, add);
    op(&mut ctx, &mut m, entry, "func.return", &[sum], &[]);
    // A declaration (a body region without blocks) is fine too.
    let name = ctx.string_attr("ext");
    let fn_ty = ctx.function_type(&[t], &[t]);
    let fn_ty = ctx.type_attr(fn_ty);
    let attrs = ctx.dict_attr(&[("sym_name", name), ("function_type", fn_ty)]);
    let decl = m.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
    let body = m.body();
    m.append_op(body, decl);
    assert_eq!(check(&mut ctx, &m), Vec::<String>::new());
    // An empty entry block is a body without its return.
    func(&mut ctx, &mut m, "empty", &[t], &[t]);
    assert_eq!(check(&mut ctx, &m), ["'func.func' op function body must end with 'func.return'"]);
}

#[test]
fn types_inside_attributes_are_verified_once() {
    let (mut ctx, mut m) = setup();
    let bad = ctx.intern_type(TypeData::Opaque { name: "nodialect.t".into(), body: "".into() });
    let bad = ctx.tensor_type(&[4], bad);
    // A declaration has no arguments: its `function_type` is where the type is.
    let fty = ctx.function_type(&[bad], &[]);
    let fty = ctx.type_attr(fty);
    let sym = ctx.string_attr("ext");
    let attrs = ctx.dict_attr(&[("sym_name", sym), ("function_type", fty)]);
    let decl = m.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
    let body = m.body();
    m.append_op(body, decl);
    let errors = check(&mut ctx, &m);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("attribute 'function_type' of 'func.func' holds an invalid type"),
        "{errors:?}"
    );
    assert!(errors[0]
        .ends_with("unregistered dialect 'nodialect' (use --allow-unregistered-dialect to accept it)"));
    // A function with a body reports the argument, not its signature again.
    let (mut ctx, mut m) = setup();
    let bad = ctx.intern_type(TypeData::Opaque { name: "nodialect.t".into(), body: "".into() });
    let (_, entry) = func(&mut ctx, &mut m, "main", &[bad], &[]);
    op(&mut ctx, &mut m, entry, "func.return", &[], &[]);
    let errors = check(&mut ctx, &m);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("argument #0 of block #0 in region #0 of 'func.func'"), "{errors:?}");
}

#[test]
fn empty_function_body_is_a_declaration() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let fty = ctx.function_type(&[t], &[t]);
    let fty = ctx.type_attr(fty);
    let sym = ctx.string_attr("ext");
    let attrs = ctx.dict_attr(&[("sym_name", sym), ("function_type", fty)]);
    let f = m.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
    let body = m.body();
    m.append_op(body, f);
    assert_eq!(check(&mut ctx, &m), Vec::<String>::new());
}

#[test]
fn wrong_arity() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let v = result(&m, c);
    op(&mut ctx, &mut m, body, "test.add", &[v, v, v], &[t]);
    assert_eq!(check(&mut ctx, &m), ["'test.add' op expects 2 operands, found 3"]);
}

#[test]
fn unknown_op_with_suggestion() {
    let (mut ctx, mut m) = setup();
    let body = m.body();
    op(&mut ctx, &mut m, body, "test.ad", &[], &[]);
    op(&mut ctx, &mut m, body, "test.zzzzzz", &[], &[]);
    assert_eq!(
        check(&mut ctx, &m),
        [
            "unknown op 'test.ad' in dialect 'test'; did you mean 'test.add'?",
            "unknown op 'test.zzzzzz' in dialect 'test'",
        ]
    );
}

#[test]
fn unregistered_op_with_and_without_allowance() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    op(&mut ctx, &mut m, body, "foo.bar", &[], &[t]);
    assert_eq!(
        check(&mut ctx, &m),
        ["unregistered op 'foo.bar' (use --allow-unregistered-dialect to accept it)"]
    );
    ctx.set_allow_unregistered(true);
    assert_eq!(check(&mut ctx, &m), Vec::<String>::new());
    // Allowing unregistered dialects does not accept unknown ops of registered ones.
    op(&mut ctx, &mut m, body, "test.nope", &[], &[]);
    assert_eq!(check(&mut ctx, &m), ["unknown op 'test.nope' in dialect 'test'"]);
}

#[test]
fn use_before_def() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let name = ctx.op_name("test.const");
    let c = m.create_op(OperationState::new(name).results(&[t]));
    let v = result(&m, c);
    op(&mut ctx, &mut m, body, "test.add", &[v, v], &[t]);
    m.append_op(body, c);
    let msgs = check(&mut ctx, &m);
    assert_eq!(
        msgs,
        [
            format!("operand #0 of 'test.add' uses {v} before it is defined"),
            format!("operand #1 of 'test.add' uses {v} before it is defined"),
        ]
    );
}

#[test]
fn use_of_own_result_is_not_dominated() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let v = result(&m, c);
    let inf = op(&mut ctx, &mut m, body, "test.infer", &[v], &[t]);
    let own = result(&m, inf);
    m.set_operand(inf, 0, own);
    assert_eq!(check(&mut ctx, &m), [format!("operand #0 of 'test.infer' uses {own} before it is defined")]);
}

#[test]
fn values_of_enclosing_blocks_dominate() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let v = result(&m, c);
    let (_, region, inner) = region_op(&mut ctx, &mut m, body, "test.region");
    let _ = region;
    let arg = m.add_block_arg(inner, t);
    op(&mut ctx, &mut m, inner, "test.add", &[v, arg], &[t]);
    op(&mut ctx, &mut m, inner, "test.term", &[], &[]);
    assert_eq!(check(&mut ctx, &m), Vec::<String>::new());
}

#[test]
fn value_defined_after_the_enclosing_op_does_not_dominate() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let (_, _, inner) = region_op(&mut ctx, &mut m, body, "test.region");
    let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let v = result(&m, c);
    op(&mut ctx, &mut m, inner, "test.infer", &[v], &[t]);
    op(&mut ctx, &mut m, inner, "test.term", &[], &[]);
    assert_eq!(
        check(&mut ctx, &m),
        [format!("operand #0 of 'test.infer' uses {v}, a value that does not dominate it")]
    );
}

#[test]
fn sibling_block_value_does_not_dominate() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let (_, region, first) = region_op(&mut ctx, &mut m, body, "test.region");
    let c = op(&mut ctx, &mut m, first, "test.const", &[], &[t]);
    let v = result(&m, c);
    op(&mut ctx, &mut m, first, "test.term", &[], &[]);
    let second = m.append_block(region, &[]);
    op(&mut ctx, &mut m, second, "test.add", &[v, v], &[t]);
    op(&mut ctx, &mut m, second, "test.term", &[], &[]);
    let diags = verify(&mut ctx, &m).err().map(|d| d.0).unwrap_or_default();
    assert_eq!(diags.len(), 2);
    assert_eq!(
        diags[0].message,
        format!("operand #0 of 'test.add' uses {v}, a value that does not dominate it")
    );
    assert!(diags[0].notes[0].message.contains("straight-line"));
}

#[test]
fn isolated_from_above_violation() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let v = result(&m, c);
    let (_, _, inner) = region_op(&mut ctx, &mut m, body, "test.isolated");
    let (_, _, deeper) = region_op(&mut ctx, &mut m, inner, "test.region");
    op(&mut ctx, &mut m, deeper, "test.infer", &[v], &[t]);
    op(&mut ctx, &mut m, deeper, "test.term", &[], &[]);
    assert_eq!(
        check(&mut ctx, &m),
        [format!(
            "'test.infer' uses a value defined outside the enclosing isolated-from-above 'test.isolated' \
             (operand #0, {v})"
        )]
    );
}

#[test]
fn function_may_not_use_another_functions_values() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let (_, a) = func(&mut ctx, &mut m, "a", &[t], &[t]);
    let x = m.block_args(a)[0];
    op(&mut ctx, &mut m, a, "func.return", &[x], &[]);
    let (_, b) = func(&mut ctx, &mut m, "b", &[], &[t]);
    op(&mut ctx, &mut m, b, "func.return", &[x], &[]);
    assert_eq!(
        check(&mut ctx, &m),
        [format!(
            "'func.return' uses a value defined outside the enclosing isolated-from-above 'func.func' \
             (operand #0, {x})"
        )]
    );
}

#[test]
fn missing_terminator() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let (_, _, inner) = region_op(&mut ctx, &mut m, body, "test.region");
    op(&mut ctx, &mut m, inner, "test.const", &[], &[t]);
    // An empty region of a terminator-needing op is fine.
    region_op(&mut ctx, &mut m, body, "test.region");
    assert_eq!(check(&mut ctx, &m), ["block must end with a terminator; 'test.const' is not one"]);
}

#[test]
fn terminator_not_last() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let (_, entry) = func(&mut ctx, &mut m, "f", &[t], &[t]);
    let x = m.block_args(entry)[0];
    op(&mut ctx, &mut m, entry, "func.return", &[x], &[]);
    op(&mut ctx, &mut m, entry, "func.return", &[x], &[]);
    assert_eq!(check(&mut ctx, &m), ["terminator 'func.return' must be the last op of its block"]);
}

#[test]
fn same_operands_and_result_type_violation() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let i8 = ctx.int_type(8, Signedness::Signless);
    let ti8 = ctx.tensor_type(&[4], i8);
    let body = m.body();
    let a = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let b = op(&mut ctx, &mut m, body, "test.const", &[], &[ti8]);
    let (a, b) = (result(&m, a), result(&m, b));
    op(&mut ctx, &mut m, body, "test.add", &[a, b], &[t]);
    assert_eq!(
        check(&mut ctx, &m),
        ["'test.add' op requires all operands and results to have the same type; \
          operand #1 is tensor<4xi8> but operand #0 is tensor<4xf32>"]
    );
}

#[test]
fn inference_mismatch() {
    let (mut ctx, mut m) = setup();
    let f32 = ctx.common().f32;
    let t = ctx.tensor_type(&[1, DYNAMIC, 4], f32);
    let other = ctx.tensor_type(&[2], f32);
    let body = m.body();
    let a = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let a = result(&m, a);
    op(&mut ctx, &mut m, body, "test.infer", &[a], &[other]);
    assert_eq!(
        check(&mut ctx, &m),
        ["'test.infer' op inferred result type tensor<1x?x4xf32> but the op declares tensor<2xf32>"]
    );
}

fn quant(ctx: &mut Context, zero_point: i64) -> Type {
    ctx.quant_type(QuantType {
        storage: IntType { width: 8, signedness: Signedness::Signless },
        storage_min: -128,
        storage_max: 127,
        expressed: FloatKind::F32,
        params: QuantParams::PerTensor { scale: 0.5, zero_point },
    })
}

#[test]
fn bad_quant_type() {
    let (mut ctx, mut m) = setup();
    let q = quant(&mut ctx, 300);
    let t = ctx.tensor_type(&[4], q);
    let body = m.body();
    op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let msg = "result #0 of 'test.const' has invalid type tensor<4x!qnn.uniform<i8:f32, 0.5:300>>: \
               element type !qnn.uniform<i8:f32, 0.5:300> is invalid: \
               zero point 300 is outside the storage range [-128, 127]";
    // Reported at each op (the verdict is cached, not the report).
    assert_eq!(check(&mut ctx, &m), [msg, msg]);
    let good = quant(&mut ctx, -3);
    assert_eq!(type_to_string(&ctx, good), "!qnn.uniform<i8:f32, 0.5:-3>");
}

#[test]
fn quant_types_go_to_the_qnn_dialect() {
    struct Qnn;
    impl Dialect for Qnn {
        fn name(&self) -> &'static str {
            "qnn"
        }
        fn ops(&self) -> Vec<OpDef> {
            Vec::new()
        }
        fn verify_type(&self, ctx: &Context, ty: Type) -> Result<(), String> {
            match ctx.type_data(ty) {
                TypeData::Quant(QuantType { params: QuantParams::PerTensor { scale, .. }, .. })
                    if *scale <= 0.0 =>
                {
                    Err(format!("scale {scale} is not positive"))
                }
                _ => Ok(()),
            }
        }
    }
    let (mut ctx, mut m) = setup();
    assert!(ctx.register_dialect(Qnn).is_ok());
    let q = ctx.quant_type(QuantType {
        storage: IntType { width: 8, signedness: Signedness::Unsigned },
        storage_min: 0,
        storage_max: 255,
        expressed: FloatKind::F32,
        params: QuantParams::PerTensor { scale: -1.0, zero_point: 0 },
    });
    let body = m.body();
    op(&mut ctx, &mut m, body, "test.const", &[], &[q]);
    assert_eq!(
        check(&mut ctx, &m),
        ["result #0 of 'test.const' has invalid type !qnn.uniform<u8:f32, -1.0:0>: scale -1 is not positive"]
    );
}

#[test]
fn malformed_types() {
    let (mut ctx, mut m) = setup();
    let f32 = ctx.common().f32;
    let neg = ctx.tensor_type(&[2, -5], f32);
    let opaque = ctx.intern_type(TypeData::Opaque { name: "foo.thing".into(), body: "".into() });
    let per_axis = ctx.quant_type(QuantType {
        storage: IntType { width: 8, signedness: Signedness::Signless },
        storage_min: -127,
        storage_max: 127,
        expressed: FloatKind::F32,
        params: QuantParams::PerAxis { axis: 0, scales: Box::new([0.1, 0.2]), zero_points: Box::new([0]) },
    });
    let body = m.body();
    op(&mut ctx, &mut m, body, "test.const", &[], &[neg]);
    op(&mut ctx, &mut m, body, "test.const", &[], &[opaque]);
    op(&mut ctx, &mut m, body, "test.const", &[], &[per_axis]);
    assert_eq!(
        check(&mut ctx, &m),
        [
            "result #0 of 'test.const' has invalid type tensor<2x-5xf32>: dimension #1 is -5; \
             sizes are >= 0 or ? (dynamic)",
            "result #0 of 'test.const' has invalid type !foo.thing: it belongs to unregistered dialect 'foo' \
             (use --allow-unregistered-dialect to accept it)",
            "result #0 of 'test.const' has invalid type !qnn.uniform<i8<-127:127>:f32:0, {0.1:0, 0.2:?}>: \
             per-axis parameters have 2 scales but 1 zero points",
        ]
    );
}

#[test]
fn func_return_type_mismatch() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let i8 = ctx.int_type(8, Signedness::Signless);
    let ti8 = ctx.tensor_type(&[4], i8);
    let (_, entry) = func(&mut ctx, &mut m, "f", &[ti8], &[t]);
    let x = m.block_args(entry)[0];
    op(&mut ctx, &mut m, entry, "func.return", &[x], &[]);
    assert_eq!(
        check(&mut ctx, &m),
        ["'func.return' op type of return operand #0 does not match the function's result type"]
    );
}

#[test]
fn call_to_missing_function() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let (_, entry) = func(&mut ctx, &mut m, "f", &[t], &[t]);
    let x = m.block_args(entry)[0];
    let callee = ctx.symbol_ref_attr("missing");
    let attrs = ctx.dict_attr(&[("callee", callee)]);
    let call = m.create_op(OperationState::new(OpName::CALL).operands(&[x]).results(&[t]).attrs(attrs));
    m.append_op(entry, call);
    let r = result(&m, call);
    op(&mut ctx, &mut m, entry, "func.return", &[r], &[]);
    assert_eq!(check(&mut ctx, &m), ["'func.call' op no function named '@missing' in the module"]);
}

#[test]
fn attributes_must_be_a_dictionary() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let not_dict = ctx.i64_attr(3);
    m.set_op_attrs(c, not_dict);
    assert_eq!(check(&mut ctx, &m), ["'test.const' op attributes must be a dictionary"]);
}

#[test]
fn all_errors_are_collected() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let v = result(&m, c);
    op(&mut ctx, &mut m, body, "test.add", &[v], &[t]);
    op(&mut ctx, &mut m, body, "test.infer", &[v, v], &[t]);
    assert_eq!(
        check(&mut ctx, &m),
        ["'test.add' op expects 2 operands, found 1", "'test.infer' op expects 1 operand, found 2"]
    );
}

#[test]
fn diagnostics_are_located_at_the_op() {
    let (mut ctx, mut m) = setup();
    m.set_source_name(Some(Arc::from("model.qir")));
    let t = t4(&mut ctx);
    let body = m.body();
    let name = ctx.op_name("test.add");
    let mut state = OperationState::new(name).results(&[t]);
    state.pos = SrcPos { line: 3, col: 5 };
    state.loc = ctx.name_loc("conv1");
    let o = m.create_op(state);
    m.append_op(body, o);
    // No parsed position: the location's file:line:col is used.
    let mut state = OperationState::new(name).results(&[t]);
    state.loc = ctx.file_loc("model.onnx", 12, 0);
    let o = m.create_op(state);
    m.append_op(body, o);
    let diags = verify(&mut ctx, &m).err().map(|d| d.0).unwrap_or_default();
    assert_eq!(diags.len(), 2);
    assert_eq!(diags[0].to_string(), "model.qir:3:5: error: 'test.add' op expects 2 operands, found 0");
    assert_eq!(diags[0].notes.len(), 1);
    assert_eq!(diags[0].notes[0].message, "op location: loc(\"conv1\")");
    assert_eq!(diags[0].notes[0].severity, crate::Severity::Note);
    assert_eq!(diags[1].to_string(), "model.onnx:12:0: error: 'test.add' op expects 2 operands, found 0");
    assert!(diags[1].notes.is_empty());
}

#[test]
fn use_of_erased_value() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let v = result(&m, c);
    let user = op(&mut ctx, &mut m, body, "test.infer", &[v], &[t]);
    // Erase the user first, then detach and erase the def; then point a new op at it.
    assert!(m.erase_op(user).is_ok());
    assert!(m.erase_op(c).is_ok());
    let name = ctx.op_name("test.infer");
    // Build a slot referring to the erased result without going through the use list.
    let o = m.create_op(OperationState::new(name).operands(&[v]).results(&[t]));
    m.append_op(body, o);
    let msgs = check(&mut ctx, &m);
    assert!(
        msgs.contains(&format!("operand #0 of 'test.infer' uses {v}, a result of an erased op")),
        "{msgs:?}"
    );
}

#[test]
fn verify_op_checks_against_enclosing_blocks() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let c = op(&mut ctx, &mut m, body, "test.const", &[], &[t]);
    let v = result(&m, c);
    let (outer, _, inner) = region_op(&mut ctx, &mut m, body, "test.region");
    op(&mut ctx, &mut m, inner, "test.add", &[v, v], &[t]);
    op(&mut ctx, &mut m, inner, "test.term", &[], &[]);
    assert_eq!(verify_op(&mut ctx, &m, outer), Ok(()));
    // Move the const after the region op: now it does not dominate the use.
    m.move_op_to_end(c, body);
    let errs = verify_op(&mut ctx, &m, outer).err().map(|d| d.0.len());
    assert_eq!(errs, Some(2));
}

#[test]
fn deep_nest_verifies_without_stack_overflow() {
    let handle = std::thread::Builder::new().stack_size(2 << 20).spawn(|| {
        let (mut ctx, mut m) = setup();
        let t = t4(&mut ctx);
        let mut block = m.body();
        let c = op(&mut ctx, &mut m, block, "test.const", &[], &[t]);
        let v = result(&m, c);
        for _ in 0..10_000 {
            let (_, _, inner) = region_op(&mut ctx, &mut m, block, "test.region");
            if block != m.body() {
                op(&mut ctx, &mut m, block, "test.term", &[], &[]);
            }
            block = inner;
        }
        // The deepest op uses a value from the outermost block.
        op(&mut ctx, &mut m, block, "test.add", &[v, v], &[t]);
        op(&mut ctx, &mut m, block, "test.term", &[], &[]);
        check(&mut ctx, &m)
    });
    let msgs = handle.map(|h| h.join());
    assert!(matches!(msgs, Ok(Ok(ref v)) if v.is_empty()), "{msgs:?}");
}

#[test]
fn op_verifier_messages_name_the_op_once() {
    assert_eq!(
        prefix_op("func.func", "func.func needs a 'sym_name' string attribute"),
        "'func.func' op needs a 'sym_name' string attribute"
    );
    assert_eq!(
        prefix_op("func.return", "'func.return' must be inside a 'func.func'"),
        "'func.return' must be inside a 'func.func'"
    );
    assert_eq!(prefix_op("func.call", "no function named '@f'"), "'func.call' op no function named '@f'");
}

#[test]
fn use_of_a_detached_op_result() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let body = m.body();
    let name = ctx.op_name("test.const");
    let detached = m.create_op(OperationState::new(name).results(&[t]));
    let v = result(&m, detached);
    op(&mut ctx, &mut m, body, "test.infer", &[v], &[t]);
    assert_eq!(
        check(&mut ctx, &m),
        [format!("operand #0 of 'test.infer' uses {v}, which is defined outside any block")]
    );
}

#[test]
fn op_name_suggestions() {
    let (ctx, _) = setup();
    assert_eq!(suggest_op(&ctx, "test", "test.reigon"), Some("test.region"));
    assert_eq!(suggest_op(&ctx, "test", "test.cons"), Some("test.const"));
    assert_eq!(suggest_op(&ctx, "test", "test.xyz"), None);
}

#[test]
fn location_and_type_to_string() {
    let (mut ctx, _) = setup();
    let a = ctx.name_loc("a");
    let f = ctx.file_loc("m.onnx", 3, 1);
    let b = ctx.symbol("b");
    let named = ctx.intern_loc(LocationData::Name { name: b, child: f });
    let fused = ctx.fused_loc(&[a, named]);
    assert_eq!(loc_to_string(&ctx, fused), "loc(fused[\"a\", \"b\"(\"m.onnx\":3:1)])");
    let f32 = ctx.common().f32;
    let i32 = ctx.common().i32;
    let fty = ctx.function_type(&[f32, i32], &[f32]);
    assert_eq!(type_to_string(&ctx, fty), "(f32, i32) -> f32");
    let fty2 = ctx.function_type(&[], &[f32, i32]);
    assert_eq!(type_to_string(&ctx, fty2), "() -> (f32, i32)");
    let scalar = ctx.tensor_type(&[], f32);
    assert_eq!(type_to_string(&ctx, scalar), "tensor<f32>");
}

/// Release-mode timing of a 1,000,000-op function:
/// `cargo test --release -p qopt-ir-core verify::tests::million -- --ignored --nocapture`.
#[test]
#[ignore]
fn million_ops_timing() {
    let (mut ctx, mut m) = setup();
    let t = t4(&mut ctx);
    let (_, entry) = func(&mut ctx, &mut m, "big", &[t], &[t]);
    let mut x = m.block_args(entry)[0];
    for i in 0..1_000_000u32 {
        let o = if i & 1 == 0 {
            op(&mut ctx, &mut m, entry, "test.add", &[x, x], &[t])
        } else {
            op(&mut ctx, &mut m, entry, "test.infer", &[x], &[t])
        };
        x = result(&m, o);
    }
    op(&mut ctx, &mut m, entry, "func.return", &[x], &[]);
    let start = std::time::Instant::now();
    let r = verify(&mut ctx, &m);
    let took = start.elapsed();
    println!("verified {} ops in {took:?}", m.count_ops());
    assert!(r.is_ok());
}
