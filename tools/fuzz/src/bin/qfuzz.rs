//! `qfuzz TARGET|all`: runs qopt's fuzz targets on the stable toolchain.
//! Inputs are the repository's test files of the target's kind (or
//! `--corpus` directories), then mutations of them, each made again from
//! `(seed, index)` alone. The first failing input (a panic, or a run longer
//! than `--timeout`) is saved under `--crash-dir` with the command that
//! makes it again, and the exit code is 1. Without coverage guidance this
//! is a smoke test; `fuzz/` runs the same targets under libFuzzer.

use clap::Parser;
use qopt_fuzz_targets::{mutate, Target, TARGETS};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    about = "Fuzz qopt's parser, ONNX importer and .npy reader with mutated test files (stable toolchain)",
    after_help = "Examples:\n  \
        qfuzz all --seconds 60                  each target for a minute (what .ci/run does)\n  \
        qfuzz parse_qir --seconds 600 --seed 3  ten minutes of the .qir parser with another seed\n  \
        qfuzz import_onnx --corpus my_models/   seed with your own ONNX models\n  \
        qfuzz parse_qir --seed 3 --only 81234   make input 81234 of that run again and check it"
)]
struct Cli {
    /// parse_qir, import_onnx, read_npy, or all.
    target: String,
    /// How long to fuzz each target.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Stop each target after this many inputs (even before --seconds).
    #[arg(long, value_name = "N")]
    runs: Option<u64>,
    /// The seed of the mutations.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Check only input number I of the run (to reproduce a failure).
    #[arg(long, value_name = "I")]
    only: Option<u64>,
    /// Directories of seed inputs (default: the repository's tests/ and examples/).
    #[arg(long, value_name = "DIR")]
    corpus: Vec<PathBuf>,
    /// An input running longer than this many seconds is a failure (a hang).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// Where a failing input is saved.
    #[arg(long, value_name = "DIR", default_value = "target/qfuzz")]
    crash_dir: PathBuf,
}

/// Seed files larger than this are left out: they make each run slow.
const MAX_SEED_BYTES: u64 = 1 << 20;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let targets: Vec<&Target> = match cli.target.as_str() {
        "all" => TARGETS.iter().collect(),
        name => match TARGETS.iter().find(|t| t.name == name) {
            Some(t) => vec![t],
            None => {
                let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
                eprintln!("qfuzz: error: unknown target '{name}' (targets: {}, all)", names.join(", "));
                return std::process::ExitCode::from(2);
            }
        },
    };
    install_quiet_panic_hook();
    for target in targets {
        if let Err(message) = fuzz(&cli, target) {
            eprintln!("qfuzz: {message}");
            return std::process::ExitCode::from(1);
        }
    }
    std::process::ExitCode::SUCCESS
}

/// The message of the last panic, captured instead of printed.
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

fn install_quiet_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = format!("{message}{at}");
    }));
}

fn fuzz(cli: &Cli, target: &'static Target) -> Result<(), String> {
    let seeds = Arc::new(seed_inputs(cli, target)?);
    let words = target.dictionary;
    let failure = |i: u64, data: &[u8], what: &str| {
        failure_report(&cli.crash_dir, target.name, cli.seed, i, data, what)
    };

    // A watchdog ends the process when one input runs past --timeout.
    let current = Arc::new(AtomicU64::new(u64::MAX));
    let started_ms = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let epoch = Instant::now();
    let watchdog = {
        let (current, started_ms, finished, seeds) =
            (current.clone(), started_ms.clone(), finished.clone(), seeds.clone());
        let (timeout, seed, crash_dir) = (cli.timeout, cli.seed, cli.crash_dir.clone());
        std::thread::spawn(move || {
            while !finished.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(100));
                let i = current.load(Ordering::Acquire);
                let elapsed =
                    (epoch.elapsed().as_millis() as u64).saturating_sub(started_ms.load(Ordering::Acquire));
                if i != u64::MAX && elapsed > timeout * 1000 {
                    let data = mutate::input(&seeds, words, seed, i);
                    let what = format!("ran longer than {timeout} s");
                    eprintln!("qfuzz: {}", failure_report(&crash_dir, target.name, seed, i, &data, &what));
                    std::process::exit(1);
                }
            }
        })
    };

    let deadline = epoch + Duration::from_secs(cli.seconds);
    let indices: Box<dyn Iterator<Item = u64>> = match cli.only {
        Some(i) => Box::new(std::iter::once(i)),
        None => Box::new(0..cli.runs.unwrap_or(u64::MAX)),
    };
    let mut runs = 0u64;
    let mut result = Ok(());
    for i in indices {
        if cli.only.is_none() && Instant::now() >= deadline {
            break;
        }
        let data = mutate::input(&seeds, words, cli.seed, i);
        started_ms.store(epoch.elapsed().as_millis() as u64, Ordering::Release);
        current.store(i, Ordering::Release);
        let outcome = std::panic::catch_unwind(|| (target.run)(&data));
        current.store(u64::MAX, Ordering::Release);
        runs += 1;
        if outcome.is_err() {
            let message = std::mem::take(&mut *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()));
            result = Err(failure(i, &data, &format!("panicked: {message}")));
            break;
        }
    }
    finished.store(true, Ordering::Release);
    let _ = watchdog.join();
    let seconds = epoch.elapsed().as_secs_f64();
    eprintln!(
        "qfuzz: {}: {runs} inputs in {seconds:.1} s ({:.0}/s) from {} seeds, seed {}{}",
        target.name,
        runs as f64 / seconds.max(1e-9),
        seeds.len(),
        cli.seed,
        if result.is_ok() { ", no failure" } else { "" }
    );
    result
}

/// Saves a failing input under `crash_dir` and says how to make it again.
fn failure_report(crash_dir: &Path, target: &str, seed: u64, i: u64, data: &[u8], what: &str) -> String {
    let path = crash_dir.join(format!("{target}-seed{seed}-input{i}"));
    let saved = match std::fs::create_dir_all(crash_dir).and_then(|()| std::fs::write(&path, data)) {
        Ok(()) => format!("saved to {}", path.display()),
        Err(e) => format!("could not save it to {}: {e}", path.display()),
    };
    format!(
        "{target}: input {i} {what}; {saved}; make it again with `qfuzz {target} --seed {seed} --only {i}`"
    )
}

/// The seed inputs: files with the target's extensions under the corpus
/// directories (default: the repository's tests/ and examples/), in a fixed
/// order so runs are repeatable.
fn seed_inputs(cli: &Cli, target: &Target) -> Result<Vec<Vec<u8>>, String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dirs: Vec<PathBuf> = if cli.corpus.is_empty() {
        vec![repo.join("tests"), repo.join("examples")]
    } else {
        cli.corpus.clone()
    };
    let mut files = Vec::new();
    let mut stack = dirs.clone();
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("cannot read '{}': {e}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.len() <= MAX_SEED_BYTES
                && path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| target.seed_extensions.contains(&e))
            {
                files.push(path);
            }
        }
    }
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().filter_map(|f| std::fs::read(f).ok()).collect();
    if seeds.is_empty() {
        let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        return Err(format!(
            "{}: no seed files (*.{}) under {}; give --corpus DIR",
            target.name,
            target.seed_extensions.join(", *."),
            shown.join(", ")
        ));
    }
    Ok(seeds)
}
