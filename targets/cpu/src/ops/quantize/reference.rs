//! Linear quantization and dequantization (ONNX QuantizeLinear / DequantizeLinear), per tensor
//! or per channel along one axis.

/// The layout of per-channel parameters: element `i` of the tensor uses parameter
/// `(i / inner) % channels` (`channels == 1`: one parameter for all).
#[derive(Clone, Copy, Debug)]
pub struct Channels {
    /// Parameters (1 = per tensor).
    pub channels: usize,
    /// Elements after the axis (the stride of the channel index).
    pub inner: usize,
}

impl Channels {
    /// Elements in a run sharing one parameter, for a tensor of `len` elements.
    #[inline(always)]
    fn run(&self, len: usize) -> usize {
        if self.channels <= 1 {
            len.max(1)
        } else {
            self.inner.max(1)
        }
    }
}

use crate::base::math::round_half_even;
use crate::base::quantized::QuantInt;
use ferrite_hal::{selects_dtype, DType, Selection};

/// `y = saturate(round_half_to_even(x / scale) + zero_point)`.
pub fn quantize<T: QuantInt>(x: &[f32], scale: &[f32], zero: &[T], ch: Channels, y: &mut [T]) {
    let run = ch.run(x.len());
    for (k, (ys, xs)) in y.chunks_mut(run).zip(x.chunks(run)).enumerate() {
        let c = k % ch.channels.max(1);
        let (Some(&s), Some(z)) = (scale.get(c), zero.get(c)) else {
            return;
        };
        let z = z.widen();
        if cfg!(feature = "std") {
            quantize_run(xs, s, z, ys);
            continue;
        }
        for (out, &v) in ys.iter_mut().zip(xs) {
            // `as` saturates at the i32 range and maps NaN to 0 (so NaN quantizes to the zero
            // point); the rest saturates in integers (no float clamp, whose bounds check is
            // a panic path).
            let q = round_half_even(v / s) as i32;
            *out = T::narrow(q.saturating_add(z).clamp(T::MIN, T::MAX));
        }
    }
}

/// [`quantize`]'s loop for one run of a channel on the host, written to vectorise: the clamp to
/// the type's range in floats (exact: a rounded value within ±2^24 plus a 16-bit zero point;
/// anything larger saturates either way), NaN as the zero point, and the integer read from the
/// mantissa of `c + 1.5·2^23` (a saturating `as i32` vectorises only lane by lane on x86-64).
/// The same results as the portable loop.
#[inline(always)]
fn quantize_run<T: QuantInt>(xs: &[f32], scale: f32, zero: i32, ys: &mut [T]) {
    let (lo, hi, z) = (T::MIN as f32, T::MAX as f32, zero as f32);
    for (out, &v) in ys.iter_mut().zip(xs) {
        let r = round_half_even(v / scale);
        let r = if r.is_nan() { 0.0 } else { r };
        let c = crate::base::math::min(crate::base::math::max(r + z, lo), hi);
        let q = ((c + 12_582_912.0).to_bits() as i32).wrapping_sub(0x4B40_0000);
        *out = T::narrow(q);
    }
}

/// `y = (x - zero_point) * scale`.
pub fn dequantize<T: QuantInt>(
    x: &[T],
    scale: &[f32],
    zero: Option<&[T]>,
    ch: Channels,
    y: &mut [f32],
) {
    let run = ch.run(x.len());
    for (k, (ys, xs)) in y.chunks_mut(run).zip(x.chunks(run)).enumerate() {
        let c = k % ch.channels.max(1);
        let Some(&s) = scale.get(c) else {
            return;
        };
        let z = zero.and_then(|z| z.get(c)).map_or(0, |z| z.widen());
        for (out, &v) in ys.iter_mut().zip(xs) {
            *out = v.minus(z) * s;
        }
    }
}

/// The integer types [`quantize_elements`] and [`dequantize_elements`] take.
const QUANTIZED_TYPES: [DType; 5] = [DType::I8, DType::U8, DType::I16, DType::U16, DType::I32];

/// Whether a build selecting `ops` has more than one of the 8- and 16-bit quantized integer
/// types: then the quantization steps run [`quantize_elements`] and [`dequantize_elements`], one
/// copy for every type, instead of a typed copy of [`quantize`] and [`dequantize`] per type (the
/// every-kernel firmware: 2 KB less flash). A model's own firmware (int8 activations, int32
/// biases) keeps the typed loops, twice as fast.
pub const fn runtime_typed(ops: Selection) -> bool {
    let (mut n, mut i) = (0, 0);
    // int32 aside: an int8 model selects it for its biases, and rarely dequantizes any.
    while i < QUANTIZED_TYPES.len() - 1 {
        if selects_dtype(ops, QUANTIZED_TYPES[i]) {
            n += 1;
        }
        i += 1;
    }
    n > 1 && !cfg!(feature = "std")
}

