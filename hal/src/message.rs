//! One-line error messages without `core::fmt`.
//!
//! `core::fmt` costs a firmware 10–16 KB of flash. Every error of the core and the devices
//! therefore writes its message as a sequence of [`Piece`]s (text and numbers); `Display` prints
//! those pieces on the host, and a firmware prints them with [`Line`], which formats numbers by
//! hand. Both give the same text.

use core::fmt;

/// A piece of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Literal text.
    Text(&'a str),
    /// An unsigned number, in decimal.
    Unsigned(u64),
    /// A signed number, in decimal.
    Signed(i64),
    /// A 32-bit value as `0x` and eight hex digits (`{:#010x}`).
    Hex(u32),
}

impl Piece<'_> {
    /// A size or an index, in decimal.
    pub fn size(n: usize) -> Piece<'static> {
        Piece::Unsigned(n as u64)
    }
}

/// Calls `out` with each of `pieces`, in order: a message's fixed sequence in one call.
pub fn pieces(out: &mut dyn FnMut(Piece<'_>), pieces: &[Piece<'_>]) {
    for &piece in pieces {
        out(piece);
    }
}

/// An error (or anything) whose one-line message can be written piece by piece.
pub trait Message {
    /// Calls `out` with each piece of the message, in order.
    fn write_message(&self, out: &mut dyn FnMut(Piece<'_>));
}

/// Writes `message` to a formatter: the `Display` of a [`Message`].
pub fn display(message: &(impl Message + ?Sized), f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut result = Ok(());
    message.write_message(&mut |piece| {
        if result.is_ok() {
            result = write_piece(f, piece);
        }
    });
    result
}

/// Writes one piece to a formatter, as [`Line::piece`] writes it to a line.
pub fn write_piece(f: &mut fmt::Formatter<'_>, piece: Piece<'_>) -> fmt::Result {
    match piece {
        Piece::Text(s) => f.write_str(s),
        Piece::Unsigned(n) => write!(f, "{n}"),
        Piece::Signed(n) => write!(f, "{n}"),
        Piece::Hex(n) => write!(f, "{n:#010x}"),
    }
}

/// A line of at most `N` bytes built from pieces without `core::fmt` (longer text is cut at
/// `N` bytes): how a firmware prints messages and reports.
#[derive(Clone, Debug)]
pub struct Line<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Default for Line<N> {
    fn default() -> Self {
        Line::new()
    }
}

impl<const N: usize> Line<N> {
    /// An empty line.
    pub const fn new() -> Self {
        Line {
            bytes: [0; N],
            len: 0,
        }
    }

    /// Appends text.
    pub fn text(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }

    /// Appends raw bytes (e.g. a path that came as bytes).
    pub fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        push(&mut self.bytes, &mut self.len, bytes);
        self
    }

    /// Appends `n` in decimal.
    pub fn unsigned(&mut self, n: u64) -> &mut Self {
        self.piece(Piece::Unsigned(n))
    }

    /// Appends `n` in decimal, with a `-` when negative.
    pub fn signed(&mut self, n: i64) -> &mut Self {
        self.piece(Piece::Signed(n))
    }

    /// Appends `0x` and `n` as eight hex digits.
    pub fn hex(&mut self, n: u32) -> &mut Self {
        self.piece(Piece::Hex(n))
    }

    /// Appends one piece.
    pub fn piece(&mut self, piece: Piece<'_>) -> &mut Self {
        push_piece(&mut self.bytes, &mut self.len, piece);
        self
    }

    /// Appends a message.
    pub fn message(&mut self, message: &(impl Message + ?Sized)) -> &mut Self {
        let (bytes, len) = (&mut self.bytes, &mut self.len);
        message.write_message(&mut |piece| push_piece(bytes, len, piece));
        self
    }

    /// The bytes written so far (UTF-8 unless a cut split a character).
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

/// Appends `bytes` to `buffer[..*len]`, cutting what does not fit. One copy for every `N`
/// and every call site.
#[inline(never)]
fn push(buffer: &mut [u8], len: &mut usize, bytes: &[u8]) {
    for &b in bytes {
        if let Some(slot) = buffer.get_mut(*len) {
            *slot = b;
            *len += 1;
        }
    }
}

/// Appends one piece, formatting numbers by hand.
#[inline(never)]
fn push_piece(buffer: &mut [u8], len: &mut usize, piece: Piece<'_>) {
    let mut digits = [0u8; 21];
    let text: &[u8] = match piece {
        Piece::Text(s) => s.as_bytes(),
        Piece::Unsigned(n) => decimal(&mut digits, n, false),
        Piece::Signed(n) => decimal(&mut digits, n.unsigned_abs(), n < 0),
        Piece::Hex(n) => {
            push(buffer, len, b"0x");
            for (i, d) in digits.iter_mut().take(8).enumerate() {
                let nibble = (n >> (28 - 4 * i)) & 0xF;
                *d = if nibble < 10 {
                    b'0' + nibble as u8
                } else {
                    b'a' + (nibble - 10) as u8
                };
            }
            digits.get(..8).unwrap_or(&[])
        }
    };
    push(buffer, len, text);
}

/// 10^19 down to 10^0.
const POWERS_OF_TEN: [u64; 20] = {
    let mut table = [1u64; 20];
    let mut i = 19;
    while i > 0 {
        table[i - 1] = table[i] * 10;
        i -= 1;
    }
    table
};

/// `n` in decimal (with a leading `-` when `negative`), at the end of `digits`. By subtracting
/// powers of ten: a 32-bit core then needs no 64-bit division routine (about 1.5 KB of flash).
fn decimal(digits: &mut [u8; 21], mut n: u64, negative: bool) -> &[u8] {
    let mut at = 0;
    if negative {
        digits[0] = b'-';
        at = 1;
    }
    let start = at;
    for power in POWERS_OF_TEN {
        let mut digit = 0u8;
        while n >= power {
            n -= power;
            digit += 1;
        }
        // Leading zeros are skipped; the last digit is always written.
        if digit != 0 || at > start || power == 1 {
            if let Some(d) = digits.get_mut(at) {
                *d = b'0' + digit;
            }
            at += 1;
        }
    }
    digits.get(..at).unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sample;

    impl Message for Sample {
        fn write_message(&self, out: &mut dyn FnMut(Piece<'_>)) {
            out(Piece::Text("n="));
            out(Piece::Unsigned(0));
            out(Piece::Text(" m="));
            out(Piece::Unsigned(u64::MAX));
            out(Piece::Text(" s="));
            out(Piece::Signed(i64::MIN));
            out(Piece::Text(" h="));
            out(Piece::Hex(0xDEAD_0B0E));
        }
    }

    impl fmt::Display for Sample {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            display(self, f)
        }
    }

    extern crate std;
    use std::string::ToString;

    #[test]
    fn a_line_reads_as_the_display() {
        let mut line = Line::<128>::new();
        line.message(&Sample);
        assert_eq!(
            core::str::from_utf8(line.as_bytes()).unwrap(),
            Sample.to_string()
        );
        assert_eq!(
            Sample.to_string(),
            "n=0 m=18446744073709551615 s=-9223372036854775808 h=0xdead0b0e"
        );
    }

    #[test]
    fn a_full_line_is_cut_not_overrun() {
        let mut line = Line::<5>::new();
        line.text("abc").unsigned(12345);
        assert_eq!(line.as_bytes(), b"abc12");
    }
}
