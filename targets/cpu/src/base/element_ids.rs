//! Test support for the kernels that move elements of any size: seeded random streams, element
//! ids written at a width and read back (a torn element fails), and row-major index helpers.

extern crate std;
use std::vec::Vec;

/// A small xorshift stream: `next(n)` is in `0..n`.
pub(crate) fn generator(mut seed: u32) -> impl FnMut(usize) -> usize {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed as usize % n.max(1)
    }
}

/// A 64-bit xorshift stream of raw words (every bit pattern: operands of arithmetic tests).
pub(crate) fn words64(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// Byte `k` of id `v` (under 256): id 0 is all zero bytes (a zero element), the others differ
/// byte by byte, so an element moved in part reads back as no id.
fn id_byte(v: usize, k: usize) -> u8 {
    (v * (2 * k + 7)) as u8
}

/// Element ids written in `size` bytes each.
pub(crate) fn encode(ids: &[usize], size: usize) -> Vec<u8> {
    ids.iter()
        .flat_map(|&v| (0..size).map(move |k| id_byte(v, k)))
        .collect()
}

/// The ids of `bytes` (elements of `size` bytes); panics on an element that is no id's.
pub(crate) fn decode(bytes: &[u8], size: usize) -> Vec<usize> {
    // 183 · 7 ≡ 1 (mod 256): the first byte gives the id back.
    let ids: Vec<usize> = bytes
        .chunks_exact(size)
        .map(|c| c[0] as usize * 183 % 256)
        .collect();
    assert_eq!(encode(&ids, size), bytes, "an element is not whole");
    ids
}

/// The multi-index of `flat` in row-major `dims`.
pub(crate) fn unflatten(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut index = std::vec![0; dims.len()];
    for a in (0..dims.len()).rev() {
        index[a] = flat % dims[a];
        flat /= dims[a];
    }
    index
}

/// The flat offset of `index` in row-major `dims`.
pub(crate) fn flatten(index: &[usize], dims: &[usize]) -> usize {
    index.iter().zip(dims).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// A small xorshift generator for the random cases.
#[cfg(feature = "quantized")]
pub(crate) struct Rng(pub(crate) u64);

#[cfg(feature = "quantized")]
impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
