//! The named pipeline `quantize{data=... <options>}`: the whole
//! post-training quantization flow in one step, from a float model to an
//! integer one.
//!
//! It expands to `recognize-gelu, recognize-hard-swish, recognize-dense, div-to-mul, fold-bn,
//! conv1d-to-conv2d, insert-observers, calibrate, insert-fakeq, bias-correct, propagate-qparams,
//! expand-fakeq, quantize-constants, fuse, canonicalize, dce, quant-lint`
//! (`overflow-error`: a result whose accumulators can wrap is an error naming
//! the layers, not a warning among many): the
//! recognize passes first, so that a GELU or HardSwish an exporter decomposed
//! into arithmetic is observed and kept as one activation rather than
//! quantized op by op; `bias-correct` (empirical bias correction, on the same
//! data as `calibrate`) right after `insert-fakeq`, where it sees the
//! fake-quant model it corrects. Its options are those of `insert-observers`,
//! `calibrate`, `insert-fakeq` and `bias-correct` (`data` required); each
//! option given is passed to every one of those passes that declares it. The
//! `method` of `percentile`, `entropy` or `mse` without an `observer` observes
//! with histograms, which those methods read. The
//! pipeline's own option `bias-correct` (default `true`) leaves the
//! `bias-correct` pass out when `false`; `bias-correct`'s `skip-unsupported`
//! defaults to `true` here, so a model its paired run cannot follow (calls,
//! ops with regions) gets a warning from it and is quantized without it, as
//! before the pass joined the pipeline. `--list-passes` prints the
//! expansion, so running the listed passes one by one (saving in between) is
//! the same job.
//!
//! Why `bias-correct` is on by default (measured in `docs/quantization.md`
//! §11): on the reference models it gained 0.5 to 5.6 dB of output SQNR and
//! brought mnist_mbv2 to ONNX Runtime's accuracy, for about two interpreter
//! runs over the calibration data (5.5 s on mnist_mbv2's 500 samples).

use crate::passes::bias_correct::SKIP_UNSUPPORTED;
use crate::passes::{BiasCorrect, Calibrate, InsertFakeq, InsertObservers};
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::{NamedPipeline, Pass};

/// The pipeline's own option: whether `bias-correct` runs.
const BIAS_CORRECT: &str = "bias-correct";

/// The built-in range methods that read a histogram: given one of them
/// without an `observer`, the pipeline observes with histograms.
const HISTOGRAM_METHODS: [&str; 3] = ["percentile", "entropy", "mse"];

