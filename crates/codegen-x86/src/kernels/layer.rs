//! What `qnn.conv2d`, `qnn.dense` and their relu forms share once read from
//! the IR: a [`Layer`] (the integer problem of `docs/quant-semantics.md` §6
//! with every parameter a number), the [`Accumulation`] a layer's GEMM uses,
//! and the [`KernelOptions`] that may forbid the faster ones.
//!
//! Everything is derived with the functions the interpreter uses:
//! `quant_params::conv_multipliers` for the per-channel `(m, n)`,
//! [`kernel_multiplier_and_shift`] for the shift plan of the vector
//! requantization, `quant_params::relu_upper_bound` for a fused ReLU6's top,
//! `rounding_of` and `relu_max_of` for the attributes. Weights and bias must
//! be constants (they are packed into rodata when compiling); the weights are
//! kept centered, `w − zp_w[c]`, which is all any kernel needs.
//!
//! **Choosing the accumulation.** All three compute `Σ (x − zp_x)(w − zp_w[c])`
//! exactly, modulo 2^32 like §6's `wrap32`:
//!
//! - [`Accumulation::Words`] (`vpmaddwd`): i16 operands, exact for any 8-bit
//!   data (each pair sum is at most 2 × 255 × 255 < 2^31).
//! - [`Accumulation::UnsignedBytes`] (`vpmaddubsw`, then `vpmaddwd` by ones):
//!   u8 activations times s8 weights with an i16 pair sum that saturates, so
//!   a layer takes it only when its weights prove it cannot: every centered
//!   weight fits s8 and every pair the instruction adds has
//!   255 × (|w_a| + |w_b|) ≤ 32767.
//! - [`Accumulation::DotProducts`] (`vpdpbusd`, AVX-VNNI or AVX-512 VNNI):
//!   the same u8 × s8 layout summed in i32 without saturation, so only the
//!   s8 fit is needed.
//!
//! The byte forms read `a = x` (u8 input) or `a = x + 128` (i8 input, a xor
//! of the sign bit), whose zero point is `zp_a = zp_x` or `zp_x + 128`;
//! `Σ (x − zp_x) w' = Σ a w' − zp_a Σ w'`, so the per-channel constant the
//! accumulator starts from is `b[c] − zp_a Σ_k w'[c, k]` (wrapping, as the
//! sum is taken modulo 2^32 anyway), and padded taps read `zp_a`.

use crate::buffer::ElementType;
use crate::error::CodegenError;
use crate::kernels::quant_params::{kernel_multiplier_and_shift, ByteQuant, FixedPointMultiplier};
use crate::lower::LowerOp;
use crate::target::{CpuFeatures, Target};
use iced_x86::code_asm::asm_traits::{CodeAsmVpdpbusd, CodeAsmVpmaddubsw, CodeAsmVpmaddwd};
use iced_x86::code_asm::*;
use qopt_dialect_qnn::fixed_point::Rounding;
use qopt_dialect_qnn::quant_params::{self, conv_multipliers, relu_upper_bound};
use qopt_dialect_qnn::{relu_max_of, rounding_of};
use qopt_ir_core::{dense_values_i128, type_to_string, FloatKind, QuantParams, TypeData};

/// Which multiply-accumulate instructions a conv or dense kernel may use,
/// beyond the exact `vpmaddwd` path that works for every layer.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct KernelOptions {
    /// Allow `vpmaddubsw` for layers whose weights prove it cannot saturate.
    pub byte_products: bool,
    /// Allow `vpdpbusd` (AVX-VNNI or AVX-512 VNNI) when the target has it.
    pub vnni: bool,
    /// Which conv GEMM runs a (non-depthwise) convolution.
    pub conv_gemm: ConvGemmChoice,
    /// How the depthwise kernel pairs taps.
    pub depthwise_taps: DepthwiseTaps,
}

/// How the depthwise kernel lays taps into `vpmaddwd`'s i16 pairs
/// (`depthwise.rs`).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum DepthwiseTaps {
    /// The layout that takes fewer instructions for the layer's shape.
    #[default]
    Cheapest,
    /// Horizontally adjacent taps share a pair wherever the horizontal
    /// dilation is 1.
    Adjacent,
    /// Each tap with a zero partner.
    Single,
}

