//! `equalize`: cross-layer equalization (Nagel et al. 2019, "Data-Free
//! Quantization", §4.1). It rescales the output channels of one layer and the
//! matching input channels of the next so that both weights have the same
//! per-channel range, which a per-tensor weight quantizer then covers with
//! less error.
//!
//! A pair is two layers of one kind, the first's result used once, by the
//! second's activation operand, either directly or through one `fp.relu`
//! used once:
//!
//! ```text
//! y = layer2(relu(layer1(x, w1, b1)), w2, b2)
//!   = layer2(relu(layer1(x, w1 / s, b1 / s)), w2 · s, b2)   for every s > 0
//! ```
//!
//! because the layers are linear per channel and `relu(x / s) = relu(x) / s`
//! for `s > 0`. `w1 / s` divides output channel `c` (weight axis 0) of the
//! first layer by `s[c]`, and so its bias; `w2 · s` multiplies input channel
//! `c` of the second (weight axis 1 for `fp.conv2d` and `fp.conv1d` with
//! one group and for `fp.dense`; axis 0 for a depthwise convolution, whose
//! `groups` equals its channels and whose output channel `c` reads input
//! channel `c` only). With `r1[c]` the largest magnitude of the first
//! weight's output channel `c` and `r2[c]` that of the second's input
//! channel `c`, `s[c] = sqrt(r1[c] / r2[c])` makes both ranges
//! `sqrt(r1[c] · r2[c])`; a channel with a zero range keeps `s = 1`.
//!
//! Pairs share layers in chains (conv → depthwise → conv): one sweep
//! equalizes every pair in order, and sweeps repeat until every scale of a
//! sweep is within `tolerance` of 1 or `max-iterations` sweeps ran (a warning
//! says so). The weights are scaled in f64 across sweeps and rounded once to
//! their element type at the end, as new `fp.constant`s at the old ones'
//! locations (old ones left without uses are erased).
//!
//! What is not a pair, and what the pass says about it:
//!
//! - a first layer whose result (or relu) has several users (a residual
//!   add, a branch): the scale would reach the other users too; counted in
//!   `skipped-shared-outputs`, silently (every residual block has one);
//! - `fp.clip` between the layers (ReLU6): `min(s·x, 6) ≠ s·min(x, 6)`, so
//!   it is not scale-equivariant; a warning at the clip, counted in
//!   `skipped-clip-pairs`. With `relu6-to-relu=true` a `fp.clip {min = 0}`
//!   between a pair becomes `fp.relu` first (counted in `relu6-to-relu`):
//!   that CHANGES THE MODEL (activations above the clip's max pass), and
//!   `--verify-equiv` reports it as not proven;
//! - a weight or bias that is not a float constant: a warning at the layer;
//! - a second convolution with groups that are neither 1 nor its channels:
//!   a warning at it.
//!
//! Statistics: `equalized-pairs`, `sweeps`, `skipped-clip-pairs`,
//! `skipped-shared-outputs`, `relu6-to-relu`.
//!
//! ```text
//! // w1 = [[1], [4]] (ranges 1, 4), w2 = [[4, 1]] (input ranges 4, 1):
//! // s = sqrt([1 / 4, 4 / 1]) = [0.5, 2], so w1 / s = [[2], [2]], w2 · s = [[2, 2]]
//! %h = fp.dense(%x, %w1) ...   %r = fp.relu(%h) ...   %y = fp.dense(%r, %w2) ...
//! ```

use crate::layer_pairs::{follow, read_constant, second_input_axis, Follow, Names};
use qopt_dialect_fp::constants::{create_constant, dense, erase_if_unused_constant};
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    BadOptionValue, Context, FxHashMap, InsertPoint, Module, OpId, Pass, PassContext, PassError, PassOutcome,
    Rewriter, ValueId,
};

/// The `equalize` pass; see the module docs.
pub struct Equalize;

/// The largest `max-iterations` accepted.
const MAX_SWEEPS: i64 = 1_000_000;

