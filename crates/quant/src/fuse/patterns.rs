//! The quantized patterns `fuse` applies, as an open registry: each
//! [`QuantPattern`] turns one float op whose operands are dequantized and
//! whose result (after an optional relu or `clip(0, c)`) is quantized into a
//! quantized op computing that quantized result (`docs/quant-semantics.md`
//! §6, §7). The built-in ones cover `fp.conv2d`, `fp.dense`, `fp.matmul`
//! by a constant matrix (as `qnn.dense` of its transpose), `fp.conv_transpose2d`, `fp.prelu`, `fp.add`,
//! `fp.mul`, `fp.concat`, `fp.avg_pool2d` and `fp.global_avg_pool2d`, and
//! every op with the [`LookupActivation`] interface (sigmoid, tanh, gelu,
//! hard_swish, ...) as a `qnn.lookup` table of its values (§7.5); a downstream
//! crate adds its own through [`FusionPatterns::install`] (seed 000: "allow
//! arbitrary patterns to be rewritten to a corresponding quantized pattern"),
//! as `examples/toy-accel` does.

use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{quant_element, storage_range};
use qopt_dialect_qnn::MAX_LOOKUP_BITS;
use qopt_interp::{KernelContext, KernelRegistry, Tensor};
use qopt_ir_core::interfaces::LookupActivation;
use qopt_ir_core::{
    constant_value, AttrData, Attribute, Context, DenseElements, FloatKind, Module, OpDef, OpId,
    OperationState, QuantParams, QuantType, Rewriter, Signedness, Type, TypeData, ValueId,
};
use std::sync::{Arc, OnceLock};

/// What `fuse` found around one float op (the root).
pub struct FuseSite {
    /// The float op.
    pub op: OpId,
    /// Its operands, in order.
    pub operands: Vec<SiteOperand>,
    /// The activation between the op and the quantize of its result.
    pub activation: Activation,
    /// The quantized tensor type the fused op must produce.
    pub output: Type,
}

/// An operand of a [`FuseSite`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SiteOperand {
    /// `qnn.dequantize(q)`: the quantized value `q`.
    Quantized(ValueId),
    /// Anything else: the float value itself.
    Float(ValueId),
}

impl SiteOperand {
    /// The quantized value, if the operand was dequantized.
    pub fn quantized(self) -> Option<ValueId> {
        match self {
            SiteOperand::Quantized(q) => Some(q),
            SiteOperand::Float(_) => None,
        }
    }
}

/// An activation that follows the root op and may fuse into it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Activation {
    /// None: the root's result is quantized directly.
    None,
    /// `fp.relu`.
    Relu,
    /// `fp.clip {min = 0, max}`, with the `max` attribute (ReLU6: 6.0).
    Clip(Attribute),
}

