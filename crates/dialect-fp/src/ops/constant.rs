//! `fp.constant`: a tensor constant, and the materialization of folded
//! constants ([`crate::FpDialect`]'s `materialize_constant` makes one).

use super::{Sig, Signature, Sigs};
use qopt_ir_core::{
    type_to_string, AttrData, Attribute, Context, FoldResult, Location, Module, OpDef, OpId, OperationState,
    Rewriter, Traits, Type, ValueId,
};
use smallvec::SmallVec;

qopt_ir_core::op_name_constants! {
    CONSTANT = "fp.constant",
}

pub(crate) fn ops() -> Vec<OpDef> {
    vec![super::with_signature::<Constant>(
        OpDef::new(names::CONSTANT, "a tensor constant")
            .description(
                "Produces the dense constant in its `value` attribute; the result type is the \
                 constant's type. Folders materialize their constants as `fp.constant`. The element \
                 type is normally a float type; integer and quantized constants (quantized weights) \
                 are accepted too.\n\n\
                 ```\n%w = fp.constant() {value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>\n\
                 %z = fp.constant() {value = dense<0.0> : tensor<16xf32>} : () -> tensor<16xf32>\n```",
            )
            .operands(qopt_ir_core::Arity::Exact(0))
            .traits(Traits::CONSTANT_LIKE | Traits::PURE)
            .folder(fold_constant),
    )]
}

struct Constant;

impl Signature for Constant {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        if !operands.is_empty() {
            return Err(format!("expects 0 operands, found {}", operands.len()));
        }
        let value =
            ctx.dict_get(attrs, "value").ok_or("needs a 'value' attribute (dense<...> : tensor<...>)")?;
        let AttrData::Dense(d) = ctx.attr_data(value) else {
            return Err(format!(
                "'value' must be a dense elements attribute, got {}",
                qopt_ir_core::attr_to_string(ctx, value)
            ));
        };
        let (shape, elem) = crate::shape::tensor_parts(ctx, d.ty)
            .ok_or_else(|| format!("'value' must have a tensor type, got {}", type_to_string(ctx, d.ty)))?;
        Ok(smallvec::smallvec![Sig::new(shape, elem)])
    }
}

fn fold_constant(
    ctx: &mut Context,
    module: &Module,
    op: OpId,
    _constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    let value = module.op_attr(ctx, op, "value")?;
    Some(smallvec::smallvec![FoldResult::Constant(value)])
}

/// Creates `fp.constant` holding `value` (a dense attribute of type `ty`) at the
/// rewriter's insertion point; `None` for any other attribute.
pub(crate) fn materialize(
    rewriter: &mut Rewriter<'_>,
    value: Attribute,
    ty: Type,
    loc: Location,
) -> Option<ValueId> {
    match rewriter.ctx.attr_data(value) {
        AttrData::Dense(d) if d.ty == ty => {}
        _ => return None,
    }
    let name = rewriter.ctx.op_name(names::CONSTANT);
    let attrs = rewriter.ctx.dict_attr(&[("value", value)]);
    let op = rewriter.create(OperationState::new(name).results(&[ty]).attrs(attrs).loc(loc));
    Some(rewriter.module.result(op, 0))
}