// Without `relu6-to-relu`, the rescaled weights are the old ones times
// positive scales, computed in f64 and rounded once.
const INFO: PassInfo = PassInfo::real_rewrite(
    "equalize",
    "Cross-layer equalization: rescales consecutive conv/dense layers so their per-channel weight ranges match",
    "Cross-layer equalization (Nagel et al. 2019, Data-Free Quantization): for each pair \
     `layer1 → [fp.relu →] layer2` of `fp.conv2d`, `fp.conv1d` (layer2 with one group, or depthwise) or \
     `fp.dense` layers with constant weights, where layer1's result (and the relu's) has one user, divides \
     output channel c of layer1 (weight and bias) by `s[c] = sqrt(r1[c] / r2[c])` and multiplies input \
     channel c of layer2 by it (`r1`, `r2`: the channel's largest weight magnitude in each; 1 where either \
     is 0), so both ranges become `sqrt(r1·r2)`; `relu(x / s) = relu(x) / s` for `s > 0` keeps the model. \
     Chains are swept until every scale is within `tolerance` of 1. `fp.clip` (ReLU6) between layers is \
     not scale-equivariant: such pairs are skipped with a warning, unless `relu6-to-relu=true` turns the \
     clip into a relu, which changes the model. Run it after `fold-bn`, before `insert-observers`. \
     Statistics: `equalized-pairs`, `sweeps`, `skipped-clip-pairs`, `skipped-shared-outputs`, \
     `relu6-to-relu`.\n\n\
     ```\n\
     %h = fp.conv2d(%x, %w1, %b1) ...; %r = fp.relu(%h) ...; %y = fp.conv2d(%r, %w2, %b2) ...\n\
     // -> %w1' = %w1 / s (axis 0), %b1' = %b1 / s, %w2' = %w2 · s (axis 1)\n\
     ```",
);

impl Pass for Equalize {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![
            OptionSpec::new("relu6-to-relu", OptionKind::Bool, "false").help(
                "CHANGES THE MODEL: turn an fp.clip {min = 0} between two layers into fp.relu so the pair is \
                 equalized",
            ),
            OptionSpec::new("max-iterations", OptionKind::Int, "100")
                .help("most sweeps over the pairs, at least 1"),
            OptionSpec::new("tolerance", OptionKind::Float, "1e-6")
                .help("stop when every scale of a sweep is within this of 1, > 0"),
        ]
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        let sweeps = options.int("max-iterations");
        if !(1..=MAX_SWEEPS).contains(&sweeps) {
            let message = format!("'max-iterations' must be between 1 and {MAX_SWEEPS}, got {sweeps}");
            return Err(BadOptionValue::new("max-iterations", message));
        }
        let tolerance = options.float("tolerance");
        if !(tolerance > 0.0 && tolerance.is_finite()) {
            let message = format!("'tolerance' must be a finite number > 0, got {tolerance}");
            return Err(BadOptionValue::new("tolerance", message));
        }
        Ok(())
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        self.check_options(options).map_err(|e| PassError::from(e.message))?;
        let relu6_to_relu = options.bool("relu6-to-relu");
        let max_sweeps = options.int("max-iterations") as usize;
        let tolerance = options.float("tolerance");
        let names = Names::new(cx.ctx);
        let found = find_pairs(cx, module, &names, relu6_to_relu);
        cx.add_stat("skipped-clip-pairs", found.clip_pairs);
        cx.add_stat("skipped-shared-outputs", found.shared_outputs);
        let mut relu6_rewritten = 0u64;
        for &clip in &found.clips_to_rewrite {
            replace_clip_by_relu(cx.ctx, module, clip)
                .map_err(|e| PassError::from(format!("equalize: {e}")))?;
            relu6_rewritten += 1;
        }
        cx.add_stat("relu6-to-relu", relu6_rewritten);
        let Pairs { mut layers, pairs, .. } = found;
        let (sweeps, largest_change) = equalize_pairs(&mut layers, &pairs, max_sweeps, tolerance);
        if largest_change > tolerance {
            if let Some(first) = pairs.first() {
                let op = layers[first.first].op;
                cx.warn_at(
                    module,
                    op,
                    format!(
                        "equalize: stopped after {sweeps} sweeps with a scale {largest_change:e} away from 1 \
                         (tolerance {tolerance:e}); raise max-iterations to go on"
                    ),
                );
            }
        }
        cx.add_stat("sweeps", sweeps as u64);
        cx.add_stat("equalized-pairs", pairs.len() as u64);
        for layer in &layers {
            write_back(cx.ctx, module, layer).map_err(|e| PassError::from(format!("equalize: {e}")))?;
        }
        Ok(PassOutcome::from_changed(!pairs.is_empty() || relu6_rewritten > 0))
    }
}

/// A layer taking part in a pair, with its weight (and bias) in f64 as the
/// sweeps leave them.
struct Layer {
    op: OpId,
    weight_shape: Vec<usize>,
    weight: Vec<f64>,
    bias: Option<Vec<f64>>,
    /// Whether a sweep changed it.
    changed: bool,
}