/// The passes that take the pipeline's options, in pipeline order.
fn configurable() -> [(&'static str, Vec<OptionSpec>); 4] {
    [
        ("insert-observers", InsertObservers.options()),
        ("calibrate", Calibrate.options()),
        ("insert-fakeq", InsertFakeq.options()),
        ("bias-correct", BiasCorrect.options()),
    ]
}

/// The `quantize` named pipeline.
pub fn quantize_pipeline() -> NamedPipeline {
    let mut options: Vec<OptionSpec> = Vec::new();
    for (_, specs) in configurable() {
        for spec in specs {
            if !options.iter().any(|o| o.name == spec.name) {
                options.push(match spec.name {
                    "data" => spec.required(),
                    // A model bias-correct cannot run keeps the rest of the pipeline.
                    SKIP_UNSUPPORTED => OptionSpec { default: "true", ..spec },
                    _ => spec,
                });
            }
        }
    }
    options.push(OptionSpec::new(BIAS_CORRECT, OptionKind::Bool, "true").help(
        "run bias-correct (empirical bias correction on the same data) after insert-fakeq; false leaves it out",
    ));
    NamedPipeline {
        name: "quantize",
        summary: "post-training quantization, float to integer ops: recognize-gelu, recognize-hard-swish, recognize-dense, div-to-mul, fold-bn, conv1d-to-conv2d, insert-observers, calibrate, \
                  insert-fakeq, bias-correct, propagate-qparams, expand-fakeq, quantize-constants, fuse, canonicalize, dce, quant-lint \
                  (options: those of insert-observers, calibrate, insert-fakeq and bias-correct; data required; bias-correct=false \
                  leaves bias-correct out)",
        options,
        expand,
    }
}

/// The pipeline text for `options`: each explicit option goes to the passes
/// that declare it; `bias-correct=false` leaves that pass out, and
/// `bias-correct` always gets `skip-unsupported` (whose default differs
/// from the pass's).
fn expand(options: &PassOptions) -> String {
    let given = |specs: &[OptionSpec]| -> Vec<String> {
        options
            .iter()
            .filter(|(name, _)| options.is_explicit(name) && specs.iter().any(|s| s.name == *name))
            .map(|(name, value)| format!("{name}={value}"))
            .collect()
    };
    let text = |pass: &str, given: Vec<String>| {
        if given.is_empty() {
            pass.to_string()
        } else {
            format!("{pass}{{{}}}", given.join(" "))
        }
    };
    let with_options = |pass: &str, specs: &[OptionSpec]| text(pass, given(specs));
    let [observers, calibrate, fakeq, bias_correct] = configurable();
    let mut observer_options = given(&observers.1);
    let method = options.string("method");
    if HISTOGRAM_METHODS.contains(&method) && !options.is_explicit("observer") {
        observer_options.insert(0, "observer=histogram".to_string());
    }
    let mut passes = vec![
        "recognize-gelu".to_string(),
        "recognize-hard-swish".to_string(),
        "recognize-dense".to_string(),
        // After the recognizers, whose patterns divide by 6 (hard swish) and √2 (GELU).
        "div-to-mul".to_string(),
        "fold-bn".to_string(),
        // After fold-bn, which folds a batch norm into the 1-D layer before it.
        "conv1d-to-conv2d".to_string(),
        text(observers.0, observer_options),
        with_options(calibrate.0, &calibrate.1),
        with_options(fakeq.0, &fakeq.1),
    ];
    if options.bool(BIAS_CORRECT) {
        let mut bias_options = given(&bias_correct.1);
        if !options.is_explicit(SKIP_UNSUPPORTED) {
            bias_options.push(format!("{SKIP_UNSUPPORTED}={}", options.bool(SKIP_UNSUPPORTED)));
        }
        passes.push(text(bias_correct.0, bias_options));
    }
    passes.extend(
        [
            "propagate-qparams",
            "expand-fakeq",
            "quantize-constants",
            "fuse",
            "canonicalize",
            "dce",
            "quant-lint{overflow-error=true}",
        ]
        .map(str::to_string),
    );
    passes.join(",")
}

#[cfg(test)]
mod tests {
    use super::quantize_pipeline;
    use qopt_ir_core::pass::pipeline::parse_pipeline;

    /// `--list-passes` shows the summary, so it must list the passes the
    /// pipeline really runs, in order.
    #[test]
    fn the_summary_lists_the_expansion() {
        let pipeline = quantize_pipeline();
        let [element] = &parse_pipeline("quantize{data=calib.npy}").unwrap()[..] else { unreachable!() };
        let options = element.resolve_options(&pipeline.options).unwrap();
        let names: Vec<String> =
            parse_pipeline(&(pipeline.expand)(&options)).unwrap().into_iter().map(|e| e.name).collect();
        let listed = pipeline.summary.split_once(": ").and_then(|(_, rest)| rest.split_once(" (")).unwrap().0;
        assert_eq!(listed.split(", ").collect::<Vec<_>>(), names);
    }

    fn expansion(text: &str) -> String {
        let pipeline = quantize_pipeline();
        let [element] = &parse_pipeline(text).unwrap()[..] else { unreachable!() };
        (pipeline.expand)(&element.resolve_options(&pipeline.options).unwrap())
    }

    /// `bias-correct` runs by default, right after `insert-fakeq`, on the
    /// data `calibrate` reads and with the run options both declare; the
    /// pipeline's own `bias-correct` option reaches no pass.
    #[test]
    fn bias_correct_runs_after_insert_fakeq_on_the_same_data_unless_turned_off() {
        let default = expansion("quantize{data=c.npy threads=1 per-channel=false}");
        assert!(
            default.contains(
                "calibrate{data=c.npy threads=1},insert-fakeq{per-channel=false},\
                 bias-correct{data=c.npy threads=1 skip-unsupported=true},propagate-qparams"
            ),
            "{default}"
        );
        let on = expansion("quantize{data=c.npy bias-correct=true}");
        assert!(
            on.contains("insert-fakeq,bias-correct{data=c.npy skip-unsupported=true},propagate-qparams"),
            "{on}"
        );
        let strict = expansion("quantize{data=c.npy skip-unsupported=false}");
        assert!(
            strict.contains("insert-fakeq,bias-correct{data=c.npy skip-unsupported=false},propagate"),
            "{strict}"
        );
        let off = expansion("quantize{data=c.npy bias-correct=false}");
        assert!(!off.contains("bias-correct"), "{off}");
        assert!(off.contains("insert-fakeq,propagate-qparams"), "{off}");
    }
}
