//! Typed reading of a node's attributes with defaults.
//!
//! An attribute is checked against its declared `type`; a producer that left
//! `type` out (IR version 1) is read by which field is present. A wrong kind
//! is an error naming the attribute and both kinds, never a silent default.
//!
//! Reads are recorded ([`AttrsRead`]): after a converter ran, an attribute it
//! never looked at is an error ([`AttrsRead::check`]). That is how a model
//! from a newer opset that uses an attribute the importer does not implement
//! is refused instead of silently computing the old semantics.

use crate::onnx::{attr_type as at, AttributeProto, NodeProto, TensorProto};
use std::cell::Cell;

/// Which of a node's attributes were read (bit `i` for attribute `i`; the
/// 65th and later are not tracked).
#[derive(Default)]
pub(crate) struct AttrsRead(Cell<u64>);

impl AttrsRead {
    /// An error naming the first attribute of `node` that was never read.
    pub fn check(&self, node: &NodeProto<'_>) -> Result<(), String> {
        let read = self.0.get();
        match node.attribute.iter().take(64).enumerate().find(|(i, _)| read & (1 << i) == 0) {
            Some((_, a)) => Err(format!(
                "attribute '{}' is not supported (qimport does not implement it for {})",
                a.name, node.op_type
            )),
            None => Ok(()),
        }
    }
}

/// The attributes of one node.
#[derive(Copy, Clone)]
pub(crate) struct NodeAttrs<'n> {
    node: &'n NodeProto<'n>,
    read: Option<&'n AttrsRead>,
}

impl<'n> NodeAttrs<'n> {
    /// The attributes of `node`, reads not recorded.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn new(node: &'n NodeProto<'n>) -> NodeAttrs<'n> {
        NodeAttrs { node, read: None }
    }

    /// The attributes of `node`, reads recorded in `read`.
    pub fn tracked(node: &'n NodeProto<'n>, read: &'n AttrsRead) -> NodeAttrs<'n> {
        NodeAttrs { node, read: Some(read) }
    }

    /// The attribute `name`, if the node has it.
    pub fn get(&self, name: &str) -> Option<&'n AttributeProto<'n>> {
        let (i, a) = self.node.attribute.iter().enumerate().find(|(_, a)| a.name == name)?;
        if let (Some(read), true) = (self.read, i < 64) {
            read.0.set(read.0.get() | 1 << i);
        }
        Some(a)
    }

    /// The attribute `name` if present and of kind `kind` (or untyped with
    /// `present` true).
    fn typed(
        &self,
        name: &str,
        kind: i32,
        present: impl Fn(&AttributeProto<'_>) -> bool,
    ) -> Result<Option<&'n AttributeProto<'n>>, String> {
        let Some(a) = self.get(name) else { return Ok(None) };
        if a.attr_type == kind || (a.attr_type == 0 && present(a)) {
            return Ok(Some(a));
        }
        Err(format!("attribute '{name}' must be {}, got {}", at::name(kind), at::name(a.attr_type)))
    }

    /// The integer `name`, or `None`.
    pub fn opt_int(&self, name: &str) -> Result<Option<i64>, String> {
        Ok(self.typed(name, at::INT, |a| a.i.is_some())?.map(|a| a.i.unwrap_or(0)))
    }

    /// The integer `name`, `default` when missing.
    pub fn int(&self, name: &str, default: i64) -> Result<i64, String> {
        Ok(self.opt_int(name)?.unwrap_or(default))
    }

    /// The float `name`, or `None`.
    pub fn opt_float(&self, name: &str) -> Result<Option<f32>, String> {
        Ok(self.typed(name, at::FLOAT, |a| a.f.is_some())?.map(|a| a.f.unwrap_or(0.0)))
    }

    /// The float `name`, `default` when missing.
    pub fn float(&self, name: &str, default: f32) -> Result<f32, String> {
        Ok(self.opt_float(name)?.unwrap_or(default))
    }

    /// The integer list `name`, or `None`.
    pub fn opt_ints(&self, name: &str) -> Result<Option<Vec<i64>>, String> {
        Ok(self.typed(name, at::INTS, |a| !a.ints.is_empty())?.map(|a| a.ints.clone()))
    }

    /// The float list `name`, or `None`.
    pub fn opt_floats(&self, name: &str) -> Result<Option<Vec<f32>>, String> {
        Ok(self.typed(name, at::FLOATS, |a| !a.floats.is_empty())?.map(|a| a.floats.clone()))
    }

    /// The string `name` (UTF-8), `default` when missing.
    pub fn string(&self, name: &str, default: &str) -> Result<String, String> {
        match self.typed(name, at::STRING, |a| a.s.is_some())? {
            None => Ok(default.to_string()),
            Some(a) => String::from_utf8(a.s.unwrap_or_default().to_vec())
                .map_err(|_| format!("attribute '{name}' is not valid UTF-8 text")),
        }
    }

    /// The tensor `name`, or `None`.
    pub fn opt_tensor(&self, name: &str) -> Result<Option<&'n TensorProto<'n>>, String> {
        Ok(self.typed(name, at::TENSOR, |a| a.t.is_some())?.and_then(|a| a.t.as_ref()))
    }

    /// An error if the node has any of `names` (attributes the importer does
    /// not implement), naming the first.
    pub fn reject(&self, names: &[&str], why: &str) -> Result<(), String> {
        match names.iter().find(|n| self.get(n).is_some()) {
            Some(n) => Err(format!("attribute '{n}' is not supported: {why}")),
            None => Ok(()),
        }
    }
}
