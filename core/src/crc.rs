//! CRC-32 (IEEE 802.3, the zlib/PNG checksum) of the file, computed once at load.
//!
//! Four bits per step with a 16-entry table (64 bytes of flash), not the usual 1–16 KB of
//! tables: a microcontroller checks its model once, so flash matters more than the few
//! instructions per byte this costs (`docs/footprint.md`).

/// `CRC32_NIBBLE[n]` is the CRC register's update for the low nibble `n` (reflected polynomial
/// 0xEDB88320).
const CRC32_NIBBLE: [u32; 16] = nibble_table();

const fn nibble_table() -> [u32; 16] {
    let mut table = [0u32; 16];
    let mut n = 0;
    while n < 16 {
        let mut c = n as u32;
        let mut bit = 0;
        while bit < 4 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
            bit += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
}

/// The CRC-32 of `bytes`, as `crc32fast::hash` and zlib's `crc32` compute it.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        crc = (crc >> 4) ^ CRC32_NIBBLE[(crc & 0xF) as usize];
        crc = (crc >> 4) ^ CRC32_NIBBLE[(crc & 0xF) as usize];
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::crc32;

    #[test]
    fn matches_the_standard_check_values() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }
}
