//! Arithmetic on integer tensors of every width and signedness, and element-type conversion
//! (ONNX Cast) between all of Ferrite's types.
//!
//! Integer arithmetic wraps (as onnxruntime and numpy), division truncates toward zero, and a
//! division or remainder by zero is an error, never undefined behaviour. These ops are rare in
//! models and cheap, so one broadcast walk serves every type (flash matters on a microcontroller).

use crate::base::elements::{is_signed, load, selects_integer, store};
use crate::base::index::walk2;
use crate::CpuError;
use ferrite_hal::op::{BinaryOp, CompareOp};
use ferrite_hal::{selects_binary, DType, Selection, Shape};
use half::{bf16, f16};

/// A 64-bit integer in which [`binary`] computes every narrower one: its bits, sign-extended
/// for the signed types and zero-extended for the unsigned ones, and which of the two it is.
/// Wrapping arithmetic in 64 bits, cut back to the element's width, gives the narrow type's
/// wrapping result (2^width divides 2^64), and comparisons, division and remainder of the
/// extended values are those of the narrow ones; so one compiled kernel serves all eight
/// integer types (the signedness a run-time flag: one copy, not one per signedness).
#[derive(Clone, Copy)]
struct Wide {
    bits: u64,
    signed: bool,
}

impl Wide {
    /// The same signedness, these bits.
    fn with(self, bits: u64) -> Wide {
        Wide { bits, ..self }
    }

    /// Whether the value is below zero.
    fn is_negative(self) -> bool {
        self.signed && (self.bits as i64) < 0
    }

    /// The bits ordered as the values are (a signed value's sign bit flipped).
    fn key(self) -> u64 {
        if self.signed {
            self.bits ^ (1 << 63)
        } else {
            self.bits
        }
    }

    /// `(a / b, a % b)` truncated toward zero (wrapping for `MIN / −1`); `None` for `b == 0`.
    fn div_rem(self, b: Wide) -> Option<(Wide, Wide)> {
        if b.bits == 0 {
            return None;
        }
        let (q, r) = if self.signed {
            let (q, r) = div_rem_i64(self.bits as i64, b.bits as i64);
            (q as u64, r as u64)
        } else {
            div_rem_u64(self.bits, b.bits)
        };
        Some((self.with(q), self.with(r)))
    }

    /// `self << n` or `self >> n` (arithmetic for a signed value) by a count below 64.
    fn shift(self, n: u32, left: bool) -> Wide {
        self.with(if left {
            self.bits.wrapping_shl(n)
        } else if self.signed {
            (self.bits as i64).wrapping_shr(n) as u64
        } else {
            self.bits.wrapping_shr(n)
        })
    }
}

/// `(a / b, a % b)` truncated toward zero, wrapping for `MIN / −1` (`b != 0`). On a firmware by
/// [`crate::base::math::div_rem_u64`] on the magnitudes (no 64-bit division routine linked).
fn div_rem_i64(a: i64, b: i64) -> (i64, i64) {
    if cfg!(feature = "std") {
        return (a.wrapping_div(b), a.wrapping_rem(b));
    }
    div_rem_by_magnitudes(a, b)
}

/// [`div_rem_i64`] from the quotient and remainder of the magnitudes: the quotient negative when
/// the signs differ, the remainder with the dividend's sign.
fn div_rem_by_magnitudes(a: i64, b: i64) -> (i64, i64) {
    let (q, r) = crate::base::math::div_rem_u64(a.unsigned_abs(), b.unsigned_abs());
    let q = if (a < 0) != (b < 0) {
        (q as i64).wrapping_neg()
    } else {
        q as i64
    };
    let r = if a < 0 {
        (r as i64).wrapping_neg()
    } else {
        r as i64
    };
    (q, r)
}

/// `(a / b, a % b)` (`b != 0`), as [`div_rem_i64`].
fn div_rem_u64(a: u64, b: u64) -> (u64, u64) {
    if cfg!(feature = "std") {
        return (a / b, a % b);
    }
    crate::base::math::div_rem_u64(a, b)
}

