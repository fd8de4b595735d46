//! Data-dependent indexing: GatherElements, ScatterElements, GatherND and ScatterND. Every
//! index is read from a tensor at run time, so each is checked (negative ones count from the
//! end) and an out-of-range one is an error, never an out-of-bounds access.

use super::index::for_each_index;
use crate::CpuError;
use ferrite_hal::op::Reduction;
use ferrite_hal::Shape;

/// An index tensor's elements.
#[derive(Clone, Copy)]
pub enum Indices<'a> {
    /// int32 indices.
    I32(&'a [i32]),
    /// int64 indices.
    I64(&'a [i64]),
}

impl Indices<'_> {
    /// Index `i` resolved against an axis of `len` (negative counts from the end).
    fn resolve(&self, i: usize, len: usize) -> Result<usize, CpuError> {
        let raw = match self {
            Indices::I32(v) => v.get(i).map(|&x| i64::from(x)),
            Indices::I64(v) => v.get(i).copied(),
        }
        .ok_or(CpuError::CorruptPlan)?;
        let resolved = if raw < 0 { raw + len as i64 } else { raw };
        if resolved < 0 || resolved >= len as i64 {
            return Err(CpuError::IndexOutOfRange { index: raw, len });
        }
        Ok(resolved as usize)
    }
}

/// Combines `update` into `slot` (f32 reductions; replacement for every type).
pub trait Combine: Copy {
    /// `slot ⊕ update`.
    fn combine(self, update: Self, reduction: Reduction) -> Self;
}

impl Combine for f32 {
    fn combine(self, update: f32, reduction: Reduction) -> f32 {
        match reduction {
            Reduction::None => update,
            Reduction::Add => self + update,
            Reduction::Mul => self * update,
            Reduction::Max => self.max(update),
            Reduction::Min => self.min(update),
        }
    }
}

macro_rules! replace_only {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            fn combine(self, update: $t, _: Reduction) -> $t {
                update
            }
        }
    )*};
}
replace_only!(u8, u16, u32, u64);

/// What a scatter writes: its indices, the updates and how they combine.
#[derive(Clone, Copy)]
pub struct Updates<'a, T> {
    /// Where.
    pub indices: Indices<'a>,
    /// What.
    pub values: &'a [T],
    /// How.
    pub reduction: Reduction,
}

/// Calls `f(p, offset)` for every position `p` of `index_shape` (row-major), `offset` the data
/// element at `p` with its `axis` coordinate taken from `indices[p]` (checked); stops at the
/// first error.
fn for_each_target(
    data_shape: &Shape,
    indices: Indices<'_>,
    index_shape: &Shape,
    axis: usize,
    mut f: impl FnMut(usize, usize) -> Result<(), CpuError>,
) -> Result<(), CpuError> {
    let strides = data_shape.strides();
    let len = data_shape.dim(axis);
    let mut moved = strides;
    moved[axis] = 0;
    let mut result = Ok(());
    let mut p = 0;
    for_each_index(index_shape.dims(), [&moved], |[base]| {
        if result.is_ok() {
            result = indices
                .resolve(p, len)
                .and_then(|i| f(p, base + i * strides[axis]));
        }
        p += 1;
    });
    result
}

/// `out[p] = data[p with axis ← indices[p]]` over the positions `p` of `index_shape`.
pub fn gather_elements<T: Copy>(
    data: &[T],
    data_shape: &Shape,
    indices: Indices<'_>,
    index_shape: &Shape,
    axis: usize,
    out: &mut [T],
) -> Result<(), CpuError> {
    for_each_target(data_shape, indices, index_shape, axis, |p, at| {
        let v = data.get(at).ok_or(CpuError::CorruptPlan)?;
        *out.get_mut(p).ok_or(CpuError::CorruptPlan)? = *v;
        Ok(())
    })
}

/// `out = data`, then `out[p with axis ← indices[p]] ⊕= updates[p]` for each position `p`.
pub fn scatter_elements<T: Combine>(
    data: &[T],
    data_shape: &Shape,
    updates: Updates<'_, T>,
    index_shape: &Shape,
    axis: usize,
    out: &mut [T],
) -> Result<(), CpuError> {
    out.copy_from_slice(data.get(..out.len()).ok_or(CpuError::CorruptPlan)?);
    let Updates {
        indices,
        values,
        reduction,
    } = updates;
    for_each_target(data_shape, indices, index_shape, axis, |p, at| {
        let u = *values.get(p).ok_or(CpuError::CorruptPlan)?;
        let slot = out.get_mut(at).ok_or(CpuError::CorruptPlan)?;
        *slot = slot.combine(u, reduction);
        Ok(())
    })
}

/// The layout of a GatherND/ScatterND: `batch` leading dims shared by data and indices,
/// `tuples` index tuples of length `q` per batch, each selecting a slice of `slice` elements.
#[derive(Clone, Copy, Debug)]
pub struct NdLayout {
    /// Product of the shared leading dims.
    pub batch: usize,
    /// Index tuples per batch.
    pub tuples: usize,
    /// Elements of data per batch.
    pub batch_elements: usize,
    /// Elements per selected slice.
    pub slice: usize,
}

