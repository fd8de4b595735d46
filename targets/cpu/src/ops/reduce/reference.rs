//! Reductions (mean, sum, max, min, product, L1, L2, log-sum, sum of squares) over any set of
//! axes.

use crate::base::index::for_each_index;
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
    let kept_shape = Shape::new(kept.get(..rank).unwrap_or(&[])).unwrap_or(Shape::SCALAR);
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
        // One element each (verified shapes); a short operand leaves the output as it is.
        if out.len() == x.len() {
            out.copy_from_slice(x);
        }
    } else {
        // On a host the op is chosen once, outside the loops (each arm inlines its own copy of
        // them); a microcontroller keeps one copy, choosing per value.
        let strides = &out_strides;
        if !cfg!(feature = "std") {
            let combine = |acc: f32, v: f32| match op {
                ReduceOp::Max => max(acc, v),
                ReduceOp::Min => min(acc, v),
                ReduceOp::Prod => product(acc, v),
                ReduceOp::L1 => abs_sum(acc, v),
                ReduceOp::L2 | ReduceOp::SumSquare => square_sum(acc, v),
                ReduceOp::Mean | ReduceOp::Sum | ReduceOp::LogSum => sum(acc, v),
            };
            fold(x, shape, axes, strides, out, combine);
        } else {
            match op {
                ReduceOp::Max => fold(x, shape, axes, strides, out, max),
                ReduceOp::Min => fold(x, shape, axes, strides, out, min),
                ReduceOp::Prod => fold(x, shape, axes, strides, out, product),
                ReduceOp::L1 => fold(x, shape, axes, strides, out, abs_sum),
                ReduceOp::L2 | ReduceOp::SumSquare => {
                    fold(x, shape, axes, strides, out, square_sum)
                }
                ReduceOp::Mean | ReduceOp::Sum | ReduceOp::LogSum => {
                    fold(x, shape, axes, strides, out, sum)
                }
            }
        }
    }
    match op {
        ReduceOp::Mean => {
            let count: usize = (0..rank)
                .filter(|a| axes & (1 << a) != 0)
                .map(|a| shape.dim(a))
                .product();
            let inv = 1.0 / count as f32;
            out.iter_mut().for_each(|v| *v *= inv);
        }
        ReduceOp::L2 => out
            .iter_mut()
            .for_each(|v| *v = crate::base::math::sqrt(*v)),
        ReduceOp::LogSum => out.iter_mut().for_each(|v| *v = crate::base::math::ln(*v)),
        _ => {}
    }
}

/// The larger of `acc` and `v`, NaN winning (as numpy).
#[inline(always)]
fn max(acc: f32, v: f32) -> f32 {
    if v > acc || v.is_nan() {
        v
    } else {
        acc
    }
}

/// The smaller of `acc` and `v`, NaN winning (as numpy).
#[inline(always)]
fn min(acc: f32, v: f32) -> f32 {
    if v < acc || v.is_nan() {
        v
    } else {
        acc
    }
}

/// `acc · v` (ReduceProd).
#[inline(always)]
fn product(acc: f32, v: f32) -> f32 {
    acc * v
}

/// `acc + |v|` (ReduceL1).
#[inline(always)]
fn abs_sum(acc: f32, v: f32) -> f32 {
    acc + v.abs()
}

/// `acc + v²` (ReduceL2, ReduceSumSquare).
#[inline(always)]
fn square_sum(acc: f32, v: f32) -> f32 {
    acc + v * v
}

/// `acc + v` (ReduceSum, ReduceMean, ReduceLogSum).
#[inline(always)]
fn sum(acc: f32, v: f32) -> f32 {
    acc + v
}

