//! `accel-quantize{calibration=FILE.npz}`: the vendor's own quantizer for
//! the regions `partition{target=accel}` outlines, fed by the boundary data
//! qopt's `collect-calibration-data` writes. It stands for the quantizer a
//! hardware vendor already has: qopt hands it float subgraphs and their
//! input and output tensors, and it decides the integer types itself.
//!
//! For every function `@accel_<k>` (what `partition{target=accel}` makes; a
//! float region of `fp.conv2d` → `fp.relu` pairs and constants):
//!
//! 1. **Ranges from the boundary data.** Each recorded input of the region
//!    (`accel_<k>/input<i>` in the archive, one entry per run) is run through
//!    the region in the interpreter, tracking the min and max of each input
//!    and each relu output; the region's results are checked against the
//!    recorded `accel_<k>/output<i>`, so data collected for another model (or
//!    before an edit) is refused rather than silently used.
//! 2. **Types.** Activations: i8, per tensor, asymmetric over the range
//!    widened to contain 0 (`scale = (hi − lo) / 255`, `zero_point =
//!    round(−128 − lo / scale)`). Weights: i8, symmetric per output channel
//!    (`scale[o] = max |w[o]| / 127`, values in [−127, 127]). Bias: i32 in
//!    units of `s_x · s_w[o]` (zeros when the conv has none).
//! 3. **Rewrite.** `qnn.quantize` of each argument, each conv + relu as one
//!    `qnn.conv2d_relu` with the engine's rounding (`half_away_from_zero`)
//!    located at `fused[conv, relu]` (so per-layer comparison matches it with
//!    the float relu), `qnn.dequantize` of each result. The function's
//!    signature stays float, so `@main` is untouched; `accel-lower` then
//!    moves the `qnn.conv2d_relu` ops onto the engine.
//!
//! Any other op in such a function, a missing member, or recorded outputs
//! that the region does not reproduce is an error naming the function or the
//! op. Statistics: `regions`, `convolutions`.
//!
//! ```text
//! // before (in @accel_0)
//! %0 = fp.conv2d(%arg0, %w, %b) {pad = [1, 1, 1, 1]} ... loc("conv1")
//! %1 = fp.relu(%0) ...                                  loc("relu1")
//! // after accel-quantize{calibration=boundary.npz}
//! %q = qnn.quantize(%arg0) ...                          loc("accel_0.input0")
//! %0 = qnn.conv2d_relu(%q, %wq, %bq) {pad = [1, 1, 1, 1], rounding = "half_away_from_zero"} ... loc(fused["conv1", "relu1"])
//! %1 = qnn.dequantize(%0) ...                           loc("accel_0.output0")
//! ```

use crate::backend::{engine_relu, ACCEL_TARGET};
use crate::ops::conv::ACCEL_ROUNDING;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_interp::{DType, Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    Attribute, Context, DenseElements, FloatKind, FxHashMap, IntType, Location, Module, OpId, OperationState,
    Pass, PassContext, PassError, PassOutcome, QuantParams, QuantType, Signedness, Type, ValueId,
};
use qopt_quant::runs::dataset::{ArgSpec, Dataset};
use std::path::Path;

/// The `accel-quantize` pass; see the module docs.
#[derive(Copy, Clone, Debug, Default)]
pub struct AccelQuantize;

const INFO: PassInfo = PassInfo {
    name: "accel-quantize",
    summary: "quantize the @accel_<k> regions to i8 qnn.conv2d_relu from the boundary data collect-calibration-data wrote",
    preserves_semantics: false,
    equivalence: None,
    description: "The toy accelerator vendor's own quantizer. For each region `@accel_<k>` that \
     `partition{target=accel}` outlined (fp.conv2d + fp.relu pairs), runs the region on its \
     recorded inputs from `calibration` (the `.npz` of `collect-calibration-data`), checks the \
     recorded outputs, and rewrites it with i8 per-tensor activations (min-max, asymmetric), \
     i8 symmetric per-channel weights and i32 biases into `qnn.quantize`, \
     `qnn.conv2d_relu {rounding = \"half_away_from_zero\"}` and `qnn.dequantize`; the \
     function's signature stays float. Run `accel-lower` after it.",
};

