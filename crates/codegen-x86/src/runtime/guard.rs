//! Memory with inaccessible guard pages on both sides: [`GuardedRegion`].
//!
//! The JIT's read-only data always lives in one, and a [`crate::Workspace`]
//! can ask for one ([`crate::Workspace::guarded`]), so a kernel that reads or
//! writes past either end of a buffer faults at once instead of silently
//! touching a neighbour. Tests put the caller's inputs and outputs in guarded
//! regions too, flush against the upper guard page (overruns) or the lower
//! one (underruns).

use crate::error::{CodegenError, CodegenErrorKind};

/// `bytes` usable bytes between two `PROT_NONE` pages (plus the rounding up
/// to whole pages), unmapped on drop.
#[derive(Debug)]
pub struct GuardedRegion {
    base: *mut u8,
    mapped: usize,
    usable: *mut u8,
    bytes: usize,
}

// SAFETY: the region is plain memory owned by this value.
unsafe impl Send for GuardedRegion {}
// SAFETY: shared references only give out the pointer; writes go through it
// under the caller's own synchronization (the kernels' disjoint work ranges).
unsafe impl Sync for GuardedRegion {}

/// Where the usable bytes sit inside their pages.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum GuardSide {
    /// The buffer starts right after the lower guard page (catches reads
    /// and writes before its start).
    Start,
    /// The buffer ends right before the upper guard page, at the largest
    /// `align`-aligned start (catches reads and writes past its end when
    /// `bytes` is a multiple of `align`).
    End {
        /// Alignment the start must keep.
        align: usize,
    },
}

impl GuardedRegion {
    /// A readable and writable region of `bytes` bytes placed per `side`.
    pub fn new(bytes: usize, side: GuardSide) -> Result<GuardedRegion, CodegenError> {
        let page = page_size();
        let memory = |what: &str| {
            CodegenError::new(
                CodegenErrorKind::Memory,
                format!("{what} a guarded region of {bytes} bytes: {}", std::io::Error::last_os_error()),
            )
        };
        let body = bytes.max(1).checked_next_multiple_of(page).ok_or_else(|| memory("sizing"))?;
        let mapped = body.checked_add(2 * page).ok_or_else(|| memory("sizing"))?;
        // SAFETY: a fresh anonymous private mapping with no access; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(memory("mapping"));
        }
        let base = base.cast::<u8>();
        // SAFETY: `base + page .. base + page + body` lies inside the mapping.
        let body_start = unsafe { base.add(page) };
        // SAFETY: the range is inside the mapping made above.
        if unsafe { libc::mprotect(body_start.cast(), body, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
            let e = memory("protecting");
            // SAFETY: unmapping exactly the mapping made above.
            unsafe { libc::munmap(base.cast(), mapped) };
            return Err(e);
        }
        let offset = match side {
            GuardSide::Start => 0,
            GuardSide::End { align } => (body - bytes) / align.max(1) * align.max(1),
        };
        // SAFETY: offset + bytes ≤ body.
        let usable = unsafe { body_start.add(offset) };
        Ok(GuardedRegion { base, mapped, usable, bytes })
    }

    /// The first usable byte.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.usable
    }

    /// The usable bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// No usable bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The usable bytes as a slice.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `bytes` readable bytes start at `usable` while self lives.
        unsafe { std::slice::from_raw_parts(self.usable, self.bytes) }
    }

    /// The usable bytes as a mutable slice.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.usable, self.bytes) }
    }

    /// Makes the usable pages read-only.
    pub fn make_read_only(&self) -> Result<(), CodegenError> {
        let page = page_size();
        // SAFETY: the body pages of the mapping made in `new`.
        let r =
            unsafe { libc::mprotect(self.base.add(page).cast(), self.mapped - 2 * page, libc::PROT_READ) };
        if r != 0 {
            return Err(CodegenError::new(
                CodegenErrorKind::Memory,
                format!("protecting a guarded region: {}", std::io::Error::last_os_error()),
            ));
        }
        Ok(())
    }
}

impl Drop for GuardedRegion {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `new`, once.
        unsafe { libc::munmap(self.base.cast(), self.mapped) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_usable_and_placed() {
        let mut r = GuardedRegion::new(100, GuardSide::End { align: 4 }).unwrap();
        r.as_mut_slice().fill(7);
        assert_eq!(r.as_slice().iter().map(|&b| usize::from(b)).sum::<usize>(), 700);
        assert_eq!((r.as_mut_ptr() as usize + 100) % page_size(), 0);
        let s = GuardedRegion::new(0, GuardSide::Start).unwrap();
        assert!(s.is_empty());
        assert_eq!(s.as_mut_ptr() as usize % page_size(), 0);
        r.make_read_only().unwrap();
        assert_eq!(r.as_slice()[99], 7);
    }
}