/// Folds `x` (of `shape`) into `out` by `combine`, over the axes in the bit mask `axes`
/// (`out_strides`: the output's strides over the input's axes, 0 on reduced ones), each output
/// from its initial value in input order. Where the reduced axes are the last ones, on a host,
/// each output folds one contiguous row; otherwise rows of the innermost axis, folded into one
/// output when that axis is reduced, combined elementwise with an output row otherwise.
#[inline(always)]
fn fold(
    x: &[f32],
    shape: &Shape,
    axes: u32,
    out_strides: &[usize; MAX_RANK],
    out: &mut [f32],
    combine: impl Fn(f32, f32) -> f32 + Copy,
) {
    let rank = shape.rank();
    let dims = shape.dims();
    let lowest = axes.trailing_zeros() as usize;
    // (A host's path: a microcontroller keeps the one loop below, for its flash.)
    let suffix = cfg!(feature = "std")
        && lowest < rank
        && axes == (u32::MAX >> (32 - rank)) & (u32::MAX << lowest);
    if suffix {
        let len: usize = dims.get(lowest..).unwrap_or(&[]).iter().product();
        match len {
            0 => {}
            // A complex value's two parts (a power spectrum's Mul then ReduceSum).
            2 => {
                for (o, &[a, b]) in out.iter_mut().zip(x.as_chunks::<2>().0) {
                    *o = combine(combine(*o, a), b);
                }
            }
            _ => {
                for (o, row) in out.iter_mut().zip(x.chunks_exact(len)) {
                    *o = row.iter().fold(*o, |acc, &v| combine(acc, v));
                }
            }
        }
        return;
    }
    let last = rank - 1;
    let n = shape.dim(last);
    let in_strides = shape.strides();
    let last_reduced = axes & (1 << last) != 0;
    let outer = dims.get(..last).unwrap_or(&[]);
    // Offsets within the verified shapes; a short operand leaves its row as it is.
    for_each_index(outer, [&in_strides, out_strides], |[i, o]| {
        let Some(row) = x.get(i..i + n) else {
            return;
        };
        if last_reduced {
            if let Some(slot) = out.get_mut(o) {
                *slot = row.iter().fold(*slot, |acc, &v| combine(acc, v));
            }
        } else if let Some(dst) = out.get_mut(o..o + n) {
            for (d, &v) in dst.iter_mut().zip(row) {
                *d = combine(*d, v);
            }
        }
    });
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

/// The `k` largest (`largest`) or smallest values along the middle axis of `[outer, len,
/// inner]` (k = `values.len() / (outer · inner)`), in order, ties to the lower index (as ONNX
/// TopK), with their indices. Selection by repeated scans: no scratch, `O(len · k)` per lane.
pub fn top_k<T: PartialOrd + Copy>(
    x: &[T],
    [outer, len, inner]: [usize; 3],
    largest: bool,
    values: &mut [T],
    indices: &mut [i64],
) {
    let k = values.len() / (outer * inner).max(1);
    // Whether (a, i) ranks before (b, j): the better value, then the lower index.
    let before = |a: T, i: usize, b: T, j: usize| {
        let better = if largest { a > b } else { a < b };
        better || (a == b && i < j)
    };
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| x.get((o * len + j) * inner + i).copied();
            let mut previous: Option<(T, usize)> = None;
            for r in 0..k {
                let mut best: Option<(T, usize)> = None;
                for j in 0..len {
                    let Some(v) = at(j) else { continue };
                    let after_previous = previous.is_none_or(|(pv, pj)| before(pv, pj, v, j));
                    let beats_best = best.is_none_or(|(bv, bj)| before(v, j, bv, bj));
                    if after_previous && beats_best {
                        best = Some((v, j));
                    }
                }
                let Some((v, j)) = best else { break };
                let slot = (o * k + r) * inner + i;
                if let (Some(vs), Some(is)) = (values.get_mut(slot), indices.get_mut(slot)) {
                    *vs = v;
                    *is = j as i64;
                }
                previous = best;
            }
        }
    }
}

/// The `k` best of each lane of `[outer, len, inner]` in order (the better key, then the
/// lower index): `emit(slot, at, j)` for output `slot`, the element at `at` of the lane's
/// position `j`. The keys come from `key(at)`: one compiled ranking serves every element
/// type whose values order as their keys (TopK on integers ranks their 64-bit extension).
pub fn rank<K: PartialOrd + Copy>(
    [outer, len, inner]: [usize; 3],
    k: usize,
    largest: bool,
    key: impl Fn(usize) -> Option<K>,
    mut emit: impl FnMut(usize, usize, usize),
) {
    // Whether (a, i) ranks before (b, j): the better value, then the lower index.
    let before = |a: K, i: usize, b: K, j: usize| {
        let better = if largest { a > b } else { a < b };
        better || (a == b && i < j)
    };
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * len + j) * inner + i;
            let mut previous: Option<(K, usize)> = None;
            for r in 0..k {
                let mut best: Option<(K, usize)> = None;
                for j in 0..len {
                    let Some(v) = key(at(j)) else { continue };
                    let after_previous = previous.is_none_or(|(pv, pj)| before(pv, pj, v, j));
                    let beats_best = best.is_none_or(|(bv, bj)| before(v, j, bv, bj));
                    if after_previous && beats_best {
                        best = Some((v, j));
                    }
                }
                let Some((_, j)) = best else { break };
                emit((o * k + r) * inner + i, at(j), j);
                previous = best;
            }
        }
    }
}

