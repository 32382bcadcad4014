//! Deterministic random arguments for a function: what `qrun --random-inputs`
//! and `qopt --verify-numerics` run a model on, drawn from
//! [`qopt_ir_core::SplitMix64`].
//!
//! - [`random_arguments`]: one tensor per argument type, one generator stream
//!   running through the arguments in order. Floats are standard normal,
//!   quantized values uniform over the type's `[storage_min, storage_max]`,
//!   `i1` fair booleans; plain integers either over their whole range or small
//!   ([`IntegerValues`]); dynamic dimensions get a fixed size or are an error
//!   ([`RandomInputs::dynamic_size`]).
//!
//! Invariants: the same seed and types give the same tensors on every
//! machine; nothing reachable from IR panics (a non-tensor argument, an
//! element type without storage or more elements than the interpreter's
//! [`MAX_ELEMENTS`] is an error naming the argument, found before anything is
//! allocated).

use crate::exec::MAX_ELEMENTS;
use crate::tensor::{DType, Tensor};
use ndarray::{ArrayD, IxDyn};
use qopt_dialect_qnn::quant_params::quant_element;
use qopt_ir_core::SplitMix64;
use qopt_ir_core::{type_to_string, Context, Type, TypeData, DYNAMIC};

/// The values plain (not quantized) integer arguments get.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum IntegerValues {
    /// Uniform over the whole range of the integer type (`qrun`).
    FullRange,
    /// Uniform over [`SMALL_INTEGERS`] (cut to the type's range), so index and
    /// size arguments stay valid (`--verify-numerics`).
    Small,
}

/// The range of [`IntegerValues::Small`].
pub const SMALL_INTEGERS: (i128, i128) = (0, 7);

/// How [`random_arguments`] draws values.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RandomInputs {
    /// The values of plain integer arguments.
    pub integers: IntegerValues,
    /// The size a dynamic dimension (`?`) gets; `None` makes a dynamic
    /// dimension an error.
    pub dynamic_size: Option<usize>,
}

/// Why an argument could not be generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RandomInputError {
    /// The argument's position.
    pub argument: usize,
    /// What is wrong with it, to follow the argument's name
    /// (`has type i32, not a tensor`).
    pub message: String,
}

/// A tensor for each type of `arg_types`, in order, from one generator seeded
/// with `seed` (see the module docs for the distributions).
pub fn random_arguments(
    ctx: &Context,
    arg_types: &[Type],
    seed: u64,
    how: &RandomInputs,
) -> Result<Vec<Tensor>, RandomInputError> {
    let mut rng = SplitMix64::new(seed);
    // Every argument is checked before any is generated, so a bad last one
    // costs no allocation.
    let plans = arg_types
        .iter()
        .enumerate()
        .map(|(argument, &ty)| {
            plan_argument(ctx, ty, how).map_err(|message| RandomInputError { argument, message })
        })
        .collect::<Result<Vec<_>, _>>()?;
    plans
        .into_iter()
        .enumerate()
        .map(|(argument, plan)| {
            plan.generate(&mut rng).map_err(|message| RandomInputError { argument, message })
        })
        .collect()
}

/// Checks, without generating anything, that [`random_arguments`] can
/// generate every argument of `arg_types` (the same errors).
pub fn check_random_arguments(
    ctx: &Context,
    arg_types: &[Type],
    how: &RandomInputs,
) -> Result<(), RandomInputError> {
    for (argument, &ty) in arg_types.iter().enumerate() {
        plan_argument(ctx, ty, how).map_err(|message| RandomInputError { argument, message })?;
    }
    Ok(())
}

/// What to generate for one argument.
struct ArgumentPlan {
    dims: Vec<usize>,
    dtype: DType,
    /// The integer values to draw from (integer dtypes only).
    int_range: (i128, i128),
}

