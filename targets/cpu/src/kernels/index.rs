//! Odometer iteration over multi-dimensional indices with incrementally updated offsets.

use ferrite_hal::MAX_RANK;

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
}
