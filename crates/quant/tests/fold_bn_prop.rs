//! Property test of `fold-bn`: a random `fp.conv2d` (shapes, stride, padding,
//! dilation, groups including depthwise, with or without a bias), `fp.conv1d` or
//! `fp.dense` followed by an `fp.batch_norm` with random parameters (var ≥ 0),
//! or by an `fp.hard_sigmoid` with random `alpha > 0` and `beta` (folded into
//! the layer, an `fp.clip(0, 1)` left), computes the same, up to f32 rounding,
//! before and after the pass, and the batch norm or hard sigmoid is gone after it.
//!
//! Each case is built as `.qir` text with its constants as hex blobs (exact f32
//! bits), parsed twice into one context with the `fp` and `qnn` dialects, one
//! copy run through `fold-bn` (verified after the pass), and both run through
//! the interpreter on the same random input. Outputs must agree to
//! `|a - b| ≤ 1e-5 · max(1, max |reference|)`.

// Only the random generator is used here.
mod common;

use proptest::prelude::*;
use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::SplitMix64;
use qopt_ir_core::{module_to_string, parse_module, verify, Context};
use qopt_quant::passes::FoldBn;
use std::fmt::Write as _;
use std::sync::Arc;

/// Relative tolerance of the comparison.
const TOLERANCE: f32 = 1e-5;

/// Variances: ≥ 0, exactly 0 about one time in eight.
fn variances(rng: &mut SplitMix64, n: usize) -> Vec<f32> {
    (0..n).map(|_| if rng.next_u64().is_multiple_of(8) { 0.0 } else { rng.uniform_f32(0.0, 2.0) }).collect()
}

/// `tensor<2x3xf32>`.
fn tensor_type(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("tensor<{}xf32>", dims.join("x"))
}

/// `%name = fp.constant() {value = dense<"0x..."> : T} : () -> T`, exact bits.
fn constant(text: &mut String, name: &str, shape: &[usize], values: &[f32]) {
    let ty = tensor_type(shape);
    let mut hex = String::with_capacity(values.len() * 8);
    for v in values {
        for byte in v.to_le_bytes() {
            let _ = write!(hex, "{byte:02X}");
        }
    }
    let _ = writeln!(text, "  %{name} = fp.constant() {{value = dense<\"0x{hex}\"> : {ty}}} : () -> {ty}");
}

/// The layer before the batch norm.
#[derive(Clone, Debug)]
enum Layer {
    /// `fp.conv2d` (`spatial.len() == 2`) or `fp.conv1d` (`== 1`).
    Conv {
        batch: usize,
        groups: usize,
        in_per_group: usize,
        out_per_group: usize,
        kernel: Vec<usize>,
        stride: Vec<usize>,
        dilation: Vec<usize>,
        /// Every begin padding, then every end padding.
        pad: Vec<usize>,
        spatial: Vec<usize>,
    },
    /// `fp.dense`, `x` is batch×K.
    Dense { batch: usize, features: usize, outputs: usize },
}

/// What follows the layer.
#[derive(Clone, Debug)]
enum Tail {
    /// `fp.batch_norm` with this epsilon (None: the default).
    BatchNorm(Option<f32>),
    /// `fp.hard_sigmoid {alpha, beta}`.
    HardSigmoid(f32, f32),
}

/// One case: the layer, its bias, what follows it and the seed of every value.
#[derive(Clone, Debug)]
struct Case {
    layer: Layer,
    bias: bool,
    tail: Tail,
    seed: u64,
}

impl Case {
    /// Input shape, weight shape, output channels, output shape.
    fn shapes(&self) -> (Vec<usize>, Vec<usize>, usize, Vec<usize>) {
        match &self.layer {
            Layer::Conv {
                batch,
                groups,
                in_per_group,
                out_per_group,
                kernel,
                stride,
                dilation,
                pad,
                spatial,
            } => {
                let n = spatial.len();
                let (c, o) = (groups * in_per_group, groups * out_per_group);
                let mut x = vec![*batch, c];
                x.extend(spatial);
                let mut w = vec![o, *in_per_group];
                w.extend(kernel);
                let mut y = vec![*batch, o];
                for i in 0..n {
                    let span = dilation[i] * (kernel[i] - 1) + 1;
                    y.push((spatial[i] + pad[i] + pad[n + i] - span) / stride[i] + 1);
                }
                (x, w, o, y)
            }
            Layer::Dense { batch, features, outputs } => {
                (vec![*batch, *features], vec![*outputs, *features], *outputs, vec![*batch, *outputs])
            }
        }
    }

