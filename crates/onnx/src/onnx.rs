//! The ONNX messages the importer reads, decoded from the wire format
//! ([`crate::proto`]) into plain structs: `ModelProto`, `GraphProto`,
//! `NodeProto`, `AttributeProto`, `TensorProto`, `ValueInfoProto` with its
//! `TypeProto.Tensor` and `TensorShapeProto`.
//!
//! Field numbers are those of `onnx/onnx.proto`. Fields the importer does
//! not use (doc strings, metadata, training info, functions, sparse
//! initializers) are skipped. Tensor payloads borrow the input bytes
//! (`raw_data`), so decoding copies no weights.
//!
//! Nesting is fixed by the schema (model → graph → node → attribute →
//! tensor; value info → type → shape → dimension), and the decoders follow
//! it with one function per message and no recursion: a graph inside an
//! attribute (the bodies of `If`, `Loop`, `Scan`) is not decoded, only
//! recorded ([`AttributeProto::subgraphs`]; [`decode_subgraph`] decodes one
//! on request, so a caller walks nested bodies with a worklist), and a nested non-tensor type
//! (sequence, map, optional) only as "not a tensor".

use crate::proto::{DecodeError, Field, Reader};

/// A whole model file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelProto<'a> {
    /// `ir_version` (1).
    pub ir_version: i64,
    /// `opset_import` (8).
    pub opset_import: Vec<OperatorSetId>,
    /// `graph` (7).
    pub graph: Option<GraphProto<'a>>,
}

/// One imported operator set (`OperatorSetIdProto`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorSetId {
    /// `domain` (1): empty or `ai.onnx` for the standard operators.
    pub domain: String,
    /// `version` (2).
    pub version: i64,
}

/// The computation (`GraphProto`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GraphProto<'a> {
    /// `name` (2).
    pub name: String,
    /// `node` (1), in topological order.
    pub node: Vec<NodeProto<'a>>,
    /// `initializer` (5): named constant tensors.
    pub initializer: Vec<TensorProto<'a>>,
    /// `input` (11); may also list initializers.
    pub input: Vec<ValueInfo>,
    /// `output` (12).
    pub output: Vec<ValueInfo>,
    /// `value_info` (13): types of intermediate values, when the producer wrote them.
    pub value_info: Vec<ValueInfo>,
}

/// One operator application (`NodeProto`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeProto<'a> {
    /// `input` (1): value names; an empty name is an omitted optional input.
    pub input: Vec<String>,
    /// `output` (2): value names.
    pub output: Vec<String>,
    /// `name` (3), possibly empty.
    pub name: String,
    /// `op_type` (4).
    pub op_type: String,
    /// `domain` (7): empty or `ai.onnx` for the standard operators.
    pub domain: String,
    /// `attribute` (5).
    pub attribute: Vec<AttributeProto<'a>>,
}

/// `AttributeProto.AttributeType` values the importer names.
pub mod attr_type {
    /// `FLOAT`.
    pub const FLOAT: i32 = 1;
    /// `INT`.
    pub const INT: i32 = 2;
    /// `STRING`.
    pub const STRING: i32 = 3;
    /// `TENSOR`.
    pub const TENSOR: i32 = 4;
    /// `GRAPH`.
    pub const GRAPH: i32 = 5;
    /// `FLOATS`.
    pub const FLOATS: i32 = 6;
    /// `INTS`.
    pub const INTS: i32 = 7;
    /// `STRINGS`.
    pub const STRINGS: i32 = 8;
    /// `GRAPHS`.
    pub const GRAPHS: i32 = 10;

    /// The enum name of `t`, for messages.
    pub fn name(t: i32) -> &'static str {
        match t {
            0 => "UNDEFINED",
            FLOAT => "FLOAT",
            INT => "INT",
            STRING => "STRING",
            TENSOR => "TENSOR",
            GRAPH => "GRAPH",
            FLOATS => "FLOATS",
            INTS => "INTS",
            STRINGS => "STRINGS",
            9 => "TENSORS",
            GRAPHS => "GRAPHS",
            11 => "SPARSE_TENSOR",
            12 => "SPARSE_TENSORS",
            13 => "TYPE_PROTO",
            14 => "TYPE_PROTOS",
            _ => "an unknown attribute type",
        }
    }
}

