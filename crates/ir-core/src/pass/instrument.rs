//! What the pass manager does around each pass besides running it: the
//! [`Instrumentation`] settings (verify-each, IR printing, timing, statistics,
//! reproducers), user hooks ([`PassInstrumentation`]), and the file writers for IR
//! dumps and reproducers.
//!
//! Invariants:
//! - a dump is the module as the printer prints it, under a one-line header that
//!   is a `.qir` comment (`// -----// IR Dump After fold-bn (1) //----- //`), so a
//!   dump file parses as it is; the header is not a `// -----` split marker;
//! - "changed" for `print_after_change` is decided on the printed text (hash and
//!   length), never on what the pass claims;
//! - a reproducer is written to a temporary file in its directory and renamed into
//!   place, so a reproducer file is always complete.

use super::pipeline::PassOptions;
use super::{Pass, PassOutcome};
use crate::{print_module, Context, Diagnostics, Module};
use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::fs::File;
use std::hash::Hasher;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Which passes an IR-printing option applies to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PassFilter {
    /// No pass.
    #[default]
    None,
    /// Every pass.
    All,
    /// The passes with these names.
    Named(Vec<String>),
}

impl PassFilter {
    /// Whether the filter selects the pass called `pass`.
    pub fn matches(&self, pass: &str) -> bool {
        match self {
            PassFilter::None => false,
            PassFilter::All => true,
            PassFilter::Named(names) => names.iter().any(|name| name == pass),
        }
    }
}

/// The pass a [`PassInstrumentation`] hook is called around.
#[derive(Clone, Copy)]
pub struct PassRun<'a> {
    /// The pass.
    pub pass: &'a dyn Pass,
    /// Its resolved options.
    pub options: &'a PassOptions,
    /// 1-based position among the pipeline's pass executions (named pipelines
    /// expanded).
    pub position: usize,
    /// The pass with its explicit options as canonical pipeline text.
    pub text: &'a str,
}

impl fmt::Debug for PassRun<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PassRun").field("position", &self.position).field("text", &self.text).finish()
    }
}

/// A hook the pass manager calls around every pass, like MLIR's
/// `PassInstrumentation` (e.g. translation validation of semantics-preserving
/// passes, which keeps a copy of the module in `before_pass` when
/// `run.pass.preserves_semantics()`). An `Err` fails the pipeline at that pass,
/// with a reproducer, like a failing pass.
pub trait PassInstrumentation {
    /// Called before the pass runs.
    fn before_pass(
        &mut self,
        run: &PassRun<'_>,
        ctx: &mut Context,
        module: &Module,
    ) -> Result<(), Diagnostics> {
        let _ = (run, ctx, module);
        Ok(())
    }

    /// The line under each pass in the timing report that holds this hook's
    /// time before and after the pass (`verify-equiv`); `None` leaves the
    /// hook's time out of the report.
    fn timing_name(&self) -> Option<&'static str> {
        None
    }

    /// Called after the pass ran and (with verify-each) the result verified.
    fn after_pass(
        &mut self,
        run: &PassRun<'_>,
        outcome: PassOutcome,
        ctx: &mut Context,
        module: &Module,
    ) -> Result<(), Diagnostics> {
        let _ = (run, outcome, ctx, module);
        Ok(())
    }
}

