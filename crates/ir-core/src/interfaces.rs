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
    /// For a weighted op, the axis of the activation operand and of the
    /// result along which the weight's input and output channels run (the
    /// bias's axis), negative counting from the back: 1 for `N×C×…`
    /// convolutions, −1 for dense layers.
    pub channel_axis: Option<i64>,
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
            channel_axis: None,
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

    /// An op with one activation, a weight (output-channel axis `axis`) and
    /// maybe a bias, whose activation and result have their channels on axis 1
    /// (`N×C×…`; see [`with_channel_axis`](Self::with_channel_axis) for others).
    pub fn weighted(activation: usize, weight: usize, bias: Option<usize>, axis: usize) -> QuantizableOp {
        QuantizableOp {
            activations: vec![activation],
            weight: Some(weight),
            bias,
            weight_channel_axis: Some(axis),
            variadic: false,
            channel_axis: Some(1),
        }
    }

    /// The same op with its activation and result channels on `axis`
    /// (negative counts from the back; `None`: unknown).
    pub fn with_channel_axis(self, axis: Option<i64>) -> QuantizableOp {
        QuantizableOp { channel_axis: axis, ..self }
    }

    /// [`channel_axis`](Self::channel_axis) for an activation of rank `rank`,
    /// if it names one of its dimensions.
    pub fn channel_axis_for_rank(&self, rank: usize) -> Option<usize> {
        let axis = self.channel_axis?;
        let axis = if axis < 0 { axis + rank as i64 } else { axis };
        (0..rank as i64).contains(&axis).then_some(axis as usize)
    }
}

/// An activation function that quantized kernels apply in the epilogue of the
/// op before it (relu, clip): quantization observes its result, not its
/// operand, so that `conv → relu` becomes one quantized op with one output range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FusedActivation;

/// A unary elementwise function of its one operand alone (no other operands,
/// no state; its attributes are fixed): each result element depends only on
/// the operand element at the same position. Quantized code computes it for
/// an operand of at most 8-bit storage through a table of its values at every
/// stored input (`qnn.lookup`), which `fuse` builds by running the op's own
/// interpreter kernel on each dequantized input, so the integer model equals
/// the fake-quant model bit for bit (sigmoid, tanh, gelu, hard_swish, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LookupActivation;

/// Attributes that record facts about an op and never change its values
/// (`qnn.quantize`'s `calibrated_min`): the equivalence checker leaves them
/// out of the op's identity, so a pass may add, keep or drop them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Annotations(pub &'static [&'static str]);

/// The values an op reads for attributes it leaves out: `fp.conv2d` without
/// `stride` has stride `[1, 1]`. The function builds each `(name, default)`
/// pair in the context; the op's readers should take their defaults from the
/// same source as this function, so the two cannot drift (the `fp` dialect's
/// window readers, `attrs::ConvAttrs::defaults`, serve both).
///
/// The equivalence checker leaves out of an op's identity every attribute
/// equal to its default ([`strip`](Self::strip)), so `{}` and
/// `{stride = [1, 1]}` are one op there and a pass may spell a default either
/// way. "Equal" is the same interned attribute: `[1, 1]` of `i64` integers,
/// as the parser reads it; another spelling of the same value (`[1 : i32, 1 : i32]`)
/// stays, which can only make a check fail, never pass wrongly.
///
/// ```
/// # use qopt_ir_core::{Context, interfaces::AttributeDefaults};
/// let defaults = AttributeDefaults(|ctx| vec![("stride", ctx.i64_array_attr(&[1, 1]))]);
/// let mut ctx = Context::new();
/// let (one, two) = (ctx.i64_array_attr(&[1, 1]), ctx.i64_array_attr(&[2, 2]));
/// let spelled = ctx.dict_attr(&[("stride", one)]);
/// let empty = ctx.dict_attr(&[]);
/// assert_eq!(defaults.strip(&mut ctx, spelled), empty);
/// let strided = ctx.dict_attr(&[("stride", two)]);
/// assert_eq!(defaults.strip(&mut ctx, strided), strided);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AttributeDefaults(pub fn(&mut crate::Context) -> Vec<(&'static str, crate::Attribute)>);

impl AttributeDefaults {
    /// `attrs` without each entry that is its default.
    pub fn strip(self, ctx: &mut crate::Context, attrs: crate::Attribute) -> crate::Attribute {
        (self.0)(ctx).into_iter().fold(attrs, |a, (name, default)| {
            if ctx.dict_get(a, name) == Some(default) {
                ctx.dict_remove(a, name)
            } else {
                a
            }
        })
    }
}

/// Per-channel minima a pass recorded for an op's result from calibration
/// data: for each channel `c` along [`RecordedRange::axis`], every
/// calibration sample had `result[c] + offset[c] ≥ min[c]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelMinima {
    /// The smallest value seen on each channel, of the result plus `offset`.
    pub min: Vec<f64>,
    /// What the minima were measured on top of the result as it stands
    /// (`absorb-bias`: what it has moved out of the bias since); as long as
    /// `min`.
    pub offset: Vec<f64>,
}

/// How to read the range an op's attributes record for its result
/// (`absorb-bias`'s `qnn.bias_absorption` on the `fp` conv and dense ops).
/// The equivalence checker assumes these ranges under the
/// `calibrated-range` relation ([`crate::equivalence::Relation::CalibratedRange`])
/// and under no other; a record it cannot read is no assumption.
///
/// ```
/// # use qopt_ir_core::interfaces::{ChannelMinima, RecordedRange};
/// let range = RecordedRange { axis: 1, read: |_, _| Some(ChannelMinima { min: vec![0.5], offset: vec![0.0] }) };
/// let mut ctx = qopt_ir_core::Context::new();
/// let attrs = ctx.dict_attr(&[]);
/// assert_eq!((range.read)(&ctx, attrs).unwrap().min, [0.5]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RecordedRange {
    /// The result's axis the channels run along, negative from the back (1
    /// for `N×C×…`, −1 for a dense layer's features).
    pub axis: i64,
    /// The record in an op's attribute dictionary, if it holds one.
    pub read: fn(&crate::Context, crate::Attribute) -> Option<ChannelMinima>,
}