/// Running sums along the middle axis of `[outer, len, inner]`: each output is the sum of the
/// elements up to it (from the end when `reverse`; itself left out when `exclusive`).
pub fn cumulative_sum<T: Copy>(
    x: &[T],
    [outer, len, inner]: [usize; 3],
    exclusive: bool,
    reverse: bool,
    zero: T,
    add: impl Fn(T, T) -> T,
    y: &mut [T],
) {
    for o in 0..outer {
        for i in 0..inner {
            let mut sum = zero;
            for step in 0..len {
                let j = if reverse { len - 1 - step } else { step };
                let at = (o * len + j) * inner + i;
                let v = x.get(at).copied().unwrap_or(zero);
                if !exclusive {
                    sum = add(sum, v);
                }
                if let Some(slot) = y.get_mut(at) {
                    *slot = sum;
                }
                if exclusive {
                    sum = add(sum, v);
                }
            }
        }
    }
}

#[cfg(test)]
mod reduction_tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// Every op over every set of axes of random shapes of rank 1 to 4 (the last ones reduced,
    /// or any others) equals the definition: each output the fold of its inputs in order, bit
    /// for bit, NaN included.
    #[test]
    fn reductions_over_any_axes_equal_the_definition() {
        let ops = [
            ReduceOp::Mean,
            ReduceOp::Sum,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::Prod,
            ReduceOp::L1,
            ReduceOp::L2,
            ReduceOp::LogSum,
            ReduceOp::SumSquare,
        ];
        let mut seed = 0x9e37_79b9u32;
        let mut next = move |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed % n
        };
        for case in 0..300 {
            let rank = 1 + case % 4;
            let dims: Vec<usize> = (0..rank).map(|_| 1 + next(4) as usize).collect();
            let shape = Shape::new(&dims).unwrap();
            let x: Vec<f32> = (0..shape.elements().unwrap())
                .map(|_| match next(40) {
                    0 => f32::NAN,
                    v => v as f32 / 8.0 - 2.0,
                })
                .collect();
            let axes = 1 + next((1 << rank) - 1);
            let op = ops[case as usize % ops.len()];
            let kept: Vec<usize> = (0..rank as usize)
                .map(|a| if axes & (1 << a) != 0 { 1 } else { dims[a] })
                .collect();
            let kept_strides = Shape::new(&kept).unwrap().strides();
            let mut want = vec![Vec::new(); kept.iter().product()];
            let strides = shape.strides();
            for (flat, &v) in x.iter().enumerate() {
                let o: usize = (0..rank as usize)
                    .filter(|a| axes & (1 << a) == 0)
                    .map(|a| (flat / strides[a]) % dims[a] * kept_strides[a])
                    .sum();
                want[o].push(v);
            }
            let mut got = vec![0.0; want.len()];
            reduce(op, &x, &shape, axes, &mut got);
            for (o, values) in want.iter().enumerate() {
                let mut acc = match op {
                    ReduceOp::Max => f32::NEG_INFINITY,
                    ReduceOp::Min => f32::INFINITY,
                    ReduceOp::Prod => 1.0,
                    _ => 0.0,
                };
                for &v in values {
                    acc = match op {
                        ReduceOp::Max if v > acc || v.is_nan() => v,
                        ReduceOp::Min if v < acc || v.is_nan() => v,
                        ReduceOp::Max | ReduceOp::Min => acc,
                        ReduceOp::Prod => acc * v,
                        ReduceOp::L1 => acc + v.abs(),
                        ReduceOp::L2 | ReduceOp::SumSquare => acc + v * v,
                        _ => acc + v,
                    };
                }
                let expected = match op {
                    ReduceOp::Mean => acc * (1.0 / values.len() as f32),
                    ReduceOp::L2 => crate::base::math::sqrt(acc),
                    ReduceOp::LogSum => crate::base::math::ln(acc),
                    _ => acc,
                };
                let same = expected.to_bits() == got[o].to_bits()
                    || (expected.is_nan() && got[o].is_nan());
                assert!(
                    same,
                    "{op:?} dims {dims:?} axes {axes:#b} output {o}: {} against {expected}",
                    got[o]
                );
            }
        }
    }
}

#[cfg(test)]
mod selection_tests {
    use super::*;

    #[test]
    fn top_k_orders_values_and_breaks_ties_by_index() {
        let x = [3.0f32, 1.0, 3.0, 2.0];
        let (mut v, mut i) = ([0.0f32; 3], [0i64; 3]);
        top_k(&x, [1, 4, 1], true, &mut v, &mut i);
        assert_eq!((v, i), ([3.0, 3.0, 2.0], [0, 2, 3]));
        top_k(&x, [1, 4, 1], false, &mut v, &mut i);
        assert_eq!((v, i), ([1.0, 2.0, 3.0], [1, 3, 0]));
        // Two lanes along the outer axis, inner stride 2.
        let x = [5u64, 1, 7, 9];
        let (mut v, mut i) = ([0u64; 2], [0i64; 2]);
        top_k(&x, [1, 2, 2], true, &mut v, &mut i);
        assert_eq!((v, i), ([7, 9], [1, 1]));
    }