    /// The `.qir` text of `@main` and its input.
    fn build(&self) -> (String, Vec<usize>, Vec<f32>) {
        let mut rng = SplitMix64::new(self.seed);
        let (x_shape, w_shape, channels, y_shape) = self.shapes();
        let mut text =
            format!("func.func @main(%x: {}) -> {} {{\n", tensor_type(&x_shape), tensor_type(&y_shape));
        let w: Vec<f32> = rng.vec_f32(w_shape.iter().product(), -1.0, 1.0);
        constant(&mut text, "w", &w_shape, &w);
        let mut operands = vec!["%x", "%w"];
        let mut types = vec![tensor_type(&x_shape), tensor_type(&w_shape)];
        if self.bias {
            constant(&mut text, "b", &[channels], &rng.vec_f32(channels, -1.0, 1.0));
            operands.push("%b");
            types.push(tensor_type(&[channels]));
        }
        if let Tail::BatchNorm(_) = self.tail {
            constant(&mut text, "scale", &[channels], &rng.vec_f32(channels, -2.0, 2.0));
            constant(&mut text, "beta", &[channels], &rng.vec_f32(channels, -1.0, 1.0));
            constant(&mut text, "mean", &[channels], &rng.vec_f32(channels, -1.0, 1.0));
            constant(&mut text, "var", &[channels], &variances(&mut rng, channels));
        }
        let (name, attrs) = match &self.layer {
            Layer::Conv { groups, stride, dilation, pad, spatial, .. } => {
                let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
                let name = if spatial.len() == 2 { "fp.conv2d" } else { "fp.conv1d" };
                (
                    name,
                    format!(
                        " {{dilation = [{}], groups = {groups}, pad = [{}], stride = [{}]}}",
                        list(dilation),
                        list(pad),
                        list(stride)
                    ),
                )
            }
            Layer::Dense { .. } => ("fp.dense", String::new()),
        };
        let y_ty = tensor_type(&y_shape);
        let _ = writeln!(
            text,
            "  %y = {name}({}){attrs} : ({}) -> {y_ty}",
            operands.join(", "),
            types.join(", ")
        );
        let c_ty = tensor_type(&[channels]);
        match self.tail {
            Tail::BatchNorm(epsilon) => {
                let epsilon = epsilon.map_or(String::new(), |e| format!(" {{epsilon = {e:e} : f32}}"));
                let _ = writeln!(
                    text,
                    "  %z = fp.batch_norm(%y, %scale, %beta, %mean, %var){epsilon} : ({y_ty}, {c_ty}, {c_ty}, {c_ty}, {c_ty}) -> {y_ty}"
                );
            }
            Tail::HardSigmoid(alpha, beta) => {
                let _ = writeln!(
                    text,
                    "  %z = fp.hard_sigmoid(%y) {{alpha = {alpha:e} : f32, beta = {beta:e} : f32}} : ({y_ty}) -> {y_ty}"
                );
            }
        }
        let _ = writeln!(text, "  func.return %z : {y_ty}\n}}");
        let input = rng.vec_f32(x_shape.iter().product(), -1.0, 1.0);
        (text, x_shape, input)
    }
}

/// Builds, folds, runs and compares one case.
fn check(case: &Case) -> Result<(), TestCaseError> {
    let (text, x_shape, input) = case.build();
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).map_err(TestCaseError::fail)?;
    qopt_dialect_qnn::register(&mut ctx).map_err(TestCaseError::fail)?;
    let parse = |ctx: &mut Context| {
        parse_module(ctx, text.as_bytes(), "case.qir")
            .map_err(|d| TestCaseError::fail(format!("{d:?}\n{text}")))
    };
    let reference = parse(&mut ctx)?;
    let mut folded = parse(&mut ctx)?;
    verify(&mut ctx, &reference).map_err(|d| TestCaseError::fail(format!("{d:?}\n{text}")))?;

    let mut registry = PassRegistry::new();
    registry.register(Arc::new(FoldBn)).map_err(TestCaseError::fail)?;
    let manager =
        PassManager::parse(&registry, "fold-bn").map_err(|e| TestCaseError::fail(e.render("fold-bn")))?;
    let mut inst = Instrumentation { statistics: true, reproducer_dir: None, ..Instrumentation::default() };
    let report = manager
        .run(&mut ctx, &mut folded, &mut inst)
        .map_err(|f| TestCaseError::fail(format!("{}\n{text}", f.message())))?;
    verify(&mut ctx, &folded).map_err(|d| TestCaseError::fail(format!("{d:?}")))?;
    let printed = module_to_string(&ctx, &folded);
    let (tail, stat) = match case.tail {
        Tail::BatchNorm(_) => ("fp.batch_norm", "folded-batch-norms"),
        Tail::HardSigmoid(..) => ("fp.hard_sigmoid", "folded-hard-sigmoids"),
    };
    prop_assert!(!printed.contains(tail), "the {tail} is still there:\n{printed}");
    if let Tail::HardSigmoid(..) = case.tail {
        prop_assert!(printed.contains("fp.clip"), "no clip is left:\n{printed}");
    }
    let stats: Vec<(&str, u64)> = report.statistics.into_iter().flat_map(|(_, counters)| counters).collect();
    prop_assert!(stats.contains(&(stat, 1)), "statistics {stats:?}");

    let kernels = KernelRegistry::standard();
    let inputs = [Tensor::from_f32(&x_shape, input).map_err(|e| TestCaseError::fail(format!("{e:?}")))?];
    let run = |module| {
        run_function(&ctx, module, "main", &inputs, &kernels)
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))
    };
    let want = run(&reference)?;
    let got = run(&folded)?;
    prop_assert_eq!(want.len(), 1);
    prop_assert_eq!(got.len(), 1);
    let (want, got) = match (want[0].as_f32(), got[0].as_f32()) {
        (Some(w), Some(g)) => (w.clone(), g.clone()),
        _ => return Err(TestCaseError::fail("the outputs are not f32 tensors")),
    };
    prop_assert_eq!(want.shape(), got.shape());
    let bound = TOLERANCE * want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    for (i, (a, b)) in want.iter().zip(got.iter()).enumerate() {
        prop_assert!(
            (a - b).abs() <= bound,
            "element {i}: reference {a}, folded {b} (bound {bound})\n{text}\n{printed}"
        );
    }
    Ok(())
}

