//! The layer pairs `equalize` and `absorb-bias` rewrite: a conv or dense
//! whose result reaches, through at most one relu or clip, the activation of
//! another ([`follow`]), with the weight axes and constants they read.

use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::shape;
use qopt_ir_core::{constant_value, dense_values_f64, AttrData, Context, Module, OpId, ValueId};

qopt_ir_core::interned_op_names! {
    /// The interned names of the ops the pass (and `absorb-bias`) reads.
    pub struct Names {
        conv2d = fp_op::CONV2D, conv1d = fp_op::CONV1D, dense = fp_op::DENSE, relu = fp_op::RELU,
        clip = fp_op::CLIP,
    }
}

impl Names {
    /// Whether `op` is a conv2d, conv1d or dense.
    pub fn is_layer(&self, module: &Module, op: OpId) -> bool {
        let name = module.op_name(op);
        name == self.conv2d || name == self.conv1d || name == self.dense
    }
}

/// Where a layer's result leads.
pub enum Follow {
    /// To this layer's activation operand, through this relu or clip if any.
    Layer(OpId, Option<OpId>),
    /// The result, or the relu or clip after it, has several users.
    Shared,
    /// Anywhere else.
    Nothing,
}

/// Follows `value` through at most one `fp.relu` or `fp.clip` with one user
/// to a layer that reads it as its activation (operand 0), and only there.
pub fn follow(module: &Module, names: &Names, value: ValueId) -> Follow {
    let mut value = value;
    let mut between = None;
    loop {
        let users = module.users(value);
        if users.len() != 1 || module.uses(value).count() != 1 {
            return if users.is_empty() { Follow::Nothing } else { Follow::Shared };
        }
        let user = users[0];
        if names.is_layer(module, user) {
            let is_activation = module.num_operands(user) >= 2 && module.operand(user, 0) == value;
            return if is_activation { Follow::Layer(user, between) } else { Follow::Nothing };
        }
        let name = module.op_name(user);
        let activation = name == names.relu || name == names.clip;
        if between.is_some()
            || !activation
            || module.num_results(user) != 1
            || module.operand(user, 0) != value
        {
            return Follow::Nothing;
        }
        between = Some(user);
        value = module.result(user, 0);
    }
}

/// The weight axis of `second` that holds its input channels: 1 with one
/// group (or a dense), 0 for a depthwise convolution.
pub fn second_input_axis(ctx: &Context, module: &Module, second: OpId) -> Result<usize, String> {
    if module.op_is(ctx, second, fp_op::DENSE) {
        return Ok(1);
    }
    let groups = module.op_attr(ctx, second, "groups").and_then(|a| ctx.attr_as_int(a)).unwrap_or(1);
    if groups == 1 {
        return Ok(1);
    }
    let weight_shape = ctx.tensor_shape(module.value_type(module.operand(second, 1))).unwrap_or(&[]);
    let depthwise = weight_shape.len() >= 2 && i128::from(weight_shape[0]) == groups && weight_shape[1] == 1;
    if depthwise {
        Ok(0)
    } else {
        Err(format!(
            "{} has {groups} groups, neither 1 nor one per channel (depthwise); grouped convolutions are not \
             equalized",
            ctx.op_name_str(module.op_name(second))
        ))
    }
}

/// The shape and values of the float constant `v`.
pub fn read_constant(ctx: &Context, module: &Module, v: ValueId) -> Option<(Vec<usize>, Vec<f64>)> {
    let attr = constant_value(ctx, module, v)?;
    let AttrData::Dense(d) = ctx.attr_data(attr) else { return None };
    let elem = ctx.element_type(d.ty);
    if !shape::is_float_element(ctx, elem) {
        return None;
    }
    let shape =
        ctx.tensor_shape(d.ty)?.iter().map(|&d| usize::try_from(d).ok()).collect::<Option<Vec<_>>>()?;
    Some((shape, dense_values_f64(ctx, d, elem)?))
}
