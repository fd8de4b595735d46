//! Recurrent layers (RNN, GRU, LSTM): their parameters. One module per family, as
//! [`super::Family`] lists them; the words' codec is `codec/recurrent.rs`.

use crate::words::{WordReader, WordWriter};
use crate::Activation;

/// The cell of a recurrent layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    /// `H = f(X·Wᵀ + H·Rᵀ + b)` (one gate).
    Rnn,
    /// Gated recurrent unit (gates z, r, h).
    Gru {
        /// Apply R before the reset gate (`h = g(X·Whᵀ + r ⊙ (H·Rhᵀ + Rbh) + Wbh)`).
        linear_before_reset: bool,
    },
    /// Long short-term memory (gates i, o, f, c).
    Lstm {
        /// Couple the forget gate to the input gate (`f = 1 − i`).
        input_forget: bool,
    },
}

impl Cell {
    /// Gates per hidden unit.
    pub const fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru { .. } => 3,
            Cell::Lstm { .. } => 4,
        }
    }
}

/// One direction of a recurrent layer (see [`crate::Op::Recurrent`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recurrent {
    /// RNN, GRU or LSTM.
    pub cell: Cell,
    /// Run the sequence from its end.
    pub reverse: bool,
    /// Clamp gate inputs to `[-clip, clip]` (0: no clamp).
    pub clip: f32,
    /// ONNX's `f`, `g`, `h` (`g`, `h` unused by some cells).
    pub activations: [Activation; 3],
}

impl Recurrent {
    pub(super) fn encode(&self, w: &mut WordWriter) {
        let (code, flag) = match self.cell {
            Cell::Rnn => (0, false),
            Cell::Gru {
                linear_before_reset,
            } => (1, linear_before_reset),
            Cell::Lstm { input_forget } => (2, input_forget),
        };
        w.u32(code);
        w.bool(flag);
        w.bool(self.reverse);
        w.f32(self.clip);
        for a in &self.activations {
            a.encode(w);
        }
    }

    pub(super) fn decode(r: &mut WordReader<'_>) -> Option<Recurrent> {
        let code = r.u32()?;
        let flag = r.bool()?;
        let cell = match code {
            0 => Cell::Rnn,
            1 => Cell::Gru {
                linear_before_reset: flag,
            },
            2 => Cell::Lstm { input_forget: flag },
            _ => return None,
        };
        let reverse = r.bool()?;
        let clip = r.f32()?;
        if !(clip.is_finite() && clip >= 0.0) {
            return None;
        }
        let activations = [
            Activation::decode(r)?,
            Activation::decode(r)?,
            Activation::decode(r)?,
        ];
        Some(Recurrent {
            cell,
            reverse,
            clip,
            activations,
        })
    }
}
