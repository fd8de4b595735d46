//! Linear quantization and dequantization (ONNX QuantizeLinear / DequantizeLinear), per tensor
//! or per channel along one axis.

/// An integer element type of quantized tensors.
pub trait QuantInt: Copy + bytemuck::Pod {
    /// Smallest value.
    const MIN: i32;
    /// Largest value.
    const MAX: i32;
    /// Widens to `i32`.
    fn widen(self) -> i32;
    /// Narrows an `i32` already clamped to `MIN..=MAX`.
    fn narrow(v: i32) -> Self;
}

macro_rules! quant_int {
    ($t:ty) => {
        impl QuantInt for $t {
            const MIN: i32 = <$t>::MIN as i32;
            const MAX: i32 = <$t>::MAX as i32;
            #[inline(always)]
            fn widen(self) -> i32 {
                self as i32
            }
            #[inline(always)]
            fn narrow(v: i32) -> Self {
                v as $t
            }
        }
    };
}

quant_int!(i8);
quant_int!(u8);
quant_int!(i32);

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
    #[inline(always)]
    fn of(&self, i: usize) -> usize {
        if self.channels == 1 {
            0
        } else {
            (i / self.inner.max(1)) % self.channels
        }
    }
}

/// `y = saturate(round_half_to_even(x / scale) + zero_point)`.
pub fn quantize<T: QuantInt>(x: &[f32], scale: &[f32], zero: &[T], ch: Channels, y: &mut [T]) {
    for (i, (out, &v)) in y.iter_mut().zip(x).enumerate() {
        let c = ch.of(i);
        let (s, z) = (scale[c], zero[c].widen());
        // rintf rounds half to even (the default rounding mode), as ONNX specifies.
        let q = libm::rintf(v / s);
        // Saturate in f32 first: the rounded value may exceed i32 (NaN becomes 0).
        let q = if q.is_nan() {
            0
        } else {
            q.clamp(-2.0e9, 2.0e9) as i32
        };
        *out = T::narrow(q.saturating_add(z).clamp(T::MIN, T::MAX));
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
    for (i, (out, &v)) in y.iter_mut().zip(x).enumerate() {
        let c = ch.of(i);
        let z = zero.map_or(0, |z| z[c].widen());
        *out = (v.widen() as i64 - z as i64) as f32 * scale[c];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PER_TENSOR: Channels = Channels {
        channels: 1,
        inner: 1,
    };

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
    fn dequantizes_int32_without_overflow() {
        let mut y = [0f32; 2];
        dequantize(&[i32::MAX, i32::MIN], &[1.0], None, PER_TENSOR, &mut y);
        assert_eq!(y, [i32::MAX as f32, i32::MIN as f32]);
    }
}
