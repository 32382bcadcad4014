//! Adaptive rounding (Nagel et al. 2020, "Up or Down? Adaptive Rounding for
//! Post-Training Quantization", ICML): per weight, floor or ceil of `W/s`,
//! chosen to minimize the layer's output error rather than each weight's own
//! error. The math of `round-weights` (`round_weights.rs` does the IR).
//!
//! **The problem of one output channel**, in units of its quantization step
//! `s`: `t = W/s` (K targets) and integer levels `n ∈ [lo, hi]` (the storage
//! range minus the zero point). Over the layer's input patches `p` (K values,
//! `layer_inputs.rs`) the output error is `s·(n − t)·p`, so the mean squared
//! output error is `s²·e M eᵀ` with `e = n − t` and `M = E[p pᵀ]` (or, when
//! the bias takes the mean error back, the covariance `E[p pᵀ] − E[p]E[p]ᵀ`).
//! `M` is divided by its mean diagonal, so the error, the regularizer and
//! their weight `λ` do not depend on the scale of the layer's inputs.
//!
//! **Relaxation.** A weight whose floor `f = ⌊t⌋` and `f + 1` are both levels
//! is free: `n = f + h(V)` with the rectified sigmoid
//! `h(V) = clamp(σ(V)·(ζ − γ) + γ, 0, 1)`, ζ = 1.1, γ = −0.1; others are fixed
//! at the end of the range they lie beyond. The loss
//!
//! ```text
//! L(V) = e M eᵀ + λ · Σ_free (1 − |2h − 1|^β)
//! ```
//!
//! starts with `h = t − f` (the float weight), runs its first `warmup`
//! fraction of iterations without the regularizer, then anneals β linearly
//! from 20 to 2, which drives every `h` to 0 or 1. The gradient,
//! `∂L/∂V = (2(M e) + λ·r'(h))·h'(V)`, costs K² per channel and iteration
//! whatever the number of calibration samples: `M` is computed once. Adam
//! (β₁ = 0.9, β₂ = 0.999) updates `V`. The result is `f + [h ≥ ½]`; a channel
//! keeps its nearest rounding when that has the smaller error `e M eᵀ`
//! (so a weight already on the grid, or a second run, changes nothing).
//!
//! Channels are independent given `M`: [`optimize_layer`] splits them over
//! threads, each channel's arithmetic fixed, so the result does not depend
//! on the thread count.

use super::layer_inputs::dot;
use std::time::{Duration, Instant};

/// The rectified sigmoid's upper stretch ζ.
const ZETA: f64 = 1.1;
/// The rectified sigmoid's lower stretch γ.
const GAMMA: f64 = -0.1;
/// Adam's decay of the first moment.
const ADAM_BETA1: f64 = 0.9;
/// Adam's decay of the second moment.
const ADAM_BETA2: f64 = 0.999;
/// Adam's denominator guard.
const ADAM_EPSILON: f64 = 1e-8;
/// β of the regularizer when it starts (Nagel et al.: 20).
const BETA_START: f64 = 20.0;
/// β of the regularizer at the last iteration (Nagel et al.: 2).
const BETA_END: f64 = 2.0;

/// The optimization's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Schedule {
    /// Adam steps per channel.
    pub iterations: usize,
    /// The fraction of iterations run without the regularizer.
    pub warmup: f64,
    /// λ, the weight of the regularizer.
    pub regularization: f64,
    /// Adam's step size.
    pub learning_rate: f64,
}

impl Schedule {
    /// β at iteration `t` of `total`, or `None` during the warm-up.
    fn beta(&self, t: usize, total: usize) -> Option<f64> {
        let warm = (self.warmup * total as f64).round() as usize;
        if t < warm {
            return None;
        }
        let progress = (t - warm) as f64 / (total - warm).max(1) as f64;
        Some(BETA_END + (BETA_START - BETA_END) * (1.0 - progress).max(0.0))
    }
}

