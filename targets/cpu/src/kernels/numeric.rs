//! Arithmetic on integer tensors of every width and signedness, and element-type conversion
//! (ONNX Cast) between all of Ferrite's types.
//!
//! Integer arithmetic wraps (as onnxruntime and numpy), division truncates toward zero, and a
//! division or remainder by zero is an error, never undefined behaviour. These ops are rare in
//! models and cheap, so one broadcast walk serves every type (flash matters on a microcontroller).

use super::logic::{zip_broadcast, Operand};
use crate::CpuError;
use core::cell::Cell;
use ferrite_hal::op::BinaryOp;
use ferrite_hal::{selects_binary, DType, Selection, Shape};
use half::{bf16, f16};

/// An integer element type: the operations [`binary`] needs, with wrapping semantics.
pub trait Integer: Copy + PartialOrd + bytemuck::Pod {
    /// Width in bits.
    const BITS: u32;
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// Whether the type is signed.
    const SIGNED: bool;
    /// `a + b`, wrapping.
    fn add(self, b: Self) -> Self;
    /// `a - b`, wrapping.
    fn sub(self, b: Self) -> Self;
    /// `a * b`, wrapping.
    fn mul(self, b: Self) -> Self;
    /// `a / b` truncated toward zero (wrapping for MIN / -1); `None` for `b == 0`.
    fn div(self, b: Self) -> Option<Self>;
    /// `a - b * trunc(a / b)`; `None` for `b == 0`.
    fn rem(self, b: Self) -> Option<Self>;
    /// Whether the value is negative.
    fn is_negative(self) -> bool;
    /// `a << b` / `a >> b` by a shift count taken from `b` (0 past the width).
    fn shift(self, b: Self, left: bool) -> Self;
}

macro_rules! integer {
    ($($t:ty, $signed:expr);*) => {$(
        impl Integer for $t {
            const BITS: u32 = <$t>::BITS;
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const SIGNED: bool = $signed;
            fn add(self, b: Self) -> Self { self.wrapping_add(b) }
            fn sub(self, b: Self) -> Self { self.wrapping_sub(b) }
            fn mul(self, b: Self) -> Self { self.wrapping_mul(b) }
            fn div(self, b: Self) -> Option<Self> {
                (b != 0).then(|| self.wrapping_div(b))
            }
            fn rem(self, b: Self) -> Option<Self> {
                (b != 0).then(|| self.wrapping_rem(b))
            }
            #[allow(unused_comparisons)]
            fn is_negative(self) -> bool { self < 0 }
            #[allow(unused_comparisons)]
            fn shift(self, b: Self, left: bool) -> Self {
                if b < 0 || b as u64 >= u64::from(Self::BITS) {
                    return 0;
                }
                let n = b as u32;
                if left { self << n } else { self >> n }
            }
        }
    )*};
}
integer!(i8, true; u8, false; i16, true; u16, false; i32, true; u32, false; i64, true; u64, false);

/// `base^exponent` by squaring, wrapping; a negative exponent gives the integer part of the
/// real power (1 for base 1, ±1 for base −1, else 0).
fn power<T: Integer>(base: T, exponent: T) -> T {
    if exponent.is_negative() {
        let minus_one = T::ZERO.sub(T::ONE);
        return if base == T::ONE {
            T::ONE
        } else if base == minus_one {
            // (−1)^e: the low bit of e decides the sign.
            let odd = exponent.rem(T::ONE.add(T::ONE)) != Some(T::ZERO);
            if odd {
                minus_one
            } else {
                T::ONE
            }
        } else {
            T::ZERO
        };
    }
    let (mut result, mut base, mut e) = (T::ONE, base, exponent);
    let two = T::ONE.add(T::ONE);
    while e != T::ZERO {
        if e.rem(two) != Some(T::ZERO) {
            result = result.mul(base);
        }
        base = base.mul(base);
        e = e.div(two).unwrap_or(T::ZERO);
    }
    result
}