/// How a pipeline runs: checks, dumps, measurements. Fields are public; start from
/// [`Instrumentation::default`] and change what you need.
pub struct Instrumentation<'a> {
    /// Run [`crate::verify`] after every pass; invalid IR fails the pipeline at that
    /// pass. Default: true.
    pub verify_each: bool,
    /// Print the IR before these passes. Default: none.
    pub print_before: PassFilter,
    /// Print the IR after these passes. Default: none.
    pub print_after: PassFilter,
    /// Print after a pass only if its printed IR differs from before it. Applies to
    /// the passes `print_after` selects, or to every pass if it selects none.
    /// Default: false.
    pub print_after_change: bool,
    /// Write each dump to its own file `{NN}-{pass}-{before|after}.qir` in this
    /// directory (created if missing; NN = 2-digit position from 01) instead of to
    /// `print_sink`. Default: none.
    pub print_dir: Option<PathBuf>,
    /// Where dumps go without `print_dir`, each under a header line. Default:
    /// standard error.
    pub print_sink: Box<dyn Write + 'a>,
    /// Collect a timing tree into [`RunReport::timing`](super::RunReport::timing).
    /// Default: false.
    pub timing: bool,
    /// Collect per-pass counters into
    /// [`RunReport::statistics`](super::RunReport::statistics). Default: false.
    pub statistics: bool,
    /// Where a failing pass's reproducer is written; `None` writes none (and skips
    /// the copy of the module kept before each pass). Default: the temp directory.
    pub reproducer_dir: Option<PathBuf>,
    /// The text the module was parsed from, unchanged. With it a reproducer is
    /// this text replayed with every pass up to the failing one, and the
    /// module is not copied before each pass (a pipeline then needs no more
    /// memory than its module). Default: none (the module is copied).
    pub reproducer_input: Option<&'a [u8]>,
    /// The tool named in reproducer files and replay commands. Default: `qopt`.
    pub tool_name: String,
    /// Hooks called around every pass, in order. Default: none.
    pub hooks: Vec<Box<dyn PassInstrumentation>>,
}

impl Default for Instrumentation<'_> {
    fn default() -> Self {
        Instrumentation {
            verify_each: true,
            print_before: PassFilter::None,
            print_after: PassFilter::None,
            print_after_change: false,
            print_dir: None,
            print_sink: Box::new(io::stderr()),
            timing: false,
            statistics: false,
            reproducer_dir: Some(std::env::temp_dir()),
            reproducer_input: None,
            tool_name: "qopt".to_string(),
            hooks: Vec::new(),
        }
    }
}

impl fmt::Debug for Instrumentation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instrumentation")
            .field("verify_each", &self.verify_each)
            .field("print_before", &self.print_before)
            .field("print_after", &self.print_after)
            .field("print_after_change", &self.print_after_change)
            .field("print_dir", &self.print_dir)
            .field("timing", &self.timing)
            .field("statistics", &self.statistics)
            .field("reproducer_dir", &self.reproducer_dir)
            .field("reproducer_input", &self.reproducer_input.map(<[u8]>::len))
            .field("tool_name", &self.tool_name)
            .field("hooks", &self.hooks.len())
            .finish_non_exhaustive()
    }
}

/// Before or after a pass.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(super) enum DumpPoint {
    Before,
    After,
}

impl Instrumentation<'_> {
    /// Whether the IR is printed after `pass` when it changed it.
    pub(super) fn tracks_change(&self, pass: &str) -> bool {
        self.print_after_change && (self.print_after == PassFilter::None || self.print_after.matches(pass))
    }

    /// Whether the IR is printed after `pass` whether or not it changed.
    pub(super) fn prints_after(&self, pass: &str) -> bool {
        !self.print_after_change && self.print_after.matches(pass)
    }

    /// Prints the module under a header, to its own file in `print_dir` or to the
    /// sink.
    pub(super) fn dump(
        &mut self,
        ctx: &Context,
        module: &Module,
        pass: &str,
        position: usize,
        point: DumpPoint,
    ) -> io::Result<()> {
        let (word, suffix) = match point {
            DumpPoint::Before => ("Before", "before"),
            DumpPoint::After => ("After", "after"),
        };
        let header = format!("// -----// IR Dump {word} {pass} ({position}) //----- //\n");
        tracing::debug!(pass, position, point = suffix, "printing IR");
        match &self.print_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                let path = dir.join(format!("{position:02}-{pass}-{suffix}.qir"));
                let mut out = BufWriter::new(File::create(&path)?);
                out.write_all(header.as_bytes())?;
                print_module(ctx, module, &mut out)?;
                out.flush()
            }
            None => {
                let sink = &mut self.print_sink;
                sink.write_all(header.as_bytes())?;
                print_module(ctx, module, sink)?;
                sink.flush()
            }
        }
    }
}