/// One output channel's rounding problem (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChannelProblem {
    /// `W/s` per weight.
    pub target: Vec<f64>,
    /// The levels nearest rounding gives (what the model had).
    pub nearest: Vec<i64>,
    /// The lowest and highest level.
    pub levels: (i64, i64),
    /// The index of the metric (the channel's group).
    pub group: usize,
}

/// What the optimization chose for a channel.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChannelOutcome {
    /// The chosen levels.
    pub levels: Vec<i64>,
    /// `e M eᵀ` of the chosen levels.
    pub error: f64,
    /// `e M eᵀ` of nearest rounding.
    pub nearest_error: f64,
    /// Free weights whose relaxed rounding `h` had not settled (was in
    /// [0.01, 0.99]) at the last iteration: the regularizer was too weak to
    /// make the relaxed solution a rounding.
    pub unsettled: usize,
}

/// `e M eᵀ` for `e = levels − target`, `m` a K×K row-major matrix.
pub(crate) fn error(m: &[f64], target: &[f64], levels: &[i64]) -> f64 {
    let e: Vec<f64> = levels.iter().zip(target).map(|(&n, &t)| n as f64 - t).collect();
    let me = mat_vec(m, &e);
    e.iter().zip(&me).map(|(a, b)| a * b).sum()
}

/// `m · v` for a K×K row-major `m`.
fn mat_vec(m: &[f64], v: &[f64]) -> Vec<f64> {
    let k = v.len();
    (0..k).map(|i| dot(&m[i * k..(i + 1) * k], v)).collect()
}

/// `h(V)` and `h'(V)` (zero where the clamp is active).
fn rectified_sigmoid(v: f64) -> (f64, f64) {
    let sigma = 1.0 / (1.0 + (-v).exp());
    let raw = sigma * (ZETA - GAMMA) + GAMMA;
    if raw <= 0.0 {
        (0.0, 0.0)
    } else if raw >= 1.0 {
        (1.0, 0.0)
    } else {
        (raw, (ZETA - GAMMA) * sigma * (1.0 - sigma))
    }
}

/// The optimization state of one channel.
#[derive(Clone, Debug)]
pub(crate) struct ChannelRounding {
    /// `⌊t⌋` for a free weight; the fixed level otherwise.
    base: Vec<f64>,
    /// Whether the weight chooses between `base` and `base + 1`.
    free: Vec<bool>,
    /// The relaxed variables.
    v: Vec<f64>,
    /// Adam's moments.
    first: Vec<f64>,
    second: Vec<f64>,
    /// Adam steps taken.
    steps: usize,
}

impl ChannelRounding {
    /// The starting point: `h(V) = t − ⌊t⌋` for free weights.
    pub fn new(problem: &ChannelProblem) -> ChannelRounding {
        let (lo, hi) = problem.levels;
        let k = problem.target.len();
        let (mut base, mut free, mut v) =
            (Vec::with_capacity(k), Vec::with_capacity(k), Vec::with_capacity(k));
        for &t in &problem.target {
            let f = t.floor();
            if f >= lo as f64 && f < hi as f64 {
                // h = rest ⇔ σ(V) = (rest − γ)/(ζ − γ).
                let sigma = (t - f - GAMMA) / (ZETA - GAMMA);
                base.push(f);
                free.push(true);
                v.push((sigma / (1.0 - sigma)).ln());
            } else {
                base.push(if f < lo as f64 { lo as f64 } else { hi as f64 });
                free.push(false);
                v.push(0.0);
            }
        }
        ChannelRounding { base, free, v, first: vec![0.0; k], second: vec![0.0; k], steps: 0 }
    }

    /// The relaxed levels `base + h(V)` (fixed weights at their level).
    #[cfg(test)]
    pub fn soft_levels(&self) -> Vec<f64> {
        self.base
            .iter()
            .zip(&self.free)
            .zip(&self.v)
            .map(|((&b, &free), &v)| if free { b + rectified_sigmoid(v).0 } else { b })
            .collect()
    }

