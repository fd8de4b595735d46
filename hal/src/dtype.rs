//! Element types of tensors, with the one-byte codes used in the `.frt` file.

use core::fmt;

/// The element type of a tensor.
///
/// Codes are stable file-format values; [`DType::from_code`] is the only way to turn a byte
/// read from a model into a `DType`, so an unknown code is an error, never an invalid enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 64-bit signed integer (indices, shapes).
    I64,
    /// 32-bit signed integer.
    I32,
    /// 8-bit signed integer.
    I8,
    /// 8-bit unsigned integer.
    U8,
    /// Boolean stored as one byte (0 or 1).
    Bool,
    /// 64-bit IEEE float (an interface type: models compute in f32 behind a conversion).
    F64,
    /// 16-bit IEEE float (an interface type, like [`DType::F64`]).
    F16,
    /// bfloat16, the upper half of an f32 (an interface type, like [`DType::F64`]).
    BF16,
    /// 16-bit signed integer.
    I16,
    /// 16-bit unsigned integer.
    U16,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit unsigned integer.
    U64,
}

impl DType {
    /// Every element type, in code order.
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::I64,
        DType::I32,
        DType::I8,
        DType::U8,
        DType::Bool,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I16,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// The integer types (arithmetic wraps, division truncates).
    pub const INTEGERS: [DType; 8] = [
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
    ];

    /// Float types other than f32: they cross a model's boundary and are converted to and
    /// from f32 there (`ferrite pack` computes such models in f32).
    pub const fn is_interface_float(self) -> bool {
        matches!(self, DType::F64 | DType::F16 | DType::BF16)
    }

    /// Whether this is one of [`DType::INTEGERS`].
    pub const fn is_integer(self) -> bool {
        matches!(
            self,
            DType::I8
                | DType::U8
                | DType::I16
                | DType::U16
                | DType::I32
                | DType::U32
                | DType::I64
                | DType::U64
        )
    }

    /// The smallest and largest value of an integer type, as i64 (uint64's largest capped at
    /// `i64::MAX`, the most Ferrite's 64-bit integer values hold); `None` for floats and bool.
    pub const fn integer_range(self) -> Option<(i64, i64)> {
        Some(match self {
            DType::I8 => (i8::MIN as i64, i8::MAX as i64),
            DType::U8 => (0, u8::MAX as i64),
            DType::I16 => (i16::MIN as i64, i16::MAX as i64),
            DType::U16 => (0, u16::MAX as i64),
            DType::I32 => (i32::MIN as i64, i32::MAX as i64),
            DType::U32 => (0, u32::MAX as i64),
            DType::I64 => (i64::MIN, i64::MAX),
            DType::U64 => (0, i64::MAX),
            _ => return None,
        })
    }

    /// The file-format code of this type.
    pub const fn code(self) -> u8 {
        match self {
            DType::F32 => 1,
            DType::I64 => 2,
            DType::I32 => 3,
            DType::I8 => 4,
            DType::U8 => 5,
            DType::Bool => 6,
            DType::F64 => 7,
            DType::F16 => 8,
            DType::BF16 => 9,
            DType::I16 => 10,
            DType::U16 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
        }
    }

    /// The type with file-format code `code`, or `None` for an unknown code.
    pub const fn from_code(code: u8) -> Option<DType> {
        match code {
            1 => Some(DType::F32),
            2 => Some(DType::I64),
            3 => Some(DType::I32),
            4 => Some(DType::I8),
            5 => Some(DType::U8),
            6 => Some(DType::Bool),
            7 => Some(DType::F64),
            8 => Some(DType::F16),
            9 => Some(DType::BF16),
            10 => Some(DType::I16),
            11 => Some(DType::U16),
            12 => Some(DType::U32),
            13 => Some(DType::U64),
            _ => None,
        }
    }

    /// Index of this type in [`DType::ALL`] (for per-type tables).
    pub const fn index(self) -> usize {
        self.code() as usize - 1
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// The ONNX name of the type (`float`, `int64`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::I64 => "int64",
            DType::I32 => "int32",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::Bool => "bool",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for t in DType::ALL {
            assert_eq!(DType::from_code(t.code()), Some(t));
        }
        assert_eq!(DType::from_code(0), None);
        assert_eq!(DType::from_code(200), None);
    }

    /// Each integer type's range is its own (uint64's capped at i64's); none for the others.
    #[test]
    fn integer_ranges() {
        let expected = [
            (DType::I8, (-128, 127)),
            (DType::U8, (0, 255)),
            (DType::I16, (-32768, 32767)),
            (DType::U16, (0, 65535)),
            (DType::I32, (-2147483648, 2147483647)),
            (DType::U32, (0, 4294967295)),
            (DType::I64, (i64::MIN, i64::MAX)),
            (DType::U64, (0, i64::MAX)),
        ];
        for t in DType::ALL {
            let want = expected.iter().find(|(d, _)| *d == t).map(|&(_, r)| r);
            assert_eq!(t.integer_range(), want, "{t:?}");
            assert_eq!(want.is_some(), t.is_integer());
        }
    }
}