/// Which of the two conv GEMMs a convolution runs.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum ConvGemmChoice {
    /// The one that computes the fewest lanes per useful multiply.
    #[default]
    Cheapest,
    /// Output positions in the lanes (`gemm.rs`).
    PositionLanes,
    /// Output channels in the lanes (`channel_gemm.rs`).
    ChannelLanes,
    /// Winograd F(2×2, 3×3) (`winograd.rs`) wherever it applies (3×3,
    /// stride 1, one group), whatever the weights; the cheapest GEMM
    /// elsewhere.
    Winograd,
}

impl Default for KernelOptions {
    fn default() -> KernelOptions {
        KernelOptions {
            byte_products: true,
            vnni: true,
            conv_gemm: ConvGemmChoice::Cheapest,
            depthwise_taps: DepthwiseTaps::Cheapest,
        }
    }
}

impl KernelOptions {
    /// Only the exact `vpmaddwd` path, whatever the weights and the target.
    pub const EXACT_WORDS_ONLY: KernelOptions = KernelOptions {
        byte_products: false,
        vnni: false,
        conv_gemm: ConvGemmChoice::Cheapest,
        depthwise_taps: DepthwiseTaps::Cheapest,
    };

    /// These options with convolutions on the GEMM `choice`.
    pub const fn with_conv_gemm(self, choice: ConvGemmChoice) -> KernelOptions {
        KernelOptions { conv_gemm: choice, ..self }
    }

    /// These options with depthwise taps laid out as `taps` says.
    pub const fn with_depthwise_taps(self, taps: DepthwiseTaps) -> KernelOptions {
        KernelOptions { depthwise_taps: taps, ..self }
    }
}

/// How `vpdpbusd` is encoded.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum VnniEncoding {
    /// AVX-VNNI (VEX, ymm).
    Vex,
    /// AVX-512 VNNI with VL (EVEX on ymm).
    Evex,
}

/// The multiply-accumulate scheme of a layer (see the module doc).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Accumulation {
    /// `vpmaddwd` on i16 pairs, then `vpaddd`.
    Words,
    /// `vpmaddubsw` on u8 × s8 quads, `vpmaddwd` by ones, `vpaddd`.
    UnsignedBytes,
    /// `vpdpbusd` on u8 × s8 quads.
    DotProducts(VnniEncoding),
}

impl Accumulation {
    /// The best scheme the target, the options and the weights allow.
    /// `rows` yields each output channel's centered weights in the order the
    /// kernel reduces them (quads of consecutive taps).
    pub fn choose<'w>(
        target: &Target,
        options: &KernelOptions,
        rows: impl Iterator<Item = &'w [i32]> + Clone,
    ) -> Accumulation {
        let fits_s8 = || rows.clone().all(|row| row.iter().all(|&w| (-128..=127).contains(&w)));
        let f = &target.features;
        if options.vnni && fits_s8() {
            if f.avxvnni {
                return Accumulation::DotProducts(VnniEncoding::Vex);
            }
            if f.avx512vnni && f.avx512vl {
                return Accumulation::DotProducts(VnniEncoding::Evex);
            }
        }
        if options.byte_products && rows.clone().all(pairs_cannot_saturate) {
            return Accumulation::UnsignedBytes;
        }
        Accumulation::Words
    }

    /// Taps per 4-byte unit of the packed layouts: an i16 pair or an 8-bit quad.
    pub fn taps_per_unit(self) -> usize {
        match self {
            Accumulation::Words => 2,
            Accumulation::UnsignedBytes | Accumulation::DotProducts(_) => 4,
        }
    }

    /// Whether activations are packed as bytes (`a = x` or `x + 128`) rather
    /// than as centered i16.
    pub fn uses_bytes(self) -> bool {
        self != Accumulation::Words
    }

    /// The CPU features the kernels of this scheme emit.
    pub fn needed_features(self) -> CpuFeatures {
        let base = CpuFeatures { avx: true, avx2: true, ..CpuFeatures::NONE };
        match self {
            Accumulation::Words | Accumulation::UnsignedBytes => base,
            Accumulation::DotProducts(VnniEncoding::Vex) => CpuFeatures { avxvnni: true, ..base },
            Accumulation::DotProducts(VnniEncoding::Evex) => {
                CpuFeatures { avx512f: true, avx512vl: true, avx512vnni: true, ..base }
            }
        }
    }

    /// For listings: what the kernel computes with, and why it may.
    pub fn describe(self) -> &'static str {
        match self {
            Accumulation::Words => "vpmaddwd exact (i16 pairs, any weights)",
            Accumulation::UnsignedBytes => "vpmaddubsw (weights proven: 255·(|w_a|+|w_b|) ≤ 32767 per pair)",
            Accumulation::DotProducts(VnniEncoding::Vex) => "vpdpbusd (AVX-VNNI, weights fit s8)",
            Accumulation::DotProducts(VnniEncoding::Evex) => "vpdpbusd (AVX-512 VNNI on ymm, weights fit s8)",
        }
    }
}

