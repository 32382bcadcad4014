//! Elementwise ops: binary arithmetic with numpy broadcasting (`fp.add`,
//! `fp.sub`, `fp.mul`, `fp.div`) and activations (`fp.relu`, `fp.sigmoid`,
//! `fp.tanh`, `fp.clip`), with their folders and the `relu-relu` pattern.
//!
//! The unary functions of their operand alone that quantization observes and
//! `fuse` turns into a `qnn.lookup` table (sigmoid, tanh, exp, erf, softplus,
//! hard_swish, hard_sigmoid, leaky_relu, gelu) declare `QuantizableOp` with one activation
//! and `LookupActivation`, through the `lookup` helper in `ops()`.
//!
//! Folders: the identities `x + 0`, `0 + x`, `x - 0`, `x · 1`, `1 · x`, `x / 1`
//! fold to `x` when the result has `x`'s type (a broadcasting constant would
//! change the shape); small f32/f64 constants ([`super::MAX_FOLD_ELEMENTS`]) are
//! computed in f64 and rounded once to the element type, which is exact
//! rounding for f32 `+ - · /`.

use super::{
    common_element, dense_attr, foldable_values, same_as, tensor_operands, Elements, FoldValues, Sig,
    Signature, Sigs, MAX_FOLD_ELEMENTS,
};
use crate::attrs;
use crate::shape::broadcast;
use qopt_ir_core::interfaces::{FusedActivation, LookupActivation, QuantizableOp};
use qopt_ir_core::{
    dense_values_f64, static_num_elements, Arity, AttrData, Attribute, Context, FoldFn, FoldResult, Module,
    OpDef, OpId, RewritePattern, Rewriter, Traits, Type,
};
use smallvec::SmallVec;

qopt_ir_core::op_name_constants! {
    CLIP = "fp.clip", ADD = "fp.add", SUB = "fp.sub", MUL = "fp.mul", DIV = "fp.div", RELU = "fp.relu",
    SIGMOID = "fp.sigmoid", TANH = "fp.tanh", GELU = "fp.gelu", ERF = "fp.erf", EXP = "fp.exp",
    LOG = "fp.log", SQRT = "fp.sqrt", RECIPROCAL = "fp.reciprocal", NEG = "fp.neg", ABS = "fp.abs",
    SOFTPLUS = "fp.softplus", HARD_SIGMOID = "fp.hard_sigmoid", HARD_SWISH = "fp.hard_swish",
    LEAKY_RELU = "fp.leaky_relu",
    MAX = "fp.max", MIN = "fp.min", POW = "fp.pow", PRELU = "fp.prelu",
}

