//! What the memory benchmarks share: running a pipeline in a fresh child
//! process (the benchmark binary itself, with `--child MODULE PIPELINE`)
//! that prints its peak resident memory, and growing calibration data.

use qopt_driver::{Cli, Driver};
use qopt_npy::RawArray;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// The flag that makes a benchmark binary run [`child`].
const CHILD_FLAG: &str = "--child";

/// Runs [`child`] and returns true when this process is a benchmark's child
/// (its arguments hold [`CHILD_FLAG`]); the benchmark's `main` then ends.
pub fn ran_as_child() -> bool {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == CHILD_FLAG) {
        Some(i) => {
            child(&args[i + 1..]);
            true
        }
        None => false,
    }
}

/// Runs `pipeline` on `module` in a child process of this benchmark; its peak
/// resident memory in kB and its wall time in seconds.
pub fn child_peak(module: &Path, pipeline: &str) -> (u64, f64) {
    let start = Instant::now();
    let out = Command::new(std::env::current_exe().expect("the bench binary"))
        .arg(CHILD_FLAG)
        .arg(module)
        .arg(pipeline)
        .output()
        .expect("running the child");
    let seconds = start.elapsed().as_secs_f64();
    assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).trim().parse().expect("a number of kB"), seconds)
}

/// In the child (`args` after [`CHILD_FLAG`]: module, pipeline): runs the
/// pipeline through the driver in process, then prints `VmHWM` in kB.
fn child(args: &[String]) {
    let (module, pipeline) = (&args[0], &args[1]);
    let driver = Driver::new("qopt");
    let pass = format!("--pass={pipeline}");
    let cli = <Cli as clap::Parser>::parse_from(["qopt", module.as_str(), pass.as_str(), "-o", "/dev/null"]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = driver.run_cli(&cli, &mut out, &mut err);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    println!("{kb}");
}

/// The rows of `array` repeated until there are `rows`.
pub fn repeat_rows(array: &RawArray, rows: usize) -> RawArray {
    let row = array.data.len() / array.shape[0];
    let data: Vec<u8> =
        (0..rows).flat_map(|i| array.data[(i % array.shape[0]) * row..][..row].to_vec()).collect();
    let mut shape = array.shape.clone();
    shape[0] = rows;
    RawArray::new(array.dtype, shape, data).expect("a consistent array")
}
