//! Data-movement kernels, generic over the element type (they only copy elements).

use super::index::for_each_index;
use crate::CpuError;
use ferrite_hal::op::PadMode;
use ferrite_hal::{Shape, MAX_RANK};

/// Output axis `i` is input axis `perm[i]`.
#[inline(always)]
pub fn transpose<T: Copy>(
    x: &[T],
    in_shape: &Shape,
    perm: &[usize; MAX_RANK],
    out: &mut [T],
    out_shape: &Shape,
) {
    // No indexing that can panic: the shapes are verified, but a kernel stays total.
    let rank = in_shape.rank();
    let dims = out_shape.dims_checked();
    let (Some((&inner, outer)), false) = (dims.split_last(), out.is_empty()) else {
        for (d, s) in out.iter_mut().zip(x) {
            *d = *s;
        }
        return;
    };
    let in_strides = in_shape.strides_checked();
    let mut src_strides = [0usize; MAX_RANK];
    for (slot, &p) in src_strides.iter_mut().zip(perm).take(rank) {
        *slot = in_strides.get(p).copied().unwrap_or(0);
    }
    let inner_stride = src_strides.get(outer.len()).copied().unwrap_or(0);
    let out_strides = out_shape.strides_checked();
    for_each_index(outer, [&out_strides, &src_strides], |[o, i]| {
        let (Some(dst), Some(src)) = (out.get_mut(o..o.saturating_add(inner)), x.get(i..)) else {
            return;
        };
        if let (1, Some(src)) = (inner_stride, src.get(..dst.len())) {
            dst.copy_from_slice(src);
        } else {
            for (d, s) in dst.iter_mut().zip(src.iter().step_by(inner_stride.max(1))) {
                *d = *s;
            }
        }
    });
}

/// Where a slab of `len` entries at `offset` along `axis` sits in a tensor of shape `whole`:
/// `outer` runs of `part_row` elements, the first at `start`, each `whole_row` after the last.
struct Slab {
    outer: usize,
    whole_row: usize,
    part_row: usize,
    start: usize,
}

impl Slab {
    fn new(whole: &Shape, axis: usize, len: usize, offset: usize) -> Slab {
        let inner = whole.product(axis + 1..whole.rank());
        Slab {
            outer: whole.product(0..axis),
            whole_row: whole.dim(axis) * inner,
            part_row: len * inner,
            start: offset * inner,
        }
    }

    /// The whole tensor's and the part's ranges of run `o`.
    fn run(&self, o: usize) -> (core::ops::Range<usize>, core::ops::Range<usize>) {
        let whole = o * self.whole_row + self.start;
        (
            whole..whole + self.part_row,
            o * self.part_row..(o + 1) * self.part_row,
        )
    }
}

/// Copies input `part` into its place (`offset` along `axis`) in the concatenation `out`.
#[inline(always)]
pub fn concat_into<T: Copy>(
    part: &[T],
    out: &mut [T],
    out_shape: &Shape,
    part_axis_len: usize,
    axis: usize,
    offset: usize,
) {
    let slab = Slab::new(out_shape, axis, part_axis_len, offset);
    for o in 0..slab.outer {
        let (w, p) = slab.run(o);
        // Sized by the verifier; a short operand copies nothing.
        if let (Some(dst), Some(src)) = (out.get_mut(w), part.get(p)) {
            dst.copy_from_slice(src);
        }
    }
}

/// Copies the part of `x` at `offset` along `axis` into the split output `out`.
#[inline(always)]
pub fn split_from<T: Copy>(
    x: &[T],
    x_shape: &Shape,
    out: &mut [T],
    part_axis_len: usize,
    axis: usize,
    offset: usize,
) {
    let slab = Slab::new(x_shape, axis, part_axis_len, offset);
    for o in 0..slab.outer {
        let (w, p) = slab.run(o);
        if let (Some(dst), Some(src)) = (out.get_mut(p), x.get(w)) {
            dst.copy_from_slice(src);
        }
    }
}

/// Strided slice: output index `i` on each axis reads `starts + i * steps`.
#[inline(always)]
pub fn slice<T: Copy>(
    x: &[T],
    in_shape: &Shape,
    starts: &[usize; MAX_RANK],
    steps: &[isize; MAX_RANK],
    out: &mut [T],
    out_shape: &Shape,
) {
    let rank = in_shape.rank();
    if out.is_empty() {
        return;
    }
    if rank == 0 {
        out.copy_from_slice(x);
        return;
    }
    let in_strides = in_shape.strides_checked();
    let base: usize = (0..rank).map(|a| starts[a] * in_strides[a]).sum();
    // Offsets move by step × stride per axis; negative steps walk backwards from `base`.
    let mut pos = [0usize; MAX_RANK];
    let mut neg = [0usize; MAX_RANK];
    for a in 0..rank {
        let s = steps[a].unsigned_abs() * in_strides[a];
        if steps[a] > 0 {
            pos[a] = s;
        } else {
            neg[a] = s;
        }
    }
    let inner = out_shape.dims()[rank - 1];
    let out_strides = out_shape.strides_checked();
    for_each_index(
        &out_shape.dims()[..rank - 1],
        [&out_strides, &pos, &neg],
        |[o, p, n]| {
            let start = base + p - n;
            let dst = &mut out[o..o + inner];
            let (step_fwd, step_back) = (pos[rank - 1], neg[rank - 1]);
            if step_back == 0 {
                // Forward: a strided (or, for step 1, contiguous) run from `start`.
                for (d, v) in dst
                    .iter_mut()
                    .zip(x[start..].iter().step_by(step_fwd.max(1)))
                {
                    *d = *v;
                }
            } else {
                // Backward: the same run read from its far end.
                let first = start - (inner - 1) * step_back;
                let run = x[first..=start].iter().step_by(step_back);
                for (d, v) in dst.iter_mut().rev().zip(run) {
                    *d = *v;
                }
            }
        },
    );
}

