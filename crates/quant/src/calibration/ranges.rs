//! The built-in range methods of `insert-fakeq{method=...}`.
//!
//! | name | reads | chooses |
//! |---|---|---|
//! | `minmax` | `min`, `max` (per channel) | the observed range |
//! | `percentile` | the histogram | the range between the `(100 − p)`th and `p`th percentiles (of `|x|` for symmetric types) |
//! | `entropy` | the histogram | `[−T, T]` with the threshold `T` of TensorRT's KL-divergence calibration |
//! | `mse` | the histogram | the shrunk range with the least expected squared quantization error |
//!
//! The three histogram methods are per tensor and share some conventions:
//!
//! - **Values in a bin.** A bin's count is taken as spread uniformly over the
//!   bin intersected with the observed `[min, max]` (the bin itself if they do
//!   not meet): the bins at the ends of the histogram reach past the data.
//! - **The result** is clamped into the observed range: a range `[a, b]`
//!   becomes `[clamp(a, min, max), clamp(b, min, max)]`, so it is always
//!   finite with `min ≤ lo ≤ hi ≤ max`; `insert-fakeq` then widens it to
//!   contain 0.
//! - **Nothing to choose from.** A histogram without counts, or whose bins have
//!   no width, gives the observed `[min, max]`.
//! - **The `|x|` histogram** (`percentile` on symmetric types, `entropy`) folds
//!   the signed histogram around 0 into bins `[k·w, (k + 1)·w)` of the same
//!   width `w`. On qopt's power-of-two grid 0 is a bin edge and the fold is
//!   exact: each bin lands whole in one `|x|` bin (a negative value on a bin
//!   edge, `x = −k·w`, counts in `[(k − 1)·w, k·w)`, as its bin
//!   `[−k·w, −(k − 1)·w)` folds there). A stored histogram off the grid is
//!   folded approximately: `|x|` over
//!   `[0, max(|hist_min|, |hist_max|)]` in as many bins as the histogram has,
//!   each bin's count spread uniformly over the `|x|` interval it covers.

use crate::calibration::histogram::Histogram;
use crate::calibration::methods::{RangeMethod, RangeTarget};
use crate::calibration::stats::ObserverStats;
use std::sync::Arc;

/// The built-in range methods, default first.
pub(crate) fn builtin() -> Vec<Arc<dyn RangeMethod>> {
    vec![Arc::new(MinMaxRange), Arc::new(PercentileRange), Arc::new(EntropyRange), Arc::new(MseRange)]
}

/// `minmax`: the observed minimum and maximum.
pub struct MinMaxRange;

impl RangeMethod for MinMaxRange {
    fn name(&self) -> &'static str {
        "minmax"
    }
    fn summary(&self) -> &'static str {
        "the observed minimum and maximum"
    }
    fn range(&self, stats: &ObserverStats, _target: &RangeTarget) -> Result<Vec<(f64, f64)>, String> {
        Ok(stats.min.iter().zip(&stats.max).map(|(&lo, &hi)| (lo as f64, hi as f64)).collect())
    }
}

/// `percentile`: clips the `(100 − p)` % tails, with `p` the observer's
/// `percentile` attribute if it has one, else the `percentile` option of
/// `insert-fakeq` (default 99.99); it arrives as [`RangeTarget::percentile`].
///
/// Let `N` be the total count and `x(q)` the value below which a fraction `q`
/// of the values lies, interpolated linearly inside its bin: with `C_k` the
/// count of the bins before bin `k`, `x(q)` lies in the first non-empty bin
/// `k` with `C_k + c_k ≥ q·N`, at `s_k + (q·N − C_k) / c_k · (t_k − s_k)`,
/// where `[s_k, t_k]` is the bin's part of `[min, max]`. With `q = max(p, 100 − p) / 100`
/// (so `p` and `100 − p` mean the same):
///
/// - **asymmetric types**: `hi = x(q)`, the value below which `p` % of the
///   values lie, and `lo = x(1 − q)`, the value below which `100 − p` % lie;
///   each tail loses `(100 − p)` % of the values. When every value is `≥ 0`,
///   `lo = min` (`insert-fakeq` widens the range to 0 anyway, so clipping the
///   small values would only lose them); likewise `hi = max` when every value
///   is `≤ 0`.
/// - **symmetric types**: `T = x(q)` of the `|x|` histogram (whose bins' parts
///   are taken within `[0, max(|min|, |max|)]`, or from the smallest `|x|`
///   when all values have one sign), and the range is
///   `[max(min, −T), min(max, T)]`: `(100 − p)` % of the values are clipped
///   in all, from either side.
///
/// `p = 100` gives `[min, max]`.
///
/// ONNX Runtime's percentile calibrator, for comparison, takes for symmetric
/// quantization the same `|x|` percentile (at the lower edge of the bin where
/// the cumulative count crosses it, without interpolation), and for
/// asymmetric quantization cuts `(100 − p) / 2` % from each side of the
/// signed histogram. qopt follows it for symmetric types, whose range has a
/// single threshold, but gives each side of an asymmetric range the whole
/// `(100 − p)` %: a one-sided distribution (relu outputs) then loses exactly
/// `(100 − p)` % under both schemes, and `p` is the percentile of each end as
/// users read it.
pub struct PercentileRange;

impl RangeMethod for PercentileRange {
    fn name(&self) -> &'static str {
        "percentile"
    }
    fn summary(&self) -> &'static str {
        "clips the (100 - p)% tails of the histogram ('percentile' p; of |x| for symmetric types)"
    }
    fn needs_histogram(&self) -> bool {
        true
    }
    fn range(&self, stats: &ObserverStats, target: &RangeTarget) -> Result<Vec<(f64, f64)>, String> {
        let obs = Observed::of(stats, self.name())?;
        let p = target.percentile;
        if !(p > 0.0 && p <= 100.0) {
            return Err(format!("method 'percentile' needs a percentile in (0, 100], got {p}"));
        }
        let q = p.max(100.0 - p) / 100.0;
        if target.symmetric {
            let Some(abs) = AbsHistogram::fold(obs.hist) else { return Ok(vec![obs.whole()]) };
            let (abs_lo, abs_hi) = obs.abs_range();
            let w = abs.width;
            let bounds = |k: usize| spread(k as f64 * w, (k + 1) as f64 * w, abs_lo, abs_hi);
            let Some(t) = quantile(&abs.counts, bounds, q) else { return Ok(vec![obs.whole()]) };
            return Ok(vec![obs.limit(-t, t)]);
        }
        let counts: Vec<f64> = obs.hist.counts().iter().map(|&c| c as f64).collect();
        let bounds = |k: usize| obs.bin(k);
        let hi = if obs.max <= 0.0 { Some(obs.max) } else { quantile(&counts, bounds, q) };
        let lo = if obs.min >= 0.0 { Some(obs.min) } else { quantile(&counts, bounds, 1.0 - q) };
        match (lo, hi) {
            (Some(lo), Some(hi)) => Ok(vec![obs.limit(lo, hi)]),
            _ => Ok(vec![obs.whole()]),
        }
    }
}

