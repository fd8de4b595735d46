//! Tensor shapes and the checked arithmetic on them.
//!
//! Every `elements × dtype size` and every stride in Ferrite is computed here, with overflow
//! checks; the rest of the code trusts these results once the core has verified a model.

use crate::DType;

/// The largest rank a tensor may have.
pub const MAX_RANK: usize = 8;

/// A static tensor shape of rank `0..=MAX_RANK`, stored inline (no allocation).
// `PartialEq` compares exactly the fields `derive` would (so the derived `Hash` agrees with it),
// out of line.
#[allow(clippy::derived_hash_with_manual_eq)]
#[derive(Clone, Copy, Eq, Hash)]
pub struct Shape {
    dims: [usize; MAX_RANK],
    rank: u8,
}

impl PartialEq for Shape {
    /// The same rank and dimensions (entries past the rank are always 0). Out of line: the
    /// verifier compares shapes in most of its rules (inlined, nine words each time).
    #[inline(never)]
    fn eq(&self, other: &Shape) -> bool {
        self.rank == other.rank && self.dims == other.dims
    }
}

impl Shape {
    /// The shape of a scalar (rank 0, one element).
    pub const SCALAR: Shape = Shape {
        dims: [0; MAX_RANK],
        rank: 0,
    };

    /// A shape from its dimensions, or `None` if the rank exceeds [`MAX_RANK`].
    pub fn new(dims: &[usize]) -> Option<Shape> {
        if dims.len() > MAX_RANK {
            return None;
        }
        let mut s = Shape::SCALAR;
        s.dims[..dims.len()].copy_from_slice(dims);
        s.rank = dims.len() as u8;
        Some(s)
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        // The rank never exceeds the array (every constructor checks it); the bound lets the
        // compiler see that, so no panic path is linked.
        &self.dims[..(self.rank as usize).min(MAX_RANK)]
    }

    /// [`Shape::dims`] without a panic path (for the verifier, whose every path
    /// `boards/panic-free` proves panic-free). Kernels use `dims`: there the slice's bounds check
    /// is what keeps LLVM from growing the broadcasting loops (a `get` in `dims` costs a
    /// Cortex-M firmware 95 KB of flash).
    pub fn dims_checked(&self) -> &[usize] {
        self.dims.get(..self.rank as usize).unwrap_or(&[])
    }

    /// [`Shape::dim`] without a panic path (for the verifier, as [`Shape::dims_checked`]).
    pub fn dim_checked(&self, axis: usize) -> usize {
        self.dims_checked().get(axis).copied().unwrap_or(1)
    }

    /// [`Shape::strides`] without a panic path (for the verifier, as [`Shape::dims_checked`]).
    pub fn strides_checked(&self) -> [usize; MAX_RANK] {
        let mut strides = [0usize; MAX_RANK];
        let mut acc = 1usize;
        for (stride, &d) in strides.iter_mut().zip(self.dims_checked()).rev() {
            *stride = acc;
            acc = acc.saturating_mul(d);
        }
        strides
    }

    /// Dimension `axis`, or 1 past the rank (convenient for broadcasting code).
    pub fn dim(&self, axis: usize) -> usize {
        match self.dims.get(axis) {
            Some(&d) if axis < self.rank() => d,
            _ => 1,
        }
    }

    /// Number of elements, or `None` on overflow.
    pub fn elements(&self) -> Option<usize> {
        self.dims_checked()
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// Size in bytes for elements of `dtype`, or `None` on overflow.
    pub fn bytes(&self, dtype: DType) -> Option<usize> {
        self.elements()?.checked_mul(dtype.size())
    }

    /// Row-major (C order) strides in elements. Entries past the rank are 0.
    ///
    /// Only call on a shape whose element count is known not to overflow. Out of line: a
    /// kernel's setup calls it, never its loops (inlined at each, 0.9 KB of a firmware).
    #[inline(never)]
    pub fn strides(&self) -> [usize; MAX_RANK] {
        let mut strides = [0usize; MAX_RANK];
        let mut acc = 1usize;
        for (slot, &d) in strides.iter_mut().zip(self.dims()).rev() {
            *slot = acc;
            acc = acc.saturating_mul(d);
        }
        strides
    }

    /// Product of the dimensions in `range` (1 for an empty range), saturating.
    pub fn product(&self, range: core::ops::Range<usize>) -> usize {
        self.dims_checked()
            .get(range)
            .unwrap_or(&[])
            .iter()
            .fold(1usize, |a, &d| a.saturating_mul(d))
    }
}

impl core::fmt::Debug for Shape {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.dims()).finish()
    }
}

impl core::fmt::Display for Shape {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.dims().iter().enumerate() {
            if i > 0 {
                f.write_str("x")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_and_strides() {
        let s = Shape::new(&[2, 3, 4]).unwrap();
        assert_eq!(s.elements(), Some(24));
        assert_eq!(s.bytes(DType::F32), Some(96));
        assert_eq!(&s.strides()[..3], &[12, 4, 1]);
        assert_eq!(Shape::SCALAR.elements(), Some(1));
    }

    #[test]
    fn overflow_is_none() {
        let s = Shape::new(&[usize::MAX, 2]).unwrap();
        assert_eq!(s.elements(), None);
        assert!(Shape::new(&[1; 9]).is_none());
    }
}
