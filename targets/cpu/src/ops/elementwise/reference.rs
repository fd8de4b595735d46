//! Elementwise kernels: activations, broadcasting binary arithmetic, batch normalisation.

use crate::base::index::for_each_index;
use crate::base::math;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
use crate::isa::activation_lanes;
#[cfg(feature = "std")]
use crate::micro::vector_math;
use ferrite_hal::geometry::broadcast_strides;
use ferrite_hal::geometry::lanes;
use ferrite_hal::op::BinaryOp;
use ferrite_hal::{selects_activation, selects_binary, Activation, Selection, Shape};

/// Applies a fused activation (one of [`Activation::is_fusable`]'s, as the verifier requires)
/// to every element of `xs` in place: the dispatch calls it once, after the kernel of any op
/// that carries one. Only the activations selected by `OPS` are compiled in (the core refuses
/// a model with any other at load).
#[inline(always)]
pub fn activate_fused<const OPS: Selection>(act: Activation, xs: &mut [f32]) {
    match act {
        a @ Activation::Relu if selected::<OPS>(&a) => {
            xs.iter_mut().for_each(|x| *x = math::max(*x, 0.0))
        }
        a @ Activation::LeakyRelu { alpha } if selected::<OPS>(&a) => xs
            .iter_mut()
            .for_each(|x| *x = if *x >= 0.0 { *x } else { *x * alpha }),
        // Not `clamp`: ONNX allows min > max (the result is then max), where clamp panics.
        #[allow(clippy::manual_clamp)]
        a @ Activation::Clip { min, max } if selected::<OPS>(&a) => xs
            .iter_mut()
            .for_each(|x| *x = math::min(math::max(*x, min), max)),
        // On the host, the vectorised forms (a few ulp, as libm); on a microcontroller, libm.
        #[cfg(all(feature = "std", not(feature = "fast-math")))]
        a @ Activation::Sigmoid if selected::<OPS>(&a) => vector_math::sigmoid_all_widest(xs),
        #[cfg(all(feature = "std", not(feature = "fast-math")))]
        a @ Activation::Tanh if selected::<OPS>(&a) => vector_math::tanh_all_widest(xs),
        a @ Activation::Sigmoid if selected::<OPS>(&a) => {
            xs.iter_mut().for_each(|x| *x = sigmoid(*x))
        }
        a @ Activation::Tanh if selected::<OPS>(&a) => {
            xs.iter_mut().for_each(|x| *x = math::tanh(*x))
        }
        a @ Activation::HardSigmoid { alpha, beta } if selected::<OPS>(&a) => xs
            .iter_mut()
            .for_each(|x| *x = (alpha * *x + beta).clamp(0.0, 1.0)),
        a @ Activation::HardSwish if selected::<OPS>(&a) => xs
            .iter_mut()
            .for_each(|x| *x *= (*x / 6.0 + 0.5).clamp(0.0, 1.0)),
        // Identity, and (never, after verification) an unfusable or unselected activation.
        _ => {}
    }
}

/// [`activate_fused`] built for AVX2, with Relu, LeakyRelu and Clip as explicit compares and
/// blends, bit for bit as [`activate_fused`]. Left to the compiler, a
/// read-modify-write that keeps some elements as they are becomes a masked store
/// (`vmaskmovps`), microcoded on AMD's cores: DS-CNN's fused Relus had been a quarter of its
/// time on Zen 4.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
pub unsafe fn activate_fused_avx2<const OPS: Selection>(act: Activation, xs: &mut [f32]) {
    // The blocks of eight here, the last few (and every other activation) as the portable code.
    let rest = match act {
        a @ Activation::Relu if selected::<OPS>(&a) => activation_lanes::relu(xs),
        a @ Activation::LeakyRelu { alpha } if selected::<OPS>(&a) => {
            activation_lanes::leaky_relu(xs, alpha)
        }
        a @ Activation::Clip { min, max } if selected::<OPS>(&a) => {
            activation_lanes::clip(xs, min, max)
        }
        _ => xs,
    };
    activate_fused::<OPS>(act, rest)
}