/// The most `|x|` bins `entropy` searches; more are merged in pairs first.
const ENTROPY_MAX_BINS: usize = 2048;

/// The `ε` with which `entropy` smooths zero entries of its distributions, in counts.
const KL_SMOOTHING: f64 = 1e-4;

/// `entropy`: TensorRT's KL-divergence calibration ("8-bit inference with
/// TensorRT", as ONNX Runtime's entropy calibrator): the symmetric threshold
/// `T` whose quantized distribution loses the least information.
///
/// On the `|x|` histogram `h_0 … h_{n−1}` of bin width `w` (merged in pairs of
/// adjacent bins while `n > 2048`), with `L = floor(levels / 2)` (the positive
/// levels of the type, `levels = qmax − qmin + 1`: 128 for 8 bits), every `i`
/// from `L` to `n` is a candidate:
///
/// 1. `P` = the first `i` bins, with the outliers added into the last:
///    `P_k = h_k` for `k < i − 1`, `P_{i−1} = h_{i−1} + Σ_{k ≥ i} h_k`.
/// 2. `Q`: the first `i` bins (without the outliers) merged into `L` chunks of
///    `m = floor(i / L)` adjacent bins (the last chunk also takes the
///    remaining `i − L·m`), each chunk's sum expanded back evenly over the
///    chunk's bins where `P ≠ 0`; `Q_k = 0` where `P_k = 0`.
/// 3. Both are smoothed as ONNX Runtime and MXNet do: in a distribution with
///    `z` zero and `nz` non-zero entries, zeros become `ε = 10⁻⁴` (in counts)
///    and non-zero entries lose `ε·z / nz`, so the sum stays the same (`ε` is
///    lowered so that no entry drops below half the smallest non-zero one).
/// 4. `D_i = KL(P‖Q) = Σ_k p_k ln(p_k / q_k)` with `p`, `q` the smoothed `P`,
///    `Q` normalized to sum 1 (candidates whose first `i` bins are all empty
///    are skipped).
///
/// The first `i` with the least `D_i` gives `T = i·w` (the upper edge of the
/// last bin kept), and the range is `[max(min, −T), min(max, T)]`, for
/// symmetric and asymmetric types alike. With `n ≤ L` (more levels than
/// bins, as for 16-bit types) nothing is clipped: `[min, max]`.
///
/// As in TensorRT, `Q` is spread over the non-empty bins only, so values far
/// out in an otherwise empty chunk cost nothing: the method clips long,
/// thinning tails, but keeps a lone outlier next to a flat distribution.
/// Optimized, the search takes about 10 ms for 2048 bins.
pub struct EntropyRange;

impl RangeMethod for EntropyRange {
    fn name(&self) -> &'static str {
        "entropy"
    }
    fn summary(&self) -> &'static str {
        "symmetric threshold minimizing the KL divergence of the quantized |x| histogram (TensorRT)"
    }
    fn needs_histogram(&self) -> bool {
        true
    }
    fn range(&self, stats: &ObserverStats, target: &RangeTarget) -> Result<Vec<(f64, f64)>, String> {
        let obs = Observed::of(stats, self.name())?;
        let Some(mut abs) = AbsHistogram::fold(obs.hist) else { return Ok(vec![obs.whole()]) };
        abs.coarsen(ENTROPY_MAX_BINS);
        // Values of one sign under an asymmetric scheme get every level over
        // [0, T]; otherwise half of them cover each side.
        let one_signed = obs.min >= 0.0 || obs.max <= 0.0;
        let levels = if one_signed && !target.symmetric { target.levels() } else { target.levels() / 2 };
        let half_levels = usize::try_from(levels).unwrap_or(usize::MAX).max(1);
        // The first |x| bin holds every exact zero (half of a relu's output):
        // such a spike makes any merging of it with its neighbours look costly
        // and drives the threshold far too low. Like NVIDIA's
        // pytorch-quantization, the search sees it with its neighbour's count.
        if abs.counts.len() > 1 {
            abs.counts[0] = abs.counts[1];
        }
        match kl_threshold_bins(&abs.counts, half_levels) {
            Some(i) => {
                let t = i as f64 * abs.width;
                Ok(vec![obs.limit(-t, t)])
            }
            None => Ok(vec![obs.whole()]),
        }
    }
}

/// The number of `|x|` bins `i` that [`EntropyRange`] keeps, or `None` when
/// there is nothing to search (fewer bins than `half_levels`, or no counts).
fn kl_threshold_bins(h: &[f64], half_levels: usize) -> Option<usize> {
    let n = h.len();
    if n <= half_levels {
        return None;
    }
    let total: f64 = h.iter().sum();
    if !(total > 0.0 && total.is_finite()) {
        return None;
    }
    // Prefix sums, prefix counts of non-empty bins, prefix minima of the
    // non-empty bins, and the outliers beyond each bin.
    let mut sum = vec![0.0; n + 1];
    let mut nonzero = vec![0usize; n + 1];
    let mut smallest = vec![f64::INFINITY; n + 1];
    for (k, &c) in h.iter().enumerate() {
        sum[k + 1] = sum[k] + c;
        nonzero[k + 1] = nonzero[k] + usize::from(c > 0.0);
        smallest[k + 1] = if c > 0.0 { smallest[k].min(c) } else { smallest[k] };
    }
    let mut beyond = vec![0.0; n + 1];
    for k in (0..n).rev() {
        beyond[k] = beyond[k + 1] + h[k];
    }
    let mut chunks: Vec<(usize, usize, f64, usize)> = Vec::with_capacity(half_levels);
    let mut best: Option<(f64, usize)> = None;
    for i in half_levels..=n {
        let last = h[i - 1] + beyond[i];
        let p = |k: usize| if k == i - 1 { last } else { h[k] };
        let nnz_p = nonzero[i - 1] + usize::from(last > 0.0);
        let min_p = if last > 0.0 { smallest[i - 1].min(last) } else { smallest[i - 1] };
        // The chunks of Q: (start, end, sum of h, non-zero entries of P).
        let merged = i / half_levels;
        chunks.clear();
        let (mut nnz_q, mut min_q, mut sum_q) = (0usize, f64::INFINITY, 0.0);
        for j in 0..half_levels {
            let start = j * merged;
            let end = if j + 1 == half_levels { i } else { start + merged };
            let occupied = nonzero[end] - nonzero[start];
            let q_sum = if occupied > 0 { (sum[end] - sum[start]).max(0.0) } else { 0.0 };
            let nnz =
                if end == i { nonzero[i - 1] - nonzero[start] + usize::from(last > 0.0) } else { occupied };
            if q_sum > 0.0 && nnz > 0 {
                nnz_q += nnz;
                min_q = min_q.min(q_sum / nnz as f64);
                sum_q += q_sum;
            }
            chunks.push((start, end, q_sum, nnz));
        }
        if sum_q <= 0.0 || nnz_p == 0 {
            continue;
        }
        let (eps_p, cut_p) = smoothing(i, nnz_p, min_p);
        let (eps_q, cut_q) = smoothing(i, nnz_q, min_q);
        // Σ p'·ln(p'/q') over the bins; where P is 0, so is Q.
        let mut s = (i - nnz_p) as f64 * eps_p * (eps_p / eps_q).ln();
        for &(start, end, q_sum, nnz) in &chunks {
            if nnz == 0 {
                continue;
            }
            let q = if q_sum > 0.0 { q_sum / nnz as f64 - cut_q } else { eps_q };
            let ln_q = q.ln();
            for k in start..end {
                let pk = p(k);
                if pk > 0.0 {
                    let pk = pk - cut_p;
                    s += pk * (pk.ln() - ln_q);
                }
            }
        }
        let divergence = s / total + (sum_q / total).ln();
        if divergence.is_finite() && best.is_none_or(|(d, _)| divergence < d) {
            best = Some((divergence, i));
        }
    }
    best.map(|(_, i)| i)
}

