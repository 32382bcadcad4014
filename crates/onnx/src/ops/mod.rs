//! The converters: one function per ONNX op type, grouped by family in the
//! modules below, each of which lists its own in a `CONVERTERS` table (and
//! `qlinear` its ONNX Runtime contrib ops in `MICROSOFT_CONVERTERS`); the
//! graph walk looks them up by domain and op type. Each converter reads its node through [`NodeCx`], appends fp or
//! qnn ops (types from the ops' own inference) and binds the node's outputs.
//!
//! Also here: what several families share — the unsupported-op report,
//! window padding (`auto_pad`, `pads`) and per-dimension integer attributes.

mod constant;
mod conv;
mod elementwise;
mod linear;
mod lookup;
mod norm;
mod pool;
mod qlinear;
mod quant;
mod reduce;
mod shape;

use crate::attrs::NodeAttrs;
use crate::error::{ImportError, UnsupportedOp};
use crate::import::{node_label, NodeCx};
use crate::onnx::GraphProto;
use qopt_ir_core::{Attribute, Context};

/// Converts one node.
pub(crate) type ConvertFn = fn(&mut NodeCx<'_, '_>) -> Result<(), String>;

/// Every supported op type of the standard domain and its converter, sorted:
/// the tables of the family modules, gathered once.
fn converters() -> &'static [(&'static str, ConvertFn)] {
    static ALL: std::sync::OnceLock<Vec<(&'static str, ConvertFn)>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<(&'static str, ConvertFn)> = [
            constant::CONVERTERS,
            conv::CONVERTERS,
            elementwise::CONVERTERS,
            linear::CONVERTERS,
            norm::CONVERTERS,
            pool::CONVERTERS,
            qlinear::CONVERTERS,
            quant::CONVERTERS,
            reduce::CONVERTERS,
            shape::CONVERTERS,
        ]
        .concat();
        all.sort_by_key(|(name, _)| *name);
        all
    })
}

/// The domain of ONNX Runtime's contrib ops, whose quantized ops
/// (`QGemm`, `QLinearAdd`, …) the importer converts.
pub(crate) const MICROSOFT_DOMAIN: &str = "com.microsoft";

/// The op types the importer supports, sorted: those of the standard domain
/// with a converter or that it evaluates on constants ([`crate::fold`]),
/// then the [`MICROSOFT_DOMAIN`] ones as `com.microsoft.QGemm`.
pub fn supported_op_types() -> impl Iterator<Item = &'static str> {
    static ALL: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<&'static str> =
            converters().iter().map(|(name, _)| *name).chain(crate::fold::folded_op_types()).collect();
        all.sort_unstable();
        all.dedup();
        let mut contrib: Vec<&'static str> = qlinear::MICROSOFT_CONVERTERS
            .iter()
            .map(|(name, _)| &*Box::leak(format!("{MICROSOFT_DOMAIN}.{name}").into_boxed_str()))
            .collect();
        contrib.sort_unstable();
        all.extend(contrib);
        all
    })
    .iter()
    .copied()
}

/// True if `domain` names the standard operator set.
pub(crate) fn is_standard(domain: &str) -> bool {
    domain.is_empty() || domain == "ai.onnx"
}

/// True if the importer converts or evaluates op type `op_type` of `domain`.
pub(crate) fn is_supported(domain: &str, op_type: &str) -> bool {
    converter(domain, op_type).is_some() || (is_standard(domain) && crate::fold::folder(op_type).is_some())
}

/// The converter of op type `op_type` of `domain`.
pub(crate) fn converter(domain: &str, op_type: &str) -> Option<ConvertFn> {
    let table: &[(&str, ConvertFn)] = if is_standard(domain) {
        converters()
    } else if domain == MICROSOFT_DOMAIN {
        qlinear::MICROSOFT_CONVERTERS
    } else {
        &[]
    };
    table.iter().find(|(name, _)| *name == op_type).map(|(_, f)| *f)
}

/// One error listing every op type of `graph` without a converter, with the
/// nodes using it, in graph order. Nodes inside subgraphs (the bodies of
/// `If`, `Loop`, `Scan`) are listed too, named by their path
/// (`loop/body/node`); nested bodies are walked with a worklist.
pub(crate) fn check_supported(graph: &GraphProto<'_>) -> Result<(), ImportError> {
    let mut unsupported: Vec<UnsupportedOp> = Vec::new();
    let mut pending = Vec::new();
    list_unsupported("", graph, &mut pending, &mut unsupported);
    while let Some((prefix, body)) = pending.pop() {
        list_unsupported(&prefix, &body, &mut pending, &mut unsupported);
    }
    if unsupported.is_empty() {
        Ok(())
    } else {
        Err(ImportError::UnsupportedOps(unsupported))
    }
}

