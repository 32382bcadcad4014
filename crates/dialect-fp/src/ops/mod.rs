//! The ops of the `fp` dialect, one module per family, and what their verifiers
//! and type inference share.
//!
//! Each op's checks live in one [`Signature::check`]: it reads the operand types
//! and the attribute dictionary, rejects anything wrong with a message naming
//! the operand or attribute, and computes the result types. It is registered as
//! the op's result-type inference ([`infer`]), which the core verifier runs on
//! every op: an error is reported as the op's error, and the comparison of
//! inferred and declared types catches every wrong result type, so one check
//! serves as both verifier and inference. `check` never
//! indexes operands beyond the count it has checked, since inference may be
//! called with any list.

use qopt_ir_core::{type_to_string, Attribute, Context, OpDef, RewritePattern, Type};
use smallvec::SmallVec;

pub(crate) mod constant;
pub(crate) mod conv;
pub(crate) mod elementwise;
pub(crate) mod linear;
pub(crate) mod norm;
pub(crate) mod pool;
pub(crate) mod reduce;
pub(crate) mod shape;

/// Every op of the dialect.
pub(crate) fn all() -> Vec<OpDef> {
    let mut ops = constant::ops();
    ops.extend(conv::ops());
    ops.extend(linear::ops());
    ops.extend(norm::ops());
    ops.extend(elementwise::ops());
    ops.extend(pool::ops());
    ops.extend(reduce::ops());
    ops.extend(shape::ops());
    ops
}

/// The dialect's canonicalization patterns.
pub(crate) fn canonicalization_patterns() -> Vec<Box<dyn RewritePattern>> {
    let mut patterns = elementwise::patterns();
    patterns.extend(shape::patterns());
    patterns
}

/// Up to this many elements, folders compute constants (bigger constants stay
/// as they are: folding them would bloat the IR and take long).
pub(crate) const MAX_FOLD_ELEMENTS: u64 = 1 << 16;

/// One result type computed by a signature check: shape and element type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sig {
    pub shape: SmallVec<[i64; 4]>,
    pub elem: Type,
}

impl Sig {
    pub fn new(shape: &[i64], elem: Type) -> Sig {
        Sig { shape: shape.into(), elem }
    }
}

/// Result types of a check (most ops have one).
pub(crate) type Sigs = SmallVec<[Sig; 1]>;

/// The checks and result-type computation of one op.
pub(crate) trait Signature {
    /// Checks operand types and attributes; returns the result types.
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String>;
}

/// The result-type inference of an op with signature `S`.
pub(crate) fn infer<S: Signature>(
    ctx: &mut Context,
    operands: &[Type],
    attrs: Attribute,
) -> Result<SmallVec<[Type; 1]>, String> {
    let sigs = S::check(ctx, operands, attrs)?;
    Ok(sigs.iter().map(|s| ctx.tensor_type(&s.shape, s.elem)).collect())
}

/// `def` with the inference of signature `S`. The check is the op's verifier
/// too: the core verifier reports an inference error as the op's error and
/// compares the inferred types with the declared ones, so one run checks all.
pub(crate) fn with_signature<S: Signature>(def: OpDef) -> OpDef {
    def.infer(infer::<S>)
}

/// One tensor operand, as a check sees it.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Operand<'c> {
    /// The role, for messages: "input", "weight", "operand #2".
    pub name: &'static str,
    /// Position in the operand list.
    pub index: usize,
    pub ty: Type,
    pub shape: &'c [i64],
    pub elem: Type,
}

impl Operand<'_> {
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    pub fn label(&self) -> String {
        label(self.name, self.index)
    }
}

/// The operands of a fixed-role op: between `min` and `names.len()` of them, all
/// tensors.
pub(crate) fn tensor_operands<'c>(
    ctx: &'c Context,
    types: &[Type],
    names: &[&'static str],
    min: usize,
) -> Result<SmallVec<[Operand<'c>; 4]>, String> {
    let max = names.len();
    if types.len() < min || types.len() > max {
        let want = if min == max { format!("{min}") } else { format!("{min} to {max}") };
        let plural = if max == 1 { "" } else { "s" };
        return Err(format!("expects {want} operand{plural}, found {}", types.len()));
    }
    types.iter().zip(names).enumerate().map(|(i, (&ty, &name))| tensor_operand(ctx, ty, name, i)).collect()
}

/// All operands of a variadic op (named `operand #i`), at least `min` of them.
pub(crate) fn variadic_operands<'c>(
    ctx: &'c Context,
    types: &[Type],
    min: usize,
) -> Result<SmallVec<[Operand<'c>; 4]>, String> {
    if types.len() < min {
        return Err(format!(
            "expects at least {min} operand{}, found {}",
            if min == 1 { "" } else { "s" },
            types.len()
        ));
    }
    types.iter().enumerate().map(|(i, &ty)| tensor_operand(ctx, ty, "operand", i)).collect()
}

