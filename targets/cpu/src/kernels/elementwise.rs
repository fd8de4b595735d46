//! Elementwise kernels: activations, broadcasting binary arithmetic, batch normalisation.

use super::index::for_each_index;
use crate::math;
use ferrite_hal::geometry::broadcast_strides;
use ferrite_hal::op::BinaryOp;
use ferrite_hal::{Activation, Shape};

/// Applies a fused activation (one of [`Activation::is_fusable`]'s, as the verifier requires)
/// to every element of `xs` in place. Kernels inline only these few.
#[inline(always)]
pub fn activate_fused(act: Activation, xs: &mut [f32]) {
    match act {
        Activation::Relu => xs.iter_mut().for_each(|x| *x = x.max(0.0)),
        Activation::LeakyRelu { alpha } => xs
            .iter_mut()
            .for_each(|x| *x = if *x >= 0.0 { *x } else { *x * alpha }),
        // Not `clamp`: ONNX allows min > max (the result is then max), where clamp panics.
        #[allow(clippy::manual_clamp)]
        Activation::Clip { min, max } => xs.iter_mut().for_each(|x| *x = x.max(min).min(max)),
        Activation::Sigmoid => xs.iter_mut().for_each(|x| *x = sigmoid(*x)),
        Activation::Tanh => xs.iter_mut().for_each(|x| *x = math::tanh(*x)),
        Activation::HardSigmoid { alpha, beta } => xs
            .iter_mut()
            .for_each(|x| *x = (alpha * *x + beta).clamp(0.0, 1.0)),
        Activation::HardSwish => xs
            .iter_mut()
            .for_each(|x| *x *= (*x / 6.0 + 0.5).clamp(0.0, 1.0)),
        // Identity, and (never, after verification) an unfusable activation.
        _ => {}
    }
}

/// Applies `act` to every element of `xs` in place: any activation (standalone `Unary` ops).
pub fn activate(act: Activation, xs: &mut [f32]) {
    match act {
        Activation::None
        | Activation::Relu
        | Activation::LeakyRelu { .. }
        | Activation::Clip { .. }
        | Activation::Sigmoid
        | Activation::Tanh
        | Activation::HardSigmoid { .. }
        | Activation::HardSwish => activate_fused(act, xs),
        Activation::Exp => map(xs, math::exp),
        Activation::Log => map(xs, math::ln),
        Activation::Sqrt => map(xs, math::sqrt),
        Activation::Reciprocal => map(xs, |x| 1.0 / x),
        Activation::Neg => map(xs, |x| -x),
        Activation::Abs => map(xs, f32::abs),
        Activation::Sign => map(xs, sign),
        Activation::Floor => map(xs, math::floor),
        Activation::Ceil => map(xs, math::ceil),
        Activation::Round => map(xs, math::round_half_even),
        Activation::Sin => map(xs, math::sin),
        Activation::Cos => map(xs, math::cos),
        Activation::Erf => map(xs, math::erf),
        Activation::Gelu { tanh: false } => map(xs, |x| {
            0.5 * x * (1.0 + math::erf(x * core::f32::consts::FRAC_1_SQRT_2))
        }),
        Activation::Gelu { tanh: true } => map(xs, |x| {
            // sqrt(2 / pi)
            const K: f32 = 0.797_884_6;
            0.5 * x * (1.0 + math::tanh(K * (x + 0.044_715 * x * x * x)))
        }),
        Activation::Elu { alpha } => {
            map(xs, |x| if x >= 0.0 { x } else { alpha * math::exp_m1(x) })
        }
        Activation::Selu { alpha, gamma } => map(xs, |x| {
            gamma * if x > 0.0 { x } else { alpha * math::exp_m1(x) }
        }),
        Activation::Celu { alpha } => map(xs, |x| {
            x.max(0.0) + (alpha * math::exp_m1(x / alpha)).min(0.0)
        }),
        Activation::Softplus => map(xs, softplus),
        Activation::Softsign => map(xs, |x| x / (1.0 + x.abs())),
        Activation::Mish => map(xs, |x| x * math::tanh(softplus(x))),
        Activation::ThresholdedRelu { alpha } => map(xs, |x| if x > alpha { x } else { 0.0 }),
    }
}

/// `x ↦ f(x)` over `xs`, in place.
#[inline(always)]
fn map(xs: &mut [f32], f: impl Fn(f32) -> f32) {
    xs.iter_mut().for_each(|x| *x = f(*x));
}

/// −1, 0 or 1 by the sign of `x`; NaN stays NaN.
#[inline]
fn sign(x: f32) -> f32 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

/// `ln(1 + e^x)` without overflow: `x + ln(1 + e^−x)` for positive `x`.
#[inline]
pub fn softplus(x: f32) -> f32 {
    if x > 0.0 {
        x + math::ln_1p(math::exp(-x))
    } else {
        math::ln_1p(math::exp(x))
    }
}

