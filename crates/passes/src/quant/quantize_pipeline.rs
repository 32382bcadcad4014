//! The named pipeline `quantize{data=... <options>}`: the whole
//! post-training quantization flow in one step, from a float model to an
//! integer one.
//!
//! It expands to `recognize-gelu, recognize-hard-swish, fold-bn,
//! insert-observers, calibrate, insert-fakeq, propagate-qparams, expand-fakeq,
//! quantize-constants, fuse, canonicalize, dce, quant-lint`: the recognize
//! passes first, so that a GELU or HardSwish an exporter decomposed into
//! arithmetic is observed and kept as one activation rather than quantized op
//! by op. Its options
//! are those of `insert-observers`, `calibrate` and `insert-fakeq`
//! (`data` required); each option given is passed to every one of those passes
//! that declares it, and `--list-passes` prints the expansion, so running the
//! listed passes one by one (saving in between) is the same job.

use super::{Calibrate, InsertFakeq, InsertObservers};
use qopt_ir_core::pass::{OptionSpec, PassOptions};
use qopt_ir_core::{NamedPipeline, Pass};

/// The passes that take the pipeline's options, in pipeline order.
fn configurable() -> [(&'static str, Vec<OptionSpec>); 3] {
    [
        ("insert-observers", InsertObservers.options()),
        ("calibrate", Calibrate.options()),
        ("insert-fakeq", InsertFakeq.options()),
    ]
}

/// The `quantize` named pipeline.
pub fn quantize_pipeline() -> NamedPipeline {
    let mut options: Vec<OptionSpec> = Vec::new();
    for (_, specs) in configurable() {
        for spec in specs {
            if !options.iter().any(|o| o.name == spec.name) {
                options.push(if spec.name == "data" { spec.required() } else { spec });
            }
        }
    }
    NamedPipeline {
        name: "quantize",
        summary: "post-training quantization, float to integer ops: recognize-gelu, recognize-hard-swish, fold-bn, insert-observers, calibrate, \
                  insert-fakeq, propagate-qparams, expand-fakeq, quantize-constants, fuse, canonicalize, dce, quant-lint (options: those of \
                  insert-observers, calibrate and insert-fakeq; data required)",
        options,
        expand,
    }
}

/// The pipeline text for `options`: each explicit option goes to the passes
/// that declare it.
fn expand(options: &PassOptions) -> String {
    let with_options = |pass: &str, specs: &[OptionSpec]| {
        let given: Vec<String> = options
            .iter()
            .filter(|(name, _)| options.is_explicit(name) && specs.iter().any(|s| s.name == *name))
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        if given.is_empty() {
            pass.to_string()
        } else {
            format!("{pass}{{{}}}", given.join(" "))
        }
    };
    let [observers, calibrate, fakeq] = configurable();
    [
        "recognize-gelu".to_string(),
        "recognize-hard-swish".to_string(),
        "fold-bn".to_string(),
        with_options(observers.0, &observers.1),
        with_options(calibrate.0, &calibrate.1),
        with_options(fakeq.0, &fakeq.1),
        "propagate-qparams".to_string(),
        "expand-fakeq".to_string(),
        "quantize-constants".to_string(),
        "fuse".to_string(),
        "canonicalize".to_string(),
        "dce".to_string(),
        "quant-lint".to_string(),
    ]
    .join(",")
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
}
