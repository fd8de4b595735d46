//! The word codec of the logic family's kinds: `Op::encode` and `Op::decode_selected` dispatch here.

use crate::op::kinds::OpKind;
use crate::op::logic::*;
use crate::op::variants::Op;
use crate::words::{WordReader, WordWriter};
use crate::{selects, Selection};

/// Appends the parameters of `op`, a logic op, as words.
pub(crate) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::Compare(c) => w.u32(*c as u32),
        Op::Logical(l) => w.u32(*l as u32),
        Op::Classify(d) => {
            w.bool(d.nan);
            w.bool(d.positive_infinity);
            w.bool(d.negative_infinity);
        }
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(crate) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Not if selects(OPS, OpKind::Not) => Op::Not,
        OpKind::Where if selects(OPS, OpKind::Where) => Op::Where,
        OpKind::Compare if selects(OPS, OpKind::Compare) => Op::Compare(match r.u32()? {
            0 => CompareOp::Equal,
            1 => CompareOp::Less,
            2 => CompareOp::LessOrEqual,
            3 => CompareOp::Greater,
            4 => CompareOp::GreaterOrEqual,
            _ => return None,
        }),
        OpKind::Logical if selects(OPS, OpKind::Logical) => Op::Logical(match r.u32()? {
            0 => LogicalOp::And,
            1 => LogicalOp::Or,
            2 => LogicalOp::Xor,
            _ => return None,
        }),
        OpKind::Classify if selects(OPS, OpKind::Classify) => Op::Classify(Detect {
            nan: r.bool()?,
            positive_infinity: r.bool()?,
            negative_infinity: r.bool()?,
        }),
        _ => return None,
    })
}
