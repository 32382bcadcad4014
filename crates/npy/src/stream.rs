//! Writing a `.npz` archive whose members grow one entry at a time, with
//! memory independent of the number of entries: [`NpzStream`].
//!
//! Each member is an array of entries of one dtype and one shape, stacked
//! along a new leading dimension (`[entries, shape...]`). Entries are
//! appended to one scratch file per member, in a hidden directory beside the
//! target ([`qopt_ir_core::scratch_path_beside`]); only a small write buffer
//! per member stays in memory. [`NpzStream::finish`] assembles the archive
//! through [`qopt_ir_core::write_file_atomically`]: for each member its
//! CRC-32 is computed by reading the scratch file once, then the local
//! header, the `.npy` header (whose shape now knows the entry count) and the
//! data are copied out; the central directory follows. Members are STORED,
//! as `np.savez` writes them, so NumPy and `qopt_quant::runs::dataset` read the result
//! (the dataset maps member data in place).
//!
//! The archive has no ZIP64 records: a member or an archive past 4 GiB is an
//! error when the entry that crosses the limit is appended, before anything
//! is written to the target. The scratch directory is removed when the
//! stream is finished or dropped, so a failed run leaves neither it nor a
//! partial target behind (the target, if it existed, is untouched), and
//! an interrupt (SIGINT, SIGTERM) removes it too ([`ScratchGuard`]).

use crate::npy::npy_header;
use crate::zip_write::{end_of_central_directory, StoredEntry, ZIP32_LIMIT};
use crate::{crc32_continue, DType, RawArray};
use qopt_ir_core::ScratchGuard;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Bytes buffered per member before they go to its scratch file.
const MEMBER_BUFFER: usize = 64 * 1024;

/// A `.npz` archive being written; see the module docs.
pub struct NpzStream {
    target: PathBuf,
    scratch: PathBuf,
    members: Vec<Member>,
    /// The scratch directory and its part files, removed on an interrupt.
    interrupt_cleanup: Vec<ScratchGuard>,
}

/// One member: its name, what each entry is, and the entries so far.
struct Member {
    name: String,
    dtype: DType,
    entry_shape: Vec<usize>,
    entries: usize,
    bytes: u64,
    file: BufWriter<File>,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

impl NpzStream {
    /// Starts an archive that [`finish`](Self::finish) writes to `target`.
    /// Fails (writing nothing) when the scratch directory cannot be made
    /// beside `target` (a missing or read-only directory).
    pub fn create(target: &Path) -> io::Result<NpzStream> {
        let scratch = qopt_ir_core::scratch_path_beside(target, "parts");
        std::fs::create_dir(&scratch)?;
        let interrupt_cleanup = vec![ScratchGuard::directory(&scratch)];
        Ok(NpzStream { target: target.to_path_buf(), scratch, members: Vec::new(), interrupt_cleanup })
    }

