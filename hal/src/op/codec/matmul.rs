//! The word codec of the matmul family's kinds: `Op::encode` and `Op::decode_selected` dispatch here.

use crate::op::fields::*;
use crate::op::kinds::OpKind;
use crate::op::variants::Op;
use crate::op::{matmul::*, quantize::*};
use crate::words::{WordReader, WordWriter};
use crate::{selects, Activation, Selection, MAX_RANK};

/// Appends the parameters of `op`, a matmul op, as words.
pub(crate) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::Gemm(g) => {
            w.f32(g.alpha);
            w.f32(g.beta);
            g.activation.encode(w);
        }
        Op::MatMul { activation } => activation.encode(w),
        Op::QGemm(q) => q.encode(w),
        Op::Dft(d) => {
            w.u32(d.axis as u32);
            w.u32(d.length as u32);
            w.u32(d.frame_step as u32);
            w.u32(u32::from(d.inverse) | u32::from(d.onesided) << 1);
        }
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(crate) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Gemm if selects(OPS, OpKind::Gemm) => Op::Gemm(Gemm {
            alpha: finite(r.f32()?)?,
            beta: finite(r.f32()?)?,
            activation: Activation::decode(r)?,
        }),
        OpKind::MatMul if selects(OPS, OpKind::MatMul) => Op::MatMul {
            activation: Activation::decode(r)?,
        },
        OpKind::QGemm if selects(OPS, OpKind::QGemm) => Op::QGemm(Requantize::decode(r)?),
        OpKind::MatMulInteger if selects(OPS, OpKind::MatMulInteger) => Op::MatMulInteger,
        OpKind::Dft if selects(OPS, OpKind::Dft) => {
            let axis = r.u32()? as usize;
            let length = r.u32()? as usize;
            let frame_step = r.u32()? as usize;
            let flags = r.u32()?;
            if axis >= MAX_RANK || !(1..=MAX_DFT_LENGTH).contains(&length) || flags > 3 {
                return None;
            }
            if frame_step > MAX_DFT_LENGTH {
                return None;
            }
            Op::Dft(Dft {
                axis,
                length,
                frame_step,
                inverse: flags & 1 != 0,
                onesided: flags & 2 != 0,
            })
        }
        _ => return None,
    })
}
