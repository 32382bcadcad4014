//! Op interfaces shared across dialects: typed data an [`crate::OpDef`] carries
//! and passes query, so a pass asks "which operand is the weight?" instead of
//! matching op names, and a downstream dialect's ops take part in the same passes
//! by declaring the same interface.
//!
//! ```
//! # use qopt_ir_core::{OpDef, Arity, interfaces::QuantizableOp};
//! let def = OpDef::new("acc.conv", "a convolution")
//!     .operands(Arity::Range(2, 3))
//!     .interface(QuantizableOp::weighted(0, 1, Some(2), 0));
//! assert_eq!(def.interfaces.get::<QuantizableOp>().unwrap().weight, Some(1));
//! ```

/// How an op takes part in quantization: the roles of its operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantizableOp {
    /// Operands that are activations (quantized with observed ranges).
    pub activations: Vec<usize>,
    /// The weight operand, if any (quantized from its constant values).
    pub weight: Option<usize>,
    /// The bias operand, if any (quantized to i32 with scale = activation scale × weight scale).
    pub bias: Option<usize>,
    /// The weight's output-channel axis, for per-channel quantization.
    pub weight_channel_axis: Option<usize>,
    /// Every operand is an activation, however many there are (concat).
    pub variadic: bool,
}

impl QuantizableOp {
    /// An op whose listed operands are all activations (add, concat, pooling...).
    pub fn activations(operands: &[usize]) -> QuantizableOp {
        QuantizableOp {
            activations: operands.to_vec(),
            weight: None,
            bias: None,
            weight_channel_axis: None,
            variadic: false,
        }
    }

    /// An op all of whose operands, however many, are activations (concat).
    pub fn variadic() -> QuantizableOp {
        QuantizableOp { variadic: true, ..QuantizableOp::activations(&[]) }
    }

    /// The activation operands of an op with `num_operands` operands.
    pub fn activation_operands(&self, num_operands: usize) -> Vec<usize> {
        if self.variadic {
            (0..num_operands).collect()
        } else {
            self.activations.iter().copied().filter(|&i| i < num_operands).collect()
        }
    }

    /// An op with one activation, a weight (channel axis `axis`) and maybe a bias.
    pub fn weighted(activation: usize, weight: usize, bias: Option<usize>, axis: usize) -> QuantizableOp {
        QuantizableOp {
            activations: vec![activation],
            weight: Some(weight),
            bias,
            weight_channel_axis: Some(axis),
            variadic: false,
        }
    }
}

/// An activation function that quantized kernels apply in the epilogue of the
/// op before it (relu, clip): quantization observes its result, not its
/// operand, so that `conv → relu` becomes one quantized op with one output range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FusedActivation;
