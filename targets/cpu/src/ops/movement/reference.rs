//! Data-movement kernels. They only copy elements, so they take bytes and the element size:
//! one compiled kernel serves every type (flash on a microcontroller), runs of elements are
//! single copies and strided elements are moved by a loop built for each size
//! (`copy_run`).

use crate::base::elements::{copy_element, elements, elements_mut};
use crate::base::index::for_each_row;
use crate::CpuError;
use ferrite_hal::op::PadMode;
use ferrite_hal::{Shape, MAX_RANK};

/// Fills `dst` (whole elements of `size` bytes) from `src`: element `k` from element
/// `k × step` of `src` (step 0: one element repeated), or, `reversed`, the last element of
/// `dst` from the first of those. Out of line: the one copy of the strided loops, one per
/// element size, that every kernel here shares; elements `src` lacks are left as they are.
#[inline(never)]
pub(crate) fn copy_run(dst: &mut [u8], src: &[u8], step: usize, size: usize, reversed: bool) {
    if step == 1 && !reversed {
        if let Some(src) = src.get(..dst.len()) {
            dst.copy_from_slice(src);
        }
        return;
    }
    match size {
        1 => strided::<1>(dst, src, step, reversed),
        2 => strided::<2>(dst, src, step, reversed),
        4 => strided::<4>(dst, src, step, reversed),
        8 => strided::<8>(dst, src, step, reversed),
        _ => {}
    }
}

/// [`copy_run`] for elements of `N` bytes.
#[inline(always)]
fn strided<const N: usize>(dst: &mut [u8], src: &[u8], step: usize, reversed: bool) {
    let element = |k: usize| -> Option<&[u8; N]> {
        src.get(k.checked_mul(step)?.checked_mul(N)?..)?
            .get(..N)?
            .try_into()
            .ok()
    };
    let mut put = |(k, d): (usize, &mut [u8])| {
        if let (Some(s), Ok(d)) = (element(k), <&mut [u8; N]>::try_from(d)) {
            *d = *s;
        }
    };
    if reversed {
        dst.chunks_exact_mut(N).rev().enumerate().for_each(&mut put);
    } else {
        dst.chunks_exact_mut(N).enumerate().for_each(&mut put);
    }
}

/// Output axis `i` is input axis `perm[i]`; elements of `size` bytes.
pub fn transpose(
    x: &[u8],
    size: usize,
    in_shape: &Shape,
    perm: &[usize; MAX_RANK],
    out: &mut [u8],
    out_shape: &Shape,
) {
    // No indexing that can panic: the shapes are verified, but a kernel stays total.
    let rank = in_shape.rank();
    #[cfg(feature = "std")]
    if let Some((sizes, element)) = batched_swap(in_shape, perm, size) {
        if swap_elements(x, sizes, element, out) {
            return;
        }
    }
    let dims = out_shape.dims_checked();
    let (Some((&inner, outer)), false) = (dims.split_last(), out.is_empty()) else {
        copy_run(out, x, 1, size, false);
        return;
    };
    let in_strides = in_shape.strides_checked();
    let mut src_strides = [0usize; MAX_RANK];
    for (slot, &p) in src_strides.iter_mut().zip(perm).take(rank) {
        *slot = in_strides.get(p).copied().unwrap_or(0);
    }
    let inner_stride = src_strides.get(outer.len()).copied().unwrap_or(0);
    let out_strides = out_shape.strides_checked();
    for_each_row(outer, [&out_strides, &src_strides], |[o, i]| {
        let (Some(dst), Some(src)) = (elements_mut(out, o, inner, size), x.get(i * size..)) else {
            return;
        };
        copy_run(dst, src, inner_stride, size, false);
    });
}