    /// The loss `L(V)` and its gradient with respect to `V` (see the module
    /// docs); `beta` `None` leaves out the regularizer.
    pub fn loss_and_gradient(
        &self,
        m: &[f64],
        target: &[f64],
        beta: Option<f64>,
        regularization: f64,
    ) -> (f64, Vec<f64>) {
        let soft: Vec<(f64, f64)> = self.v.iter().map(|&v| rectified_sigmoid(v)).collect();
        let e: Vec<f64> = (0..target.len())
            .map(|i| if self.free[i] { self.base[i] + soft[i].0 } else { self.base[i] } - target[i])
            .collect();
        let me = mat_vec(m, &e);
        let mut loss: f64 = e.iter().zip(&me).map(|(a, b)| a * b).sum();
        let mut gradient = vec![0.0; e.len()];
        for i in 0..e.len() {
            if !self.free[i] {
                continue;
            }
            let (h, dh) = soft[i];
            let mut dl_dh = 2.0 * me[i];
            if let Some(beta) = beta {
                let a = 2.0 * h - 1.0;
                loss += regularization * (1.0 - a.abs().powf(beta));
                dl_dh -= regularization * 2.0 * beta * a.abs().powf(beta - 1.0) * a.signum();
            }
            gradient[i] = dl_dh * dh;
        }
        (loss, gradient)
    }

    /// Adam steps for iterations `from..to` of a schedule of `total`.
    pub fn run(
        &mut self,
        m: &[f64],
        target: &[f64],
        schedule: &Schedule,
        from: usize,
        to: usize,
        total: usize,
    ) {
        for t in from..to {
            let beta = schedule.beta(t, total);
            let (_, gradient) = self.loss_and_gradient(m, target, beta, schedule.regularization);
            self.steps += 1;
            let c1 = 1.0 - ADAM_BETA1.powi(self.steps as i32);
            let c2 = 1.0 - ADAM_BETA2.powi(self.steps as i32);
            for (i, g) in gradient.into_iter().enumerate() {
                if !self.free[i] {
                    continue;
                }
                self.first[i] = ADAM_BETA1 * self.first[i] + (1.0 - ADAM_BETA1) * g;
                self.second[i] = ADAM_BETA2 * self.second[i] + (1.0 - ADAM_BETA2) * g * g;
                let step = (self.first[i] / c1) / ((self.second[i] / c2).sqrt() + ADAM_EPSILON);
                self.v[i] -= schedule.learning_rate * step;
            }
        }
    }

    /// Free weights whose `h` lies in [0.01, 0.99].
    pub fn unsettled(&self) -> usize {
        let settled = |v: f64| {
            let h = rectified_sigmoid(v).0;
            !(0.01..=0.99).contains(&h)
        };
        self.free.iter().zip(&self.v).filter(|&(&free, &v)| free && !settled(v)).count()
    }

    /// The hard levels: `base + [h ≥ ½]` for free weights.
    pub fn levels(&self) -> Vec<i64> {
        self.base
            .iter()
            .zip(&self.free)
            .zip(&self.v)
            .map(|((&b, &free), &v)| b as i64 + i64::from(free && rectified_sigmoid(v).0 >= 0.5))
            .collect()
    }
}

/// A layer's rounding problems: one metric per group, one problem per channel.
pub(crate) struct LayerProblem {
    /// Per group, the K×K metric `M` (normalized, see the module docs).
    pub metrics: Vec<Vec<f64>>,
    /// Per output channel.
    pub channels: Vec<ChannelProblem>,
}

/// What [`optimize_layer`] did.
pub(crate) struct LayerOutcome {
    /// Per output channel.
    pub channels: Vec<ChannelOutcome>,
    /// The iterations run (fewer than the schedule's when the budget cut them).
    pub iterations: usize,
}

