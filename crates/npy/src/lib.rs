//! NumPy files: `.npy` arrays and `.npz` archives, read and written, one
//! concern per file ([`dtype`], [`array`], [`npy`], [`zip_read`], [`zip_write`],
//! [`crc32`], [`files`], and [`stream`] for archives written entry by entry).
//!
//! The crate is self-contained: it works on [`RawArray`], a dtype tag plus a shape plus
//! little-endian, C-order element bytes. Conversion to typed data goes through
//! [`RawArray::to_vec`] / [`RawArray::from_elements`] (see [`NpyElement`]).
//!
//! Supported:
//! * `.npy` format versions 1.0, 2.0 and 3.0;
//! * dtypes `<f4 <f8 |i1 |u1 <i2 <i4 <i8 |b1` (any of `<`, `|`, `=` for single-byte types);
//! * big-endian (`>f4`, ...) input, byte-swapped on read;
//! * `fortran_order: True` input, transposed to C order on read;
//! * `.npz` archives whose members are STORED (`np.savez`) or DEFLATE-compressed
//!   (`np.savez_compressed`), including the ZIP64 extra fields numpy writes.
//!
//! For streaming readers (`qopt_quant::runs::dataset`), [`read_npy_header`] parses a header alone and
//! [`npz_members`] locates `.npz` members without reading them, so STORED data can be read in
//! place (e.g. from a memory map).
//!
//! Writing always produces `.npy` version 1.0 (2.0 for huge headers), little-endian, C order,
//! with the header padded to a 64-byte boundary exactly like numpy, and `.npz` archives with
//! STORED members and CRC-32 checksums.
//!
//! Parsing is strict and never panics on malformed input: every failure is an [`NpyError`].

#![warn(missing_docs)]

pub mod array;
pub mod crc32;
pub mod dtype;
pub mod error;
pub mod files;
pub mod npy;
pub mod stream;
pub mod zip_read;
pub mod zip_write;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

pub use array::{NpyElement, RawArray};
pub use crc32::{crc32, crc32_continue};
pub use dtype::DType;
pub use error::NpyError;
pub use files::{
    not_a_regular_file, read_arrays, read_arrays_file, read_npy_file, read_npz_file, read_regular_file,
    write_npy_file, write_npz_file,
};
pub use npy::{npy_bytes, npy_header, read_npy, read_npy_header, read_npy_header_with, write_npy, NpyHeader};
pub use stream::NpzStream;
pub use zip_read::{npz_member_data, npz_members, npz_members_with, read_npz, NpzMember};
pub use zip_write::write_npz;
