//! The activation arena: one block of memory shared by every intermediate
//! buffer of a compiled function, each placed by [`plan_arena`] so that
//! buffers alive at the same time never overlap.
//!
//! A buffer is alive from the step that writes it to the last step that
//! reads it, both included, so an op's results never share bytes with its
//! operands or its scratch space. Placement is greedy in order of first
//! step: buffers whose last step has passed are released, and each new one
//! takes the lowest 64-byte-aligned gap between live buffers that fits it
//! (first fit). The arena is the highest end of any placement.

use crate::abi::BUFFER_ALIGN;

/// When a buffer is alive (steps `first..=last`) and how big it is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Lifetime {
    /// The step that writes it first.
    pub first: usize,
    /// The last step that reads it.
    pub last: usize,
    /// Its size in bytes.
    pub bytes: usize,
}

/// The offset of each buffer, in input order, and the arena's size.
pub(crate) fn plan_arena(buffers: &[Lifetime]) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_by_key(|&i| (buffers[i].first, std::cmp::Reverse(buffers[i].bytes)));
    let mut offsets = vec![0; buffers.len()];
    // Live placements as (offset, end, last step), kept sorted by offset.
    let mut live: Vec<(usize, usize, usize)> = Vec::new();
    let mut arena = 0;
    for i in order {
        let b = buffers[i];
        live.retain(|&(_, _, last)| last >= b.first);
        let size = b.bytes.max(1).next_multiple_of(BUFFER_ALIGN);
        let mut candidate = 0;
        let mut slot = live.len();
        for (k, &(start, end, _)) in live.iter().enumerate() {
            if candidate + size <= start {
                slot = k;
                break;
            }
            candidate = candidate.max(end);
        }
        offsets[i] = candidate;
        live.insert(slot, (candidate, candidate + size, b.last));
        arena = arena.max(candidate + size);
    }
    (offsets, arena)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlaps(a: (usize, Lifetime), b: (usize, Lifetime)) -> bool {
        let (oa, la) = a;
        let (ob, lb) = b;
        let time = la.first <= lb.last && lb.first <= la.last;
        let space = oa < ob + lb.bytes && ob < oa + la.bytes;
        time && space
    }

    #[test]
    fn a_chain_reuses_two_buffers() {
        let chain: Vec<Lifetime> = (0..10).map(|i| Lifetime { first: i, last: i + 1, bytes: 1000 }).collect();
        let (offsets, size) = plan_arena(&chain);
        assert_eq!(size, 2 * 1024);
        assert_eq!(offsets[0], offsets[2]);
        assert_ne!(offsets[0], offsets[1]);
    }

    #[test]
    fn live_buffers_never_overlap() {
        // A deterministic pseudo-random mix of lifetimes and sizes.
        let mut state = 12345u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        let buffers: Vec<Lifetime> = (0..300)
            .map(|_| {
                let first = next() % 100;
                Lifetime { first, last: first + next() % 20, bytes: 1 + next() % 5000 }
            })
            .collect();
        let (offsets, size) = plan_arena(&buffers);
        for i in 0..buffers.len() {
            assert_eq!(offsets[i] % BUFFER_ALIGN, 0);
            assert!(offsets[i] + buffers[i].bytes <= size);
            for j in 0..i {
                assert!(!overlaps((offsets[i], buffers[i]), (offsets[j], buffers[j])), "{i} and {j}");
            }
        }
    }
}