/// `base^exponent` by squaring, wrapping; a negative exponent gives the integer part of the
/// real power (1 for base 1, ±1 for base −1, else 0).
fn power(base: Wide, exponent: Wide) -> Wide {
    if exponent.is_negative() {
        let minus_one = u64::MAX; // −1, sign-extended
        return base.with(if base.bits == 1 {
            1
        } else if base.signed && base.bits == minus_one {
            // (−1)^e: the low bit of e decides the sign.
            if exponent.bits & 1 == 1 {
                minus_one
            } else {
                1
            }
        } else {
            0
        });
    }
    let (mut result, mut b, mut e) = (1u64, base.bits, exponent.bits);
    while e != 0 {
        if e & 1 == 1 {
            result = result.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    base.with(result)
}

/// An integer tensor as its bytes: little-endian elements of `dtype`, and its shape
/// (broadcast to the output's).
#[derive(Clone, Copy)]
pub struct Integers<'a> {
    /// The element type, one of the eight integer types.
    pub dtype: DType,
    /// The elements' bytes, row-major.
    pub bytes: &'a [u8],
    /// Shape.
    pub shape: Shape,
}

impl Integers<'_> {
    /// Element `at`, sign- or zero-extended to 64 bits; `None` past the end (or for a type
    /// `OPS` does not select).
    #[inline(always)]
    pub fn get<const OPS: Selection>(&self, at: usize) -> Option<u64> {
        load::<OPS>(self.bytes, at, self.dtype.size(), is_signed(self.dtype))
    }
}

/// `out = a op b` on integers of one type (`a.dtype`), the operands broadcast over `shape`;
/// `out` holds elements of that type.
pub fn binary<const OPS: Selection>(
    op: BinaryOp,
    a: Integers<'_>,
    b: Integers<'_>,
    out: &mut [u8],
    shape: &Shape,
) -> Result<(), CpuError> {
    if !a.dtype.is_integer() || b.dtype != a.dtype {
        return Err(CpuError::Unsupported);
    }
    if !selects_integer(OPS, is_signed(a.dtype), 0) {
        return Err(CpuError::Unsupported);
    }
    binary_wide::<OPS>(op, a, b, out, shape)
}

/// [`binary`] computed in [`Wide`].
fn binary_wide<const OPS: Selection>(
    op: BinaryOp,
    a: Integers<'_>,
    b: Integers<'_>,
    out: &mut [u8],
    shape: &Shape,
) -> Result<(), CpuError> {
    let selected = matches!(
        op,
        BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Fmod
            | BinaryOp::Mod
            | BinaryOp::Pow
            | BinaryOp::Max
            | BinaryOp::Min
            | BinaryOp::PRelu
            | BinaryOp::ShiftLeft
            | BinaryOp::ShiftRight
    ) && selects_binary(OPS, op);
    // Not selected: the core refused the model at load.
    if !selected {
        return Err(CpuError::Unsupported);
    }
    let size = a.dtype.size();
    let (signed, bits) = (is_signed(a.dtype), 8 * size as u64);
    let mut by_zero = false;
    let mut apply = |x: Wide, y: Wide| -> Wide {
        let mut checked = |v: Option<(Wide, Wide)>, remainder: bool| match v {
            Some((q, r)) => {
                if remainder {
                    r
                } else {
                    q
                }
            }
            None => {
                by_zero = true;
                x.with(0)
            }
        };
        let wrapping = |f: fn(u64, u64) -> u64| x.with(f(x.bits, y.bits));
        match op {
            BinaryOp::Add if const { selects_binary(OPS, BinaryOp::Add) } => {
                wrapping(u64::wrapping_add)
            }
            BinaryOp::Sub if const { selects_binary(OPS, BinaryOp::Sub) } => {
                wrapping(u64::wrapping_sub)
            }
            BinaryOp::Mul if const { selects_binary(OPS, BinaryOp::Mul) } => {
                wrapping(u64::wrapping_mul)
            }
            BinaryOp::Div if const { selects_binary(OPS, BinaryOp::Div) } => {
                checked(x.div_rem(y), false)
            }
            BinaryOp::Fmod if const { selects_binary(OPS, BinaryOp::Fmod) } => {
                checked(x.div_rem(y), true)
            }
            BinaryOp::Mod if const { selects_binary(OPS, BinaryOp::Mod) } => {
                let r = checked(x.div_rem(y), true);
                if r.bits != 0 && r.is_negative() != y.is_negative() {
                    r.with(r.bits.wrapping_add(y.bits))
                } else {
                    r
                }
            }
            BinaryOp::Pow if const { selects_binary(OPS, BinaryOp::Pow) } => power(x, y),
            BinaryOp::Max if const { selects_binary(OPS, BinaryOp::Max) } => {
                if y.key() > x.key() {
                    y
                } else {
                    x
                }
            }
            BinaryOp::Min if const { selects_binary(OPS, BinaryOp::Min) } => {
                if y.key() < x.key() {
                    y
                } else {
                    x
                }
            }
            BinaryOp::PRelu if const { selects_binary(OPS, BinaryOp::PRelu) } => {
                if x.is_negative() {
                    wrapping(u64::wrapping_mul)
                } else {
                    x
                }
            }
            // Shift counts are taken from `y`: a negative one or one past the width gives 0.
            BinaryOp::ShiftLeft | BinaryOp::ShiftRight
                if const {
                    selects_binary(OPS, BinaryOp::ShiftLeft)
                        || selects_binary(OPS, BinaryOp::ShiftRight)
                } =>
            {
                if y.is_negative() || y.bits >= bits {
                    x.with(0)
                } else {
                    x.shift(y.bits as u32, op == BinaryOp::ShiftLeft)
                }
            }
            // Refused above.
            _ => x.with(0),
        }
    };
    walk2(shape, &a.shape, &b.shape, &mut |[o, ia, ib]| {
        if let (Some(x), Some(y)) = (
            load::<OPS>(a.bytes, ia, size, signed),
            load::<OPS>(b.bytes, ib, size, signed),
        ) {
            let v = apply(Wide { bits: x, signed }, Wide { bits: y, signed });
            store(out, o, size, v.bits);
        }
    });
    if by_zero {
        return Err(CpuError::DivisionByZero);
    }
    Ok(())
}

