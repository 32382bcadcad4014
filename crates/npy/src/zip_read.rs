//! Reading `.npz` archives: the zip container (central directory, ZIP64
//! records, STORED and DEFLATE members) located without reading member data,
//! so a streaming reader can map STORED members in place.

use crate::array::RawArray;
use crate::crc32::crc32;
use crate::error::{bad_zip, NpyError};
use crate::npy::read_npy;
use std::borrow::Cow;
use std::io::{self};

pub(crate) const SIG_LOCAL: u32 = 0x0403_4b50;
pub(crate) const SIG_CENTRAL: u32 = 0x0201_4b50;
pub(crate) const SIG_EOCD: u32 = 0x0605_4b50;
const SIG_ZIP64_EOCD: u32 = 0x0606_4b50;
const SIG_ZIP64_LOCATOR: u32 = 0x0706_4b50;

/// Random access to the bytes of an archive: a slice in memory, or a file read piecewise
/// ([`npz_members_with`]).
trait ArchiveBytes {
    /// Total length.
    fn size(&self) -> usize;
    /// Bytes `start .. start + n`, which the caller has checked lie within `size()`.
    fn read(&self, start: usize, n: usize) -> Result<Cow<'_, [u8]>, NpyError>;
}

impl ArchiveBytes for [u8] {
    fn size(&self) -> usize {
        self.len()
    }

    fn read(&self, start: usize, n: usize) -> Result<Cow<'_, [u8]>, NpyError> {
        Ok(Cow::Borrowed(&self[start..start + n]))
    }
}

/// An archive of `len` bytes read through positioned reads.
struct ReadAt<F> {
    len: usize,
    read_at: F,
}

impl<F: Fn(u64, &mut [u8]) -> io::Result<()>> ArchiveBytes for ReadAt<F> {
    fn size(&self) -> usize {
        self.len
    }

    fn read(&self, start: usize, n: usize) -> Result<Cow<'_, [u8]>, NpyError> {
        let mut buf = vec![0u8; n];
        (self.read_at)(start as u64, &mut buf)?;
        Ok(Cow::Owned(buf))
    }
}

/// Bounds-checked little-endian reads over archive bytes.
struct Cursor<'a, A: ArchiveBytes + ?Sized> {
    bytes: &'a A,
    pos: usize,
}

impl<'a, A: ArchiveBytes + ?Sized> Cursor<'a, A> {
    fn at(bytes: &'a A, pos: usize) -> Self {
        Cursor { bytes, pos }
    }

    /// Advances over `n` bytes, returning their range (checked against the length).
    fn skip(&mut self, n: usize) -> Result<std::ops::Range<usize>, NpyError> {
        let end = self.pos.checked_add(n).ok_or_else(|| bad_zip("offset overflow"))?;
        if end > self.bytes.size() {
            return Err(bad_zip("unexpected end of archive"));
        }
        let range = self.pos..end;
        self.pos = end;
        Ok(range)
    }

    fn take(&mut self, n: usize) -> Result<Cow<'a, [u8]>, NpyError> {
        let range = self.skip(n)?;
        self.bytes.read(range.start, n)
    }

    fn u16(&mut self) -> Result<u16, NpyError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, NpyError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, NpyError> {
        let b = self.take(8)?;
        let mut buf = [0u8; 8];
        buf.copy_from_slice(&b);
        Ok(u64::from_le_bytes(buf))
    }
}

fn to_usize(v: u64) -> Result<usize, NpyError> {
    usize::try_from(v).map_err(|_| bad_zip("size does not fit in memory"))
}

