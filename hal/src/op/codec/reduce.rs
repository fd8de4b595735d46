//! The word codec of the reduce family's kinds: `Op::encode` and `Op::decode_selected` dispatch here.

use crate::op::kinds::OpKind;
use crate::op::reduce::*;
use crate::op::variants::Op;
use crate::words::{WordReader, WordWriter};
use crate::{selects, Selection};

/// Appends the parameters of `op`, a reduce op, as words.
pub(crate) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::ArgMax(a) | Op::ArgMin(a) => {
            w.usize(a.axis);
            w.bool(a.last);
        }
        Op::TopK { axis, largest } => {
            w.usize(*axis);
            w.bool(*largest);
        }
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => {
            w.usize(*axis);
            w.bool(*exclusive);
            w.bool(*reverse);
        }
        Op::Reduce { op, axes } => {
            w.u32(*op as u32);
            w.u32(*axes);
        }
        Op::TreeEnsemble(t) => {
            w.usize(t.targets);
            w.u32(t.aggregate as u32);
        }
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(crate) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::ArgMax | OpKind::ArgMin
            if selects(OPS, OpKind::ArgMax) || selects(OPS, OpKind::ArgMin) =>
        {
            let a = ArgIndex {
                axis: r.usize()?,
                last: r.bool()?,
            };
            if kind == OpKind::ArgMax {
                Op::ArgMax(a)
            } else {
                Op::ArgMin(a)
            }
        }
        OpKind::Det if selects(OPS, OpKind::Det) => Op::Det,
        OpKind::TreeEnsemble if selects(OPS, OpKind::TreeEnsemble) => {
            Op::TreeEnsemble(TreeEnsemble {
                targets: r.usize().filter(|&t| t >= 1)?,
                aggregate: match r.u32()? {
                    0 => TreeAggregate::Sum,
                    1 => TreeAggregate::Average,
                    2 => TreeAggregate::Min,
                    3 => TreeAggregate::Max,
                    _ => return None,
                },
            })
        }
        OpKind::TopK if selects(OPS, OpKind::TopK) => Op::TopK {
            axis: r.usize()?,
            largest: r.bool()?,
        },
        OpKind::CumSum if selects(OPS, OpKind::CumSum) => Op::CumSum {
            axis: r.usize()?,
            exclusive: r.bool()?,
            reverse: r.bool()?,
        },
        OpKind::Reduce if selects(OPS, OpKind::Reduce) => Op::Reduce {
            op: match r.u32()? {
                0 => ReduceOp::Mean,
                1 => ReduceOp::Sum,
                2 => ReduceOp::Max,
                3 => ReduceOp::Min,
                4 => ReduceOp::Prod,
                5 => ReduceOp::L1,
                6 => ReduceOp::L2,
                7 => ReduceOp::LogSum,
                8 => ReduceOp::SumSquare,
                _ => return None,
            },
            axes: r.u32()?,
        },
        _ => return None,
    })
}
