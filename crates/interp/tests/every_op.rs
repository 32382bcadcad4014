//! Every function of the dialect and pass golden files (`tests/dialect-fp`,
//! `tests/dialect-qnn`, `tests/passes`), which between them use every op in
//! every accepted form, runs in the interpreter on deterministic random inputs
//! to completion, and every `fp` and `qnn` op executes at least once. This catches
//! kernels that reject (or crash on) what the verifier accepts.

use qopt_interp::{DType, Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::{parse_module, Context, Module, TypeData, DYNAMIC};
use std::path::Path;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi].
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo) as u64 + 1)) as i64
    }
    fn float(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
    }
}

/// A random tensor of IR type `ty`; dynamic dimensions get size 4 (which
/// `@linear`'s `fp.batch_matmul` of `?x16x32` by `4x32x8` needs), quantized
/// elements stay inside their storage range.
fn random_tensor(ctx: &Context, ty: qopt_ir_core::Type, rng: &mut Rng) -> Option<Tensor> {
    let TypeData::Tensor { shape, element } = ctx.type_data(ty) else { return None };
    let dims: Vec<usize> = shape.iter().map(|&d| if d == DYNAMIC { 4 } else { d as usize }).collect();
    let n: usize = dims.iter().product();
    let dtype = DType::of_element(ctx, *element).unwrap();
    let (lo, hi) = match ctx.type_data(*element) {
        TypeData::Quant(q) => (q.storage_min, q.storage_max),
        _ => (-100, 100),
    };
    let ints = |rng: &mut Rng| -> Vec<i64> { (0..n).map(|_| rng.int(lo, hi)).collect() };
    let shape = ndarray::IxDyn(&dims);
    Some(match dtype {
        DType::F32 => Tensor::from_f32(&dims, (0..n).map(|_| rng.float() as f32).collect()).unwrap(),
        DType::F64 => Tensor::F64(
            ndarray::ArrayD::from_shape_vec(shape, (0..n).map(|_| rng.float()).collect()).unwrap(),
        ),
        DType::I8 => Tensor::I8(
            ndarray::ArrayD::from_shape_vec(shape, ints(rng).iter().map(|&v| v as i8).collect()).unwrap(),
        ),
        DType::U8 => Tensor::U8(
            ndarray::ArrayD::from_shape_vec(
                shape,
                ints(rng).iter().map(|&v| v.clamp(0, 255) as u8).collect(),
            )
            .unwrap(),
        ),
        DType::I16 => Tensor::I16(
            ndarray::ArrayD::from_shape_vec(shape, ints(rng).iter().map(|&v| v as i16).collect()).unwrap(),
        ),
        DType::I32 => Tensor::I32(
            ndarray::ArrayD::from_shape_vec(shape, ints(rng).iter().map(|&v| v as i32).collect()).unwrap(),
        ),
        DType::I64 => Tensor::I64(ndarray::ArrayD::from_shape_vec(shape, ints(rng)).unwrap()),
        DType::Bool => Tensor::Bool(
            ndarray::ArrayD::from_shape_vec(shape, ints(rng).iter().map(|&v| v > 0).collect()).unwrap(),
        ),
    })
}

fn functions(ctx: &Context, module: &Module) -> Vec<(String, Vec<qopt_ir_core::Type>)> {
    module
        .top_level_ops()
        .filter(|&op| ctx.op_name_str(module.op_name(op)) == "func.func" && module.num_regions(op) == 1)
        .filter_map(|op| {
            let region = module.region(op, 0);
            let entry = module.blocks(region).next()?;
            let name = module.op_attr(ctx, op, "sym_name").and_then(|a| ctx.attr_as_str(a))?.to_string();
            Some((name, module.block_args(entry).iter().map(|&v| module.value_type(v)).collect()))
        })
        .collect()
}

#[test]
fn every_golden_function_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests");
    let mut files: Vec<_> = [
        "dialect-fp/ops.qir",
        "dialect-fp/canonicalize.qir",
        "dialect-qnn/ops.qir",
        "dialect-qnn/canonicalize.qir",
    ]
    .iter()
    .map(|f| root.join(f))
    .collect();
    for entry in std::fs::read_dir(root.join("passes")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "qir") {
            files.push(path);
        }
    }
    files.sort();
    let kernels = KernelRegistry::standard();
    let mut ran = 0;
    let mut failures = Vec::new();
    let mut executed = std::collections::BTreeSet::new();
    let mut all_ops = std::collections::BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (part, chunk) in text.split("// -----").enumerate() {
            let mut ctx = Context::new();
            qopt_dialect_fp::register(&mut ctx).unwrap();
            qopt_dialect_qnn::register(&mut ctx).unwrap();
            let Ok(module) = parse_module(&mut ctx, chunk.as_bytes(), "t.qir") else { continue };
            if qopt_ir_core::verify(&mut ctx, &module).is_err() {
                continue;
            }
            all_ops.extend(
                ctx.op_defs()
                    .into_iter()
                    .map(|d| d.name.to_string())
                    .filter(|n| n.starts_with("fp.") || n.starts_with("qnn.")),
            );
            let mut rng = Rng(part as u64 + 1);
            for (name, args) in functions(&ctx, &module) {
                // Functions with non-tensor arguments are not runnable.
                let Some(inputs) =
                    args.iter().map(|&t| random_tensor(&ctx, t, &mut rng)).collect::<Option<Vec<_>>>()
                else {
                    continue;
                };
                let mut interp = Interpreter::new(&ctx, &module, &kernels);
                let mut seen = |op| {
                    executed.insert(ctx.op_name_str(module.op_name(op)).to_string());
                };
                match interp.run_with(&name, &inputs, &mut |op, _| seen(op)) {
                    Ok(_) => ran += 1,
                    Err(e) => failures.push(format!("{}: @{name}: {e}", file.display())),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} function(s) failed:\n{}", failures.len(), failures.join("\n"));
    assert!(ran >= 54, "only {ran} functions ran");
    let never: Vec<_> = all_ops.difference(&executed).collect();
    assert!(never.is_empty(), "ops that no golden function executed: {never:?}");
}