pub(crate) fn ops() -> Vec<OpDef> {
    let binary = |name: &'static str, summary: &'static str, description: &'static str, fold: FoldFn| {
        super::with_signature::<Binary>(
            OpDef::new(name, summary)
                .description(description)
                .operands(Arity::Exact(2))
                .traits(Traits::ELEMENTWISE | Traits::PURE)
                .interface(QuantizableOp::activations(&[0, 1]))
                .folder(fold),
        )
    };
    let unary = |name: &'static str, summary: &'static str, description: &'static str, traits: Traits| {
        let def = OpDef::new(name, summary)
            .description(description)
            .operands(Arity::Exact(1))
            .traits(Traits::ELEMENTWISE | Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE | traits);
        if traits.contains(Traits::QUANT_AGNOSTIC) {
            super::with_signature::<QuantAgnosticUnary>(def)
        } else {
            super::with_signature::<Unary>(def)
        }
    };
    // A unary function of its operand alone: quantization observes its operand
    // and result, and `fuse` tabulates it (`qnn.lookup`). One line per op.
    let lookup = |def: OpDef| def.interface(QuantizableOp::activations(&[0])).interface(LookupActivation);
    // Binary ops that are not quantized as activations pairs (no QuantizableOp).
    let binary_float =
        |name: &'static str, summary: &'static str, description: &'static str, fold: FoldFn| {
            super::with_signature::<Binary>(
                OpDef::new(name, summary)
                    .description(description)
                    .operands(Arity::Exact(2))
                    .traits(Traits::ELEMENTWISE | Traits::PURE)
                    .folder(fold),
            )
        };
    vec![
        binary_float(
            names::MAX,
            "elementwise maximum with broadcasting",
            "`fp.max(a, b)`: the larger of `a` and `b` element by element with numpy broadcasting; NaN if \
             either is NaN (ONNX Max of two inputs; `qimport` chains more). Commutative.\n\n\
             ```\n%y = fp.max(%a, %b) : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>\n```",
            fold_max,
        )
        .traits(Traits::COMMUTATIVE),
        binary_float(
            names::MIN,
            "elementwise minimum with broadcasting",
            "`fp.min(a, b)`: the smaller of `a` and `b` element by element with numpy broadcasting; NaN if \
             either is NaN (ONNX Min). Commutative.\n\n\
             ```\n%y = fp.min(%a, %b) : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>\n```",
            fold_min,
        )
        .traits(Traits::COMMUTATIVE),
        binary_float(
            names::POW,
            "elementwise power with broadcasting",
            "`fp.pow(a, b)`: `a^b` element by element with numpy broadcasting (ONNX Pow with float \
             operands of one type). Folds `x^1` to `x`.\n\n\
             ```\n%y = fp.pow(%a, %e) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>\n```",
            fold_pow,
        ),
        binary_float(
            names::PRELU,
            "parametric relu: x, or slope · x below 0",
            "`fp.prelu(x, slope)`: `x` where `x ≥ 0`, `slope · x` elsewhere, `slope` broadcasting to `x` \
             with numpy rules (ONNX PRelu; a per-channel slope of an N×C×H×W input is C×1×1). Folds a slope \
             of 1 to `x`.\n\n\
             ```\n%y = fp.prelu(%x, %s) : (tensor<1x16x8x8xf32>, tensor<16x1x1xf32>) -> tensor<1x16x8x8xf32>\n```",
            fold_prelu,
        )
        // The input is an activation; the slope stays float (`qnn.prelu`).
        .interface(QuantizableOp::activations(&[0])),
        binary(
            names::ADD,
            "elementwise addition with broadcasting",
            "`fp.add(a, b)`: `a + b` element by element; the shapes broadcast with numpy rules and \
             the result has the broadcast shape. Commutative. Folds `x + 0` and `0 + x` to `x` and \
             small constants to a constant.\n\n\
             ```\n%y = fp.add(%a, %b) : (tensor<1x64x56x56xf32>, tensor<64x1x1xf32>) -> tensor<1x64x56x56xf32>\n```",
            fold_add,
        )
        .traits(Traits::COMMUTATIVE),
        binary(
            names::SUB,
            "elementwise subtraction with broadcasting",
            "`fp.sub(a, b)`: `a - b` element by element with numpy broadcasting. Folds `x - 0` to `x`.\n\n\
             ```\n%y = fp.sub(%a, %b) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>\n```",
            fold_sub,
        ),
        binary(
            names::MUL,
            "elementwise multiplication with broadcasting",
            "`fp.mul(a, b)`: `a · b` element by element with numpy broadcasting. Commutative. Folds \
             `x · 1` and `1 · x` to `x`.\n\n\
             ```\n%y = fp.mul(%a, %s) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>\n```",
            fold_mul,
        )
        .traits(Traits::COMMUTATIVE),
        binary(
            names::DIV,
            "elementwise division with broadcasting",
            "`fp.div(a, b)`: `a / b` element by element (IEEE division) with numpy broadcasting. Folds \
             `x / 1` to `x`.\n\n\
             ```\n%y = fp.div(%a, %b) : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>\n```",
            fold_div,
        ),
        unary(
            names::RELU,
            "rectified linear unit: max(x, 0)",
            "`fp.relu(x)`: `max(x, 0)` element by element (NaN stays NaN). Quant-agnostic: on a quantized \
             tensor it clamps stored values below the zero point to the zero point, so the result keeps the \
             operand's quantized type. `relu(relu(x))` canonicalizes to `relu(x)`.\n\n\
             ```\n%y = fp.relu(%x) : (tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>\n```",
            Traits::QUANT_AGNOSTIC,
        )
        .interface(FusedActivation)
        .folder(fold_relu),
        lookup(unary(
            names::SIGMOID,
            "logistic sigmoid: 1 / (1 + exp(-x))",
            "`fp.sigmoid(x)`: `1 / (1 + exp(-x))` element by element.\n\n\
             ```\n%y = fp.sigmoid(%x) : (tensor<8x10xf32>) -> tensor<8x10xf32>\n```",
            Traits::NONE,
        ))
        .folder(fold_sigmoid),
        lookup(unary(
            names::TANH,
            "hyperbolic tangent",
            "`fp.tanh(x)`: `tanh(x)` element by element.\n\n\
             ```\n%y = fp.tanh(%x) : (tensor<8x10xf32>) -> tensor<8x10xf32>\n```",
            Traits::NONE,
        ))
        .folder(fold_tanh),
        lookup(unary(
            names::EXP,
            "exponential: e^x",
            "`fp.exp(x)`: `e^x` element by element (ONNX Exp).\n\n\
             ```\n%y = fp.exp(%x) : (tensor<4xf32>) -> tensor<4xf32>\n```",
            Traits::NONE,
        )),
        lookup(unary(
            names::ERF,
            "Gauss error function",
            "`fp.erf(x)`: `erf(x) = 2/√π · ∫₀ˣ e^(−t²) dt` element by element (ONNX Erf), computed in f64 \
             and rounded once. PyTorch exports GELU before opset 20 around it: `recognize-gelu` turns \
             that decomposition back into `fp.gelu`.\n\n\
             ```\n%y = fp.erf(%x) : (tensor<4xf32>) -> tensor<4xf32>\n```",
            Traits::NONE,
        )),
        unary(
            names::LOG,
            "natural logarithm",
            "`fp.log(x)`: `ln x` element by element (ONNX Log); `ln 0 = -inf`, negative inputs give NaN.\n\n\
             ```\n%y = fp.log(%x) : (tensor<4xf32>) -> tensor<4xf32>\n```",
            Traits::NONE,
        ),
        unary(
            names::SQRT,
            "square root",
            "`fp.sqrt(x)`: `√x` element by element (ONNX Sqrt); negative inputs give NaN.\n\n\
             ```\n%y = fp.sqrt(%x) : (tensor<4xf32>) -> tensor<4xf32>\n```",
            Traits::NONE,
        ),
        unary(
            names::RECIPROCAL,
            "reciprocal: 1 / x",
            "`fp.reciprocal(x)`: `1 / x` element by element (ONNX Reciprocal; IEEE division, so `1 / 0 = inf`).\n\n\
             ```\n%y = fp.reciprocal(%x) : (tensor<4xf32>) -> tensor<4xf32>\n```",
            Traits::NONE,
        ),
        unary(
            names::NEG,
            "negation: -x",
            "`fp.neg(x)`: `-x` element by element (ONNX Neg).\n\n\
             ```\n%y = fp.neg(%x) : (tensor<4xf32>) -> tensor<4xf32>\n```",
            Traits::NONE,
        ),
        unary(
            names::ABS,
            "absolute value",
            "`fp.abs(x)`: `|x|` element by element (ONNX Abs).\n\n\
             ```\n%y = fp.abs(%x) : (tensor<4xf32>) -> tensor<4xf32>\n```",
            Traits::NONE,
        ),
        lookup(unary(
            names::SOFTPLUS,
            "softplus: ln(1 + e^x)",
            "`fp.softplus(x)`: `ln(1 + e^x)` element by element (ONNX Softplus), computed as `max(x, 0) + ln(1 + e^(-|x|))` in f64 so large inputs do not overflow.\n\n\
             ```\n%y = fp.softplus(%x) : (tensor<4xf32>) -> tensor<4xf32>\n```",
            Traits::NONE,
        )),
        lookup(unary(
            names::HARD_SWISH,
            "hard swish: x · clip(x/6 + 1/2, 0, 1)",
            "`fp.hard_swish(x)`: `x · max(0, min(1, x / 6 + 0.5))` element by element (ONNX HardSwish, MobileNetV3), in f64, rounded once.\n\n\
             ```\n%y = fp.hard_swish(%x) : (tensor<1x16x56x56xf32>) -> tensor<1x16x56x56xf32>\n```",
            Traits::NONE,
        )),
        lookup(super::with_signature::<HardSigmoid>(
            OpDef::new(names::HARD_SIGMOID, "hard sigmoid: clip(alpha · x + beta, 0, 1)")
                .description(
                    "`fp.hard_sigmoid(x) {alpha, beta}`: `max(0, min(1, alpha · x + beta))` element by element \
                     (ONNX HardSigmoid), in f64, rounded once. `alpha` (default 0.2) and `beta` (default 0.5) \
                     are finite floats.\n\n\
                     ```\n%y = fp.hard_sigmoid(%x) {alpha = 0.1666667 : f32, beta = 0.5 : f32} : (tensor<4xf32>) -> tensor<4xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(Traits::ELEMENTWISE | Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE),
        )),
        lookup(super::with_signature::<LeakyRelu>(
            OpDef::new(names::LEAKY_RELU, "leaky relu: x for x ≥ 0, alpha · x below")
                .description(
                    "`fp.leaky_relu(x) {alpha}`: `x` where `x ≥ 0` (and NaN), `alpha · x` where `x < 0`, \
                     element by element (ONNX LeakyRelu; the product rounded once, as ONNX computes it). \
                     `alpha` (default 0.01) is a finite float.\n\n\
                     ```\n%y = fp.leaky_relu(%x) {alpha = 0.1 : f32} : (tensor<1x16x32x32xf32>) -> tensor<1x16x32x32xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(Traits::ELEMENTWISE | Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE),
        )),
        lookup(super::with_signature::<Gelu>(
            OpDef::new(names::GELU, "Gaussian error linear unit: x · Φ(x)")
                .description(
                    "`fp.gelu(x) {approximate}`: `0.5 · x · (1 + erf(x / √2))` element by element \
                     (ONNX Gelu); with `approximate = \"tanh\"`, `0.5 · x · (1 + tanh(√(2/π) · (x + \
                     0.044715 · x³)))`. `approximate` is `\"none\"` (the default) or `\"tanh\"`.\n\n\
                     ```\n%y = fp.gelu(%x) : (tensor<1x16x64xf32>) -> tensor<1x16x64xf32>\n\
                     %z = fp.gelu(%x) {approximate = \"tanh\"} : (tensor<1x16x64xf32>) -> tensor<1x16x64xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(Traits::ELEMENTWISE | Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE),
        )),
        super::with_signature::<Clip>(
            OpDef::new(names::CLIP, "clamps values into [min, max]")
                .description(
                    "`fp.clip(x) {min, max}`: `min(max(x, min), max)` element by element. Both bounds \
                     are optional float attributes (missing = unbounded on that side); `min ≤ max`. \
                     ReLU6 is `{min = 0.0 : f32, max = 6.0 : f32}`.\n\n\
                     ```\n%y = fp.clip(%x) {max = 6.0 : f32, min = 0.0 : f32} : (tensor<8xf32>) -> tensor<8xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(Traits::ELEMENTWISE | Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE)
                .interface(FusedActivation)
                .folder(fold_clip),
        ),
    ]
}

pub(crate) fn patterns() -> Vec<Box<dyn RewritePattern>> {
    vec![Box::new(ReluRelu)]
}

// ---- signatures -------------------------------------------------------------

/// Two float operands whose shapes broadcast.
struct Binary;

impl Signature for Binary {
    fn check(ctx: &Context, operands: &[Type], _attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["lhs", "rhs"], 2)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let shape = broadcast(ops[0].shape, ops[1].shape)?;
        Ok(smallvec::smallvec![Sig::new(&shape, elem)])
    }
}

/// One float operand, result of the same type.
struct Unary;

impl Signature for Unary {
    fn check(ctx: &Context, operands: &[Type], _attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input"], 1)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        Ok(same_as(&ops[0], elem))
    }
}

/// Like [`Unary`], quantized element types allowed (`fp.relu`).
struct QuantAgnosticUnary;

impl Signature for QuantAgnosticUnary {
    fn check(ctx: &Context, operands: &[Type], _attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input"], 1)?;
        let elem = common_element(ctx, &ops, Elements::FloatOrQuant)?;
        Ok(same_as(&ops[0], elem))
    }
}

/// [`Unary`] whose attributes `check_attrs` verifies.
fn unary_with(
    ctx: &Context,
    operands: &[Type],
    check_attrs: impl FnOnce() -> Result<(), String>,
) -> Result<Sigs, String> {
    let sigs = Unary::check(ctx, operands, Attribute::EMPTY_DICT)?;
    check_attrs()?;
    Ok(sigs)
}

struct Gelu;

impl Signature for Gelu {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        unary_with(ctx, operands, || {
            attrs::one_of_in(ctx, attrs, "approximate", "none", &["none", "tanh"]).map(drop)
        })
    }
}

struct HardSigmoid;

impl Signature for HardSigmoid {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        unary_with(ctx, operands, || hard_sigmoid_params(ctx, attrs).map(drop))
    }
}