fn plan_argument(ctx: &Context, ty: Type, how: &RandomInputs) -> Result<ArgumentPlan, String> {
    let text = || type_to_string(ctx, ty);
    let TypeData::Tensor { shape, element } = ctx.type_data(ty) else {
        return Err(format!("has type {}, not a tensor", text()));
    };
    let mut dims = Vec::with_capacity(shape.len());
    for &d in shape.iter() {
        let size = match (d, how.dynamic_size) {
            (DYNAMIC, Some(size)) => size,
            (DYNAMIC, None) => return Err(format!("has a dynamic shape ({})", text())),
            _ => usize::try_from(d).map_err(|_| format!("has a negative dimension ({})", text()))?,
        };
        dims.push(size);
    }
    let elements = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
    if elements.is_none_or(|n| n > MAX_ELEMENTS) {
        return Err(format!(
            "has type {}, more than the interpreter's limit of {MAX_ELEMENTS} elements",
            text()
        ));
    }
    let dtype = DType::of_element(ctx, *element)?;
    let int_range = match (quant_element(ctx, *element), ctx.type_data(*element)) {
        (Some(q), _) => (i128::from(q.storage_min), i128::from(q.storage_max)),
        (None, TypeData::Int(t)) => {
            let (lo, hi) = (t.min_value(), t.max_value());
            match how.integers {
                IntegerValues::FullRange => (lo, hi),
                IntegerValues::Small => (SMALL_INTEGERS.0.max(lo), SMALL_INTEGERS.1.min(hi)),
            }
        }
        // `index`: stored as i64.
        _ => match how.integers {
            IntegerValues::FullRange => (i128::from(i64::MIN), i128::from(i64::MAX)),
            IntegerValues::Small => SMALL_INTEGERS,
        },
    };
    Ok(ArgumentPlan { dims, dtype, int_range })
}

impl ArgumentPlan {
    fn generate(&self, rng: &mut SplitMix64) -> Result<Tensor, String> {
        let n: usize = self.dims.iter().product();
        let (lo, hi) = self.int_range;
        Ok(match self.dtype {
            DType::F32 => Tensor::F32(self.array(filled(n, || rng.normal() as f32)?)?),
            DType::F64 => Tensor::F64(self.array(filled(n, || rng.normal())?)?),
            DType::Bool => Tensor::Bool(self.array(filled(n, || rng.next_u64() & 1 == 1)?)?),
            DType::I8 => Tensor::I8(self.array(ints(rng, n, lo, hi)?)?),
            DType::U8 => Tensor::U8(self.array(ints(rng, n, lo, hi)?)?),
            DType::I16 => Tensor::I16(self.array(ints(rng, n, lo, hi)?)?),
            DType::I32 => Tensor::I32(self.array(ints(rng, n, lo, hi)?)?),
            DType::I64 => Tensor::I64(self.array(ints(rng, n, lo, hi)?)?),
        })
    }

    fn array<T>(&self, values: Vec<T>) -> Result<ArrayD<T>, String> {
        ArrayD::from_shape_vec(IxDyn(&self.dims), values).map_err(|e| e.to_string())
    }
}

/// `n` values of `next`, in a buffer reserved fallibly: an argument below
/// [`MAX_ELEMENTS`] may still be more than the memory there is (a ulimit, a
/// small machine), and that must be an error, not an abort.
fn filled<T>(n: usize, mut next: impl FnMut() -> T) -> Result<Vec<T>, String> {
    let mut values = Vec::new();
    values.try_reserve_exact(n).map_err(|_| {
        let bytes = (n as u128) * std::mem::size_of::<T>() as u128;
        format!("needs {bytes} bytes for its {n} elements, which cannot be allocated")
    })?;
    values.extend((0..n).map(|_| next()));
    Ok(values)
}

/// `n` integers uniform over `lo..=hi`, each converted to the storage type.
fn ints<T: TryFrom<i128> + Copy>(
    rng: &mut SplitMix64,
    n: usize,
    lo: i128,
    hi: i128,
) -> Result<Vec<T>, String> {
    let (Ok(low), Ok(_)) = (T::try_from(lo), T::try_from(hi)) else {
        return Err(format!("values {lo}..={hi} do not fit the storage type"));
    };
    // Both ends fit, so every value between them does: `low` is never used.
    filled(n, || T::try_from(rng.int_in(lo, hi)).unwrap_or(low))
}

#[cfg(test)]
mod tests {
    use super::*;

    const QRUN: RandomInputs = RandomInputs { integers: IntegerValues::FullRange, dynamic_size: Some(1) };
    const STRICT: RandomInputs = RandomInputs { integers: IntegerValues::Small, dynamic_size: None };

