//! Heap bytes aligned to 16, as the core requires of a model (weights used in place) and of an
//! arena.

/// A byte buffer whose start is 16-byte aligned.
#[derive(Clone, Debug)]
pub struct AlignedBytes {
    words: Vec<u128>,
    len: usize,
}

impl AlignedBytes {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        AlignedBytes {
            words: vec![0; len.div_ceil(16)],
            len,
        }
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    /// The bytes, mutably.
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}

impl From<&[u8]> for AlignedBytes {
    fn from(bytes: &[u8]) -> Self {
        let mut a = AlignedBytes::zeroed(bytes.len());
        a.as_mut_bytes().copy_from_slice(bytes);
        a
    }
}
