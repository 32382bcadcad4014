//! Nothing a user writes makes a qnn verifier, inference or folder panic:
//! random ops built from a pool of well- and ill-formed operand types, result
//! types and attributes go through the whole-module verifier, and every
//! inference and folder is called on random operand lists of any length.

use proptest::prelude::*;
use qopt_ir_core::{
    verify, Attribute, Context, FloatKind, IntType, Module, OpDef, OperationState, QuantParams, QuantType,
    Signedness, Type, DYNAMIC,
};

fn quant(ctx: &mut Context, width: u8, expressed: FloatKind, params: QuantParams) -> Type {
    let storage = IntType { width, signedness: Signedness::Signless };
    let (lo, hi) = (storage.min_value() as i64, storage.max_value() as i64);
    ctx.quant_type(QuantType { storage, storage_min: lo, storage_max: hi, expressed, params })
}

fn per_tensor(scale: f64, zero_point: i64) -> QuantParams {
    QuantParams::PerTensor { scale, zero_point }
}

fn per_axis(axis: u32, n: usize) -> QuantParams {
    QuantParams::PerAxis { axis, scales: vec![0.1; n].into(), zero_points: vec![0; n].into() }
}

/// Operand and result types: floats, integers, quantized (good and bad
/// parameters, per tensor and per axis), of ranks 0 to 4 and unknown sizes,
/// and non-tensor types.
fn type_pool(ctx: &mut Context) -> Vec<Type> {
    let f32_ty = ctx.common().f32;
    let f16_ty = ctx.float_type(FloatKind::F16);
    let i32_ty = ctx.common().i32;
    let i64_ty = ctx.common().i64;
    let elems = vec![
        f32_ty,
        f16_ty,
        i32_ty,
        i64_ty,
        quant(ctx, 8, FloatKind::F32, per_tensor(0.5, 0)),
        quant(ctx, 8, FloatKind::F16, per_tensor(0.25, 3)),
        quant(ctx, 8, FloatKind::F32, per_tensor(0.0, 0)),
        quant(ctx, 8, FloatKind::F32, per_tensor(f64::NAN, 0)),
        quant(ctx, 8, FloatKind::F64, per_tensor(1.0, 0)),
        quant(ctx, 32, FloatKind::F32, per_tensor(1e-30, 0)),
        quant(ctx, 8, FloatKind::F32, per_axis(0, 2)),
        quant(ctx, 8, FloatKind::F32, per_axis(1, 3)),
        quant(ctx, 8, FloatKind::F32, per_axis(3, 1)),
        quant(ctx, 8, FloatKind::F32, per_axis(63, 2)),
    ];
    let shapes: [&[i64]; 9] =
        [&[], &[2], &[3], &[2, 3], &[1, 2, 4, 4], &[2, 3, 3, 3], &[DYNAMIC, 3], &[0, 2], &[4, 2, 1, 1]];
    let mut pool = Vec::new();
    for &e in &elems {
        for s in shapes {
            pool.push(ctx.tensor_type(s, e));
        }
        pool.push(e);
    }
    let func = ctx.function_type(&[f32_ty], &[f32_ty]);
    pool.push(func);
    pool
}