/// `a op b` on integers of one type as 0/1 bytes, the operands broadcast over `shape`.
pub fn compare<const OPS: Selection>(
    op: CompareOp,
    a: Integers<'_>,
    b: Integers<'_>,
    out: &mut [u8],
    shape: &Shape,
) -> Result<(), CpuError> {
    if !a.dtype.is_integer() || b.dtype != a.dtype {
        return Err(CpuError::Unsupported);
    }
    let (size, signed) = (a.dtype.size(), is_signed(a.dtype));
    walk2(shape, &a.shape, &b.shape, &mut |[o, ia, ib]| {
        let (Some(x), Some(y), Some(slot)) = (
            load::<OPS>(a.bytes, ia, size, signed),
            load::<OPS>(b.bytes, ib, size, signed),
            out.get_mut(o),
        ) else {
            return;
        };
        let order = if signed && const { selects_integer(OPS, true, 0) } {
            (x as i64).cmp(&(y as i64))
        } else {
            x.cmp(&y)
        };
        *slot = match op {
            CompareOp::Equal => order.is_eq(),
            CompareOp::Less => order.is_lt(),
            CompareOp::LessOrEqual => order.is_le(),
            CompareOp::Greater => order.is_gt(),
            CompareOp::GreaterOrEqual => order.is_ge(),
        } as u8;
    });
    Ok(())
}

/// One element in a type-neutral form: floats as f64, integers and bools as i128 (both hold
/// every value of every Ferrite type exactly).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Value {
    Float(f64),
    Int(i128),
}

/// Element `i` of `bytes` (little-endian elements of `dtype`).
fn read(dtype: DType, bytes: &[u8], i: usize) -> Option<Value> {
    let size = dtype.size();
    let b = bytes.get(i * size..)?.get(..size)?;
    let mut w = [0u8; 8];
    for (d, s) in w.iter_mut().zip(b) {
        *d = *s;
    }
    let u = u64::from_le_bytes(w);
    Some(match dtype {
        DType::F32 => Value::Float(f64::from(f32::from_bits(u as u32))),
        DType::F64 => Value::Float(f64::from_bits(u)),
        DType::F16 => Value::Float(f16::from_bits(u as u16).to_f64()),
        DType::BF16 => Value::Float(bf16::from_bits(u as u16).to_f64()),
        DType::I8 => Value::Int(i128::from(u as u8 as i8)),
        DType::I16 => Value::Int(i128::from(u as u16 as i16)),
        DType::I32 => Value::Int(i128::from(u as u32 as i32)),
        DType::I64 => Value::Int(i128::from(u as i64)),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Value::Int(i128::from(u)),
        DType::Bool => Value::Int(i128::from(u != 0)),
    })
}

