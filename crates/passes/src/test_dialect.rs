//! The `test` dialect: a handful of scalar integer ops with just the traits the
//! generic passes ask about, so their tests do not depend on a real dialect.
//! The unit tests (`#[cfg(test)]`) and the golden harness (`tests/golden.rs`, by
//! `#[path]`) share this one definition.
//!
//! | op | traits | notes |
//! |---|---|---|
//! | `test.const` | ConstantLike, Pure | `value` is an integer attribute |
//! | `test.add` | Pure, Commutative | folds `x + 0 -> x` and `c1 + c2 -> c` (wrapping i64) |
//! | `test.mul` | Pure | not commutative, no folder |
//! | `test.neg` | Pure | pattern `neg-neg`: `neg(neg(x)) -> x` |
//! | `test.swap` | Pure | pattern `swap-operands` swaps its operands forever (never converges) |
//! | `test.effect` | none | any operands and results: has side effects |
//! | `test.region_op` | NoTerminator | one region; any operands and results |
//! | `test.pure_region` | Pure, NoTerminator | like `test.region_op`, but pure |
//!
//! ```text
//! %0 = test.const() {value = 2} : () -> i64
//! %1 = test.add(%x, %0) : (i64, i64) -> i64
//! test.effect(%1) : (i64) -> ()
//! ```

use qopt_ir_core::{Arity, RewritePattern, Rewriter};
use qopt_ir_core::{
    AttrData, Attribute, Context, Dialect, FoldResult, Location, Module, OpDef, OpId, OperationState, Traits,
    Type, ValueId,
};
use smallvec::{smallvec, SmallVec};

/// The `test` dialect; see the module docs.
pub struct TestDialect;

/// Registers the `test` dialect in `ctx`.
pub fn register_test_dialect(ctx: &mut Context) -> Result<(), String> {
    ctx.register_dialect(TestDialect)
}

impl Dialect for TestDialect {
    fn name(&self) -> &'static str {
        "test"
    }

    fn summary(&self) -> &'static str {
        "ops for testing the generic passes"
    }

    fn ops(&self) -> Vec<OpDef> {
        let binary = Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE;
        vec![
            OpDef::new("test.const", "an integer constant")
                .traits(Traits::CONSTANT_LIKE | Traits::PURE)
                .verifier(|v| match v.attr("value").map(|a| v.ctx.attr_data(a)) {
                    Some(AttrData::Int { .. }) => Ok(()),
                    _ => Err("test.const needs an integer 'value' attribute".into()),
                }),
            OpDef::new("test.add", "integer addition")
                .operands(Arity::Exact(2))
                .traits(binary | Traits::COMMUTATIVE)
                .folder(fold_add),
            OpDef::new("test.mul", "integer multiplication (not marked commutative)")
                .operands(Arity::Exact(2))
                .traits(binary),
            OpDef::new("test.neg", "integer negation")
                .operands(Arity::Exact(1))
                .traits(Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE),
            OpDef::new("test.swap", "an op whose canonicalization never converges")
                .operands(Arity::Exact(2))
                .traits(binary),
            OpDef::new("test.effect", "an op with side effects")
                .operands(Arity::AtLeast(0))
                .results(Arity::AtLeast(0)),
            OpDef::new("test.region_op", "an op with one region whose blocks need no terminator")
                .operands(Arity::AtLeast(0))
                .results(Arity::AtLeast(0))
                .regions(Arity::Exact(1))
                .traits(Traits::NO_TERMINATOR),
            OpDef::new("test.pure_region", "a pure op with one region whose blocks need no terminator")
                .operands(Arity::AtLeast(0))
                .results(Arity::AtLeast(0))
                .regions(Arity::Exact(1))
                .traits(Traits::PURE | Traits::NO_TERMINATOR),
        ]
    }

    fn materialize_constant(
        &self,
        rewriter: &mut Rewriter<'_>,
        value: Attribute,
        ty: Type,
        loc: Location,
    ) -> Option<ValueId> {
        if !matches!(rewriter.ctx.attr_data(value), AttrData::Int { .. }) {
            return None;
        }
        let name = rewriter.ctx.op_name("test.const");
        let attrs = rewriter.ctx.dict_attr(&[("value", value)]);
        let op = rewriter.create(OperationState::new(name).results(&[ty]).attrs(attrs).loc(loc));
        Some(rewriter.module.result(op, 0))
    }

    fn canonicalization_patterns(&self) -> Vec<Box<dyn RewritePattern>> {
        vec![Box::new(NegNeg), Box::new(SwapOperands)]
    }
}

/// `x + 0 -> x`, `0 + x -> x`, `c1 + c2 -> c1 + c2` (wrapping in i64).
fn fold_add(
    ctx: &mut Context,
    module: &Module,
    op: OpId,
    constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    let int = |a: Option<Attribute>| a.and_then(|a| ctx.attr_as_int(a)).and_then(|v| i64::try_from(v).ok());
    let (lhs, rhs) = (int(constants[0]), int(constants[1]));
    match (lhs, rhs) {
        (Some(a), Some(b)) => {
            let ty = module.value_type(module.result(op, 0));
            Some(smallvec![FoldResult::Constant(ctx.int_attr(a.wrapping_add(b) as i128, ty))])
        }
        (_, Some(0)) => Some(smallvec![FoldResult::Value(module.operand(op, 0))]),
        (Some(0), _) => Some(smallvec![FoldResult::Value(module.operand(op, 1))]),
        _ => None,
    }
}

/// `test.neg(test.neg(x)) -> x`.
struct NegNeg;

impl RewritePattern for NegNeg {
    fn name(&self) -> &str {
        "neg-neg"
    }
    fn root(&self) -> Option<&str> {
        Some("test.neg")
    }
    fn match_and_rewrite(&self, op: OpId, rewriter: &mut Rewriter<'_>) -> bool {
        let inner = rewriter.module.defining_op(rewriter.module.operand(op, 0));
        if inner.is_none() || rewriter.module.op_name(inner) != rewriter.module.op_name(op) {
            return false;
        }
        let x = rewriter.module.operand(inner, 0);
        rewriter.replace_op(op, &[x]).is_ok()
    }
}

/// `test.swap(a, b) -> test.swap(b, a)`: undoes itself, so canonicalization
/// never converges on it (for testing the bound).
struct SwapOperands;

impl RewritePattern for SwapOperands {
    fn name(&self) -> &str {
        "swap-operands"
    }
    fn root(&self) -> Option<&str> {
        Some("test.swap")
    }
    fn match_and_rewrite(&self, op: OpId, rewriter: &mut Rewriter<'_>) -> bool {
        let (a, b) = (rewriter.module.operand(op, 0), rewriter.module.operand(op, 1));
        if a == b {
            return false;
        }
        rewriter.set_operand(op, 0, b);
        rewriter.set_operand(op, 1, a);
        true
    }
}
