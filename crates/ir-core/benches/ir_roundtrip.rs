//! IR speed and memory benchmark: generates modules of 100,000 and 1,000,000 ops
//! (chains of fp-dialect elementwise and convolution ops with small constants, some
//! multi-result ops, several functions), writes each to `target/bench-ir/`, and
//! reports parse, verify and print times and the peak resident memory of each
//! phase separately.
//!
//! Run: `cargo bench -p qopt-ir-core --bench ir_roundtrip` (add `-- 1000000` to
//! run one size). The end-to-end `qopt FILE` round trip on the written files is
//! measured with `/usr/bin/time -v target/release/qopt target/bench-ir/ops-1000000.qir -o target/bench-ir/out.qir`.

use qopt_ir_core::{parse_source, print_module, verify, Context, SourceText};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

const FUNCTIONS: usize = 10;

/// Generated `.qir` with about `ops` ops.
fn generate(ops: usize) -> String {
    let per_func = ops / FUNCTIONS;
    let t = "tensor<1x8x16x16xf32>";
    let w = "tensor<8x8x3x3xf32>";
    let b = "tensor<8xf32>";
    let h = "tensor<1x4x16x16xf32>";
    let mut s = String::with_capacity(ops * 130);
    s.push_str("module {\n");
    for f in 0..FUNCTIONS {
        let _ = writeln!(s, "  func.func @f{f}(%arg0: {t}, %arg1: {w}) -> {t} {{");
        let mut last = "%arg0".to_string();
        let mut n = 0usize;
        let mut emitted = 2usize; // the return and the function itself
        while emitted < per_func {
            match n % 8 {
                0 => {
                    let _ = writeln!(s, "    %{n} = fp.constant() {{value = dense<[0.5, -1.0, 2.0, 0.25, 1.0, 0.0, -0.5, 3.0]> : {b}}} : () -> {b}");
                }
                1 => {
                    let _ = writeln!(s, "    %{n} = fp.conv2d({last}, %arg1, %{}) {{pad = [1, 1, 1, 1], stride = [1, 1]}} : ({t}, {w}, {b}) -> {t}", n - 1);
                    last = format!("%{n}");
                }
                2 | 5 => {
                    let _ = writeln!(s, "    %{n} = fp.relu({last}) : ({t}) -> {t}");
                    last = format!("%{n}");
                }
                3 => {
                    let _ = writeln!(
                        s,
                        "    %{n}:2 = fp.split({last}) {{axis = 1, sizes = [4, 4]}} : ({t}) -> ({h}, {h})"
                    );
                }
                4 => {
                    let _ = writeln!(
                        s,
                        "    %{n} = fp.concat(%{}#0, %{}#1) {{axis = 1}} : ({h}, {h}) -> {t}",
                        n - 1,
                        n - 1
                    );
                    last = format!("%{n}");
                }
                _ => {
                    let _ = writeln!(s, "    %{n} = fp.add({last}, %arg0) : ({t}, {t}) -> {t}");
                    last = format!("%{n}");
                }
            }
            n += 1;
            emitted += 1;
        }
        let _ = writeln!(s, "    func.return {last} : {t}\n  }}");
    }
    s.push_str("}\n");
    s
}

/// Resets the kernel's peak-RSS counter for this process.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set size since the last reset, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn current_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn run(ops: usize, dir: &std::path::Path) {
    let path = dir.join(format!("ops-{ops}.qir"));
    {
        let text = generate(ops);
        std::fs::write(&path, &text).expect("write the generated module");
    }
    let mut ctx = Context::new();
    if let Err(e) = qopt_dialect_fp::register(&mut ctx) {
        panic!("registering the fp dialect: {e}");
    }
    let base = current_rss();

    reset_peak();
    let t0 = Instant::now();
    let source = SourceText::read_file(&path).expect("map the generated module");
    let module = match parse_source(&mut ctx, &source, &path.to_string_lossy()) {
        Ok(m) => m,
        Err(d) => panic!("generated module does not parse: {d}"),
    };
    let parse = t0.elapsed();
    let parse_peak = peak_rss().saturating_sub(base);
    drop(source);
    let n = module.count_ops();

    reset_peak();
    let t1 = Instant::now();
    if let Err(d) = verify(&mut ctx, &module) {
        panic!("generated module does not verify: {d}");
    }
    let verify_time = t1.elapsed();
    let verify_peak = peak_rss().saturating_sub(base);

    reset_peak();
    let t2 = Instant::now();
    let out = std::fs::File::create(dir.join(format!("ops-{ops}.out.qir"))).expect("create output");
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
    print_module(&ctx, &module, &mut out).expect("print");
    out.flush().expect("flush");
    let print = t2.elapsed();
    let print_peak = peak_rss().saturating_sub(base);

    let total = parse + verify_time + print;
    let per_op = |b: u64| b as f64 / n as f64;
    println!(
        "{n:>9} ops | parse {:>7.1} ms ({:>5.0} B/op) | verify {:>6.1} ms ({:>5.0} B/op) | print {:>6.1} ms ({:>5.0} B/op) | total {:>7.1} ms | IR arenas {:.0} B/op",
        parse.as_secs_f64() * 1e3,
        per_op(parse_peak),
        verify_time.as_secs_f64() * 1e3,
        per_op(verify_peak),
        print.as_secs_f64() * 1e3,
        per_op(print_peak),
        total.as_secs_f64() * 1e3,
        per_op(module.heap_bytes() as u64),
    );
}

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![100_000, 1_000_000] } else { sizes };
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-ir");
    std::fs::create_dir_all(&dir).expect("create target/bench-ir");
    println!("peak memory is the resident-set high-water mark of each phase above the process's baseline");
    for ops in sizes {
        run(ops, &dir);
    }
}