/// The smoothing of a distribution of `n` entries, `nonzero` of them non-zero
/// and the smallest of those `min_nonzero`: `(ε, ε·zeros / nonzero)`, what
/// zeros get and non-zero entries lose.
fn smoothing(n: usize, nonzero: usize, min_nonzero: f64) -> (f64, f64) {
    let zeros = n - nonzero.min(n);
    if zeros == 0 || nonzero == 0 {
        return (KL_SMOOTHING, 0.0);
    }
    let ratio = zeros as f64 / nonzero as f64;
    let cut = KL_SMOOTHING * ratio;
    if cut < 0.5 * min_nonzero {
        (KL_SMOOTHING, cut)
    } else {
        let cut = 0.5 * min_nonzero;
        (cut / ratio, cut)
    }
}

/// The shrink factors `mse` tries: `k / MSE_STEPS` for `k = 1 … MSE_STEPS`.
const MSE_STEPS: usize = 100;

/// The most alternating rounds of `mse`'s per-end refinement.
const MSE_ROUNDS: usize = 4;

/// The most bins `mse` evaluates; larger histograms are read in groups of
/// `2^k` adjacent bins.
const MSE_MAX_BINS: usize = 4096;

/// `mse`: the range with the least expected squared quantization error over
/// the histogram.
///
/// **The quantizer of a candidate.** A candidate range `[a, b]` is widened to
/// contain 0 as `insert-fakeq` does, then quantized like it: asymmetric types
/// get `Δ = (b − a) / (qmax − qmin)` and the zero point
/// `z = clamp(round(qmin − a/Δ), qmin, qmax)`; symmetric types get
/// `Δ = max(−a, b) / ((qmax − qmin) / 2)` and `z = 0` (the middle value
/// `(qmin + qmax + 1) / 2` for unsigned storage, `qmin ≥ 0`). A value `x` is
/// represented by `Q(x) = Δ·(clamp(round(x/Δ) + z, qmin, qmax) − z)`: inside
/// `[Δ(qmin − z), Δ(qmax − z)]` it is rounded to a multiple of `Δ`, outside it
/// is clipped to the nearest end.
///
/// **The error of a candidate** is `E = Σ_k c_k · mean_{x ∈ [s_k, t_k]} (x − Q(x))²`,
/// where bin `k` holds `c_k` values spread uniformly over `[s_k, t_k]` (its part of
/// `[min, max]`), computed exactly: `∫(x − e)²dx` for the clipped parts, and
/// for the rounded part the integral of the squared sawtooth `x − Δ·round(x/Δ)`
/// (`Δ³/12` per whole step). A bin spanning whole steps thus counts `Δ²/12` per
/// value (the usual uniform-noise term), and a bin much narrower than `Δ`
/// counts the rounding error of its position.
///
/// **The candidates**, with `[lo, hi] = [min(min, 0), max(max, 0)]` and
/// `α = k/100` for `k = 1 … 100`:
///
/// - symmetric types: `[max(lo, −α·M), min(hi, α·M)]` with `M = max(−lo, hi)`;
/// - asymmetric types: `[α·lo, α·hi]`, then each end alone: keeping the best
///   `hi'`, every `α·lo`, then keeping the best `lo'`, every `α·hi`,
///   alternating until nothing changes (at most 4 rounds).
///
/// The candidate with the least `E` wins; among equal errors (to 10⁻¹² relative)
/// the widest. Histograms of more than 4096 bins are evaluated in groups of
/// `2^k` adjacent bins.
pub struct MseRange;

impl RangeMethod for MseRange {
    fn name(&self) -> &'static str {
        "mse"
    }
    fn summary(&self) -> &'static str {
        "the shrunk range with the least expected squared quantization error over the histogram"
    }
    fn needs_histogram(&self) -> bool {
        true
    }
    fn range(&self, stats: &ObserverStats, target: &RangeTarget) -> Result<Vec<(f64, f64)>, String> {
        let obs = Observed::of(stats, self.name())?;
        let (lo, hi) = (obs.min.min(0.0), obs.max.max(0.0));
        let bins = obs.grouped_bins(MSE_MAX_BINS);
        if hi <= lo || bins.is_empty() {
            return Ok(vec![obs.whole()]);
        }
        let error = |a: f64, b: f64| match Quantizer::new(a, b, target) {
            Some(q) => bins.iter().map(|&(s, t, c)| c * q.mean_sq_error(s, t)).sum(),
            None => f64::INFINITY,
        };
        let alpha = |k: usize| k as f64 / MSE_STEPS as f64;
        let mut best = Candidate { error: f64::INFINITY, lo, hi };
        if target.symmetric {
            let m = (-lo).max(hi);
            for k in (1..=MSE_STEPS).rev() {
                let (a, b) = (lo.max(-alpha(k) * m), hi.min(alpha(k) * m));
                best.consider(error(a, b), a, b);
            }
        } else {
            for k in (1..=MSE_STEPS).rev() {
                let (a, b) = (alpha(k) * lo, alpha(k) * hi);
                best.consider(error(a, b), a, b);
            }
            for _ in 0..MSE_ROUNDS {
                let before = (best.lo, best.hi);
                if lo < 0.0 {
                    let b = best.hi;
                    for k in (1..=MSE_STEPS).rev() {
                        best.consider(error(alpha(k) * lo, b), alpha(k) * lo, b);
                    }
                }
                if hi > 0.0 {
                    let a = best.lo;
                    for k in (1..=MSE_STEPS).rev() {
                        best.consider(error(a, alpha(k) * hi), a, alpha(k) * hi);
                    }
                }
                if (best.lo, best.hi) == before {
                    break;
                }
            }
        }
        if !best.error.is_finite() {
            return Ok(vec![obs.whole()]);
        }
        Ok(vec![obs.limit(best.lo, best.hi)])
    }
}

