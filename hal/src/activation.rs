//! Elementwise activations, standalone or fused into the op that produces their input.

use crate::words::{WordReader, WordWriter};

/// An elementwise activation function with its parameters.
///
/// The planner fuses an activation into the convolution, Gemm, MatMul, binary op or batch norm
/// that produces its input; the same descriptor is also a standalone op ([`crate::Op::Unary`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// Identity (no activation).
    None,
    /// `max(x, 0)`.
    Relu,
    /// `x if x >= 0 else alpha * x`.
    LeakyRelu {
        /// Slope for negative inputs.
        alpha: f32,
    },
    /// `min(max(x, min), max)`.
    Clip {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
    },
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// `max(0, min(1, alpha * x + beta))`.
    HardSigmoid {
        /// Slope.
        alpha: f32,
        /// Offset.
        beta: f32,
    },
    /// `x * max(0, min(1, x / 6 + 1 / 2))`.
    HardSwish,
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// `1 / x`.
    Reciprocal,
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// −1, 0 or 1 (NaN stays NaN).
    Sign,
    /// Largest integer not above `x`.
    Floor,
    /// Smallest integer not below `x`.
    Ceil,
    /// Nearest integer, ties to even.
    Round,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// The error function.
    Erf,
    /// `x · Φ(x)`, exactly (`erf`) or with the tanh approximation.
    Gelu {
        /// The tanh approximation (ONNX `approximate="tanh"`).
        tanh: bool,
    },
    /// `x if x >= 0 else alpha * (e^x - 1)`.
    Elu {
        /// Scale of the negative part.
        alpha: f32,
    },
    /// `gamma * (x if x > 0 else alpha * (e^x - 1))`.
    Selu {
        /// Scale of the negative part.
        alpha: f32,
        /// Overall scale.
        gamma: f32,
    },
    /// `max(0, x) + min(0, alpha * (e^(x / alpha) - 1))`.
    Celu {
        /// Scale.
        alpha: f32,
    },
    /// `ln(1 + e^x)`.
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// `x if x > alpha else 0`.
    ThresholdedRelu {
        /// Threshold.
        alpha: f32,
    },
}

impl Activation {
    /// How many activations there are: codes are `0..COUNT`.
    pub const COUNT: u32 = 29;

    /// The activation's code in the encoding (also its bit in a [`crate::Selection`]).
    pub const fn code(&self) -> u32 {
        match self {
            Activation::None => 0,
            Activation::Relu => 1,
            Activation::LeakyRelu { .. } => 2,
            Activation::Clip { .. } => 3,
            Activation::Sigmoid => 4,
            Activation::Tanh => 5,
            Activation::HardSigmoid { .. } => 6,
            Activation::HardSwish => 7,
            Activation::Exp => 8,
            Activation::Log => 9,
            Activation::Sqrt => 10,
            Activation::Reciprocal => 11,
            Activation::Neg => 12,
            Activation::Abs => 13,
            Activation::Sign => 14,
            Activation::Floor => 15,
            Activation::Ceil => 16,
            Activation::Round => 17,
            Activation::Sin => 18,
            Activation::Cos => 19,
            Activation::Erf => 20,
            Activation::Gelu { .. } => 21,
            Activation::Elu { .. } => 22,
            Activation::Selu { .. } => 23,
            Activation::Celu { .. } => 24,
            Activation::Softplus => 25,
            Activation::Softsign => 26,
            Activation::Mish => 27,
            Activation::ThresholdedRelu { .. } => 28,
        }
    }

    /// Appends the three-word encoding (code, a, b).
    pub fn encode(&self, w: &mut WordWriter) {
        let (a, b) = match *self {
            Activation::LeakyRelu { alpha }
            | Activation::Elu { alpha }
            | Activation::Celu { alpha }
            | Activation::ThresholdedRelu { alpha } => (alpha, 0.0),
            Activation::Clip { min, max } => (min, max),
            Activation::HardSigmoid { alpha, beta } => (alpha, beta),
            Activation::Gelu { tanh } => (if tanh { 1.0 } else { 0.0 }, 0.0),
            Activation::Selu { alpha, gamma } => (alpha, gamma),
            _ => (0.0, 0.0),
        };
        w.u32(self.code());
        w.f32(a);
        w.f32(b);
    }