/// `[a, b, c]` where `perm` keeps the first axes and swaps the two runs of axes after them (as
/// NHWC to NCHW: `[n, h·w, c]` to `[n, c, h·w]`): the input viewed as `a` matrices of `b × c`
/// elements, the output as their transposes; with the size in bytes of those elements, which
/// take in the last axes where `perm` keeps them too (a transformer's heads, `[1, t, h, d]` to
/// `[1, h, t, d]`: `t × h` elements of `d` values, where each run of `d` had been a copy call).
/// `None` for any other permutation.
#[cfg(feature = "std")]
fn batched_swap(
    in_shape: &Shape,
    perm: &[usize; MAX_RANK],
    size: usize,
) -> Option<([usize; 3], usize)> {
    let full = in_shape.rank();
    let perm = perm.get(..full)?;
    // The last axes that stay in place (all but one at most: the rest must move).
    let kept = perm
        .iter()
        .enumerate()
        .rev()
        .take_while(|&(i, &p)| i == p)
        .count();
    let rank = full - kept.min(full);
    let element = size.checked_mul(in_shape.product(rank..full))?;
    let perm = perm.get(..rank)?;
    // Kept: axes 0..k; then the run j..rank; then the run k..j.
    let k = perm
        .iter()
        .enumerate()
        .take_while(|&(i, &p)| i == p)
        .count();
    let j = *perm.get(k)?;
    if j <= k || j >= rank {
        return None;
    }
    let second = perm.get(k..k + (rank - j))?;
    let first = perm.get(k + (rank - j)..)?;
    let runs = second.iter().enumerate().all(|(i, &p)| p == j + i)
        && first.iter().enumerate().all(|(i, &p)| p == k + i);
    runs.then(|| {
        let sizes = [
            in_shape.product(0..k),
            in_shape.product(k..j),
            in_shape.product(j..rank),
        ];
        (sizes, element)
    })
}

/// [`swap_blocks`] for elements of `element` bytes, false (nothing written) for a size without
/// a copy of its own. Out of line: nine copies of the tile loop (plain moves, which need no
/// wider instruction set) kept out of every SIMD build's step dispatch.
#[cfg(feature = "std")]
#[inline(never)]
fn swap_elements(x: &[u8], sizes: [usize; 3], element: usize, out: &mut [u8]) -> bool {
    match element {
        1 => swap_blocks::<1>(x, sizes, out),
        2 => swap_blocks::<2>(x, sizes, out),
        4 => swap_blocks::<4>(x, sizes, out),
        8 => swap_blocks::<8>(x, sizes, out),
        16 => swap_blocks::<16>(x, sizes, out),
        32 => swap_blocks::<32>(x, sizes, out),
        64 => swap_blocks::<64>(x, sizes, out),
        128 => swap_blocks::<128>(x, sizes, out),
        256 => swap_blocks::<256>(x, sizes, out),
        _ => false,
    }
}

/// `out[a][ci][bi] = x[a][bi][ci]` for elements of `N` bytes, in tiles of 16 × 16 (rows of
/// the input read in order, the output written a tile's rows at a time): a per-element walk of
/// the output had taken 24 µs for VWW's 27 K-byte NHWC input. False (nothing written) if a
/// slice is shorter than the sizes say.
#[cfg(feature = "std")]
fn swap_blocks<const N: usize>(x: &[u8], [a, b, c]: [usize; 3], out: &mut [u8]) -> bool {
    const TILE: usize = 16;
    let Some(plane) = b.checked_mul(c).and_then(|e| e.checked_mul(N)) else {
        return false;
    };
    let Some(total) = plane.checked_mul(a) else {
        return false;
    };
    if x.len() < total || out.len() < total {
        return false;
    }
    if plane == 0 {
        return true;
    }
    for (src, dst) in x
        .chunks_exact(plane)
        .zip(out.chunks_exact_mut(plane))
        .take(a)
    {
        if N == 1 && c == 3 {
            // Three channels (an RGB image from NHWC to NCHW): one pass that the compiler
            // turns into vector shuffles, where a tile of 16 × 3 moves byte by byte.
            deinterleave_three(src, dst);
            continue;
        }
        for b0 in (0..b).step_by(TILE) {
            let b1 = (b0 + TILE).min(b);
            for c0 in (0..c).step_by(TILE) {
                let c1 = (c0 + TILE).min(c);
                for ci in c0..c1 {
                    let (Some(to), Some(from)) = (
                        dst.get_mut((ci * b + b0) * N..(ci * b + b1) * N),
                        src.get((b0 * c + ci) * N..),
                    ) else {
                        return false;
                    };
                    for (k, element) in to.chunks_exact_mut(N).enumerate() {
                        if let Some(value) = from.get(k * c * N..k * c * N + N) {
                            element.copy_from_slice(value);
                        }
                    }
                }
            }
        }
    }
    true
}