/// Iterations per timed block before the rest of a layer's schedule is
/// fitted to its time budget (at most a fifth of the schedule is timed, so
/// the timed iterations are in its warm-up).
const PROBE_ITERATIONS: usize = 20;

/// The wall time after which the timing stops.
const PROBE_SECONDS: f64 = 0.25;

/// The projected optimization time below which a layer runs its whole
/// schedule whatever its share of the budget.
const MIN_LAYER_SECONDS: f64 = 1.0;

/// Optimizes every channel of `layer` on `threads` threads. With a `budget`,
/// the first iterations are timed and the schedule is shortened (to no fewer
/// than five times the timed iterations, so they stay in its warm-up) so the
/// layer fits it.
pub(crate) fn optimize_layer(
    layer: &LayerProblem,
    schedule: &Schedule,
    threads: usize,
    budget: Option<Duration>,
) -> LayerOutcome {
    let mut states: Vec<ChannelRounding> = layer.channels.iter().map(ChannelRounding::new).collect();
    let total = schedule.iterations;
    // Time blocks of iterations until PROBE_SECONDS have passed (so one
    // preemption on a busy machine does not skew the estimate) or a fifth of
    // the schedule (its warm-up, which a shorter schedule keeps) is done.
    let start = Instant::now();
    let mut done = 0;
    while done < total / 5 {
        let next = (done + PROBE_ITERATIONS).min(total / 5);
        run_parallel(layer, &mut states, schedule, done, next, total, threads);
        done = next;
        if start.elapsed().as_secs_f64() >= PROBE_SECONDS {
            break;
        }
    }
    let mut iterations = total;
    if let Some(budget) = budget {
        let per_iteration = start.elapsed().as_secs_f64() / done.max(1) as f64;
        let projected = per_iteration * total as f64;
        // A layer that takes less than MIN_LAYER_SECONDS is never cut: its
        // share of the budget is too small to time reliably.
        if projected > budget.as_secs_f64() && projected > MIN_LAYER_SECONDS {
            let fitted = (budget.as_secs_f64() / per_iteration.max(1e-12)) as usize;
            iterations = fitted.clamp(5 * done, total);
        }
    }
    run_parallel(layer, &mut states, schedule, done, iterations, iterations, threads);
    let channels = layer
        .channels
        .iter()
        .zip(&states)
        .map(|(problem, state)| {
            let m = &layer.metrics[problem.group];
            let nearest_error = error(m, &problem.target, &problem.nearest);
            let levels = state.levels();
            let chosen = error(m, &problem.target, &levels);
            let unsettled = state.unsettled();
            if chosen < nearest_error {
                ChannelOutcome { levels, error: chosen, nearest_error, unsettled }
            } else {
                ChannelOutcome {
                    levels: problem.nearest.clone(),
                    error: nearest_error,
                    nearest_error,
                    unsettled,
                }
            }
        })
        .collect();
    LayerOutcome { channels, iterations }
}

