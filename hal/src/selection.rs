//! A build's selection: which op kinds and element types a firmware links code for.
//!
//! A [`Selection`] is a bit mask, a const generic parameter of the model, the session and the
//! devices (`OPS`), so that code for anything it leaves out is never instantiated: a firmware
//! built for one model (`ferrite pack --emit rust` writes the model's selection as `OPS`) links
//! only that model's decoding, verification and kernels.
//!
//! Bits 0–63 are op kinds (bit = [`OpKind::code`]), bits 64–79 element types (bit = 64 +
//! [`DType::index`]), bits 80–108 activations, fused or standalone (bit = 80 +
//! [`Activation::code`]), bits 109–120 the arithmetic of `Binary` ops (bit = 109 +
//! [`BinaryOp::code`]), bits 121–122 QGemm's weight layouts (bit = 121 + the
//! [`QGemmWeights`] variant's index). A selection without any element-type bit selects every
//! element type, one without any activation bit every activation, one without a binary-op bit
//! every binary op and one without a layout bit both layouts, so a mask of kinds alone
//! ([`op_mask`]) keeps every kernel of those kinds.

use crate::op::{BinaryOp, QGemmWeights};
use crate::{Activation, DType, OpKind};

/// A selection of op kinds and element types (see the module documentation).
pub type Selection = u128;

/// Everything: the selection of a device that runs any model.
pub const ALL_OPS: Selection = Selection::MAX;

const DTYPE_BITS: Selection = 0xFFFF << 64;

const ACTIVATION_SHIFT: u32 = 80;
const ACTIVATION_BITS: Selection = ((1 << Activation::COUNT) - 1) << ACTIVATION_SHIFT;
const BINARY_SHIFT: u32 = ACTIVATION_SHIFT + Activation::COUNT;
const BINARY_BITS: Selection = ((1 << BinaryOp::COUNT) - 1) << BINARY_SHIFT;
const QGEMM_WEIGHTS_SHIFT: u32 = BINARY_SHIFT + BinaryOp::COUNT;
const QGEMM_WEIGHTS_BITS: Selection = 0b11 << QGEMM_WEIGHTS_SHIFT;
const _: () = assert!(QGEMM_WEIGHTS_SHIFT + 2 <= 128, "the layout bits must fit");

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

/// Whether `ops` selects any element type of `bytes` bytes (every size when it names no type):
/// what kernels that only move elements (transpose, gather, concat) are instantiated for.
pub const fn selects_size(ops: Selection, bytes: usize) -> bool {
    let mut i = 0;
    while i < DType::ALL.len() {
        if DType::ALL[i].size() == bytes && selects_dtype(ops, DType::ALL[i]) {
            return true;
        }
        i += 1;
    }
    false
}

/// `mask` with `activations` selected too, and the identity: what a model's steps apply. Once
/// one activation bit is set, only the selected activations are linked and accepted at load.
pub const fn with_activations(mask: Selection, activations: &[Activation]) -> Selection {
    let mut mask = mask | 1 << (ACTIVATION_SHIFT + Activation::None.code());
    let mut i = 0;
    while i < activations.len() {
        mask |= 1 << (ACTIVATION_SHIFT + activations[i].code());
        i += 1;
    }
    mask
}

/// `mask` with the binary ops `binary` selected too: what a model's `Binary` steps compute.
/// Once one is set, only the selected ones are linked and accepted at load.
pub const fn with_binary_ops(mask: Selection, binary: &[BinaryOp]) -> Selection {
    let mut mask = mask;
    let mut i = 0;
    while i < binary.len() {
        mask |= 1 << (BINARY_SHIFT + binary[i].code());
        i += 1;
    }
    mask
}

/// `mask` with the QGemm weight layouts `layouts` selected too: how a model's QGemm steps hold
/// their weights. Once one is set, only the selected layouts' kernels are linked and accepted
/// at load (a model whose QGemms are all blocked links no row-major kernel).
pub const fn with_qgemm_weights(mask: Selection, layouts: &[QGemmWeights]) -> Selection {
    let mut mask = mask;
    let mut i = 0;
    while i < layouts.len() {
        mask |= 1 << (QGEMM_WEIGHTS_SHIFT + layouts[i] as u32);
        i += 1;
    }
    mask
}