/// `out[ci][k] = x[k][ci]` for three channels of bytes: `x` holds `out.len() / 3` pixels.
#[cfg(feature = "std")]
fn deinterleave_three(x: &[u8], out: &mut [u8]) {
    let b = out.len() / 3;
    let (first, rest) = out.split_at_mut(b);
    let (second, third) = rest.split_at_mut(b);
    #[cfg(target_arch = "x86_64")]
    let done = three_channels::deinterleave(x, [&mut *first, &mut *second, &mut *third]);
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    let (x, first, second, third) = (
        x.get(3 * done..).unwrap_or(&[]),
        first.get_mut(done..).unwrap_or(&mut []),
        second.get_mut(done..).unwrap_or(&mut []),
        third.get_mut(done..).unwrap_or(&mut []),
    );
    let pixels = x.chunks_exact(3).zip(first).zip(second).zip(third);
    for (((pixel, r), g), bl) in pixels {
        if let [v0, v1, v2] = *pixel {
            (*r, *g, *bl) = (v0, v1, v2);
        }
    }
}

/// [`deinterleave_three`] sixteen pixels at a time by byte shuffles (SSSE3): each output row's
/// sixteen bytes gathered from the pixels' 48 by three `pshufb` and two ORs, where the byte
/// loop took 17 µs of VWW's 320 (its 96 × 96 RGB input).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[allow(unsafe_code)]
mod three_channels {
    use core::arch::x86_64::*;

    /// The shuffle that picks channel `channel` of pixels `0..16` from bytes `16·part..16·part
    /// + 16` of their 48 (`0x80`, a zero, where another part holds the byte).
    const fn control(channel: usize, part: usize) -> [u8; 16] {
        let mut control = [0x80u8; 16];
        let mut j = 0;
        while j < 16 {
            let at = 3 * j + channel;
            if at >= 16 * part && at < 16 * part + 16 {
                control[j] = (at - 16 * part) as u8;
            }
            j += 1;
        }
        control
    }

    const CONTROLS: [[[u8; 16]; 3]; 3] = [
        [control(0, 0), control(0, 1), control(0, 2)],
        [control(1, 0), control(1, 1), control(1, 2)],
        [control(2, 0), control(2, 1), control(2, 2)],
    ];

    /// The first multiple of sixteen pixels of `x` into the three channel rows; how many were
    /// done (none without SSSE3).
    pub(super) fn deinterleave(x: &[u8], rows: [&mut [u8]; 3]) -> usize {
        if !std::is_x86_feature_detected!("ssse3") {
            return 0;
        }
        let pixels = rows
            .iter()
            .map(|r| r.len())
            .min()
            .unwrap_or(0)
            .min(x.len() / 3);
        let whole = pixels / 16 * 16;
        // SAFETY: the CPU has SSSE3; `whole` pixels' 3·whole bytes are within `x` and `whole`
        // bytes within each row.
        unsafe { deinterleave_ssse3(x, rows, whole) };
        whole
    }

    /// # Safety
    /// The CPU has SSSE3; `x` holds `3·pixels` bytes and each row `pixels`, a multiple of 16.
    #[target_feature(enable = "ssse3")]
    unsafe fn deinterleave_ssse3(x: &[u8], mut rows: [&mut [u8]; 3], pixels: usize) {
        let controls = CONTROLS.map(|parts| {
            parts.map(|c| {
                // SAFETY: a control holds sixteen bytes.
                unsafe { _mm_loadu_si128(c.as_ptr().cast()) }
            })
        });
        for p in (0..pixels).step_by(16) {
            // SAFETY: the caller's bounds: bytes 3p..3p + 48 of `x`, p..p + 16 of each row.
            unsafe {
                let from = x.as_ptr().add(3 * p);
                let parts = [0, 16, 32].map(|o| _mm_loadu_si128(from.add(o).cast()));
                for (row, [c0, c1, c2]) in rows.iter_mut().zip(controls) {
                    let bytes = _mm_or_si128(
                        _mm_or_si128(
                            _mm_shuffle_epi8(parts[0], c0),
                            _mm_shuffle_epi8(parts[1], c1),
                        ),
                        _mm_shuffle_epi8(parts[2], c2),
                    );
                    _mm_storeu_si128(row.as_mut_ptr().add(p).cast(), bytes);
                }
            }
        }
    }
}

/// Where a slab of `len` entries at `offset` along `axis` sits in a tensor of shape `whole`
/// (elements of `size` bytes): `outer` runs of `part_row` bytes, the first at `start`, each
/// `whole_row` after the last.
struct Slab {
    outer: usize,
    whole_row: usize,
    part_row: usize,
    start: usize,
}