/// A rewrite from a float op to a quantized one.
pub trait QuantPattern: Send + Sync {
    /// The pattern's name, kebab-case, starting with `fused-`: `--stats`
    /// counts its rewrites under it (`fused-conv2d`).
    fn name(&self) -> &'static str;
    /// The float op it rewrites (`fp.conv2d`); for a pattern that rewrites a
    /// class of ops (see [`applies_to`](Self::applies_to)), a name for the class.
    fn root(&self) -> &'static str;
    /// Whether it rewrites ops defined by `def`: by default the op named
    /// [`root`](Self::root). A pattern for every op that declares some
    /// interface (the built-in `fused-lookup`: [`LookupActivation`]) overrides it.
    fn applies_to(&self, def: &OpDef) -> bool {
        def.name == self.root()
    }
    /// Builds the quantized op at the rewriter's insertion point (just before
    /// the root) and returns its result, of type `site.output`; `Ok(None)` when
    /// the site does not fit the pattern (`quant-lint` then reports the op as a
    /// float island). Activations it cannot fuse are
    /// declined with `Ok(None)`; `fuse` then retries without the activation
    /// when the output type already applies it (and drops it), or for a relu
    /// (and applies it to the quantized result).
    fn rewrite(&self, rewriter: &mut Rewriter<'_>, site: &FuseSite) -> Result<Option<ValueId>, String>;
}

/// The patterns `fuse` uses, kept as an extension of the [`Context`].
pub struct FusionPatterns {
    patterns: Vec<Arc<dyn QuantPattern>>,
}

impl Default for FusionPatterns {
    /// The built-in patterns.
    fn default() -> FusionPatterns {
        FusionPatterns {
            patterns: vec![
                Arc::new(Weighted {
                    root: fp_op::CONV2D,
                    plain: qnn_op::CONV2D,
                    relu: qnn_op::CONV2D_RELU,
                    name: "fused-conv2d",
                    weight_axis: 0,
                }),
                Arc::new(Weighted {
                    root: fp_op::CONV_TRANSPOSE2D,
                    plain: qnn_op::CONV_TRANSPOSE2D,
                    relu: qnn_op::CONV_TRANSPOSE2D_RELU,
                    name: "fused-conv-transpose2d",
                    weight_axis: 1,
                }),
                Arc::new(Weighted {
                    root: fp_op::DENSE,
                    plain: qnn_op::DENSE,
                    relu: qnn_op::DENSE_RELU,
                    name: "fused-dense",
                    weight_axis: 0,
                }),
                Arc::new(MatmulByConstant),
                Arc::new(Elementwise { root: fp_op::ADD, op: qnn_op::ADD, name: "fused-add" }),
                Arc::new(Elementwise { root: fp_op::SUB, op: qnn_op::SUB, name: "fused-sub" }),
                Arc::new(Elementwise { root: fp_op::MUL, op: qnn_op::MUL, name: "fused-mul" }),
                Arc::new(Elementwise { root: fp_op::CONCAT, op: qnn_op::CONCAT, name: "fused-concat" }),
                Arc::new(Elementwise {
                    root: fp_op::AVG_POOL2D,
                    op: qnn_op::AVG_POOL2D,
                    name: "fused-avg-pool2d",
                }),
                Arc::new(Elementwise {
                    root: fp_op::GLOBAL_AVG_POOL2D,
                    op: qnn_op::GLOBAL_AVG_POOL2D,
                    name: "fused-global-avg-pool2d",
                }),
                Arc::new(Prelu),
                Arc::new(Lookup),
            ],
        }
    }
}

impl FusionPatterns {
    /// The patterns installed in `ctx`, or the built-in ones.
    pub fn of(ctx: &Context) -> &FusionPatterns {
        static BUILTIN: OnceLock<FusionPatterns> = OnceLock::new();
        ctx.extension::<FusionPatterns>().unwrap_or_else(|| BUILTIN.get_or_init(FusionPatterns::default))
    }

    /// The patterns of `ctx` for adding to, installing the built-in ones first if needed.
    pub fn install(ctx: &mut Context) -> &mut FusionPatterns {
        ctx.extension_mut::<FusionPatterns>()
    }

    /// Adds a pattern; fails if the name is taken. Patterns added later are
    /// tried first, so a downstream pattern can take over a built-in root.
    pub fn add(&mut self, pattern: Arc<dyn QuantPattern>) -> Result<(), String> {
        if self.patterns.iter().any(|p| p.name() == pattern.name()) {
            return Err(format!("a fusion pattern named '{}' is already registered", pattern.name()));
        }
        self.patterns.push(pattern);
        Ok(())
    }

    /// The patterns for float ops defined by `def` ([`QuantPattern::applies_to`]),
    /// the latest added first.
    pub fn for_op<'p>(&'p self, def: &'p OpDef) -> impl Iterator<Item = &'p Arc<dyn QuantPattern>> + 'p {
        self.patterns.iter().rev().filter(move |p| p.applies_to(def))
    }

    /// Every pattern, in the order added.
    pub fn all(&self) -> &[Arc<dyn QuantPattern>] {
        &self.patterns
    }
}

/// The per-tensor quantized type of `value`, if it has one.
fn per_tensor(ctx: &Context, module: &Module, value: ValueId) -> Option<QuantType> {
    let q = quant_element(ctx, module.value_type(value))?;
    matches!(q.params, QuantParams::PerTensor { .. }).then(|| q.clone())
}

/// `fp.conv2d`, `fp.conv_transpose2d` and `fp.dense` into their `qnn` ops
/// (and relu forms): a per-tensor activation, a weight per tensor or per
/// output channel (axis 0; axis 1 of a transposed convolution's weight, with
/// one group), and
/// an optional bias that `quantize-constants` made i32 in units of
/// `s_x·s_w[c]` (§6.1).
struct Weighted {
    root: &'static str,
    plain: &'static str,
    relu: &'static str,
    name: &'static str,
    /// The weight axis of the output channels (of one group).
    weight_axis: u32,
}