/// One named attribute of a node (`AttributeProto`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttributeProto<'a> {
    /// `name` (1).
    pub name: String,
    /// `type` (20), an [`attr_type`] value (0 if the producer left it out).
    pub attr_type: i32,
    /// `f` (2).
    pub f: Option<f32>,
    /// `i` (3).
    pub i: Option<i64>,
    /// `s` (4).
    pub s: Option<&'a [u8]>,
    /// `t` (5).
    pub t: Option<TensorProto<'a>>,
    /// `floats` (7).
    pub floats: Vec<f32>,
    /// `ints` (8).
    pub ints: Vec<i64>,
    /// `strings` (9).
    pub strings: Vec<&'a [u8]>,
    /// `g` (6) and `graphs` (11): subgraphs, not decoded (see [`decode_subgraph`]).
    pub subgraphs: Vec<Field<'a>>,
}

/// `TensorProto.DataType` values.
pub mod data_type {
    /// `FLOAT` (f32).
    pub const FLOAT: i32 = 1;
    /// `UINT8`.
    pub const UINT8: i32 = 2;
    /// `INT8`.
    pub const INT8: i32 = 3;
    /// `UINT16`.
    pub const UINT16: i32 = 4;
    /// `INT16`.
    pub const INT16: i32 = 5;
    /// `INT32`.
    pub const INT32: i32 = 6;
    /// `INT64`.
    pub const INT64: i32 = 7;
    /// `BOOL`.
    pub const BOOL: i32 = 9;
    /// `FLOAT16`.
    pub const FLOAT16: i32 = 10;
    /// `DOUBLE`.
    pub const DOUBLE: i32 = 11;
    /// `UINT32`.
    pub const UINT32: i32 = 12;
    /// `UINT64`.
    pub const UINT64: i32 = 13;
    /// `BFLOAT16`.
    pub const BFLOAT16: i32 = 16;
    /// `UINT4` (two elements per byte, the first in the low nibble).
    pub const UINT4: i32 = 21;
    /// `INT4` (two elements per byte, the first in the low nibble).
    pub const INT4: i32 = 22;

    /// The enum name of `t`, for messages.
    pub fn name(t: i32) -> String {
        let known = match t {
            0 => "UNDEFINED",
            FLOAT => "FLOAT",
            UINT8 => "UINT8",
            INT8 => "INT8",
            UINT16 => "UINT16",
            INT16 => "INT16",
            INT32 => "INT32",
            INT64 => "INT64",
            8 => "STRING",
            BOOL => "BOOL",
            FLOAT16 => "FLOAT16",
            DOUBLE => "DOUBLE",
            UINT32 => "UINT32",
            UINT64 => "UINT64",
            14 => "COMPLEX64",
            15 => "COMPLEX128",
            BFLOAT16 => "BFLOAT16",
            17 => "FLOAT8E4M3FN",
            18 => "FLOAT8E4M3FNUZ",
            19 => "FLOAT8E5M2",
            20 => "FLOAT8E5M2FNUZ",
            UINT4 => "UINT4",
            INT4 => "INT4",
            23 => "FLOAT4E2M1",
            _ => return format!("data type {t}"),
        };
        known.to_string()
    }
}

/// A constant tensor (`TensorProto`). Its elements are in exactly one of the
/// data fields, or in `raw_data` (little-endian, fixed width).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TensorProto<'a> {
    /// `name` (8).
    pub name: String,
    /// `dims` (1).
    pub dims: Vec<i64>,
    /// `data_type` (2), a [`data_type`] value.
    pub data_type: i32,
    /// `float_data` (4).
    pub float_data: Vec<f32>,
    /// `int32_data` (5): also int8/16, uint8/16, bool, float16 and bfloat16 bits.
    pub int32_data: Vec<i32>,
    /// `int64_data` (7).
    pub int64_data: Vec<i64>,
    /// `double_data` (10).
    pub double_data: Vec<f64>,
    /// `uint64_data` (11): uint32 and uint64.
    pub uint64_data: Vec<u64>,
    /// `raw_data` (9).
    pub raw_data: Option<&'a [u8]>,
    /// True if the data lives in another file (`data_location` (14) =
    /// EXTERNAL, or `external_data` (13) entries).
    pub external: bool,
    /// True if `segment` (3) is present: a chunk of a larger tensor.
    pub segmented: bool,
}

/// A graph input, output or intermediate value with its type (`ValueInfoProto`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValueInfo {
    /// `name` (1).
    pub name: String,
    /// `type` (2): the tensor type, `None` if absent or not a tensor.
    pub tensor: Option<TensorType>,
    /// True if `type` is present but not a tensor (sequence, map, optional, sparse).
    pub not_a_tensor: bool,
}