/// Two layers to equalize, by index into the layers.
#[derive(Clone, Copy, Debug)]
struct Pair {
    first: usize,
    second: usize,
    /// The second layer's weight axis that holds its input channels.
    input_axis: usize,
}

/// The pairs found, the layers they use, and what was skipped.
struct Pairs {
    layers: Vec<Layer>,
    pairs: Vec<Pair>,
    clips_to_rewrite: Vec<OpId>,
    clip_pairs: u64,
    shared_outputs: u64,
}

/// Finds the pairs in every block, in op order, warning about those that
/// cannot be equalized.
fn find_pairs(cx: &mut PassContext<'_>, module: &Module, names: &Names, relu6_to_relu: bool) -> Pairs {
    let mut found = Pairs {
        layers: Vec::new(),
        pairs: Vec::new(),
        clips_to_rewrite: Vec::new(),
        clip_pairs: 0,
        shared_outputs: 0,
    };
    let mut index: FxHashMap<OpId, usize> = FxHashMap::default();
    let layers: Vec<OpId> = module.ops_where(|op| names.is_layer(module, op));
    for first in layers {
        if module.num_results(first) != 1 {
            continue;
        }
        let out = module.result(first, 0);
        let (second, between) = match follow(module, names, out) {
            Follow::Layer(second, between) => (second, between),
            Follow::Shared => {
                found.shared_outputs += 1;
                continue;
            }
            Follow::Nothing => continue,
        };
        if module.op_name(second) != module.op_name(first) {
            continue;
        }
        let mut clip_to_rewrite = None;
        if let Some(clip) = between.filter(|&b| module.op_name(b) == names.clip) {
            let min = module.op_attr(cx.ctx, clip, "min").and_then(|a| cx.ctx.attr_as_f64(a));
            if relu6_to_relu && min == Some(0.0) {
                clip_to_rewrite = Some(clip);
            } else {
                found.clip_pairs += 1;
                cx.warn_at(
                    module,
                    clip,
                    "equalize: pair skipped: fp.clip is not scale-equivariant (min(s·x, max) ≠ s·min(x, max) for \
                     s ≠ 1); relu6-to-relu=true would turn it into fp.relu, changing the model",
                );
                continue;
            }
        }
        let input_axis = match second_input_axis(cx.ctx, module, second) {
            Ok(axis) => axis,
            Err(reason) => {
                cx.warn_at(module, second, format!("equalize: pair skipped: {reason}"));
                continue;
            }
        };
        let mut ids = [0usize; 2];
        let mut readable = true;
        for (slot, op) in [first, second].into_iter().enumerate() {
            if let Some(&i) = index.get(&op) {
                ids[slot] = i;
                continue;
            }
            match read_layer(cx.ctx, module, op) {
                Ok(layer) => {
                    index.insert(op, found.layers.len());
                    ids[slot] = found.layers.len();
                    found.layers.push(layer);
                }
                Err(reason) => {
                    cx.warn_at(module, op, format!("equalize: pair skipped: {reason}"));
                    readable = false;
                    break;
                }
            }
        }
        if !readable {
            continue;
        }
        let channels = found.layers[ids[0]].weight_shape[0];
        if found.layers[ids[1]].weight_shape.get(input_axis) != Some(&channels) {
            cx.warn_at(
                module,
                second,
                format!("equalize: pair skipped: its weight does not have {channels} input channels"),
            );
            continue;
        }
        found.clips_to_rewrite.extend(clip_to_rewrite);
        found.pairs.push(Pair { first: ids[0], second: ids[1], input_axis });
    }
    found
}

/// Reads `op`'s constant float weight and bias.
fn read_layer(ctx: &Context, module: &Module, op: OpId) -> Result<Layer, String> {
    let name = ctx.op_name_str(module.op_name(op));
    let operands = module.num_operands(op);
    if !(2..=3).contains(&operands) {
        return Err(format!("{name} does not have 2 or 3 operands"));
    }
    let (weight_shape, weight) = read_constant(ctx, module, module.operand(op, 1))
        .ok_or_else(|| format!("the weight of {name} is not a float constant of static shape"))?;
    if weight_shape.len() < 2 || weight_shape.contains(&0) {
        return Err(format!("the weight of {name} is empty or has rank below 2"));
    }
    if weight.iter().any(|w| !w.is_finite()) {
        return Err(format!("the weight of {name} is not finite"));
    }
    let bias = if operands == 3 {
        let (_, values) = read_constant(ctx, module, module.operand(op, 2))
            .ok_or_else(|| format!("the bias of {name} is not a float constant"))?;
        if values.len() != weight_shape[0] {
            return Err(format!("the bias of {name} does not have {} elements", weight_shape[0]));
        }
        Some(values)
    } else {
        None
    };
    Ok(Layer { op, weight_shape, weight, bias, changed: false })
}

