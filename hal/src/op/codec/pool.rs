//! The word codec of the pool family's kinds: `Op::encode` and `Op::decode_selected` dispatch here.

use crate::op::kinds::OpKind;
use crate::op::variants::Op;
use crate::op::{pool::*, quantize::*};
use crate::words::{WordReader, WordWriter};
use crate::{selects, Selection};

/// Appends the parameters of `op`, a pool op, as words.
pub(crate) fn encode(op: &Op, w: &mut WordWriter) {
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
pub(crate) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
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
