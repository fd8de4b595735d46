//! Elementwise ops, float and integer (binary arithmetic, activations, softmax, batch norm,
//! casts, QAdd, QMul, QLookup, QSoftmax): their parameters and word encoding. One module per family, as [`super::Family`] lists them: `Op::encode` and
//! `Op::decode_selected` dispatch here by [`super::OpKind::family`].

use super::*;

/// Integer addition of two 8-bit (or int16) tensors of one shape, as TFLite's quantized `Add`: each input's
/// `(x − zero) · 2^20` is rescaled to a common scale (`s / (2·max(s_a, s_b))`), the sum rescaled
/// to the output (`2·max(s_a, s_b) / (2^20 · s_y)`), offset by the output zero point and clamped
/// (a fused Relu is the clamp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QAdd {
    /// Rescale of input A.
    pub a: Rescale,
    /// Rescale of input B.
    pub b: Rescale,
    /// Rescale of the sum.
    pub output: Rescale,
    /// Zero point of A.
    pub a_zero: i32,
    /// Zero point of B.
    pub b_zero: i32,
    /// Zero point of the output.
    pub output_zero: i32,
    /// Smallest output.
    pub min: i32,
    /// Largest output.
    pub max: i32,
}

/// Integer multiplication of two 8-bit tensors (numpy broadcasting), as TFLite's quantized `Mul`:
/// `(a − a_zero)·(b − b_zero)` rescaled by `s_a·s_b / s_y`, offset by the output zero point and
/// clamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QMul {
    /// Rescale of the product.
    pub rescale: Rescale,
    /// Zero point of A.
    pub a_zero: i32,
    /// Zero point of B.
    pub b_zero: i32,
    /// Zero point of the output.
    pub output_zero: i32,
    /// Smallest output.
    pub min: i32,
    /// Largest output.
    pub max: i32,
}

/// The left shift TFLite's quantized `Add` applies to both inputs before rescaling them.
pub const QADD_LEFT_SHIFT: i32 = 20;

/// Integer softmax of an 8-bit tensor along `axis`, as exponentials of integer distances from
/// the maximum: with `t[d] = round(2^30 · exp(−s_x·d))` (the table input, made on the host),
/// `y = clamp(round(t[max − x] / Σ t[max − x'] × 1/s_y) + output_zero, min, max)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QSoftmax {
    /// Axis, in `0..rank`.
    pub axis: usize,
    /// `1 / s_y`.
    pub rescale: Rescale,
    /// Zero point of the output.
    pub output_zero: i32,
    /// Smallest output.
    pub min: i32,
    /// Largest output.
    pub max: i32,
}

/// The exponent of [`QSoftmax`]'s table: `t[0] = 2^30`.
pub const QSOFTMAX_TABLE_BITS: u32 = 30;

/// Elementwise binary arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
    /// `a^b`
    Pow,
    /// The larger (NaN if either is).
    Max,
    /// The smaller (NaN if either is).
    Min,
    /// `a if a >= 0 else a * b` (PRelu, `b` the slope).
    PRelu,
    /// `a − b·trunc(a / b)`, the sign of `a` (C `fmod`).
    Fmod,
    /// `a − b·floor(a / b)`, the sign of `b` (Python `%`, ONNX Mod with `fmod=0`).
    Mod,
    /// `a << b` (integers; 0 once `b` reaches the width).
    ShiftLeft,
    /// `a >> b` (integers, logical for unsigned types; 0 once `b` reaches the width).
    ShiftRight,
}

impl BinaryOp {
    /// How many binary ops there are: codes are `0..COUNT`.
    pub const COUNT: u32 = 12;

    /// The op's code in the encoding (also its bit in a [`crate::Selection`]).
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// Whether the op is defined on floats (the shifts are not).
    pub const fn takes_floats(self) -> bool {
        !matches!(self, BinaryOp::ShiftLeft | BinaryOp::ShiftRight)
    }
}