impl Accumulation {
    /// `acc += activations · weights` over one 4-byte depth unit per lane,
    /// the scheme's instructions: `vpmaddwd` + `vpaddd`, `vpmaddubsw` +
    /// `vpmaddwd` by `ones` + `vpaddd`, or one `vpdpbusd`. `activations` is
    /// the register of unsigned bytes (or i16 pairs), `weights` the signed
    /// operand (a register or memory), `product` a scratch register. The conv
    /// GEMM and the dense kernel both multiply through this.
    pub(crate) fn emit_multiply_accumulate<W: Copy, O>(
        self,
        a: &mut CodeAssembler,
        acc: AsmRegisterYmm,
        activations: AsmRegisterYmm,
        weights: W,
        (product, ones): (AsmRegisterYmm, O),
    ) -> Result<(), IcedError>
    where
        CodeAssembler: CodeAsmVpmaddwd<AsmRegisterYmm, AsmRegisterYmm, W>
            + CodeAsmVpmaddubsw<AsmRegisterYmm, AsmRegisterYmm, W>
            + CodeAsmVpdpbusd<AsmRegisterYmm, AsmRegisterYmm, W>
            + CodeAsmVpmaddwd<AsmRegisterYmm, AsmRegisterYmm, O>,
    {
        match self {
            Accumulation::Words => {
                a.vpmaddwd(product, activations, weights)?;
                a.vpaddd(acc, acc, product)
            }
            Accumulation::UnsignedBytes => {
                a.vpmaddubsw(product, activations, weights)?;
                a.vpmaddwd(product, product, ones)?;
                a.vpaddd(acc, acc, product)
            }
            Accumulation::DotProducts(VnniEncoding::Vex) => a.vex().vpdpbusd(acc, activations, weights),
            Accumulation::DotProducts(VnniEncoding::Evex) => a.evex().vpdpbusd(acc, activations, weights),
        }
    }
}

/// `vpmaddubsw` adds the products of taps `4q, 4q+1` and of `4q+2, 4q+3` in
/// i16 with saturation; with u8 activations (at most 255) it cannot saturate
/// when every weight fits s8 and 255 × (|w_a| + |w_b|) ≤ 32767 for each such
/// pair (`quant_params::u8_s8_pairs_exact`, which quant-lint reports too).
fn pairs_cannot_saturate(row: &[i32]) -> bool {
    let row: Vec<i64> = row.iter().map(|&w| i64::from(w)).collect();
    qopt_dialect_qnn::quant_params::u8_s8_pairs_exact(&row)
}

/// The requantization constants of one output channel, planned for the
/// vector kernels ([`kernel_multiplier_and_shift`]).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) struct ChannelRequant {
    /// `m`, in `[0, 2^31)`.
    pub multiplier: i32,
    /// The right shift `s`, in `1..=62`.
    pub shift: u32,
    /// `2^(s−1)`, or `2^(s−1) − 1` for half_to_even (§12).
    pub rounding_bias: i64,
}

/// How a layer's rows (its GEMM's output channels) sit in the op's weight.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum WeightRows {
    /// The weight is `channels × depth`, output channels on axis 0 (conv2d
    /// OIHW, dense N×K).
    OutputChannels,
    /// The C × O × `taps` weight of a transposed convolution whose kernel is
    /// its stride: row `o·taps + t` is tap `t` of output channel `o` and
    /// reads `w[ci, o, t]` for each of the `depth = C` input channels;
    /// parameters and bias are channel `o`'s (per tensor or per axis 1).
    TransposedTaps { taps: usize },
}