/// Locates the central directory: returns (entry count, offset).
fn find_central_directory<A: ArchiveBytes + ?Sized>(bytes: &A) -> Result<(u64, u64), NpyError> {
    const EOCD_LEN: usize = 22;
    let len = bytes.size();
    if len < EOCD_LEN {
        return Err(bad_zip("too short to be a zip archive"));
    }
    // The end record is followed by a comment of at most 65535 bytes.
    let lowest = len.saturating_sub(EOCD_LEN + usize::from(u16::MAX));
    let tail = bytes.read(lowest, len - lowest)?;
    let eocd = (0..=tail.len() - EOCD_LEN)
        .rev()
        .find(|&i| tail[i..i + 4] == SIG_EOCD.to_le_bytes())
        .ok_or_else(|| bad_zip("end of central directory record not found"))?
        + lowest;
    let mut c = Cursor::at(bytes, eocd + 4);
    let disk = c.u16()?;
    let cd_disk = c.u16()?;
    let _entries_on_disk = c.u16()?;
    let entries = c.u16()?;
    let _cd_size = c.u32()?;
    let cd_offset = c.u32()?;
    if entries == u16::MAX || cd_offset == u32::MAX {
        // ZIP64: the locator sits right before the end record.
        let loc = eocd.checked_sub(20).ok_or_else(|| bad_zip("missing ZIP64 locator"))?;
        let mut c = Cursor::at(bytes, loc);
        if c.u32()? != SIG_ZIP64_LOCATOR {
            return Err(bad_zip("missing ZIP64 end of central directory locator"));
        }
        let _disk = c.u32()?;
        let record = to_usize(c.u64()?)?;
        let mut c = Cursor::at(bytes, record);
        if c.u32()? != SIG_ZIP64_EOCD {
            return Err(bad_zip("bad ZIP64 end of central directory record"));
        }
        let _record_size = c.u64()?;
        let _made_by = c.u16()?;
        let _needed = c.u16()?;
        let disk = c.u32()?;
        let cd_disk = c.u32()?;
        let _entries_on_disk = c.u64()?;
        let entries = c.u64()?;
        let _cd_size = c.u64()?;
        let cd_offset = c.u64()?;
        if disk != 0 || cd_disk != 0 {
            return Err(bad_zip("multi-disk archives are not supported"));
        }
        return Ok((entries, cd_offset));
    }
    if disk != 0 || cd_disk != 0 {
        return Err(bad_zip("multi-disk archives are not supported"));
    }
    Ok((u64::from(entries), u64::from(cd_offset)))
}

/// One `.npy` member of a `.npz` archive, located by [`npz_members`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpzMember {
    /// The array name: the member name without `.npy`.
    pub name: String,
    /// The member is DEFLATE-compressed (`np.savez_compressed`); otherwise it is STORED and
    /// its bytes are the `.npy` file itself.
    pub compressed: bool,
    /// Offset of the member's (possibly compressed) bytes from the start of the archive.
    pub data_offset: usize,
    /// Number of (possibly compressed) bytes at `data_offset`; inside the archive.
    pub compressed_size: usize,
    /// Size of the member's `.npy` bytes once decompressed (equals `compressed_size` when
    /// STORED).
    pub size: usize,
    /// The CRC-32 the archive records for the decompressed bytes.
    pub crc32: u32,
}

/// Walks the central directory, calling `f` for each `.npy` member in archive order. Every
/// check of the directory entry and local header of a member happens before `f` sees it.
fn walk_npz<A: ArchiveBytes + ?Sized>(
    bytes: &A,
    mut f: impl FnMut(NpzMember) -> Result<(), NpyError>,
) -> Result<(), NpyError> {
    let (entries, cd_offset) = find_central_directory(bytes)?;
    let mut c = Cursor::at(bytes, to_usize(cd_offset)?);
    for _ in 0..entries {
        if c.u32()? != SIG_CENTRAL {
            return Err(bad_zip("bad central directory entry signature"));
        }
        let _made_by = c.u16()?;
        let _needed = c.u16()?;
        let flags = c.u16()?;
        let method = c.u16()?;
        let _time = c.u16()?;
        let _date = c.u16()?;
        let crc = c.u32()?;
        let mut compressed_size = u64::from(c.u32()?);
        let mut size = u64::from(c.u32()?);
        let name_len = usize::from(c.u16()?);
        let extra_len = usize::from(c.u16()?);
        let comment_len = usize::from(c.u16()?);
        let _disk_start = c.u16()?;
        let _internal_attr = c.u16()?;
        let _external_attr = c.u32()?;
        let mut local_offset = u64::from(c.u32()?);
        let name = String::from_utf8_lossy(&c.take(name_len)?).into_owned();
        let extra = c.take(extra_len)?;
        let extra: &[u8] = &extra;
        c.skip(comment_len)?;

        // ZIP64 extended information replaces the saturated 32-bit fields, in this order.
        let mut e = Cursor::at(extra, 0);
        while e.pos + 4 <= extra.len() {
            let id = e.u16()?;
            let len = usize::from(e.u16()?);
            let field = e.take(len)?;
            if id == 0x0001 {
                let mut f = Cursor::at(&*field, 0);
                if size == u64::from(u32::MAX) {
                    size = f.u64()?;
                }
                if compressed_size == u64::from(u32::MAX) {
                    compressed_size = f.u64()?;
                }
                if local_offset == u64::from(u32::MAX) {
                    local_offset = f.u64()?;
                }
            }
        }

        if name.ends_with('/') {
            continue; // directory entry
        }
        if flags & 0x1 != 0 {
            return Err(bad_zip(format!("member '{name}' is encrypted")));
        }
        let Some(array_name) = name.strip_suffix(".npy") else {
            return Err(bad_zip(format!("member '{name}' is not a .npy file")));
        };

        // The local header repeats name and extra field (possibly with different lengths).
        let mut l = Cursor::at(bytes, to_usize(local_offset)?);
        if l.u32()? != SIG_LOCAL {
            return Err(bad_zip(format!("bad local header signature for member '{name}'")));
        }
        l.skip(22)?;
        let local_name_len = usize::from(l.u16()?);
        let local_extra_len = usize::from(l.u16()?);
        l.skip(local_name_len)?;
        l.skip(local_extra_len)?;
        let data_offset = l.pos;
        let compressed = l.skip(to_usize(compressed_size)?)?;
        let size = to_usize(size)?;
        match method {
            0 => {
                if compressed.len() != size {
                    return Err(bad_zip(format!("stored member '{name}' has inconsistent sizes")));
                }
            }
            8 => {}
            m => {
                return Err(bad_zip(format!(
                    "member '{name}' uses unsupported compression method {m} (only STORED and DEFLATE)"
                )));
            }
        }
        f(NpzMember {
            name: array_name.to_string(),
            compressed: method == 8,
            data_offset,
            compressed_size: compressed.len(),
            size,
            crc32: crc,
        })?;
    }
    Ok(())
}

