//! Reductions (mean, sum, max, min, product, L1, L2, log-sum, sum of squares) over any set of
//! axes.

use super::index::for_each_index;
use ferrite_hal::op::ReduceOp;
use ferrite_hal::{Shape, MAX_RANK};

/// Reduces the axes in the bit mask `axes` of `x` into `out` (whose element order is the input's
/// with reduced axes removed).
#[inline(always)]
pub fn reduce(op: ReduceOp, x: &[f32], shape: &Shape, axes: u32, out: &mut [f32]) {
    let rank = shape.rank();
    // Output strides over the input's axes: 0 on reduced axes.
    let mut kept = [1usize; MAX_RANK];
    for (a, (slot, &d)) in kept.iter_mut().zip(shape.dims()).enumerate() {
        *slot = if axes & (1 << a) != 0 { 1 } else { d };
    }
    let kept_shape = Shape::new(&kept[..rank]).unwrap_or(Shape::SCALAR);
    let mut out_strides = kept_shape.strides();
    for (a, s) in out_strides.iter_mut().enumerate().take(rank) {
        if axes & (1 << a) != 0 {
            *s = 0;
        }
    }
    let init = match op {
        ReduceOp::Max => f32::NEG_INFINITY,
        ReduceOp::Min => f32::INFINITY,
        ReduceOp::Prod => 1.0,
        _ => 0.0,
    };
    out.fill(init);
    if rank == 0 {
        out.copy_from_slice(x);
    } else {
        // Rows of the innermost axis: folded into one output when that axis is reduced,
        // combined elementwise with an output row otherwise.
        let last = rank - 1;
        let n = shape.dims()[last];
        let in_strides = shape.strides();
        let last_reduced = axes & (1 << last) != 0;
        let combine = |acc: f32, v: f32| match op {
            ReduceOp::Max => {
                if v > acc || v.is_nan() {
                    v
                } else {
                    acc
                }
            }
            ReduceOp::Min => {
                if v < acc || v.is_nan() {
                    v
                } else {
                    acc
                }
            }
            ReduceOp::Prod => acc * v,
            ReduceOp::L1 => acc + v.abs(),
            ReduceOp::L2 | ReduceOp::SumSquare => acc + v * v,
            ReduceOp::Mean | ReduceOp::Sum | ReduceOp::LogSum => acc + v,
        };
        for_each_index(
            &shape.dims()[..last],
            [&in_strides, &out_strides],
            |[i, o]| {
                let row = &x[i..i + n];
                if last_reduced {
                    out[o] = row.iter().fold(out[o], |acc, &v| combine(acc, v));
                } else {
                    for (d, &v) in out[o..o + n].iter_mut().zip(row) {
                        *d = combine(*d, v);
                    }
                }
            },
        );
    }
    match op {
        ReduceOp::Mean => {
            let count: usize = (0..rank)
                .filter(|a| axes & (1 << a) != 0)
                .map(|a| shape.dims()[a])
                .product();
            let inv = 1.0 / count as f32;
            out.iter_mut().for_each(|v| *v *= inv);
        }
        ReduceOp::L2 => out.iter_mut().for_each(|v| *v = crate::math::sqrt(*v)),
        ReduceOp::LogSum => out.iter_mut().for_each(|v| *v = crate::math::ln(*v)),
        _ => {}
    }
}

/// The index of the largest (`max`) or smallest value along the middle axis of
/// `[outer, len, inner]`, the first of equal ones or the last (`last`); NaN counts as the
/// extreme (as numpy). `out` has `outer × inner` elements.
pub fn arg_extreme(
    x: &[f32],
    [outer, len, inner]: [usize; 3],
    max: bool,
    last: bool,
    out: &mut [i64],
) {
    if len == 0 {
        return;
    }
    let better = |v: f32, best: f32| {
        if best.is_nan() {
            false
        } else if v.is_nan() {
            true
        } else if max {
            v > best || (last && v == best)
        } else {
            v < best || (last && v == best)
        }
    };
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| x.get((o * len + j) * inner + i).copied().unwrap_or(0.0);
            let mut best = 0;
            for j in 1..len {
                if better(at(j), at(best)) {
                    best = j;
                }
            }
            if let Some(slot) = out.get_mut(o * inner + i) {
                *slot = best as i64;
            }
        }
    }
}
