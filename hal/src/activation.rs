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
}

impl Activation {
    /// Appends the three-word encoding (code, a, b).
    pub fn encode(&self, w: &mut WordWriter) {
        let (code, a, b) = match *self {
            Activation::None => (0, 0.0, 0.0),
            Activation::Relu => (1, 0.0, 0.0),
            Activation::LeakyRelu { alpha } => (2, alpha, 0.0),
            Activation::Clip { min, max } => (3, min, max),
            Activation::Sigmoid => (4, 0.0, 0.0),
            Activation::Tanh => (5, 0.0, 0.0),
            Activation::HardSigmoid { alpha, beta } => (6, alpha, beta),
            Activation::HardSwish => (7, 0.0, 0.0),
        };
        w.u32(code);
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
            _ => return None,
        })
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
        }
    }
}
