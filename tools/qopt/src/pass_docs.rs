//! The Markdown pass reference `--emit-pass-docs FILE` writes
//! (`docs/passes.md`): every registered pass and named pipeline with its
//! summary, whether it keeps the module's meaning, its description and its
//! options, generated from the registry so it cannot drift (a test compares
//! the checked-in file with a fresh one).

use qopt_ir_core::pass::{NamedPipeline, OptionSpec, PassRegistry};
use qopt_ir_core::Pass;
use std::fmt::Write as _;

/// The pass reference for `registry`.
pub fn render_pass_docs(registry: &PassRegistry) -> String {
    let mut out = String::from(
        "# Passes\n\n<!-- Generated from the pass registry by the driver's `--emit-pass-docs FILE`; \
         do not edit. -->\n\nEvery pass and named pipeline `qopt` registers, as `qopt --list-passes` \
         lists them. Run them with `qopt model.qir --pass='a,b{option=value}'`.\n\n",
    );
    out.push_str("| pass | does | keeps meaning |\n|---|---|---|\n");
    for pass in registry.passes() {
        let keeps = if pass.preserves_semantics() { "yes" } else { "no" };
        let _ = writeln!(out, "| [`{}`](#{}) | {} | {keeps} |", pass.name(), pass.name(), pass.summary());
    }
    if registry.pipelines().len() > 0 {
        out.push_str("\n| pipeline | does |\n|---|---|\n");
        for pipeline in registry.pipelines() {
            let _ = writeln!(out, "| [`{}`](#{}) | {} |", pipeline.name, pipeline.name, pipeline.summary);
        }
    }
    for pass in registry.passes() {
        render_pass(&mut out, pass.as_ref());
    }
    for pipeline in registry.pipelines() {
        render_pipeline(&mut out, pipeline);
    }
    out
}

fn render_pass(out: &mut String, pass: &dyn Pass) {
    let _ = write!(out, "\n## {}\n\n{}\n\n", pass.name(), pass.summary());
    let keeps = if pass.preserves_semantics() {
        "Keeps the module's meaning (`preserves_semantics`)."
    } else {
        "Changes what the module computes (on purpose)."
    };
    let _ = writeln!(out, "{keeps}\n");
    if !pass.description().is_empty() {
        let _ = writeln!(out, "{}\n", pass.description().trim_end());
    }
    render_options(out, &pass.options());
}

fn render_pipeline(out: &mut String, pipeline: &NamedPipeline) {
    let _ = write!(out, "\n## {}\n\nNamed pipeline: {}\n\n", pipeline.name, pipeline.summary);
    render_options(out, &pipeline.options);
}

fn render_options(out: &mut String, options: &[OptionSpec]) {
    if options.is_empty() {
        out.push_str("No options.\n");
        return;
    }
    out.push_str("| option | kind | default | meaning |\n|---|---|---|---|\n");
    for spec in options {
        let default = if spec.required { "required".to_string() } else { format!("`{}`", spec.default) };
        let _ = writeln!(
            out,
            "| `{}` | {} | {default} | {} |",
            spec.name,
            spec.kind_name(),
            spec.help.replace('|', "\\|")
        );
    }
}