/// The best `mse` candidate so far.
struct Candidate {
    error: f64,
    lo: f64,
    hi: f64,
}

impl Candidate {
    /// Takes `[lo, hi]` if its error is smaller, or equal (to 10⁻¹² relative)
    /// and the range wider.
    fn consider(&mut self, error: f64, lo: f64, hi: f64) {
        if error.is_nan() {
            return;
        }
        let tolerance = 1e-12 * self.error.abs().min(f64::MAX);
        let smaller = error < self.error - tolerance;
        let tied = !smaller && error <= self.error + tolerance && hi - lo > self.hi - self.lo;
        if smaller || tied {
            *self = Candidate { error, lo, hi };
        }
    }
}

/// What `insert-fakeq` makes of a range: step `Δ` and the representable ends.
struct Quantizer {
    step: f64,
    lo: f64,
    hi: f64,
}

impl Quantizer {
    /// The quantizer of `[a, b]` widened to contain 0 (see [`MseRange`]), if it
    /// has a positive finite step.
    fn new(a: f64, b: f64, target: &RangeTarget) -> Option<Quantizer> {
        let (a, b) = (a.min(0.0), b.max(0.0));
        let (qmin, qmax) = (target.qmin as f64, target.qmax as f64);
        let steps = qmax - qmin;
        if steps <= 0.0 {
            return None;
        }
        let (step, zero_point) = if target.symmetric {
            let step = (-a).max(b) / (steps / 2.0);
            let middle = if target.qmin < 0 { 0.0 } else { ((target.qmin + target.qmax + 1) / 2) as f64 };
            (step, middle.clamp(qmin, qmax))
        } else {
            let step = (b - a) / steps;
            (step, (qmin - a / step).round_ties_even().clamp(qmin, qmax))
        };
        if !(step > 0.0 && step.is_finite()) {
            return None;
        }
        Some(Quantizer { step, lo: (qmin - zero_point) * step, hi: (qmax - zero_point) * step })
    }

    /// The mean of `(x − Q(x))²` over `x` uniform on `[s, t]` (at `s` when `t ≤ s`).
    fn mean_sq_error(&self, s: f64, t: f64) -> f64 {
        if t <= s || t.is_nan() {
            let e = s - self.represent(s);
            return e * e;
        }
        let mut total = 0.0;
        if s < self.lo {
            total += square_integral(s, t.min(self.lo), self.lo);
        }
        if t > self.hi {
            total += square_integral(s.max(self.hi), t, self.hi);
        }
        let (u, v) = (s.max(self.lo), t.min(self.hi));
        if v > u {
            total += self.rounding_integral(u, v);
        }
        total / (t - s)
    }

    /// `Q(x)`.
    fn represent(&self, x: f64) -> f64 {
        (self.step * (x / self.step).round()).clamp(self.lo, self.hi)
    }

    /// `∫_s^t (x − Δ·round(x/Δ))² dx`: `Δ³/12` per whole step, and
    /// `F(x) = m·Δ³/12 + (u³ + Δ³/8)/3` with `m = floor(x/Δ + 1/2)`, `u = x − mΔ`.
    fn rounding_integral(&self, s: f64, t: f64) -> f64 {
        let d = self.step;
        let split = |x: f64| {
            let m = (x / d + 0.5).floor();
            (m, x - m * d)
        };
        let ((ms, us), (mt, ut)) = (split(s), split(t));
        ((mt - ms) * d * d * d / 12.0 + (ut * ut * ut - us * us * us) / 3.0).max(0.0)
    }
}

/// `∫_s^t (x − e)² dx` for `s ≤ t`, without cancellation.
fn square_integral(s: f64, t: f64, e: f64) -> f64 {
    let (p, q) = (s - e, t - e);
    (t - s) * (p * p + p * q + q * q) / 3.0
}

/// What the histogram methods read of one per-tensor observer.
struct Observed<'a> {
    min: f64,
    max: f64,
    hist: &'a Histogram,
}