    /// Decodes the three-word encoding; `None` for an unknown code or a NaN parameter.
    pub fn decode(r: &mut WordReader<'_>) -> Option<Activation> {
        let code = r.u32()?;
        let a = r.f32()?;
        let b = r.f32()?;
        if a.is_nan() || b.is_nan() {
            return None;
        }
        Some(match code {
            0 => Activation::None,
            1 => Activation::Relu,
            2 => Activation::LeakyRelu { alpha: a },
            3 => Activation::Clip { min: a, max: b },
            4 => Activation::Sigmoid,
            5 => Activation::Tanh,
            6 => Activation::HardSigmoid { alpha: a, beta: b },
            7 => Activation::HardSwish,
            8 => Activation::Exp,
            9 => Activation::Log,
            10 => Activation::Sqrt,
            11 => Activation::Reciprocal,
            12 => Activation::Neg,
            13 => Activation::Abs,
            14 => Activation::Sign,
            15 => Activation::Floor,
            16 => Activation::Ceil,
            17 => Activation::Round,
            18 => Activation::Sin,
            19 => Activation::Cos,
            20 => Activation::Erf,
            21 => Activation::Gelu { tanh: a != 0.0 },
            22 => Activation::Elu { alpha: a },
            23 => Activation::Selu { alpha: a, gamma: b },
            // Celu divides by alpha.
            24 if a != 0.0 => Activation::Celu { alpha: a },
            25 => Activation::Softplus,
            26 => Activation::Softsign,
            27 => Activation::Mish,
            28 => Activation::ThresholdedRelu { alpha: a },
            _ => return None,
        })
    }

    /// Whether the activation may be fused into the op producing its input (Conv, Gemm, MatMul,
    /// binary ops, batch norm): the cheap, common ones. The others run as standalone `Unary`
    /// ops, so kernels inline only these (flash on microcontrollers); the verifier enforces it.
    pub fn is_fusable(&self) -> bool {
        matches!(
            self,
            Activation::None
                | Activation::Relu
                | Activation::LeakyRelu { .. }
                | Activation::Clip { .. }
                | Activation::Sigmoid
                | Activation::Tanh
                | Activation::HardSigmoid { .. }
                | Activation::HardSwish
        )
    }

    /// Short name, as in ONNX.
    pub fn name(&self) -> &'static str {
        match self {
            Activation::None => "Identity",
            Activation::Relu => "Relu",
            Activation::LeakyRelu { .. } => "LeakyRelu",
            Activation::Clip { .. } => "Clip",
            Activation::Sigmoid => "Sigmoid",
            Activation::Tanh => "Tanh",
            Activation::HardSigmoid { .. } => "HardSigmoid",
            Activation::HardSwish => "HardSwish",
            Activation::Exp => "Exp",
            Activation::Log => "Log",
            Activation::Sqrt => "Sqrt",
            Activation::Reciprocal => "Reciprocal",
            Activation::Neg => "Neg",
            Activation::Abs => "Abs",
            Activation::Sign => "Sign",
            Activation::Floor => "Floor",
            Activation::Ceil => "Ceil",
            Activation::Round => "Round",
            Activation::Sin => "Sin",
            Activation::Cos => "Cos",
            Activation::Erf => "Erf",
            Activation::Gelu { .. } => "Gelu",
            Activation::Elu { .. } => "Elu",
            Activation::Selu { .. } => "Selu",
            Activation::Celu { .. } => "Celu",
            Activation::Softplus => "Softplus",
            Activation::Softsign => "Softsign",
            Activation::Mish => "Mish",
            Activation::ThresholdedRelu { .. } => "ThresholdedRelu",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_words(code: u32, a: f32, b: f32) -> Option<Activation> {
        let mut bytes = [0u8; 12];
        bytes[..4].copy_from_slice(&code.to_le_bytes());
        bytes[4..8].copy_from_slice(&a.to_le_bytes());
        bytes[8..].copy_from_slice(&b.to_le_bytes());
        Activation::decode(&mut WordReader::new(&bytes))
    }

    #[test]
    fn every_code_round_trips_and_bad_ones_are_refused() {
        for code in 0..Activation::COUNT {
            let act = decode_words(code, 0.5, 2.0).unwrap_or_else(|| panic!("code {code}"));
            let mut w = WordWriter::default();
            act.encode(&mut w);
            let words = w.words().unwrap();
            assert_eq!(words[0], code, "{}", act.name());
            let mut bytes = [0u8; 12];
            for (i, v) in words.iter().enumerate() {
                bytes[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
            }
            assert_eq!(Activation::decode(&mut WordReader::new(&bytes)), Some(act));
            // Exactly the first eight may be fused.
            assert_eq!(act.is_fusable(), code <= 7, "{}", act.name());
        }
        assert_eq!(decode_words(Activation::COUNT, 0.0, 0.0), None);
        assert_eq!(decode_words(24, 0.0, 0.0), None, "Celu with alpha 0");
        assert_eq!(decode_words(22, f32::NAN, 0.0), None);
    }
}
