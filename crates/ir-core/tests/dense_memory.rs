//! A long dense list parses with bounded overhead: the peak of the heap while
//! parsing stays within twice the decoded data (plus a fixed allowance for the
//! op and its type), not ~95 bytes per element as when every leaf's text
//! and token were kept until the type after the list was read.
//!
//! Its own test binary: a counting global allocator sees every allocation of
//! the process, so nothing else may run beside it.

use qopt_ir_core::{parse_module, Context};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counters are only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The peak of heap bytes allocated while parsing `text`, above what was
/// live before.
fn parse_peak(text: &str) -> usize {
    let mut ctx = Context::new();
    ctx.set_allow_unregistered(true);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let module = parse_module(&mut ctx, text.as_bytes(), "dense.qir").expect("parses");
    let peak = PEAK.load(Ordering::Relaxed) - before;
    drop(module);
    peak
}

#[test]
fn a_long_dense_list_costs_at_most_twice_its_decoded_data() {
    const N: usize = 1_000_000;
    let mut list = String::new();
    for i in 0..N {
        if i > 0 {
            list.push_str(", ");
        }
        list.push_str(&format!("{}.5", i % 1000));
    }
    let dense = format!("\"test.c\"() {{value = dense<[{list}]> : tensor<{N}xf32>}} : () -> ()\n");
    // The same number of bytes without the list: what the parser reserves
    // from the input's size alone (its op arena), whatever the input holds.
    let plain = format!("// {}\n\"test.c\"() : () -> ()\n", "x".repeat(dense.len()));
    let overhead = parse_peak(&dense).saturating_sub(parse_peak(&plain));
    let decoded = N * 4;
    // 2x: the buffer the leaves are encoded into and its copy into the
    // attribute's shared bytes; 4 KiB for the op, its attributes and the type.
    assert!(
        overhead <= 2 * decoded + 4096,
        "{overhead} bytes beyond the input's own while parsing {decoded} bytes of f32"
    );
}
