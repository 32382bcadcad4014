//! A progress bar for `--batch` runs, drawn on standard error only when it is
//! a terminal (never in pipes, files or tests), rewritten in place with `\r`
//! at most ten times a second and erased when the run ends.
//!
//! Worker threads only count ([`Progress::advance`]); the thread that runs
//! the driver draws ([`Progress::redraw`]). That split is needed, not just
//! tidy: the driver's caller may hold the standard error lock for the whole
//! run (`qrun` passes `stderr().lock()` as the error writer), and a worker
//! writing to standard error would wait for that lock forever.

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Width of the bar in characters.
const BAR_WIDTH: usize = 30;
/// Least time between two redraws.
pub(crate) const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// Progress over a known number of steps (runs of a batch).
pub(crate) struct Progress {
    total: usize,
    done: AtomicUsize,
    /// `None` when nothing is drawn; else when the bar was last drawn.
    last_drawn: Option<Mutex<Option<Instant>>>,
}

impl Progress {
    /// A bar over `total` steps, drawn if standard error is a terminal and
    /// there is more than one step.
    pub fn new(total: usize) -> Progress {
        let draw = total > 1 && std::io::stderr().is_terminal();
        Progress { total, done: AtomicUsize::new(0), last_drawn: draw.then(|| Mutex::new(None)) }
    }

    /// A bar that never draws (for the timed runs of `--bench`).
    pub fn hidden() -> Progress {
        Progress { total: 0, done: AtomicUsize::new(0), last_drawn: None }
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
            let _ = write!(std::io::stderr(), "\r{}", bar(done, self.total));
        }
    }

    /// Erases the bar.
    pub fn finish(&self) {
        if self.last_drawn.is_some() {
            let blank = " ".repeat(bar(self.total, self.total).len());
            let _ = write!(std::io::stderr(), "\r{blank}\r");
        }
    }
}

/// `[###########-------------------] 123/597`.
fn bar(done: usize, total: usize) -> String {
    let filled = (done.min(total) * BAR_WIDTH).checked_div(total).unwrap_or(BAR_WIDTH);
    format!("[{}{}] {done}/{total}", "#".repeat(filled), "-".repeat(BAR_WIDTH - filled))
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
}
