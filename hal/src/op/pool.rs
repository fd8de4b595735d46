//! Window and global pooling, float and integer: their parameters and word encoding. One module per family, as [`super::Family`] lists them: `Op::encode` and
//! `Op::decode_selected` dispatch here by [`super::OpKind::family`].

use super::*;

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

/// Appends the parameters of `op`, a pool op, as words.
pub(super) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::MaxPool(p) | Op::AvgPool(p) => p.encode(w),
        Op::QGlobalAvgPool(q) => {
            q.rescale.encode(w);
            q.requantize.encode(w);
        }
        Op::QAvgPool(q) => {
            q.pool.encode(w);
            q.rescale.encode(w);
            q.requantize.encode(w);
        }
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(super) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::MaxPool | OpKind::AvgPool
            if selects(OPS, OpKind::MaxPool) || selects(OPS, OpKind::AvgPool) =>
        {
            let pool = Pool::decode(r)?;
            if kind == OpKind::MaxPool {
                Op::MaxPool(pool)
            } else {
                Op::AvgPool(pool)
            }
        }
        OpKind::GlobalAvgPool if selects(OPS, OpKind::GlobalAvgPool) => Op::GlobalAvgPool,
        OpKind::QAvgPool if selects(OPS, OpKind::QAvgPool) => Op::QAvgPool(QAvgPool {
            pool: Pool::decode(r)?,
            rescale: Rescale::decode(r)?,
            requantize: Requantize::decode(r)?,
        }),
        OpKind::QGlobalAvgPool if selects(OPS, OpKind::QGlobalAvgPool) => {
            Op::QGlobalAvgPool(QGlobalAvgPool {
                rescale: Rescale::decode(r)?,
                requantize: Requantize::decode(r)?,
            })
        }
        _ => return None,
    })
}
