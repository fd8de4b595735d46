//! The ops with bool tensors: comparisons, boolean logic, selection (Where) and float
//! classification (IsNaN, IsInf). Bools are bytes, 0 or 1; operands broadcast as numpy.

use crate::base::elements::{copy_element, elements, elements_mut};
use crate::base::index::{for_each_index, walk2};
use ferrite_hal::geometry::broadcast_strides;
use ferrite_hal::op::{CompareOp, Detect, LogicalOp};
use ferrite_hal::Shape;

/// A tensor operand: its elements and shape.
#[derive(Clone, Copy)]
pub struct Operand<'a, T> {
    /// Elements, row-major.
    pub data: &'a [T],
    /// Shape (broadcast to the output's).
    pub shape: Shape,
}

/// `base::index::walk2` with three operands.
fn walk3(shape: &Shape, a: &Shape, b: &Shape, c: &Shape, f: &mut dyn FnMut([usize; 4])) {
    let strides = [
        shape.strides(),
        broadcast_strides(a, shape),
        broadcast_strides(b, shape),
        broadcast_strides(c, shape),
    ];
    let all = [&strides[0], &strides[1], &strides[2], &strides[3]];
    for_each_index(shape.dims(), all, f);
}

/// `out[i] = f(a[·], b[·])` over `shape`, each operand broadcast.
#[inline(always)]
pub(crate) fn zip_broadcast<A: Copy, B: Copy, Y>(
    a: Operand<'_, A>,
    b: Operand<'_, B>,
    out: &mut [Y],
    shape: &Shape,
    f: impl Fn(A, B) -> Y,
) {
    walk2(shape, &a.shape, &b.shape, &mut |[o, ia, ib]| {
        if let (Some(slot), Some(&x), Some(&y)) = (out.get_mut(o), a.data.get(ia), b.data.get(ib)) {
            *slot = f(x, y);
        }
    });
}

/// `a op b` as 0/1 bytes (NaN compares false, as IEEE).
pub fn compare<T: PartialOrd + Copy>(
    op: CompareOp,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    out: &mut [u8],
    shape: &Shape,
) {
    // One walk for every comparison (the op matched per element: rare ops, where one compiled
    // closure per op had cost a firmware 0.5 KB).
    zip_broadcast(a, b, out, shape, |x, y| {
        (match op {
            CompareOp::Equal => x == y,
            CompareOp::Less => x < y,
            CompareOp::LessOrEqual => x <= y,
            CompareOp::Greater => x > y,
            CompareOp::GreaterOrEqual => x >= y,
        }) as u8
    })
}

/// Boolean `a op b` (any non-zero byte is true).
pub fn logical(
    op: LogicalOp,
    a: Operand<'_, u8>,
    b: Operand<'_, u8>,
    out: &mut [u8],
    shape: &Shape,
) {
    // One walk for every op, as `compare`.
    zip_broadcast(a, b, out, shape, |x, y| {
        let (x, y) = (x != 0, y != 0);
        (match op {
            LogicalOp::And => x && y,
            LogicalOp::Or => x || y,
            LogicalOp::Xor => x != y,
        }) as u8
    })
}

/// Boolean negation.
pub fn not(x: &[u8], out: &mut [u8]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v == 0) as u8;
    }
}

/// Whether each value is one of the special values `detect` selects.
pub fn classify(detect: Detect, x: &[f32], out: &mut [u8]) {
    for (o, &v) in out.iter_mut().zip(x) {
        let hit = (detect.nan && v.is_nan())
            || (detect.positive_infinity && v == f32::INFINITY)
            || (detect.negative_infinity && v == f32::NEG_INFINITY);
        *o = hit as u8;
    }
}

/// `out[i] = if condition { x } else { y }`, all three broadcast over `shape`; elements of
/// `size` bytes.
pub fn select(
    condition: Operand<'_, u8>,
    x: Operand<'_, u8>,
    y: Operand<'_, u8>,
    size: usize,
    out: &mut [u8],
    shape: &Shape,
) {
    walk3(
        shape,
        &condition.shape,
        &x.shape,
        &y.shape,
        &mut |[o, ic, ix, iy]| {
            let chosen = match condition.data.get(ic) {
                Some(&c) if c != 0 => elements(x.data, ix, 1, size),
                _ => elements(y.data, iy, 1, size),
            };
            if let (Some(slot), Some(v)) = (elements_mut(out, o, 1, size), chosen) {
                copy_element(slot, v);
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    /// Where over random shapes, each operand broadcast on random axes, at element sizes 1,
    /// 2, 4 and 8, against the definition (every byte of an element checked).
    #[test]
    fn select_matches_its_definition_at_every_element_size() {
        let mut next = crate::base::element_ids::generator(0xbb67_ae85);
        for case in 0..300 {
            let rank = 1 + next(3);
            let dims: Vec<usize> = (0..rank).map(|_| 1 + next(4)).collect();
            let mut operand_dims = || -> Vec<usize> {
                dims.iter()
                    .map(|&d| if next(3) == 0 { 1 } else { d })
                    .collect()
            };
            let (cd, xd, yd) = (operand_dims(), operand_dims(), operand_dims());
            let count = |d: &[usize]| d.iter().product::<usize>();
            let cond: Vec<u8> = (0..count(&cd)).map(|_| [0, 1, 7][next(3)]).collect();
            // The element at flat offset `i` of an operand of `dims` broadcast to the output.
            let at = |d: &[usize], flat: usize| {
                let (mut rest, mut offset, mut stride) = (flat, 0, 1);
                for a in (0..rank).rev() {
                    let i = rest % dims[a];
                    rest /= dims[a];
                    offset += if d[a] == 1 { 0 } else { i * stride };
                    stride *= d[a];
                }
                offset
            };
            for size in [1usize, 2, 4, 8] {
                let bytes = |n: usize, base: usize| -> Vec<u8> {
                    (0..n * size).map(|b| (base + b * 3) as u8).collect()
                };
                let (xs, ys) = (bytes(count(&xd), 1), bytes(count(&yd), 101));
                let mut out = std::vec![0xEE; count(&dims) * size];
                let shape = |d: &[usize]| Shape::new(d).unwrap();
                select(
                    Operand {
                        data: &cond,
                        shape: shape(&cd),
                    },
                    Operand {
                        data: &xs,
                        shape: shape(&xd),
                    },
                    Operand {
                        data: &ys,
                        shape: shape(&yd),
                    },
                    size,
                    &mut out,
                    &shape(&dims),
                );
                let want: Vec<u8> = (0..count(&dims))
                    .flat_map(|o| {
                        let (from, i) = if cond[at(&cd, o)] != 0 {
                            (&xs, at(&xd, o))
                        } else {
                            (&ys, at(&yd, o))
                        };
                        from[i * size..(i + 1) * size].to_vec()
                    })
                    .collect();
                assert_eq!(
                    out, want,
                    "case {case}: {dims:?} {cd:?} {xd:?} {yd:?}, size {size}"
                );
            }
        }
    }
}
