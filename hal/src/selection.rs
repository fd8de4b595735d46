//! A build's selection: which op kinds and element types a firmware links code for.
//!
//! A [`Selection`] is a bit mask, a const generic parameter of the model, the session and the
//! devices (`OPS`), so that code for anything it leaves out is never instantiated: a firmware
//! built for one model (`ferrite pack --emit rust` writes the model's selection as `OPS`) links
//! only that model's decoding, verification and kernels.
//!
//! Bits 0–63 are op kinds (bit = [`OpKind::code`]), bits 64–79 element types (bit = 64 +
//! [`DType::index`]). A selection without any element-type bit selects every element type, so
//! a mask of kinds alone ([`op_mask`]) keeps every dtype's kernels.

use crate::{DType, OpKind};

/// A selection of op kinds and element types (see the module documentation).
pub type Selection = u128;

/// Everything: the selection of a device that runs any model.
pub const ALL_OPS: Selection = Selection::MAX;

const DTYPE_BITS: Selection = 0xFFFF << 64;

/// The selection of `kinds` (every element type).
pub const fn op_mask(kinds: &[OpKind]) -> Selection {
    let mut mask = 0;
    let mut i = 0;
    while i < kinds.len() {
        mask |= 1 << (kinds[i] as u16);
        i += 1;
    }
    mask
}

/// The selection of `kinds` on tensors of `dtypes` only: what a model uses.
pub const fn selection(kinds: &[OpKind], dtypes: &[DType]) -> Selection {
    let mut mask = op_mask(kinds);
    let mut i = 0;
    while i < dtypes.len() {
        mask |= 1 << (64 + dtypes[i].index());
        i += 1;
    }
    mask
}

/// Whether `ops` selects `kind`.
pub const fn selects(ops: Selection, kind: OpKind) -> bool {
    ops & (1 << (kind as u16)) != 0
}

/// Whether `ops` selects element type `dtype` (every type when it names none).
pub const fn selects_dtype(ops: Selection, dtype: DType) -> bool {
    ops & DTYPE_BITS == 0 || ops & (1 << (64 + dtype.index())) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_alone_select_every_dtype_and_dtypes_narrow_it() {
        let kinds = op_mask(&[OpKind::QConv, OpKind::QGemm]);
        assert!(selects(kinds, OpKind::QConv) && !selects(kinds, OpKind::Conv));
        assert!(DType::ALL.iter().all(|&d| selects_dtype(kinds, d)));
        let int8 = selection(&[OpKind::QConv], &[DType::I8, DType::I32]);
        assert!(selects(int8, OpKind::QConv) && !selects(int8, OpKind::QGemm));
        assert!(selects_dtype(int8, DType::I8) && selects_dtype(int8, DType::I32));
        assert!(!selects_dtype(int8, DType::U8) && !selects_dtype(int8, DType::F32));
        for kind in OpKind::ALL {
            assert!(selects(ALL_OPS, kind));
            assert!(
                (kind as u16) < 64,
                "{kind:?}: op kinds must fit in bits 0-63"
            );
        }
        assert!(DType::ALL.len() <= 16);
    }
}
