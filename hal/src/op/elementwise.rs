//! Elementwise ops, float and integer (binary arithmetic, activations, softmax, batch norm,
//! casts, QAdd, QMul, QLookup, QSoftmax): their parameters. One module per family, as
//! [`super::Family`] lists them; the words' codec is `codec/elementwise.rs`.

use super::quantize::Rescale;

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
