//! `recognize-gelu`: turns the decompositions of GELU that exporters write
//! before ONNX opset 20 back into one `fp.gelu`, so that later passes (and the
//! quantizer) see one activation instead of five to nine arithmetic ops.
//!
//! Two forms are recognized, with `x` any float tensor:
//!
//! - the exact one (`approximate = "none"`), PyTorch's export of `nn.GELU()`:
//!   `0.5 · x · (1 + erf(x / √2))`, the division also written as a
//!   multiplication by `1/√2`;
//! - the tanh approximation (`approximate = "tanh"`):
//!   `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`, with `x³` as
//!   `fp.pow(x, 3)`, `x · (x · x)` or `(x · x) · x`.
//!
//! The outer product of `x`, `1 + erf(...)` (or `1 + tanh(...)`) and `0.5` may
//! be grouped either way (`(x · a) · 0.5`, PyTorch's; `(0.5 · x) · a`, Hugging
//! Face's; `x · (a · 0.5)`), and every `fp.add` and `fp.mul` may have its
//! operands in either order. Each constant is an `fp.constant` (any
//! [`Traits::CONSTANT_LIKE`] op) with float elements that are all within 4
//! f32 ulps of the expected value (`√2`, `1/√2`, `1`, `0.5`, `3`, `0.044715`,
//! `√(2/π)`): a scalar, a one-element tensor of any rank or a splat, so long
//! as no op of the chain changes `x`'s type (which a broadcast to a larger
//! shape or rank would).
//!
//! A chain is rewritten only when each of its intermediate values has exactly
//! one user, the next op of the chain; `x` and the constants may have any
//! number. The `fp.gelu` goes just before the final multiplication and takes
//! its location; the chain's ops are erased, and so are the constants left
//! without uses. Statistics: `erf-gelus`, `tanh-gelus` (chains rewritten).
//!
//! Numerics: `fp.gelu` computes in f64 and rounds once, the chain rounds after
//! every op (and `x / √2` divides by an f32 approximation of √2), so results
//! differ by a few f32 ulps, and by more relative to tiny results deep in the
//! negative tail, where `1 + erf(...)` cancels. Like `fold-bn`, the pass keeps
//! the module's meaning over the reals and declares `preserves_semantics`.
//!
//! ```text
//! // before
//! %0 = fp.div(%x, %sqrt2) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
//! %1 = fp.erf(%0) : (tensor<2x8xf32>) -> tensor<2x8xf32>
//! %2 = fp.add(%1, %one) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
//! %3 = fp.mul(%x, %2) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
//! %y = fp.mul(%3, %half) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32> loc("gelu")
//! // after
//! %y = fp.gelu(%x) : (tensor<2x8xf32>) -> tensor<2x8xf32> loc("gelu")
//! ```

use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{Context, Module, OpId, Pass, PassContext, PassOutcome, ValueId};
use smallvec::SmallVec;

use crate::fp_chains::{
    binary, is_constant, keeps_float_type, other_than_constant, replace_chain, single_use_def, unary,
};

/// The `recognize-gelu` pass; see the module docs.
pub struct RecognizeGelu;

const INFO: PassInfo = PassInfo {
    name: "recognize-gelu",
    summary: "fuse the erf and tanh decompositions of GELU (ONNX before opset 20) into fp.gelu",
    preserves_semantics: true,
    // Not checked yet: no rules state the GELU decompositions.
    equivalence: None,
    description: "Rewrites `0.5 · x · (1 + erf(x / √2))` (PyTorch's export of GELU before opset 20; the \
     division may be a multiplication by `1/√2`) into `fp.gelu(x)`, and \
     `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))` (`x³` as `fp.pow(x, 3)` or two \
     multiplications) into `fp.gelu(x) {approximate = \"tanh\"}`. The outer product may be \
     grouped either way and commutative operands come in either order; constants are scalars \
     or splats within 4 f32 ulps of the expected values. Only chains whose intermediate values \
     have no other users are rewritten; the new op takes the final multiplication's location and \
     the chain's ops are erased. `fp.gelu` rounds once where the chain rounds at every step, so \
     results differ by about an f32 ulp (by more, relatively, deep in the negative tail, where \
     the chain's `1 + erf` cancels). Statistics: `erf-gelus`, `tanh-gelus`.\n\n\
     ```\n\
     %0 = fp.div(%x, %sqrt2) ...; %1 = fp.erf(%0) ...; %2 = fp.add(%1, %one) ...\n\
     %3 = fp.mul(%x, %2) ...; %y = fp.mul(%3, %half) ...\n\
     // -> %y = fp.gelu(%x) : (tensor<2x8xf32>) -> tensor<2x8xf32>\n\
     ```",
};

