//! The ONNX model being written: nodes, initializers, graph inputs and
//! outputs, opset imports, and their encoding into `ModelProto` bytes with
//! [`Encoder`]. Field numbers are those of `onnx/onnx.proto`, the ones
//! [`crate::onnx`] decodes.
//!
//! Names are unique within the graph ([`Names`]): every value, initializer
//! and node name is made from a location or an op name, with `_1`, `_2`, …
//! appended when it is taken.

use super::proto_write::Encoder;
use crate::onnx::data_type as dt;
use qopt_ir_core::FxHashSet;
use std::sync::Arc;

/// The domain of ONNX Runtime's contrib ops (`QGemm`, `QLinearAdd`, …).
pub(crate) const MICROSOFT_DOMAIN: &str = "com.microsoft";

/// One attribute value of a node.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AttrValue {
    Int(i64),
    Float(f32),
    String(String),
    Ints(Vec<i64>),
}

/// One node of the graph.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub name: String,
    pub op_type: &'static str,
    /// Empty for the standard domain.
    pub domain: &'static str,
    /// Value names; an empty name is an omitted optional input.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attributes: Vec<(&'static str, AttrValue)>,
}

/// An initializer: a named constant tensor, its elements little-endian in
/// ONNX's `raw_data` layout for `data_type` (4-bit types two to a byte).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Initializer {
    pub name: String,
    pub dims: Vec<i64>,
    pub data_type: i32,
    pub raw: Arc<[u8]>,
}

/// A graph input or output with its static tensor type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GraphValue {
    pub name: String,
    pub data_type: i32,
    pub dims: Vec<i64>,
}

/// A whole model.
#[derive(Clone, Debug, Default)]
pub(crate) struct OnnxModel {
    pub graph_name: String,
    /// The standard opset version.
    pub opset: i64,
    /// True when a node of [`MICROSOFT_DOMAIN`] is used.
    pub uses_microsoft_domain: bool,
    pub nodes: Vec<Node>,
    pub initializers: Vec<Initializer>,
    pub inputs: Vec<GraphValue>,
    pub outputs: Vec<GraphValue>,
}

impl OnnxModel {
    /// Renames tensor `from` (a node's output) to `to` wherever a node
    /// writes or reads it.
    pub fn rename(&mut self, from: &str, to: &str) {
        for node in &mut self.nodes {
            for name in node.inputs.iter_mut().chain(node.outputs.iter_mut()) {
                if name == from {
                    *name = to.to_string();
                }
            }
        }
    }
}

/// The IR version written with standard opset `opset`: the one ONNX
/// released with it (`onnx.helper.VERSION_TABLE`), so that readers that know
/// the opset know the file format.
pub(crate) fn ir_version_for_opset(opset: i64) -> i64 {
    match opset {
        ..=18 => 8,
        19 | 20 => 9,
        21 | 22 => 10,
        23 => 11,
        24 => 12,
        25..=27 => 13,
        _ => 14,
    }
}

impl OnnxModel {
    /// The `ModelProto` bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut model = Encoder::new();
        model.int(1, ir_version_for_opset(self.opset));
        model.string(2, "qopt");
        model.string(3, env!("CARGO_PKG_VERSION"));
        model.message(7, |graph| self.encode_graph(graph));
        model.message(8, |opset| {
            opset.string(1, "");
            opset.int(2, self.opset);
        });
        if self.uses_microsoft_domain {
            model.message(8, |opset| {
                opset.string(1, MICROSOFT_DOMAIN);
                opset.int(2, 1);
            });
        }
        model.into_bytes()
    }

    fn encode_graph(&self, graph: &mut Encoder) {
        for node in &self.nodes {
            graph.message(1, |n| encode_node(n, node));
        }
        graph.string(2, &self.graph_name);
        for init in &self.initializers {
            graph.message(5, |t| {
                t.packed_ints(1, &init.dims);
                t.int(2, i64::from(init.data_type));
                t.string(8, &init.name);
                t.bytes(9, &init.raw);
            });
        }
        for (field, values) in [(11, &self.inputs), (12, &self.outputs)] {
            for value in values {
                graph.message(field, |info| encode_value_info(info, value));
            }
        }
    }
}

fn encode_node(n: &mut Encoder, node: &Node) {
    for input in &node.inputs {
        n.string(1, input);
    }
    for output in &node.outputs {
        n.string(2, output);
    }
    n.string(3, &node.name);
    n.string(4, node.op_type);
    for (name, value) in &node.attributes {
        n.message(5, |a| {
            a.string(1, name);
            match value {
                AttrValue::Float(v) => {
                    a.float(2, *v);
                    a.int(20, i64::from(crate::onnx::attr_type::FLOAT));
                }
                AttrValue::Int(v) => {
                    a.int(3, *v);
                    a.int(20, i64::from(crate::onnx::attr_type::INT));
                }
                AttrValue::String(v) => {
                    a.string(4, v);
                    a.int(20, i64::from(crate::onnx::attr_type::STRING));
                }
                AttrValue::Ints(v) => {
                    // An empty list is written unpacked-empty: the type says what it is.
                    a.packed_ints(8, v);
                    a.int(20, i64::from(crate::onnx::attr_type::INTS));
                }
            }
        });
    }
    if !node.domain.is_empty() {
        n.string(7, node.domain);
    }
}

