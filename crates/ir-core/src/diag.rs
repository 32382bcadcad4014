//! Diagnostics: located errors and warnings, and how they are printed.
//!
//! Human form (what the CLI prints):
//! ```text
//! model.qir:12:18: error: use of undefined value %7
//!     %8 = fp.relu(%7) : (tensor<4xf32>) -> tensor<4xf32>
//!                  ^
//! ```
//! The source line and caret appear when the [`SourceMap`] holds the file.
//! Columns are 1-based byte offsets in the line (constant time to compute on
//! any line length); the caret is placed under the character at that byte.

use crate::location::SrcPos;
use std::fmt;
use std::sync::Arc;

/// How bad a diagnostic is.
#[derive(Copy, Clone, PartialEq, Eq, Debug, PartialOrd, Ord)]
pub enum Severity {
    /// Extra information attached to another diagnostic.
    Note,
    /// Something suspicious; processing continues.
    Warning,
    /// Processing failed.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One located message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error, warning or note.
    pub severity: Severity,
    /// Lower-case message without a trailing period.
    pub message: String,
    /// The file the position refers to, if known.
    pub file: Option<Arc<str>>,
    /// Line and column in `file` (line 0 = unknown; the column counts bytes from 1).
    pub pos: SrcPos,
    /// Further notes (e.g. the op's `loc(...)`, a previous definition).
    pub notes: Vec<Diagnostic>,
}

impl Diagnostic {
    /// An error at `file:pos`.
    pub fn error(file: Option<Arc<str>>, pos: SrcPos, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Error, message: message.into(), file, pos, notes: Vec::new() }
    }
    /// A warning at `file:pos`.
    pub fn warning(file: Option<Arc<str>>, pos: SrcPos, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(file, pos, message) }
    }
    /// Adds a note.
    pub fn with_note(mut self, note: Diagnostic) -> Diagnostic {
        self.notes.push(Diagnostic { severity: Severity::Note, ..note });
        self
    }
    /// `file:line:col` (or what is known of it).
    pub fn location_text(&self) -> String {
        let file = self.file.as_deref().unwrap_or("<unknown>");
        if self.pos.is_some() {
            format!("{file}:{}:{}", self.pos.line, self.pos.col)
        } else {
            file.to_string()
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.file.is_none() && !self.pos.is_some() {
            return write!(f, "{}: {}", self.severity, self.message);
        }
        write!(f, "{}: {}: {}", self.location_text(), self.severity, self.message)
    }
}

impl std::error::Error for Diagnostic {}

/// The shared bytes of one source file.
pub type SharedText = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Source texts by file name, to show the offending line under a diagnostic.
#[derive(Default, Clone)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

#[derive(Clone)]
struct SourceFile {
    name: Arc<str>,
    text: SharedText,
    /// Byte offsets of line starts, built on first use so that rendering many
    /// diagnostics costs one scan of the file, not one per diagnostic.
    line_starts: Arc<std::sync::OnceLock<Vec<usize>>>,
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> SourceMap {
        SourceMap::default()
    }
    /// Adds (or replaces) a file's text.
    pub fn add(&mut self, name: Arc<str>, text: SharedText) {
        self.files.retain(|f| f.name != name);
        self.files.push(SourceFile { name, text, line_starts: Arc::default() });
    }
    /// Line `line` (1-based) of file `name`, without its line break.
    pub fn line(&self, name: &str, line: u32) -> Option<&[u8]> {
        let file = self.files.iter().find(|f| &*f.name == name)?;
        let text: &[u8] = (*file.text).as_ref();
        let starts = file.line_starts.get_or_init(|| {
            let breaks = text.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i + 1);
            std::iter::once(0).chain(breaks).collect()
        });
        let index = line.checked_sub(1)? as usize;
        let start = *starts.get(index)?;
        let end = starts.get(index + 1).map_or(text.len(), |&next| next - 1);
        let l = &text[start..end.max(start)];
        Some(l.strip_suffix(b"\r").unwrap_or(l))
    }

    /// The human form of `diag`: `file:line:col: severity: message`, the source line
    /// and a caret under the column, then each note the same way.
    pub fn render(&self, diag: &Diagnostic) -> String {
        let mut out = String::new();
        self.render_into(&mut out, diag);
        for note in &diag.notes {
            self.render_into(&mut out, note);
        }
        out
    }

    fn render_into(&self, out: &mut String, diag: &Diagnostic) {
        out.push_str(&diag.to_string());
        out.push('\n');
        let Some(file) = diag.file.as_deref() else { return };
        if !diag.pos.is_some() {
            return;
        }
        let Some(line) = self.line(file, diag.pos.line) else { return };
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
        // Columns count bytes; the caret goes under the character at that byte.
        // Tabs are kept so it lines up in a terminal.
        let before = &line[..(diag.pos.col.saturating_sub(1) as usize).min(line.len())];
        for ch in String::from_utf8_lossy(before).chars() {
            out.push(if ch == '\t' { '\t' } else { ' ' });
        }
        out.push_str("^\n");
    }
}

/// A list of diagnostics returned by a failed parse or verification.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl From<Diagnostic> for Diagnostics {
    fn from(diagnostic: Diagnostic) -> Diagnostics {
        Diagnostics(vec![diagnostic])
    }
}

impl Diagnostics {
    /// True if any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }
    /// Renders all of them with `sources`.
    pub fn render(&self, sources: &SourceMap) -> String {
        self.0.iter().map(|d| sources.render(d)).collect()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

impl Diagnostic {
    /// A diagnostic at `op`: its parsed position if it has one, else the first
    /// `file:line:col` inside its location, else just the module's file; a name or
    /// fused location is added as a note (`op location: loc("conv1")`), so
    /// messages about imported models name the layer.
    pub fn at_op(
        ctx: &crate::Context,
        module: &crate::Module,
        op: crate::OpId,
        severity: Severity,
        message: impl Into<String>,
    ) -> Diagnostic {
        use crate::location::LocationData;
        let loc = module.op_loc(op);
        let pos = module.op_pos(op);
        let (file, pos) = if pos.is_some() {
            (module.source_name().cloned(), pos)
        } else if let Some((file, line, col)) = first_file_line_col(ctx, loc) {
            (Some(Arc::from(file)), SrcPos { line, col })
        } else {
            (module.source_name().cloned(), SrcPos::NONE)
        };
        let mut diag = Diagnostic { severity, message: message.into(), file, pos, notes: Vec::new() };
        if matches!(ctx.loc_data(loc), LocationData::Name { .. } | LocationData::Fused(_)) {
            let text = format!("op location: {}", crate::loc_to_string(ctx, loc));
            diag = diag.with_note(Diagnostic::error(None, SrcPos::NONE, text));
        }
        diag
    }
}

/// The first `file:line:col` inside a location (depth first, explicit stack).
fn first_file_line_col(ctx: &crate::Context, loc: crate::Location) -> Option<(&str, u32, u32)> {
    use crate::location::LocationData;
    let mut stack = vec![loc];
    let mut budget = 1024usize;
    while let Some(l) = stack.pop() {
        budget = budget.checked_sub(1)?;
        match ctx.loc_data(l) {
            LocationData::Unknown => {}
            LocationData::FileLineCol { file, line, col } => {
                return Some((ctx.symbol_str(*file), *line, *col))
            }
            LocationData::Name { child, .. } => stack.push(*child),
            LocationData::Fused(parts) => stack.extend(parts.iter().rev()),
        }
    }
    None
}