struct LeakyRelu;

impl Signature for LeakyRelu {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        unary_with(ctx, operands, || leaky_relu_alpha(ctx, attrs).map(drop))
    }
}

/// `alpha` of `fp.leaky_relu` (default 0.01, ONNX's), finite.
pub fn leaky_relu_alpha(ctx: &Context, attrs: Attribute) -> Result<f64, String> {
    let alpha = attrs::opt_float_in(ctx, attrs, "alpha")?.unwrap_or(0.01);
    if !alpha.is_finite() {
        return Err(format!("'alpha' ({alpha}) must be finite"));
    }
    Ok(alpha)
}

/// `(alpha, beta)` of `fp.hard_sigmoid` (defaults 0.2 and 0.5), finite.
pub fn hard_sigmoid_params(ctx: &Context, attrs: Attribute) -> Result<(f64, f64), String> {
    let alpha = attrs::opt_float_in(ctx, attrs, "alpha")?.unwrap_or(0.2);
    let beta = attrs::opt_float_in(ctx, attrs, "beta")?.unwrap_or(0.5);
    if !(alpha.is_finite() && beta.is_finite()) {
        return Err(format!("'alpha' ({alpha}) and 'beta' ({beta}) must be finite"));
    }
    Ok((alpha, beta))
}

struct Clip;

