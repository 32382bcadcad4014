//! Input text: a memory-mapped file (or bytes read from stdin) that the parser
//! reads in place, without copying.
//!
//! While parsing a large mapped file, the parser tells the source which prefix it
//! is done with ([`SourceText::release_before`]); those pages are dropped from the
//! process's resident memory (`madvise(MADV_DONTNEED)`), so the input costs a
//! small window of memory, not its whole size. The mapping stays valid: a later
//! read of a released page (a diagnostic showing its source line) reloads it from
//! the file.

use memmap2::Mmap;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The bytes of one input.
pub struct SourceText {
    inner: Inner,
    /// End of the prefix already released (page aligned).
    released: std::sync::atomic::AtomicUsize,
}

enum Inner {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl SourceText {
    /// Maps a regular file (reads it when mapping is not possible, e.g. a pipe).
    pub fn read_file(path: &Path) -> io::Result<SourceText> {
        let mut file = File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_file() && meta.len() > 0 {
            // SAFETY: the mapping is read-only and private; qopt does not write the
            // input, and a file truncated by another process while qopt reads it
            // is outside what any tool reading files in place can guard against.
            if let Ok(map) = unsafe { Mmap::map(&file) } {
                return Ok(SourceText { inner: Inner::Mapped(map), released: Default::default() });
            }
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(SourceText { inner: Inner::Owned(bytes), released: Default::default() })
    }

    /// Reads all of standard input.
    pub fn read_stdin() -> io::Result<SourceText> {
        let mut bytes = Vec::new();
        io::stdin().lock().read_to_end(&mut bytes)?;
        Ok(SourceText { inner: Inner::Owned(bytes), released: Default::default() })
    }

    /// Wraps bytes already in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> SourceText {
        SourceText { inner: Inner::Owned(bytes), released: Default::default() }
    }

    /// The text.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match &self.inner {
            Inner::Mapped(m) => m,
            Inner::Owned(v) => v,
        }
    }

    /// Drops the resident pages of a mapped file before `offset` (whole pages
    /// only). Later reads of that range reload it. No effect on owned bytes.
    pub fn release_before(&self, offset: usize) {
        let Inner::Mapped(map) = &self.inner else { return };
        const PAGE: usize = 4096;
        let end = (offset.min(map.len()) / PAGE) * PAGE;
        let start = self.released.fetch_max(end, std::sync::atomic::Ordering::Relaxed);
        if end <= start {
            return;
        }
        // SAFETY: MADV_DONTNEED on a private read-only file mapping only drops
        // cached pages; the next access refills them from the unchanged file, so
        // no Rust reference ever observes different bytes.
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
    }
}

impl AsRef<[u8]> for SourceText {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}