/// Numerically stable logistic function.
#[inline]
pub fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + math::exp(-x))
    } else {
        let e = math::exp(x);
        e / (1.0 + e)
    }
}

/// One operand of an elementwise op: separate data, or the output itself (in place).
#[derive(Clone, Copy)]
pub enum Operand<'a> {
    /// Separate data with its own shape.
    Data(&'a [f32], Shape),
    /// The output's current contents (same shape as the output).
    Output,
}

/// One row's view of an operand.
#[derive(Clone, Copy)]
enum Row<'a> {
    Contiguous(&'a [f32]),
    Splat(f32),
    Output,
}

/// `out = act(a op b)` with numpy broadcasting over `out_shape`.
#[inline(always)]
pub fn binary(
    op: BinaryOp,
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
    out_shape: &Shape,
    act: Activation,
) {
    match op {
        BinaryOp::Add => binary_with(a, b, out, out_shape, |x, y| x + y),
        BinaryOp::Sub => binary_with(a, b, out, out_shape, |x, y| x - y),
        BinaryOp::Mul => binary_with(a, b, out, out_shape, |x, y| x * y),
        BinaryOp::Div => binary_with(a, b, out, out_shape, |x, y| x / y),
        BinaryOp::Pow => binary_with(a, b, out, out_shape, math::pow),
        BinaryOp::Max => binary_with(a, b, out, out_shape, |x, y| {
            if x.is_nan() || x > y {
                x
            } else {
                y
            }
        }),
        BinaryOp::Min => binary_with(a, b, out, out_shape, |x, y| {
            if x.is_nan() || x < y {
                x
            } else {
                y
            }
        }),
        BinaryOp::PRelu => {
            binary_with(a, b, out, out_shape, |x, s| if x < 0.0 { x * s } else { x })
        }
        BinaryOp::Fmod => binary_with(a, b, out, out_shape, math::fmod),
        BinaryOp::Mod => binary_with(a, b, out, out_shape, |x, y| {
            let r = math::fmod(x, y);
            if r != 0.0 && (r < 0.0) != (y < 0.0) {
                r + y
            } else {
                r
            }
        }),
        // The verifier refuses shifts on floats.
        BinaryOp::ShiftLeft | BinaryOp::ShiftRight => {}
    }
    activate_fused(act, out);
}

#[inline(always)]
fn binary_with(
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
    out_shape: &Shape,
    f: impl Fn(f32, f32) -> f32 + Copy,
) {
    let rank = out_shape.rank();
    let inner = if rank == 0 {
        1
    } else {
        out_shape.dims()[rank - 1]
    };
    let outer_dims = &out_shape.dims()[..rank.saturating_sub(1)];
    let out_strides = out_shape.strides();
    let strides_of = |o: &Operand<'_>| match o {
        Operand::Data(_, s) => broadcast_strides(s, out_shape),
        Operand::Output => out_strides,
    };
    let (sa, sb) = (strides_of(&a), strides_of(&b));
    fn row_of<'a>(
        o: Operand<'a>,
        strides: &[usize; ferrite_hal::MAX_RANK],
        off: usize,
        rank: usize,
        inner: usize,
    ) -> Row<'a> {
        let last = rank.saturating_sub(1);
        match o {
            Operand::Output => Row::Output,
            Operand::Data(d, _) => {
                if rank > 0 && strides[last] == 1 {
                    Row::Contiguous(&d[off..off + inner])
                } else {
                    Row::Splat(d[off])
                }
            }
        }
    }
    for_each_index(outer_dims, [&out_strides, &sa, &sb], |[o, oa, ob]| {
        let ra = row_of(a, &sa, oa, rank, inner);
        let rb = row_of(b, &sb, ob, rank, inner);
        let dst = &mut out[o..o + inner];
        apply_row(dst, ra, rb, f);
    });
}

#[inline(always)]
fn apply_row(dst: &mut [f32], a: Row<'_>, b: Row<'_>, f: impl Fn(f32, f32) -> f32) {
    match (a, b) {
        (Row::Contiguous(x), Row::Contiguous(y)) => {
            for ((d, x), y) in dst.iter_mut().zip(x).zip(y) {
                *d = f(*x, *y);
            }
        }
        (Row::Contiguous(x), Row::Splat(y)) => {
            dst.iter_mut().zip(x).for_each(|(d, x)| *d = f(*x, y))
        }
        (Row::Splat(x), Row::Contiguous(y)) => {
            dst.iter_mut().zip(y).for_each(|(d, y)| *d = f(x, *y))
        }
        (Row::Splat(x), Row::Splat(y)) => dst.fill(f(x, y)),
        (Row::Output, Row::Contiguous(y)) => {
            dst.iter_mut().zip(y).for_each(|(d, y)| *d = f(*d, *y))
        }
        (Row::Output, Row::Splat(y)) => dst.iter_mut().for_each(|d| *d = f(*d, y)),
        (Row::Contiguous(x), Row::Output) => {
            dst.iter_mut().zip(x).for_each(|(d, x)| *d = f(*x, *d))
        }
        (Row::Splat(x), Row::Output) => dst.iter_mut().for_each(|d| *d = f(x, *d)),
        (Row::Output, Row::Output) => dst.iter_mut().for_each(|d| *d = f(*d, *d)),
    }
}