impl QuantPattern for Weighted {
    fn name(&self) -> &'static str {
        self.name
    }
    fn root(&self) -> &'static str {
        self.root
    }
    fn rewrite(&self, rw: &mut Rewriter<'_>, site: &FuseSite) -> Result<Option<ValueId>, String> {
        let (x, w) = match site.operands.as_slice() {
            [x, w] | [x, w, _] => (x.quantized(), w.quantized()),
            _ => return Ok(None),
        };
        let (Some(x), Some(w)) = (x, w) else { return Ok(None) };
        let Some(qx) = per_tensor(rw.ctx, rw.module, x) else { return Ok(None) };
        let Some(qw) = quant_element(rw.ctx, rw.module.value_type(w)).cloned() else { return Ok(None) };
        let attrs = rw.module.op_attrs(site.op);
        if let QuantParams::PerAxis { axis, .. } = qw.params {
            // Off axis 0, the weight's per-channel axis holds one group's channels.
            let grouped = qopt_dialect_fp::attrs::int_in(rw.ctx, attrs, "groups", 1).unwrap_or(1) > 1;
            if axis != self.weight_axis || (axis != 0 && grouped) {
                return Ok(None);
            }
        }
        let mut operands = vec![x, w];
        if let Some(&bias) = site.operands.get(2) {
            let Some(b) = integer_bias(rw, bias, &qx, &qw)? else { return Ok(None) };
            operands.push(b);
        }
        let (name, attrs) = match site.activation {
            Activation::None => (self.plain, attrs),
            Activation::Relu => (self.relu, attrs),
            Activation::Clip(max) => (self.relu, rw.ctx.dict_set(attrs, "relu_max", max)),
        };
        let name = rw.ctx.op_name(name);
        let op =
            rw.create(OperationState::new(name).operands(&operands).results(&[site.output]).attrs(attrs));
        Ok(Some(rw.module.result(op, 0)))
    }
}

/// `fp.matmul(a, c)` with a quantized constant K×N matrix `c` into
/// `qnn.dense[_relu](a, cᵀ)`: `a·c` over the last dimension is `a·(cᵀ)ᵀ`, and
/// the transposed constant keeps every stored value and its parameters (a
/// per-axis `c` on axis 1, its columns, becomes per axis 0).
struct MatmulByConstant;

impl QuantPattern for MatmulByConstant {
    fn name(&self) -> &'static str {
        "fused-matmul"
    }
    fn root(&self) -> &'static str {
        fp_op::MATMUL
    }
    fn rewrite(&self, rw: &mut Rewriter<'_>, site: &FuseSite) -> Result<Option<ValueId>, String> {
        let [a, c] = site.operands[..] else { return Ok(None) };
        let (Some(a), Some(c)) = (a.quantized(), c.quantized()) else { return Ok(None) };
        if per_tensor(rw.ctx, rw.module, a).is_none() {
            return Ok(None);
        }
        let Some(qc) = quant_element(rw.ctx, rw.module.value_type(c)).cloned() else { return Ok(None) };
        let Some(shape) = rw.ctx.tensor_shape(rw.module.value_type(c)).map(<[i64]>::to_vec) else {
            return Ok(None);
        };
        let [k, n] = shape[..] else { return Ok(None) };
        let Some(value) = constant_value(rw.ctx, rw.module, c) else { return Ok(None) };
        let AttrData::Dense(d) = rw.ctx.attr_data(value) else { return Ok(None) };
        let Some(values) = qopt_ir_core::dense_values_i128(rw.ctx, d) else { return Ok(None) };
        let (k, n) = (k as usize, n as usize);
        if values.len() != k * n {
            return Ok(None);
        }
        let transposed: Vec<i128> = (0..n * k).map(|i| values[(i % k) * n + i / k]).collect();
        let params = match qc.params {
            QuantParams::PerTensor { .. } => qc.params.clone(),
            QuantParams::PerAxis { axis: 1, ref scales, ref zero_points } => {
                QuantParams::PerAxis { axis: 0, scales: scales.clone(), zero_points: zero_points.clone() }
            }
            QuantParams::PerAxis { .. } => return Ok(None),
        };
        let elem = rw.ctx.quant_type(QuantType { params, ..qc });
        let ty = rw.ctx.tensor_type(&[n as i64, k as i64], elem);
        let attr = rw.ctx.dense_attr(DenseElements::from_i128(rw.ctx, ty, &transposed)?);
        let attrs = rw.ctx.dict_attr(&[("value", attr)]);
        let weight = rw.create_inferred(fp_op::CONSTANT, &[], attrs)?;
        let weight = rw.module.result(weight, 0);
        let no_attrs = rw.ctx.dict_attr(&[]);
        let (name, attrs) = match site.activation {
            Activation::None => (qnn_op::DENSE, no_attrs),
            Activation::Relu => (qnn_op::DENSE_RELU, no_attrs),
            Activation::Clip(max) => (qnn_op::DENSE_RELU, rw.ctx.dict_attr(&[("relu_max", max)])),
        };
        let name = rw.ctx.op_name(name);
        let op =
            rw.create(OperationState::new(name).operands(&[a, weight]).results(&[site.output]).attrs(attrs));
        Ok(Some(rw.module.result(op, 0)))
    }
}