/// Applies `act` to every element of `xs` in place: any activation selected by `OPS`
/// (standalone `Unary` ops, recurrent gates). Out of line: one copy serves every call.
#[inline(never)]
pub fn activate<const OPS: Selection>(act: Activation, xs: &mut [f32]) {
    match act {
        Activation::None
        | Activation::Relu
        | Activation::LeakyRelu { .. }
        | Activation::Clip { .. }
        | Activation::Sigmoid
        | Activation::Tanh
        | Activation::HardSigmoid { .. }
        | Activation::HardSwish => activate_fused::<OPS>(act, xs),
        a @ Activation::Exp if selected::<OPS>(&a) => map(xs, math::exp),
        a @ Activation::Log if selected::<OPS>(&a) => map(xs, math::ln),
        a @ Activation::Sqrt if selected::<OPS>(&a) => map(xs, math::sqrt),
        a @ Activation::Reciprocal if selected::<OPS>(&a) => map(xs, |x| 1.0 / x),
        a @ Activation::Neg if selected::<OPS>(&a) => map(xs, |x| -x),
        a @ Activation::Abs if selected::<OPS>(&a) => map(xs, f32::abs),
        a @ Activation::Sign if selected::<OPS>(&a) => map(xs, sign),
        a @ Activation::Floor if selected::<OPS>(&a) => map(xs, math::floor),
        a @ Activation::Ceil if selected::<OPS>(&a) => map(xs, math::ceil),
        a @ Activation::Round if selected::<OPS>(&a) => map(xs, math::round_half_even),
        a @ Activation::Sin if selected::<OPS>(&a) => map(xs, math::sin),
        a @ Activation::Cos if selected::<OPS>(&a) => map(xs, math::cos),
        // On a host, the vectorised erf (within 2 ulp; libm's is a call per element).
        #[cfg(feature = "std")]
        a @ Activation::Erf if selected::<OPS>(&a) => vector_math::erf_all_widest(xs),
        #[cfg(feature = "std")]
        a @ Activation::Gelu { tanh: false } if selected::<OPS>(&a) => {
            vector_math::gelu_all_widest(xs)
        }
        #[cfg(not(feature = "std"))]
        a @ Activation::Erf if selected::<OPS>(&a) => map(xs, math::erf),
        #[cfg(not(feature = "std"))]
        a @ Activation::Gelu { tanh: false } if selected::<OPS>(&a) => map(xs, |x| {
            0.5 * x * (1.0 + math::erf(x * core::f32::consts::FRAC_1_SQRT_2))
        }),
        a @ Activation::Gelu { tanh: true } if selected::<OPS>(&a) => map(xs, |x| {
            // sqrt(2 / pi)
            const K: f32 = 0.797_884_6;
            0.5 * x * (1.0 + math::tanh(K * (x + 0.044_715 * x * x * x)))
        }),
        a @ Activation::Elu { alpha } if selected::<OPS>(&a) => {
            map(xs, |x| if x >= 0.0 { x } else { alpha * math::exp_m1(x) })
        }
        a @ Activation::Selu { alpha, gamma } if selected::<OPS>(&a) => map(xs, |x| {
            gamma * if x > 0.0 { x } else { alpha * math::exp_m1(x) }
        }),
        a @ Activation::Celu { alpha } if selected::<OPS>(&a) => map(xs, |x| {
            x.max(0.0) + (alpha * math::exp_m1(x / alpha)).min(0.0)
        }),
        a @ Activation::Softplus if selected::<OPS>(&a) => map(xs, softplus),
        a @ Activation::Softsign if selected::<OPS>(&a) => map(xs, |x| x / (1.0 + x.abs())),
        a @ Activation::Mish if selected::<OPS>(&a) => map(xs, |x| x * math::tanh(softplus(x))),
        a @ Activation::ThresholdedRelu { alpha } if selected::<OPS>(&a) => {
            map(xs, |x| if x > alpha { x } else { 0.0 })
        }
        // Not selected: the core refused the model at load.
        _ => {}
    }
}

