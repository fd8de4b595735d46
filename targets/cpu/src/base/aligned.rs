//! Floats from a 64-byte boundary (x86-64 hosts, `std`): weights packed once per prepared step
//! whose vectors the kernels load at multiples of 32 or 64 bytes from the start, so that none
//! straddles two cache lines. A `Vec<f32>` is only as aligned as the allocator leaves it (16
//! bytes in practice): a recurrent layer's panels there had split every other load (the LSTM
//! 43 or 74 µs by where they landed).

use std::vec::Vec;

/// `len` floats from a 64-byte boundary inside a slightly longer vector.
pub(crate) struct Aligned {
    values: Vec<f32>,
    offset: usize,
    len: usize,
}

impl Aligned {
    /// `len` zeros.
    pub(crate) fn zeroed(len: usize) -> Aligned {
        let values = std::vec![0.0f32; len + 15];
        // At most 15 floats to a 64-byte boundary from a 4-byte-aligned start.
        let offset = values.as_ptr().align_offset(64).min(15);
        Aligned {
            values,
            offset,
            len,
        }
    }

    /// The floats.
    pub(crate) fn as_slice(&self) -> &[f32] {
        self.values
            .get(self.offset..self.offset + self.len)
            .unwrap_or(&[])
    }

    /// The floats, to fill.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        self.values
            .get_mut(self.offset..self.offset + self.len)
            .unwrap_or(&mut [])
    }
}
