//! Golden files: one insta snapshot per `tests/ir-core/**/*.qir` file (repo root).
//!
//! Line one of each file names what to run on it:
//! - `// RUN: roundtrip`: parse (unregistered ops allowed), print; the snapshot is
//!   the printed text, and printing the re-parsed text must give it back unchanged;
//! - `// RUN: errors`: parsing must fail; the snapshot is the rendered diagnostics
//!   (`file:line:col: error: ...`, the source line and a caret), with the file named
//!   relative to the repository root so snapshots do not depend on the checkout;
//! - `--split-input-file` after either: the file is cut at `// -----` lines and
//!   each case runs alone (keeping the file's line numbers); outputs are joined
//!   with `// -----`.

use qopt_ir_core::{module_to_string, parse_module, parse_module_chunk, split_input, Context, SourceMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a golden file's header asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Roundtrip,
    Errors,
}

/// The parsed `// RUN:` line.
#[derive(Debug, Clone, Copy)]
struct Header {
    command: Command,
    split: bool,
}

fn parse_header(file: &str, source: &str) -> Header {
    let first = source.lines().next().unwrap_or("");
    let Some(run) = first.strip_prefix("// RUN:") else {
        panic!("{file}: line 1 must be `// RUN: <command> [--split-input-file]`, found {first:?}");
    };
    let mut words = run.split_whitespace();
    let command = match words.next() {
        Some("roundtrip") => Command::Roundtrip,
        Some("errors") => Command::Errors,
        other => panic!("{file}: unknown command {other:?} (expected roundtrip or errors)"),
    };
    let mut split = false;
    for flag in words {
        match flag {
            "--split-input-file" => split = true,
            other => panic!("{file}: unknown flag {other:?}"),
        }
    }
    Header { command, split }
}

fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// `tests/ir-core/...` for a path under the repository (with `/` separators).
fn repo_relative(path: &Path) -> String {
    let rel = path.strip_prefix(repo_root()).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// Runs one golden file and returns the text to snapshot.
fn run_golden(path: &Path) -> String {
    let name = repo_relative(path);
    let source = std::fs::read(path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let header = parse_header(&name, &String::from_utf8_lossy(&source));
    let mut sources = SourceMap::new();
    sources.add(name.as_str().into(), Arc::new(source.clone()));
    let chunks = if header.split {
        split_input(&source)
    } else {
        vec![qopt_ir_core::InputChunk { text: &source, line_offset: 0 }]
    };
    let mut outputs = Vec::new();
    for chunk in chunks {
        let mut ctx = Context::new();
        ctx.set_allow_unregistered(true);
        let first_line = chunk.line_offset + 1;
        let parsed = parse_module_chunk(&mut ctx, chunk.text, &name, chunk.line_offset);
        outputs.push(match (header.command, parsed) {
            (Command::Roundtrip, Ok(module)) => {
                let printed = module_to_string(&ctx, &module);
                assert_reprints(&mut ctx, &name, first_line, &printed);
                printed
            }
            (Command::Roundtrip, Err(diags)) => {
                panic!("{name}: case at line {first_line} should parse:\n{}", diags.render(&sources))
            }
            (Command::Errors, Err(diags)) => diags.render(&sources),
            (Command::Errors, Ok(module)) => panic!(
                "{name}: case at line {first_line} should fail to parse, but printed:\n{}",
                module_to_string(&ctx, &module)
            ),
        });
    }
    outputs.join("// -----\n")
}

/// print(parse(printed)) == printed.
fn assert_reprints(ctx: &mut Context, name: &str, first_line: u32, printed: &str) {
    let reparsed = parse_module(ctx, printed.as_bytes(), "<printed>").unwrap_or_else(|diags| {
        let mut sources = SourceMap::new();
        sources.add("<printed>".into(), Arc::new(printed.as_bytes().to_vec()));
        panic!(
            "{name}: printed case from line {first_line} does not parse:\n{}{printed}",
            diags.render(&sources)
        )
    });
    let reprinted = module_to_string(ctx, &reparsed);
    assert_eq!(reprinted, printed, "{name}: case at line {first_line} prints differently after a round trip");
}

#[test]
fn golden() {
    insta::glob!("../../../../tests/ir-core", "**/*.qir", |path| {
        insta::assert_snapshot!(run_golden(path));
    });
}
