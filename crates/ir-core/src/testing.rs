//! The `test` dialect: scalar integer ops and structural ops with just the
//! traits that the IR core and the generic passes ask about, so their tests do
//! not depend on a real dialect. One definition for every test that needs one:
//! ir-core's unit tests, and (with the `testing` feature) the passes' unit and
//! golden tests.
//!
//! | op | traits | notes |
//! |---|---|---|
//! | `test.const` | ConstantLike, Pure | `value` is the constant (folds read integers) |
//! | `test.add` | Pure, Commutative, SameOperandsAndResultType | result type inferred from operand 0; folds `x + 0 -> x` and `c1 + c2 -> c` (wrapping i64) |
//! | `test.mul` | Pure, SameOperandsAndResultType | not commutative, no folder |
//! | `test.neg` | Pure, SameOperandsAndResultType | inferred; pattern `neg-neg`: `neg(neg(x)) -> x` |
//! | `test.swap` | Pure, SameOperandsAndResultType | pattern `swap-operands` swaps its operands forever (never converges) |
//! | `test.infer` | none | one operand; result type inferred from it |
//! | `test.effect` | none | any operands and results: has side effects, never dead |
//! | `test.term` | Terminator | any operands, no results |
//! | `test.region` | none | any operands and results, one region (blocks end in a terminator) |
//! | `test.region_op` | NoTerminator | any operands and results, one region |
//! | `test.pure_region` | Pure, NoTerminator | like `test.region_op`, but pure |
//! | `test.multi` | none | any number of regions, no results |
//! | `test.isolated` | IsolatedFromAbove, NoTerminator | one region, no results |
//!
//! ```text
//! %0 = test.const() {value = 2} : () -> i64
//! %1 = test.add(%x, %0) : (i64, i64) -> i64
//! test.effect(%1) : (i64) -> ()
//! ```

use crate::{
    Arity, AttrData, Attribute, Context, Dialect, FoldResult, Location, Module, OpDef, OpId, OperationState,
    RewritePattern, Rewriter, Traits, Type, ValueId,
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
        "ops for testing the IR core and the generic passes"
    }

    fn ops(&self) -> Vec<OpDef> {
        let binary = Traits::PURE | Traits::SAME_OPERANDS_AND_RESULT_TYPE;
        let any = |def: OpDef| def.operands(Arity::AtLeast(0)).results(Arity::AtLeast(0));
        vec![
            OpDef::new("test.const", "a constant: the result is the `value` attribute")
                .traits(Traits::CONSTANT_LIKE | Traits::PURE),
            OpDef::new("test.add", "integer addition")
                .operands(Arity::Exact(2))
                .traits(binary | Traits::COMMUTATIVE)
                .infer(infer_first)
                .folder(fold_add),
            OpDef::new("test.mul", "integer multiplication (not marked commutative)")
                .operands(Arity::Exact(2))
                .traits(binary),
            OpDef::new("test.neg", "integer negation")
                .operands(Arity::Exact(1))
                .traits(binary)
                .infer(infer_first),
            OpDef::new("test.swap", "an op whose canonicalization never converges")
                .operands(Arity::Exact(2))
                .traits(binary),
            OpDef::new("test.infer", "result type is the operand type")
                .operands(Arity::Exact(1))
                .infer(infer_first),
            any(OpDef::new("test.effect", "an op with side effects, never dead")),
            OpDef::new("test.term", "ends a block")
                .operands(Arity::AtLeast(0))
                .results(Arity::Exact(0))
                .traits(Traits::TERMINATOR),
            any(OpDef::new("test.region", "holds one region whose blocks end in a terminator"))
                .regions(Arity::Exact(1)),
            any(OpDef::new("test.region_op", "an op with one region whose blocks need no terminator"))
                .regions(Arity::Exact(1))
                .traits(Traits::NO_TERMINATOR),
            any(OpDef::new("test.pure_region", "a pure op with one region whose blocks need no terminator"))
                .regions(Arity::Exact(1))
                .traits(Traits::PURE | Traits::NO_TERMINATOR),
            OpDef::new("test.multi", "holds any number of regions")
                .results(Arity::Exact(0))
                .regions(Arity::AtLeast(0)),
            OpDef::new("test.isolated", "holds an isolated region")
                .results(Arity::Exact(0))
                .regions(Arity::Exact(1))
                .traits(Traits::ISOLATED_FROM_ABOVE | Traits::NO_TERMINATOR),
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

/// The result type of an op whose result has operand 0's type.
fn infer_first(_: &mut Context, operands: &[Type], _: Attribute) -> Result<SmallVec<[Type; 1]>, String> {
    match operands.first() {
        Some(&t) => Ok(smallvec![t]),
        None => Err("cannot infer a type without operands".into()),
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