/// Whether `qb` is the type of an integer bias: i32 storage, f32 expressed.
pub(crate) fn is_i32_bias(qb: &QuantType) -> bool {
    qb.storage.width == 32 && qb.storage.signedness == Signedness::Signless && qb.expressed == FloatKind::F32
}

/// Whether the bias type `qb` is in units of `s_x ⊗₆₄ s_w[c]` with zero
/// points 0, per tensor or per output channel (§6.1), for a per-tensor
/// activation `qx` and a weight `qw`.
pub(crate) fn bias_scales_match(qx: &QuantType, qw: &QuantType, qb: &QuantType) -> bool {
    let QuantParams::PerTensor { scale: s_x, .. } = qx.params else { return false };
    let weight_scales: Vec<f64> = match &qw.params {
        QuantParams::PerTensor { scale, .. } => vec![*scale],
        QuantParams::PerAxis { scales, .. } => scales.to_vec(),
    };
    match &qb.params {
        QuantParams::PerTensor { scale, zero_point } => {
            *zero_point == 0 && weight_scales.iter().all(|&s_w| s_x * s_w == *scale)
        }
        QuantParams::PerAxis { axis: 0, scales, zero_points } => {
            zero_points.iter().all(|&z| z == 0)
                && (scales.len() == weight_scales.len() || weight_scales.len() == 1)
                && scales
                    .iter()
                    .enumerate()
                    .all(|(c, &s)| s_x * weight_scales[c.min(weight_scales.len() - 1)] == s)
        }
        QuantParams::PerAxis { .. } => false,
    }
}

/// The `tensor<Oxi32>` bias operand of a fused conv or dense for the site's
/// bias operand, built at the rewriter's insertion point: the stored values
/// of an i32 quantized constant whose scales are exactly `s_x ⊗₆₄ s_w[c]`
/// with zero points 0 (§6.1, what `quantize-constants` makes); `None` for
/// anything else. For downstream patterns of weighted ops too.
pub fn integer_bias(
    rw: &mut Rewriter<'_>,
    bias: SiteOperand,
    qx: &QuantType,
    qw: &QuantType,
) -> Result<Option<ValueId>, String> {
    let Some(b) = bias.quantized() else { return Ok(None) };
    let Some(qb) = quant_element(rw.ctx, rw.module.value_type(b)).cloned() else { return Ok(None) };
    if !is_i32_bias(&qb) || !bias_scales_match(qx, qw, &qb) {
        return Ok(None);
    }
    let Some(value) = constant_value(rw.ctx, rw.module, b) else { return Ok(None) };
    let AttrData::Dense(d) = rw.ctx.attr_data(value) else { return Ok(None) };
    let (bytes, shape) = (d.bytes.to_vec(), rw.ctx.tensor_shape(d.ty).map(<[i64]>::to_vec));
    let Some(shape) = shape else { return Ok(None) };
    let i32_ty = rw.ctx.int_type(32, Signedness::Signless);
    let ty = rw.ctx.tensor_type(&shape, i32_ty);
    let plain = rw.ctx.dense_attr(DenseElements::from_bytes(rw.ctx, ty, bytes)?);
    let attrs = rw.ctx.dict_attr(&[("value", plain)]);
    let op = rw.create_inferred(fp_op::CONSTANT, &[], attrs)?;
    Ok(Some(rw.module.result(op, 0)))
}

/// `fp.add`, `fp.mul`, `fp.concat` and the average pools of per-tensor
/// quantized operands into their `qnn` ops (same attributes). No activation fuses;
/// `fuse` applies a relu to the quantized result itself.
struct Elementwise {
    root: &'static str,
    op: &'static str,
    name: &'static str,
}