/// Whether `dtype` is a quantized type of a build selecting `ops`: int8, uint8, int16 or
/// uint16, and int32 too when `dequantizing`.
pub fn takes(ops: Selection, dtype: DType, dequantizing: bool) -> bool {
    let quantized = match dtype {
        DType::I8 | DType::U8 | DType::I16 | DType::U16 => true,
        DType::I32 => dequantizing,
        _ => false,
    };
    quantized && selects_dtype(ops, dtype)
}

/// The range of the quantized integer type `dtype` (an empty one for any other type).
fn range_of(dtype: DType) -> (i32, i32) {
    match dtype {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        _ => (0, -1),
    }
}

/// [`quantize`] to integers of the type `dtype` names, written element by element as their
/// little-endian bytes (`y`, and the zero points `zero`, of that type): the same integers.
pub fn quantize_elements<const OPS: Selection>(
    x: &[f32],
    scale: &[f32],
    zero: &[u8],
    dtype: DType,
    ch: Channels,
    y: &mut [u8],
) {
    let (size, signed) = (dtype.size(), crate::base::elements::is_signed(dtype));
    let (lo, hi) = range_of(dtype);
    let run = ch.run(x.len());
    for (k, xs) in x.chunks(run).enumerate() {
        let c = k % ch.channels.max(1);
        let (Some(&s), Some(z)) = (
            scale.get(c),
            crate::base::elements::load::<OPS>(zero, c, size, signed),
        ) else {
            return;
        };
        for (j, &v) in xs.iter().enumerate() {
            // As `quantize`: NaN to the zero point, saturated in integers.
            let q = (round_half_even(v / s) as i32).saturating_add(z as i32);
            crate::base::elements::store(y, k * run + j, size, q.max(lo).min(hi) as u32 as u64);
        }
    }
}

/// [`dequantize`] of integers of the type `dtype` names, read element by element from their
/// little-endian bytes (`zero`, when present, of that type): the same floats.
pub fn dequantize_elements<const OPS: Selection>(
    x: &[u8],
    dtype: DType,
    scale: &[f32],
    zero: Option<&[u8]>,
    ch: Channels,
    y: &mut [f32],
) {
    let (size, signed) = (dtype.size(), crate::base::elements::is_signed(dtype));
    // Sign- or zero-extended to 64 bits: every type here is then its value as an i64.
    let value = |bytes: &[u8], i: usize| {
        crate::base::elements::load::<OPS>(bytes, i, size, signed).map(|v| v as i64)
    };
    let run = ch.run(y.len());
    for (k, ys) in y.chunks_mut(run).enumerate() {
        let c = k % ch.channels.max(1);
        let z = match zero {
            Some(z) => value(z, c),
            None => Some(0),
        };
        let (Some(&s), Some(z)) = (scale.get(c), z) else {
            return;
        };
        for (j, out) in ys.iter_mut().enumerate() {
            let Some(v) = value(x, k * run + j) else {
                return;
            };
            // Exact, as `QuantInt::minus`: an int32 difference converts in one instruction.
            let d = v - z;
            *out = match i32::try_from(d) {
                Ok(d) => d as f32,
                Err(_) => d as f32,
            } * s;
        }
    }
}

