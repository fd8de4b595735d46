//! The word codec of the recurrent family's kinds: `Op::encode` and `Op::decode_selected` dispatch here.

use crate::op::kinds::OpKind;
use crate::op::recurrent::*;
use crate::op::variants::Op;
use crate::words::{WordReader, WordWriter};
use crate::{selects, Selection};

/// Appends the parameters of `op`, a recurrent op, as words.
pub(crate) fn encode(op: &Op, w: &mut WordWriter) {
    if let Op::Recurrent(r) = op {
        r.encode(w);
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(crate) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Recurrent if selects(OPS, OpKind::Recurrent) => {
            Op::Recurrent(Recurrent::decode(r)?)
        }
        _ => return None,
    })
}