/// Whether `ops` selects QGemm weight layout `layout` (both when it names none).
pub const fn selects_qgemm_weights(ops: Selection, layout: QGemmWeights) -> bool {
    ops & QGEMM_WEIGHTS_BITS == 0 || ops & (1 << (QGEMM_WEIGHTS_SHIFT + layout as u32)) != 0
}

/// Whether `ops` selects binary op `op` (every one when it names none).
pub const fn selects_binary(ops: Selection, op: BinaryOp) -> bool {
    ops & BINARY_BITS == 0 || ops & (1 << (BINARY_SHIFT + op.code())) != 0
}

/// Whether `ops` selects `kind`.
pub const fn selects(ops: Selection, kind: OpKind) -> bool {
    ops & (1 << (kind as u16)) != 0
}

/// Whether `ops` selects element type `dtype` (every type when it names none).
pub const fn selects_dtype(ops: Selection, dtype: DType) -> bool {
    ops & DTYPE_BITS == 0 || ops & (1 << (64 + dtype.index())) != 0
}

/// Whether `ops` selects activation `act` (every activation when it names none).
pub const fn selects_activation(ops: Selection, act: &Activation) -> bool {
    ops & ACTIVATION_BITS == 0 || ops & (1 << (ACTIVATION_SHIFT + act.code())) != 0
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

    #[test]
    fn activations_narrow_only_once_one_is_named() {
        let gemm = selection(&[OpKind::Gemm], &[DType::F32]);
        assert!(selects_activation(gemm, &Activation::Tanh));
        let relu = with_activations(gemm, &[Activation::Relu]);
        assert!(selects_activation(relu, &Activation::Relu));
        assert!(
            selects_activation(relu, &Activation::None),
            "the identity is always there"
        );
        assert!(!selects_activation(relu, &Activation::Tanh));
        assert!(!selects_activation(
            relu,
            &Activation::LeakyRelu { alpha: 0.1 }
        ));
        assert!(selects(relu, OpKind::Gemm) && !selects(relu, OpKind::Conv));
        assert!(selects_dtype(relu, DType::F32) && !selects_dtype(relu, DType::I8));
        assert!(selects_size(gemm, 4) && !selects_size(gemm, 1) && !selects_size(gemm, 8));
        assert!(selects_size(ALL_OPS, 1) && selects_size(op_mask(&[OpKind::Gemm]), 8));
        let add = with_binary_ops(relu, &[BinaryOp::Add]);
        assert!(
            selects_binary(relu, BinaryOp::Pow),
            "no binary op named: all"
        );
        assert!(selects_binary(add, BinaryOp::Add) && !selects_binary(add, BinaryOp::Pow));
        assert!(selects_activation(add, &Activation::Relu));
        assert!(!selects_activation(add, &Activation::Tanh));
        let none = with_activations(gemm, &[]);
        assert!(selects_activation(none, &Activation::None));
        assert!(!selects_activation(none, &Activation::Relu));
    }

    #[test]
    fn qgemm_layouts_narrow_only_once_one_is_named() {
        let qgemm = selection(&[OpKind::QGemm], &[DType::I8, DType::I32]);
        assert!(selects_qgemm_weights(qgemm, QGemmWeights::Rows));
        assert!(selects_qgemm_weights(qgemm, QGemmWeights::Blocked));
        let blocked = with_qgemm_weights(qgemm, &[QGemmWeights::Blocked]);
        assert!(selects_qgemm_weights(blocked, QGemmWeights::Blocked));
        assert!(!selects_qgemm_weights(blocked, QGemmWeights::Rows));
        let both = with_qgemm_weights(blocked, &[QGemmWeights::Rows]);
        assert!(selects_qgemm_weights(both, QGemmWeights::Rows));
        // The layout bits leave every other group as it was.
        assert_eq!(blocked & !QGEMM_WEIGHTS_BITS, qgemm);
        assert!(
            selects_binary(blocked, BinaryOp::Pow)
                && selects_activation(blocked, &Activation::Tanh)
        );
        assert!(selects_qgemm_weights(ALL_OPS, QGemmWeights::Rows));
    }
}