/// Adds the unsupported nodes of `graph` to `unsupported` and its subgraphs to `pending`.
fn list_unsupported<'a>(
    prefix: &str,
    graph: &GraphProto<'a>,
    pending: &mut Vec<(String, GraphProto<'a>)>,
    unsupported: &mut Vec<UnsupportedOp>,
) {
    for node in &graph.node {
        let label = format!("{prefix}{}", node_label(node));
        for attr in &node.attribute {
            for sub in &attr.subgraphs {
                // A body that does not decode is reported when the node is converted.
                if let Ok(body) = crate::onnx::decode_subgraph(sub) {
                    pending.push((format!("{label}/{}/", attr.name), body));
                }
            }
        }
        let standard = is_standard(&node.domain);
        if is_supported(&node.domain, &node.op_type) {
            continue;
        }
        let op_type =
            if standard { node.op_type.clone() } else { format!("{}.{}", node.domain, node.op_type) };
        match unsupported.iter_mut().find(|u| u.op_type == op_type) {
            Some(u) => u.nodes.push(label),
            None => unsupported.push(UnsupportedOp { op_type, nodes: vec![label] }),
        }
    }
}

/// Attribute entries of an op being built; `dict` interns them.
#[derive(Default)]
pub(crate) struct AttrList {
    entries: Vec<(&'static str, Attribute)>,
}

impl AttrList {
    pub fn push(&mut self, name: &'static str, value: Attribute) {
        self.entries.push((name, value));
    }

    /// Adds the integer list `name` unless it equals `default`.
    pub fn ints_unless(&mut self, ctx: &mut Context, name: &'static str, values: &[i64], default: &[i64]) {
        if values != default {
            let a = ctx.i64_array_attr(values);
            self.push(name, a);
        }
    }

    pub fn dict(&self, ctx: &mut Context) -> Attribute {
        ctx.dict_attr(&self.entries)
    }
}

/// The integer list `name` with one entry per spatial dimension (`n`), `default` when missing.
pub(crate) fn spatial_ints(
    attrs: &NodeAttrs<'_>,
    name: &str,
    n: usize,
    default: i64,
) -> Result<Vec<i64>, String> {
    let values = attrs.opt_ints(name)?.unwrap_or_else(|| vec![default; n]);
    if values.len() != n {
        return Err(format!(
            "attribute '{name}' has {} values but the input has {n} spatial dimensions",
            values.len()
        ));
    }
    Ok(values)
}

/// The begin-then-end paddings of a window op over input sizes `spatial`:
/// from `auto_pad` (`SAME_UPPER`, `SAME_LOWER`: output size ⌈in / stride⌉, the
/// odd padding at the end or the beginning; `VALID`: none) or, with
/// `NOTSET`, the `pads` attribute (default zeros).
pub(crate) fn window_pads(
    attrs: &NodeAttrs<'_>,
    spatial: &[i64],
    kernel: &[i64],
    strides: &[i64],
    dilations: &[i64],
) -> Result<Vec<i64>, String> {
    let n = spatial.len();
    let mode = attrs.string("auto_pad", "NOTSET")?;
    match mode.as_str() {
        "NOTSET" => {
            let pads = attrs.opt_ints("pads")?.unwrap_or_else(|| vec![0; 2 * n]);
            if pads.len() != 2 * n {
                return Err(format!("attribute 'pads' has {} values, expected {}", pads.len(), 2 * n));
            }
            if let Some(p) = pads.iter().find(|&&p| p < 0) {
                return Err(format!("attribute 'pads' has a negative value {p}"));
            }
            Ok(pads)
        }
        "VALID" => Ok(vec![0; 2 * n]),
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut pads = vec![0; 2 * n];
            for i in 0..n {
                let (size, k, s, d) = (
                    i128::from(spatial[i]),
                    i128::from(kernel[i]),
                    i128::from(strides[i]),
                    i128::from(dilations[i]),
                );
                if size < 0 || k < 1 || s < 1 || d < 1 {
                    return Err(format!("auto_pad {mode} needs static sizes and positive windows"));
                }
                let out = (size + s - 1) / s;
                let total = ((out - 1) * s + (k - 1) * d + 1 - size).max(0);
                let (small, large) = (total / 2, total - total / 2);
                let (begin, end) = if mode == "SAME_UPPER" { (small, large) } else { (large, small) };
                pads[i] = i64::try_from(begin).map_err(|_| "padding overflows")?;
                pads[n + i] = i64::try_from(end).map_err(|_| "padding overflows")?;
            }
            Ok(pads)
        }
        other => Err(format!("auto_pad '{other}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")),
    }
}

/// `axis` in `[-rank, rank)` as an index.
pub(crate) fn normalize_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converters_are_sorted_and_unique() {
        let names: Vec<&str> = supported_op_types().collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
    }
}
