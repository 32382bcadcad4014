//! What the dialect registry says about itself: `--list-dialects`, `--list-ops`
//! and the Markdown op reference `--emit-op-docs` writes (`docs/dialects/*.md`).
//!
//! Everything is generated from the registered [`OpDef`]s — summary, arity,
//! traits, interfaces and the description with its `.qir` example — so the docs
//! cannot drift from the ops; `tests/op_docs.rs` fails when the checked-in files
//! differ from what the registry generates. Output is deterministic: dialects and
//! ops sorted by name, traits in [`Traits::names`] order.
//!
//! Interfaces are opaque to the registry (looked up by type), so only those an
//! [`InterfaceDoc`] knows are shown: [`STANDARD_INTERFACE_DOCS`] covers
//! `qopt_ir_core::interfaces`; a downstream driver adds its own with
//! [`crate::Driver::add_interface_doc`].

use crate::write_file_atomically;
use qopt_ir_core::interfaces::{FusedActivation, LookupActivation, QuantizableOp, RecordedRange};
use qopt_ir_core::{dialect_prefix, Arity, Context, OpDef};
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// Describes one interface of an op in a line of Markdown (`None` if the op
/// does not have it), e.g. ``QuantizableOp`: activation operands 0, 1`.
pub type InterfaceDoc = fn(&OpDef) -> Option<String>;

/// Descriptions of the interfaces in `qopt_ir_core::interfaces`.
pub const STANDARD_INTERFACE_DOCS: &[InterfaceDoc] =
    &[quantizable_op_doc, fused_activation_doc, lookup_activation_doc, recorded_range_doc];

/// Dialects that get no op reference: they are part of the `.qir` format itself
/// (`docs/qir-syntax.md`).
pub const UNDOCUMENTED_DIALECTS: &[&str] = &["builtin", "func"];

/// The registered dialects `--emit-op-docs` writes a file for, sorted.
pub fn documented_dialects(ctx: &Context) -> Vec<&'static str> {
    let mut names: Vec<&'static str> =
        ctx.dialects().map(|d| d.name()).filter(|n| !UNDOCUMENTED_DIALECTS.contains(n)).collect();
    names.sort_unstable();
    names
}

/// `--list-dialects`: `name  summary` per registered dialect, sorted.
pub fn list_dialects(ctx: &Context) -> String {
    let mut dialects: Vec<(&str, &str)> = ctx.dialects().map(|d| (d.name(), d.summary())).collect();
    dialects.sort_unstable();
    let width = dialects.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, summary) in dialects {
        let _ = writeln!(out, "{}", format!("{name:<width$}  {summary}").trim_end());
    }
    out
}