/// One conv2d or dense op as numbers: the integer problem of §6.
#[derive(Clone, Debug)]
pub(crate) struct Layer {
    /// The activation's parameters (per tensor, 8-bit storage).
    pub input: ByteQuant,
    /// The result's parameters.
    pub output: ByteQuant,
    /// Output channels `O`.
    pub channels: usize,
    /// Taps per output channel (`Cg·kh·kw` for conv2d, `K` for dense).
    pub depth: usize,
    /// Centered weights `w − zp_w[c]`, `channels × depth`, row-major in the
    /// weight's own order (OIHW for conv2d).
    pub weights: Vec<i32>,
    /// The i32 bias per channel (zeros without one).
    pub bias: Vec<i32>,
    /// Per channel.
    pub requant: Vec<ChannelRequant>,
    /// How ties round.
    pub rounding: Rounding,
    /// The low clamp bound minus `zp_out`: `qmin − zp_out`, or 0 for relu.
    pub low: i32,
    /// The high clamp bound minus `zp_out`: `qmax` (or the relu_max top) − `zp_out`.
    pub high: i32,
}

impl Layer {
    /// Reads `op` (conv2d, dense or a relu form; `relu` says which) whose
    /// weight (operand 1) has `channels` rows of `depth` taps.
    pub fn read(op: &LowerOp<'_>, relu: bool, channels: usize, depth: usize) -> Result<Layer, CodegenError> {
        Layer::read_rows(op, relu, channels, depth, WeightRows::OutputChannels)
    }

    /// [`read`](Self::read) with the weight's rows laid out as `rows` says.
    pub fn read_rows(
        op: &LowerOp<'_>,
        relu: bool,
        channels: usize,
        depth: usize,
        rows: WeightRows,
    ) -> Result<Layer, CodegenError> {
        op.expect_arity(2..=3, 1)?;
        // The op's output channel (its parameter and bias entry) of each row.
        let (param_channels, channel_of) = match rows {
            WeightRows::OutputChannels => (channels, 1),
            WeightRows::TransposedTaps { taps } => (channels / taps.max(1), taps.max(1)),
        };
        let weight_axis = match rows {
            WeightRows::OutputChannels => 0,
            WeightRows::TransposedTaps { .. } => 1,
        };
        let activation = |i: usize, what: &str| -> Result<ByteQuant, CodegenError> {
            let ty = op.operand_type(i);
            let q = op.quant_of(ty).ok_or_else(|| {
                op.invalid(format!("{what} must be quantized, got {}", type_to_string(op.ctx, ty)))
            })?;
            ByteQuant::of(q, what).map_err(|e| op.unsupported(e))
        };
        let input = activation(0, "the input")?;
        let result_ty = op.result_type(0);
        let out_q = op.quant_of(result_ty).ok_or_else(|| {
            op.invalid(format!("the result must be quantized, got {}", type_to_string(op.ctx, result_ty)))
        })?;
        let output = ByteQuant::of(out_q, "the result").map_err(|e| op.unsupported(e))?;
        let x_q = op.quant_of(op.operand_type(0)).ok_or_else(|| op.invalid("the input must be quantized"))?;

        let w_ty = op.operand_type(1);
        let w_q = op.quant_of(w_ty).ok_or_else(|| {
            op.invalid(format!("the weight must be quantized, got {}", type_to_string(op.ctx, w_ty)))
        })?;
        quant_params::check_quant_type(w_q).map_err(|e| op.invalid(format!("the weight: {e}")))?;
        if w_q.storage.width > 8 {
            return Err(op.unsupported(format!(
                "the weight has {}-bit storage; compiled kernels take 8 bits at most",
                w_q.storage.width
            )));
        }
        if w_q.expressed != FloatKind::F32 {
            return Err(op.unsupported("the weight's expressed type must be f32"));
        }
        let zero_points: Vec<i64> = match &w_q.params {
            QuantParams::PerTensor { zero_point, .. } => vec![*zero_point; param_channels],
            QuantParams::PerAxis { axis, zero_points, .. }
                if *axis as usize == weight_axis && zero_points.len() == param_channels =>
            {
                zero_points.to_vec()
            }
            QuantParams::PerAxis { axis, zero_points, .. } => {
                return Err(op.invalid(format!(
                    "the weight must be quantized per tensor or per axis {weight_axis} with one entry per \
                     output channel, got axis {axis} with {} entries for {param_channels} channels",
                    zero_points.len()
                )))
            }
        };
        let stored = op
            .constant_operand(1)
            .and_then(|d| dense_values_i128(op.ctx, d))
            .ok_or_else(|| op.unsupported("the weight must be a constant (it is packed when compiling)"))?;
        if stored.len() != channels * depth {
            return Err(op.invalid(format!(
                "the weight holds {} values, expected {channels} × {depth}",
                stored.len()
            )));
        }
        let mut weights = Vec::with_capacity(stored.len());
        for i in 0..stored.len() {
            let (row, tap) = (i / depth.max(1), i % depth.max(1));
            let w = match rows {
                WeightRows::OutputChannels => stored[i],
                // Row (o, t) tap ci reads w[ci, o, t] of the C × O × taps weight.
                WeightRows::TransposedTaps { .. } => stored[tap * channels + row],
            };
            // The parser keeps stored values within their storage type, so
            // with zero points in range the difference is within ±255 (and
            // |w'| ≤ 383 would still be exact in every kernel).
            if !(-128..=255).contains(&w) {
                return Err(op.invalid(format!("weight value {w} does not fit its 8-bit storage")));
            }
            weights.push(w as i32 - zero_points[row / channel_of] as i32);
        }

        let bias = if op.num_operands() == 3 {
            let ty = op.operand_type(2);
            let is_i32 =
                matches!(op.ctx.type_data(op.ctx.element_type(ty)), TypeData::Int(i) if i.width == 32);
            if !is_i32 || op.shape_of(ty, "the bias")? != [param_channels] {
                return Err(op.invalid(format!(
                    "the bias must be a tensor<{param_channels}xi32>, got {}",
                    type_to_string(op.ctx, ty)
                )));
            }
            let values = op
                .constant_operand(2)
                .and_then(|d| dense_values_i128(op.ctx, d))
                .ok_or_else(|| op.unsupported("the bias must be a constant (it is packed when compiling)"))?;
            (0..channels).map(|c| values[c / channel_of] as i32).collect()
        } else {
            vec![0; channels]
        };

        let attrs = op.module.op_attrs(op.op);
        let rounding = rounding_of(op.ctx, attrs);
        let multipliers = conv_multipliers(x_q, w_q, out_q).map_err(|e| op.invalid(e))?;
        if multipliers.len() != 1 && multipliers.len() != param_channels {
            return Err(op.invalid(format!(
                "the weight has {} scales for {param_channels} output channels",
                multipliers.len()
            )));
        }
        let requant = (0..channels)
            .map(|c| {
                let (multiplier, shift) =
                    multipliers[if multipliers.len() == 1 { 0 } else { c / channel_of }];
                let (m, s) = kernel_multiplier_and_shift(FixedPointMultiplier { multiplier, shift });
                let half = 1i64 << (s - 1);
                let rounding_bias = if rounding == Rounding::HalfToEven { half - 1 } else { half };
                ChannelRequant { multiplier: m, shift: s, rounding_bias }
            })
            .collect();
        let top = relu_upper_bound(out_q, if relu { relu_max_of(op.ctx, attrs) } else { None })
            .map_err(|e| op.invalid(e))?;
        let zp = output.zero_point;
        let low = if relu { 0 } else { output.qmin - zp };
        Ok(Layer {
            input,
            output,
            channels,
            depth,
            weights,
            bias,
            requant,
            rounding,
            low,
            high: top as i32 - zp,
        })
    }

