//! The word codec of the quantize family's kinds: `Op::encode` and `Op::decode_selected` dispatch here.

use crate::op::kinds::OpKind;
use crate::op::variants::Op;
use crate::words::{WordReader, WordWriter};
use crate::{selects, Selection};

/// Appends the parameters of `op`, a quantize op, as words.
pub(crate) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::Quantize { axis } | Op::Dequantize { axis } => w.usize(*axis),
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(crate) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Quantize if selects(OPS, OpKind::Quantize) => Op::Quantize { axis: r.usize()? },
        OpKind::Dequantize if selects(OPS, OpKind::Dequantize) => {
            Op::Dequantize { axis: r.usize()? }
        }
        OpKind::DynamicQuantize if selects(OPS, OpKind::DynamicQuantize) => Op::DynamicQuantize,
        _ => return None,
    })
}