impl Slab {
    fn new(whole: &Shape, axis: usize, len: usize, offset: usize, size: usize) -> Slab {
        let inner = whole.product(axis + 1..whole.rank()) * size;
        Slab {
            outer: whole.product(0..axis),
            whole_row: whole.dim(axis) * inner,
            part_row: len * inner,
            start: offset * inner,
        }
    }

    /// The whole tensor's and the part's byte ranges of run `o`.
    fn run(&self, o: usize) -> (core::ops::Range<usize>, core::ops::Range<usize>) {
        let whole = o * self.whole_row + self.start;
        (
            whole..whole + self.part_row,
            o * self.part_row..(o + 1) * self.part_row,
        )
    }
}

/// Copies input `part` into its place (`offset` along `axis`) in the concatenation `out`;
/// elements of `size` bytes.
pub fn concat_into(
    part: &[u8],
    size: usize,
    out: &mut [u8],
    out_shape: &Shape,
    part_axis_len: usize,
    axis: usize,
    offset: usize,
) {
    let slab = Slab::new(out_shape, axis, part_axis_len, offset, size);
    for o in 0..slab.outer {
        let (w, p) = slab.run(o);
        // Sized by the verifier; a short operand copies nothing.
        if let (Some(dst), Some(src)) = (out.get_mut(w), part.get(p)) {
            dst.copy_from_slice(src);
        }
    }
}

/// Copies the part of `x` at `offset` along `axis` into the split output `out`; elements of
/// `size` bytes.
pub fn split_from(
    x: &[u8],
    size: usize,
    x_shape: &Shape,
    out: &mut [u8],
    part_axis_len: usize,
    axis: usize,
    offset: usize,
) {
    let slab = Slab::new(x_shape, axis, part_axis_len, offset, size);
    for o in 0..slab.outer {
        let (w, p) = slab.run(o);
        if let (Some(dst), Some(src)) = (out.get_mut(p), x.get(w)) {
            dst.copy_from_slice(src);
        }
    }
}

/// Strided slice: output index `i` on each axis reads `starts + i * steps`; elements of
/// `size` bytes.
#[allow(clippy::too_many_arguments)]
pub fn slice(
    x: &[u8],
    size: usize,
    in_shape: &Shape,
    starts: &[usize; MAX_RANK],
    steps: &[isize; MAX_RANK],
    out: &mut [u8],
    out_shape: &Shape,
) {
    let rank = in_shape.rank();
    let out_dims = out_shape.dims_checked();
    let (Some((&inner, outer)), false) = (out_dims.split_last(), out.is_empty()) else {
        copy_run(out, x, 1, size, false);
        return;
    };
    let in_strides = in_shape.strides_checked();
    // Offsets move by step × stride per axis; negative steps walk backwards from `base`.
    let (mut base, mut pos, mut neg) = (0usize, [0usize; MAX_RANK], [0usize; MAX_RANK]);
    let axes = starts.iter().zip(steps).zip(&in_strides).take(rank);
    for (a, ((&start, &step), &stride)) in axes.enumerate() {
        base += start * stride;
        let s = step.unsigned_abs() * stride;
        if let (Some(p), Some(n)) = (pos.get_mut(a), neg.get_mut(a)) {
            if step > 0 {
                *p = s;
            } else {
                *n = s;
            }
        }
    }
    let last = rank - 1;
    let (step_fwd, step_back) = (
        pos.get(last).copied().unwrap_or(0),
        neg.get(last).copied().unwrap_or(0),
    );
    let out_strides = out_shape.strides_checked();
    for_each_row(outer, [&out_strides, &pos, &neg], |[o, p, n]| {
        let Some(dst) = elements_mut(out, o, inner, size) else {
            return;
        };
        let start = base + p - n;
        if step_back == 0 {
            // Forward: a strided (or, for step 1, contiguous) run from `start`.
            if let Some(src) = x.get(start * size..) {
                copy_run(dst, src, step_fwd, size, false);
            }
        } else {
            // Backward: the same run read from its far end.
            let first = start.checked_sub((inner - 1) * step_back);
            if let Some(src) = first.and_then(|f| x.get(f * size..)) {
                copy_run(dst, src, step_back, size, true);
            }
        }
    });
}

