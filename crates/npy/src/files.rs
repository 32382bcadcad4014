//! Arrays and archives as files: reading only regular files, and telling a
//! `.npz` from a `.npy` by its content.

use crate::array::RawArray;
use crate::error::NpyError;
use crate::npy::{read_npy, write_npy};
use crate::zip_read::read_npz;
use crate::zip_write::write_npz;
use std::io::{self, Write};
use std::path::Path;

/// Reads a whole data file, refusing (without opening it) anything but a
/// regular file: opening a FIFO with no writer would block forever, and a
/// device or directory holds no array.
pub fn read_regular_file(path: &Path) -> io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, not_a_regular_file(&meta)));
    }
    std::fs::read(path)
}

/// Why a file of this kind cannot be read as data: `is a directory, not a
/// regular file`, `is a FIFO (named pipe), not a regular file`.
pub fn not_a_regular_file(meta: &std::fs::Metadata) -> String {
    let kind = meta.file_type();
    #[cfg(unix)]
    let special = {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            Some("a FIFO (named pipe)")
        } else if kind.is_char_device() || kind.is_block_device() {
            Some("a device")
        } else if kind.is_socket() {
            Some("a socket")
        } else {
            None
        }
    };
    #[cfg(not(unix))]
    let special: Option<&str> = None;
    let what = match special {
        Some(what) => what,
        None if kind.is_dir() => "a directory",
        None => "not a file",
    };
    format!("is {what}, not a regular file")
}

/// Reads a `.npy` file.
pub fn read_npy_file(path: impl AsRef<Path>) -> Result<RawArray, NpyError> {
    read_npy(&read_regular_file(path.as_ref())?)
}

/// Writes a `.npy` file.
pub fn write_npy_file(path: impl AsRef<Path>, array: &RawArray) -> io::Result<()> {
    let mut out = io::BufWriter::new(std::fs::File::create(path)?);
    write_npy(array, &mut out)?;
    out.flush()
}

/// Reads a `.npz` file.
pub fn read_npz_file(path: impl AsRef<Path>) -> Result<Vec<(String, RawArray)>, NpyError> {
    read_npz(&read_regular_file(path.as_ref())?)
}

/// Writes an uncompressed `.npz` file.
pub fn write_npz_file(path: impl AsRef<Path>, arrays: &[(String, RawArray)]) -> io::Result<()> {
    let mut out = io::BufWriter::new(std::fs::File::create(path)?);
    write_npz(arrays, &mut out)?;
    out.flush()
}

/// Reads either format, detected from the content: a `.npz` yields its members, a `.npy`
/// yields a single array named `npy_name`.
pub fn read_arrays(bytes: &[u8], npy_name: &str) -> Result<Vec<(String, RawArray)>, NpyError> {
    if bytes.starts_with(b"PK") {
        read_npz(bytes)
    } else {
        Ok(vec![(npy_name.to_string(), read_npy(bytes)?)])
    }
}

/// Reads a `.npy` or `.npz` file; a `.npy` array is named after the file stem.
pub fn read_arrays_file(path: impl AsRef<Path>) -> Result<Vec<(String, RawArray)>, NpyError> {
    let path = path.as_ref();
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    read_arrays(&read_regular_file(path)?, &stem)
}