/// Whether `OPS` selects `act` (a constant in each arm where `act`'s variant is known).
#[inline(always)]
const fn selected<const OPS: Selection>(act: &Activation) -> bool {
    selects_activation(OPS, act)
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

/// `out = a op b` with numpy broadcasting over `out_shape`.
#[inline(always)]
pub fn binary<const OPS: Selection>(
    op: BinaryOp,
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
    out_shape: &Shape,
) {
    match op {
        BinaryOp::Add if selects_binary(OPS, BinaryOp::Add) => {
            binary_with::<OPS>(a, b, out, out_shape, |x, y| x + y)
        }
        BinaryOp::Sub if selects_binary(OPS, BinaryOp::Sub) => {
            binary_with::<OPS>(a, b, out, out_shape, |x, y| x - y)
        }
        BinaryOp::Mul if selects_binary(OPS, BinaryOp::Mul) => {
            binary_with::<OPS>(a, b, out, out_shape, |x, y| x * y)
        }
        BinaryOp::Div if selects_binary(OPS, BinaryOp::Div) => {
            binary_with::<OPS>(a, b, out, out_shape, |x, y| x / y)
        }
        BinaryOp::Pow if selects_binary(OPS, BinaryOp::Pow) => {
            binary_with::<OPS>(a, b, out, out_shape, math::pow)
        }
        BinaryOp::Max if selects_binary(OPS, BinaryOp::Max) => {
            binary_with::<OPS>(a, b, out, out_shape, |x, y| {
                if x.is_nan() || x > y {
                    x
                } else {
                    y
                }
            })
        }
        BinaryOp::Min if selects_binary(OPS, BinaryOp::Min) => {
            binary_with::<OPS>(a, b, out, out_shape, |x, y| {
                if x.is_nan() || x < y {
                    x
                } else {
                    y
                }
            })
        }
        BinaryOp::PRelu if selects_binary(OPS, BinaryOp::PRelu) => {
            binary_with::<OPS>(a, b, out, out_shape, |x, s| if x < 0.0 { x * s } else { x })
        }
        BinaryOp::Fmod if selects_binary(OPS, BinaryOp::Fmod) => {
            binary_with::<OPS>(a, b, out, out_shape, math::fmod)
        }
        BinaryOp::Mod if selects_binary(OPS, BinaryOp::Mod) => {
            binary_with::<OPS>(a, b, out, out_shape, |x, y| {
                let r = math::fmod(x, y);
                if r != 0.0 && (r < 0.0) != (y < 0.0) {
                    r + y
                } else {
                    r
                }
            })
        }
        // The verifier refuses shifts on floats.
        BinaryOp::ShiftLeft | BinaryOp::ShiftRight => {}
        // Not selected: the core refused the model at load.
        _ => {}
    }
}

/// How many of the float binary ops `ops` selects.
const fn float_binary_ops(ops: Selection) -> usize {
    let all = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::PRelu,
        BinaryOp::Fmod,
        BinaryOp::Mod,
    ];
    let (mut n, mut i) = (0, 0);
    while i < all.len() {
        if selects_binary(ops, all[i]) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// [`broadcast_rows`] with the op `f`. On a microcontroller whose firmware selects more than
/// three float binary ops (the every-kernel one), one compiled broadcast serves them all,
/// calling `f` through a pointer: each op's own loops (nine row forms each) had taken 10 KB
/// of its flash. Elsewhere each op's loops are compiled with `f` inlined.
#[inline(always)]
fn binary_with<const OPS: Selection>(
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
    out_shape: &Shape,
    f: impl Fn(f32, f32) -> f32 + Copy,
) {
    if const { !cfg!(feature = "std") && float_binary_ops(OPS) > 3 } {
        broadcast_shared(a, b, out, out_shape, &f);
    } else {
        broadcast_rows(a, b, out, out_shape, f);
    }
}

/// [`broadcast_rows`] compiled once, the op called through a pointer.
#[inline(never)]
fn broadcast_shared(
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
    out_shape: &Shape,
    f: &dyn Fn(f32, f32) -> f32,
) {
    broadcast_rows(a, b, out, out_shape, f);
}

/// `out = f(a, b)` with numpy broadcasting over `out_shape`, a row (the last axis) at a time.
#[inline(always)]
fn broadcast_rows(
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
    out_shape: &Shape,
    f: impl Fn(f32, f32) -> f32 + Copy,
) {
    let rank = out_shape.rank();
    let out_strides = out_shape.strides();
    let strides_of = |o: &Operand<'_>| match o {
        Operand::Data(_, s) => broadcast_strides(s, out_shape),
        Operand::Output => out_strides,
    };
    let (sa, sb) = (strides_of(&a), strides_of(&b));
    // A row is the last axis and every axis before it along which both operands advance as the
    // output does (all of it for same-shaped operands: ResNet-8's residual Add had run 512 rows
    // of 32). A scalar is one row of one element.
    let same = |axis: usize| {
        sa.get(axis) == out_strides.get(axis) && sb.get(axis) == out_strides.get(axis)
    };
    let mut split = rank.saturating_sub(1);
    if rank > 0 && same(rank - 1) {
        while split > 0 && same(split - 1) {
            split -= 1;
        }
    }
    let (inner, outer_dims) = match out_shape.dims().split_at_checked(split) {
        Some((outer, row)) if rank > 0 => (row.iter().product(), outer),
        _ => (1, &[][..]),
    };
    #[inline(always)]
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
                // Offsets within the verified shapes; a short operand reads as empty or zero.
                if rank > 0 && strides.get(last) == Some(&1) {
                    Row::Contiguous(d.get(off..off + inner).unwrap_or(&[]))
                } else {
                    Row::Splat(d.get(off).copied().unwrap_or(0.0))
                }
            }
        }
    }
    for_each_index(outer_dims, [&out_strides, &sa, &sb], |[o, oa, ob]| {
        let ra = row_of(a, &sa, oa, rank, inner);
        let rb = row_of(b, &sb, ob, rank, inner);
        // Offsets within the verified shape; a short output is left as it is.
        if let Some(dst) = out.get_mut(o..o + inner) {
            apply_row(dst, ra, rb, f);
        }
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

/// [`binary`] out of line: what a build selected for a model calls, so that the broadcasting
/// loops' frame adds to its dispatch's only while a binary op runs (the every-kernel dispatch,
/// whose frame already holds larger kernels' locals, inlines [`binary`]).
#[inline(never)]
pub fn binary_out_of_line<const OPS: Selection>(
    op: BinaryOp,
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut [f32],
    out_shape: &Shape,
) {
    binary::<OPS>(op, a, b, out, out_shape)
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
) {
    let n = shape.dim(0);
    let c = shape.dim(1);
    let inner = shape.product(2..shape.rank());
    for b in 0..n {
        let per_channel = scale.iter().zip(bias).zip(mean.iter().zip(var));
        for (ch, ((&scale, &bias), (&mean, &var))) in per_channel.take(c).enumerate() {
            let k = scale / math::sqrt(var + epsilon);
            let s = bias - mean * k;
            let start = (b * c + ch) * inner;
            let Some(dst) = out.get_mut(start..start + inner) else {
                return;
            };
            match x {
                Some(x) => {
                    for (d, v) in dst
                        .iter_mut()
                        .zip(x.get(start..start + inner).unwrap_or(&[]))
                    {
                        *d = v * k + s;
                    }
                }
                None => dst.iter_mut().for_each(|d| *d = *d * k + s),
            }
        }
    }
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
    // On the host, contiguous softmaxes (the last axis: attention, classifiers) take the
    // vectorised exponential (within 2 ulp of libm's), over every row at once (a call a row
    // had cost more than the exponentials of attention's 16-value rows).
    #[cfg(all(feature = "std", not(feature = "fast-math")))]
    if inner == 1 {
        let Some(rows) = out.get_mut(..size * outer) else {
            return;
        };
        for row in rows.chunks_exact_mut(size) {
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| math::max(m, v));
            row.iter_mut().for_each(|v| *v -= max);
        }
        vector_math::exp_all_widest(rows);
        for row in rows.chunks_exact_mut(size) {
            let inv = 1.0 / row.iter().sum::<f32>();
            row.iter_mut().for_each(|v| *v *= inv);
        }
        return;
    }
    for block in out.chunks_exact_mut(size.max(1)).take(outer) {
        for i in 0..inner {
            // The `len` values of one softmax, `inner` apart (contiguous when inner == 1).
            let lane = || block.get(i..).unwrap_or(&[]).iter().step_by(inner);
            let max = lane().fold(f32::NEG_INFINITY, |m, &v| math::max(m, v));
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
            let max = lane().fold(f32::NEG_INFINITY, |m, &v| math::max(m, v));
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
            // The first largest along the axis (NaN never wins a comparison).
            let at = |j: usize| xs.get(i + j * inner).copied().unwrap_or(f32::NAN);
            let first = (0..len).fold(0, |best, j| if at(j) > at(best) { j } else { best });
            if let Some(one) = block.get_mut(i + first * inner) {
                *one = 1.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_hal::{with_activations, ALL_OPS};

    const XS: [f32; 7] = [-3.0, -1.0, -0.25, 0.0, 0.5, 2.0, 7.0];

    fn applied<const OPS: Selection>(act: Activation) -> [f32; 7] {
        let mut xs = XS;
        activate::<OPS>(act, &mut xs);
        xs
    }

    /// A build selecting one activation computes it exactly as the every-activation build,
    /// fused or standalone, and links no other (an unselected one leaves the data as it is;
    /// the core refuses such a model at load, so no step reaches it).
    #[test]
    fn a_selected_activation_computes_as_the_full_build() {
        macro_rules! check {
            ($($act:expr),*) => {$({
                const ONE: Selection = with_activations(0, &[$act]);
                assert_eq!(applied::<ONE>($act), applied::<ALL_OPS>($act), "{:?}", $act);
                assert_ne!(applied::<ALL_OPS>($act), XS, "{:?} changes the data", $act);
                let mut fused = XS;
                activate_fused::<ONE>($act, &mut fused);
                if $act.is_fusable() {
                    assert_eq!(fused, applied::<ALL_OPS>($act), "{:?} fused", $act);
                }
                const OTHER: Selection = with_activations(0, &[Activation::Softsign]);
                if $act.code() != Activation::Softsign.code() {
                    assert_eq!(applied::<OTHER>($act), XS, "{:?} is not linked", $act);
                }
            })*};
        }
        check!(
            Activation::Relu,
            Activation::LeakyRelu { alpha: 0.1 },
            Activation::Clip { min: 0.0, max: 6.0 },
            Activation::Sigmoid,
            Activation::Tanh,
            Activation::HardSwish,
            Activation::Exp,
            Activation::Gelu { tanh: true },
            Activation::Elu { alpha: 1.0 },
            Activation::Softsign
        );
    }

    /// The AVX2 activations equal the portable ones bit for bit, on every length (blocks of
    /// eight and the rest) and on the values that tell max, min and blends apart: signed zeros,
    /// NaN, infinities, equal bounds, bounds the wrong way round and NaN bounds.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[test]
    fn the_avx2_activations_equal_the_portable_ones_bit_for_bit() {
        use crate::isa::{level, Level};
        if level() < Level::Avx2 {
            return;
        }
        let values = [
            -0.0,
            0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -3.5,
            1e-40,
            -1e-40,
            2.0,
            6.0,
            7.25,
            -1.0,
        ];
        let acts = [
            Activation::Relu,
            Activation::LeakyRelu { alpha: 0.1 },
            Activation::LeakyRelu { alpha: -2.0 },
            Activation::Clip { min: 0.0, max: 6.0 },
            Activation::Clip {
                min: -0.0,
                max: 0.0,
            },
            Activation::Clip { min: 6.0, max: 0.0 },
            Activation::Clip {
                min: f32::NAN,
                max: 2.0,
            },
            Activation::Clip {
                min: -1.0,
                max: f32::NAN,
            },
            Activation::Clip {
                min: f32::NEG_INFINITY,
                max: f32::INFINITY,
            },
        ];
        for act in acts {
            for len in 0..=27 {
                let xs: Vec<f32> = (0..len)
                    .map(|i| values[(i * 5 + len) % values.len()])
                    .collect();
                let mut portable = xs.clone();
                activate_fused::<ALL_OPS>(act, &mut portable);
                let mut wide = xs.clone();
                // SAFETY: the CPU has AVX2 (checked above).
                #[allow(unsafe_code)]
                unsafe {
                    activate_fused_avx2::<ALL_OPS>(act, &mut wide)
                };
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&wide), bits(&portable), "{act:?} on {xs:?}");
            }
        }
    }
}
