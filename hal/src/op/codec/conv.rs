//! The word codec of the conv family's kinds: `Op::encode` and `Op::decode_selected` dispatch here.

use crate::op::fields::*;
use crate::op::kinds::OpKind;
use crate::op::variants::Op;
use crate::op::{conv::*, quantize::*};
use crate::words::{WordReader, WordWriter};
use crate::{selects, Activation, Selection};

/// Appends the parameters of `op`, a conv op, as words.
pub(crate) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::Conv(c) => {
            c.window.encode(w);
            w.usize(c.group);
            c.activation.encode(w);
        }
        Op::ConvTranspose(c) => {
            c.window.encode(w);
            w.usize(c.output_padding[0]);
            w.usize(c.output_padding[1]);
            w.usize(c.group);
            c.activation.encode(w);
        }
        Op::QConv(c) => {
            c.window.encode(w);
            w.usize(c.group);
            c.requantize.encode(w);
        }
        Op::ConvInteger(c) => {
            c.window.encode(w);
            w.usize(c.group);
        }
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(crate) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Conv if selects(OPS, OpKind::Conv) => Op::Conv(Conv {
            window: Window::decode(r)?,
            group: positive(r.usize()?)?,
            activation: Activation::decode(r)?,
        }),
        OpKind::ConvTranspose if selects(OPS, OpKind::ConvTranspose) => {
            Op::ConvTranspose(ConvTranspose {
                window: Window::decode(r)?,
                output_padding: [r.usize()?, r.usize()?],
                group: positive(r.usize()?)?,
                activation: Activation::decode(r)?,
            })
        }
        OpKind::QConv if selects(OPS, OpKind::QConv) => Op::QConv(QConv {
            window: Window::decode(r)?,
            group: positive(r.usize()?)?,
            requantize: Requantize::decode(r)?,
        }),
        OpKind::ConvInteger if selects(OPS, OpKind::ConvInteger) => Op::ConvInteger(ConvInteger {
            window: Window::decode(r)?,
            group: positive(r.usize()?)?,
        }),
        _ => return None,
    })
}