/// Batch normalisation over axis 1: `y = (x - mean) / sqrt(var + eps) * scale + bias`.
/// `x` is `None` when the op runs in place on `out`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn batch_norm(
    x: Option<&[f32]>,
    shape: &Shape,
    scale: &[f32],
    bias: &[f32],
    mean: &[f32],
    var: &[f32],
    epsilon: f32,
    out: &mut [f32],
    act: Activation,
) {
    let n = shape.dim(0);
    let c = shape.dim(1);
    let inner = shape.product(2..shape.rank());
    for b in 0..n {
        for ch in 0..c {
            let k = scale[ch] / math::sqrt(var[ch] + epsilon);
            let s = bias[ch] - mean[ch] * k;
            let start = (b * c + ch) * inner;
            let dst = &mut out[start..start + inner];
            match x {
                Some(x) => {
                    for (d, v) in dst.iter_mut().zip(&x[start..start + inner]) {
                        *d = v * k + s;
                    }
                }
                None => dst.iter_mut().for_each(|d| *d = *d * k + s),
            }
        }
    }
    activate_fused(act, out);
}

/// Softmax along `axis`: the tensor is `[outer, len, inner]` around it.
#[inline(always)]
pub fn softmax(x: Option<&[f32]>, shape: &Shape, axis: usize, out: &mut [f32]) {
    if let Some(x) = x {
        if x.len() != out.len() {
            return;
        }
        out.copy_from_slice(x);
    }
    let len = shape.dim(axis);
    let inner = shape.product(axis + 1..shape.rank());
    let outer = shape.product(0..axis);
    let Some(size) = len.checked_mul(inner).filter(|&n| n > 0) else {
        return;
    };
    for block in out.chunks_exact_mut(size.max(1)).take(outer) {
        for i in 0..inner {
            // The `len` values of one softmax, `inner` apart (contiguous when inner == 1).
            let lane = || block.get(i..).unwrap_or(&[]).iter().step_by(inner);
            let max = lane().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let mut sum = 0.0;
            for v in block
                .get_mut(i..)
                .unwrap_or(&mut [])
                .iter_mut()
                .step_by(inner)
            {
                *v = math::exp(*v - max);
                sum += *v;
            }
            let inv = 1.0 / sum;
            for v in block
                .get_mut(i..)
                .unwrap_or(&mut [])
                .iter_mut()
                .step_by(inner)
            {
                *v *= inv;
            }
        }
    }
}

/// The `[outer, len, inner]` view of `shape` around `axis`.
#[inline(always)]
fn lanes(shape: &Shape, axis: usize) -> [usize; 3] {
    [
        shape.product(0..axis),
        shape.dim(axis),
        shape.product(axis + 1..shape.rank()),
    ]
}

/// `x − max − ln Σ e^(x − max)` along `axis` (in place when `x` is `None`).
pub fn log_softmax(x: Option<&[f32]>, shape: &Shape, axis: usize, out: &mut [f32]) {
    if let Some(x) = x {
        if x.len() != out.len() {
            return;
        }
        out.copy_from_slice(x);
    }
    let [outer, len, inner] = lanes(shape, axis);
    if len == 0 || inner == 0 {
        return;
    }
    for block in out.chunks_exact_mut((len * inner).max(1)).take(outer) {
        for i in 0..inner {
            let lane = || block.get(i..).unwrap_or(&[]).iter().step_by(inner);
            let max = lane().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let sum: f32 = lane().map(|&v| math::exp(v - max)).sum();
            let shift = max + math::ln(sum);
            for v in block
                .get_mut(i..)
                .unwrap_or(&mut [])
                .iter_mut()
                .step_by(inner)
            {
                *v -= shift;
            }
        }
    }
}

/// 1 at the first maximum along `axis`, 0 elsewhere.
pub fn hardmax(x: &[f32], shape: &Shape, axis: usize, out: &mut [f32]) {
    let [outer, len, inner] = lanes(shape, axis);
    out.fill(0.0);
    if len == 0 || inner == 0 {
        return;
    }
    for (block, xs) in out
        .chunks_exact_mut((len * inner).max(1))
        .zip(x.chunks_exact((len * inner).max(1)))
        .take(outer)
    {
        for i in 0..inner {
            let first = (0..len).fold(0, |best, j| {
                if xs[i + j * inner] > xs[i + best * inner] {
                    j
                } else {
                    best
                }
            });
            block[i + first * inner] = 1.0;
        }
    }
}