impl Signature for Clip {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input"], 1)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let (min, max) = clip_bounds(ctx, attrs)?;
        if min > max {
            return Err(format!("'min' ({min}) must not be greater than 'max' ({max})"));
        }
        Ok(same_as(&ops[0], elem))
    }
}

/// `(min, max)` of a clip, infinite where missing.
fn clip_bounds(ctx: &Context, attrs: Attribute) -> Result<(f64, f64), String> {
    let min = attrs::opt_float_in(ctx, attrs, "min")?.unwrap_or(f64::NEG_INFINITY);
    let max = attrs::opt_float_in(ctx, attrs, "max")?.unwrap_or(f64::INFINITY);
    Ok((min, max))
}

// ---- folders ----------------------------------------------------------------

#[derive(Copy, Clone, PartialEq, Eq)]
enum BinaryKind {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
    Prelu,
}

impl BinaryKind {
    fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            BinaryKind::Add => a + b,
            BinaryKind::Sub => a - b,
            BinaryKind::Mul => a * b,
            BinaryKind::Div => a / b,
            BinaryKind::Max | BinaryKind::Min if a.is_nan() || b.is_nan() => f64::NAN,
            BinaryKind::Max => a.max(b),
            BinaryKind::Min => a.min(b),
            BinaryKind::Pow => a.powf(b),
            BinaryKind::Prelu if a < 0.0 => a * b,
            BinaryKind::Prelu => a,
        }
    }

    /// The right operand that leaves the left unchanged, if any.
    fn right_identity(self) -> Option<f64> {
        match self {
            BinaryKind::Add | BinaryKind::Sub => Some(0.0),
            BinaryKind::Mul | BinaryKind::Div | BinaryKind::Pow | BinaryKind::Prelu => Some(1.0),
            BinaryKind::Max | BinaryKind::Min => None,
        }
    }
}

