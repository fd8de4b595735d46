//! The word codec of the movement family's kinds: `Op::encode` and `Op::decode_selected` dispatch here.

use crate::op::fields::*;
use crate::op::kinds::OpKind;
use crate::op::movement::*;
use crate::op::variants::Op;
use crate::words::{WordReader, WordWriter};
use crate::{selects, Selection};

/// Appends the parameters of `op`, a movement op, as words.
pub(crate) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::Concat { axis } | Op::Split { axis } => w.usize(*axis),
        Op::Trilu { upper, k } => {
            w.bool(*upper);
            w.i32(*k);
        }
        Op::Resample {
            axis,
            extrapolation,
        } => {
            w.usize(*axis);
            w.f32(*extrapolation);
        }
        Op::Transpose { perm } => encode_axes(w, perm, |v| v as u32),
        Op::Slice { starts, steps } => {
            encode_axes(w, starts, |v| v as u32);
            encode_axes(w, steps, |v| v as i32 as u32);
        }
        Op::Pad {
            mode,
            begins,
            ends,
            value,
        } => {
            w.u32(*mode as u32);
            encode_axes(w, begins, |v| v as u32);
            encode_axes(w, ends, |v| v as u32);
            w.f32(*value);
        }
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(crate) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Concat if selects(OPS, OpKind::Concat) => Op::Concat { axis: r.usize()? },
        OpKind::Split if selects(OPS, OpKind::Split) => Op::Split { axis: r.usize()? },
        OpKind::Copy if selects(OPS, OpKind::Copy) => Op::Copy,
        OpKind::Expand if selects(OPS, OpKind::Expand) => Op::Expand,
        OpKind::Resample if selects(OPS, OpKind::Resample) => Op::Resample {
            axis: r.usize()?,
            extrapolation: r.f32()?,
        },
        OpKind::Trilu if selects(OPS, OpKind::Trilu) => Op::Trilu {
            upper: r.bool()?,
            k: r.i32()?,
        },
        OpKind::Transpose if selects(OPS, OpKind::Transpose) => Op::Transpose {
            perm: decode_axes(r, |v| Some(v as usize))?,
        },
        OpKind::Slice if selects(OPS, OpKind::Slice) => Op::Slice {
            starts: decode_axes(r, |v| Some(v as usize))?,
            steps: decode_axes(r, |v| match v as i32 {
                0 => None,
                s => Some(s as isize),
            })?,
        },
        OpKind::Pad if selects(OPS, OpKind::Pad) => Op::Pad {
            mode: match r.u32()? {
                0 => PadMode::Constant,
                1 => PadMode::Reflect,
                2 => PadMode::Edge,
                _ => return None,
            },
            begins: decode_axes(r, |v| Some(v as usize))?,
            ends: decode_axes(r, |v| Some(v as usize))?,
            value: r.f32()?,
        },
        _ => return None,
    })
}
