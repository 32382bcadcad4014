//! GFLOP/s of the interpreter's f32 GEMM (`src/gemm.rs`) against ndarray's
//! `general_mat_mul` (matrixmultiply) on ResNet-18's convolution shapes
//! (C[M×N] = W[M×K]·patches[K×N]) and its dense layer, single-threaded: the
//! median and the best of several runs (the best is the least disturbed by
//! other load on the machine).
//!
//! `cargo bench -p qopt-interp --bench gemm [-- MxKxN… | dense]` (arguments
//! select shapes).

use ndarray::linalg::general_mat_mul;
use ndarray::Array2;
use std::time::{Duration, Instant};

#[allow(dead_code)]
#[path = "../src/gemm.rs"]
mod gemm;

/// (M, K, N) of ResNet-18's convolutions at 224×224 input (batch 1).
const CONV: [(usize, usize, usize); 11] = [
    (64, 147, 12544), // conv1 7×7/2
    (64, 576, 3136),  // layer1 3×3
    (128, 576, 784),  // layer2 first 3×3/2
    (128, 1152, 784), // layer2 3×3
    (128, 64, 784),   // layer2 downsample 1×1/2
    (256, 1152, 196), // layer3 first 3×3/2
    (256, 2304, 196), // layer3 3×3
    (256, 128, 196),  // layer3 downsample
    (512, 2304, 49),  // layer4 first 3×3/2
    (512, 4608, 49),  // layer4 3×3
    (512, 256, 49),   // layer4 downsample
];

/// (median, best) seconds of calls of `f` after a warm-up call: enough calls
/// for ~0.3 s, at least 5.
fn time(mut f: impl FnMut()) -> (f64, f64) {
    f();
    let t = Instant::now();
    f();
    let one = t.elapsed().max(Duration::from_micros(1));
    let runs = (0.3 / one.as_secs_f64()).clamp(5.0, 500.0) as usize;
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[runs / 2], times[0])
}

fn main() {
    let fill = |r: usize, c: usize, s: f32| {
        Array2::from_shape_fn((r, c), |(i, j)| ((i * 31 + j * 17) as f32 * s).sin())
    };
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let gflops = |flops: f64, (med, best): (f64, f64)| (flops / med / 1e9, flops / best / 1e9);
    println!("GFLOP/s, median (best)");
    println!("{:>5} {:>5} {:>6}  {:>14} {:>14}", "M", "K", "N", "ours", "matrixmultiply");
    let (mut ours_total, mut mm_total, mut flops_total) = ((0.0, 0.0), (0.0, 0.0), 0.0);
    for &(m, k, n) in CONV.iter().filter(|(m, k, n)| wanted(&format!("{m}x{k}x{n}"))) {
        let (a, b) = (fill(m, k, 0.01), fill(k, n, 0.013));
        let mut c = Array2::<f32>::zeros((m, n));
        let (av, bv) = (a.as_slice().unwrap(), b.as_slice().unwrap());
        let ours = time(|| {
            gemm::sgemm(m, k, n, av, k, bv, n, c.as_slice_mut().unwrap(), n, false).unwrap();
        });
        let mm = time(|| general_mat_mul(1.0, &a, &b, 0.0, &mut c));
        let flops = 2.0 * (m * k * n) as f64;
        let ((om, ob), (mm_m, mm_b)) = (gflops(flops, ours), gflops(flops, mm));
        println!("{m:>5} {k:>5} {n:>6}  {om:>6.1} ({ob:>5.1}) {mm_m:>6.1} ({mm_b:>5.1})");
        ours_total = (ours_total.0 + ours.0, ours_total.1 + ours.1);
        mm_total = (mm_total.0 + mm.0, mm_total.1 + mm.1);
        flops_total += flops;
    }
    if flops_total > 0.0 {
        let ((om, ob), (mm_m, mm_b)) = (gflops(flops_total, ours_total), gflops(flops_total, mm_total));
        println!(
            "all: ours {:.2} ms, {om:.1} ({ob:.1}) GFLOP/s; matrixmultiply {:.2} ms, {mm_m:.1} ({mm_b:.1}) GFLOP/s",
            ours_total.0 * 1e3,
            mm_total.0 * 1e3,
        );
    }
    if !wanted("dense") {
        return;
    }
    // The dense layer: 1×512 · (1000×512)ᵀ, and a batch of 64.
    for rows in [1, 64] {
        let (x, w) = (fill(rows, 512, 0.01), fill(1000, 512, 0.013));
        let mut c = Array2::<f32>::zeros((rows, 1000));
        let (xv, wv) = (x.as_slice().unwrap(), w.as_slice().unwrap());
        let ours = time(|| {
            gemm::sgemm_bt(rows, 512, 1000, xv, 512, wv, 512, c.as_slice_mut().unwrap(), 1000, false)
                .unwrap();
        });
        let mm = time(|| general_mat_mul(1.0, &x, &w.t(), 0.0, &mut c));
        println!(
            "dense {rows}×512·(1000×512)ᵀ: ours {:.1} µs, matrixmultiply {:.1} µs (medians)",
            ours.0 * 1e6,
            mm.0 * 1e6,
        );
    }
}