impl Pass for AccelQuantize {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![OptionSpec::new("calibration", OptionKind::String, "")
            .required()
            .reads_file()
            .help("the .npz collect-calibration-data wrote after partition{target=accel}")]
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let archive = options.string("calibration").to_string();
        let regions = accel_regions(cx.ctx, module);
        let mut convolutions = 0u64;
        for &(function, ref name) in &regions {
            let pairs = conv_relu_pairs(cx.ctx, module, function)?;
            let ranges = observe_ranges(cx.ctx, module, function, name, &pairs, Path::new(&archive))?;
            convolutions += pairs.len() as u64;
            rewrite(cx.ctx, module, function, name, &pairs, &ranges).map_err(|e| format!("@{name}: {e}"))?;
        }
        cx.add_stat("regions", regions.len() as u64);
        cx.add_stat("convolutions", convolutions);
        Ok(PassOutcome::from_changed(!regions.is_empty()))
    }
}

/// The functions `partition{target=accel}` made: `@accel_<digits>`, in
/// module order, with their names.
fn accel_regions(ctx: &Context, module: &Module) -> Vec<(OpId, String)> {
    let prefix = format!("{ACCEL_TARGET}_");
    module
        .top_level_ops()
        .filter(|&op| module.num_regions(op) == 1)
        .filter_map(|op| {
            let name = module.op_attr(ctx, op, "sym_name").and_then(|a| ctx.attr_as_str(a))?;
            let index = name.strip_prefix(&prefix)?;
            (!index.is_empty() && index.bytes().all(|b| b.is_ascii_digit())).then(|| (op, name.to_string()))
        })
        .collect()
}

/// One engine op to be: a float convolution and the relu after it.
#[derive(Copy, Clone)]
struct ConvRelu {
    conv: OpId,
    relu: OpId,
}

/// The conv + relu pairs of `function`'s body, in order; any op other than
/// those, constants and the return is an error at it.
fn conv_relu_pairs(ctx: &Context, module: &Module, function: OpId) -> Result<Vec<ConvRelu>, PassError> {
    let body = module.first_block(module.region(function, 0));
    let mut pairs = Vec::new();
    for op in module.block_ops(body) {
        let name = ctx.op_name_str(module.op_name(op));
        let fits = match name {
            fp_op::CONSTANT | "func.return" => true,
            fp_op::CONV2D => match engine_relu(ctx, module, op) {
                Some(relu) => {
                    pairs.push(ConvRelu { conv: op, relu });
                    true
                }
                None => false,
            },
            fp_op::RELU => pairs.iter().any(|p| p.relu == op),
            _ => false,
        };
        if !fits {
            let message = format!(
                "accel-quantize quantizes regions of fp.conv2d + fp.relu pairs the engine takes \
                 (what partition{{target=accel}} outlines), not '{name}' here"
            );
            return Err(PassError::at_op(ctx, module, op, message));
        }
    }
    Ok(pairs)
}

/// The smallest and largest value seen of each argument and relu result.
type Ranges = FxHashMap<ValueId, (f32, f32)>;

fn widen(ranges: &mut Ranges, value: ValueId, tensor: &Tensor) {
    let Some(values) = tensor.as_f32() else { return };
    for &v in values.iter() {
        let range = ranges.entry(value).or_insert((v, v));
        range.0 = range.0.min(v);
        range.1 = range.1.max(v);
    }
}