/// `--list-ops`: per registered op (of `dialect` only, if given), sorted, in
/// aligned columns: name, arity, traits, summary:
///
/// ```text
/// fp.add  2 operands -> 1 result  [Pure, Commutative, Elementwise]  elementwise addition with broadcasting
/// ```
pub fn list_ops(ctx: &Context, dialect: Option<&str>) -> String {
    let rows: Vec<[String; 4]> = ctx
        .op_defs()
        .into_iter()
        .filter(|def| dialect.is_none_or(|d| dialect_prefix(def.name) == d))
        .map(|def| {
            let traits = format!("[{}]", def.traits.names().join(", "));
            [def.name.to_string(), arity_summary(def), traits, def.summary.to_string()]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|row| row[i].chars().count()).max().unwrap_or(0);
    let (name_width, arity_width, traits_width) = (width(0), width(1), width(2));
    let mut out = String::new();
    for [name, arity, traits, summary] in &rows {
        let line = format!("{name:<name_width$}  {arity:<arity_width$}  {traits:<traits_width$}  {summary}");
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// `2 operands -> 1 result`, with `, 1 region` when the op may have regions.
pub fn arity_summary(def: &OpDef) -> String {
    let mut text = format!("{} -> {}", counted(def.operands, "operand"), counted(def.results, "result"));
    if def.regions != Arity::Exact(0) {
        let _ = write!(text, ", {}", counted(def.regions, "region"));
    }
    text
}

/// `1 operand`, `2 operands`, `at least 1 operand`, `2 to 3 operands`.
fn counted(arity: Arity, noun: &str) -> String {
    let plural = match arity {
        Arity::Exact(n) | Arity::AtLeast(n) => n != 1,
        Arity::Range(..) => true,
    };
    format!("{arity} {noun}{}", if plural { "s" } else { "" })
}

/// The Markdown op reference of the registered dialect `dialect`, or `None` if
/// no such dialect is registered. `interfaces` describe the interfaces shown.
pub fn render_dialect_docs(ctx: &Context, dialect: &str, interfaces: &[InterfaceDoc]) -> Option<String> {
    let summary = ctx.dialect(dialect)?.summary();
    let ops: Vec<&OpDef> =
        ctx.op_defs().into_iter().filter(|def| dialect_prefix(def.name) == dialect).collect();
    let mut out = String::new();
    let _ = writeln!(out, "# The `{dialect}` dialect\n");
    out.push_str(
        "<!-- Generated from the dialect registry by the driver's `--emit-op-docs DIR`; do not edit. -->\n\n",
    );
    if !summary.is_empty() {
        let _ = writeln!(out, "{summary}\n");
    }
    let _ = writeln!(out, "## Ops\n");
    for def in &ops {
        let _ = writeln!(out, "- [{}](#{}): {}", def.name, heading_anchor(def.name), def.summary);
    }
    for def in &ops {
        let _ = writeln!(out, "\n## {}\n", def.name);
        if !def.summary.is_empty() {
            let _ = writeln!(out, "{}\n", def.summary);
        }
        let _ = writeln!(out, "- operands: {}", def.operands);
        let _ = writeln!(out, "- results: {}", def.results);
        let _ = writeln!(out, "- regions: {}", def.regions);
        let traits = def.traits.names();
        if !traits.is_empty() {
            let traits: Vec<String> = traits.iter().map(|t| format!("`{t}`")).collect();
            let _ = writeln!(out, "- traits: {}", traits.join(", "));
        }
        let described: Vec<String> = interfaces.iter().filter_map(|doc| doc(def)).collect();
        if !described.is_empty() {
            let _ = writeln!(out, "- interfaces:");
            for line in described {
                let _ = writeln!(out, "  - {line}");
            }
        }
        let description = def.description.trim_end();
        if !description.is_empty() {
            let _ = writeln!(out, "\n{description}");
        }
    }
    Some(out)
}

/// Writes `DIR/<dialect>.md` for every [`documented_dialects`] entry (creating
/// `dir` if needed, each file atomically) and returns the paths written.
pub fn emit_op_docs(ctx: &Context, dir: &Path, interfaces: &[InterfaceDoc]) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for dialect in documented_dialects(ctx) {
        // invariant: `documented_dialects` lists registered dialects only.
        let Some(text) = render_dialect_docs(ctx, dialect, interfaces) else { continue };
        let path = dir.join(format!("{dialect}.md"));
        write_file_atomically(&path, |w| w.write_all(text.as_bytes()))?;
        tracing::info!(path = %path.display(), "wrote op docs");
        written.push(path);
    }
    Ok(written)
}

/// The anchor GitHub gives a heading: lower case, spaces to `-`, punctuation
/// other than `-` and `_` dropped (`fp.max_pool2d` -> `fpmax_pool2d`).
fn heading_anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// [`QuantizableOp`]: the roles of the operands in quantization.
fn quantizable_op_doc(def: &OpDef) -> Option<String> {
    let q = def.interfaces.get::<QuantizableOp>()?;
    let mut parts = Vec::new();
    if q.variadic {
        parts.push("every operand is an activation".to_string());
    }
    if !q.activations.is_empty() {
        let list: Vec<String> = q.activations.iter().map(usize::to_string).collect();
        let noun = if list.len() == 1 { "operand" } else { "operands" };
        parts.push(format!("activation {noun} {}", list.join(", ")));
    }
    if let Some(weight) = q.weight {
        match q.weight_channel_axis {
            Some(axis) => parts.push(format!("weight operand {weight} (output channels on axis {axis})")),
            None => parts.push(format!("weight operand {weight}")),
        }
    }
    if let Some(bias) = q.bias {
        parts.push(format!("bias operand {bias}"));
    }
    if parts.is_empty() {
        return Some("`QuantizableOp`".to_string());
    }
    Some(format!("`QuantizableOp`: {}", parts.join("; ")))
}

/// [`FusedActivation`]: quantization observes the op's result, fusing it into its producer.
fn fused_activation_doc(def: &OpDef) -> Option<String> {
    def.interfaces.get::<FusedActivation>().map(|_| {
        "`FusedActivation`: quantized kernels apply it in the epilogue of the op before it".to_string()
    })
}

/// [`LookupActivation`]: `fuse` computes the op through a `qnn.lookup` table.
fn lookup_activation_doc(def: &OpDef) -> Option<String> {
    def.interfaces.get::<LookupActivation>().map(|_| {
        "`LookupActivation`: a function of its operand alone; `fuse` tabulates it as `qnn.lookup` for \
         operands of at most 8 bits"
            .to_string()
    })
}

/// [`RecordedRange`]: the result's calibrated minima a pass records, which
/// `--verify-equiv` assumes under `calibrated-range`.
fn recorded_range_doc(def: &OpDef) -> Option<String> {
    def.interfaces.get::<RecordedRange>().map(|r| {
        format!(
            "`RecordedRange`: per-channel minima of the result (channels on axis {}) recorded from \
             calibration in an attribute, assumed by `--verify-equiv` under `calibrated-range`",
            r.axis
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_dialect_fp::op_names as fp_op;
    use qopt_ir_core::Traits;

    #[test]
    fn arity_reads_as_english() {
        let def = OpDef::new("t.op", "")
            .operands(Arity::Range(2, 3))
            .results(Arity::Exact(1))
            .regions(Arity::AtLeast(1));
        assert_eq!(arity_summary(&def), "2 to 3 operands -> 1 result, at least 1 region");
        let def = OpDef::new("t.op", "").operands(Arity::AtLeast(0)).results(Arity::Exact(0));
        assert_eq!(arity_summary(&def), "at least 0 operands -> 0 results");
    }

    #[test]
    fn anchors_match_github_slugs() {
        assert_eq!(heading_anchor(fp_op::MAX_POOL2D), "fpmax_pool2d");
        assert_eq!(heading_anchor("The Ops"), "the-ops");
    }

    #[test]
    fn quantizable_op_names_each_role() {
        let weighted = OpDef::new("t.conv", "").interface(QuantizableOp::weighted(0, 1, Some(2), 0));
        assert_eq!(
            quantizable_op_doc(&weighted).unwrap(),
            "`QuantizableOp`: activation operand 0; weight operand 1 (output channels on axis 0); bias operand 2"
        );
        let add = OpDef::new("t.add", "").traits(Traits::PURE).interface(QuantizableOp::activations(&[0, 1]));
        assert_eq!(quantizable_op_doc(&add).unwrap(), "`QuantizableOp`: activation operands 0, 1");
        assert_eq!(quantizable_op_doc(&OpDef::new("t.x", "")), None);
    }
}