/// An element's integer (an int64 or a uint64 value) as the nearest f32, rounded once as `as`
/// rounds: through i64 or u64, not i128 (whose conversion routines a firmware would link).
fn int_to_f32(n: i128) -> f32 {
    match i64::try_from(n) {
        Ok(v) => v as f32,
        Err(_) => n as u64 as f32,
    }
}

/// [`int_to_f32`] to f64.
fn int_to_f64(n: i128) -> f64 {
    match i64::try_from(n) {
        Ok(v) => v as f64,
        Err(_) => n as u64 as f64,
    }
}

/// Writes `v` as element `i` of `bytes` (elements of `dtype`), converting as ONNX Cast.
fn write(dtype: DType, bytes: &mut [u8], i: usize, v: Value) -> Option<()> {
    let size = dtype.size();
    let slot = bytes.get_mut(i * size..(i + 1) * size)?;
    let as_float = |v: Value| match v {
        Value::Float(f) => f,
        Value::Int(n) => int_to_f64(n),
    };
    let bits: u64 = match dtype {
        DType::F32 => u64::from(
            match v {
                // Straight from the integer: one rounding, not two.
                Value::Int(n) => int_to_f32(n),
                Value::Float(f) => f as f32,
            }
            .to_bits(),
        ),
        DType::F64 => as_float(v).to_bits(),
        DType::F16 => u64::from(f16::from_f64(as_float(v)).to_bits()),
        DType::BF16 => u64::from(bf16::from_f64(as_float(v)).to_bits()),
        DType::Bool => u64::from(match v {
            Value::Float(f) => f != 0.0,
            Value::Int(n) => n != 0,
        }),
        // From integers: keep the low bits (wrap), as numpy's astype. From floats: truncate
        // toward zero, saturating at the type's bounds (NaN becomes 0) — Rust's `as` — by one
        // conversion to i64 (u64 for U64) and a clamp, not a soft-float conversion per type.
        _ => match v {
            Value::Int(n) => n as u64,
            Value::Float(f) if dtype == DType::U64 => f as u64,
            Value::Float(f) => {
                let (low, high) = dtype.integer_range().unwrap_or((i64::MIN, i64::MAX));
                (f as i64).max(low).min(high) as u64
            }
        },
    };
    for (d, s) in slot.iter_mut().zip(bits.to_le_bytes()) {
        *d = s;
    }
    Some(())
}

