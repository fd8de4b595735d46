//! Operator parameters as little-endian 32-bit words, the encoding used in the `.frt` params section.
//!
//! [`WordReader`] decodes without panicking (every read is checked and returns `None` past the
//! end); [`WordWriter`] is its inverse, with a fixed capacity so it needs no allocator.

/// Most parameter words one operator may have.
pub const MAX_PARAM_WORDS: usize = 64;

/// Reads 32-bit little-endian words from a byte slice, checking every access.
#[derive(Clone, Debug)]
pub struct WordReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> WordReader<'a> {
    /// A reader over `bytes` (whose length should be a multiple of 4).
    pub fn new(bytes: &'a [u8]) -> Self {
        WordReader { bytes, pos: 0 }
    }

    /// The next word, or `None` past the end.
    pub fn u32(&mut self) -> Option<u32> {
        // Two length checks and no overflow test (`pos` never passes the slice's length).
        let chunk = self.bytes.get(self.pos..)?.first_chunk::<4>()?;
        self.pos += 4;
        Some(u32::from_le_bytes(*chunk))
    }

    /// The next word as a `usize`.
    pub fn usize(&mut self) -> Option<usize> {
        self.u32().map(|v| v as usize)
    }

    /// The next word as a signed integer.
    pub fn i32(&mut self) -> Option<i32> {
        self.u32().map(|v| v as i32)
    }

    /// The next word as an `f32` (bit pattern).
    pub fn f32(&mut self) -> Option<f32> {
        self.u32().map(f32::from_bits)
    }

    /// The next word as a boolean: only 0 and 1 are valid.
    pub fn bool(&mut self) -> Option<bool> {
        match self.u32()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    /// True when every word has been read.
    pub fn is_done(&self) -> bool {
        self.pos >= self.bytes.len()
    }
}

/// Collects up to [`MAX_PARAM_WORDS`] words (the encoder side of [`WordReader`]).
#[derive(Clone, Debug)]
pub struct WordWriter {
    words: [u32; MAX_PARAM_WORDS],
    len: usize,
    overflowed: bool,
}

impl Default for WordWriter {
    fn default() -> Self {
        WordWriter {
            words: [0; MAX_PARAM_WORDS],
            len: 0,
            overflowed: false,
        }
    }
}

impl WordWriter {
    /// Appends a word; past capacity the writer remembers that it overflowed.
    pub fn u32(&mut self, v: u32) {
        match self.words.get_mut(self.len) {
            Some(slot) => {
                *slot = v;
                self.len += 1;
            }
            None => self.overflowed = true,
        }
    }

    /// Appends a `usize` (saturated to `u32::MAX`, which the verifier then rejects).
    pub fn usize(&mut self, v: usize) {
        self.u32(u32::try_from(v).unwrap_or(u32::MAX));
    }

    /// Appends a signed integer.
    pub fn i32(&mut self, v: i32) {
        self.u32(v as u32);
    }

    /// Appends an `f32` bit pattern.
    pub fn f32(&mut self, v: f32) {
        self.u32(v.to_bits());
    }

    /// Appends a boolean as 0 or 1.
    pub fn bool(&mut self, v: bool) {
        self.u32(v as u32);
    }

    /// The words written, or `None` if more than [`MAX_PARAM_WORDS`] were pushed.
    pub fn words(&self) -> Option<&[u32]> {
        if self.overflowed {
            None
        } else {
            Some(&self.words[..self.len])
        }
    }
}
