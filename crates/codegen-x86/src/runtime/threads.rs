//! The threads a [`crate::Workspace`] keeps for multi-threaded runs:
//! [`WorkerPool`] runs one closure on every thread at once, and
//! [`SpinBarrier`] separates the kernels inside it.
//!
//! A run of a compiled model is tens of kernels, many of them a few
//! microseconds long, so the costs that matter are waking threads and
//! crossing barriers. The pool's threads live as long as the workspace:
//! between runs they spin briefly, then park until the next run unparks
//! them. The barrier spins (yielding after a while) instead of sleeping in
//! the kernel, since the other threads normally arrive within microseconds.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Spins before a waiting thread starts yielding (barrier) or parking (pool).
const SPINS: u32 = 20_000;

/// A job: a reference to the closure every thread runs with its index.
type JobRef<'a> = &'a (dyn Fn(usize) + Sync);

struct Shared {
    /// Bumped once per job; workers run a job when they see it change.
    generation: AtomicU64,
    /// Points to the current job's `JobRef` while `pending > 0`.
    job: AtomicPtr<()>,
    /// Workers that have not finished the current job.
    pending: AtomicUsize,
    stop: AtomicBool,
}

/// `threads − 1` parked threads plus the caller's.
pub(crate) struct WorkerPool {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WorkerPool({} threads)", self.threads())
    }
}

impl WorkerPool {
    /// A pool running jobs on `threads` threads (the caller's included).
    pub fn new(threads: usize) -> std::io::Result<WorkerPool> {
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            pending: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let mut pool = WorkerPool { shared, handles: Vec::new() };
        for t in 1..threads.max(1) {
            let shared = pool.shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("qopt-x86-{t}"))
                .spawn(move || worker(&shared, t))?;
            pool.handles.push(handle);
        }
        Ok(pool)
    }

    /// Threads a job runs on.
    pub fn threads(&self) -> usize {
        self.handles.len() + 1
    }

    /// Runs `job(t)` for every thread index `t` at once (0 on the caller's
    /// thread) and returns when all have finished.
    pub fn run(&self, job: &(dyn Fn(usize) + Sync)) {
        let job_ref: JobRef<'_> = job;
        self.shared.pending.store(self.handles.len(), Ordering::Relaxed);
        self.shared.job.store((&raw const job_ref).cast_mut().cast(), Ordering::Relaxed);
        self.shared.generation.fetch_add(1, Ordering::Release);
        for h in &self.handles {
            h.thread().unpark();
        }
        job(0);
        let mut spins = 0u32;
        while self.shared.pending.load(Ordering::Acquire) != 0 {
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.generation.fetch_add(1, Ordering::Release);
        for h in self.handles.drain(..) {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

fn worker(shared: &Shared, t: usize) {
    let mut seen = 0u64;
    loop {
        let mut spins = 0u32;
        let generation = loop {
            let g = shared.generation.load(Ordering::Acquire);
            if g != seen {
                break g;
            }
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::park_timeout(Duration::from_millis(100));
            }
        };
        seen = generation;
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let job = shared.job.load(Ordering::Relaxed).cast::<JobRef<'_>>();
        // SAFETY: `run` stored a pointer to a `JobRef` on its stack before
        // bumping the generation (Release, paired with the Acquire above)
        // and keeps it alive until `pending` drops to 0, which this thread
        // does only after its last use of the job.
        let job = unsafe { *job };
        job(t);
        shared.pending.fetch_sub(1, Ordering::Release);
    }
}

/// A reusable barrier for a fixed number of threads that waits by spinning.
pub(crate) struct SpinBarrier {
    threads: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    pub fn new(threads: usize) -> SpinBarrier {
        SpinBarrier { threads, arrived: AtomicUsize::new(0), generation: AtomicUsize::new(0) }
    }

    /// Returns once all threads have called it (the same number of times).
    pub fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.threads {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_runs_every_job_between_barriers() {
        let pool = WorkerPool::new(3).unwrap();
        let barrier = SpinBarrier::new(3);
        let counts: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        let total = AtomicUsize::new(0);
        for round in 0..200 {
            pool.run(&|t| {
                for step in 0..5 {
                    counts[t].fetch_add(1, Ordering::Relaxed);
                    total.fetch_add(1, Ordering::Relaxed);
                    barrier.wait();
                    // After the barrier every thread has done this step.
                    assert!(total.load(Ordering::Relaxed) >= 3 * (round * 5 + step + 1));
                    barrier.wait();
                }
            });
        }
        for c in &counts {
            assert_eq!(c.load(Ordering::Relaxed), 1000);
        }
    }
}