/// Converts every element of `x` (type `from`) to type `to` in `y`, as ONNX Cast: floats to
/// integers truncate toward zero, anything to bool tests `!= 0`, floats between widths round
/// to nearest even. Out of line: Cast is rarely hot, and inlined its body sat in the
/// elementwise family's frame.
#[inline(never)]
pub fn convert(from: DType, x: &[u8], to: DType, y: &mut [u8]) -> Result<(), CpuError> {
    let n = y.len() / to.size();
    for i in 0..n {
        let v = read(from, x, i).ok_or(CpuError::CorruptPlan)?;
        write(to, y, i, v).ok_or(CpuError::CorruptPlan)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Integers convert to floats as `as` converts them from i128: the int64 and uint64 ranges'
    /// ends, values past f32's and f64's exact ranges, ties.
    #[test]
    fn integers_convert_to_floats_rounded_once() {
        let values = [
            i128::from(i64::MIN),
            -(1i128 << 53) - 1,
            -(1 << 24) - 1,
            -1,
            0,
            (1 << 24) + 1,
            (1 << 24) + 3,
            (1 << 53) + 1,
            i128::from(i64::MAX),
            i128::from(i64::MAX) + 1,
            i128::from(u64::MAX) - 1024,
            i128::from(u64::MAX),
        ];
        for n in values {
            assert_eq!(int_to_f32(n), n as f32, "{n}");
            assert_eq!(int_to_f64(n), n as f64, "{n}");
        }
    }

    /// The firmware's signed 64-bit division (magnitudes by long division) is Rust's wrapping
    /// `/` and `%`: random operands of every length and sign, and `MIN / −1`.
    #[test]
    fn signed_division_by_magnitudes_is_wrapping_division() {
        let mut next = crate::base::element_ids::words64(0x9E37_79B9_7F4A_7C15);
        let edges = [i64::MIN, i64::MIN + 1, -7, -1, 1, 7, i64::MAX];
        let randoms = (0..100_000).map(|_| {
            (
                (next() as i64) >> (next() % 64),
                (next() as i64) >> (next() % 64),
            )
        });
        let pairs = edges
            .iter()
            .flat_map(|&a| edges.iter().map(move |&b| (a, b)));
        for (a, b) in pairs.chain(randoms) {
            if b != 0 {
                let want = (a.wrapping_div(b), a.wrapping_rem(b));
                assert_eq!(div_rem_by_magnitudes(a, b), want, "{a} / {b}");
            }
        }
    }

    use super::*;

    /// An integer element type of the tests and its `DType`.
    trait Typed: bytemuck::Pod + Default {
        const DTYPE: DType;
    }
    macro_rules! typed {
        ($($t:ty => $d:ident),*) => {$(impl Typed for $t { const DTYPE: DType = DType::$d; })*};
    }
    typed!(i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32, i64 => I64, u64 => U64);

    fn operand<'a, T: Typed>(data: &'a [T], dims: &[usize]) -> Integers<'a> {
        Integers {
            dtype: T::DTYPE,
            bytes: bytemuck::cast_slice(data),
            shape: Shape::new(dims).unwrap(),
        }
    }

    fn run<T: Typed>(op: BinaryOp, a: &[T], b: &[T]) -> Result<[T; 4], CpuError> {
        let mut out = [T::default(); 4];
        let shape = Shape::new(&[4]).unwrap();
        binary::<{ ferrite_hal::ALL_OPS }>(
            op,
            operand(a, &[4]),
            operand(b, &[4]),
            bytemuck::cast_slice_mut(&mut out),
            &shape,
        )?;
        Ok(out)
    }

    /// Float-to-integer Cast truncates toward zero and saturates at the type's bounds (NaN
    /// becomes 0), as Rust's `as` does, from f64 and f32 sources, at and around every bound.
    #[test]
    fn float_to_integer_casts_truncate_and_saturate() {
        let fixed = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.9,
            -1.9,
            1e300,
            -1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            4294967295.0,
            4294967295.5,
            4294967296.0,
            9.2e18,
            9.3e18,
            -9.3e18,
            1.8e19,
            1.9e19,
            u64::MAX as f64,
        ];
        let bounds = [127.0, 128.0, 255.0, 32767.0, 32768.0, 65535.0, 2147483647.0];
        let values = || {
            let around = bounds
                .into_iter()
                .flat_map(|b: f64| [b, -b, b + 1.0, -b - 1.0])
                .flat_map(|b| [b, b - 0.5, b + 0.5]);
            fixed.into_iter().chain(around)
        };
        let expected = |to: DType, v: f64| -> u64 {
            match to {
                DType::I8 => v as i8 as u64,
                DType::U8 => u64::from(v as u8),
                DType::I16 => v as i16 as u64,
                DType::U16 => u64::from(v as u16),
                DType::I32 => v as i32 as u64,
                DType::U32 => u64::from(v as u32),
                DType::I64 => v as i64 as u64,
                _ => v as u64,
            }
        };
        for to in DType::INTEGERS {
            for v in values() {
                let mut y = [0u8; 8];
                let y = &mut y[..to.size()];
                convert(DType::F64, &v.to_le_bytes(), to, y).unwrap();
                let mask = u64::MAX >> (64 - 8 * to.size());
                let mut got = [0u8; 8];
                got[..to.size()].copy_from_slice(y);
                assert_eq!(
                    u64::from_le_bytes(got),
                    expected(to, v) & mask,
                    "{v} as {to:?}"
                );
                let single = v as f32;
                convert(DType::F32, &single.to_le_bytes(), to, y).unwrap();
                got[..to.size()].copy_from_slice(y);
                let want = expected(to, f64::from(single)) & mask;
                assert_eq!(u64::from_le_bytes(got), want, "{single} (f32) as {to:?}");
            }
        }
    }

    #[test]
    fn integer_division_truncates_and_modulo_follows_the_divisor() {
        let (a, b) = ([7i32, -7, 7, -7], [2i32, 2, -2, -2]);
        assert_eq!(run(BinaryOp::Div, &a, &b), Ok([3, -3, -3, 3]));
        assert_eq!(run(BinaryOp::Fmod, &a, &b), Ok([1, -1, 1, -1]));
        assert_eq!(run(BinaryOp::Mod, &a, &b), Ok([1, 1, -1, -1]));
        assert_eq!(
            run(BinaryOp::Div, &a, &[1, 0, 1, 1]),
            Err(CpuError::DivisionByZero)
        );
        assert_eq!(
            run(BinaryOp::Div, &[i8::MIN, 0, 0, 0], &[-1i8, 1, 1, 1]),
            Ok([i8::MIN, 0, 0, 0])
        );
    }

    #[test]
    fn integer_arithmetic_wraps_and_broadcasts() {
        assert_eq!(
            run(BinaryOp::Add, &[250u8, 1, 2, 3], &[10u8, 1, 1, 1]),
            Ok([4, 2, 3, 4])
        );
        assert_eq!(
            run(BinaryOp::Sub, &[0u64, 5, 2, 3], &[1u64, 1, 1, 1]),
            Ok([u64::MAX, 4, 1, 2])
        );
        let mut out = [0i16; 6];
        let shape = Shape::new(&[2, 3]).unwrap();
        let a = operand(&[1i16, 2][..], &[2, 1]);
        let b = operand(&[10i16, 20, 30][..], &[3]);
        let bytes = bytemuck::cast_slice_mut(&mut out);
        binary::<{ ferrite_hal::ALL_OPS }>(BinaryOp::Mul, a, b, bytes, &shape).unwrap();
        assert_eq!(out, [10, 20, 30, 20, 40, 60]);
    }

    #[test]
    fn powers_shifts_and_extremes() {
        assert_eq!(
            run(BinaryOp::Pow, &[2i64, -3, 1, -1], &[10i64, 3, -5, -3]),
            Ok([1024, -27, 1, -1])
        );
        assert_eq!(
            run(BinaryOp::Pow, &[2i32, 0, 5, 7], &[-1, 0, 0, 1]),
            Ok([0, 1, 1, 7])
        );
        assert_eq!(
            run(BinaryOp::ShiftLeft, &[1u32, 3, 1, 5], &[31u32, 1, 32, 0]),
            Ok([1 << 31, 6, 0, 5])
        );
        assert_eq!(
            run(
                BinaryOp::ShiftRight,
                &[16u16, 3, 1, 0xFFFF],
                &[2u16, 1, 16, 15]
            ),
            Ok([4, 1, 0, 1])
        );
        assert_eq!(
            run(BinaryOp::Max, &[-1i8, 5, 0, 127], &[1i8, 4, 0, -128]),
            Ok([1, 5, 0, 127])
        );
        assert_eq!(
            run(BinaryOp::Min, &[u64::MAX, 5, 0, 1], &[1u64, 4, 0, 2]),
            Ok([1, 4, 0, 1])
        );
    }

    /// Every op on every integer type, computed in 64 bits, against the narrow type's own
    /// wrapping arithmetic over values that hit the extremes.
    #[test]
    fn wide_arithmetic_matches_each_narrow_type() {
        macro_rules! check {
            ($t:ty) => {{
                let values: [$t; 8] = [
                    0,
                    1,
                    2,
                    7,
                    <$t>::MAX,
                    <$t>::MIN,
                    <$t>::MAX / 3,
                    <$t>::MIN.wrapping_add(5),
                ];
                let mut signed = values;
                #[allow(unused_comparisons)]
                let is_signed = <$t>::MIN < 0;
                if is_signed {
                    signed[3] = (0 as $t).wrapping_sub(1);
                    signed[2] = (0 as $t).wrapping_sub(3);
                }
                for &x in &signed {
                    for &y in &signed {
                        let expect = |op: BinaryOp| -> Option<$t> {
                            Some(match op {
                                BinaryOp::Add => x.wrapping_add(y),
                                BinaryOp::Sub => x.wrapping_sub(y),
                                BinaryOp::Mul => x.wrapping_mul(y),
                                BinaryOp::Div => x
                                    .checked_div(y)
                                    .or_else(|| (y != 0).then(|| x.wrapping_div(y)))?,
                                BinaryOp::Fmod => x
                                    .checked_rem(y)
                                    .or_else(|| (y != 0).then(|| x.wrapping_rem(y)))?,
                                BinaryOp::Max => x.max(y),
                                BinaryOp::Min => x.min(y),
                                #[allow(unused_comparisons)]
                                BinaryOp::ShiftLeft => {
                                    if y < 0 || y as u64 >= u64::from(<$t>::BITS) {
                                        0
                                    } else {
                                        x << y as u32
                                    }
                                }
                                #[allow(unused_comparisons)]
                                _ => {
                                    if y < 0 || y as u64 >= u64::from(<$t>::BITS) {
                                        0
                                    } else {
                                        x >> y as u32
                                    }
                                }
                            })
                        };
                        for op in [
                            BinaryOp::Add,
                            BinaryOp::Sub,
                            BinaryOp::Mul,
                            BinaryOp::Div,
                            BinaryOp::Fmod,
                            BinaryOp::Max,
                            BinaryOp::Min,
                            BinaryOp::ShiftLeft,
                            BinaryOp::ShiftRight,
                        ] {
                            let got = run::<$t>(op, &[x; 4], &[y; 4]).ok().map(|o| o[0]);
                            assert_eq!(got, expect(op), "{} {op:?} {x} {y}", stringify!($t));
                        }
                        let mut out = [9u8; 4];
                        let shape = Shape::new(&[4]).unwrap();
                        compare::<{ ferrite_hal::ALL_OPS }>(
                            CompareOp::Less,
                            operand(&[x; 4], &[4]),
                            operand(&[y; 4], &[4]),
                            &mut out,
                            &shape,
                        )
                        .unwrap();
                        assert_eq!(out[0], (x < y) as u8);
                        compare::<{ ferrite_hal::ALL_OPS }>(
                            CompareOp::Equal,
                            operand(&[x; 4], &[4]),
                            operand(&[y; 4], &[4]),
                            &mut out,
                            &shape,
                        )
                        .unwrap();
                        assert_eq!(out[3], (x == y) as u8);
                    }
                }
            }};
        }
        check!(i8);
        check!(u8);
        check!(i16);
        check!(u16);
        check!(i32);
        check!(u32);
        check!(i64);
        check!(u64);
    }

    fn cast(from: DType, x: &[u8], to: DType) -> [u8; 16] {
        let mut y = [0u8; 16];
        let n = x.len() / from.size();
        convert(from, x, to, &mut y[..n * to.size()]).unwrap();
        y
    }

    #[test]
    fn conversions_follow_onnx_cast() {
        let mut x = [0u8; 16];
        for (c, v) in x.chunks_mut(4).zip([-2.7f32, 2.5, 1e20, f32::NAN]) {
            c.copy_from_slice(&v.to_le_bytes());
        }
        let y = cast(DType::F32, &x, DType::I32);
        let int =
            |i: usize| i32::from_le_bytes([y[4 * i], y[4 * i + 1], y[4 * i + 2], y[4 * i + 3]]);
        assert_eq!([int(0), int(1), int(2), int(3)], [-2, 2, i32::MAX, 0]);
        assert_eq!(&cast(DType::F32, &x, DType::Bool)[..4], [1, 1, 1, 1]);
        let y = cast(DType::F32, &x[..8], DType::F16);
        let half = |i: usize| f16::from_le_bytes([y[2 * i], y[2 * i + 1]]).to_f32();
        assert_eq!([half(0), half(1)], [-2.699_218_8, 2.5]);
        let y = cast(DType::U64, &u64::MAX.to_le_bytes(), DType::F64);
        let mut w = [0u8; 8];
        w.copy_from_slice(&y[..8]);
        assert_eq!(f64::from_le_bytes(w), 18446744073709551615.0);
        let y = cast(DType::I64, &(-1i64).to_le_bytes(), DType::U8);
        assert_eq!(y[0], 255);
        let y = cast(DType::F64, &0.1f64.to_le_bytes(), DType::BF16);
        assert_eq!(bf16::from_le_bytes([y[0], y[1]]).to_f32(), 0.100_097_656);
    }
}
