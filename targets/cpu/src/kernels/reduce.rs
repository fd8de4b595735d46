//! Reductions (mean, sum, max) over any set of axes.

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
        ReduceOp::Mean | ReduceOp::Sum => 0.0,
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
            ReduceOp::Mean | ReduceOp::Sum => acc + v,
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
    if op == ReduceOp::Mean {
        let count: usize = (0..rank)
            .filter(|a| axes & (1 << a) != 0)
            .map(|a| shape.dims()[a])
            .product();
        let inv = 1.0 / count as f32;
        out.iter_mut().for_each(|v| *v *= inv);
    }
}
