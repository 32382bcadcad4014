//! Why an import failed: [`ImportError`], one value per failed import, with a
//! message meant for the user as is (lower case, no final period).

use crate::proto::DecodeError;
use std::fmt;

/// One ONNX op type the importer does not translate, and where it occurs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedOp {
    /// `Foo`, or `domain.Foo` outside the standard domain.
    pub op_type: String,
    /// The names of the nodes using it (output name for unnamed nodes), in graph order.
    pub nodes: Vec<String>,
}

/// A failed import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImportError {
    /// The bytes are not a well-formed protobuf message.
    Decode(DecodeError),
    /// Every op type the importer does not support, at once.
    UnsupportedOps(Vec<UnsupportedOp>),
    /// The model as a whole cannot be imported (no graph, opset, inputs, outputs).
    Model(String),
    /// One node cannot be imported.
    Node {
        /// The node's name (its first output's name if it has none).
        node: String,
        /// Its op type.
        op_type: String,
        /// Why.
        message: String,
    },
    /// The imported module does not verify (an importer bug or a model the
    /// dialects reject, such as a quantization scale that is not a normal f32).
    Verify(String),
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Decode(e) => write!(f, "not a valid ONNX model: {e}"),
            ImportError::UnsupportedOps(ops) => {
                let parts: Vec<String> = ops
                    .iter()
                    .map(|op| {
                        let noun = if op.nodes.len() == 1 { "node" } else { "nodes" };
                        format!("{} ({noun} {})", op.op_type, shortened(&op.nodes))
                    })
                    .collect();
                write!(f, "unsupported ONNX ops: {}", parts.join(", "))
            }
            ImportError::Model(message) => f.write_str(message),
            ImportError::Node { node, op_type, message } => write!(f, "node '{node}' ({op_type}): {message}"),
            ImportError::Verify(diagnostics) => {
                write!(f, "the imported module does not verify:\n{}", diagnostics.trim_end())
            }
        }
    }
}

impl std::error::Error for ImportError {}

impl From<DecodeError> for ImportError {
    fn from(e: DecodeError) -> ImportError {
        ImportError::Decode(e)
    }
}

/// Node names for a message: all of them up to [`LISTED_NODES`], else the
/// first ones and how many more.
fn shortened(nodes: &[String]) -> String {
    if nodes.len() <= LISTED_NODES {
        return nodes.join(", ");
    }
    format!("{} and {} more", nodes[..LISTED_NODES - 1].join(", "), nodes.len() - (LISTED_NODES - 1))
}

/// Most node names an error lists for one op type.
const LISTED_NODES: usize = 6;