impl<'a> Observed<'a> {
    /// Checks that `stats` is per tensor, with data and a histogram.
    fn of(stats: &'a ObserverStats, method: &str) -> Result<Observed<'a>, String> {
        if stats.channels != 1 {
            return Err(format!(
                "method '{method}' is per tensor, but this observer has {} channels; remove 'axis' or use 'minmax'",
                stats.channels
            ));
        }
        let (&[min], &[max]) = (stats.min.as_slice(), stats.max.as_slice()) else {
            return Err(format!("method '{method}' needs one observed min and max"));
        };
        let (min, max) = (min as f64, max as f64);
        if !(min.is_finite() && max.is_finite() && min <= max) {
            return Err(format!(
                "method '{method}': the observed range [{min}, {max}] is not a finite range"
            ));
        }
        let hist = stats.histogram.as_ref().ok_or_else(|| {
            format!("method '{method}' needs a histogram; use insert-observers{{observer=histogram}}")
        })?;
        Ok(Observed { min, max, hist })
    }

    /// `[min, max]`.
    fn whole(&self) -> (f64, f64) {
        (self.min, self.max)
    }

    /// The range `|x|` covers: from 0 (or the value nearest 0 when all have one
    /// sign) to `max(|min|, |max|)`.
    fn abs_range(&self) -> (f64, f64) {
        let near = if self.min >= 0.0 {
            self.min
        } else if self.max <= 0.0 {
            -self.max
        } else {
            0.0
        };
        (near, self.min.abs().max(self.max.abs()))
    }

    /// The interval bin `k`'s values are spread over.
    fn bin(&self, k: usize) -> (f64, f64) {
        spread(self.hist.edge(k), self.hist.edge(k + 1), self.min, self.max)
    }

    /// The non-empty bins as `(s, t, count)`, in groups of `2^k` adjacent bins
    /// so that there are at most `limit` groups.
    fn grouped_bins(&self, limit: usize) -> Vec<(f64, f64, f64)> {
        let n = self.hist.bins();
        let mut group = 1usize;
        while n.div_ceil(group) > limit.max(1) {
            group *= 2;
        }
        let counts = self.hist.counts();
        (0..n.div_ceil(group))
            .filter_map(|g| {
                let (start, end) = (g * group, ((g + 1) * group).min(n));
                let count: f64 = counts[start..end].iter().map(|&c| c as f64).sum();
                let (s, t) = spread(self.hist.edge(start), self.hist.edge(end), self.min, self.max);
                (count > 0.0).then_some((s, t, count))
            })
            .collect()
    }

    /// `[a, b]` clamped into the observed range (see the module docs), finite
    /// with `lo ≤ hi`.
    fn limit(&self, a: f64, b: f64) -> (f64, f64) {
        let (a, b) = (a.min(b), a.max(b));
        let (lo, hi) = (a.clamp(self.min, self.max), b.clamp(self.min, self.max));
        if lo.is_finite() && hi.is_finite() && lo <= hi {
            (lo, hi)
        } else {
            self.whole()
        }
    }
}

/// The part of bin `[u, v]` inside `[min, max]`, or the bin when they do not meet.
fn spread(u: f64, v: f64, min: f64, max: f64) -> (f64, f64) {
    let (s, t) = (u.max(min), v.min(max));
    if s <= t {
        (s, t)
    } else {
        (u, v)
    }
}

/// The value below which the fraction `q` of `counts` lies, the count of bin
/// `k` spread uniformly over `bounds(k)`; `None` without counts.
fn quantile(counts: &[f64], bounds: impl Fn(usize) -> (f64, f64), q: f64) -> Option<f64> {
    let total: f64 = counts.iter().filter(|c| **c > 0.0).sum();
    if !(total > 0.0 && total.is_finite()) {
        return None;
    }
    let target = q.clamp(0.0, 1.0) * total;
    let (mut below, mut last) = (0.0, None);
    for (k, &c) in counts.iter().enumerate().filter(|(_, c)| **c > 0.0) {
        let (s, t) = bounds(k);
        if below + c >= target {
            let fraction = ((target - below) / c).clamp(0.0, 1.0);
            return Some(s + fraction * (t - s));
        }
        below += c;
        last = Some(t);
    }
    last
}

/// A histogram of `|x|`: `counts[k]` values in `[k·width, (k + 1)·width)`.
struct AbsHistogram {
    counts: Vec<f64>,
    width: f64,
}

impl AbsHistogram {
    /// Folds `h` around 0 (see the module docs); `None` without counts or width.
    fn fold(h: &Histogram) -> Option<AbsHistogram> {
        let (bins, w) = (h.bins(), h.bin_width());
        if !(w > 0.0 && w.is_finite()) || h.counts().iter().all(|&c| c == 0) {
            return None;
        }
        let zero = -h.edge(0) / w;
        if h.on_grid() && zero >= 0.0 && zero <= bins as f64 && zero.fract() == 0.0 {
            // Exact: bin `zero` starts at 0; bin `zero − 1 − k` ends at −k·w.
            let zero = zero as usize;
            let mut counts = vec![0.0; zero.max(bins - zero).max(1)];
            for (i, &c) in h.counts().iter().enumerate() {
                let k = if i < zero { zero - 1 - i } else { i - zero };
                counts[k] += c as f64;
            }
            return Some(AbsHistogram { counts, width: w });
        }
        let top = h.edge(0).abs().max(h.edge(bins).abs());
        let width = top / bins as f64;
        if !(width > 0.0 && width.is_finite()) {
            return None;
        }
        let mut abs = AbsHistogram { counts: vec![0.0; bins], width };
        for (i, &c) in h.counts().iter().enumerate().filter(|(_, &c)| c > 0) {
            let (u, v, c) = (h.edge(i), h.edge(i + 1), c as f64);
            if u >= 0.0 {
                abs.spread(u, v, c);
            } else if v <= 0.0 {
                abs.spread(-v, -u, c);
            } else {
                let below = -u / (v - u);
                abs.spread(0.0, -u, c * below);
                abs.spread(0.0, v, c * (1.0 - below));
            }
        }
        Some(abs)
    }

    /// Adds `count` values spread uniformly over `[s, t]` (`0 ≤ s ≤ t`).
    fn spread(&mut self, s: f64, t: f64, count: f64) {
        let n = self.counts.len();
        let cell = |x: f64| ((x / self.width).floor().max(0.0) as usize).min(n - 1);
        let (first, last) = (cell(s), cell(t));
        if first == last || t <= s || t.is_nan() {
            self.counts[first] += count;
            return;
        }
        let mut rest = count;
        for k in first..last {
            let overlap = ((k + 1) as f64 * self.width).min(t) - (k as f64 * self.width).max(s);
            let share = (count * overlap.max(0.0) / (t - s)).min(rest);
            self.counts[k] += share;
            rest -= share;
        }
        self.counts[last] += rest.max(0.0);
    }

