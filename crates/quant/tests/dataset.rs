//! Memory of streamed calibration data: reading every sample of a data set
//! peaks at the same resident memory for 5,000 samples as for 100.
//!
//! Each measurement runs in a child process (this test binary, running only
//! `rss_child`), which reads the data set call by call and reports its peak
//! resident set (`VmHWM`).

use qopt_interp::DType;
use qopt_npy::{write_npy_file, write_npz_file, RawArray};
use qopt_quant::runs::dataset::{ArgSpec, Dataset};
use std::path::{Path, PathBuf};

const ENV: &str = "QOPT_DATASET_RSS_FILE";
const SAMPLE: [usize; 3] = [3, 32, 32];

fn spec() -> Vec<ArgSpec> {
    vec![ArgSpec::new("arg0", DType::F32, vec![1, SAMPLE[0], SAMPLE[1], SAMPLE[2]])]
}

/// Not a test by itself: the body of the child process.
#[test]
#[ignore = "run by peak_rss_does_not_grow_with_the_samples in a child process"]
fn rss_child() {
    let Some(path) = std::env::var_os(ENV) else { return };
    let ds = Dataset::open(Path::new(&path), &spec()).unwrap();
    let mut sum = 0.0f64;
    for call in 0..ds.calls() {
        let t = ds.read_call(call).unwrap();
        sum += t[0].as_f32().unwrap().iter().map(|&v| f64::from(v)).sum::<f64>();
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hwm = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = hwm.split_whitespace().nth(1).unwrap().parse().unwrap();
    println!("rss-child samples={} sum={sum} peak-kb={kb}", ds.len());
}

fn peak_kb(path: &Path) -> (usize, u64) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["rss_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ENV, path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout
        .lines()
        .find_map(|l| l.find("rss-child ").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("{stdout}"));
    let field = |key: &str| -> &str {
        line.split_whitespace().find_map(|w| w.strip_prefix(key)).unwrap_or_else(|| panic!("{line}"))
    };
    (field("samples=").parse().unwrap(), field("peak-kb=").parse().unwrap())
}

fn samples(first: usize, n: usize) -> RawArray {
    let per: usize = SAMPLE.iter().product();
    let values: Vec<f32> = (first * per..(first + n) * per).map(|i| (i % 251) as f32 / 251.0).collect();
    RawArray::from_elements(vec![n, 1, SAMPLE[0], SAMPLE[1], SAMPLE[2]], &values).unwrap()
}

/// Writes `n` samples as `kind`: one `.npy`, one `.npz` (STORED), or a directory
/// of `.npy` files of 50 samples each.
fn write_samples(dir: &Path, kind: &str, n: usize) -> PathBuf {
    match kind {
        "npy" => {
            let path = dir.join(format!("{n}.npy"));
            write_npy_file(&path, &samples(0, n)).unwrap();
            path
        }
        "npz" => {
            let path = dir.join(format!("{n}.npz"));
            write_npz_file(&path, &[("arg0".to_string(), samples(0, n))]).unwrap();
            path
        }
        _ => {
            let path = dir.join(format!("dir{n}"));
            std::fs::create_dir(&path).unwrap();
            for first in (0..n).step_by(50) {
                write_npy_file(path.join(format!("{first:05}.npy")), &samples(first, 50)).unwrap();
            }
            path
        }
    }
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn peak_rss_does_not_grow_with_the_samples() {
    let dir = TempDir(std::env::temp_dir().join(format!("qopt-dataset-rss-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    for kind in ["npy", "npz", "dir"] {
        let small = write_samples(&dir.0, kind, 100);
        let large = write_samples(&dir.0, kind, 5000); // 61 MB of samples
        let (n_small, kb_small) = peak_kb(&small);
        let (n_large, kb_large) = peak_kb(&large);
        assert_eq!((n_small, n_large), (100, 5000));
        eprintln!("{kind}: peak RSS {kb_small} kB for 100 samples, {kb_large} kB for 5000");
        assert!(
            kb_large as f64 <= kb_small as f64 * 1.10,
            "{kind}: peak RSS {kb_large} kB for 5000 samples vs {kb_small} kB for 100"
        );
    }
}
