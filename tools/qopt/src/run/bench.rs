//! `--bench N`: latency of N timed runs, measured after the warm-up run that
//! built the interpreter's plans and constants (so loading, parsing and
//! verification are never timed), summarized as median, minimum and maximum.

use std::time::Instant;

/// Latency statistics of timed runs, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Latency {
    pub runs: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// Times `runs` calls of `run` (at least one).
    pub fn measure(runs: usize, mut run: impl FnMut() -> Result<(), String>) -> Result<Latency, String> {
        let mut times = Vec::with_capacity(runs.max(1));
        for _ in 0..runs.max(1) {
            let start = Instant::now();
            run()?;
            times.push(start.elapsed().as_secs_f64() * 1000.0);
        }
        Ok(Latency::of(times))
    }

    /// The statistics of run times `ms` (not empty); the median of an even
    /// count is the mean of the middle two.
    fn of(mut ms: Vec<f64>) -> Latency {
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        let median = if n % 2 == 1 { ms[n / 2] } else { (ms[n / 2 - 1] + ms[n / 2]) / 2.0 };
        Latency { runs: n, median_ms: median, min_ms: ms[0], max_ms: ms[n - 1] }
    }

    /// `latency: median 1.234 ms, min 1.201 ms, max 1.502 ms (10 runs)`: three
    /// decimals, so runs of a fraction of a millisecond still compare.
    pub fn line(&self) -> String {
        format!(
            "latency: median {:.3} ms, min {:.3} ms, max {:.3} ms ({} runs)",
            self.median_ms, self.min_ms, self.max_ms, self.runs
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max() {
        let l = Latency::of(vec![3.0, 1.0, 2.0]);
        assert_eq!((l.runs, l.median_ms, l.min_ms, l.max_ms), (3, 2.0, 1.0, 3.0));
        assert_eq!(Latency::of(vec![4.0, 1.0, 2.0, 3.0]).median_ms, 2.5);
        assert_eq!(l.line(), "latency: median 2.000 ms, min 1.000 ms, max 3.000 ms (3 runs)");
    }

    #[test]
    fn measure_runs_the_closure_and_stops_on_error() {
        let mut calls = 0;
        let l = Latency::measure(4, || {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((l.runs, calls), (4, 4));
        assert!(l.min_ms <= l.median_ms && l.median_ms <= l.max_ms);
        assert_eq!(Latency::measure(3, || Err("boom".into())).unwrap_err(), "boom");
    }
}
