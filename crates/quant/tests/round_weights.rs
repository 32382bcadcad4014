//! End-to-end properties of `round-weights` on the digits MLP
//! (`examples/digits_mlp.qir`, calibration data
//! `tests/models/digits_mlp/calib.npy`) quantized to 4-bit and 3-bit weights:
//!
//! - every weight it writes is on its fake quant's grid: `fake_quant(W')`
//!   equals `W'` bit for bit, and `W'/s − zp` is an integer in the storage range;
//! - it changes the rounding of some weights (and so the constants);
//! - the same run twice, and one thread against two, give the same bytes;
//! - running it again on its own output changes nothing;
//! - `max-gram-mb` splits the data pass without changing the result, and a
//!   layer whose Gram matrix alone is above it keeps nearest rounding.

mod common;

use common::{context, repo, run_pipeline};
use qopt_dialect_qnn::fixed_point::{fake_quant_f32, quantize_f32, scale_f32};
use qopt_dialect_qnn::quant_params::{params_at, storage_range};
use qopt_interp::Tensor;
use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry, RunReport};
use qopt_ir_core::{constant_value, module_to_string, parse_module, AttrData, TypeData};

/// The digits MLP after `pipeline`, printed.
fn run(pipeline: &str) -> String {
    let text = std::fs::read_to_string(repo().join("examples/digits_mlp.qir")).unwrap();
    run_text(&text, pipeline)
}

fn run_text(text: &str, pipeline: &str) -> String {
    let mut ctx = context();
    let mut module = parse_module(&mut ctx, text.as_bytes(), "model.qir").expect("the model parses");
    run_pipeline(&mut ctx, &mut module, pipeline);
    module_to_string(&ctx, &module)
}

fn fake_quant_model(bits: u32) -> String {
    let calib = repo().join("tests/models/digits_mlp/calib.npy");
    format!(
        "fold-bn,insert-observers,calibrate{{data={}}},insert-fakeq{{weight-type=i{bits}}}",
        calib.display()
    )
}

fn round_weights(options: &str) -> String {
    let calib = repo().join("tests/models/digits_mlp/calib.npy");
    format!("round-weights{{data={} iterations=100 batches=50 {options}}}", calib.display())
}

/// Checks every fake-quantized constant of `text` is on its grid; returns how many weights it saw.
fn check_on_grid(text: &str) -> usize {
    let mut ctx = context();
    let module = parse_module(&mut ctx, text.as_bytes(), "rounded.qir").unwrap();
    let mut seen = 0;
    for op in module.walk_preorder(module.root()) {
        if ctx.op_name_str(module.op_name(op)) != "qnn.fake_quant" {
            continue;
        }
        let Some(attr) = constant_value(&ctx, &module, module.operand(op, 0)) else { continue };
        let AttrData::Dense(d) = ctx.attr_data(attr) else { continue };
        let weights = Tensor::from_dense(&ctx, d).unwrap().to_f64_vec();
        let ty = match module.op_attr(&ctx, op, "type").map(|a| ctx.attr_data(a)) {
            Some(AttrData::Type(t)) => *t,
            _ => panic!("a fake quant without a type"),
        };
        let TypeData::Quant(q) = ctx.type_data(ty) else { panic!("not a quantized type") };
        let (qmin, qmax) = storage_range(q);
        let channels = ctx.tensor_shape(module.value_type(module.operand(op, 0))).unwrap()[0] as usize;
        let row = weights.len() / channels;
        for (i, &w) in weights.iter().enumerate() {
            let p = params_at(q, i / row).unwrap();
            let s = scale_f32(p.scale);
            let w = w as f32;
            assert_eq!(
                fake_quant_f32(w, s, p.zero_point, qmin, qmax).to_bits(),
                w.to_bits(),
                "weight {i}: {w}"
            );
            let stored = quantize_f32(w, s, p.zero_point, qmin, qmax);
            assert!((qmin..=qmax).contains(&stored));
            assert_eq!(((stored - p.zero_point) as f32 * s).to_bits(), w.to_bits());
            seen += 1;
        }
    }
    seen
}

#[test]
fn writes_weights_on_the_grid_and_changes_some() {
    for bits in [4, 3] {
        let nearest = run(&fake_quant_model(bits));
        let rounded = run_text(&nearest, &round_weights("threads=2"));
        assert_ne!(nearest, rounded, "i{bits}: nothing changed");
        assert!(check_on_grid(&rounded) > 1000, "i{bits}");
    }
}