/// Pads `x` by `begins` (and implicitly the ends) per axis.
#[inline(always)]
pub fn pad<T: Copy>(
    x: &[T],
    in_shape: &Shape,
    mode: PadMode,
    begins: &[usize; MAX_RANK],
    value: T,
    out: &mut [T],
    out_shape: &Shape,
) {
    let rank = in_shape.rank();
    if rank == 0 {
        out.copy_from_slice(x);
        return;
    }
    let in_strides = in_shape.strides_checked();
    let inner_out = out_shape.dims()[rank - 1];
    let inner_in = in_shape.dims()[rank - 1];
    let rows = out_shape.product(0..rank - 1);
    let mut row_index = [0usize; MAX_RANK];
    for r in 0..rows {
        let dst = &mut out[r * inner_out..(r + 1) * inner_out];
        let mut src_row = Some(0usize);
        for a in 0..rank - 1 {
            let i = row_index[a] as isize - begins[a] as isize;
            src_row = match (src_row, map_index(i, in_shape.dims()[a], mode)) {
                (Some(base), Some(j)) => Some(base + j * in_strides[a]),
                _ => None,
            };
        }
        match src_row {
            None => dst.fill(value),
            Some(base) => {
                // The middle of the row is a straight copy; only the padding maps indices.
                let src = &x[base..base + inner_in];
                let b = begins[rank - 1];
                dst[b..b + inner_in].copy_from_slice(src);
                let (left, rest) = dst.split_at_mut(b);
                let right = &mut rest[inner_in..];
                for (ox, d) in left.iter_mut().enumerate() {
                    *d = map_index(ox as isize - b as isize, inner_in, mode)
                        .map_or(value, |j| src[j]);
                }
                for (k, d) in right.iter_mut().enumerate() {
                    let i = (inner_in + k) as isize;
                    *d = map_index(i, inner_in, mode).map_or(value, |j| src[j]);
                }
            }
        }
        let mut a = rank - 1;
        while a > 0 {
            a -= 1;
            row_index[a] += 1;
            if row_index[a] < out_shape.dims()[a] {
                break;
            }
            row_index[a] = 0;
        }
    }
}

/// Maps a padded coordinate to an input coordinate, or `None` for the constant fill.
#[inline]
fn map_index(i: isize, len: usize, mode: PadMode) -> Option<usize> {
    let n = len as isize;
    if (0..n).contains(&i) {
        return Some(i as usize);
    }
    match mode {
        PadMode::Constant => None,
        PadMode::Edge => Some(if i < 0 { 0 } else { len - 1 }),
        PadMode::Reflect => {
            if n == 1 {
                return Some(0);
            }
            let period = 2 * (n - 1);
            let mut r = i.rem_euclid(period);
            if r >= n {
                r = period - r;
            }
            Some(r as usize)
        }
    }
}

/// Gathers along `axis`: `out[outer, q, inner] = x[outer, idx[q], inner]`; negative indices
/// count from the end; any other out-of-range index is an error.
#[inline(always)]
pub fn gather<T: Copy>(
    x: &[T],
    x_shape: &Shape,
    axis: usize,
    indices: impl Iterator<Item = i64> + Clone,
    out: &mut [T],
) -> Result<(), CpuError> {
    let outer = x_shape.product(0..axis);
    let len = x_shape.dim(axis);
    let inner = x_shape.product(axis + 1..x_shape.rank());
    let count = indices.clone().count();
    for o in 0..outer {
        for (q, raw) in indices.clone().enumerate() {
            let i = if raw < 0 { raw + len as i64 } else { raw };
            if i < 0 || i >= len as i64 {
                return Err(CpuError::IndexOutOfRange { index: raw, len });
            }
            // Sized by the verifier; a short operand copies nothing.
            let src = x
                .get((o * len + i as usize) * inner..)
                .and_then(|s| s.get(..inner));
            let dst = out
                .get_mut((o * count + q) * inner..)
                .and_then(|d| d.get_mut(..inner));
            if let (Some(dst), Some(src)) = (dst, src) {
                dst.copy_from_slice(src);
            }
        }
    }
    Ok(())
}

/// The upper (`j − i ≥ k`) or lower (`j − i ≤ k`) triangle of each `rows × cols` matrix of `x`,
/// zeros elsewhere.
pub fn trilu<T: bytemuck::Pod>(
    x: &[T],
    rows: usize,
    cols: usize,
    upper: bool,
    k: i64,
    out: &mut [T],
) {
    let matrix = (rows * cols).max(1);
    for (src, dst) in x.chunks_exact(matrix).zip(out.chunks_exact_mut(matrix)) {
        for (n, (d, s)) in dst.iter_mut().zip(src).enumerate() {
            let (i, j) = ((n / cols.max(1)) as i64, (n % cols.max(1)) as i64);
            let keep = if upper { j - i >= k } else { j - i <= k };
            *d = if keep { *s } else { T::zeroed() };
        }
    }
}

/// `out` = `x` broadcast (numpy rules) to `out_shape` (Expand).
pub fn expand<T: Copy>(x: &[T], x_shape: &Shape, out: &mut [T], out_shape: &Shape) {
    let strides = [
        out_shape.strides(),
        ferrite_hal::geometry::broadcast_strides(x_shape, out_shape),
    ];
    for_each_index(out_shape.dims(), [&strides[0], &strides[1]], |[o, i]| {
        if let (Some(d), Some(&v)) = (out.get_mut(o), x.get(i)) {
            *d = v;
        }
    });
}