/// `out = a op b` on integers of type `T`, the operands broadcast over `shape`.
pub fn binary<const OPS: Selection, T: Integer>(
    op: BinaryOp,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    out: &mut [T],
    shape: &Shape,
) -> Result<(), CpuError> {
    let by_zero = Cell::new(false);
    let checked = |v: Option<T>| {
        v.unwrap_or_else(|| {
            by_zero.set(true);
            T::ZERO
        })
    };
    match op {
        BinaryOp::Add if selects_binary(OPS, BinaryOp::Add) => {
            zip_broadcast(a, b, out, shape, T::add)
        }
        BinaryOp::Sub if selects_binary(OPS, BinaryOp::Sub) => {
            zip_broadcast(a, b, out, shape, T::sub)
        }
        BinaryOp::Mul if selects_binary(OPS, BinaryOp::Mul) => {
            zip_broadcast(a, b, out, shape, T::mul)
        }
        BinaryOp::Div if selects_binary(OPS, BinaryOp::Div) => {
            zip_broadcast(a, b, out, shape, |x, y| checked(x.div(y)))
        }
        BinaryOp::Fmod if selects_binary(OPS, BinaryOp::Fmod) => {
            zip_broadcast(a, b, out, shape, |x, y| checked(x.rem(y)))
        }
        BinaryOp::Mod if selects_binary(OPS, BinaryOp::Mod) => {
            zip_broadcast(a, b, out, shape, |x, y| {
                let r = checked(x.rem(y));
                if r != T::ZERO && r.is_negative() != y.is_negative() {
                    r.add(y)
                } else {
                    r
                }
            })
        }
        BinaryOp::Pow if selects_binary(OPS, BinaryOp::Pow) => {
            zip_broadcast(a, b, out, shape, power)
        }
        BinaryOp::Max if selects_binary(OPS, BinaryOp::Max) => {
            zip_broadcast(a, b, out, shape, |x, y| if y > x { y } else { x })
        }
        BinaryOp::Min if selects_binary(OPS, BinaryOp::Min) => {
            zip_broadcast(a, b, out, shape, |x, y| if y < x { y } else { x })
        }
        BinaryOp::PRelu if selects_binary(OPS, BinaryOp::PRelu) => zip_broadcast(
            a,
            b,
            out,
            shape,
            |x, y| {
                if x.is_negative() {
                    x.mul(y)
                } else {
                    x
                }
            },
        ),
        BinaryOp::ShiftLeft if selects_binary(OPS, BinaryOp::ShiftLeft) => {
            zip_broadcast(a, b, out, shape, |x, y| x.shift(y, true))
        }
        BinaryOp::ShiftRight if selects_binary(OPS, BinaryOp::ShiftRight) => {
            zip_broadcast(a, b, out, shape, |x, y| x.shift(y, false))
        }
        // Not selected: the core refused the model at load.
        _ => return Err(CpuError::Unsupported),
    }
    if by_zero.get() {
        return Err(CpuError::DivisionByZero);
    }
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
    let b = bytes.get(i * size..(i + 1) * size)?;
    let mut w = [0u8; 8];
    w[..size].copy_from_slice(b);
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

/// Writes `v` as element `i` of `bytes` (elements of `dtype`), converting as ONNX Cast.
fn write(dtype: DType, bytes: &mut [u8], i: usize, v: Value) -> Option<()> {
    let size = dtype.size();
    let slot = bytes.get_mut(i * size..(i + 1) * size)?;
    let as_float = |v: Value| match v {
        Value::Float(f) => f,
        Value::Int(n) => n as f64,
    };
    let bits: u64 = match dtype {
        DType::F32 => u64::from(
            match v {
                // Straight from the integer: one rounding, not two.
                Value::Int(n) => n as f32,
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
        // From floats: truncate toward zero, saturating (NaN becomes 0). From wider integers:
        // keep the low bits (wrap), as numpy's astype.
        DType::I8 => saturate_or_wrap(v, |f| f as i8 as u64),
        DType::U8 => saturate_or_wrap(v, |f| u64::from(f as u8)),
        DType::I16 => saturate_or_wrap(v, |f| f as i16 as u64),
        DType::U16 => saturate_or_wrap(v, |f| u64::from(f as u16)),
        DType::I32 => saturate_or_wrap(v, |f| f as i32 as u64),
        DType::U32 => saturate_or_wrap(v, |f| u64::from(f as u32)),
        DType::I64 => saturate_or_wrap(v, |f| f as i64 as u64),
        DType::U64 => saturate_or_wrap(v, |f| f as u64),
    };
    slot.copy_from_slice(&bits.to_le_bytes()[..size]);
    Some(())
}

/// The bits of integer `v` (low bits kept), or of float `v` converted by `from_float`.
fn saturate_or_wrap(v: Value, from_float: impl Fn(f64) -> u64) -> u64 {
    match v {
        Value::Float(f) => from_float(f),
        Value::Int(n) => n as u64,
    }
}

/// Converts every element of `x` (type `from`) to type `to` in `y`, as ONNX Cast: floats to
/// integers truncate toward zero, anything to bool tests `!= 0`, floats between widths round
/// to nearest even.
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
    use super::*;

    fn operand<'a, T>(data: &'a [T], dims: &[usize]) -> Operand<'a, T> {
        Operand {
            data,
            shape: Shape::new(dims).unwrap(),
        }
    }

    fn run<T: Integer + Default>(op: BinaryOp, a: &[T], b: &[T]) -> Result<[T; 4], CpuError> {
        let mut out = [T::default(); 4];
        let shape = Shape::new(&[4]).unwrap();
        binary::<{ ferrite_hal::ALL_OPS }, _>(
            op,
            operand(a, &[4]),
            operand(b, &[4]),
            &mut out,
            &shape,
        )?;
        Ok(out)
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
        binary::<{ ferrite_hal::ALL_OPS }, _>(BinaryOp::Mul, a, b, &mut out, &shape).unwrap();
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