#[test]
fn deterministic_and_independent_of_threads() {
    let nearest = run(&fake_quant_model(4));
    let one = run_text(&nearest, &round_weights("threads=1"));
    let again = run_text(&nearest, &round_weights("threads=1"));
    let two = run_text(&nearest, &round_weights("threads=2"));
    assert_eq!(one, again);
    assert_eq!(one, two);
}

#[test]
fn a_second_run_changes_nothing() {
    let nearest = run(&fake_quant_model(4));
    let once = run_text(&nearest, &round_weights(""));
    let twice = run_text(&once, &round_weights(""));
    assert_eq!(once, twice);
}

/// Runs `pipeline` on `text` with statistics; the result printed, and the report.
fn run_with_report(text: &str, pipeline: &str) -> (String, RunReport) {
    let mut ctx = context();
    let mut module = parse_module(&mut ctx, text.as_bytes(), "model.qir").expect("the model parses");
    let mut registry = PassRegistry::new();
    qopt_passes::register_generic_passes(&mut registry).unwrap();
    qopt_quant::register_quant_passes(&mut registry).unwrap();
    let manager =
        PassManager::parse(&registry, pipeline).unwrap_or_else(|e| panic!("{pipeline}: {}", e.message));
    let mut inst = Instrumentation { reproducer_dir: None, statistics: true, ..Instrumentation::default() };
    let report =
        manager.run(&mut ctx, &mut module, &mut inst).unwrap_or_else(|e| panic!("{pipeline}: {e:?}"));
    (module_to_string(&ctx, &module), report)
}

fn stat(report: &RunReport, name: &str) -> Option<u64> {
    report.statistics.iter().flat_map(|(_, stats)| stats).find(|(n, _)| *n == name).map(|&(_, v)| v)
}

/// The value of the weight constant of type `tensor<{shape}xf32>`.
fn weight_value(text: &str, shape: &str) -> String {
    let ty = format!(": () -> tensor<{shape}xf32>");
    let line = text
        .lines()
        .find(|l| l.contains("fp.constant") && l.contains(&ty))
        .unwrap_or_else(|| panic!("{shape}"));
    line.split_once("value = ").unwrap().1.split_once(" : ").unwrap().0.to_string()
}

/// The digits MLP's Gram matrices (with the patch sums) take 33,280 bytes
/// (fc1, K = 64), 132,096 (fc2, K = 128) and 33,280 (fc3): under 0.14 MB no
/// two neighbours share a pass, so three data passes collect them, and the
/// rounding is the same bytes as with one pass.
#[test]
fn a_gram_limit_splits_the_data_pass_without_changing_the_result() {
    let nearest = run(&fake_quant_model(4));
    let (one, report) = run_with_report(&nearest, &round_weights("threads=2"));
    assert_eq!(stat(&report, "data-passes"), Some(1));
    let (three, report) = run_with_report(&nearest, &round_weights("threads=2 max-gram-mb=0.14"));
    assert_eq!(stat(&report, "data-passes"), Some(3));
    assert_eq!(stat(&report, "layers-over-gram-limit"), None);
    assert_eq!(one, three);
}

/// Under 0.1 MB fc2's matrix (132,096 bytes) does not fit alone: fc2 keeps
/// the weights nearest rounding reads (the constant is not rewritten), with
/// a warning at the layer; fc1 and fc3 share one pass and are rounded.
#[test]
fn a_layer_above_the_gram_limit_keeps_nearest_rounding() {
    let nearest = run(&fake_quant_model(4));
    let (rounded, report) = run_with_report(&nearest, &round_weights("threads=2 max-gram-mb=0.1"));
    assert_eq!(stat(&report, "data-passes"), Some(1));
    assert_eq!(stat(&report, "layers-over-gram-limit"), Some(1));
    assert_eq!(stat(&report, "layers-rounded"), Some(2));
    assert_eq!(weight_value(&rounded, "64x128"), weight_value(&nearest, "64x128"));
    assert_ne!(weight_value(&rounded, "128x64"), weight_value(&nearest, "128x64"));
    assert_ne!(weight_value(&rounded, "10x64"), weight_value(&nearest, "10x64"));
    let [warning] = &report.warnings[..] else { panic!("{:?}", report.warnings) };
    assert!(
        warning.message.contains(
            "its input statistics take 132096 bytes (1 group(s) of a 128×128 Gram matrix and a sum of 128, f64), \
             above max-gram-mb=0.1"
        ),
        "{}",
        warning.message
    );
}