    /// Signed integers ranked as unsigned ones with the sign bit flipped (as TopK ranks every
    /// integer type) come out in the order, and with the ties, of ranking them as signed.
    #[test]
    fn flipped_signed_keys_rank_as_signed_ones() {
        extern crate std;
        use std::vec::Vec;
        let values = [-5i64, 3, -1, 7, 0, i64::MIN, i64::MAX, 3, -5, 1];
        for largest in [true, false] {
            let mut signed = Vec::new();
            rank(
                [1, 10, 1],
                10,
                largest,
                |at| values.get(at).copied(),
                |_, at, _| signed.push(at),
            );
            let mut flipped = Vec::new();
            let key = |at: usize| values.get(at).map(|&v| (v as u64) ^ (1 << 63));
            rank([1, 10, 1], 10, largest, key, |_, at, _| flipped.push(at));
            assert_eq!(signed, flipped, "largest: {largest}");
            assert_eq!(signed.len(), 10);
        }
    }

    #[test]
    fn cumulative_sums_run_either_way() {
        let x = [1, 2, 3, 4];
        let mut y = [0i32; 4];
        cumulative_sum(&x, [1, 4, 1], false, false, 0, i32::wrapping_add, &mut y);
        assert_eq!(y, [1, 3, 6, 10]);
        cumulative_sum(&x, [1, 4, 1], true, true, 0, i32::wrapping_add, &mut y);
        assert_eq!(y, [9, 7, 4, 0]);
    }
}

/// The determinant of each `n × n` matrix of `x` (`y.len()` of them), by LU decomposition with
/// partial pivoting in f64 in `scratch` (at least `n·n` f64).
pub fn determinant(x: &[f32], n: usize, scratch: &mut [f64], y: &mut [f32]) {
    let Some(a) = scratch.get_mut(..n * n) else {
        return;
    };
    for (m, out) in y.iter_mut().enumerate() {
        let Some(src) = x.get(m * n * n..(m + 1) * n * n) else {
            return;
        };
        for (d, &s) in a.iter_mut().zip(src) {
            *d = f64::from(s);
        }
        let mut det = 1.0f64;
        // `a` holds n·n values, so every access below is in bounds; each goes through `get`
        // all the same (no panic path), reading zero where one were not.
        let at = |a: &[f64], i: usize| a.get(i).copied().unwrap_or(0.0);
        for col in 0..n {
            let pivot = (col..n)
                .max_by(|&i, &j| {
                    at(a, i * n + col)
                        .abs()
                        .total_cmp(&at(a, j * n + col).abs())
                })
                .unwrap_or(col);
            if at(a, pivot * n + col) == 0.0 {
                det = 0.0;
                break;
            }
            if pivot != col {
                // Rows `col` and `pivot` (below it) trade places.
                if let Some((upper, lower)) = a.split_at_mut_checked(pivot * n) {
                    if let (Some(top), Some(bottom)) =
                        (upper.get_mut(col * n..col * n + n), lower.get_mut(..n))
                    {
                        for (t, b) in top.iter_mut().zip(bottom) {
                            core::mem::swap(t, b);
                        }
                    }
                }
                det = -det;
            }
            let p = at(a, col * n + col);
            det *= p;
            for row in col + 1..n {
                // Row `row` minus f × row `col`, from column `col` on.
                let Some((upper, lower)) = a.split_at_mut_checked(row * n) else {
                    break;
                };
                let (Some(pivot_row), Some(target)) =
                    (upper.get(col * n + col..col * n + n), lower.get_mut(col..n))
                else {
                    break;
                };
                let f = target.first().copied().unwrap_or(0.0) / p;
                for (t, &v) in target.iter_mut().zip(pivot_row) {
                    *t -= f * v;
                }
            }
        }
        *out = det as f32;
    }
}

#[cfg(test)]
mod determinant_tests {
    use super::*;

    #[test]
    fn determinants_need_pivoting() {
        // [[0, 1], [1, 0]] has determinant -1 and a zero first pivot; [[2, 0], [0, 3]] has 6.
        let x = [0.0, 1.0, 1.0, 0.0, 2.0, 0.0, 0.0, 3.0];
        let (mut s, mut y) = ([0.0f64; 4], [0.0f32; 2]);
        determinant(&x, 2, &mut s, &mut y);
        assert_eq!(y, [-1.0, 6.0]);
    }
}