/// Attributes under the names qnn ops read, with good and bad values.
fn attr_pool(ctx: &mut Context, types: &[Type]) -> Vec<(&'static str, Attribute)> {
    let f32_ty = ctx.common().f32;
    let mut pool = Vec::new();
    let ints = [-5i64, -1, 0, 1, 2, 3, 64, i64::MAX, i64::MIN];
    for key in ["axis", "groups", "samples", "bins"] {
        for &v in &ints {
            let a = ctx.i64_attr(v);
            pool.push((key, a));
        }
        let s = ctx.string_attr("x");
        pool.push((key, s));
    }
    for key in ["stride", "pad", "dilation"] {
        for arr in [&[][..], &[1, 1], &[2, 2], &[0, 1], &[1, 1, 1, 1], &[-1, 0, 0, 0], &[i64::MAX, 1]] {
            let a = ctx.i64_array_attr(arr);
            pool.push((key, a));
        }
    }
    for key in ["min", "max", "hist_min", "hist_max", "averaging_constant", "percentile"] {
        for v in [f64::NAN, -1.0, 0.0, 0.5, 1.0, 100.0, f64::INFINITY] {
            let a = ctx.float_attr(v, f32_ty);
            pool.push((key, a));
        }
    }
    for key in ["rounding", "observer", "kind"] {
        for s in ["", "half_up", "half_to_even", "minmax", "histogram", "bogus"] {
            let a = ctx.string_attr(s);
            pool.push((key, a));
        }
    }
    for &t in types.iter().step_by(3) {
        let a = ctx.type_attr(t);
        pool.push(("type", a));
    }
    let hist_ty = ctx.tensor_type(&[2], ctx.common().i64);
    let f2 = ctx.tensor_type(&[2], f32_ty);
    for (key, ty, values) in [
        ("histogram", hist_ty, &[1.0, -1.0][..]),
        ("histogram", hist_ty, &[1.0, 2.0]),
        ("histogram", f2, &[1.0, 2.0]),
        ("min", f2, &[0.0, 1.0]),
        ("max", f2, &[1.0, 0.0]),
        ("max", f2, &[f64::NAN, 0.0]),
    ] {
        if let Ok(d) = qopt_ir_core::DenseElements::from_f64(ctx, ty, values) {
            let a = ctx.dense_attr(d);
            pool.push((key, a));
        }
    }
    pool
}

struct Pools {
    ctx: Context,
    defs: Vec<&'static str>,
    types: Vec<Type>,
    attrs: Vec<(&'static str, Attribute)>,
}

fn pools() -> Pools {
    let mut ctx = Context::new();
    ctx.set_allow_unregistered(true);
    let _ = qopt_dialect_fp::register(&mut ctx);
    let _ = crate::register(&mut ctx);
    let types = type_pool(&mut ctx);
    let attrs = attr_pool(&mut ctx, &types);
    let defs = super::all().iter().map(|d: &OpDef| d.name).collect();
    Pools { ctx, defs, types, attrs }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn verifying_random_ops_never_panics(
        op in any::<prop::sample::Index>(),
        operands in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        result in any::<prop::sample::Index>(),
        attrs in prop::collection::vec(any::<prop::sample::Index>(), 0..5),
        chain in any::<bool>(),
    ) {
        let Pools { mut ctx, defs, types, attrs: attr_pool } = pools();
        let name = ctx.op_name(defs[op.index(defs.len())]);
        let mut module = Module::new();
        let body = module.body();
        let src = ctx.op_name("test.src");
        let mut values = Vec::new();
        for o in &operands {
            let ty = types[o.index(types.len())];
            let def = module.create_op(OperationState::new(src).results(&[ty]));
            module.append_op(body, def);
            values.push(module.result(def, 0));
        }
        let entries: Vec<(&str, Attribute)> = attrs.iter().map(|i| attr_pool[i.index(attr_pool.len())]).collect();
        let dict = ctx.dict_attr(&entries);
        let result_ty = types[result.index(types.len())];
        let op = module.create_op(OperationState::new(name).operands(&values).results(&[result_ty]).attrs(dict));
        module.append_op(body, op);
        if chain && !values.is_empty() {
            // A dequantize feeding the op, for the quantize folder.
            let deq = ctx.op_name("qnn.dequantize");
            let d = module.create_op(OperationState::new(deq).operands(&values[..1]).results(&[result_ty]));
            module.insert_op_before(op, d);
            module.set_operand(op, 0, module.result(d, 0));
        }
        let _ = verify(&mut ctx, &module);
        let def_facts = ctx.op_def(name).map(|d| (d.infer_types, d.fold, d.verify, d.operands));
        if let Some((infer, fold, verifier, arity)) = def_facts {
            // The op's own verifier, even on types the core would reject first:
            // it may rely on the counts only.
            if let Some(verifier) = verifier {
                if arity.accepts(module.num_operands(op)) {
                    let _ = verifier(&qopt_ir_core::OpView::new(&ctx, &module, op));
                }
            }
            let operand_types: Vec<Type> = operands.iter().map(|o| types[o.index(types.len())]).collect();
            if let Some(infer) = infer {
                let _ = infer(&mut ctx, &operand_types, dict);
                let _ = infer(&mut ctx, &[], dict);
            }
            if let Some(fold) = fold {
                let constants = vec![None; module.num_operands(op)];
                let _ = fold(&mut ctx, &module, op, &constants);
            }
        }
    }
}
