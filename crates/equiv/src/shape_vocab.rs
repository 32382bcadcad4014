//! The rule language's shape vocabulary: macros that state one op as
//! another over more dimensions, as `fp.conv1d` is `fp.conv2d` over a unit
//! height between reshapes. [`crate::rules`] parses them; the functions here
//! evaluate them on the e-graph and return `None` (the rule does not fire at
//! that match) when an operand is not what they need.

use crate::analysis::{attr_leaf, EqAnalysis};
use crate::lang::Node;
use crate::quant_vocab::{shaped_type, type_of};
use egg::{EGraph, Id};

type Graph<'g, 'a> = &'g mut EGraph<Node, EqAnalysis<'a>>;

/// `(unit-dim-type ?v AXIS)`: the type of `?v` (a value or a type leaf) with
/// a dimension of size 1 inserted before dimension `AXIS` (`AXIS` may be the
/// rank: after the last).
pub fn unit_dim_type(egraph: Graph<'_, '_>, v: Id, axis: usize) -> Option<Id> {
    let ty = type_of(egraph, v)?;
    let mut shape = egraph.analysis.ctx.tensor_shape(ty)?.to_vec();
    if axis > shape.len() {
        return None;
    }
    shape.insert(axis, 1);
    Some(shaped_type(egraph, ty, &shape))
}

/// `(shape-attrs ?t)`: the attributes `{shape = [...]}` of an `fp.reshape`
/// to the static shape of type `?t`.
pub fn shape_attrs(egraph: Graph<'_, '_>, t: Id) -> Option<Id> {
    let ty = type_of(egraph, t)?;
    let ctx = &mut *egraph.analysis.ctx;
    let shape = ctx.tensor_shape(ty)?.to_vec();
    if shape.iter().any(|&d| d < 0) {
        return None;
    }
    let shape = ctx.i64_array_attr(&shape);
    let attrs = ctx.dict_attr(&[("shape", shape)]);
    Some(egraph.add(Node::Attr(attrs)))
}

/// `(attrs-insert ?a NAME:INDEX:VALUE...)`: dictionary `?a` with `VALUE`
/// inserted at `INDEX` of its integer array `NAME`, each in turn (an entry
/// `?a` lacks stays out: it keeps its default).
pub fn attrs_insert(egraph: Graph<'_, '_>, a: Id, inserts: &[(String, usize, i64)]) -> Option<Id> {
    let mut attrs = attr_leaf(egraph, a)?;
    let ctx = &mut *egraph.analysis.ctx;
    for (name, index, value) in inserts {
        let Some(array) = ctx.dict_get(attrs, name) else { continue };
        let mut items = ctx.attr_as_i64_array(array)?;
        if *index > items.len() {
            return None;
        }
        items.insert(*index, *value);
        let array = ctx.i64_array_attr(&items);
        attrs = ctx.dict_set(attrs, name, array);
    }
    Some(egraph.add(Node::Attr(attrs)))
}

/// Parses one `NAME:INDEX:VALUE` of `attrs-insert`.
pub fn parse_insert(text: &str) -> Result<(String, usize, i64), String> {
    let bad = || format!("'attrs-insert' takes NAME:INDEX:VALUE, got '{text}'");
    let mut parts = text.split(':');
    let (Some(name), Some(index), Some(value), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    Ok((name.to_string(), index.parse().map_err(|_| bad())?, value.parse().map_err(|_| bad())?))
}