/// Pads `x` by `begins` (and implicitly the ends) per axis. Its elements are `size` bytes
/// each (the kernel only moves them, so one compiled copy serves every type); `value` is one
/// element's bytes, the fill of [`PadMode::Constant`]. Rows whose source is in the input are
/// one copy in the middle; only the padding maps indices.
#[allow(clippy::too_many_arguments)]
pub fn pad(
    x: &[u8],
    size: usize,
    in_shape: &Shape,
    mode: PadMode,
    begins: &[usize; MAX_RANK],
    value: &[u8],
    out: &mut [u8],
    out_shape: &Shape,
) {
    let rank = in_shape.rank();
    let (Some(&inner_out), Some(&inner_in)) = (out_shape.dims().last(), in_shape.dims().last())
    else {
        copy_element(out, x);
        return;
    };
    let (row_out, row_in) = (inner_out * size, inner_in * size);
    if row_out == 0 || size == 0 {
        return;
    }
    let (in_dims, out_dims) = (in_shape.dims(), out_shape.dims());
    let in_strides = in_shape.strides_checked();
    let b = begins.get(rank - 1).copied().unwrap_or(0);
    let mut row_index = [0usize; MAX_RANK];
    for dst in out.chunks_exact_mut(row_out) {
        // The input row this output row reads, `None` for a row of constant fill.
        let mut src_row = Some(0usize);
        for (a, (&i, &begin)) in row_index.iter().zip(begins).take(rank - 1).enumerate() {
            let mapped = map_index(
                i as isize - begin as isize,
                in_dims.get(a).copied().unwrap_or(0),
                mode,
            );
            src_row = match (src_row, mapped, in_strides.get(a)) {
                (Some(base), Some(j), Some(&stride)) => Some(base + j * stride),
                _ => None,
            };
        }
        let src = src_row.and_then(|base| x.get(base * size..)?.get(..row_in));
        match src {
            None => dst
                .chunks_exact_mut(size)
                .for_each(|d| copy_element(d, value)),
            Some(src) => {
                let middle = dst.get_mut(b * size..).and_then(|d| d.get_mut(..row_in));
                if let Some(middle) = middle {
                    middle.copy_from_slice(src);
                }
                let padding = (0..b).chain(b + inner_in..inner_out);
                for ox in padding {
                    let Some(d) = dst.get_mut(ox * size..).and_then(|d| d.get_mut(..size)) else {
                        continue;
                    };
                    let from = map_index(ox as isize - b as isize, inner_in, mode)
                        .and_then(|j| src.get(j * size..)?.get(..size));
                    copy_element(d, from.unwrap_or(value));
                }
            }
        }
        let mut a = rank - 1;
        while a > 0 {
            a -= 1;
            let (Some(i), Some(&len)) = (row_index.get_mut(a), out_dims.get(a)) else {
                break;
            };
            *i += 1;
            if *i < len {
                break;
            }
            *i = 0;
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
            let mut r = i.checked_rem_euclid(period)?;
            if r >= n {
                r = period - r;
            }
            Some(r as usize)
        }
    }
}

/// Gathers along `axis`: `out[outer, q, inner] = x[outer, idx[q], inner]`; negative indices
/// count from the end; any other out-of-range index is an error. Elements of `size` bytes.
pub fn gather(
    x: &[u8],
    size: usize,
    x_shape: &Shape,
    axis: usize,
    indices: impl Iterator<Item = i64> + Clone,
    out: &mut [u8],
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
            let src = elements(x, (o * len + i as usize) * inner, inner, size);
            let dst = elements_mut(out, (o * count + q) * inner, inner, size);
            if let (Some(dst), Some(src)) = (dst, src) {
                dst.copy_from_slice(src);
            }
        }
    }
    Ok(())
}

/// The upper (`j − i ≥ k`) or lower (`j − i ≤ k`) triangle of each `rows × cols` matrix of `x`,
/// zeros elsewhere; elements of `size` bytes. Each row keeps one run of columns.
pub fn trilu(x: &[u8], size: usize, rows: usize, cols: usize, upper: bool, k: i64, out: &mut [u8]) {
    let Some(row) = core::num::NonZeroUsize::new(cols.saturating_mul(size)) else {
        return;
    };
    let column = |c: i64| c.clamp(0, cols as i64) as usize;
    for (n, (src, dst)) in x
        .chunks_exact(row.get())
        .zip(out.chunks_exact_mut(row.get()))
        .enumerate()
    {
        let i = (n % rows.max(1)) as i64;
        let (first, end) = if upper {
            (column(i.saturating_add(k)), cols)
        } else {
            (0, column(i.saturating_add(k).saturating_add(1)))
        };
        dst.fill(0);
        let kept = end.saturating_sub(first);
        if let (Some(s), Some(d)) = (
            elements(src, first, kept, size),
            elements_mut(dst, first, kept, size),
        ) {
            d.copy_from_slice(s);
        }
    }
}