/// Runs `function` on each recorded input of the archive, records the
/// ranges, and checks its results against the recorded outputs.
fn observe_ranges(
    ctx: &Context,
    module: &Module,
    function: OpId,
    name: &str,
    pairs: &[ConvRelu],
    archive: &Path,
) -> Result<Ranges, PassError> {
    let body = module.first_block(module.region(function, 0));
    let args = module.block_args(body).to_vec();
    let returned: Vec<ValueId> = module.operands(module.last_op(body)).collect();
    let specs = |side: &str, values: &[ValueId]| -> Result<Vec<ArgSpec>, PassError> {
        values
            .iter()
            .enumerate()
            .map(|(k, &v)| {
                let ty = module.value_type(v);
                let dtype = DType::of_element(ctx, ctx.element_type(ty))?;
                let shape = ctx.tensor_shape(ty).unwrap_or(&[]).iter().map(|&d| d.max(0) as usize).collect();
                Ok(ArgSpec::new(format!("{name}/{side}{k}"), dtype, shape))
            })
            .collect()
    };
    let open = |specs: Vec<ArgSpec>| {
        Dataset::open(archive, &specs).map_err(|e| {
            PassError::from(format!(
                "@{name}: {e} (record the regions' boundaries with collect-calibration-data after partition)"
            ))
        })
    };
    let inputs = open(specs("input", &args)?)?;
    let outputs = open(specs("output", &returned)?)?;
    if inputs.len() != outputs.len() || inputs.is_empty() {
        return Err(format!(
            "@{name}: the archive holds {} recorded input(s) and {} output(s); it needs as many, at least one",
            inputs.len(),
            outputs.len()
        )
        .into());
    }
    let relu_of: FxHashMap<OpId, ValueId> =
        pairs.iter().map(|p| (p.relu, module.result(p.relu, 0))).collect();
    let kernels = KernelRegistry::of_or_standard(ctx).into_owned();
    let mut interpreter = Interpreter::new(ctx, module, &kernels);
    let mut ranges = Ranges::default();
    for entry in 0..inputs.calls() {
        let read = |data: &Dataset| data.read_call(entry).map_err(|e| PassError::from(e.to_string()));
        let (x, recorded) = (read(&inputs)?, read(&outputs)?);
        for (&arg, t) in args.iter().zip(&x) {
            widen(&mut ranges, arg, t);
        }
        let mut observe = |op: OpId, results: &[Tensor]| {
            if let (Some(&value), Some(t)) = (relu_of.get(&op), results.first()) {
                widen(&mut ranges, value, t);
            }
        };
        let y = interpreter.run_with(name, &x, &mut observe).map_err(|e| format!("@{name}: {e}"))?;
        if y != recorded {
            return Err(format!(
                "@{name}: recorded entry {entry} of the archive is not what the region computes from its \
                 recorded inputs; collect the calibration data again for this model"
            )
            .into());
        }
    }
    Ok(ranges)
}

/// i8 per-tensor parameters covering `[lo, hi]` widened to contain 0.
fn activation_params(lo: f32, hi: f32) -> (f64, i64) {
    let (lo, hi) = (f64::from(lo.min(0.0)), f64::from(hi.max(0.0)));
    let scale = if hi > lo { (hi - lo) / 255.0 } else { 1.0 };
    let zero_point = (-128.0 - lo / scale).round().clamp(-128.0, 127.0) as i64;
    (scale, zero_point)
}

fn i8_storage() -> IntType {
    IntType { width: 8, signedness: Signedness::Signless }
}

/// `tensor<shape x !qnn.uniform<i8:f32, ...>>` with `params`.
fn i8_tensor(ctx: &mut Context, shape: &[i64], params: QuantParams, storage_min: i64) -> Type {
    let element = ctx.quant_type(QuantType {
        storage: i8_storage(),
        storage_min,
        storage_max: 127,
        expressed: FloatKind::F32,
        params,
    });
    ctx.tensor_type(shape, element)
}

