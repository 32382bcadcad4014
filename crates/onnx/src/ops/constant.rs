//! `Constant`: its `value` tensor, or `value_float(s)` / `value_int(s)`,
//! becomes constant data bound to the output (an `fp.constant` appears only
//! where a node uses it as an operand; see [`crate::import`]).

use super::ConvertFn;
use crate::import::NodeCx;
use crate::onnx::data_type as dt;
use crate::tensor::TensorData;

/// The ONNX op types this family converts, with their converters.
pub(crate) const CONVERTERS: &[(&str, ConvertFn)] = &[("Constant", constant)];

pub(super) fn constant(cx: &mut NodeCx<'_, '_>) -> Result<(), String> {
    let attrs = cx.attrs();
    let name = cx.output_name(0);
    let data = if let Some(t) = attrs.opt_tensor("value")? {
        let data = TensorData::from_proto(t)?;
        TensorData::new(&name, data.dims, data.data_type, data.bytes)
    } else if let Some(v) = attrs.opt_float("value_float")? {
        TensorData::new(&name, vec![], dt::FLOAT, v.to_le_bytes().to_vec())
    } else if let Some(v) = attrs.opt_floats("value_floats")? {
        let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        TensorData::new(&name, vec![v.len() as i64], dt::FLOAT, bytes)
    } else if let Some(v) = attrs.opt_int("value_int")? {
        TensorData::new(&name, vec![], dt::INT64, v.to_le_bytes().to_vec())
    } else if let Some(v) = attrs.opt_ints("value_ints")? {
        let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        TensorData::new(&name, vec![v.len() as i64], dt::INT64, bytes)
    } else {
        attrs
            .reject(&["sparse_value", "value_string", "value_strings"], "only numeric dense constants are")?;
        return Err("the node has no value attribute".into());
    };
    cx.set_const_output(0, data)
}
