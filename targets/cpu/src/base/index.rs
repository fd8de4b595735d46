//! Odometer iteration over multi-dimensional indices with incrementally updated offsets.

use ferrite_hal::geometry::broadcast_strides;
use ferrite_hal::{Shape, MAX_RANK};

/// Calls `f` with `K` element offsets for every index of `dims` in row-major order, where offset
/// `k` is `Σ index[axis] × strides[k][axis]`. Nothing is called when a dimension is 0; once for
/// rank 0.
pub fn for_each_index<const K: usize>(
    dims: &[usize],
    strides: [&[usize; MAX_RANK]; K],
    mut f: impl FnMut([usize; K]),
) {
    if dims.contains(&0) {
        return;
    }
    let rank = dims.len().min(MAX_RANK);
    let mut index = [0usize; MAX_RANK];
    let mut offsets = [0usize; K];
    loop {
        f(offsets);
        let mut axis = rank;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            // `axis < rank <= MAX_RANK`; the clamp lets the compiler see it (no index check,
            // no panic path, whatever the caller's context).
            let at = axis.min(MAX_RANK - 1);
            let Some(&size) = dims.get(at) else {
                return;
            };
            index[at] += 1;
            for k in 0..K {
                offsets[k] += strides[k][at];
            }
            if index[at] < size {
                break;
            }
            for k in 0..K {
                offsets[k] -= strides[k][at] * size;
            }
            index[at] = 0;
        }
    }
}

/// [`for_each_index`] with its odometer out of line on a firmware (one copy per `K` for every caller): for
/// callers whose `f` does a row's or a matrix's work, where a call per step costs nothing
/// (inlined, each copy is ~0.4 KB of a firmware). Per-element callers keep [`for_each_index`].
/// Inlined itself, so the caller's row work runs in the caller's frame (called, its frame held
/// the inlined row work's locals again: 192 B under a firmware's MatMul).
#[inline(always)]
pub fn for_each_row<const K: usize>(
    dims: &[usize],
    strides: [&[usize; MAX_RANK]; K],
    mut f: impl FnMut([usize; K]),
) {
    if dims.contains(&0) {
        return;
    }
    let mut odometer = Odometer {
        dims,
        strides,
        index: [0; MAX_RANK],
        offsets: [0; K],
    };
    loop {
        f(odometer.offsets);
        if !odometer.advance() {
            return;
        }
    }
}

/// The position of [`for_each_row`]: the index and its `K` offsets.
struct Odometer<'a, const K: usize> {
    dims: &'a [usize],
    strides: [&'a [usize; MAX_RANK]; K],
    index: [usize; MAX_RANK],
    offsets: [usize; K],
}

impl<const K: usize> Odometer<'_, K> {
    /// Steps to the next index (the last axis fastest); `false` past the last. Out of line on a
    /// firmware; a host inlines it.
    #[cfg_attr(feature = "std", inline(always))]
    #[cfg_attr(not(feature = "std"), inline(never))]
    fn advance(&mut self) -> bool {
        let mut axis = self.dims.len().min(MAX_RANK);
        loop {
            if axis == 0 {
                return false;
            }
            axis -= 1;
            // `axis < rank <= MAX_RANK`; the clamp lets the compiler see it (no index check).
            let at = axis.min(MAX_RANK - 1);
            let Some(&size) = self.dims.get(at) else {
                return false;
            };
            self.index[at] += 1;
            for k in 0..K {
                self.offsets[k] += self.strides[k][at];
            }
            if self.index[at] < size {
                return true;
            }
            for k in 0..K {
                self.offsets[k] -= self.strides[k][at] * size;
            }
            self.index[at] = 0;
        }
    }
}

/// Calls `f(output offset, a offset, b offset)` for every index of `shape`, the operands of
/// shapes `a` and `b` broadcast. One compiled walk serves every op and type of the logic and
/// integer kernels (these ops are rare and cheap; flash matters more on a microcontroller).
pub(crate) fn walk2(shape: &Shape, a: &Shape, b: &Shape, f: &mut dyn FnMut([usize; 3])) {
    let strides = [
        shape.strides(),
        broadcast_strides(a, shape),
        broadcast_strides(b, shape),
    ];
    for_each_index(shape.dims(), [&strides[0], &strides[1], &strides[2]], f);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visits_in_row_major_order() {
        let mut seen = [0usize; 6];
        let mut n = 0;
        let s = [3, 1, 0, 0, 0, 0, 0, 0];
        for_each_index(&[2, 3], [&s], |[o]| {
            seen[n] = o;
            n += 1;
        });
        assert_eq!(seen, [0, 1, 2, 3, 4, 5]);
        let mut count = 0;
        for_each_index(&[], [&s], |_| count += 1);
        assert_eq!(count, 1);
        for_each_index(&[2, 0], [&s], |_| count += 1);
        assert_eq!(count, 1);
    }

    #[test]
    fn rows_visit_as_indices_do() {
        extern crate std;
        use std::vec::Vec;
        let (a, b) = ([12, 4, 1, 0, 0, 0, 0, 0], [1, 0, 3, 0, 0, 0, 0, 0]);
        for dims in [&[2usize, 3, 4][..], &[5], &[], &[1, 1, 7], &[3, 0, 2]] {
            let (mut want, mut got) = (Vec::new(), Vec::new());
            for_each_index(dims, [&a, &b], |o| want.push(o));
            for_each_row(dims, [&a, &b], |o| got.push(o));
            assert_eq!(want, got, "{dims:?}");
        }
    }
}
