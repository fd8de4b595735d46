//! Window and global pooling, float and integer: their parameters. One module per family, as
//! [`super::Family`] lists them; the words' codec is `codec/pool.rs`.

use super::conv::Window;
use super::quantize::{Requantize, Rescale};
use crate::words::{WordReader, WordWriter};

/// Integer global average pooling: per `(n, c)`, `Σ (x − input_zero)` over the plane, rescaled
/// by `s_x / (s_y · H·W)`, offset by the output zero point and clamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QGlobalAvgPool {
    /// Rescale of the sum.
    pub rescale: Rescale,
    /// Zero points and output clamp.
    pub requantize: Requantize,
}

/// Integer average pooling: per window, `Σ (x − input_zero)` over the counted positions,
/// multiplied by `s_x / s_y` and divided by the count (rounded to nearest), offset and clamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QAvgPool {
    /// Window and padding rules (as float `AveragePool`).
    pub pool: Pool,
    /// `s_x / s_y`.
    pub rescale: Rescale,
    /// Zero points and output clamp.
    pub requantize: Requantize,
}

/// Pooling parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool {
    /// Window.
    pub window: Window,
    /// Output size rounded up instead of down.
    pub ceil_mode: bool,
    /// Average pooling divides by the window size including padding.
    pub count_include_pad: bool,
}

impl Pool {
    pub(super) fn encode(&self, w: &mut WordWriter) {
        self.window.encode(w);
        w.bool(self.ceil_mode);
        w.bool(self.count_include_pad);
    }

    pub(super) fn decode(r: &mut WordReader<'_>) -> Option<Pool> {
        Some(Pool {
            window: Window::decode(r)?,
            ceil_mode: r.bool()?,
            count_include_pad: r.bool()?,
        })
    }
}