fn fold_add(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_binary(BinaryKind::Add, ctx, m, op, c)
}
fn fold_sub(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_binary(BinaryKind::Sub, ctx, m, op, c)
}
fn fold_mul(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_binary(BinaryKind::Mul, ctx, m, op, c)
}
fn fold_div(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_binary(BinaryKind::Div, ctx, m, op, c)
}
fn fold_max(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_binary(BinaryKind::Max, ctx, m, op, c)
}
fn fold_min(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_binary(BinaryKind::Min, ctx, m, op, c)
}
fn fold_pow(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_binary(BinaryKind::Pow, ctx, m, op, c)
}
fn fold_prelu(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_binary(BinaryKind::Prelu, ctx, m, op, c)
}

/// True if `attr` is a dense constant whose every element equals `value`
/// (checked only for splats and small constants).
fn constant_is(ctx: &Context, attr: Option<Attribute>, value: f64) -> bool {
    let Some(attr) = attr else { return false };
    let AttrData::Dense(d) = ctx.attr_data(attr) else { return false };
    let small = matches!(static_num_elements(ctx, d.ty), Some(n) if n <= MAX_FOLD_ELEMENTS);
    if !d.splat && !small {
        return false;
    }
    let elem = ctx.element_type(d.ty);
    if !crate::shape::is_float_element(ctx, elem) {
        return false;
    }
    dense_values_f64(ctx, d, elem).is_some_and(|vals| vals.iter().all(|&v| v == value))
}

