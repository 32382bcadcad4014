//! The ONNX importer and exporter. The importer reads an ONNX model file and
//! builds a verified [`qopt_ir_core::Module`] in the `fp` dialect (and `qnn`
//! for QDQ and QOperator models), one `func.func @main` whose arguments and
//! results are the graph's inputs and outputs. `docs/onnx-import.md` lists
//! the supported ops and their mapping; the `qimport` tool is the
//! command-line front end. The exporter writes a function back as an ONNX
//! model (`docs/onnx-export.md`, the `qexport` tool).
//!
//! Modules, one concern each:
//! - `proto`: the protobuf wire format (decoding only, no `protoc`);
//! - `onnx`: the ONNX messages read from it;
//! - `tensor`: constant tensors as element bytes, ONNX element types as IR types;
//! - `attrs`: typed node attributes;
//! - `import`: the graph walk, constants, signature, verification;
//! - `fold`: evaluation of nodes whose inputs are all constant (shape computations);
//! - `ops`: one converter per op type, by family;
//! - `error`: [`ImportError`];
//! - `export`: the other direction, a module's function as an ONNX model
//!   ([`export_module`], `docs/onnx-export.md`), with its protobuf encoder.
//!
//! Invariants: no input makes the importer panic (sizes use checked
//! arithmetic, every read is bounds-checked), and nothing recurses over the
//! input: messages nest only as deep as the ONNX schema, and the graph is a
//! loop over its nodes.

#![warn(missing_docs)]

mod attrs;
mod error;
mod export;
mod fold;
mod import;
mod onnx;
mod ops;
mod proto;
mod tensor;

pub use error::{ImportError, UnsupportedOp};
pub use export::{
    export_module, problems_heading, ExportError, ExportFormat, ExportOptions, ExportProblem, Exported,
    EXPORT_OPSETS,
};
pub use import::{import_model, ImportOptions, SUPPORTED_OPSETS};
pub use onnx::{
    attr_type, data_type, decode_model, decode_subgraph, AttributeProto, Dim, GraphProto, ModelProto,
    NodeProto, OperatorSetId, TensorProto, TensorType, ValueInfo,
};
pub use ops::supported_op_types;
pub use proto::{DecodeError, Field, Reader, WireValue};

/// The op types the importer evaluates at import when all of a node's inputs
/// are constant (the shape computations of `docs/onnx-import.md`, "Shape
/// computations"), sorted; each is also in [`supported_op_types`]. Those
/// without a converter are an error on computed inputs, and the others are
/// evaluated on constants of every element type, converted otherwise.
pub fn evaluated_op_types() -> impl Iterator<Item = &'static str> {
    fold::folded_op_types()
}