impl NdLayout {
    /// The data offset of tuple `t` of batch `b` (its `q` indices start at `t · q`).
    fn offset(
        &self,
        data_shape: &Shape,
        batch_dims: usize,
        q: usize,
        indices: Indices<'_>,
        t: usize,
    ) -> Result<usize, CpuError> {
        let mut offset = 0;
        let mut stride = self.batch_elements;
        for j in 0..q {
            let len = data_shape.dim(batch_dims + j);
            stride /= len.max(1);
            offset += indices.resolve(t * q + j, len)? * stride;
        }
        Ok(offset)
    }
}

/// ONNX GatherND: each index tuple copies one slice of `data` to `out`.
pub fn gather_nd<T: Copy>(
    data: &[T],
    data_shape: &Shape,
    batch_dims: usize,
    q: usize,
    layout: NdLayout,
    indices: Indices<'_>,
    out: &mut [T],
) -> Result<(), CpuError> {
    let n = layout.slice;
    for b in 0..layout.batch {
        for t in 0..layout.tuples {
            let tuple = b * layout.tuples + t;
            let at = layout.offset(data_shape, batch_dims, q, indices, tuple)?;
            let start = b * layout.batch_elements + at;
            let src = data.get(start..start + n).ok_or(CpuError::CorruptPlan)?;
            let dst = out
                .get_mut(tuple * n..(tuple + 1) * n)
                .ok_or(CpuError::CorruptPlan)?;
            dst.copy_from_slice(src);
        }
    }
    Ok(())
}

/// ONNX ScatterND: `out = data`, then each index tuple's slice combined with its updates.
pub fn scatter_nd<T: Combine>(
    data: &[T],
    data_shape: &Shape,
    q: usize,
    layout: NdLayout,
    updates: Updates<'_, T>,
    out: &mut [T],
) -> Result<(), CpuError> {
    let Updates {
        indices,
        values: updates,
        reduction,
    } = updates;
    out.copy_from_slice(data.get(..out.len()).ok_or(CpuError::CorruptPlan)?);
    let n = layout.slice;
    for t in 0..layout.tuples {
        let at = layout.offset(data_shape, 0, q, indices, t)?;
        let src = updates
            .get(t * n..(t + 1) * n)
            .ok_or(CpuError::CorruptPlan)?;
        let dst = out.get_mut(at..at + n).ok_or(CpuError::CorruptPlan)?;
        for (d, &u) in dst.iter_mut().zip(src) {
            *d = d.combine(u, reduction);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn gather_and_scatter_elements_follow_the_onnx_examples() {
        let data = [1.0f32, 2.0, 3.0, 4.0];
        let idx = [0i64, 0, 1, 0];
        let mut out = [0.0f32; 4];
        let s = shape(&[2, 2]);
        gather_elements(&data, &s, Indices::I64(&idx), &s, 1, &mut out).unwrap();
        assert_eq!(out, [1.0, 1.0, 4.0, 3.0]);
        let bad = [0i32, 2, 0, 0];
        assert_eq!(
            gather_elements(&data, &s, Indices::I32(&bad), &s, 1, &mut out),
            Err(CpuError::IndexOutOfRange { index: 2, len: 2 })
        );
        let data = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        let idx = [1i64, 1];
        let up = [1.1f32, 2.1];
        let mut out = [0.0f32; 5];
        let (ds, is) = (shape(&[1, 5]), shape(&[1, 2]));
        let u = |indices, reduction| Updates {
            indices,
            values: &up,
            reduction,
        };
        let add = u(Indices::I64(&idx), Reduction::Add);
        scatter_elements(&data, &ds, add, &is, 1, &mut out).unwrap();
        assert_eq!(out, [1.0, 5.2, 3.0, 4.0, 5.0]);
        let neg = [-1i64, -5];
        let replace = u(Indices::I64(&neg), Reduction::None);
        scatter_elements(&data, &ds, replace, &is, 1, &mut out).unwrap();
        assert_eq!(out, [2.1, 2.0, 3.0, 4.0, 1.1]);
    }

    #[test]
    fn nd_gathers_and_scatters_slices() {
        // data [2, 2], indices [[0, 0], [1, 1]] -> [data[0,0], data[1,1]].
        let data = [0u32, 1, 2, 3];
        let s = shape(&[2, 2]);
        let layout = NdLayout {
            batch: 1,
            tuples: 2,
            batch_elements: 4,
            slice: 1,
        };
        let idx = [0i64, 0, 1, 1];
        let mut out = [9u32; 2];
        gather_nd(&data, &s, 0, 2, layout, Indices::I64(&idx), &mut out).unwrap();
        assert_eq!(out, [0, 3]);
        // indices [[1]] selects row 1 (slice of 2); scatter multiplies it.
        let rows = NdLayout {
            batch: 1,
            tuples: 1,
            batch_elements: 4,
            slice: 2,
        };
        let data = [1.0f32, 2.0, 3.0, 4.0];
        let mut out = [0.0f32; 4];
        let mul = Updates {
            indices: Indices::I32(&[1]),
            values: &[10.0, 100.0],
            reduction: Reduction::Mul,
        };
        scatter_nd(&data, &s, 1, rows, mul, &mut out).unwrap();
        assert_eq!(out, [1.0, 2.0, 30.0, 400.0]);
        let bad = Updates {
            indices: Indices::I32(&[2]),
            values: &[1.0, 1.0],
            reduction: Reduction::None,
        };
        assert_eq!(
            scatter_nd(&data, &s, 1, rows, bad, &mut out),
            Err(CpuError::IndexOutOfRange { index: 2, len: 2 })
        );
    }
}
