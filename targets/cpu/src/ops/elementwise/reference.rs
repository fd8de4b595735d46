//! Elementwise kernels: broadcasting binary arithmetic, batch normalisation, softmax (the
//! activations are `micro::activation`'s).

use crate::base::index::for_each_index;
use crate::base::math;
#[cfg(all(feature = "std", not(feature = "fast-math")))]
use crate::micro::vector_math;
use ferrite_hal::geometry::broadcast_strides;
use ferrite_hal::geometry::lanes;
use ferrite_hal::op::BinaryOp;
use ferrite_hal::{selects_binary, Selection, Shape};

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
