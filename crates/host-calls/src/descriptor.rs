//! [`HostCallDescriptor`]: what one host call needs to find its op and its
//! buffers, as little-endian 64-bit words in the program's read-only data
//! (so that an object file holds it as plain bytes and needs no relocation):
//!
//! ```text
//! [0] magic "qopthost"   [1] version (1)
//! [2] offset of the host module's text in rodata   [3] its length in bytes
//! [4] the function's number N (@host<N>)   [5] slots of the io table
//! [6] operands   [7] results
//! then per operand, then per result: kind (0 arena, 1 rodata, 2 io slot), offset or slot
//! ```

/// `b"qopthost"` as a little-endian word.
const MAGIC: u64 = u64::from_le_bytes(*b"qopthost");
const VERSION: u64 = 1;
const HEADER_WORDS: usize = 8;

/// Where a host call's buffer lives while the program runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HostPlace {
    /// At this offset of the arena.
    Arena(usize),
    /// At this offset of the read-only data.
    Rodata(usize),
    /// The caller's buffer in this slot of the io table.
    Io(usize),
}

/// One host call: its op's function in the host module and its buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCallDescriptor {
    /// Offset of the host module's `.qir` text in the read-only data.
    pub text_offset: usize,
    /// Its length in bytes.
    pub text_len: usize,
    /// The op's function is `@host<function>`.
    pub function: usize,
    /// Slots in the io table (inputs, then outputs).
    pub io_slots: usize,
    /// Where each operand is, in order.
    pub operands: Vec<HostPlace>,
    /// Where each result goes, in order.
    pub results: Vec<HostPlace>,
}

impl HostCallDescriptor {
    /// The descriptor's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut words = vec![
            MAGIC,
            VERSION,
            self.text_offset as u64,
            self.text_len as u64,
            self.function as u64,
            self.io_slots as u64,
            self.operands.len() as u64,
            self.results.len() as u64,
        ];
        for place in self.operands.iter().chain(&self.results) {
            let (kind, at) = match *place {
                HostPlace::Arena(offset) => (0, offset),
                HostPlace::Rodata(offset) => (1, offset),
                HostPlace::Io(slot) => (2, slot),
            };
            words.extend([kind, at as u64]);
        }
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Reads the descriptor at `at`.
    ///
    /// # Safety
    /// `at` must address a descriptor [`HostCallDescriptor::encode`] wrote
    /// (its header words at least, which are checked before the rest is read).
    pub unsafe fn decode(at: *const u8) -> Result<HostCallDescriptor, String> {
        let word = |i: usize| -> u64 {
            let mut bytes = [0u8; 8];
            // SAFETY: the caller guarantees the descriptor's words; `i` stays
            // within the header, then within the counts the header gives.
            unsafe { std::ptr::copy_nonoverlapping(at.add(8 * i), bytes.as_mut_ptr(), 8) };
            u64::from_le_bytes(bytes)
        };
        if word(0) != MAGIC || word(1) != VERSION {
            return Err("not a host-call descriptor of this version".to_string());
        }
        let size =
            |w: u64| usize::try_from(w).map_err(|_| "a host-call descriptor's word overflows".to_string());
        let (operands, results) = (size(word(6))?, size(word(7))?);
        if operands > 1 << 16 || results > 1 << 16 {
            return Err(format!("a host-call descriptor with {operands} operands and {results} results"));
        }
        let mut places = Vec::with_capacity(operands + results);
        for b in 0..operands + results {
            let at = size(word(HEADER_WORDS + 2 * b + 1))?;
            places.push(match word(HEADER_WORDS + 2 * b) {
                0 => HostPlace::Arena(at),
                1 => HostPlace::Rodata(at),
                2 => HostPlace::Io(at),
                kind => return Err(format!("a host-call buffer of unknown kind {kind}")),
            });
        }
        let results_places = places.split_off(operands);
        Ok(HostCallDescriptor {
            text_offset: size(word(2))?,
            text_len: size(word(3))?,
            function: size(word(4))?,
            io_slots: size(word(5))?,
            operands: places,
            results: results_places,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_reads_back_as_written() {
        let d = HostCallDescriptor {
            text_offset: 4096,
            text_len: 321,
            function: 2,
            io_slots: 3,
            operands: vec![HostPlace::Io(0), HostPlace::Rodata(128)],
            results: vec![HostPlace::Arena(64)],
        };
        let bytes = d.encode();
        assert_eq!(bytes.len(), 8 * (8 + 2 * 3));
        // SAFETY: `bytes` is what encode wrote.
        assert_eq!(unsafe { HostCallDescriptor::decode(bytes.as_ptr()) }, Ok(d));
        let mut wrong = bytes.clone();
        wrong[0] ^= 1;
        // SAFETY: as above, with a changed magic.
        assert!(unsafe { HostCallDescriptor::decode(wrong.as_ptr()) }.is_err());
    }
}