/// Iterations `from..to` (of `total`) for every channel, in contiguous runs of channels per thread.
fn run_parallel(
    layer: &LayerProblem,
    states: &mut [ChannelRounding],
    schedule: &Schedule,
    from: usize,
    to: usize,
    total: usize,
    threads: usize,
) {
    if from >= to || states.is_empty() {
        return;
    }
    let per_thread = states.len().div_ceil(threads.max(1));
    std::thread::scope(|scope| {
        for (chunk, problems) in states.chunks_mut(per_thread).zip(layer.channels.chunks(per_thread)) {
            scope.spawn(move || {
                for (state, problem) in chunk.iter_mut().zip(problems) {
                    let m = &layer.metrics[problem.group];
                    state.run(m, &problem.target, schedule, from, to, total);
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEDULE: Schedule =
        Schedule { iterations: 1000, warmup: 0.2, regularization: 0.1, learning_rate: 0.01 };

    /// Round half to even, clamped.
    fn nearest(target: &[f64], (lo, hi): (i64, i64)) -> Vec<i64> {
        target.iter().map(|t| (t.round_ties_even() as i64).clamp(lo, hi)).collect()
    }

    /// A deterministic pseudo-random stream in [−1, 1).
    fn stream(seed: u64) -> impl FnMut() -> f64 {
        let mut state = seed;
        move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        }
    }

    /// A dense layer of `channels` × `k` weights on `rows` correlated inputs:
    /// its normalized second-moment matrix and the weights in step units.
    fn dense_layer(seed: u64, channels: usize, k: usize, rows: usize) -> LayerProblem {
        let mut next = stream(seed);
        let basis: Vec<f64> = (0..k * 3).map(|_| next()).collect();
        let mut m = vec![0.0; k * k];
        for _ in 0..rows {
            // Inputs in a 3-dimensional subspace plus a little noise: strongly correlated.
            let z = [next(), next(), next()];
            let x: Vec<f64> = (0..k)
                .map(|i| z[0] * basis[i] + z[1] * basis[k + i] + z[2] * basis[2 * k + i] + 0.05 * next())
                .collect();
            for i in 0..k {
                for j in 0..k {
                    m[i * k + j] += x[i] * x[j] / rows as f64;
                }
            }
        }
        let levels = (-8, 7);
        let channels = (0..channels)
            .map(|_| {
                let target: Vec<f64> = (0..k).map(|_| next() * 7.5).collect();
                ChannelProblem { nearest: nearest(&target, levels), target, levels, group: 0 }
            })
            .collect();
        LayerProblem { metrics: vec![m], channels }
    }

    #[test]
    fn never_worse_than_nearest_and_strictly_better_on_correlated_inputs() {
        let layer = dense_layer(7, 6, 12, 200);
        let outcome = optimize_layer(&layer, &SCHEDULE, 2, None);
        let mut improved = 0;
        for (problem, channel) in layer.channels.iter().zip(&outcome.channels) {
            let m = &layer.metrics[0];
            assert_eq!(channel.error, error(m, &problem.target, &channel.levels));
            assert_eq!(channel.nearest_error, error(m, &problem.target, &problem.nearest));
            assert!(channel.error <= channel.nearest_error);
            if channel.error < 0.5 * channel.nearest_error {
                improved += 1;
            }
        }
        // With inputs in a 3-dimensional subspace, errors orthogonal to it
        // cost almost nothing: the optimized rounding should cut the error of
        // every channel by far more than half.
        assert_eq!(improved, layer.channels.len(), "{:?}", outcome.channels);
        assert_eq!(outcome.iterations, SCHEDULE.iterations);
    }

    #[test]
    fn a_constructed_case_where_nearest_is_wrong() {
        // Two weights at 0.45 and 0.35 of a step, always multiplied by the
        // same input: nearest rounding (0, 0) errs by −0.8 on their sum
        // (error 0.64), rounding one up gives +0.2 (error 0.04).
        let m = vec![1.0, 1.0, 1.0, 1.0];
        let target = vec![0.45, 0.35];
        let problem = ChannelProblem { nearest: vec![0, 0], target, levels: (-8, 7), group: 0 };
        let layer = LayerProblem { metrics: vec![m], channels: vec![problem] };
        let outcome = optimize_layer(&layer, &SCHEDULE, 1, None);
        let levels = &outcome.channels[0].levels;
        assert_eq!(levels.iter().sum::<i64>(), 1, "{levels:?}");
        assert!((outcome.channels[0].error - 0.04).abs() < 1e-12);
        assert!((outcome.channels[0].nearest_error - 0.64).abs() < 1e-12);
    }

    #[test]
    fn levels_are_floor_or_ceil_within_the_range() {
        let mut layer = dense_layer(11, 4, 10, 50);
        // Push some targets beyond the range: they must end at its ends.
        layer.channels[0].target[0] = 9.3;
        layer.channels[0].target[1] = -8.6;
        layer.channels[0].nearest = nearest(&layer.channels[0].target, (-8, 7));
        let outcome = optimize_layer(&layer, &SCHEDULE, 3, None);
        for (problem, channel) in layer.channels.iter().zip(&outcome.channels) {
            for (&t, &n) in problem.target.iter().zip(&channel.levels) {
                assert!((-8..=7).contains(&n), "{n}");
                let candidates = [(t.floor() as i64).clamp(-8, 7), (t.ceil() as i64).clamp(-8, 7)];
                assert!(candidates.contains(&n), "{t} → {n}");
            }
        }
        assert_eq!(outcome.channels[0].levels[0], 7);
        assert_eq!(outcome.channels[0].levels[1], -8);
    }

    #[test]
    fn deterministic_whatever_the_thread_count() {
        let layer = dense_layer(3, 7, 9, 80);
        let one = optimize_layer(&layer, &SCHEDULE, 1, None);
        let again = optimize_layer(&layer, &SCHEDULE, 1, None);
        let three = optimize_layer(&layer, &SCHEDULE, 3, None);
        assert_eq!(one.channels, again.channels);
        assert_eq!(one.channels, three.channels);
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let layer = dense_layer(5, 1, 8, 40);
        let problem = &layer.channels[0];
        let m = &layer.metrics[0];
        let mut state = ChannelRounding::new(problem);
        // Move away from the start so no h is at a clamp and the regularizer is active.
        for (i, v) in state.v.iter_mut().enumerate() {
            *v = 0.3 * (i as f64) - 1.0;
        }
        for beta in [None, Some(20.0), Some(3.5)] {
            let (_, gradient) = state.loss_and_gradient(m, &problem.target, beta, 0.05);
            for (i, &analytic) in gradient.iter().enumerate() {
                let step = 1e-6;
                let mut plus = state.clone();
                plus.v[i] += step;
                let mut minus = state.clone();
                minus.v[i] -= step;
                let numeric = (plus.loss_and_gradient(m, &problem.target, beta, 0.05).0
                    - minus.loss_and_gradient(m, &problem.target, beta, 0.05).0)
                    / (2.0 * step);
                let scale = analytic.abs().max(1e-3);
                assert!(
                    (numeric - gradient[i]).abs() / scale < 1e-5,
                    "β {beta:?}, V[{i}]: {numeric} vs {}",
                    gradient[i]
                );
            }
        }
    }

    #[test]
    fn starts_at_the_float_weights() {
        let problem = ChannelProblem {
            target: vec![0.25, -1.75, 3.0],
            nearest: vec![0, -2, 3],
            levels: (-8, 7),
            group: 0,
        };
        let soft = ChannelRounding::new(&problem).soft_levels();
        for (s, t) in soft.iter().zip(&problem.target) {
            assert!((s - t).abs() < 1e-12, "{s} vs {t}");
        }
    }

    #[test]
    fn the_schedule_warms_up_then_anneals() {
        assert_eq!(SCHEDULE.beta(199, 1000), None);
        assert_eq!(SCHEDULE.beta(200, 1000), Some(20.0));
        assert_eq!(SCHEDULE.beta(600, 1000), Some(11.0));
        assert_eq!(SCHEDULE.beta(1000, 1000), Some(2.0));
    }

    #[test]
    fn a_budget_shortens_the_schedule() {
        let layer = dense_layer(1, 64, 48, 100);
        let long = Schedule { iterations: 100_000, ..SCHEDULE };
        let outcome = optimize_layer(&layer, &long, 2, Some(Duration::from_millis(50)));
        // 100,000 iterations of 64 channels × 48² take far more than MIN_LAYER_SECONDS.
        assert!(outcome.iterations < long.iterations && outcome.iterations >= 5 * PROBE_ITERATIONS);
    }
}