impl QuantPattern for Elementwise {
    fn name(&self) -> &'static str {
        self.name
    }
    fn root(&self) -> &'static str {
        self.root
    }
    fn rewrite(&self, rw: &mut Rewriter<'_>, site: &FuseSite) -> Result<Option<ValueId>, String> {
        if site.activation != Activation::None || site.operands.is_empty() {
            return Ok(None);
        }
        let mut operands = Vec::with_capacity(site.operands.len());
        for operand in &site.operands {
            match operand.quantized() {
                Some(q) if per_tensor(rw.ctx, rw.module, q).is_some() => operands.push(q),
                _ => return Ok(None),
            }
        }
        let attrs = rw.module.op_attrs(site.op);
        let name = rw.ctx.op_name(self.op);
        let op =
            rw.create(OperationState::new(name).operands(&operands).results(&[site.output]).attrs(attrs));
        Ok(Some(rw.module.result(op, 0)))
    }
}

/// `fp.prelu(dequantize(x), slope)` with a per-tensor `x` and a float
/// constant slope into `qnn.prelu(x, slope)` (§7.6): the slope stays float,
/// each side of zero gets its own multiplier.
struct Prelu;

impl QuantPattern for Prelu {
    fn name(&self) -> &'static str {
        "fused-prelu"
    }
    fn root(&self) -> &'static str {
        fp_op::PRELU
    }
    fn rewrite(&self, rw: &mut Rewriter<'_>, site: &FuseSite) -> Result<Option<ValueId>, String> {
        let [SiteOperand::Quantized(x), SiteOperand::Float(slope)] = site.operands[..] else {
            return Ok(None);
        };
        // qnn.prelu keeps the input's shape: a slope that broadcasts the input
        // to a larger one stays float.
        let same_shape = rw.ctx.tensor_shape(rw.module.value_type(x)) == rw.ctx.tensor_shape(site.output);
        if site.activation != Activation::None
            || !same_shape
            || per_tensor(rw.ctx, rw.module, x).is_none()
            || constant_value(rw.ctx, rw.module, slope).is_none()
        {
            return Ok(None);
        }
        let name = rw.ctx.op_name(qnn_op::PRELU);
        let state = OperationState::new(name)
            .operands(&[x, slope])
            .results(&[site.output])
            .attrs(Attribute::EMPTY_DICT);
        let op = rw.create(state);
        Ok(Some(rw.module.result(op, 0)))
    }
}

/// Every op with the [`LookupActivation`] interface (a unary function of its
/// operand alone), with a per-tensor operand of at most 8-bit storage, and the
/// relu or `clip(0, c)` after it if any, into `qnn.lookup`. The table is
/// computed by the interpreter kernels the model itself runs on: the
/// operand's every stored value `qmin..=qmax` through `qnn.dequantize`, the
/// op's kernel (with its attributes), the activation's kernel, and
/// `qnn.quantize` to the output type. Since the kernels are elementwise, the
/// lookup gives what `dequantize → op → [activation] → quantize` gave, bit for
/// bit, on every input. The table's element type is the output's storage type.
/// An op without a kernel is declined (it stays float; `quant-lint` says so).
struct Lookup;

impl QuantPattern for Lookup {
    fn name(&self) -> &'static str {
        "fused-lookup"
    }
    fn root(&self) -> &'static str {
        "LookupActivation"
    }
    fn applies_to(&self, def: &OpDef) -> bool {
        def.interfaces.get::<LookupActivation>().is_some()
    }
    fn rewrite(&self, rw: &mut Rewriter<'_>, site: &FuseSite) -> Result<Option<ValueId>, String> {
        let [operand] = site.operands[..] else { return Ok(None) };
        let Some(x) = operand.quantized() else { return Ok(None) };
        let Some(table) = lookup_table(rw, site, x)? else { return Ok(None) };
        let attrs = rw.ctx.dict_attr(&[("table", table)]);
        let name = rw.ctx.op_name(qnn_op::LOOKUP);
        let op = rw.create(OperationState::new(name).operands(&[x]).results(&[site.output]).attrs(attrs));
        Ok(Some(rw.module.result(op, 0)))
    }
}