fn tensor_operand<'c>(
    ctx: &'c Context,
    ty: Type,
    name: &'static str,
    index: usize,
) -> Result<Operand<'c>, String> {
    match crate::shape::tensor_parts(ctx, ty) {
        Some((shape, elem)) => Ok(Operand { name, index, ty, shape, elem }),
        None => Err(format!("{} must be a tensor, got {}", label(name, index), type_to_string(ctx, ty))),
    }
}

/// `input`, or `operand #2` for variadic operands.
pub(crate) fn label(name: &str, index: usize) -> String {
    if name == "operand" {
        format!("operand #{index}")
    } else {
        name.to_string()
    }
}

/// Which element types an op takes.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Elements {
    /// f16, bf16, f32 or f64.
    Float,
    /// A float type, or (QuantAgnostic ops) a quantized type.
    FloatOrQuant,
}

/// The one element type all `operands` share, which `allowed` must accept.
pub(crate) fn common_element(
    ctx: &Context,
    operands: &[Operand<'_>],
    allowed: Elements,
) -> Result<Type, String> {
    let Some(first) = operands.first() else {
        return Err("expects at least one operand".to_string());
    };
    let elem = first.elem;
    let ok = crate::shape::is_float_element(ctx, elem)
        || (allowed == Elements::FloatOrQuant && crate::shape::is_quant_element(ctx, elem));
    if !ok {
        let want = match allowed {
            Elements::Float => "a float type (f16, bf16, f32 or f64)",
            Elements::FloatOrQuant => "a float type (f16, bf16, f32 or f64) or a quantized type",
        };
        return Err(format!(
            "{} has element type {}, which is not {want}",
            first.label(),
            type_to_string(ctx, elem)
        ));
    }
    for o in &operands[1..] {
        if o.elem != elem {
            return Err(format!(
                "{} has element type {} but {} has {}; they must be the same",
                o.label(),
                type_to_string(ctx, o.elem),
                first.label(),
                type_to_string(ctx, elem)
            ));
        }
    }
    Ok(elem)
}

/// An error unless `o` has rank `rank`; `layout` (like `NxCxHxW`) helps the reader.
pub(crate) fn expect_rank(ctx: &Context, o: &Operand<'_>, rank: usize, layout: &str) -> Result<(), String> {
    if o.rank() == rank {
        return Ok(());
    }
    let layout = if layout.is_empty() { String::new() } else { format!(" ({layout})") };
    Err(format!("{} must have rank {rank}{layout}, got {}", o.label(), type_to_string(ctx, o.ty)))
}

/// `o`'s single result signature with `o`'s shape and `elem`.
pub(crate) fn same_as(o: &Operand<'_>, elem: Type) -> Sigs {
    smallvec::smallvec![Sig::new(o.shape, elem)]
}

/// `value` attribute of a constant op, as dense values, if it is small enough to
/// fold and has an f32 or f64 element type.
pub(crate) fn foldable_values(ctx: &Context, attr: Attribute) -> Option<FoldValues> {
    let qopt_ir_core::AttrData::Dense(d) = ctx.attr_data(attr) else { return None };
    let elem = ctx.element_type(d.ty);
    if elem != ctx.common().f32 && elem != ctx.common().f64 {
        return None;
    }
    let n = qopt_ir_core::static_num_elements(ctx, d.ty)?;
    if n > MAX_FOLD_ELEMENTS {
        return None;
    }
    let shape: SmallVec<[i64; 4]> = ctx.tensor_shape(d.ty)?.into();
    let all = qopt_ir_core::dense_values_f64(ctx, d, elem)?;
    // A splat's one stored value stands for every element.
    let values = if d.splat { all.into_iter().take(1).collect() } else { all };
    Some(FoldValues { ty: d.ty, elem, shape, splat: d.splat, values })
}

/// The values of a small float constant.
#[derive(Clone, Debug)]
pub(crate) struct FoldValues {
    pub ty: Type,
    pub elem: Type,
    pub shape: SmallVec<[i64; 4]>,
    /// True if `values` holds one value standing for every element.
    pub splat: bool,
    pub values: Vec<f64>,
}

impl FoldValues {
    /// The value at flat index `i` (any index for a splat).
    pub fn at(&self, i: usize) -> f64 {
        if self.splat {
            self.values.first().copied().unwrap_or(0.0)
        } else {
            self.values.get(i).copied().unwrap_or(0.0)
        }
    }
}

/// The dense attribute of tensor type `ty` holding `values` (one value = splat).
pub(crate) fn dense_attr(ctx: &mut Context, ty: Type, values: &[f64]) -> Option<Attribute> {
    let dense = qopt_ir_core::DenseElements::from_f64(ctx, ty, values).ok()?;
    Some(ctx.dense_attr(dense))
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_ir_core::{FloatKind, QuantParams, QuantType, Signedness, SplitMix64 as Rng, DYNAMIC};

    /// A small deterministic generator (xorshift64*), so failures reproduce.
    /// Inference sees raw operand lists and attribute dictionaries: whatever they
    /// hold, every op answers with types or an error, never a panic.
    #[test]
    fn inference_never_panics() {
        let mut ctx = Context::new();
        let f32 = ctx.common().f32;
        let f16 = ctx.float_type(FloatKind::F16);
        let i8 = ctx.int_type(8, Signedness::Signless);
        let q = ctx.quant_type(QuantType {
            storage: qopt_ir_core::IntType { width: 8, signedness: Signedness::Signless },
            storage_min: -128,
            storage_max: 127,
            expressed: FloatKind::F32,
            params: QuantParams::PerTensor { scale: 0.5, zero_point: 0 },
        });
        let shapes: &[&[i64]] = &[
            &[],
            &[0],
            &[1],
            &[3],
            &[DYNAMIC],
            &[2, 3],
            &[0, 0],
            &[3, 1],
            &[1, 3, 4, 4],
            &[2, 4, 8, 8],
            &[DYNAMIC, DYNAMIC, DYNAMIC, DYNAMIC],
            &[1, 3, 5],
            &[4, 3, 3, 3],
            &[0, 3, 0, 0],
            &[1, 1, 1, 1, 1],
            &[i64::MAX, 2],
        ];
        let mut types = vec![f32, ctx.function_type(&[], &[])];
        for shape in shapes {
            for elem in [f32, f16, i8, q] {
                types.push(ctx.tensor_type(shape, elem));
            }
        }
        let mut values = Vec::new();
        for arr in [
            &[][..],
            &[0],
            &[-1],
            &[1, 1],
            &[-1, -1],
            &[0, 1],
            &[1, 0],
            &[2, 2],
            &[1, 1, 1, 1],
            &[0, 0, 0, 0],
            &[3, 3, 3, 3],
            &[i64::MAX, i64::MIN],
            &[i64::MAX, i64::MAX, i64::MAX, i64::MAX],
            &[1, 0, 2, 3],
            &[2, 2, 2, 2, 2, 2, 2, 2],
        ] {
            values.push(ctx.i64_array_attr(arr));
        }
        for v in [0, 1, -1, 3, -5, i64::MAX, i64::MIN] {
            values.push(ctx.i64_attr(v));
        }
        for v in [0.0, -1.0, 6.0, f64::NAN, f64::INFINITY] {
            values.push(ctx.float_attr(v, f32));
        }
        let floats: Vec<Attribute> = [1.0, 2.0, 0.5, 1e300].iter().map(|&v| ctx.float_attr(v, f32)).collect();
        for n in [1, 2, 4] {
            values.push(ctx.array_attr(&floats[..n]));
        }
        let scale_ty = ctx.common().f64;
        let zero_scale = ctx.float_attr(0.0, scale_ty);
        values.push(ctx.array_attr(&[zero_scale, zero_scale]));
        values.push(ctx.string_attr("linear"));
        values.push(ctx.string_attr("nearest"));
        values.push(ctx.string_attr("reflect"));
        values.push(ctx.string_attr("edge"));
        values.push(ctx.bool_attr(true));
        let dense_ty = ctx.tensor_type(&[2], f32);
        let dense = qopt_ir_core::DenseElements::from_f64(&ctx, dense_ty, &[1.0, 2.0]).unwrap();
        values.push(ctx.dense_attr(dense));
        let keys = [
            "stride",
            "pad",
            "dilation",
            "groups",
            "kernel",
            "axis",
            "epsilon",
            "min",
            "max",
            "shape",
            "perm",
            "sizes",
            "pads",
            "mode",
            "value",
            "begin",
            "end",
            "strides",
            "axes",
            "ceil_mode",
            "count_include_pad",
            "scales",
            "nearest_mode",
            "antialias",
            "exclude_outside",
            "cubic_coeff_a",
        ];
        let defs: Vec<_> = all().into_iter().filter_map(|d| d.infer_types.map(|f| (d.name, f))).collect();
        assert_eq!(defs.len(), all().len(), "every fp op infers its result types");
        let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
        let mut answered = 0usize;
        for _ in 0..40_000 {
            let (_name, infer) = *rng.pick(&defs);
            let operands: Vec<Type> = (0..rng.below(7)).map(|_| *rng.pick(&types)).collect();
            let entries: Vec<(&str, Attribute)> =
                (0..rng.below(6)).map(|_| (*rng.pick(&keys), *rng.pick(&values))).collect();
            let attrs = ctx.dict_attr(&entries);
            if infer(&mut ctx, &operands, attrs).is_ok() {
                answered += 1;
            }
        }
        // The generator does hit valid combinations, not only errors.
        assert!(answered > 100, "only {answered} valid cases");
    }
}