/// Appends the parameters of `op`, a elementwise op, as words.
pub(super) fn encode(op: &Op, w: &mut WordWriter) {
    match op {
        Op::Unary(activation) => activation.encode(w),
        Op::Binary { op, activation } => {
            w.u32(op.code());
            activation.encode(w);
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::Hardmax { axis } => w.usize(*axis),
        Op::BatchNorm {
            epsilon,
            activation,
        } => {
            w.f32(*epsilon);
            activation.encode(w);
        }
        Op::QAdd(q) => {
            q.a.encode(w);
            q.b.encode(w);
            q.output.encode(w);
            for v in [q.a_zero, q.b_zero, q.output_zero, q.min, q.max] {
                w.i32(v);
            }
        }
        Op::QSoftmax(q) => {
            w.usize(q.axis);
            q.rescale.encode(w);
            for v in [q.output_zero, q.min, q.max] {
                w.i32(v);
            }
        }
        Op::QMul(q) => {
            q.rescale.encode(w);
            for v in [q.a_zero, q.b_zero, q.output_zero, q.min, q.max] {
                w.i32(v);
            }
        }
        _ => {}
    }
}

/// Decodes the parameters of an op of kind `kind` of this family, for a build selecting `OPS`:
/// `None` for an unselected kind or a value out of its domain.
pub(super) fn decode<const OPS: Selection>(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
    Some(match kind {
        OpKind::Binary if selects(OPS, OpKind::Binary) => Op::Binary {
            op: match r.u32()? {
                0 => BinaryOp::Add,
                1 => BinaryOp::Sub,
                2 => BinaryOp::Mul,
                3 => BinaryOp::Div,
                4 => BinaryOp::Pow,
                5 => BinaryOp::Max,
                6 => BinaryOp::Min,
                7 => BinaryOp::PRelu,
                8 => BinaryOp::Fmod,
                9 => BinaryOp::Mod,
                10 => BinaryOp::ShiftLeft,
                11 => BinaryOp::ShiftRight,
                _ => return None,
            },
            activation: Activation::decode(r)?,
        },
        OpKind::Unary if selects(OPS, OpKind::Unary) => Op::Unary(Activation::decode(r)?),
        OpKind::Softmax if selects(OPS, OpKind::Softmax) => Op::Softmax { axis: r.usize()? },
        OpKind::LogSoftmax if selects(OPS, OpKind::LogSoftmax) => {
            Op::LogSoftmax { axis: r.usize()? }
        }
        OpKind::Hardmax if selects(OPS, OpKind::Hardmax) => Op::Hardmax { axis: r.usize()? },
        OpKind::QAdd if selects(OPS, OpKind::QAdd) => {
            let (a, b, output) = (
                Rescale::decode(r)?,
                Rescale::decode(r)?,
                Rescale::decode(r)?,
            );
            let [a_zero, b_zero, output_zero, min, max] = decode_zeros_and_clamp(r)?;
            Op::QAdd(QAdd {
                a,
                b,
                output,
                a_zero,
                b_zero,
                output_zero,
                min,
                max,
            })
        }
        OpKind::QLookup if selects(OPS, OpKind::QLookup) => Op::QLookup,
        OpKind::Convert if selects(OPS, OpKind::Convert) => Op::Convert,
        OpKind::QSoftmax if selects(OPS, OpKind::QSoftmax) => {
            let axis = r.usize()?;
            let rescale = Rescale::decode(r)?;
            let [output_zero, min, max] = [r.i32()?, r.i32()?, r.i32()?];
            let byte = -128..=255;
            if !(byte.contains(&output_zero)
                && byte.contains(&min)
                && byte.contains(&max)
                && min <= max)
            {
                return None;
            }
            Op::QSoftmax(QSoftmax {
                axis,
                rescale,
                output_zero,
                min,
                max,
            })
        }
        OpKind::QMul if selects(OPS, OpKind::QMul) => {
            let rescale = Rescale::decode(r)?;
            let [a_zero, b_zero, output_zero, min, max] = decode_zeros_and_clamp(r)?;
            Op::QMul(QMul {
                rescale,
                a_zero,
                b_zero,
                output_zero,
                min,
                max,
            })
        }
        OpKind::BatchNorm if selects(OPS, OpKind::BatchNorm) => Op::BatchNorm {
            epsilon: finite(r.f32()?)?,
            activation: Activation::decode(r)?,
        },
        _ => return None,
    })
}
