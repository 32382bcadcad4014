//! A progress bar for long interpreter runs (`qrun --batch`, the `calibrate`
//! pass), drawn on standard error only when it is a terminal (never in pipes,
//! files or tests), rewritten in place with `\r` at most ten times a second
//! and erased when the run ends: `[#####-----] 120/597 samples, 830/s, ETA 1s`,
//! after the step's name when it has one (`calibrate [#####-----] ...`).
//!
//! Worker threads only count ([`Progress::advance`]); the thread that runs
//! the driver draws ([`Progress::redraw`]). That split is needed, not just
//! tidy: the driver's caller may hold the standard error lock for the whole
//! run (`qrun` passes `stderr().lock()` as the error writer), and a worker
//! writing to standard error would wait for that lock forever (the lock is
//! re-entrant for the thread that holds it).

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Width of the bar in characters.
const BAR_WIDTH: usize = 30;
/// Least time between two redraws.
pub const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// Progress over a known number of steps (runs of a batch, samples).
pub struct Progress {
    total: usize,
    unit: &'static str,
    /// What runs (`"calibrate"`), drawn before the bar; empty for none.
    label: &'static str,
    started: Instant,
    done: AtomicUsize,
    /// `None` when nothing is drawn; else when the bar was last drawn.
    last_drawn: Option<Mutex<Option<Instant>>>,
}

impl Progress {
    /// A bar over `total` steps counted in `unit` (`"samples"`), drawn if
    /// standard error is a terminal and there is more than one step.
    pub fn new(total: usize, unit: &'static str) -> Progress {
        let draw = total > 1 && std::io::stderr().is_terminal();
        Progress {
            total,
            unit,
            label: "",
            started: Instant::now(),
            done: AtomicUsize::new(0),
            last_drawn: draw.then(|| Mutex::new(None)),
        }
    }

    /// The same bar drawn after `label` (a pass name: `bias-correct`).
    pub fn with_label(self, label: &'static str) -> Progress {
        Progress { label, ..self }
    }

    /// A bar that never draws (for the timed runs of `--bench`).
    pub fn hidden() -> Progress {
        Progress {
            total: 0,
            unit: "",
            label: "",
            started: Instant::now(),
            done: AtomicUsize::new(0),
            last_drawn: None,
        }
    }

    /// Counts one more step done; any thread may call it.
    pub fn advance(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    /// Draws the bar if it is shown and due; only the driver's thread calls it.
    pub fn redraw(&self) {
        let Some(last_drawn) = &self.last_drawn else { return };
        let Ok(mut last) = last_drawn.lock() else { return };
        let done = self.done.load(Ordering::Relaxed);
        if last.is_none_or(|t| t.elapsed() >= REDRAW_EVERY) || done >= self.total {
            *last = Some(Instant::now());
            let line = format!(
                "{}{} {}",
                prefix(self.label),
                bar(done, self.total),
                rate(done, self.total, self.unit, self.started)
            );
            let _ = write!(std::io::stderr(), "\r{line}");
        }
    }

    /// Erases the bar.
    pub fn finish(&self) {
        if self.last_drawn.is_some() {
            let widest = prefix(self.label).len() + bar(self.total, self.total).len() + 40;
            let blank = " ".repeat(widest);
            let _ = write!(std::io::stderr(), "\r{blank}\r");
        }
    }
}

/// `label ` before the bar, or nothing.
fn prefix(label: &str) -> String {
    if label.is_empty() {
        String::new()
    } else {
        format!("{label} ")
    }
}

/// `[###########-------------------] 123/597`.
fn bar(done: usize, total: usize) -> String {
    let filled = (done.min(total) * BAR_WIDTH).checked_div(total).unwrap_or(BAR_WIDTH);
    format!("[{}{}] {done}/{total}", "#".repeat(filled), "-".repeat(BAR_WIDTH - filled))
}

/// `samples, 830/s, ETA 1s` after `done` of `total` steps since `started`.
fn rate(done: usize, total: usize, unit: &str, started: Instant) -> String {
    let seconds = started.elapsed().as_secs_f64();
    if done == 0 || seconds <= 0.0 {
        return unit.to_string();
    }
    let per_second = done as f64 / seconds;
    let eta = (total.saturating_sub(done)) as f64 / per_second;
    format!("{unit}, {per_second:.0}/s, ETA {eta:.0}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_fills_in_proportion() {
        assert_eq!(bar(0, 10), format!("[{}] 0/10", "-".repeat(30)));
        assert_eq!(bar(5, 10), format!("[{}{}] 5/10", "#".repeat(15), "-".repeat(15)));
        assert_eq!(bar(10, 10), format!("[{}] 10/10", "#".repeat(30)));
    }

    #[test]
    fn a_label_goes_before_the_bar() {
        assert_eq!(prefix("bias-correct"), "bias-correct ");
        assert_eq!(prefix(""), "");
        assert_eq!(Progress::new(5, "samples").with_label("calibrate").label, "calibrate");
    }
}