    /// Merges adjacent bins in pairs until there are at most `limit`.
    fn coarsen(&mut self, limit: usize) {
        while self.counts.len() > limit.max(1) {
            self.counts = self.counts.chunks(2).map(|pair| pair.iter().sum()).collect();
            self.width *= 2.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Per-tensor histogram statistics over `h` with the observed `[min, max]`.
    fn stats_of(h: Histogram, min: f32, max: f32) -> ObserverStats {
        ObserverStats {
            observer: "histogram".into(),
            axis: None,
            channels: 1,
            min: vec![min],
            max: vec![max],
            samples: 1,
            bins: Some(h.bins()),
            averaging_constant: None,
            percentile: None,
            histogram: Some(h),
            means: None,
            batch_ranges: Vec::new(),
        }
    }

    /// The statistics of `values` in a histogram of `bins` bins.
    fn stats(values: &[f32], bins: usize) -> ObserverStats {
        let mut h = Histogram::empty(bins);
        h.add(values).unwrap();
        let min = values.iter().copied().fold(f32::INFINITY, f32::min);
        let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        stats_of(h, min, max)
    }

    /// i8 (`[-128, 127]`) with `percentile` 99.99.
    fn i8(symmetric: bool) -> RangeTarget {
        RangeTarget { qmin: -128, qmax: 127, symmetric, percentile: 99.99 }
    }

    fn with_percentile(symmetric: bool, percentile: f64) -> RangeTarget {
        RangeTarget { percentile, ..i8(symmetric) }
    }

    fn one(method: &dyn RangeMethod, stats: &ObserverStats, target: &RangeTarget) -> (f64, f64) {
        let ranges = method.range(stats, target).unwrap_or_else(|e| panic!("{}: {e}", method.name()));
        assert_eq!(ranges.len(), 1, "{}", method.name());
        ranges[0]
    }

    fn methods() -> [&'static dyn RangeMethod; 4] {
        [&MinMaxRange, &PercentileRange, &EntropyRange, &MseRange]
    }

    /// 1000 values in each unit bin of `[0, 1024)`, one at 2000.25: a
    /// histogram on the grid (`w = 1`, 2048 bins).
    fn uniform_with_outlier() -> ObserverStats {
        let mut counts = vec![0i64; 2048];
        counts[..1024].fill(1000);
        counts[2000] = 1;
        let h = Histogram::from_stored(counts, 0.0, 2048.0).unwrap();
        assert!(h.on_grid());
        stats_of(h, 0.0, 2000.25)
    }

    /// 1000 values in each unit bin of `[-1024, 1024)`, one at -2000: 4096
    /// bins of width 1 over `[-2048, 2048)`.
    fn symmetric_with_outlier() -> ObserverStats {
        let mut counts = vec![0i64; 4096];
        counts[1024..3072].fill(1000);
        counts[48] = 1;
        let h = Histogram::from_stored(counts, -2048.0, 2048.0).unwrap();
        assert!(h.on_grid());
        stats_of(h, -2000.0, 1023.5)
    }

    #[test]
    fn builtin_order() {
        let names: Vec<_> = builtin().iter().map(|m| m.name()).collect();
        assert_eq!(names, ["minmax", "percentile", "entropy", "mse"]);
        assert!(builtin().iter().skip(1).all(|m| m.needs_histogram()));
        assert!(!MinMaxRange.needs_histogram());
    }

    #[test]
    fn outlier_is_clipped_by_histogram_methods_only() {
        let s = uniform_with_outlier();
        for symmetric in [false, true] {
            let t = i8(symmetric);
            assert_eq!(one(&MinMaxRange, &s, &t), (0.0, 2000.25));
            let (lo, hi) = one(&PercentileRange, &s, &t);
            // 1 024 001 values: 99.99 % lie below 1023.9 (interpolated in bin 1023).
            let expected = 1023.0 + (0.9999 * 1_024_001.0 - 1_023_000.0) / 1000.0;
            assert_eq!(lo, 0.0, "all values ≥ 0: lo = min");
            assert!((hi - expected).abs() < 1e-6, "percentile {hi} vs {expected}");
            // KL divergence does not mind a lone outlier next to a flat
            // distribution: Q is spread over non-empty bins only, so the
            // outlier's chunk represents it exactly (see below for a decaying one).
            assert_eq!(one(&EntropyRange, &s, &t), (0.0, 2000.25));
            let (lo, hi) = one(&MseRange, &s, &t);
            assert_eq!(lo, 0.0);
            assert!((1000.0..=1100.0).contains(&hi), "mse {hi} (symmetric: {symmetric})");
        }
    }

    #[test]
    fn symmetric_outlier() {
        let s = symmetric_with_outlier();
        let t = i8(true);
        let (lo, hi) = one(&PercentileRange, &s, &t);
        // |x|: 2000 values in each unit bin of [0, 1024), one at 2000; the
        // 99.99th percentile of 2 048 001 values.
        let expected: f64 = 1023.0 + (0.9999 * 2_048_001.0 - 2_046_000.0) / 2000.0;
        assert!((hi - expected.min(1023.5)).abs() < 1e-6, "{hi} vs {expected}");
        assert!((lo + expected).abs() < 1e-9, "{lo} vs {expected}");
        // Flat with a lone outlier: KL divergence keeps it (see above).
        assert_eq!(one(&EntropyRange, &s, &t), (-2000.0, 1023.5));
        let (lo, hi) = one(&MseRange, &s, &t);
        assert!((-1100.0..=-1000.0).contains(&lo) && hi == (-lo).min(1023.5), "mse [{lo}, {hi}]");
        // Asymmetric: each tail loses 0.01 %.
        let (lo, hi) = one(&PercentileRange, &s, &i8(false));
        let expected_lo = -1024.0 + (0.0001 * 2_048_001.0 - 1.0) / 1000.0;
        // The top bin's values lie in [1023, 1023.5] (the observed max).
        let expected_hi = 1023.0 + 0.5 * (0.9999 * 2_048_001.0 - 2_047_001.0) / 1000.0;
        assert!((lo - expected_lo).abs() < 1e-6 && (hi - expected_hi).abs() < 1e-6, "[{lo}, {hi}]");
        let (lo, hi) = one(&MseRange, &s, &i8(false));
        assert!((-1100.0..=-1000.0).contains(&lo) && (1000.0..=1023.5).contains(&hi), "mse [{lo}, {hi}]");
    }

    #[test]
    fn entropy_clips_a_decaying_tail() {
        // |x| decaying like exp(−x/60) (down to 1 per bin at 828), one value at 2000.
        let mut counts: Vec<i64> = (0..2048).map(|k| (1e6 * (-(k as f64) / 60.0).exp()) as i64).collect();
        counts[1024..].fill(0);
        counts[2000] = 1;
        let h = Histogram::from_stored(counts, 0.0, 2048.0).unwrap();
        let s = stats_of(h, 0.0, 2000.5);
        for symmetric in [false, true] {
            let (lo, hi) = one(&EntropyRange, &s, &i8(symmetric));
            assert_eq!(lo, 0.0);
            // Clips the lone value at 2000; with all 256 levels for one-signed
            // data (asymmetric) it keeps more of the tail than with 128.
            let window = if symmetric { 400.0..800.0 } else { 400.0..1000.0 };
            assert!(window.contains(&hi), "entropy threshold {hi}");
            assert_eq!(hi.fract(), 0.0, "a bin edge");
        }
        // The same data mirrored: the threshold is the same, on both sides.
        let mut mirrored = vec![0i64; 4096];
        for (k, &c) in s.histogram.as_ref().unwrap().counts().iter().enumerate() {
            mirrored[2047 - k] = c;
        }
        let h = Histogram::from_stored(mirrored, -2048.0, 2048.0).unwrap();
        let m = stats_of(h, -2000.5, 0.0);
        let (lo, hi) = one(&EntropyRange, &m, &i8(false));
        assert_eq!((lo, hi), (-one(&EntropyRange, &s, &i8(false)).1, 0.0));
    }

    #[test]
    fn percentile_edge_cases() {
        let s = uniform_with_outlier();
        assert_eq!(one(&PercentileRange, &s, &with_percentile(false, 100.0)), (0.0, 2000.25));
        // p and 100 − p mean the same.
        let a = one(&PercentileRange, &s, &with_percentile(false, 90.0));
        let b = one(&PercentileRange, &s, &with_percentile(false, 10.0));
        assert_eq!(a, b);
        assert!((a.1 - 921.6).abs() < 0.01, "{a:?}");
        for p in [0.0, -1.0, 100.5, f64::NAN] {
            assert!(PercentileRange.range(&s, &with_percentile(false, p)).is_err(), "{p}");
        }
        // All values ≤ 0: hi = max.
        let s = stats(&[-4.0, -3.0, -2.0, -1.0], 16);
        let (lo, hi) = one(&PercentileRange, &s, &with_percentile(false, 90.0));
        assert_eq!(hi, -1.0);
        assert!((-4.0..-3.0).contains(&lo), "{lo}");
    }

    #[test]
    fn degenerate_histograms() {
        for symmetric in [false, true] {
            let t = i8(symmetric);
            // No counts at all.
            let s = stats_of(Histogram::empty(8), -1.0, 2.0);
            for m in methods() {
                assert_eq!(one(m, &s, &t), (-1.0, 2.0), "{}", m.name());
            }
            // Only zeros.
            let s = stats(&[0.0; 10], 2048);
            for m in methods() {
                assert_eq!(one(m, &s, &t), (0.0, 0.0), "{}", m.name());
            }
            // One value, one occupied bin.
            for v in [5.0f32, -5.0, 1e-30, 1e38] {
                let s = stats(&[v; 100], 2048);
                for m in methods() {
                    assert_eq!(one(m, &s, &t), (v as f64, v as f64), "{} of {v}", m.name());
                }
            }
            // A single bin.
            let s = stats(&[1.0, 2.0, 3.0], 1);
            for m in [&MinMaxRange as &dyn RangeMethod, &EntropyRange, &MseRange] {
                assert_eq!(one(m, &s, &t), (1.0, 3.0), "{} of one bin", m.name());
            }
            // (the values are spread over [1, 3]: 99.99 % lie below 2.9998)
            let (lo, hi) = one(&PercentileRange, &s, &t);
            assert!(lo == 1.0 && (hi - 2.9998).abs() < 1e-9, "[{lo}, {hi}]");
            // A zero-width stored histogram.
            let h = Histogram::from_stored(vec![7], 2.0, 2.0).unwrap();
            let s = stats_of(h, 2.0, 2.0);
            for m in methods() {
                assert_eq!(one(m, &s, &t), (2.0, 2.0), "{} of a point", m.name());
            }
        }
    }

    #[test]
    fn errors() {
        let mut s = uniform_with_outlier();
        s.channels = 2;
        s.min = vec![0.0, 0.0];
        s.max = vec![1.0, 1.0];
        for m in [&PercentileRange as &dyn RangeMethod, &EntropyRange, &MseRange] {
            let e = m.range(&s, &i8(false)).unwrap_err();
            assert!(e.contains("per tensor"), "{e}");
        }
        let mut s = uniform_with_outlier();
        s.histogram = None;
        for m in [&PercentileRange as &dyn RangeMethod, &EntropyRange, &MseRange] {
            assert!(m.range(&s, &i8(false)).unwrap_err().contains("needs a histogram"));
        }
        let mut s = uniform_with_outlier();
        s.min = vec![3000.0];
        assert!(MseRange.range(&s, &i8(false)).unwrap_err().contains("not a finite range"));
    }

    #[test]
    fn huge_counts() {
        let big = i64::MAX / 4096;
        let mut counts = vec![big; 2048];
        counts[2047] = 1;
        counts[0] = 0;
        let h = Histogram::from_stored(counts, -1024.0, 1024.0).unwrap();
        let s = stats_of(h, -1023.0, 1023.5);
        for symmetric in [false, true] {
            for m in methods() {
                let (lo, hi) = one(m, &s, &i8(symmetric));
                assert!(lo.is_finite() && hi.is_finite() && -1023.0 <= lo && lo <= hi && hi <= 1023.5);
            }
        }
        let (_, hi) = one(&EntropyRange, &s, &i8(false));
        assert!(hi < 1023.5, "the lone value at the top is clipped: {hi}");
    }

    #[test]
    fn more_levels_than_bins() {
        // 16 bits: 32768 positive levels, 2048 bins: nothing to clip.
        let s = uniform_with_outlier();
        let t = RangeTarget { qmin: -32768, qmax: 32767, symmetric: true, percentile: 99.99 };
        assert_eq!(one(&EntropyRange, &s, &t), (0.0, 2000.25));
        // mse still weighs the outlier against 2^16 levels: it keeps it.
        assert_eq!(one(&MseRange, &s, &t), (0.0, 2000.25));
    }

    #[test]
    fn off_grid_histograms() {
        // [-3, 5] in 10 bins of width 0.8: not on the grid.
        let h = Histogram::from_stored(vec![1, 5, 20, 40, 20, 5, 1, 0, 0, 3], -3.0, 5.0).unwrap();
        assert!(!h.on_grid());
        let s = stats_of(h, -2.5, 4.5);
        let abs = AbsHistogram::fold(s.histogram.as_ref().unwrap()).unwrap();
        assert!((abs.counts.iter().sum::<f64>() - 95.0).abs() < 1e-9);
        assert_eq!(abs.width, 0.5);
        for symmetric in [false, true] {
            for m in methods() {
                let (lo, hi) = one(m, &s, &i8(symmetric));
                assert!(-2.5 <= lo && lo <= hi && hi <= 4.5, "{} [{lo}, {hi}]", m.name());
            }
        }
    }

    #[test]
    fn fold_is_exact_on_the_grid() {
        let mut h = Histogram::empty(16);
        h.add(&[-3.5, -0.25, 0.0, 0.5, 1.0, 2.0, 3.75]).unwrap();
        assert_eq!((h.hist_min(), h.hist_max(), h.bin_width()), (-3.5, 4.5, 0.5));
        let abs = AbsHistogram::fold(&h).unwrap();
        assert_eq!(abs.width, 0.5);
        // |x| = 0.25, 0 | 0.5 | 1 | - | 2 | - | 3.5 | 3.75 | -
        // (a negative value on a bin edge, −3.5, folds into the bin below 3.5)
        assert_eq!(abs.counts, [2.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]);
    }

    /// TensorRT's search written out directly from its definition.
    fn naive_kl_threshold(h: &[f64], levels: usize) -> Option<usize> {
        let smooth = |d: &[f64]| -> Vec<f64> {
            let nonzero: Vec<f64> = d.iter().copied().filter(|&x| x > 0.0).collect();
            let (nz, z) = (nonzero.len() as f64, (d.len() - nonzero.len()) as f64);
            let min = nonzero.iter().copied().fold(f64::INFINITY, f64::min);
            let mut eps = KL_SMOOTHING;
            if z > 0.0 && eps * z / nz >= 0.5 * min {
                eps = 0.5 * min * nz / z;
            }
            d.iter().map(|&x| if x > 0.0 { x - eps * z / nz } else { eps }).collect()
        };
        let mut best: Option<(f64, usize)> = None;
        for i in levels..=h.len() {
            let mut p = h[..i].to_vec();
            p[i - 1] += h[i..].iter().sum::<f64>();
            let m = i / levels;
            let mut q = vec![0.0; i];
            for j in 0..levels {
                let (start, end) = (j * m, if j + 1 == levels { i } else { j * m + m });
                let sum: f64 = h[start..end].iter().sum();
                let nonzero = p[start..end].iter().filter(|&&x| x > 0.0).count();
                for k in start..end {
                    if p[k] > 0.0 && nonzero > 0 {
                        q[k] = sum / nonzero as f64;
                    }
                }
            }
            if q.iter().all(|&x| x == 0.0) {
                continue;
            }
            let (p, q) = (smooth(&p), smooth(&q));
            let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
            let d: f64 = p.iter().zip(&q).map(|(&a, &b)| (a / sp) * ((a / sp) / (b / sq)).ln()).sum();
            if best.is_none_or(|(b, _)| d < b - 1e-9 * b.abs()) {
                best = Some((d, i));
            }
        }
        best.map(|(_, i)| i)
    }

    #[test]
    fn entropy_matches_the_definition() {
        // A few shapes of 300 bins, 16 levels.
        let shapes: Vec<Vec<f64>> = vec![
            (0..300).map(|k| (1000.0 * (-(k as f64) / 40.0).exp()).floor()).collect(),
            (0..300).map(|k| if k % 7 == 0 { 0.0 } else { (k % 13) as f64 }).collect(),
            (0..300).map(|k| if k < 50 || k == 299 { 5.0 } else { 0.0 }).collect(),
            (0..300).map(|k| if k == 120 { 9.0 } else { 0.0 }).collect(),
        ];
        for h in &shapes {
            assert_eq!(kl_threshold_bins(h, 16), naive_kl_threshold(h, 16), "{h:?}");
        }
    }

    #[test]
    fn entropy_is_fast() {
        // A Gaussian-like |x| histogram of 2048 bins, 8-bit levels.
        let h: Vec<f64> = (0..2048)
            .map(|k| (1e6 * (-((k as f64) / 300.0).powi(2)).exp()).floor() + (k % 3) as f64)
            .collect();
        let start = std::time::Instant::now();
        let i = kl_threshold_bins(&h, 128).unwrap();
        let elapsed = start.elapsed();
        assert!((128..=2048).contains(&i));
        println!("entropy search over 2048 bins: {elapsed:?}");
        // Generous for unoptimized builds; a few ms optimized.
        assert!(elapsed.as_secs_f64() < 5.0, "{elapsed:?}");
        // The whole methods on a 2048-bin histogram of the same shape.
        let counts: Vec<i64> = h.iter().map(|&c| c as i64).collect();
        let s = stats_of(Histogram::from_stored(counts, 0.0, 2048.0).unwrap(), 0.0, 2047.5);
        for m in methods() {
            for symmetric in [false, true] {
                let start = std::time::Instant::now();
                one(m, &s, &i8(symmetric));
                println!("{} (symmetric: {symmetric}): {:?}", m.name(), start.elapsed());
            }
        }
    }

    #[test]
    fn mse_integrals_match_sampling() {
        let t = i8(false);
        for (a, b) in [(-1.0, 1.0), (-0.3, 2.0), (0.0, 1.0), (-5.0, 0.0)] {
            let q = Quantizer::new(a, b, &t).unwrap();
            for (s, u) in [(-6.0, 3.0), (0.001, 0.002), (-0.7, -0.69), (0.5, 0.5), (1.9, 7.0), (-1.0, 1.0)] {
                let n = 200_000;
                let sampled: f64 = (0..n)
                    .map(|k| {
                        let x = s + (u - s) * (k as f64 + 0.5) / n as f64;
                        (x - q.represent(x)).powi(2)
                    })
                    .sum::<f64>()
                    / n as f64;
                let exact = q.mean_sq_error(s, u);
                assert!(
                    (exact - sampled).abs() <= 1e-6 * sampled.max(1e-6),
                    "[{s}, {u}]: {exact} vs {sampled}"
                );
            }
        }
    }

    #[test]
    fn mse_prefers_the_widest_on_ties() {
        // Integers 0..=255 are exact only in [0, 255] (Δ = 1): it wins outright.
        let values: Vec<f32> = (0..=255).map(|v| v as f32).collect();
        let s = stats(&values, 256);
        assert_eq!(one(&MseRange, &s, &i8(false)), (0.0, 255.0));
        // Every value at 0, which every candidate represents exactly: all
        // errors are 0, and the widest range wins.
        let h = Histogram::from_stored(vec![5], 0.0, 0.0).unwrap();
        let s = stats_of(h, -1.0, 1.0);
        for symmetric in [false, true] {
            assert_eq!(one(&MseRange, &s, &i8(symmetric)), (-1.0, 1.0));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Any histogram, any observed range, any target: a finite range
        /// within the observed one, never a panic.
        #[test]
        fn always_a_valid_range(
            counts in prop::collection::vec(prop_oneof![Just(0i64), 0i64..1000, Just(i64::MAX / 8192)], 1..300),
            (a, b) in (-1e6f32..1e6, -1e6f32..1e6),
            (c, d) in (-1e6f32..1e6, -1e6f32..1e6),
            bits in 2i64..=16,
            unsigned in any::<bool>(),
            symmetric in any::<bool>(),
            percentile in 0.001f64..=100.0,
        ) {
            let (lo, hi) = (a.min(b), a.max(b));
            let Ok(h) = Histogram::from_stored(counts, lo, hi) else { return Ok(()) };
            let s = stats_of(h, c.min(d), c.max(d));
            let (qmin, qmax) = if unsigned { (0, (1 << bits) - 1) } else { (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) };
            let t = RangeTarget { qmin, qmax, symmetric, percentile };
            for m in methods() {
                let (l, u) = one(m, &s, &t);
                prop_assert!(l.is_finite() && u.is_finite() && l <= u, "{} [{l}, {u}]", m.name());
                prop_assert!(c.min(d) as f64 <= l && u <= c.max(d) as f64, "{} [{l}, {u}]", m.name());
            }
        }

        /// Histograms of real data: the methods' ranges lie inside [min, max].
        #[test]
        fn data_ranges(values in prop::collection::vec(-1e3f32..1e3, 1..500), bins in 2usize..600) {
            let s = stats(&values, bins);
            for symmetric in [false, true] {
                for m in methods() {
                    let (l, u) = one(m, &s, &i8(symmetric));
                    prop_assert!(s.min[0] as f64 <= l && l <= u && u <= s.max[0] as f64);
                }
            }
        }
    }
}
