//! Quantization and dequantization, and the requantization parameters the integer ops of
//! every family share. One module per family, as
//! [`super::Family`] lists them; the words' codec is `codec/quantize.rs`.

use crate::words::{WordReader, WordWriter};

/// How an integer op turns its accumulators (int32; int64 for 16-bit inputs) into 8- or 16-bit
/// outputs. Per output channel `c`,
/// with `(multiplier[c], shift[c])` from the op's requantization input (a Q31 fixed-point
/// multiplier and a power-of-two exponent, precomputed on the host from the input, weight and
/// output scales): `y = clamp(round(acc × multiplier × 2^(shift − 31)) + output_zero, min, max)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requantize {
    /// Zero point of the input, subtracted from every input element.
    pub input_zero: i32,
    /// Zero point of the output.
    pub output_zero: i32,
    /// Smallest output (the fused activation's bound, in output integers).
    pub min: i32,
    /// Largest output.
    pub max: i32,
}

impl Requantize {
    pub(super) fn encode(&self, w: &mut WordWriter) {
        for v in [self.input_zero, self.output_zero, self.min, self.max] {
            w.i32(v);
        }
    }

    pub(super) fn decode(r: &mut WordReader<'_>) -> Option<Requantize> {
        let q = Requantize {
            input_zero: r.i32()?,
            output_zero: r.i32()?,
            min: r.i32()?,
            max: r.i32()?,
        };
        // Values of some 8- or 16-bit type; the verifier checks them against the operands' types.
        let integer = -32768..=65535;
        (integer.contains(&q.input_zero)
            && integer.contains(&q.output_zero)
            && integer.contains(&q.min)
            && integer.contains(&q.max)
            && q.min <= q.max)
            .then_some(q)
    }
}

/// A real multiplier as a Q31 fixed-point multiplier and a power-of-two exponent:
/// `x ↦ round(x × multiplier × 2^(shift − 31))` (TFLite's `MultiplyByQuantizedMultiplier`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rescale {
    /// Q31 multiplier (0 or in `[2^30, 2^31)`).
    pub multiplier: i32,
    /// Power-of-two exponent, in `-31..=30`.
    pub shift: i32,
}

impl Rescale {
    pub(super) fn encode(&self, w: &mut WordWriter) {
        w.i32(self.multiplier);
        w.i32(self.shift);
    }

    pub(super) fn decode(r: &mut WordReader<'_>) -> Option<Rescale> {
        let v = Rescale {
            multiplier: r.i32()?,
            shift: r.i32()?,
        };
        (v.multiplier >= 0 && (-31..=30).contains(&v.shift)).then_some(v)
    }
}