/// The `table` attribute of a `qnn.lookup` of `x` computing `site` (see
/// [`Lookup`]), or `None` when the site does not fit.
fn lookup_table(rw: &mut Rewriter<'_>, site: &FuseSite, x: ValueId) -> Result<Option<Attribute>, String> {
    let Some(qx) = per_tensor(rw.ctx, rw.module, x) else { return Ok(None) };
    let Some(qout) = quant_element(rw.ctx, site.output).cloned() else { return Ok(None) };
    if qx.storage.width > MAX_LOOKUP_BITS || !matches!(qout.params, QuantParams::PerTensor { .. }) {
        return Ok(None);
    }
    let op = site.op;
    if rw.module.num_operands(op) != 1 || rw.module.num_results(op) != 1 {
        return Ok(None);
    }
    let float_in = rw.ctx.element_type(rw.module.value_type(rw.module.operand(op, 0)));
    let float_out = rw.ctx.element_type(rw.module.value_type(rw.module.result(op, 0)));
    let (qmin, qmax) = storage_range(&qx);
    let n = qmax - qmin + 1;
    // Every type the kernels see, interned before they borrow the context.
    let x_elem = rw.ctx.element_type(rw.module.value_type(x));
    let out_elem = rw.ctx.element_type(site.output);
    let stored_in = rw.ctx.tensor_type(&[n], x_elem);
    let real_in = rw.ctx.tensor_type(&[n], float_in);
    let real_out = rw.ctx.tensor_type(&[n], float_out);
    let stored_out = rw.ctx.tensor_type(&[n], out_elem);
    let no_attrs = rw.ctx.dict_attr(&[]);
    let activation = match site.activation {
        Activation::None => None,
        Activation::Relu => Some((fp_op::RELU, no_attrs)),
        Activation::Clip(max) => {
            let f32_ty = rw.ctx.common().f32;
            let zero = rw.ctx.float_attr(0.0, f32_ty);
            Some((fp_op::CLIP, rw.ctx.dict_attr(&[("min", zero), ("max", max)])))
        }
    };
    let op_name = rw.ctx.op_name_str(rw.module.op_name(op)).to_string();
    let op_attrs = rw.module.op_attrs(op);
    let inputs: Vec<i128> = (qmin..=qmax).map(i128::from).collect();
    let inputs = DenseElements::from_i128(rw.ctx, stored_in, &inputs)?;

    let ctx: &Context = rw.ctx;
    let kernels = &*KernelRegistry::of_or_standard(ctx);
    let mut steps = vec![
        (qnn_op::DEQUANTIZE, no_attrs, stored_in, real_in),
        (op_name.as_str(), op_attrs, real_in, real_out),
    ];
    if let Some((name, attrs)) = activation {
        steps.push((name, attrs, real_out, real_out));
    }
    steps.push((qnn_op::QUANTIZE, no_attrs, real_out, stored_out));
    let mut value = Tensor::from_dense(ctx, &inputs).map_err(|e| e.message)?;
    for (name, attrs, operand_ty, result_ty) in steps {
        let Some(kernel) = kernels.get(name) else { return Ok(None) };
        let (operand_types, result_types) = ([operand_ty], [result_ty]);
        let mut kc = KernelContext::new(ctx, attrs, &result_types).with_operand_types(&operand_types);
        let mut results = kernel(&mut kc, &[&value]).map_err(|e| format!("{name}: {}", e.message))?;
        if results.len() != 1 {
            return Err(format!("{name}: the kernel returned {} results", results.len()));
        }
        value = results.remove(0);
    }
    let entries: Vec<i128> = value.to_f64_vec().into_iter().map(|v| v as i128).collect();
    if entries.len() as i64 != n {
        return Err(format!("the table has {} entries, not {n}", entries.len()));
    }
    let storage = rw.ctx.int_type(qout.storage.width, qout.storage.signedness);
    let table_ty = rw.ctx.tensor_type(&[n], storage);
    let table = DenseElements::from_i128(rw.ctx, table_ty, &entries)?;
    Ok(Some(rw.ctx.dense_attr(table)))
}

/// Whether `ty` is a tensor of a quantized element type.
pub(crate) fn is_quantized_tensor(ctx: &Context, ty: Type) -> bool {
    matches!(ctx.type_data(ty), TypeData::Tensor { .. }) && quant_element(ctx, ty).is_some()
}

/// The op defining `value` when it is `name` (with one operand).
pub(crate) fn defined_by(ctx: &Context, module: &Module, value: ValueId, name: &str) -> Option<OpId> {
    let def = module.defining_op(value);
    (!def.is_none() && ctx.op_name_str(module.op_name(def)) == name && module.num_operands(def) == 1)
        .then_some(def)
}
