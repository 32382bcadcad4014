//! Running the chunks of a `--batch` run on every core: scoped threads, each
//! with its own worker state (its own interpreters, so their plan and constant
//! caches are never shared), each taking a contiguous range of chunks, so the
//! results come back in chunk order without sorting. The first failure stops
//! the other threads before their next chunk. The calling thread only waits
//! and draws the progress bar (see [`super::progress`] for why it, not the
//! workers, draws).
//!
//! The worker states borrow the models and the kernel registry from every
//! thread, which needs `Context`, `Module` and `KernelRegistry` to be `Sync`:
//! they are (interned data behind plain collections, no interior mutability).

use qopt_interp::progress::{Progress, REDRAW_EVERY};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The number of threads to run chunks on: the available parallelism.
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

/// Runs `work(worker, i)` for every chunk `i` in `0..chunks`, spread over the
/// `workers` (one thread each; on the calling thread when one is enough), and
/// returns the results in chunk order, or the first error.
pub(crate) fn run_chunks<W: Send, R: Send>(
    workers: &mut [W],
    chunks: usize,
    progress: &Progress,
    work: impl Fn(&mut W, usize) -> Result<R, String> + Sync,
) -> Result<Vec<R>, String> {
    let threads = workers.len().min(chunks);
    if threads <= 1 {
        let Some(worker) = workers.first_mut() else {
            return Err("no worker to run on".to_string());
        };
        return (0..chunks)
            .map(|i| {
                let r = work(worker, i);
                progress.advance();
                progress.redraw();
                r
            })
            .collect();
    }
    let (failed, finished) = (AtomicBool::new(false), AtomicUsize::new(0));
    let (failed, finished, work) = (&failed, &finished, &work);
    let caller = std::thread::current();
    let per_thread: Vec<Result<Vec<R>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers[..threads]
            .iter_mut()
            .enumerate()
            .map(|(t, worker)| {
                let range = t * chunks / threads..(t + 1) * chunks / threads;
                let caller = caller.clone();
                scope.spawn(move || {
                    let mut results = Vec::with_capacity(range.len());
                    for i in range {
                        if failed.load(Ordering::Relaxed) {
                            break;
                        }
                        let r = work(worker, i);
                        progress.advance();
                        caller.unpark();
                        match r {
                            Ok(r) => results.push(r),
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                finished.fetch_add(1, Ordering::Release);
                                caller.unpark();
                                return Err(e);
                            }
                        }
                    }
                    // Counted before the wake-up, so the caller sees it when it wakes.
                    finished.fetch_add(1, Ordering::Release);
                    caller.unpark();
                    Ok(results)
                })
            })
            .collect();
        // Every worker unparks this thread after each chunk and once it has
        // counted itself finished (`JoinHandle::is_finished` turns true only
        // later, so waiting on it could sleep a whole timeout after the end).
        while finished.load(Ordering::Acquire) < threads {
            progress.redraw();
            std::thread::park_timeout(REDRAW_EVERY);
        }
        progress.redraw();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a worker thread panicked".to_string())))
            .collect()
    });
    let mut results = Vec::with_capacity(chunks);
    for r in per_thread {
        results.extend(r?);
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_chunk_order_and_errors_stop_the_run() {
        let mut workers = vec![0usize; 3];
        let squares = run_chunks(&mut workers, 10, &Progress::hidden(), |runs, i| {
            *runs += 1;
            Ok(i * i)
        })
        .unwrap();
        assert_eq!(squares, (0..10).map(|i| i * i).collect::<Vec<_>>());
        assert_eq!(workers.iter().sum::<usize>(), 10);
        let failed = run_chunks(&mut workers, 10, &Progress::hidden(), |_, i| {
            if i == 7 {
                Err(format!("chunk {i} failed"))
            } else {
                Ok(i)
            }
        });
        assert_eq!(failed.unwrap_err(), "chunk 7 failed");
    }
}