    /// Adds a member named `name` (stored as `<name>.npy`) whose entries are
    /// arrays of `dtype` and `entry_shape`; returns its index for
    /// [`append`](Self::append). Names are unique.
    pub fn add_member(&mut self, name: &str, dtype: DType, entry_shape: &[usize]) -> io::Result<usize> {
        if self.members.iter().any(|m| m.name == name) {
            return Err(invalid(format!("duplicate .npz member name '{name}'")));
        }
        let path = self.scratch.join(format!("{}.part", self.members.len()));
        self.interrupt_cleanup.push(ScratchGuard::new(&path));
        let file = BufWriter::with_capacity(MEMBER_BUFFER, File::create(path)?);
        self.members.push(Member {
            name: name.to_string(),
            dtype,
            entry_shape: entry_shape.to_vec(),
            entries: 0,
            bytes: 0,
            file,
        });
        Ok(self.members.len() - 1)
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether there is no member yet.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Appends one entry to member `member`; its dtype and shape must be the
    /// member's.
    pub fn append(&mut self, member: usize, entry: &RawArray) -> io::Result<()> {
        let m = self.members.get_mut(member).ok_or_else(|| invalid(format!("no .npz member #{member}")))?;
        if entry.dtype != m.dtype || entry.shape != m.entry_shape {
            return Err(invalid(format!(
                "member '{}' holds {} entries of shape {:?}, got {} of shape {:?}",
                m.name, m.dtype, m.entry_shape, entry.dtype, entry.shape
            )));
        }
        let bytes = m.bytes + entry.data.len() as u64;
        if bytes > ZIP32_LIMIT {
            return Err(invalid(format!(
                "member '{}' would exceed 4 GiB, more than a .npz without ZIP64 records holds; \
                 use fewer samples",
                m.name
            )));
        }
        m.file.write_all(&entry.data)?;
        m.bytes = bytes;
        m.entries += 1;
        let total: u64 = self.members.iter().map(|m| m.bytes).sum();
        if total > ZIP32_LIMIT {
            return Err(invalid(
                "the archive would exceed 4 GiB, more than a .npz without ZIP64 records holds; use fewer samples"
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// Writes the archive to the target atomically and removes the scratch
    /// files. Each member's `.npy` shape is `[entries, entry_shape...]`.
    pub fn finish(mut self) -> io::Result<()> {
        for m in &mut self.members {
            m.file.flush()?;
        }
        let parts: Vec<PathBuf> = (0..self.members.len()).map(|i| self.part_path(i)).collect();
        let members = &self.members;
        qopt_ir_core::write_file_atomically(&self.target, |out| assemble(members, &parts, out))
        // `self` drops here and removes the scratch directory.
    }

    fn part_path(&self, member: usize) -> PathBuf {
        self.scratch.join(format!("{member}.part"))
    }
}

impl Drop for NpzStream {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// Writes the zip archive of `members` (data in the scratch files `parts`) to `out`.
fn assemble(members: &[Member], parts: &[PathBuf], out: &mut dyn Write) -> io::Result<()> {
    let too_big = || invalid("the archive would exceed 4 GiB without ZIP64 records".to_string());
    let fits = |n: u64| u32::try_from(n).ok().filter(|&n| u64::from(n) <= ZIP32_LIMIT).ok_or_else(too_big);
    let mut central = Vec::new();
    let mut offset = 0u64;
    for (m, part) in members.iter().zip(parts) {
        let mut shape = Vec::with_capacity(m.entry_shape.len() + 1);
        shape.push(m.entries);
        shape.extend_from_slice(&m.entry_shape);
        let header = npy_header(m.dtype, &shape)?;
        let mut crc = crc32_continue(0, &header);
        copy_part(part, m.bytes, &mut |chunk| {
            crc = crc32_continue(crc, chunk);
            Ok(())
        })?;
        let file_name = format!("{}.npy", m.name);
        let size = fits(header.len() as u64 + m.bytes)?;
        let entry = StoredEntry { file_name: &file_name, crc, size, offset: fits(offset)? };
        let local = entry.local_header()?;
        out.write_all(&local)?;
        out.write_all(&header)?;
        copy_part(part, m.bytes, &mut |chunk| out.write_all(chunk))?;
        central.extend_from_slice(&entry.central_record()?);
        offset += local.len() as u64 + u64::from(size);
    }
    let cd_size = fits(central.len() as u64)?;
    let eocd = end_of_central_directory(members.len(), cd_size, fits(offset)?)?;
    out.write_all(&central)?;
    out.write_all(&eocd)
}

/// Reads the scratch file `part`, which must hold `bytes` bytes, in chunks.
fn copy_part(part: &Path, bytes: u64, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(MEMBER_BUFFER, File::open(part)?);
    let mut buffer = vec![0u8; MEMBER_BUFFER];
    let mut seen = 0u64;
    loop {
        let n = reader.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        sink(&buffer[..n])?;
    }
    if seen != bytes {
        return Err(io::Error::other(format!(
            "scratch file {} holds {seen} bytes, expected {bytes}",
            part.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::read_npz_file;

    fn scratch_dir(name: &str) -> qopt_ir_core::ScratchDir {
        qopt_ir_core::ScratchDir::new(&format!("npz-stream-{name}"))
    }

    #[test]
    fn entries_are_stacked_per_member_and_read_back() {
        let dir = scratch_dir("stack");
        let target = dir.join("out.npz");
        let mut stream = NpzStream::create(&target).unwrap();
        let a = stream.add_member("f/input0", DType::F32, &[2]).unwrap();
        let b = stream.add_member("f/output0", DType::I8, &[]).unwrap();
        for k in 0..3 {
            let x = RawArray::from_elements(vec![2], &[k as f32, -(k as f32)]).unwrap();
            stream.append(a, &x).unwrap();
            stream.append(b, &RawArray::from_elements(vec![], &[k as i8]).unwrap()).unwrap();
        }
        stream.finish().unwrap();
        let arrays = read_npz_file(&target).unwrap();
        assert_eq!(arrays[0].0, "f/input0");
        assert_eq!(arrays[0].1.shape, vec![3, 2]);
        assert_eq!(arrays[0].1.to_vec::<f32>().unwrap(), vec![0.0, -0.0, 1.0, -1.0, 2.0, -2.0]);
        assert_eq!(arrays[1].1.shape, vec![3]);
        assert_eq!(arrays[1].1.to_vec::<i8>().unwrap(), vec![0, 1, 2]);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("out.npz")], "scratch files are gone");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_dropped_stream_writes_nothing_and_leaves_no_scratch() {
        let dir = scratch_dir("drop");
        let target = dir.join("out.npz");
        std::fs::write(&target, b"old").unwrap();
        {
            let mut stream = NpzStream::create(&target).unwrap();
            let a = stream.add_member("x", DType::F32, &[1]).unwrap();
            stream.append(a, &RawArray::from_elements(vec![1], &[1.0f32]).unwrap()).unwrap();
            let wrong = RawArray::from_elements(vec![2], &[1.0f32, 2.0]).unwrap();
            assert!(stream.append(a, &wrong).is_err(), "shape mismatch");
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_fails_at_create() {
        let target = std::env::temp_dir().join("qopt-no-such-dir-for-npz-stream").join("out.npz");
        assert!(NpzStream::create(&target).is_err());
    }
}