/// DynamicQuantizeLinear: quantizes `x` to uint8 over its range widened to include 0 and
/// returns `(scale, zero_point)`, as the ONNX reference does (`scale = (max − min) / 255`, 1/255
/// for an all-zero tensor; `zero_point = round(clamp(−min / scale, 0, 255))`; NaN is ignored in
/// the range and quantizes to the zero point).
pub fn dynamic_quantize(x: &[f32], y: &mut [u8]) -> (f32, u8) {
    let (lo, hi) = x
        .iter()
        .fold((0.0f32, 0.0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let scale = if hi == lo { 1.0 } else { hi - lo } / 255.0;
    let zero = round_half_even((0.0 - lo / scale).clamp(0.0, 255.0)) as u8;
    let ch = Channels {
        channels: 1,
        inner: 1,
    };
    quantize(x, &[scale], &[zero], ch, y);
    (scale, zero)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_quantization_matches_the_onnx_examples() {
        // The ONNX operator documentation's three examples.
        let mut y = [0u8; 6];
        let (s, z) = dynamic_quantize(&[0.0, 2.0, -3.0, -2.5, 1.34, 0.5], &mut y);
        assert_eq!((s, z, y), (5.0 / 255.0, 153, [153, 255, 0, 26, 221, 179]));
        let (s, z) = dynamic_quantize(&[-1.0, -2.1, -1.3, -2.5, -3.34, -4.0], &mut y);
        assert_eq!((s, z, y), (4.0 / 255.0, 255, [191, 121, 172, 96, 42, 0]));
        let (s, z) = dynamic_quantize(&[1.0, 2.1, 1.3, 2.5, 3.34, 4.0], &mut y);
        assert_eq!((s, z, y), (4.0 / 255.0, 0, [64, 134, 83, 159, 213, 255]));
        // All zeros (scale 1/255), NaN and infinities stay defined.
        let (s, z) = dynamic_quantize(&[0.0; 6], &mut y);
        assert_eq!((s, z, y), (1.0 / 255.0, 0, [0; 6]));
        let (_, _) = dynamic_quantize(&[f32::NAN, f32::INFINITY, -1.0, 0.0, 1.0, 2.0], &mut y);
    }

    /// The runtime-typed loops give the typed ones' integers and floats, for every quantized
    /// type, per tensor and per channel, on values past every range, ties, NaN and infinities.
    #[test]
    fn the_runtime_typed_loops_equal_the_typed_ones() {
        extern crate std;
        use ferrite_hal::ALL_OPS;
        use std::vec::Vec;
        let xs: Vec<f32> = (0..96)
            .map(|i| (i as f32 - 48.0) * 731.25)
            .chain([
                0.5,
                1.5,
                -2.5,
                f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                1e30,
                -1e-30,
            ])
            .collect();
        let per_channel = Channels {
            channels: 4,
            inner: 26,
        };
        fn check<T: QuantInt + core::fmt::Debug + PartialEq>(
            dtype: DType,
            xs: &[f32],
            zeros: [T; 4],
            ch: Channels,
        ) {
            let scales = [0.37f32, 2.0, 1e-3, 50.0];
            let mut typed = std::vec![T::narrow(0); xs.len()];
            quantize(xs, &scales, &zeros, ch, &mut typed);
            let mut bytes = std::vec![0u8; core::mem::size_of_val(typed.as_slice())];
            let zero_bytes = bytemuck::cast_slice(&zeros);
            quantize_elements::<ALL_OPS>(xs, &scales, zero_bytes, dtype, ch, &mut bytes);
            assert_eq!(bytemuck::cast_slice::<T, u8>(&typed), bytes, "{dtype:?}");
            let mut want = std::vec![0.0f32; xs.len()];
            dequantize(&typed, &scales, Some(&zeros), ch, &mut want);
            let mut got = std::vec![0.0f32; xs.len()];
            dequantize_elements::<ALL_OPS>(&bytes, dtype, &scales, Some(zero_bytes), ch, &mut got);
            assert_eq!(want, got, "{dtype:?}");
            dequantize(&typed, &scales, None, ch, &mut want);
            dequantize_elements::<ALL_OPS>(&bytes, dtype, &scales, None, ch, &mut got);
            assert_eq!(want, got, "{dtype:?}");
        }
        for ch in [PER_TENSOR, per_channel] {
            check::<i8>(DType::I8, &xs, [-128, 0, 5, 127], ch);
            check::<u8>(DType::U8, &xs, [0, 128, 7, 255], ch);
            check::<i16>(DType::I16, &xs, [-32768, 0, 300, 32767], ch);
            check::<u16>(DType::U16, &xs, [0, 1, 40000, 65535], ch);
        }
        // int32 dequantizes only: values past 2^31 - zero's reach.
        let ints = [i32::MIN, -1, 0, 1, i32::MAX, 123_456_789];
        let mut want = [0.0f32; 6];
        dequantize(&ints, &[0.5], Some(&[-7]), PER_TENSOR, &mut want);
        let mut got = [0.0f32; 6];
        let zero = (-7i32).to_le_bytes();
        let bytes = bytemuck::cast_slice(&ints);
        dequantize_elements::<ALL_OPS>(
            bytes,
            DType::I32,
            &[0.5],
            Some(&zero),
            PER_TENSOR,
            &mut got,
        );
        assert_eq!(want, got);
    }

    const PER_TENSOR: Channels = Channels {
        channels: 1,
        inner: 1,
    };

    /// The host's vectorisable loop gives the portable loop's integers on every kind of value:
    /// ties, NaN, infinities, values past every range, subnormals; int8, uint8 and int16 with
    /// zero points at and inside their ends.
    #[test]
    fn the_host_loop_equals_the_portable_one() {
        extern crate std;
        fn portable<T: QuantInt>(v: f32, s: f32, z: i32) -> i32 {
            (round_half_even(v / s) as i32)
                .saturating_add(z)
                .clamp(T::MIN, T::MAX)
        }
        fn check<T: QuantInt>(xs: &[f32], zeros: &[i32]) {
            for &s in &[1.0f32, 0.02, 3.7e-3, 1e-30, 7.0] {
                for &z in zeros {
                    let mut y = std::vec![T::narrow(0); xs.len()];
                    quantize_run(xs, s, z, &mut y);
                    for (&v, out) in xs.iter().zip(&y) {
                        let want = portable::<T>(v, s, z);
                        assert_eq!(out.widen(), want, "{v} / {s} + {z}");
                    }
                }
            }
        }
        let mut xs = std::vec![
            0.5,
            1.5,
            2.5,
            -0.5,
            -1.5,
            -2.5,
            0.0,
            -0.0,
            1e-40,
            -1e-40,
            127.5,
            128.5,
            -128.5,
            -129.5,
            255.5,
            256.5,
            32767.5,
            -32768.5,
            1e9,
            -1e9,
            3e38,
            -3e38,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            16_777_217.0,
            -16_777_217.0,
        ];
        let mut state = 0x2545_f491u32;
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            xs.push(f32::from_bits(state));
        }
        check::<i8>(&xs, &[-128, -5, 0, 127]);
        check::<u8>(&xs, &[0, 128, 255]);
        check::<i16>(&xs, &[-32768, 0, 1000, 32767]);
    }

    #[test]
    fn rounds_half_to_even_and_saturates() {
        let x = [0.5, 1.5, 2.5, -0.5, -1.5, 1000.0, -1000.0, f32::NAN];
        let mut y = [0u8; 8];
        quantize(&x, &[1.0], &[128u8], PER_TENSOR, &mut y);
        assert_eq!(y, [128, 130, 130, 128, 126, 255, 0, 128]);
        let mut z = [0i8; 8];
        quantize(&x, &[1.0], &[0i8], PER_TENSOR, &mut z);
        assert_eq!(z, [0, 2, 2, 0, -2, 127, -128, 0]);
    }

    #[test]
    fn per_channel_parameters_follow_the_axis() {
        // x is [2, 3] quantized along axis 1 (inner 1) and along axis 0 (inner 3).
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut y = [0i8; 6];
        let ch = Channels {
            channels: 3,
            inner: 1,
        };
        quantize(&x, &[1.0, 2.0, 0.5], &[0, 1, -1], ch, &mut y);
        // 5 / 2 = 2.5 rounds to 2 (half to even), + 1.
        assert_eq!(y, [1, 2, 5, 4, 3, 11]);
        let ch = Channels {
            channels: 2,
            inner: 3,
        };
        let mut back = [0f32; 6];
        dequantize(
            &[1i8, 2, 3, 4, 5, 6],
            &[0.5, 2.0],
            Some(&[1, 0]),
            ch,
            &mut back,
        );
        assert_eq!(back, [0.0, 0.5, 1.0, 8.0, 10.0, 12.0]);
    }

    #[test]
    fn rounding_matches_rintf_everywhere() {
        let mut v = 1e-3f32;
        while v < 3e7 {
            for x in [
                v,
                -v,
                v + 0.5,
                -(v + 0.5),
                v.floor() + 0.5,
                -(v.floor() + 0.5),
            ] {
                assert_eq!(round_half_even(x), libm::rintf(x), "{x}");
            }
            v *= 1.37;
        }
        for x in [
            0.0,
            -0.0,
            0.5,
            -0.5,
            2.5,
            8_388_607.5,
            f32::INFINITY,
            f32::MAX,
        ] {
            assert_eq!(round_half_even(x), libm::rintf(x), "{x}");
        }
        assert!(round_half_even(f32::NAN).is_nan());
    }

    #[test]
    fn dequantizes_int32_without_overflow() {
        let mut y = [0f32; 2];
        dequantize(&[i32::MAX, i32::MIN], &[1.0], None, PER_TENSOR, &mut y);
        assert_eq!(y, [i32::MAX as f32, i32::MIN as f32]);
    }
}
