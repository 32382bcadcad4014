//! Writing diagnostics to standard error in the `--diagnostics` format.
//!
//! `human` is what [`SourceMap::render`] prints: `file:line:col: error: message`,
//! the source line and a caret, then the notes the same way. The driver's own
//! failures (unreadable input, unwritable output) read `tool: error: message`.
//!
//! `json` writes every diagnostic (the driver's own failures included) as one
//! JSON object on one line, its notes nested:
//!
//! ```text
//! {"severity":"error","file":"x.qir","line":3,"col":5,"message":"...","notes":[{"severity":"note",...,"notes":[]}]}
//! ```
//!
//! `file`, `line` and `col` are `null` when unknown; `line` and `col` are
//! 1-based, `col` counted in bytes as the parser counts it. Pipeline errors
//! have `"file":"<pipeline>"` and `"line":1`. Only diagnostics change form:
//! `--timing`, `--stats`, IR dumps and `-v` logs print as they always do, and
//! usage errors found by the flag parser are printed by it.

use crate::cli::DiagnosticFormat;
use qopt_ir_core::json::write_string;
use qopt_ir_core::{Diagnostic, Diagnostics, Severity, SourceMap, SrcPos};
use std::fmt::Write as _;
use std::io::Write;

/// Diagnostics printed per module before the rest are only counted.
pub const MAX_REPORTED_DIAGNOSTICS: usize = 100;

/// The file name pipeline errors carry in JSON form.
pub const PIPELINE_FILE: &str = "<pipeline>";

/// Where and how one invocation writes its diagnostics.
#[derive(Copy, Clone)]
pub(crate) struct Reporter<'a> {
    pub tool: &'a str,
    pub format: DiagnosticFormat,
    pub sources: &'a SourceMap,
}

impl Reporter<'_> {
    /// One diagnostic with its notes.
    pub fn diagnostic(&self, err: &mut dyn Write, d: &Diagnostic) {
        let text = match self.format {
            DiagnosticFormat::Human => self.sources.render(d),
            DiagnosticFormat::Json => diagnostic_to_json(d) + "\n",
        };
        let _ = err.write_all(text.as_bytes());
    }

    /// The first [`MAX_REPORTED_DIAGNOSTICS`], then a line counting the rest.
    pub fn diagnostics(&self, err: &mut dyn Write, d: &Diagnostics) {
        for diag in d.0.iter().take(MAX_REPORTED_DIAGNOSTICS) {
            self.diagnostic(err, diag);
        }
        if d.0.len() > MAX_REPORTED_DIAGNOSTICS {
            let rest = d.0.len() - MAX_REPORTED_DIAGNOSTICS;
            match self.format {
                DiagnosticFormat::Human => {
                    let _ = writeln!(err, "... and {rest} more diagnostics");
                }
                DiagnosticFormat::Json => {
                    let message = format!("{rest} more diagnostics not shown");
                    let note = Diagnostic {
                        severity: Severity::Note,
                        ..Diagnostic::error(None, SrcPos::NONE, message)
                    };
                    self.diagnostic(err, &note);
                }
            }
        }
    }

    /// A failure of the driver itself, about `file` if it concerns one:
    /// `tool: error: message` in human form.
    pub fn tool_error(&self, err: &mut dyn Write, file: Option<&str>, message: &str) {
        match self.format {
            DiagnosticFormat::Human => {
                let _ = writeln!(err, "{}: error: {message}", self.tool);
            }
            DiagnosticFormat::Json => {
                self.diagnostic(err, &Diagnostic::error(file.map(Into::into), SrcPos::NONE, message));
            }
        }
    }
}

/// `d` as one line of JSON (no line break); see the module docs for the shape.
pub fn diagnostic_to_json(d: &Diagnostic) -> String {
    let mut out = String::new();
    write_json(&mut out, d);
    out
}

fn write_json(out: &mut String, d: &Diagnostic) {
    out.push_str("{\"severity\":");
    write_string(out, &d.severity.to_string());
    out.push_str(",\"file\":");
    match d.file.as_deref() {
        Some(file) => write_string(out, file),
        None => out.push_str("null"),
    }
    if d.pos.is_some() {
        let _ = write!(out, ",\"line\":{},\"col\":{}", d.pos.line, d.pos.col);
    } else {
        out.push_str(",\"line\":null,\"col\":null");
    }
    out.push_str(",\"message\":");
    write_string(out, &d.message);
    out.push_str(",\"notes\":[");
    for (i, note) in d.notes.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_json(out, note);
    }
    out.push_str("]}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_nests_notes_and_writes_null_for_unknowns() {
        let note = Diagnostic::error(None, SrcPos::NONE, "see loc(\"conv1\")");
        let d =
            Diagnostic::error(Some("m.qir".into()), SrcPos { line: 3, col: 5 }, "bad 'x'").with_note(note);
        assert_eq!(
            diagnostic_to_json(&d),
            "{\"severity\":\"error\",\"file\":\"m.qir\",\"line\":3,\"col\":5,\"message\":\"bad 'x'\",\
             \"notes\":[{\"severity\":\"note\",\"file\":null,\"line\":null,\"col\":null,\
             \"message\":\"see loc(\\\"conv1\\\")\",\"notes\":[]}]}"
        );
    }
}