/// The per-tensor i8 type of float `value` over `range`.
fn activation_type(ctx: &mut Context, module: &Module, value: ValueId, range: (f32, f32)) -> Type {
    let (scale, zero_point) = activation_params(range.0, range.1);
    let shape = ctx.tensor_shape(module.value_type(value)).unwrap_or(&[]).to_vec();
    i8_tensor(ctx, &shape, QuantParams::PerTensor { scale, zero_point }, -128)
}

/// The f32 values of the dense constant defining `value`.
fn constant_values(ctx: &Context, module: &Module, value: ValueId) -> Result<(Vec<i64>, Vec<f32>), String> {
    let def = module.defining_op(value);
    let dense = (def.is_some() && ctx.op_name_str(module.op_name(def)) == fp_op::CONSTANT)
        .then(|| module.op_attr(ctx, def, "value"))
        .flatten()
        .and_then(|a| match ctx.attr_data(a) {
            qopt_ir_core::AttrData::Dense(d) => Some(d),
            _ => None,
        })
        .ok_or("the weights and bias must be fp.constant values")?;
    let tensor = Tensor::from_dense(ctx, dense).map_err(|e| e.to_string())?;
    let values = tensor.as_f32().ok_or("the weights and bias must be f32")?;
    let shape = ctx.tensor_shape(module.value_type(value)).unwrap_or(&[]).to_vec();
    Ok((shape, values.iter().copied().collect()))
}

/// Rewrites `function` into quantize → conv2d_relu ... → dequantize.
fn rewrite(
    ctx: &mut Context,
    module: &mut Module,
    function: OpId,
    name: &str,
    pairs: &[ConvRelu],
    ranges: &Ranges,
) -> Result<(), String> {
    let body = module.first_block(module.region(function, 0));
    let range = |v: ValueId| ranges.get(&v).copied().ok_or("a value the region computes was never seen");
    let mut quantized: FxHashMap<ValueId, ValueId> = FxHashMap::default();
    let first = module.first_op(body);
    for (k, arg) in module.block_args(body).to_vec().into_iter().enumerate() {
        let ty = activation_type(ctx, module, arg, range(arg)?);
        let loc = ctx.name_loc(&format!("{name}.input{k}"));
        let q = create(ctx, module, qnn_op::QUANTIZE, &[arg], ty, None, loc);
        module.insert_op_before(first, q);
        quantized.insert(arg, module.result(q, 0));
    }
    let mut erase = Vec::new();
    for pair in pairs {
        let operands: Vec<ValueId> = module.operands(pair.conv).collect();
        let x = *quantized.get(&operands[0]).ok_or("a convolution reads a value that is not quantized")?;
        let x_scale = activation_params(range(operands[0])?.0, range(operands[0])?.1).0;
        let (w_shape, w) = constant_values(ctx, module, operands[1])?;
        let per_channel = w.len() / w_shape[0].max(1) as usize;
        let mut scales = Vec::with_capacity(w_shape[0] as usize);
        let mut w_q = Vec::with_capacity(w.len());
        for channel in w.chunks(per_channel.max(1)) {
            let max = channel.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = if max > 0.0 { f64::from(max) / 127.0 } else { 1.0 };
            scales.push(scale);
            w_q.extend(channel.iter().map(|&v| (f64::from(v) / scale).round().clamp(-127.0, 127.0) as i128));
        }
        let bias: Vec<f32> = match operands.get(2) {
            Some(&b) => constant_values(ctx, module, b)?.1,
            None => vec![0.0; scales.len()],
        };
        let b_q: Vec<i128> = bias
            .iter()
            .zip(&scales)
            .map(|(&b, &s)| {
                (f64::from(b) / (x_scale * s)).round().clamp(i32::MIN as f64, i32::MAX as f64) as i128
            })
            .collect();
        let loc = ctx.fused_loc(&[module.op_loc(pair.conv), module.op_loc(pair.relu)]);
        let zeros = vec![0i64; scales.len()].into_boxed_slice();
        let params = QuantParams::PerAxis { axis: 0, scales: scales.into_boxed_slice(), zero_points: zeros };
        let w_type = i8_tensor(ctx, &w_shape, params, -127);
        // The quantized weight keeps its float constant's location, so
        // per-layer comparison shows its quantization error; the i32 bias,
        // stored in other units than the float one, does not.
        let w_loc = module.op_loc(module.defining_op(operands[1]));
        let w_value = constant(ctx, module, w_type, &w_q, w_loc)?;
        let i32_type = ctx.common().i32;
        let b_type = ctx.tensor_type(&[b_q.len() as i64], i32_type);
        let b_value = constant(ctx, module, b_type, &b_q, loc)?;
        let relu_out = module.result(pair.relu, 0);
        let out_type = activation_type(ctx, module, relu_out, range(relu_out)?);
        let attrs = engine_attrs(ctx, module.op_attrs(pair.conv));
        let conv =
            create(ctx, module, qnn_op::CONV2D_RELU, &[x, w_value, b_value], out_type, Some(attrs), loc);
        for made in [module.defining_op(w_value), module.defining_op(b_value), conv] {
            module.insert_op_before(pair.relu, made);
        }
        quantized.insert(relu_out, module.result(conv, 0));
        erase.extend([pair.conv, pair.relu]);
    }
    let ret = module.last_op(body);
    for (k, v) in module.operands(ret).collect::<Vec<_>>().into_iter().enumerate() {
        let q = *quantized.get(&v).ok_or("the region returns a value that is not quantized")?;
        let loc = ctx.name_loc(&format!("{name}.output{k}"));
        let ty = module.value_type(v);
        let dq = create(ctx, module, qnn_op::DEQUANTIZE, &[q], ty, None, loc);
        module.insert_op_before(ret, dq);
        module.set_operand(ret, k, module.result(dq, 0));
    }
    let mut constants: Vec<OpId> = Vec::new();
    // Users before what they read: each relu, then its conv, last pair first.
    for op in erase.into_iter().rev() {
        constants.extend(module.operands(op).map(|v| module.defining_op(v)).filter(|d| d.is_some()));
        module.erase_op(op).map_err(|e| format!("cannot erase a float op: {e:?}"))?;
    }
    for op in constants {
        if !module.is_erased(op)
            && !module.op_has_uses(op)
            && ctx.op_name_str(module.op_name(op)) == fp_op::CONSTANT
        {
            module.erase_op(op).map_err(|e| format!("cannot erase a float constant: {e:?}"))?;
        }
    }
    Ok(())
}

