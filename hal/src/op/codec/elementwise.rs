//! The word codec of the elementwise family's kinds: `Op::encode` and `Op::decode_selected` dispatch here.

use crate::op::fields::*;
use crate::op::kinds::OpKind;
use crate::op::variants::Op;
use crate::op::{elementwise::*, quantize::*};
use crate::words::{WordReader, WordWriter};
use crate::{selects, Activation, Selection};

/// Appends the parameters of `op`, a elementwise op, as words.
pub(crate) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::Unary(activation) => activation.encode(w),
        Op::Binary { op, activation } => {
            w.u32(op.code());
            activation.encode(w);
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::Hardmax { axis } => w.usize(*axis),
        Op::BatchNorm {
            epsilon,
            activation,
        } => {
            w.f32(*epsilon);
            activation.encode(w);
        }
        Op::QAdd(q) => {
            q.a.encode(w);
            q.b.encode(w);
            q.output.encode(w);
            for v in [q.a_zero, q.b_zero, q.output_zero, q.min, q.max] {
                w.i32(v);
            }
        }
        Op::QSoftmax(q) => {
            w.usize(q.axis);
            q.rescale.encode(w);
            for v in [q.output_zero, q.min, q.max] {
                w.i32(v);
            }
        }
        Op::QMul(q) => {
            q.rescale.encode(w);
            for v in [q.a_zero, q.b_zero, q.output_zero, q.min, q.max] {
                w.i32(v);
            }
        }
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(crate) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Binary if selects(OPS, OpKind::Binary) => Op::Binary {
            op: match r.u32()? {
                0 => BinaryOp::Add,
                1 => BinaryOp::Sub,
                2 => BinaryOp::Mul,
                3 => BinaryOp::Div,
                4 => BinaryOp::Pow,
                5 => BinaryOp::Max,
                6 => BinaryOp::Min,
                7 => BinaryOp::PRelu,
                8 => BinaryOp::Fmod,
                9 => BinaryOp::Mod,
                10 => BinaryOp::ShiftLeft,
                11 => BinaryOp::ShiftRight,
                _ => return None,
            },
            activation: Activation::decode(r)?,
        },
        OpKind::Unary if selects(OPS, OpKind::Unary) => Op::Unary(Activation::decode(r)?),
        OpKind::Softmax if selects(OPS, OpKind::Softmax) => Op::Softmax { axis: r.usize()? },
        OpKind::LogSoftmax if selects(OPS, OpKind::LogSoftmax) => {
            Op::LogSoftmax { axis: r.usize()? }
        }
        OpKind::Hardmax if selects(OPS, OpKind::Hardmax) => Op::Hardmax { axis: r.usize()? },
        OpKind::QAdd if selects(OPS, OpKind::QAdd) => {
            let (a, b, output) = (
                Rescale::decode(r)?,
                Rescale::decode(r)?,
                Rescale::decode(r)?,
            );
            let [a_zero, b_zero, output_zero, min, max] = decode_zeros_and_clamp(r)?;
            Op::QAdd(QAdd {
                a,
                b,
                output,
                a_zero,
                b_zero,
                output_zero,
                min,
                max,
            })
        }
        OpKind::QLookup if selects(OPS, OpKind::QLookup) => Op::QLookup,
        OpKind::Convert if selects(OPS, OpKind::Convert) => Op::Convert,
        OpKind::QSoftmax if selects(OPS, OpKind::QSoftmax) => {
            let axis = r.usize()?;
            let rescale = Rescale::decode(r)?;
            let [output_zero, min, max] = [r.i32()?, r.i32()?, r.i32()?];
            let byte = -128..=255;
            if !(byte.contains(&output_zero)
                && byte.contains(&min)
                && byte.contains(&max)
                && min <= max)
            {
                return None;
            }
            Op::QSoftmax(QSoftmax {
                axis,
                rescale,
                output_zero,
                min,
                max,
            })
        }
        OpKind::QMul if selects(OPS, OpKind::QMul) => {
            let rescale = Rescale::decode(r)?;
            let [a_zero, b_zero, output_zero, min, max] = decode_zeros_and_clamp(r)?;
            Op::QMul(QMul {
                rescale,
                a_zero,
                b_zero,
                output_zero,
                min,
                max,
            })
        }
        OpKind::BatchNorm if selects(OPS, OpKind::BatchNorm) => Op::BatchNorm {
            epsilon: finite(r.f32()?)?,
            activation: Activation::decode(r)?,
        },
        _ => return None,
    })
}