fn encode_value_info(info: &mut Encoder, value: &GraphValue) {
    info.string(1, &value.name);
    info.message(2, |ty| {
        ty.message(1, |tensor| {
            tensor.int(1, i64::from(value.data_type));
            tensor.message(2, |shape| {
                for &d in &value.dims {
                    shape.message(1, |dim| dim.int(1, d));
                }
            });
        });
    });
}

/// The names given out so far; each new one is unique.
#[derive(Default)]
pub(crate) struct Names {
    taken: FxHashSet<String>,
}

impl Names {
    /// `base` made safe and unique: characters other than letters, digits and
    /// `_ . / : - +` become `_`; `_1`, `_2`, … is appended while it is taken.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut clean: String = base
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || "_./:-+".contains(c) { c } else { '_' })
            .collect();
        if clean.is_empty() {
            clean.push_str("value");
        }
        if self.taken.insert(clean.clone()) {
            return clean;
        }
        let mut n = 1u64;
        loop {
            let candidate = format!("{clean}_{n}");
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }
}

impl Names {
    /// Takes `name` exactly, if it is not empty and not taken yet.
    pub fn exact(&mut self, name: &str) -> Option<String> {
        (!name.is_empty() && self.taken.insert(name.to_string())).then(|| name.to_string())
    }
}

/// Bytes per element of the ONNX data types the exporter writes with one
/// or more bytes per element (4-bit types are packed, see [`pack_4bit`]).
pub(crate) fn element_bytes(data_type: i32) -> Option<usize> {
    crate::tensor::element_bytes(data_type)
}

/// Packs 4-bit values (one per byte, low nibble significant) two to a byte,
/// the first element in the low nibble, as ONNX stores INT4 and UINT4.
pub(crate) fn pack_4bit(values: &[u8]) -> Vec<u8> {
    values.chunks(2).map(|pair| (pair[0] & 0x0F) | (pair.get(1).copied().unwrap_or(0) & 0x0F) << 4).collect()
}

/// True for the 4-bit ONNX integer types.
pub(crate) fn is_4bit(data_type: i32) -> bool {
    data_type == dt::INT4 || data_type == dt::UINT4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_clean() {
        let mut names = Names::default();
        assert_eq!(names.fresh("conv1"), "conv1");
        assert_eq!(names.fresh("conv1"), "conv1_1");
        assert_eq!(names.fresh("conv1"), "conv1_2");
        assert_eq!(names.fresh("a b\"c"), "a_b_c");
        assert_eq!(names.fresh(""), "value");
    }

    #[test]
    fn four_bit_values_pack_low_nibble_first() {
        assert_eq!(pack_4bit(&[0x01, 0x0F, 0xF8]), [0xF1, 0x08]);
    }

    #[test]
    fn a_model_decodes_back() {
        let model = OnnxModel {
            graph_name: "main".into(),
            opset: 17,
            uses_microsoft_domain: true,
            nodes: vec![Node {
                name: "r".into(),
                op_type: "Relu",
                domain: "",
                inputs: vec!["x".into()],
                outputs: vec!["y".into()],
                attributes: vec![("alpha", AttrValue::Float(0.5)), ("perm", AttrValue::Ints(vec![1, 0]))],
            }],
            initializers: vec![Initializer {
                name: "w".into(),
                dims: vec![2],
                data_type: dt::FLOAT,
                raw: Arc::from(&[0u8; 8][..]),
            }],
            inputs: vec![GraphValue { name: "x".into(), data_type: dt::FLOAT, dims: vec![1, 2] }],
            outputs: vec![GraphValue { name: "y".into(), data_type: dt::FLOAT, dims: vec![1, 2] }],
        };
        let bytes = model.encode();
        let decoded = crate::onnx::decode_model(&bytes).unwrap();
        assert_eq!(decoded.ir_version, 8);
        assert_eq!(decoded.opset_import.len(), 2);
        let graph = decoded.graph.unwrap();
        assert_eq!(graph.node[0].op_type, "Relu");
        assert_eq!(graph.node[0].attribute[0].f, Some(0.5));
        assert_eq!(graph.node[0].attribute[1].ints, [1, 0]);
        assert_eq!(graph.initializer[0].raw_data.map(<[u8]>::len), Some(8));
        assert_eq!(graph.input[0].tensor.as_ref().unwrap().elem_type, dt::FLOAT);
    }
}