impl Pass for RecognizeGelu {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let names = Names::new(cx.ctx);
        let candidates: Vec<OpId> = module.ops_where(|op| module.op_name(op) == names.mul);
        let (mut erf_gelus, mut tanh_gelus) = (0u64, 0u64);
        for op in candidates {
            if module.is_erased(op) {
                continue;
            }
            let Some(found) = match_gelu(cx.ctx, module, &names, op) else { continue };
            if rewrite(cx.ctx, module, op, &found).is_ok() {
                match found.form {
                    Form::Erf => erf_gelus += 1,
                    Form::Tanh => tanh_gelus += 1,
                }
            }
        }
        cx.add_stat("erf-gelus", erf_gelus);
        cx.add_stat("tanh-gelus", tanh_gelus);
        Ok(PassOutcome::from_changed(erf_gelus + tanh_gelus > 0))
    }
}

qopt_ir_core::interned_op_names! {
    /// The interned names of the ops the pass reads.
    struct Names {
        mul = fp_op::MUL, div = fp_op::DIV, add = fp_op::ADD, erf = fp_op::ERF, tanh = fp_op::TANH,
        pow = fp_op::POW,
    }
}

/// Which decomposition a chain is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    /// `0.5 · x · (1 + erf(x / √2))`.
    Erf,
    /// `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`.
    Tanh,
}

/// A recognized chain ending at the final multiplication.
struct Found {
    x: ValueId,
    form: Form,
    /// Every op of the chain but the final one, each after its users.
    ops: SmallVec<[OpId; 10]>,
}

const SQRT_2: f64 = std::f64::consts::SQRT_2;
const FRAC_1_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
/// √(2/π).
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of the tanh approximation.
const CUBIC: f64 = 0.044715;

/// The chain ending at the multiplication `y_op`, if it is one of the GELU
/// decompositions (see the module docs) whose intermediate values have one
/// user each and keep `x`'s float tensor type.
fn match_gelu(ctx: &Context, module: &Module, names: &Names, y_op: OpId) -> Option<Found> {
    let (p, q) = binary(module, y_op, names.mul)?;
    for (inner_value, leaf) in [(p, q), (q, p)] {
        let Some(inner) = single_use_def(module, inner_value, names.mul) else { continue };
        let Some((r, s)) = binary(module, inner, names.mul) else { continue };
        let leaves = [leaf, r, s];
        for half in 0..3 {
            if !is_constant(ctx, module, leaves[half], 0.5) {
                continue;
            }
            let (u, w) = (leaves[(half + 1) % 3], leaves[(half + 2) % 3]);
            for (a, x) in [(u, w), (w, u)] {
                let Some((form, mut ops)) = factor(ctx, module, names, a, x) else { continue };
                ops.insert(0, inner);
                let found = Found { x, form, ops };
                if keeps_float_type(ctx, module, found.x, y_op, &found.ops) {
                    return Some(found);
                }
            }
        }
    }
    None
}

/// The ops computing `a = 1 + erf(x / √2)` or `a = 1 + tanh(√(2/π) · (x +
/// 0.044715 · x³))` from `x`, each after its users, if `a` is one of them.
fn factor(
    ctx: &Context,
    module: &Module,
    names: &Names,
    a: ValueId,
    x: ValueId,
) -> Option<(Form, SmallVec<[OpId; 10]>)> {
    let add = single_use_def(module, a, names.add)?;
    let activation = other_than_constant(ctx, module, add, names.add, 1.0)?;
    let mut ops: SmallVec<[OpId; 10]> = SmallVec::new();
    ops.push(add);
    if let Some(erf) = single_use_def(module, activation, names.erf) {
        ops.push(erf);
        let scaled = unary(module, erf)?;
        if let Some(div) = single_use_def(module, scaled, names.div) {
            let (n, d) = binary(module, div, names.div)?;
            if n != x || !is_constant(ctx, module, d, SQRT_2) {
                return None;
            }
            ops.push(div);
        } else {
            let mul = single_use_def(module, scaled, names.mul)?;
            if other_than_constant(ctx, module, mul, names.mul, FRAC_1_SQRT_2)? != x {
                return None;
            }
            ops.push(mul);
        }
        return Some((Form::Erf, ops));
    }
    let tanh = single_use_def(module, activation, names.tanh)?;
    ops.push(tanh);
    let inner = unary(module, tanh)?;
    let scale = single_use_def(module, inner, names.mul)?;
    ops.push(scale);
    let sum_value = other_than_constant(ctx, module, scale, names.mul, SQRT_2_OVER_PI)?;
    let sum = single_use_def(module, sum_value, names.add)?;
    ops.push(sum);
    let (p, q) = binary(module, sum, names.add)?;
    let term = if p == x {
        q
    } else if q == x {
        p
    } else {
        return None;
    };
    let scaled_cube = single_use_def(module, term, names.mul)?;
    ops.push(scaled_cube);
    let cube = other_than_constant(ctx, module, scaled_cube, names.mul, CUBIC)?;
    ops.extend(cube_ops(ctx, module, names, cube, x)?);
    Some((Form::Tanh, ops))
}

