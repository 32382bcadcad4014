//! Test support for other crates' tests (`testing` feature): archives
//! built by hand in the layouts NumPy writes.

use crate::crc32::crc32;
use crate::zip_read::{SIG_CENTRAL, SIG_EOCD, SIG_LOCAL};

/// Builds a zip archive by hand, in the layout Python's `zipfile` produces for
/// `np.savez_compressed`: DEFLATE members whose local headers carry ZIP64 extras with
/// saturated 32-bit sizes (numpy passes `force_zip64=True`).
pub fn deflate_zip(members: &[(&str, Vec<u8>)], zip64_local: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in members {
        let compressed = miniz_oxide::deflate::compress_to_vec(data, 6);
        let crc = crc32(data);
        let offset = out.len() as u32;
        let (local_c, local_u, extra) = if zip64_local {
            let mut extra = Vec::new();
            extra.extend_from_slice(&1u16.to_le_bytes());
            extra.extend_from_slice(&16u16.to_le_bytes());
            extra.extend_from_slice(&(data.len() as u64).to_le_bytes());
            extra.extend_from_slice(&(compressed.len() as u64).to_le_bytes());
            (u32::MAX, u32::MAX, extra)
        } else {
            (compressed.len() as u32, data.len() as u32, Vec::new())
        };
        out.extend_from_slice(&SIG_LOCAL.to_le_bytes());
        for v in [45u16, 0, 8, 0, 0x21] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [crc, local_c, local_u] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&extra);
        out.extend_from_slice(&compressed);

        central.extend_from_slice(&SIG_CENTRAL.to_le_bytes());
        for v in [45u16, 45, 0, 8, 0, 0x21] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [crc, compressed.len() as u32, data.len() as u32] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [name.len() as u16, 0, 0, 0, 0] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        central.extend_from_slice(&0u32.to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&SIG_EOCD.to_le_bytes());
    let n = members.len() as u16;
    for v in [0u16, 0, n, n] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}