/// The float convolution's `stride`, `pad`, `dilation` and `groups`, with the
/// engine's rounding.
fn engine_attrs(ctx: &mut Context, conv_attrs: Attribute) -> Attribute {
    let rounding = ctx.string_attr(ACCEL_ROUNDING.name());
    ctx.dict_set(conv_attrs, "rounding", rounding)
}

/// A detached op `name(operands) -> result` with `attrs` at `loc`.
fn create(
    ctx: &mut Context,
    module: &mut Module,
    name: &str,
    operands: &[ValueId],
    result: Type,
    attrs: Option<Attribute>,
    loc: Location,
) -> OpId {
    let attrs = attrs.unwrap_or_else(|| ctx.dict_attr(&[]));
    let state =
        OperationState::new(ctx.op_name(name)).operands(operands).results(&[result]).attrs(attrs).loc(loc);
    module.create_op(state)
}

/// A detached `fp.constant` of type `ty` holding `values`; returns its result.
fn constant(
    ctx: &mut Context,
    module: &mut Module,
    ty: Type,
    values: &[i128],
    loc: Location,
) -> Result<ValueId, String> {
    let dense = DenseElements::from_i128(ctx, ty, values)?;
    let value = ctx.dense_attr(dense);
    let attrs = ctx.dict_attr(&[("value", value)]);
    let op = create(ctx, module, fp_op::CONSTANT, &[], ty, Some(attrs), loc);
    Ok(module.result(op, 0))
}