/// A fingerprint of the module's printed text: its hash and length.
pub(super) fn text_fingerprint(ctx: &Context, module: &Module) -> (u64, u64) {
    struct HashWriter {
        hasher: DefaultHasher,
        len: u64,
    }
    impl Write for HashWriter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            // SipHash streams: the result depends on the bytes, not on how the
            // printer chunks them.
            self.hasher.write(buf);
            self.len += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut writer = HashWriter { hasher: DefaultHasher::new(), len: 0 };
    // invariant: HashWriter never fails, so neither does printing into it.
    let _ = print_module(ctx, module, &mut writer);
    (writer.hasher.finish(), writer.len)
}

/// `text` as one shell word: unchanged if it is made of safe characters, else in
/// single quotes.
pub(super) fn shell_word(text: &str) -> String {
    let safe = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | ':' | '=' | ','));
    if safe {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The flags that replay `pipeline` on a reproducer: `--pass='...'`, plus
/// `--allow-unregistered-dialect` when the context allowed it.
pub(super) fn replay_flags(pipeline: &str, allow_unregistered: bool) -> String {
    let mut flags = format!("--pass={}", shell_word_always_quoted(pipeline));
    if allow_unregistered {
        flags.push_str(" --allow-unregistered-dialect");
    }
    flags
}

fn shell_word_always_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The IR a reproducer starts from.
pub(super) enum ReproducerIr<'t> {
    /// The input as it was read.
    Text(&'t [u8]),
    /// A module, printed.
    Module(&'t Context, Module),
}

/// Writes `<dir>/<tool>-reproducer-<pid>-<pass>.qir`: a header line with the replay
/// flags, then the IR. Written to a temporary file first and renamed into
/// place. Returns the path, or the error with the path it was for.
pub(super) fn write_reproducer(
    dir: &Path,
    tool: &str,
    pass: &str,
    flags: &str,
    ir: ReproducerIr<'_>,
) -> Result<PathBuf, (PathBuf, io::Error)> {
    let file_name = format!("{tool}-reproducer-{}-{pass}.qir", std::process::id());
    let path = dir.join(&file_name);
    let temporary = dir.join(format!(".{file_name}.tmp"));
    let written = (|| {
        std::fs::create_dir_all(dir)?;
        let mut out = BufWriter::new(File::create(&temporary)?);
        writeln!(out, "// {tool}-reproducer: {flags}")?;
        match &ir {
            ReproducerIr::Text(text) => out.write_all(text)?,
            ReproducerIr::Module(ctx, module) => print_module(ctx, module, &mut out)?,
        }
        out.flush()?;
        drop(out);
        std::fs::rename(&temporary, &path)
    })();
    match written {
        Ok(()) => Ok(path),
        Err(error) => {
            let _ = std::fs::remove_file(&temporary);
            Err((path, error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_select_passes() {
        assert!(!PassFilter::None.matches("a"));
        assert!(PassFilter::All.matches("a"));
        let named = PassFilter::Named(vec!["a".to_string(), "c".to_string()]);
        assert!(named.matches("c") && !named.matches("b"));
    }

    #[test]
    fn after_change_applies_to_the_after_filter_or_everything() {
        let mut inst = Instrumentation { print_after_change: true, ..Instrumentation::default() };
        assert!(inst.tracks_change("x") && !inst.prints_after("x"));
        inst.print_after = PassFilter::Named(vec!["y".to_string()]);
        assert!(!inst.tracks_change("x") && inst.tracks_change("y"));
        inst.print_after_change = false;
        assert!(inst.prints_after("y") && !inst.tracks_change("y"));
    }

    #[test]
    fn shell_words_are_quoted_when_needed() {
        assert_eq!(shell_word("/tmp/a-b.qir"), "/tmp/a-b.qir");
        assert_eq!(shell_word("/tmp/my dir/a.qir"), "'/tmp/my dir/a.qir'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(replay_flags("a{s=\"x y\"}", false), "--pass='a{s=\"x y\"}'");
        assert_eq!(replay_flags("a", true), "--pass='a' --allow-unregistered-dialect");
    }

    #[test]
    fn debug_output_omits_the_sink() {
        let text = format!("{:?}", Instrumentation::default());
        assert!(text.contains("verify_each: true") && text.contains("tool_name: \"qopt\""), "{text}");
    }
}