fn fold_binary(
    kind: BinaryKind,
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    if m.num_operands(op) != 2 || m.num_results(op) != 1 || constants.len() != 2 {
        return None;
    }
    let (lhs, rhs) = (m.operand(op, 0), m.operand(op, 1));
    let result_ty = m.value_type(m.result(op, 0));
    if let Some(identity) = kind.right_identity() {
        if m.value_type(lhs) == result_ty && constant_is(ctx, constants[1], identity) {
            return Some(smallvec::smallvec![FoldResult::Value(lhs)]);
        }
        let commutative = matches!(kind, BinaryKind::Add | BinaryKind::Mul);
        if commutative && m.value_type(rhs) == result_ty && constant_is(ctx, constants[0], identity) {
            return Some(smallvec::smallvec![FoldResult::Value(rhs)]);
        }
    }
    let a = foldable_values(ctx, constants[0]?)?;
    let b = foldable_values(ctx, constants[1]?)?;
    let (out_shape, out_elem) = crate::shape::tensor_parts(ctx, result_ty)?;
    if a.elem != out_elem || b.elem != out_elem || broadcast(&a.shape, &b.shape).ok()? != out_shape {
        return None;
    }
    let n = static_num_elements(ctx, result_ty).filter(|&n| n <= MAX_FOLD_ELEMENTS)?;
    let n = usize::try_from(n).ok()?;
    let values: Vec<f64> = if a.splat && b.splat {
        vec![kind.apply(a.at(0), b.at(0))]
    } else {
        let ia = broadcast_indices(&a, out_shape, n);
        let ib = broadcast_indices(&b, out_shape, n);
        (0..n).map(|i| kind.apply(a.at(ia[i]), b.at(ib[i]))).collect()
    };
    let attr = dense_attr(ctx, result_ty, &values)?;
    Some(smallvec::smallvec![FoldResult::Constant(attr)])
}