/// The largest magnitude of each index of `axis` in a C-order tensor.
pub(crate) fn channel_ranges(values: &[f64], shape: &[usize], axis: usize) -> Vec<f64> {
    let channels = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let mut ranges = vec![0.0f64; channels];
    for (i, v) in values.iter().enumerate() {
        let c = (i / inner) % channels;
        ranges[c] = ranges[c].max(v.abs());
    }
    ranges
}

/// Multiplies index `c` of `axis` by `scales[c]`.
fn scale_channels(values: &mut [f64], shape: &[usize], axis: usize, scales: &[f64]) {
    let channels = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    for (i, v) in values.iter_mut().enumerate() {
        *v *= scales[(i / inner) % channels];
    }
}

/// The DFQ scales of one pair: `sqrt(r1 / r2)` per channel, 1 where either
/// range is 0 (or the ratio is not finite).
pub(crate) fn pair_scales(r1: &[f64], r2: &[f64]) -> Vec<f64> {
    r1.iter()
        .zip(r2)
        .map(|(&a, &b)| {
            let s = (a / b).sqrt();
            if a > 0.0 && b > 0.0 && s.is_finite() && s > 0.0 {
                s
            } else {
                1.0
            }
        })
        .collect()
}

/// Sweeps over `pairs` until every scale is within `tolerance` of 1 or
/// `max_sweeps` ran; returns the sweeps run and the last sweep's largest
/// `|s - 1|`.
fn equalize_pairs(layers: &mut [Layer], pairs: &[Pair], max_sweeps: usize, tolerance: f64) -> (usize, f64) {
    let mut largest = 0.0f64;
    if pairs.is_empty() {
        return (0, largest);
    }
    for sweep in 1..=max_sweeps {
        largest = 0.0;
        for pair in pairs {
            let first = &layers[pair.first];
            let r1 = channel_ranges(&first.weight, &first.weight_shape, 0);
            let second = &layers[pair.second];
            let r2 = channel_ranges(&second.weight, &second.weight_shape, pair.input_axis);
            let scales = pair_scales(&r1, &r2);
            if scales.iter().all(|&s| s == 1.0) {
                continue;
            }
            largest = scales.iter().fold(largest, |m, s| m.max((s - 1.0).abs()));
            let inverse: Vec<f64> = scales.iter().map(|s| 1.0 / s).collect();
            let first = &mut layers[pair.first];
            let shape = first.weight_shape.clone();
            scale_channels(&mut first.weight, &shape, 0, &inverse);
            if let Some(bias) = &mut first.bias {
                bias.iter_mut().zip(&inverse).for_each(|(b, s)| *b *= s);
            }
            first.changed = true;
            let second = &mut layers[pair.second];
            let shape = second.weight_shape.clone();
            scale_channels(&mut second.weight, &shape, pair.input_axis, &scales);
            second.changed = true;
        }
        if largest <= tolerance {
            return (sweep, largest);
        }
    }
    (max_sweeps, largest)
}

/// Replaces a changed layer's weight (and bias) operands by new constants.
fn write_back(ctx: &mut Context, module: &mut Module, layer: &Layer) -> Result<(), String> {
    if !layer.changed {
        return Ok(());
    }
    let mut replaced: Vec<(usize, ValueId, Vec<f64>)> =
        vec![(1, module.operand(layer.op, 1), layer.weight.clone())];
    if let Some(bias) = &layer.bias {
        replaced.push((2, module.operand(layer.op, 2), bias.clone()));
    }
    for (index, old, values) in replaced {
        let ty = module.value_type(old);
        let value = dense(ctx, ty, &values)?;
        let def = module.defining_op(old);
        let loc = if def.is_none() { module.op_loc(layer.op) } else { module.op_loc(def) };
        let mut rewriter = Rewriter::new(ctx, module);
        rewriter.set_insertion_point(InsertPoint::Before(layer.op));
        rewriter.set_loc(loc);
        let new = create_constant(&mut rewriter, value)?;
        rewriter.set_operand(layer.op, index, new);
        erase_if_unused_constant(ctx, module, old);
    }
    Ok(())
}