/// `TypeProto.Tensor`: element type and, optionally, the shape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TensorType {
    /// `elem_type` (1), a [`data_type`] value.
    pub elem_type: i32,
    /// `shape` (2), `None` when the rank is unknown.
    pub shape: Option<Vec<Dim>>,
}

/// One dimension of a `TensorShapeProto`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// `dim_value` (1).
    Value(i64),
    /// `dim_param` (2): a symbolic size such as `batch`.
    Param(String),
    /// Neither is set.
    Unknown,
}

/// Decodes a model file.
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto<'_>, DecodeError> {
    let mut r = Reader::new(bytes);
    let mut model = ModelProto::default();
    let mut graphs = 0usize;
    while let Some(f) = r.next_field().map_err(|e| e.within("ModelProto"))? {
        match f.number {
            1 => model.ir_version = f.as_i64().map_err(|e| e.within("ModelProto"))?,
            7 => {
                graphs += 1;
                model.graph = Some(decode_graph(&f)?);
            }
            8 => model.opset_import.push(decode_opset(&f)?),
            _ => {}
        }
    }
    if graphs > 1 {
        // Protobuf would merge repeated sub-messages; ONNX writers never emit two graphs.
        return Err(DecodeError {
            offset: 0,
            message: "the model holds more than one graph".into(),
            within: Some("ModelProto"),
        });
    }
    Ok(model)
}

fn decode_opset(field: &Field<'_>) -> Result<OperatorSetId, DecodeError> {
    let wrap = |e: DecodeError| e.within("OperatorSetIdProto");
    let mut r = field.message().map_err(wrap)?;
    let mut opset = OperatorSetId::default();
    while let Some(f) = r.next_field().map_err(wrap)? {
        match f.number {
            1 => opset.domain = f.as_string().map_err(wrap)?,
            2 => opset.version = f.as_i64().map_err(wrap)?,
            _ => {}
        }
    }
    Ok(opset)
}

/// Decodes a subgraph recorded in [`AttributeProto::subgraphs`] (its own
/// subgraphs stay recorded, not decoded).
pub fn decode_subgraph<'a>(field: &Field<'a>) -> Result<GraphProto<'a>, DecodeError> {
    decode_graph(field)
}

fn decode_graph<'a>(field: &Field<'a>) -> Result<GraphProto<'a>, DecodeError> {
    let wrap = |e: DecodeError| e.within("GraphProto");
    let mut r = field.message().map_err(wrap)?;
    let mut graph = GraphProto::default();
    while let Some(f) = r.next_field().map_err(wrap)? {
        match f.number {
            1 => graph.node.push(decode_node(&f)?),
            2 => graph.name = f.as_string().map_err(wrap)?,
            5 => graph.initializer.push(decode_tensor(&f)?),
            11 => graph.input.push(decode_value_info(&f)?),
            12 => graph.output.push(decode_value_info(&f)?),
            13 => graph.value_info.push(decode_value_info(&f)?),
            _ => {}
        }
    }
    Ok(graph)
}

fn decode_node<'a>(field: &Field<'a>) -> Result<NodeProto<'a>, DecodeError> {
    let wrap = |e: DecodeError| e.within("NodeProto");
    let mut r = field.message().map_err(wrap)?;
    let mut node = NodeProto::default();
    while let Some(f) = r.next_field().map_err(wrap)? {
        match f.number {
            1 => node.input.push(f.as_string().map_err(wrap)?),
            2 => node.output.push(f.as_string().map_err(wrap)?),
            3 => node.name = f.as_string().map_err(wrap)?,
            4 => node.op_type = f.as_string().map_err(wrap)?,
            5 => node.attribute.push(decode_attribute(&f)?),
            7 => node.domain = f.as_string().map_err(wrap)?,
            _ => {}
        }
    }
    Ok(node)
}

fn decode_attribute<'a>(field: &Field<'a>) -> Result<AttributeProto<'a>, DecodeError> {
    let wrap = |e: DecodeError| e.within("AttributeProto");
    let mut r = field.message().map_err(wrap)?;
    let mut attr = AttributeProto::default();
    while let Some(f) = r.next_field().map_err(wrap)? {
        match f.number {
            1 => attr.name = f.as_string().map_err(wrap)?,
            2 => attr.f = Some(f.as_f32().map_err(wrap)?),
            3 => attr.i = Some(f.as_i64().map_err(wrap)?),
            4 => attr.s = Some(f.as_bytes().map_err(wrap)?),
            5 => attr.t = Some(decode_tensor(&f)?),
            // Subgraphs are recorded, not decoded: the importer rejects them.
            6 | 11 => {
                f.as_bytes().map_err(wrap)?;
                attr.subgraphs.push(f);
            }
            7 => f.push_f32s(&mut attr.floats).map_err(wrap)?,
            8 => f.push_i64s(&mut attr.ints).map_err(wrap)?,
            9 => attr.strings.push(f.as_bytes().map_err(wrap)?),
            20 => attr.attr_type = f.as_i32().map_err(wrap)?,
            _ => {}
        }
    }
    Ok(attr)
}