/// Locates the `.npy` members of a `.npz` archive, in archive order, without reading their
/// data: the central directory and local headers are checked, member data (and its CRC) is
/// not. Get a member's `.npy` bytes with [`npz_member_data`], or, for a STORED member, read
/// them in place at `data_offset .. data_offset + size`.
pub fn npz_members(bytes: &[u8]) -> Result<Vec<NpzMember>, NpyError> {
    let mut members = Vec::new();
    walk_npz(bytes, |m| {
        members.push(m);
        Ok(())
    })?;
    Ok(members)
}

/// Like [`npz_members`], for an archive of `len` bytes that `read_at(offset, buf)` reads
/// piecewise (filling all of `buf` from `offset`, like `FileExt::read_exact_at`): only the end
/// records, the central directory and the local headers are read, never member data.
pub fn npz_members_with(
    len: u64,
    read_at: impl Fn(u64, &mut [u8]) -> io::Result<()>,
) -> Result<Vec<NpzMember>, NpyError> {
    let archive = ReadAt { len: to_usize(len)?, read_at };
    let mut members = Vec::new();
    walk_npz(&archive, |m| {
        members.push(m);
        Ok(())
    })?;
    Ok(members)
}

/// The `.npy` bytes of `member` of the archive `bytes`: borrowed for a STORED member,
/// inflated for a DEFLATE one; the CRC-32 is checked either way.
pub fn npz_member_data<'a>(bytes: &'a [u8], member: &NpzMember) -> Result<Cow<'a, [u8]>, NpyError> {
    let name = format!("{}.npy", member.name);
    let compressed = member
        .data_offset
        .checked_add(member.compressed_size)
        .and_then(|end| bytes.get(member.data_offset..end))
        .ok_or_else(|| bad_zip("unexpected end of archive"))?;
    let size = member.size;
    let data: Cow<'a, [u8]> = if member.compressed {
        let data = miniz_oxide::inflate::decompress_to_vec_with_limit(compressed, size)
            .map_err(|e| bad_zip(format!("cannot inflate member '{name}': {e}")))?;
        if data.len() != size {
            return Err(bad_zip(format!(
                "member '{name}' inflated to {} bytes, expected {size}",
                data.len()
            )));
        }
        data.into()
    } else {
        if compressed.len() != size {
            return Err(bad_zip(format!("stored member '{name}' has inconsistent sizes")));
        }
        compressed.into()
    };
    if crc32(&data) != member.crc32 {
        return Err(bad_zip(format!("CRC-32 mismatch in member '{name}'")));
    }
    Ok(data)
}

/// Parses a `.npz` archive. Members must be `.npy` files; their names are returned without
/// the `.npy` suffix, in archive order.
pub fn read_npz(bytes: &[u8]) -> Result<Vec<(String, RawArray)>, NpyError> {
    let mut arrays = Vec::new();
    walk_npz(bytes, |member| {
        let data = npz_member_data(bytes, &member)?;
        let array = read_npy(&data)
            .map_err(|e| NpyError::Member { name: member.name.clone(), source: Box::new(e) })?;
        arrays.push((member.name, array));
        Ok(())
    })?;
    Ok(arrays)
}
