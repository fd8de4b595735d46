//! Matrix products, float and integer (Gemm, MatMul, QGemm, MatMulInteger): their parameters
//! and word encoding. One module per family, as [`super::Family`] lists them: `Op::encode` and
//! `Op::decode_selected` dispatch here by [`super::OpKind::family`].

use super::*;

/// `Y = alpha * A x B + beta * C`, `A: [M, K]`, `B: [K, N]`, `C` broadcastable to `[M, N]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of `C`.
    pub beta: f32,
    /// Fused activation.
    pub activation: Activation,
}

/// Appends the parameters of `op`, a matmul op, as words.
pub(super) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::Gemm(g) => {
            w.f32(g.alpha);
            w.f32(g.beta);
            g.activation.encode(w);
        }
        Op::MatMul { activation } => activation.encode(w),
        Op::QGemm(q) => q.encode(w),
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(super) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Gemm if selects(OPS, OpKind::Gemm) => Op::Gemm(Gemm {
            alpha: finite(r.f32()?)?,
            beta: finite(r.f32()?)?,
            activation: Activation::decode(r)?,
        }),
        OpKind::MatMul if selects(OPS, OpKind::MatMul) => Op::MatMul {
            activation: Activation::decode(r)?,
        },
        OpKind::QGemm if selects(OPS, OpKind::QGemm) => Op::QGemm(Requantize::decode(r)?),
        OpKind::MatMulInteger if selects(OPS, OpKind::MatMulInteger) => Op::MatMulInteger,
        _ => return None,
    })
}