    #[test]
    fn same_seed_same_sequence_other_seed_other_sequence() {
        let take = |seed| {
            let mut r = SplitMix64::new(seed);
            (0..8).map(|_| r.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(take(7), take(7));
        assert_ne!(take(7), take(8));
        // The reference sequence of SplitMix64 from seed 0.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn normal_samples_have_mean_0_and_variance_1() {
        let mut r = SplitMix64::new(42);
        let n = 20_000;
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "variance {var}");
        assert!(xs.iter().all(|x| x.is_finite()));
    }

    #[test]
    fn integers_cover_the_range_and_stay_inside() {
        let mut r = SplitMix64::new(1);
        let mut seen = [false; 16];
        for _ in 0..1000 {
            let v = r.int_in(-8, 7);
            assert!((-8..=7).contains(&v));
            seen[(v + 8) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        let full = r.int_in(i128::from(i64::MIN), i128::from(i64::MAX));
        assert!(i64::try_from(full).is_ok());
        assert_eq!(r.int_in(5, 5), 5);
        assert_eq!(r.int_in(5, 4), 5, "an empty range gives its low end");
    }

    /// The argument types of a function taking `texts`.
    fn parse_types(ctx: &mut Context, texts: &[&str]) -> Vec<Type> {
        let args: Vec<String> = texts.iter().enumerate().map(|(i, t)| format!("%a{i}: {t}")).collect();
        let text = format!("func.func @f({}) {{\n  func.return\n}}\n", args.join(", "));
        let module = qopt_ir_core::parse_module(ctx, text.as_bytes(), "t.qir").unwrap();
        let op = module.lookup_symbol(ctx, "f").unwrap();
        let ty = module.op_attr(ctx, op, "function_type").unwrap();
        match ctx.attr_data(ty) {
            qopt_ir_core::AttrData::Type(t) => match ctx.type_data(*t) {
                TypeData::Function { inputs, .. } => inputs.to_vec(),
                _ => unreachable!("a function type"),
            },
            _ => unreachable!("a type attribute"),
        }
    }

    use qopt_dialect_qnn::context;

    #[test]
    fn each_element_type_gets_its_distribution() {
        let mut ctx = context();
        let types = parse_types(
            &mut ctx,
            &[
                "tensor<2x3x!qnn.uniform<i8<-127:127>:f32, 0.1:0>>",
                "tensor<4xi1>",
                "tensor<64xi32>",
                "tensor<?x3xf32>",
            ],
        );
        let a = random_arguments(&ctx, &types, 7, &QRUN).unwrap();
        assert_eq!(a, random_arguments(&ctx, &types, 7, &QRUN).unwrap(), "deterministic");
        assert_ne!(a, random_arguments(&ctx, &types, 8, &QRUN).unwrap());
        assert!(a[0].to_f64_vec().iter().all(|&v| (-127.0..=127.0).contains(&v)));
        assert_eq!(a[1].dtype(), DType::Bool);
        assert!(a[2].to_f64_vec().iter().any(|&v| v.abs() > 1000.0), "the full i32 range");
        assert_eq!(a[3].shape(), [1, 3], "a dynamic dimension gets the given size");
        let small = random_arguments(&ctx, &types[..3], 7, &STRICT).unwrap();
        assert!(small[2].to_f64_vec().iter().all(|&v| (0.0..=7.0).contains(&v)));
        assert_eq!(small[0], a[0], "quantized values ignore the integer choice");
    }

    #[test]
    fn a_buffer_that_cannot_be_allocated_is_an_error() {
        let e = filled(usize::MAX / 2, || 0u64).unwrap_err();
        assert!(e.ends_with("elements, which cannot be allocated"), "{e}");
        assert_eq!(filled(3, || 7u8).unwrap(), [7, 7, 7]);
    }

    #[test]
    fn bad_arguments_are_errors_naming_them() {
        let mut ctx = context();
        let types = parse_types(&mut ctx, &["tensor<2xf32>", "tensor<?x3xf32>"]);
        let e = random_arguments(&ctx, &types, 0, &STRICT).unwrap_err();
        assert_eq!(
            e,
            RandomInputError { argument: 1, message: "has a dynamic shape (tensor<?x3xf32>)".into() }
        );
        let huge = parse_types(&mut ctx, &["tensor<65536x65536xf32>", "f32"]);
        let e = random_arguments(&ctx, &huge[..1], 0, &QRUN).unwrap_err();
        assert!(e.message.contains("more than the interpreter's limit"), "{}", e.message);
        let overflow = parse_types(&mut ctx, &["tensor<281474976710656x281474976710656xf32>"]);
        assert!(random_arguments(&ctx, &overflow, 0, &QRUN).is_err());
        let e = random_arguments(&ctx, &huge[1..], 0, &QRUN).unwrap_err();
        assert_eq!(e.message, "has type f32, not a tensor");
    }
}