/// The ops computing `cube = x³` (`fp.pow(x, 3)`, `x · (x · x)` or
/// `(x · x) · x`), each after its users.
fn cube_ops(
    ctx: &Context,
    module: &Module,
    names: &Names,
    cube: ValueId,
    x: ValueId,
) -> Option<SmallVec<[OpId; 2]>> {
    if let Some(pow) = single_use_def(module, cube, names.pow) {
        let (base, exponent) = binary(module, pow, names.pow)?;
        return (base == x && is_constant(ctx, module, exponent, 3.0)).then(|| SmallVec::from_slice(&[pow]));
    }
    let outer = single_use_def(module, cube, names.mul)?;
    let (p, q) = binary(module, outer, names.mul)?;
    let square_value = if p == x {
        q
    } else if q == x {
        p
    } else {
        return None;
    };
    let square = single_use_def(module, square_value, names.mul)?;
    (binary(module, square, names.mul)? == (x, x)).then(|| SmallVec::from_slice(&[outer, square]))
}

/// Replaces the final multiplication `y_op` by `fp.gelu(x)` and erases the
/// chain and the constants it leaves unused; on `Err` the IR is unchanged.
fn rewrite(ctx: &mut Context, module: &mut Module, y_op: OpId, found: &Found) -> Result<(), String> {
    let attrs = match found.form {
        Form::Erf => ctx.dict_attr(&[]),
        Form::Tanh => {
            let tanh = ctx.string_attr("tanh");
            ctx.dict_attr(&[("approximate", tanh)])
        }
    };
    replace_chain(ctx, module, y_op, &found.ops, fp_op::GELU, found.x, attrs)
}

#[cfg(test)]
mod tests {
    use super::{FRAC_1_SQRT_2, SQRT_2_OVER_PI};
    use crate::fp_chains::f32_ulp;
    use crate::test_ir::{on_small_stack, registry, test_context, TestIr};
    use qopt_ir_core::parse_module;

    fn run_fp(input: &str) -> crate::test_ir::RunOutput {
        let mut ctx = test_context();
        qopt_dialect_fp::register(&mut ctx).unwrap();
        let module = parse_module(&mut ctx, input.as_bytes(), "input.qir").unwrap();
        TestIr { ctx, module }.run(&registry(), "recognize-gelu").unwrap()
    }

    #[test]
    fn ulps_and_constants() {
        assert_eq!(f32_ulp(1.0), f64::from(f32::EPSILON));
        assert_eq!(f32_ulp(0.5), f64::from(f32::EPSILON) / 2.0);
        assert_eq!(SQRT_2_OVER_PI, (2.0 / std::f64::consts::PI).sqrt());
        // PyTorch's f32 constants are within one ulp.
        assert!((f64::from(0.707_106_77_f32) - FRAC_1_SQRT_2).abs() <= f32_ulp(FRAC_1_SQRT_2));
        assert!((f64::from(0.797_884_6_f32) - SQRT_2_OVER_PI).abs() <= f32_ulp(SQRT_2_OVER_PI));
    }

    /// 10,000 GELUs in a chain (each one's x the previous one's result) are
    /// recognized on a small stack.
    #[test]
    fn a_10000_gelu_chain() {
        on_small_stack(|| {
            let ty = "tensor<4xf32>";
            let mut text = format!(
                "func.func @f(%x: {ty}) -> {ty} {{\n  \
                 %s = fp.constant() {{value = dense<1.4142135> : tensor<f32>}} : () -> tensor<f32>\n  \
                 %one = fp.constant() {{value = dense<1.0> : tensor<f32>}} : () -> tensor<f32>\n  \
                 %h = fp.constant() {{value = dense<0.5> : tensor<f32>}} : () -> tensor<f32>\n"
            );
            let mut last = "%x".to_string();
            for i in 0..10_000 {
                text.push_str(&format!(
                    "  %d{i} = fp.div({last}, %s) : ({ty}, tensor<f32>) -> {ty}\n  \
                     %e{i} = fp.erf(%d{i}) : ({ty}) -> {ty}\n  \
                     %a{i} = fp.add(%e{i}, %one) : ({ty}, tensor<f32>) -> {ty}\n  \
                     %m{i} = fp.mul({last}, %a{i}) : ({ty}, {ty}) -> {ty}\n  \
                     %y{i} = fp.mul(%m{i}, %h) : ({ty}, tensor<f32>) -> {ty}\n"
                ));
                last = format!("%y{i}");
            }
            text.push_str(&format!("  func.return {last} : {ty}\n}}\n"));
            let out = run_fp(&text);
            assert_eq!(out.stats, [("erf-gelus", 10_000), ("tanh-gelus", 0)]);
            assert_eq!(out.ir.matches("fp.gelu").count(), 10_000);
            assert!(!out.ir.contains("fp.constant"), "the constants go");
            assert!(!out.ir.contains("fp.mul") && !out.ir.contains("fp.erf"), "the chains go");
        });
    }
}
