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
    let in_strides = shape.strides();
    match op {
        ReduceOp::Max => for_each_index(shape.dims(), [&in_strides, &out_strides], |[i, o]| {
            let v = x[i];
            if v > out[o] || v.is_nan() {
                out[o] = v;
            }
        }),
        ReduceOp::Mean | ReduceOp::Sum => {
            for_each_index(shape.dims(), [&in_strides, &out_strides], |[i, o]| {
                out[o] += x[i];
            })
        }
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
