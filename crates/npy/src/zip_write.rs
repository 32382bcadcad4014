//! Writing `.npz` archives: STORED members with CRC-32 checksums, as
//! `np.savez` writes them.

use crate::array::RawArray;
use crate::crc32::crc32;
use crate::npy::invalid_input;
use crate::npy::npy_bytes;
use crate::zip_read::{SIG_CENTRAL, SIG_EOCD, SIG_LOCAL};
use std::io::{self, Write};

/// DOS date 1980-01-01, time 00:00:00: a fixed timestamp keeps archives reproducible.
const DOS_TIME: u16 = 0;
const DOS_DATE: u16 = (1 << 5) | 1;

/// The largest size or offset a zip archive without ZIP64 records holds.
pub(crate) const ZIP32_LIMIT: u64 = u32::MAX as u64 - 1;

/// One STORED member of a zip archive, as its local header and central
/// directory record describe it.
pub(crate) struct StoredEntry<'a> {
    /// The member's file name (`<name>.npy`).
    pub file_name: &'a str,
    /// CRC-32 of the member's bytes.
    pub crc: u32,
    /// The member's size in bytes.
    pub size: u32,
    /// Where its local header starts in the archive.
    pub offset: u32,
}

impl StoredEntry<'_> {
    /// The general-purpose flags: bit 11 for a UTF-8 name.
    fn flags(&self) -> u16 {
        if self.file_name.is_ascii() {
            0
        } else {
            0x800
        }
    }

    fn name_len(&self) -> io::Result<u16> {
        u16::try_from(self.file_name.len()).map_err(|_| invalid_input("name too long".into()))
    }

    /// The local file header, followed in the archive by the member's bytes.
    pub(crate) fn local_header(&self) -> io::Result<Vec<u8>> {
        let mut local = Vec::with_capacity(30 + self.file_name.len());
        local.extend_from_slice(&SIG_LOCAL.to_le_bytes());
        for v in [20u16, self.flags(), 0, DOS_TIME, DOS_DATE] {
            local.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.crc, self.size, self.size] {
            local.extend_from_slice(&v.to_le_bytes());
        }
        local.extend_from_slice(&self.name_len()?.to_le_bytes());
        local.extend_from_slice(&0u16.to_le_bytes());
        local.extend_from_slice(self.file_name.as_bytes());
        Ok(local)
    }

    /// The member's central directory record.
    pub(crate) fn central_record(&self) -> io::Result<Vec<u8>> {
        let mut central = Vec::with_capacity(46 + self.file_name.len());
        central.extend_from_slice(&SIG_CENTRAL.to_le_bytes());
        for v in [20u16, 20, self.flags(), 0, DOS_TIME, DOS_DATE] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.crc, self.size, self.size] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.name_len()?, 0, 0, 0, 0] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        central.extend_from_slice(&0u32.to_le_bytes()); // external attributes
        central.extend_from_slice(&self.offset.to_le_bytes());
        central.extend_from_slice(self.file_name.as_bytes());
        Ok(central)
    }
}

/// The end of central directory record of an archive of `count` members whose
/// central directory of `size` bytes starts at `offset`.
pub(crate) fn end_of_central_directory(count: usize, size: u32, offset: u32) -> io::Result<Vec<u8>> {
    let too_many = || invalid_input(format!("{count} members are too many for a non-ZIP64 .npz writer"));
    let count = u16::try_from(count).ok().filter(|&c| c != u16::MAX).ok_or_else(too_many)?;
    let mut eocd = Vec::with_capacity(22);
    eocd.extend_from_slice(&SIG_EOCD.to_le_bytes());
    for v in [0u16, 0, count, count] {
        eocd.extend_from_slice(&v.to_le_bytes());
    }
    eocd.extend_from_slice(&size.to_le_bytes());
    eocd.extend_from_slice(&offset.to_le_bytes());
    eocd.extend_from_slice(&0u16.to_le_bytes()); // comment length
    Ok(eocd)
}

/// Writes `arrays` as an uncompressed `.npz` archive (like `np.savez`); each array becomes a
/// member named `"<name>.npy"`.
pub fn write_npz(arrays: &[(String, RawArray)], out: &mut dyn Write) -> io::Result<()> {
    let too_big = || invalid_input("archive too large for a non-ZIP64 .npz writer".to_string());
    let fits = |n: u64| u32::try_from(n).ok().filter(|&n| u64::from(n) <= ZIP32_LIMIT).ok_or_else(too_big);
    let mut names = std::collections::HashSet::new();
    let mut central = Vec::new();
    let mut offset = 0u64;
    for (name, array) in arrays {
        if !names.insert(name.as_str()) {
            return Err(invalid_input(format!("duplicate .npz member name '{name}'")));
        }
        let file_name = format!("{name}.npy");
        let data = npy_bytes(array)?;
        let entry = StoredEntry {
            file_name: &file_name,
            crc: crc32(&data),
            size: fits(data.len() as u64)?,
            offset: fits(offset)?,
        };
        let local = entry.local_header()?;
        out.write_all(&local)?;
        out.write_all(&data)?;
        central.extend_from_slice(&entry.central_record()?);
        offset += (local.len() + data.len()) as u64;
    }
    let cd_size = fits(central.len() as u64)?;
    let eocd = end_of_central_directory(arrays.len(), cd_size, fits(offset)?)?;
    out.write_all(&central)?;
    out.write_all(&eocd)
}