/// For each flat index of a tensor of shape `out` (`n` elements), the flat index
/// of the element of `v` that broadcasting reads (all zeros for a splat).
fn broadcast_indices(v: &FoldValues, out: &[i64], n: usize) -> Vec<usize> {
    if v.splat {
        return vec![0; n];
    }
    let rank = out.len();
    let offset = rank - v.shape.len().min(rank);
    // Stride of each output dimension in `v` (0 where `v` broadcasts).
    let mut strides = vec![0usize; rank];
    let mut acc = 1usize;
    for i in (offset..rank).rev() {
        let d = v.shape[i - offset].max(0) as usize;
        strides[i] = if d == 1 { 0 } else { acc };
        acc = acc.saturating_mul(d);
    }
    let mut out_idx = vec![0usize; rank];
    let mut indices = Vec::with_capacity(n);
    let mut flat = 0usize;
    for _ in 0..n {
        indices.push(flat);
        // Advance the multi-index like an odometer, keeping `flat` in step.
        for d in (0..rank).rev() {
            out_idx[d] += 1;
            flat += strides[d];
            if (out_idx[d] as i64) < out[d] {
                break;
            }
            flat -= strides[d] * out_idx[d];
            out_idx[d] = 0;
        }
    }
    indices
}

/// Folds a one-operand elementwise op on a small f32/f64 constant.
fn fold_unary(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    constants: &[Option<Attribute>],
    f: impl Fn(f64) -> f64,
) -> Option<SmallVec<[FoldResult; 1]>> {
    if m.num_operands(op) != 1 || m.num_results(op) != 1 || constants.len() != 1 {
        return None;
    }
    let result_ty = m.value_type(m.result(op, 0));
    let x = foldable_values(ctx, constants[0]?)?;
    if x.ty != result_ty {
        return None;
    }
    let values: Vec<f64> = x.values.iter().map(|&v| f(v)).collect();
    let attr = dense_attr(ctx, result_ty, &values)?;
    Some(smallvec::smallvec![FoldResult::Constant(attr)])
}

fn relu(x: f64) -> f64 {
    if x > 0.0 || x.is_nan() {
        x
    } else {
        0.0
    }
}

fn fold_relu(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_unary(ctx, m, op, c, relu)
}
fn fold_sigmoid(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_unary(ctx, m, op, c, |x| 1.0 / (1.0 + (-x).exp()))
}
fn fold_tanh(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    fold_unary(ctx, m, op, c, f64::tanh)
}
fn fold_clip(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    c: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    let (min, max) = clip_bounds(ctx, m.op_attrs(op)).ok()?;
    if min > max {
        return None;
    }
    fold_unary(ctx, m, op, c, |x| {
        if x < min {
            min
        } else if x > max {
            max
        } else {
            x
        }
    })
}

// ---- patterns ---------------------------------------------------------------

/// `relu(relu(x)) -> relu(x)`: relu is idempotent.
struct ReluRelu;

impl RewritePattern for ReluRelu {
    fn name(&self) -> &str {
        "relu-relu"
    }
    fn root(&self) -> Option<&str> {
        Some(names::RELU)
    }
    fn match_and_rewrite(&self, op: OpId, rewriter: &mut Rewriter<'_>) -> bool {
        let m = &*rewriter.module;
        if m.num_operands(op) != 1 || m.num_results(op) != 1 {
            return false;
        }
        let inner_value = m.operand(op, 0);
        let inner = m.defining_op(inner_value);
        if inner.is_none() || rewriter.ctx.op_name_str(m.op_name(inner)) != names::RELU {
            return false;
        }
        if m.value_type(inner_value) != m.value_type(m.result(op, 0)) {
            return false;
        }
        rewriter.replace_op(op, &[inner_value]).is_ok()
    }
}