/// `out` = `x` broadcast (numpy rules) to `out_shape` (Expand); elements of `size` bytes.
pub fn expand(x: &[u8], size: usize, x_shape: &Shape, out: &mut [u8], out_shape: &Shape) {
    let dims = out_shape.dims_checked();
    let (Some((&inner, outer)), false) = (dims.split_last(), out.is_empty()) else {
        copy_run(out, x, 1, size, false);
        return;
    };
    let strides = [
        out_shape.strides(),
        ferrite_hal::geometry::broadcast_strides(x_shape, out_shape),
    ];
    // The last axis is a run: the input's row (stride 1) or its one element repeated (0).
    let inner_stride = strides[1].get(outer.len()).copied().unwrap_or(0);
    for_each_row(outer, [&strides[0], &strides[1]], |[o, i]| {
        if let (Some(dst), Some(src)) = (elements_mut(out, o, inner, size), x.get(i * size..)) {
            copy_run(dst, src, inner_stride, size, false);
        }
    });
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::base::element_ids::{decode, encode, flatten, generator, unflatten};
    use std::{vec, vec::Vec};

    /// Pad's output element at `index` by the definition: each coordinate mapped on its own.
    fn padded_at(
        x: &[u32],
        in_dims: &[usize],
        mode: PadMode,
        begins: &[usize],
        value: u32,
        index: &[usize],
    ) -> u32 {
        let mut offset = 0;
        for (a, (&i, &len)) in index.iter().zip(in_dims).enumerate() {
            match map_index(i as isize - begins[a] as isize, len, mode) {
                Some(j) => offset = offset * len + j,
                None => return value,
            }
        }
        x[offset]
    }

    /// The transpose of element ids `ids` of shape `dims` by `perm` (output axis `a` is input
    /// axis `perm[a]`), by the definition.
    fn transposed(ids: &[usize], dims: &[usize], perm: &[usize]) -> Vec<usize> {
        let rank = dims.len();
        let t_dims: Vec<usize> = (0..rank).map(|a| dims[perm[a]]).collect();
        (0..ids.len())
            .map(|flat| {
                let o = unflatten(flat, &t_dims);
                let mut i = vec![0; rank];
                for a in 0..rank {
                    i[perm[a]] = o[a];
                }
                ids[flatten(&i, dims)]
            })
            .collect()
    }

    /// `transpose` of `ids` at every element size equals `expected`.
    fn check_transpose(
        ids: &[usize],
        dims: &[usize],
        perm: &[usize; MAX_RANK],
        expected: &[usize],
    ) {
        let rank = dims.len();
        let t_dims: Vec<usize> = (0..rank).map(|a| dims[perm[a]]).collect();
        let (shape, t_shape) = (Shape::new(dims).unwrap(), Shape::new(&t_dims).unwrap());
        for size in [1usize, 2, 4, 8] {
            let x = encode(ids, size);
            let mut out = vec![0xAA; ids.len() * size];
            transpose(&x, size, &shape, perm, &mut out, &t_shape);
            assert_eq!(
                decode(&out, size),
                expected,
                "transpose {dims:?} by {:?}, size {size}",
                &perm[..rank]
            );
        }
    }

    /// Transposes that swap two runs of axes after kept ones (NHWC to NCHW and back), on
    /// shapes past one 16 × 16 tile, at every element size, against the definition.
    #[cfg(feature = "std")]
    #[test]
    fn batched_swaps_match_the_definition() {
        let cases: [(&[usize], &[usize]); 10] = [
            (&[2, 37, 19], &[0, 2, 1]),
            (&[1, 5, 33, 3], &[0, 3, 1, 2]),
            (&[1, 3, 5, 33], &[0, 2, 3, 1]),
            (&[40, 17], &[1, 0]),
            (&[3, 2, 16, 32], &[0, 1, 3, 2]),
            (&[1, 96, 96, 3], &[0, 3, 1, 2]),
            // Kept last axes: elements of several values (a transformer's heads, 8 values;
            // 2 × 4; 5, a size with no kernel of its own).
            (&[1, 16, 4, 8], &[0, 2, 1, 3]),
            (&[2, 17, 3, 2, 4], &[0, 2, 1, 3, 4]),
            (&[3, 4, 5], &[1, 0, 2]),
            (&[2, 3, 20, 4, 2], &[0, 3, 1, 2, 4]),
        ];
        for (dims, axes) in cases {
            let rank = dims.len();
            let mut perm = [0usize; MAX_RANK];
            perm[..rank].copy_from_slice(axes);
            let shape = Shape::new(dims).unwrap();
            assert!(
                batched_swap(&shape, &perm, 4).is_some(),
                "{dims:?} {axes:?}"
            );
            let count: usize = dims.iter().product();
            let ids: Vec<usize> = (0..count).map(|v| (v * 7 + 3) % 256).collect();
            let expected = transposed(&ids, dims, &perm[..rank]);
            check_transpose(&ids, dims, &perm, &expected);
        }
        // A rotation is a swap of two runs; a reversal of three axes is not.
        let shape = Shape::new(&[2, 3, 4]).unwrap();
        let perm_of = |axes: [usize; 3]| {
            let mut perm = [0usize; MAX_RANK];
            perm[..3].copy_from_slice(&axes);
            perm
        };
        assert_eq!(
            batched_swap(&shape, &perm_of([1, 2, 0]), 4),
            Some(([1, 2, 12], 4))
        );
        assert_eq!(batched_swap(&shape, &perm_of([2, 1, 0]), 4), None);
        assert_eq!(batched_swap(&shape, &perm_of([0, 1, 2]), 4), None);
        // The kept last axis joins the element: [2, 3] matrices of 4-value elements.
        assert_eq!(
            batched_swap(&shape, &perm_of([1, 0, 2]), 2),
            Some(([1, 2, 3], 8))
        );
    }

    /// Transpose, Slice (negative steps too) and Expand over random shapes, at element sizes
    /// 1, 2, 4 and 8, against each op's definition on element ids.
    #[test]
    fn moves_match_their_definitions_at_every_element_size() {
        let mut next = generator(0x9e37_79b9);
        for case in 0..400 {
            let rank = 1 + next(4);
            let dims: Vec<usize> = (0..rank).map(|_| 1 + next(4)).collect();
            let count: usize = dims.iter().product();
            let ids: Vec<usize> = (0..count).map(|v| v % 256).collect();
            let shape = Shape::new(&dims).unwrap();
            // Transpose by a random permutation.
            let mut perm = [0usize; MAX_RANK];
            let mut axes: Vec<usize> = (0..rank).collect();
            for slot in perm.iter_mut().take(rank) {
                *slot = axes.remove(next(axes.len()));
            }
            let t_expected = transposed(&ids, &dims, &perm[..rank]);
            // Slice with random starts and steps (either sign).
            let (mut starts, mut steps) = ([0usize; MAX_RANK], [1isize; MAX_RANK]);
            let mut s_dims = vec![0; rank];
            for a in 0..rank {
                starts[a] = next(dims[a]);
                let step = 1 + next(2) as isize;
                steps[a] = if next(2) == 0 { step } else { -step };
                let room = if steps[a] > 0 {
                    dims[a] - starts[a]
                } else {
                    starts[a] + 1
                };
                s_dims[a] = room.div_ceil(step as usize);
            }
            let s_count: usize = s_dims.iter().product();
            let s_expected: Vec<usize> = (0..s_count)
                .map(|flat| {
                    let o = unflatten(flat, &s_dims);
                    let i: Vec<usize> = (0..rank)
                        .map(|a| (starts[a] as isize + o[a] as isize * steps[a]) as usize)
                        .collect();
                    ids[flatten(&i, &dims)]
                })
                .collect();
            // Expand: each axis of the input 1 or the output's.
            let e_dims: Vec<usize> = dims
                .iter()
                .map(|&d| if d == 1 { 1 + next(3) } else { d })
                .collect();
            let e_count: usize = e_dims.iter().product();
            let e_expected: Vec<usize> = (0..e_count)
                .map(|flat| {
                    let o = unflatten(flat, &e_dims);
                    let i: Vec<usize> = (0..rank)
                        .map(|a| if dims[a] == 1 { 0 } else { o[a] })
                        .collect();
                    ids[flatten(&i, &dims)]
                })
                .collect();
            check_transpose(&ids, &dims, &perm, &t_expected);
            for size in [1usize, 2, 4, 8] {
                let x = encode(&ids, size);
                let mut out = vec![0xAA; s_count * size];
                let s_shape = Shape::new(&s_dims).unwrap();
                slice(&x, size, &shape, &starts, &steps, &mut out, &s_shape);
                assert_eq!(
                    decode(&out, size),
                    s_expected,
                    "case {case}: slice {dims:?}, size {size}"
                );
                let mut out = vec![0xAA; e_count * size];
                expand(&x, size, &shape, &mut out, &Shape::new(&e_dims).unwrap());
                assert_eq!(
                    decode(&out, size),
                    e_expected,
                    "case {case}: expand {dims:?} to {e_dims:?}, size {size}"
                );
            }
        }
    }

    /// Trilu over random batches of matrices and diagonals (beyond the matrix and at the
    /// extremes of `k` too), both triangles, at element sizes 1, 2, 4 and 8, against the
    /// definition (a zero element decodes as id 0; the data's ids start at 1).
    #[test]
    fn trilu_matches_its_definition_at_every_element_size() {
        let mut next = generator(0x6a09_e667);
        for case in 0..300 {
            let (batch, rows, cols) = (1 + next(3), 1 + next(5), 1 + next(5));
            let k = match case % 10 {
                0 => i64::MAX,
                1 => i64::MIN,
                _ => next(2 * cols + 5) as i64 - cols as i64 - 2,
            };
            let upper = next(2) == 1;
            let count = batch * rows * cols;
            let ids: Vec<usize> = (0..count).map(|i| 1 + (i * 3 + case) % 200).collect();
            let expected: Vec<usize> = (0..count)
                .map(|n| {
                    let (i, j) = (((n / cols) % rows) as i128, (n % cols) as i128);
                    let d = j - i;
                    let keep = if upper {
                        d >= k as i128
                    } else {
                        d <= k as i128
                    };
                    if keep {
                        ids[n]
                    } else {
                        0
                    }
                })
                .collect();
            for size in [1usize, 2, 4, 8] {
                let mut out = vec![0xAA; count * size];
                trilu(&encode(&ids, size), size, rows, cols, upper, k, &mut out);
                assert_eq!(
                    decode(&out, size),
                    expected,
                    "case {case}: {batch}×{rows}×{cols}, k {k}, upper {upper}, size {size}"
                );
            }
        }
    }

    const FILL: u32 = 250;

    /// Every mode over many shapes and paddings, at element sizes 1, 2, 4 and 8 (the same
    /// elements written at each width), against the definition.
    #[test]
    fn pad_matches_its_definition_at_every_element_size() {
        let mut next = generator(0x2545_f491);
        for case in 0..300 {
            let rank = 1 + next(3);
            let mode = [PadMode::Constant, PadMode::Reflect, PadMode::Edge][case % 3];
            let in_dims: Vec<usize> = (0..rank).map(|_| 1 + next(4)).collect();
            let mut begins = [0usize; MAX_RANK];
            let mut out_dims = in_dims.clone();
            for a in 0..rank {
                // Reflect pads at most len - 1 (ONNX); the others any amount.
                let most = if mode == PadMode::Reflect {
                    in_dims[a] - 1
                } else {
                    3
                };
                begins[a] = next(most + 1);
                out_dims[a] += begins[a] + next(most + 1);
            }
            let count: usize = in_dims.iter().product();
            let x: Vec<u32> = (0..count as u32).map(|v| v * 7 % 200 + 1).collect();
            let (in_shape, out_shape) = (
                Shape::new(&in_dims).unwrap(),
                Shape::new(&out_dims).unwrap(),
            );
            let total: usize = out_dims.iter().product();
            let mut expected = Vec::with_capacity(total);
            for flat in 0..total {
                let mut index = vec![0; rank];
                let mut rest = flat;
                for a in (0..rank).rev() {
                    index[a] = rest % out_dims[a];
                    rest /= out_dims[a];
                }
                expected.push(padded_at(&x, &in_dims, mode, &begins, FILL, &index));
            }
            for size in [1usize, 2, 4, 8] {
                // Each value (under 256) little-endian in `size` bytes.
                let bytes = |vs: &[u32]| -> Vec<u8> {
                    vs.iter()
                        .flat_map(|&v| (0..size).map(move |k| if k == 0 { v as u8 } else { 0 }))
                        .collect()
                };
                let (xb, eb) = (bytes(&x), bytes(&expected));
                let mut out = vec![0xAAu8; total * size];
                pad(
                    &xb,
                    size,
                    &in_shape,
                    mode,
                    &begins,
                    &bytes(&[FILL]),
                    &mut out,
                    &out_shape,
                );
                assert_eq!(
                    out, eb,
                    "case {case}: {in_dims:?} -> {out_dims:?}, {mode:?}, size {size}"
                );
            }
        }
    }
}
