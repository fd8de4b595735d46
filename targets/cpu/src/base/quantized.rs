//! The integer element types of quantized tensors ([`QuantInt`], [`QuantByte`], [`Bytes8`]):
//! what the integer kernels are generic over.

/// An integer element type of quantized tensors.
pub trait QuantInt: Copy + bytemuck::Pod {
    /// Smallest value.
    const MIN: i32;
    /// Largest value.
    const MAX: i32;
    /// Wider than 8 bits: integer products of it accumulate in 64 bits.
    const WIDE: bool;
    /// Widens to `i32`.
    fn widen(self) -> i32;
    /// Narrows an `i32` already clamped to `MIN..=MAX`.
    fn narrow(v: i32) -> Self;
    /// `(self - zero)` as `f32`, exactly and without overflow.
    fn minus(self, zero: i32) -> f32;
}

macro_rules! quant_int {
    ($t:ty, $wide:ty) => {
        impl QuantInt for $t {
            const MIN: i32 = <$t>::MIN as i32;
            const MAX: i32 = <$t>::MAX as i32;
            const WIDE: bool = <$t>::BITS > 8;
            #[inline(always)]
            fn widen(self) -> i32 {
                self as i32
            }
            #[inline(always)]
            fn narrow(v: i32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn minus(self, zero: i32) -> f32 {
                (self as $wide - zero as $wide) as f32
            }
        }
    };
}

// 8- and 16-bit differences fit in i32; int32 ones need i64.
quant_int!(i8, i32);
quant_int!(u8, i32);
quant_int!(i16, i32);
quant_int!(u16, i32);
quant_int!(i32, i64);

/// An 8-bit quantized type: its values can index a 256-entry table by their byte.
pub trait QuantByte: QuantInt {
    /// The raw byte.
    fn byte(self) -> u8;
    /// The value whose raw byte is `b`.
    fn from_byte(b: u8) -> Self;
}

impl QuantByte for i8 {
    #[inline(always)]
    fn byte(self) -> u8 {
        self as u8
    }
    #[inline(always)]
    fn from_byte(b: u8) -> Self {
        b as i8
    }
}

impl QuantByte for u8 {
    #[inline(always)]
    fn byte(self) -> u8 {
        self
    }
    #[inline(always)]
    fn from_byte(b: u8) -> Self {
        b
    }
}

/// 8-bit integers as their bytes, int8 or uint8, for the 8-bit-only kernels (QSoftmax,
/// QAveragePool): one copy of each serves both types. An output within its type's range is
/// its own low byte either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes8 {
    /// 0x80 for int8: flipping the top bit of an int8 byte gives the uint8 byte of value + 128.
    flip: u8,
}

impl Bytes8 {
    /// int8.
    pub const INT8: Bytes8 = Bytes8 { flip: 0x80 };
    /// uint8.
    pub const UINT8: Bytes8 = Bytes8 { flip: 0 };

    /// The integer byte `b` holds.
    #[inline(always)]
    pub fn value(self, b: u8) -> i32 {
        i32::from(b ^ self.flip) - i32::from(self.flip)
    }
}