/// Random conv2d and conv1d layers: groups 1..=3 with 1..=3 channels in and out
/// per group, or depthwise (1 input channel per group, 1..=4 groups).
fn conv_layer(spatial_dims: usize) -> impl Strategy<Value = Layer> {
    let dims = proptest::collection::vec(
        (1usize..=3, 1usize..=2, 1usize..=2, 0usize..=2, 0usize..=2, 0usize..=3),
        spatial_dims,
    );
    (1usize..=2, any::<bool>(), 1usize..=4, 1usize..=3, 1usize..=3, dims).prop_map(
        move |(batch, depthwise, groups, in_per_group, out_per_group, dims)| {
            let (groups, in_per_group) = if depthwise { (groups, 1) } else { (groups.min(3), in_per_group) };
            let n = dims.len();
            let mut layer_pad = vec![0; 2 * n];
            let (mut kernel, mut stride, mut dilation, mut spatial) = (vec![], vec![], vec![], vec![]);
            for (i, &(k, s, d, begin, end, extra)) in dims.iter().enumerate() {
                let span = d * (k - 1) + 1;
                layer_pad[i] = begin;
                layer_pad[n + i] = end;
                kernel.push(k);
                stride.push(s);
                dilation.push(d);
                spatial.push(span.saturating_sub(begin + end).max(1) + extra);
            }
            Layer::Conv {
                batch,
                groups,
                in_per_group,
                out_per_group,
                kernel,
                stride,
                dilation,
                pad: layer_pad,
                spatial,
            }
        },
    )
}

fn dense_layer() -> impl Strategy<Value = Layer> {
    (1usize..=4, 1usize..=8, 1usize..=6).prop_map(|(batch, features, outputs)| Layer::Dense {
        batch,
        features,
        outputs,
    })
}

fn case(layer: impl Strategy<Value = Layer>) -> impl Strategy<Value = Case> {
    let epsilon = prop_oneof![Just(None), Just(Some(1e-3f32)), Just(Some(0.5f32))];
    (layer, any::<bool>(), epsilon, any::<u64>()).prop_map(|(layer, bias, epsilon, seed)| Case {
        layer,
        bias,
        tail: Tail::BatchNorm(epsilon),
        seed,
    })
}

/// A layer followed by a hard sigmoid: `alpha` in (0, 2] (PyTorch's 1/6 and
/// ONNX's default 0.2 among them), `beta` in [-1, 1].
fn hard_sigmoid_case(layer: impl Strategy<Value = Layer>) -> impl Strategy<Value = Case> {
    let alpha = prop_oneof![Just(1.0f32 / 6.0), Just(0.2f32), 0.01f32..=2.0];
    let beta = prop_oneof![Just(0.5f32), -1.0f32..=1.0];
    (layer, any::<bool>(), alpha, beta, any::<u64>()).prop_map(|(layer, bias, alpha, beta, seed)| Case {
        layer,
        bias,
        tail: Tail::HardSigmoid(alpha, beta),
        seed,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn conv2d_then_batch_norm(case in case(conv_layer(2))) {
        check(&case)?;
    }

    #[test]
    fn conv1d_then_batch_norm(case in case(conv_layer(1))) {
        check(&case)?;
    }

    #[test]
    fn dense_then_batch_norm(case in case(dense_layer())) {
        check(&case)?;
    }

    #[test]
    fn conv2d_then_hard_sigmoid(case in hard_sigmoid_case(conv_layer(2))) {
        check(&case)?;
    }

    #[test]
    fn conv1d_then_hard_sigmoid(case in hard_sigmoid_case(conv_layer(1))) {
        check(&case)?;
    }

    #[test]
    fn dense_then_hard_sigmoid(case in hard_sigmoid_case(dense_layer())) {
        check(&case)?;
    }
}
