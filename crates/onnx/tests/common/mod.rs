//! A protobuf encoder and an ONNX model builder for tests: hand-built models
//! exercise ops, attributes and error paths the reference models do not.

#![allow(dead_code)] // each test file uses a different part of the helpers

/// A protobuf message being encoded.
#[derive(Clone, Default)]
pub struct Msg(pub Vec<u8>);

/// The base-128 varint encoding of `v`.
pub fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (v & 0x7F) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

impl Msg {
    pub fn new() -> Msg {
        Msg::default()
    }
    fn key(&mut self, number: u32, wire: u8) {
        self.0.extend(varint(u64::from(number) << 3 | u64::from(wire)));
    }
    pub fn int(mut self, number: u32, v: i64) -> Msg {
        self.key(number, 0);
        self.0.extend(varint(v as u64));
        self
    }
    pub fn bytes(mut self, number: u32, b: &[u8]) -> Msg {
        self.key(number, 2);
        self.0.extend(varint(b.len() as u64));
        self.0.extend_from_slice(b);
        self
    }
    pub fn str(self, number: u32, s: &str) -> Msg {
        self.bytes(number, s.as_bytes())
    }
    pub fn msg(self, number: u32, m: &Msg) -> Msg {
        self.bytes(number, &m.0)
    }
    pub fn f32(mut self, number: u32, v: f32) -> Msg {
        self.key(number, 5);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn packed_i64(self, number: u32, values: &[i64]) -> Msg {
        let body: Vec<u8> = values.iter().flat_map(|&v| varint(v as u64)).collect();
        self.bytes(number, &body)
    }
    pub fn packed_f32(self, number: u32, values: &[f32]) -> Msg {
        let body: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.bytes(number, &body)
    }
}

// ONNX data types.
pub const FLOAT: i32 = 1;
pub const UINT8: i32 = 2;
pub const INT8: i32 = 3;
pub const INT32: i32 = 6;
pub const INT64: i32 = 7;
pub const FLOAT16: i32 = 10;

/// A dimension of a declared shape.
#[derive(Clone, Copy)]
pub enum D<'a> {
    V(i64),
    P(&'a str),
    Unknown,
}

/// A `TensorProto` with raw little-endian data.
pub fn tensor_raw(name: &str, data_type: i32, dims: &[i64], raw: &[u8]) -> Msg {
    Msg::new().packed_i64(1, dims).int(2, i64::from(data_type)).str(8, name).bytes(9, raw)
}

pub fn tensor_f32(name: &str, dims: &[i64], values: &[f32]) -> Msg {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    tensor_raw(name, FLOAT, dims, &raw)
}

pub fn tensor_i64(name: &str, dims: &[i64], values: &[i64]) -> Msg {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    tensor_raw(name, INT64, dims, &raw)
}

pub fn tensor_i8(name: &str, dims: &[i64], values: &[i8]) -> Msg {
    let raw: Vec<u8> = values.iter().map(|&v| v as u8).collect();
    tensor_raw(name, INT8, dims, &raw)
}

pub fn tensor_i32(name: &str, dims: &[i64], values: &[i32]) -> Msg {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    tensor_raw(name, INT32, dims, &raw)
}

// Attributes (AttributeProto: name 1, f 2, i 3, s 4, t 5, floats 7, ints 8, type 20).
pub fn attr_int(name: &str, v: i64) -> Msg {
    Msg::new().str(1, name).int(20, 2).int(3, v)
}
pub fn attr_float(name: &str, v: f32) -> Msg {
    Msg::new().str(1, name).int(20, 1).f32(2, v)
}
pub fn attr_ints(name: &str, v: &[i64]) -> Msg {
    Msg::new().str(1, name).int(20, 7).packed_i64(8, v)
}
pub fn attr_floats(name: &str, v: &[f32]) -> Msg {
    Msg::new().str(1, name).int(20, 6).packed_f32(7, v)
}
pub fn attr_str(name: &str, v: &str) -> Msg {
    Msg::new().str(1, name).int(20, 3).str(4, v)
}
pub fn attr_tensor(name: &str, t: &Msg) -> Msg {
    Msg::new().str(1, name).int(20, 4).msg(5, t)
}
pub fn attr_graph(name: &str) -> Msg {
    Msg::new().str(1, name).int(20, 5).msg(6, &Msg::new().str(2, "body"))
}

fn value_info(name: &str, elem: i32, dims: Option<&[D<'_>]>) -> Msg {
    let mut tensor = Msg::new().int(1, i64::from(elem));
    if let Some(dims) = dims {
        let mut shape = Msg::new();
        for d in dims {
            let dim = match d {
                D::V(v) => Msg::new().int(1, *v),
                D::P(p) => Msg::new().str(2, p),
                D::Unknown => Msg::new(),
            };
            shape = shape.msg(1, &dim);
        }
        tensor = tensor.msg(2, &shape);
    }
    Msg::new().str(1, name).msg(2, &Msg::new().msg(1, &tensor))
}

/// An ONNX model under construction: one graph, the standard opset.
pub struct Model {
    opset: i64,
    graph: Msg,
}

impl Model {
    pub fn new(opset: i64) -> Model {
        Model { opset, graph: Msg::new().str(2, "test") }
    }
    /// A float input of static shape.
    pub fn input(self, name: &str, dims: &[i64]) -> Model {
        let dims: Vec<D<'_>> = dims.iter().map(|&d| D::V(d)).collect();
        self.input_dims(name, FLOAT, &dims)
    }
    pub fn input_dims(mut self, name: &str, elem: i32, dims: &[D<'_>]) -> Model {
        self.graph = self.graph.msg(11, &value_info(name, elem, Some(dims)));
        self
    }
    /// An input with an element type but no shape (unknown rank).
    pub fn input_unranked(mut self, name: &str, elem: i32) -> Model {
        self.graph = self.graph.msg(11, &value_info(name, elem, None));
        self
    }
    /// An output without a declared type.
    pub fn output(mut self, name: &str) -> Model {
        self.graph = self.graph.msg(12, &Msg::new().str(1, name));
        self
    }
    /// An output with a declared float shape.
    pub fn output_shape(mut self, name: &str, dims: &[i64]) -> Model {
        let dims: Vec<D<'_>> = dims.iter().map(|&d| D::V(d)).collect();
        self.graph = self.graph.msg(12, &value_info(name, FLOAT, Some(&dims)));
        self
    }
    pub fn init(mut self, tensor: Msg) -> Model {
        self.graph = self.graph.msg(5, &tensor);
        self
    }
    pub fn node(self, op_type: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> Model {
        self.node_attrs(op_type, name, inputs, outputs, &[])
    }
    pub fn node_attrs(
        mut self,
        op_type: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: &[Msg],
    ) -> Model {
        let mut node = Msg::new().str(3, name).str(4, op_type);
        for i in inputs {
            node = node.str(1, i);
        }
        for o in outputs {
            node = node.str(2, o);
        }
        for a in attrs {
            node = node.msg(5, a);
        }
        self.graph = self.graph.msg(1, &node);
        self
    }
    /// A node of another domain.
    pub fn node_in(
        mut self,
        domain: &str,
        op_type: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
    ) -> Model {
        let mut node = Msg::new().str(3, name).str(4, op_type).str(7, domain);
        for i in inputs {
            node = node.str(1, i);
        }
        for o in outputs {
            node = node.str(2, o);
        }
        self.graph = self.graph.msg(1, &node);
        self
    }
    pub fn bytes(&self) -> Vec<u8> {
        let opset = Msg::new().str(1, "").int(2, self.opset);
        Msg::new().int(1, 8).msg(8, &opset).msg(7, &self.graph).0
    }
}

/// Imports `bytes` with `batch` and prints the module, or the error.
pub fn import_text(bytes: &[u8], batch: Option<i64>) -> Result<String, String> {
    import_with(bytes, &qopt_onnx::ImportOptions { batch, ..Default::default() })
}

/// Imports `bytes` with `options` and prints the module, or the error.
pub fn import_with(bytes: &[u8], options: &qopt_onnx::ImportOptions) -> Result<String, String> {
    let mut ctx = qopt_ir_core::Context::new();
    match qopt_onnx::import_model(&mut ctx, bytes, options) {
        Ok(module) => Ok(qopt_ir_core::module_to_string(&ctx, &module)),
        Err(e) => Err(e.to_string()),
    }
}