    /// The centered weights of output channel `c`.
    pub fn row(&self, c: usize) -> &[i32] {
        &self.weights[c * self.depth..(c + 1) * self.depth]
    }

    /// Every channel's centered weights, in order.
    pub fn rows(&self) -> impl Iterator<Item = &[i32]> + Clone {
        (0..self.channels).map(|c| self.row(c))
    }

    /// The zero point of the activation bytes the byte schemes read:
    /// `zp_x`, or `zp_x + 128` for i8 inputs (read as `x + 128`).
    pub fn byte_zero_point(&self) -> i32 {
        match self.input.element {
            ElementType::I8 => self.input.zero_point + 128,
            _ => self.input.zero_point,
        }
    }

    /// The value each output channel's accumulator starts from: the bias,
    /// and for the byte schemes the compensation `− zp_a Σ_k w'[c, k]`
    /// (wrapping, like the accumulation).
    pub fn accumulator_init(&self, accumulation: Accumulation) -> Vec<i32> {
        (0..self.channels)
            .map(|c| {
                let b = self.bias[c];
                if accumulation.uses_bytes() {
                    let sum: i32 = self.row(c).iter().fold(0i32, |s, &w| s.wrapping_add(w));
                    b.wrapping_sub(self.byte_zero_point().wrapping_mul(sum))
                } else {
                    b
                }
            })
            .collect()
    }
}
