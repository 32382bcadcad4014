//! GFLOP/s of the interpreter's f32 GEMM (`src/gemm.rs`) against ndarray's
//! `general_mat_mul` (matrixmultiply) on ResNet-18's convolution shapes
//! (C[M×N] = W[M×K]·patches[K×N]) and its dense layer, single-threaded: the
//! median and the best of several runs (the best is the least disturbed by
//! other load on the machine).
//!
//! `cargo bench -p qopt-interp --bench gemm [-- MxKxN… | dense | patches]`
//! (arguments select shapes; `patches` times the same convolutions through
//! `sgemm_patches`, which packs its panels straight from the input image, as
//! the interpreter's conv kernel does).

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

/// ResNet-18's convolutions as the interpreter runs them: (input channels,
/// input size, output channels, kernel, stride, padding), square.
const CONV_PATCHES: [(usize, usize, usize, usize, usize, usize); 11] = [
    (3, 224, 64, 7, 2, 3),
    (64, 56, 64, 3, 1, 1),
    (64, 56, 128, 3, 2, 1),
    (128, 28, 128, 3, 1, 1),
    (64, 56, 128, 1, 2, 0),
    (128, 28, 256, 3, 2, 1),
    (256, 14, 256, 3, 1, 1),
    (128, 28, 256, 1, 2, 0),
    (256, 14, 512, 3, 2, 1),
    (512, 7, 512, 3, 1, 1),
    (256, 14, 512, 1, 2, 0),
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
    if wanted("patches") {
        patches(&fill, &gflops);
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

/// Times [`CONV_PATCHES`] through `sgemm_patches` (skipped without AVX-512F,
/// where the interpreter unrolls the patches and calls `sgemm`).
fn patches(fill: &dyn Fn(usize, usize, f32) -> Array2<f32>, gflops: &dyn Fn(f64, (f64, f64)) -> (f64, f64)) {
    let (mut total, mut flops_total) = ((0.0, 0.0), 0.0);
    println!("patches: Cin  H   Cout k s   ours GFLOP/s median (best)");
    for &(ci, h, co, kk, s, pad) in &CONV_PATCHES {
        let o = (h + 2 * pad - kk) / s + 1;
        let (w, x) = (fill(co, ci * kk * kk, 0.01), fill(ci, h * h, 0.013));
        let p = gemm::Patches {
            x: x.as_slice().unwrap(),
            c: ci,
            h,
            w: h,
            kh: kk,
            kw: kk,
            stride: [s, s],
            pad: [pad, pad],
            dilation: [1, 1],
            oh: o,
            ow: o,
        };
        let mut c = vec![0f32; co * o * o];
        let bias = vec![0.5f32; co];
        let (k, n) = (ci * kk * kk, o * o);
        if !gemm::sgemm_patches(co, w.as_slice().unwrap(), k, &p, Some(&bias), &mut c, n).unwrap() {
            println!("patches: no AVX-512F on this CPU, skipped");
            return;
        }
        let t = time(|| {
            gemm::sgemm_patches(co, w.as_slice().unwrap(), k, &p, Some(&bias), &mut c, n).unwrap();
        });
        let flops = 2.0 * (co * k * n) as f64;
        let (med, best) = gflops(flops, t);
        println!("       {ci:>4} {h:>3} {co:>4} {kk} {s}   {med:>6.1} ({best:>5.1})");
        total = (total.0 + t.0, total.1 + t.1);
        flops_total += flops;
    }
    let (med, best) = gflops(flops_total, total);
    println!("patches all: {:.2} ms, {med:.1} ({best:.1}) GFLOP/s", total.0 * 1e3);
}
