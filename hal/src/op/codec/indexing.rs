//! The word codec of the indexing family's kinds: `Op::encode` and `Op::decode_selected` dispatch here.

use crate::op::indexing::*;
use crate::op::kinds::OpKind;
use crate::op::variants::Op;
use crate::words::{WordReader, WordWriter};
use crate::{selects, Selection};

/// Appends the parameters of `op`, a indexing op, as words.
pub(crate) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::Gather { axis } | Op::GatherElements { axis } => w.usize(*axis),
        Op::ScatterElements { axis, reduction } => {
            w.usize(*axis);
            w.u32(*reduction as u32);
        }
        Op::GatherNd { batch_dims } => w.usize(*batch_dims),
        Op::ScatterNd { reduction } => w.u32(*reduction as u32),
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(crate) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Gather if selects(OPS, OpKind::Gather) => Op::Gather { axis: r.usize()? },
        OpKind::GatherElements if selects(OPS, OpKind::GatherElements) => {
            Op::GatherElements { axis: r.usize()? }
        }
        OpKind::ScatterElements if selects(OPS, OpKind::ScatterElements) => Op::ScatterElements {
            axis: r.usize()?,
            reduction: Reduction::from_code(r.u32()?)?,
        },
        OpKind::GatherNd if selects(OPS, OpKind::GatherNd) => Op::GatherNd {
            batch_dims: r.usize()?,
        },
        OpKind::ScatterNd if selects(OPS, OpKind::ScatterNd) => Op::ScatterNd {
            reduction: Reduction::from_code(r.u32()?)?,
        },
        _ => return None,
    })
}