/// Replaces the `fp.clip` `clip` by an `fp.relu` of its operand, at its location.
fn replace_clip_by_relu(ctx: &mut Context, module: &mut Module, clip: OpId) -> Result<(), String> {
    let (input, old) = (module.operand(clip, 0), module.result(clip, 0));
    let loc = module.op_loc(clip);
    let attrs = ctx.dict_attr(&[]);
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(clip));
    rewriter.set_loc(loc);
    let relu = rewriter.create_inferred(fp_op::RELU, &[input], attrs)?;
    let new = rewriter.module.result(relu, 0);
    rewriter.replace_all_uses(old, new);
    rewriter.erase_op(clip).map_err(|e| format!("{e:?}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{channel_ranges, equalize_pairs, pair_scales, Layer, Pair};
    use crate::test_ir::{registry, test_context, TestIr};
    use qopt_interp::{Interpreter, KernelRegistry, Tensor};
    use qopt_ir_core::{parse_module, OpId};

    /// Deterministic values in [-1, 1) scaled per channel of axis 0 by
    /// factors spanning three orders of magnitude, so ranges differ.
    fn weights(shape: &[usize], seed: u64) -> Vec<f64> {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let per_channel: usize = shape[1..].iter().product();
        (0..shape.iter().product::<usize>())
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let unit = ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0;
                let channel = i / per_channel;
                unit * 10f64.powf(((channel * 7 + seed as usize) % 4) as f64 - 1.5)
            })
            .collect()
    }

    /// `values` of `shape` as `.qir` dense text, nested by dimension (built
    /// from the innermost dimension out, without recursion).
    fn nested(values: &[f64], shape: &[usize]) -> String {
        let mut items: Vec<String> = values.iter().map(|v| format!("{:?}", *v as f32)).collect();
        for &d in shape.iter().rev() {
            items = items.chunks(d).map(|c| format!("[{}]", c.join(", "))).collect();
        }
        items.remove(0)
    }

    fn layer(shape: &[usize], seed: u64) -> Layer {
        Layer {
            op: OpId::NONE,
            weight_shape: shape.to_vec(),
            weight: weights(shape, seed),
            bias: Some(vec![0.5; shape[0]]),
            changed: false,
        }
    }

    #[test]
    fn pair_scales_meet_at_the_geometric_mean_and_keep_zero_channels() {
        let s = pair_scales(&[1.0, 4.0, 0.0, 2.0, 9.0], &[4.0, 1.0, 3.0, 0.0, 1.0]);
        assert_eq!(s, [0.5, 2.0, 1.0, 1.0, 3.0]);
        // r1 / s and r2 · s are both sqrt(r1 · r2).
        assert_eq!(9.0 / s[4], 3.0);
        assert_eq!(channel_ranges(&[1.0, -3.0, 0.5, 0.25, 0.0, -0.0], &[3, 2], 0), [3.0, 0.5, 0.0]);
        assert_eq!(channel_ranges(&[1.0, -3.0, 0.5, 0.25, 0.0, -0.0], &[3, 2], 1), [1.0, 3.0]);
    }

    /// conv (8 out) → depthwise (8) → conv (5 out of 8 in): after the sweeps
    /// every pair's ranges agree (to the tolerance), and the all-zero channel
    /// stays zero (its scale is 1, nothing divides by 0).
    #[test]
    fn sweeps_make_every_pairs_ranges_equal() {
        let mut layers = vec![layer(&[8, 3, 3, 3], 1), layer(&[8, 1, 3, 3], 2), layer(&[5, 8, 1, 1], 3)];
        // Channel 3 of the first conv is all zero.
        let inner = 27;
        layers[0].weight[3 * inner..4 * inner].iter_mut().for_each(|w| *w = 0.0);
        let pairs =
            [Pair { first: 0, second: 1, input_axis: 0 }, Pair { first: 1, second: 2, input_axis: 1 }];
        let ranges = |layers: &[Layer], p: &Pair| {
            let (a, b) = (&layers[p.first], &layers[p.second]);
            (
                channel_ranges(&a.weight, &a.weight_shape, 0),
                channel_ranges(&b.weight, &b.weight_shape, p.input_axis),
            )
        };
        let (sweeps, change) = equalize_pairs(&mut layers, &pairs, 1000, 1e-9);
        assert!(sweeps > 1 && change <= 1e-9, "{sweeps} sweeps, {change}");
        for p in &pairs {
            let (r1, r2) = ranges(&layers, p);
            for (c, (a, b)) in r1.iter().zip(&r2).enumerate() {
                if *a == 0.0 {
                    continue;
                }
                assert!((a - b).abs() <= 1e-7 * a.max(*b), "pair {p:?} channel {c}: {a} vs {b}");
            }
        }
        assert_eq!(channel_ranges(&layers[0].weight, &[8, 27], 0)[3], 0.0);
    }

    /// Runs `equalize` on `text` and returns the new module's text and stats.
    fn equalized(text: &str) -> (String, u64) {
        let mut ctx = test_context();
        qopt_dialect_fp::register(&mut ctx).unwrap();
        let module = parse_module(&mut ctx, text.as_bytes(), "input.qir").unwrap();
        let out = TestIr { ctx, module }.run(&registry(), "equalize").unwrap();
        let pairs = out.stat("equalized-pairs");
        (out.ir, pairs)
    }

    fn run(text: &str, x: &Tensor) -> Vec<f64> {
        let mut ctx = test_context();
        qopt_dialect_fp::register(&mut ctx).unwrap();
        let module = parse_module(&mut ctx, text.as_bytes(), "input.qir").unwrap();
        let kernels = KernelRegistry::standard();
        let mut interp = Interpreter::new(&ctx, &module, &kernels);
        interp.run("f", std::slice::from_ref(x)).unwrap().remove(0).to_f64_vec()
    }

    /// A conv → relu → depthwise (padded) → relu → conv chain with biases and
    /// channel ranges three orders of magnitude apart, run by the interpreter
    /// before and after on a pseudo-random input: the outputs agree to float
    /// rounding, while the weights did change.
    #[test]
    fn the_equalized_model_computes_what_the_original_did() {
        let (w1, wd, w3) = (weights(&[6, 2, 3, 3], 4), weights(&[6, 1, 3, 3], 5), weights(&[4, 6, 1, 1], 6));
        let b = |n: usize, seed: u64| weights(&[n, 1], seed);
        let text = format!(
            r#"func.func @f(%x: tensor<1x2x6x6xf32>) -> tensor<1x4x4x4xf32> {{
  %w1 = fp.constant() {{value = dense<{}> : tensor<6x2x3x3xf32>}} : () -> tensor<6x2x3x3xf32>
  %b1 = fp.constant() {{value = dense<{}> : tensor<6xf32>}} : () -> tensor<6xf32>
  %wd = fp.constant() {{value = dense<{}> : tensor<6x1x3x3xf32>}} : () -> tensor<6x1x3x3xf32>
  %bd = fp.constant() {{value = dense<{}> : tensor<6xf32>}} : () -> tensor<6xf32>
  %w3 = fp.constant() {{value = dense<{}> : tensor<4x6x1x1xf32>}} : () -> tensor<4x6x1x1xf32>
  %h1 = fp.conv2d(%x, %w1, %b1) : (tensor<1x2x6x6xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x4x4xf32>
  %r1 = fp.relu(%h1) : (tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  %h2 = fp.conv2d(%r1, %wd, %bd) {{groups = 6, pad = [1, 1, 1, 1]}} : (tensor<1x6x4x4xf32>, tensor<6x1x3x3xf32>, tensor<6xf32>) -> tensor<1x6x4x4xf32>
  %r2 = fp.relu(%h2) : (tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  %y = fp.conv2d(%r2, %w3) : (tensor<1x6x4x4xf32>, tensor<4x6x1x1xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}}
"#,
            nested(&w1, &[6, 2, 3, 3]),
            nested(&b(6, 7).iter().map(|v| v * 0.1).collect::<Vec<_>>(), &[6]),
            nested(&wd, &[6, 1, 3, 3]),
            nested(&b(6, 8).iter().map(|v| v * 0.1).collect::<Vec<_>>(), &[6]),
            nested(&w3, &[4, 6, 1, 1]),
        );
        let (after, pairs) = equalized(&text);
        assert_eq!(pairs, 2);
        assert_ne!(after, text);
        let x = Tensor::from_f32(&[1, 2, 6, 6], weights(&[1, 72], 9).iter().map(|&v| v as f32).collect())
            .unwrap();
        let (before, after) = (run(&text, &x), run(&after, &x));
        let scale = before.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(scale > 0.0);
        let worst = before.iter().zip(&after).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst <= 1e-5 * scale, "worst difference {worst} at output scale {scale}");
    }
}
