//! Linear quantization and dequantization (ONNX QuantizeLinear / DequantizeLinear), per tensor
//! or per channel along one axis.

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

use crate::math::round_half_even;

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
        let c = crate::math::min(crate::math::max(r + z, lo), hi);
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