fn decode_tensor<'a>(field: &Field<'a>) -> Result<TensorProto<'a>, DecodeError> {
    let wrap = |e: DecodeError| e.within("TensorProto");
    let mut r = field.message().map_err(wrap)?;
    let mut t = TensorProto::default();
    while let Some(f) = r.next_field().map_err(wrap)? {
        match f.number {
            1 => f.push_i64s(&mut t.dims).map_err(wrap)?,
            2 => t.data_type = f.as_i32().map_err(wrap)?,
            3 => {
                f.as_bytes().map_err(wrap)?;
                t.segmented = true;
            }
            4 => f.push_f32s(&mut t.float_data).map_err(wrap)?,
            5 => f.push_i32s(&mut t.int32_data).map_err(wrap)?,
            7 => f.push_i64s(&mut t.int64_data).map_err(wrap)?,
            8 => t.name = f.as_string().map_err(wrap)?,
            9 => t.raw_data = Some(f.as_bytes().map_err(wrap)?),
            10 => f.push_f64s(&mut t.double_data).map_err(wrap)?,
            11 => f.push_u64s(&mut t.uint64_data).map_err(wrap)?,
            13 => {
                f.as_bytes().map_err(wrap)?;
                t.external = true;
            }
            14 => t.external |= f.as_i32().map_err(wrap)? == 1,
            _ => {}
        }
    }
    Ok(t)
}

fn decode_value_info(field: &Field<'_>) -> Result<ValueInfo, DecodeError> {
    let wrap = |e: DecodeError| e.within("ValueInfoProto");
    let mut r = field.message().map_err(wrap)?;
    let mut info = ValueInfo::default();
    while let Some(f) = r.next_field().map_err(wrap)? {
        match f.number {
            1 => info.name = f.as_string().map_err(wrap)?,
            2 => {
                let ty = decode_type(&f)?;
                info.not_a_tensor = ty.is_none();
                info.tensor = ty;
            }
            _ => {}
        }
    }
    Ok(info)
}

/// A `TypeProto`: its tensor type, or `None` for any other kind of type.
fn decode_type(field: &Field<'_>) -> Result<Option<TensorType>, DecodeError> {
    let wrap = |e: DecodeError| e.within("TypeProto");
    let mut r = field.message().map_err(wrap)?;
    let mut tensor = None;
    while let Some(f) = r.next_field().map_err(wrap)? {
        if f.number == 1 {
            tensor = Some(decode_tensor_type(&f)?);
        }
    }
    Ok(tensor)
}

fn decode_tensor_type(field: &Field<'_>) -> Result<TensorType, DecodeError> {
    let wrap = |e: DecodeError| e.within("TypeProto.Tensor");
    let mut r = field.message().map_err(wrap)?;
    let mut ty = TensorType::default();
    while let Some(f) = r.next_field().map_err(wrap)? {
        match f.number {
            1 => ty.elem_type = f.as_i32().map_err(wrap)?,
            2 => ty.shape = Some(decode_shape(&f)?),
            _ => {}
        }
    }
    Ok(ty)
}

fn decode_shape(field: &Field<'_>) -> Result<Vec<Dim>, DecodeError> {
    let wrap = |e: DecodeError| e.within("TensorShapeProto");
    let mut r = field.message().map_err(wrap)?;
    let mut dims = Vec::new();
    while let Some(f) = r.next_field().map_err(wrap)? {
        if f.number == 1 {
            dims.push(decode_dim(&f)?);
        }
    }
    Ok(dims)
}

fn decode_dim(field: &Field<'_>) -> Result<Dim, DecodeError> {
    let wrap = |e: DecodeError| e.within("TensorShapeProto.Dimension");
    let mut r = field.message().map_err(wrap)?;
    let mut dim = Dim::Unknown;
    while let Some(f) = r.next_field().map_err(wrap)? {
        match f.number {
            1 => dim = Dim::Value(f.as_i64().map_err(wrap)?),
            2 => dim = Dim::Param(f.as_string().map_err(wrap)?),
            _ => {}
        }
    }
    Ok(dim)
}
