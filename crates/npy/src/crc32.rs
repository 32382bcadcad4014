//! CRC-32 (IEEE), as zip archives check their members.

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32 (IEEE 802.3 polynomial, reflected) of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    crc32_continue(0, data)
}

/// The CRC-32 of `a` followed by `data`, given `crc = crc32(a)` (so
/// `crc32_continue(0, data) == crc32(data)`): for data read in pieces.
pub fn crc32_continue(crc: u32, data: &[u8]) -> u32 {
    !data.iter().fold(!crc, |c, &b| CRC_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8))
}
