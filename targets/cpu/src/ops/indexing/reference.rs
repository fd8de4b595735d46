//! Data-dependent indexing: GatherElements, ScatterElements, GatherND and ScatterND. Every
//! index is read from a tensor at run time, so each is checked (negative ones count from the
//! end) and an out-of-range one is an error, never an out-of-bounds access.

use crate::base::elements::{copy_element, elements, elements_mut};
use crate::base::index::for_each_index;
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

/// `slot ⊕ update` for f32 elements.
fn combine_f32(slot: f32, update: f32, reduction: Reduction) -> f32 {
    match reduction {
        Reduction::None => update,
        Reduction::Add => slot + update,
        Reduction::Mul => slot * update,
        Reduction::Max => slot.max(update),
        Reduction::Min => slot.min(update),
    }
}

/// Combines the element `update` into the element `slot` (both `size` bytes): replacement for
/// every type, the f32 reductions on 4-byte elements (the verifier allows them on float32
/// only); a reduction on another size leaves the slot as it was.
#[inline(always)]
fn combine(slot: &mut [u8], update: &[u8], reduction: Reduction) {
    if reduction == Reduction::None {
        copy_element(slot, update);
    } else if let (Ok(s), Ok(u)) = (<&mut [u8; 4]>::try_from(slot), <&[u8; 4]>::try_from(update)) {
        let v = combine_f32(f32::from_ne_bytes(*s), f32::from_ne_bytes(*u), reduction);
        *s = v.to_ne_bytes();
    }
}

/// What a scatter writes: its indices, the updates (elements of the data's size) and how they
/// combine.
#[derive(Clone, Copy)]
pub struct Updates<'a> {
    /// Where.
    pub indices: Indices<'a>,
    /// What.
    pub values: &'a [u8],
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
    let (Some(slot), Some(&stride)) = (moved.get_mut(axis), strides.get(axis)) else {
        return Err(CpuError::CorruptPlan);
    };
    *slot = 0;
    let mut result = Ok(());
    let mut p = 0;
    for_each_index(index_shape.dims(), [&moved], |[base]| {
        if result.is_ok() {
            result = indices
                .resolve(p, len)
                .and_then(|i| f(p, base + i * stride));
        }
        p += 1;
    });
    result
}

/// `out[p] = data[p with axis ← indices[p]]` over the positions `p` of `index_shape`;
/// elements of `size` bytes.
pub fn gather_elements(
    data: &[u8],
    size: usize,
    data_shape: &Shape,
    indices: Indices<'_>,
    index_shape: &Shape,
    axis: usize,
    out: &mut [u8],
) -> Result<(), CpuError> {
    for_each_target(data_shape, indices, index_shape, axis, |p, at| {
        let v = elements(data, at, 1, size).ok_or(CpuError::CorruptPlan)?;
        copy_element(
            elements_mut(out, p, 1, size).ok_or(CpuError::CorruptPlan)?,
            v,
        );
        Ok(())
    })
}

/// `out = data`, then `out[p with axis ← indices[p]] ⊕= updates[p]` for each position `p`;
/// elements of `size` bytes.
pub fn scatter_elements(
    data: &[u8],
    size: usize,
    data_shape: &Shape,
    updates: Updates<'_>,
    index_shape: &Shape,
    axis: usize,
    out: &mut [u8],
) -> Result<(), CpuError> {
    out.copy_from_slice(data.get(..out.len()).ok_or(CpuError::CorruptPlan)?);
    let Updates {
        indices,
        values,
        reduction,
    } = updates;
    for_each_target(data_shape, indices, index_shape, axis, |p, at| {
        let u = elements(values, p, 1, size).ok_or(CpuError::CorruptPlan)?;
        let slot = elements_mut(out, at, 1, size).ok_or(CpuError::CorruptPlan)?;
        combine(slot, u, reduction);
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

/// ONNX GatherND: each index tuple copies one slice of `data` to `out`; elements of `size`
/// bytes.
#[allow(clippy::too_many_arguments)]
pub fn gather_nd(
    data: &[u8],
    size: usize,
    data_shape: &Shape,
    batch_dims: usize,
    q: usize,
    layout: NdLayout,
    indices: Indices<'_>,
    out: &mut [u8],
) -> Result<(), CpuError> {
    let n = layout.slice;
    for b in 0..layout.batch {
        for t in 0..layout.tuples {
            let tuple = b * layout.tuples + t;
            let at = layout.offset(data_shape, batch_dims, q, indices, tuple)?;
            let src = elements(data, b * layout.batch_elements + at, n, size);
            let dst = elements_mut(out, tuple * n, n, size);
            let (Some(src), Some(dst)) = (src, dst) else {
                return Err(CpuError::CorruptPlan);
            };
            dst.copy_from_slice(src);
        }
    }
    Ok(())
}

/// ONNX ScatterND: `out = data`, then each index tuple's slice combined with its updates;
/// elements of `size` bytes.
pub fn scatter_nd(
    data: &[u8],
    size: usize,
    data_shape: &Shape,
    q: usize,
    layout: NdLayout,
    updates: Updates<'_>,
    out: &mut [u8],
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
        let src = elements(updates, t * n, n, size);
        let dst = elements_mut(out, at, n, size);
        let (Some(src), Some(dst), Some(width)) = (src, dst, core::num::NonZeroUsize::new(size))
        else {
            return Err(CpuError::CorruptPlan);
        };
        if reduction == Reduction::None {
            dst.copy_from_slice(src);
        } else {
            for (d, u) in dst
                .chunks_exact_mut(width.get())
                .zip(src.chunks_exact(width.get()))
            {
                combine(d, u, reduction);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::element_ids::{decode, encode, flatten, generator, unflatten};
    extern crate std;
    use std::vec::Vec;

    fn shape(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    fn bytes<T: bytemuck::Pod>(xs: &[T]) -> &[u8] {
        bytemuck::cast_slice(xs)
    }

    fn floats(xs: &[u8]) -> Vec<f32> {
        xs.chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn gather_and_scatter_elements_follow_the_onnx_examples() {
        let data = [1.0f32, 2.0, 3.0, 4.0];
        let idx = [0i64, 0, 1, 0];
        let mut out = [0u8; 16];
        let s = shape(&[2, 2]);
        gather_elements(bytes(&data), 4, &s, Indices::I64(&idx), &s, 1, &mut out).unwrap();
        assert_eq!(floats(&out), [1.0, 1.0, 4.0, 3.0]);
        let bad = [0i32, 2, 0, 0];
        assert_eq!(
            gather_elements(bytes(&data), 4, &s, Indices::I32(&bad), &s, 1, &mut out),
            Err(CpuError::IndexOutOfRange { index: 2, len: 2 })
        );
        let data = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        let idx = [1i64, 1];
        let up = [1.1f32, 2.1];
        let mut out = [0u8; 20];
        let (ds, is) = (shape(&[1, 5]), shape(&[1, 2]));
        let u = |indices, reduction| Updates {
            indices,
            values: bytes(&up),
            reduction,
        };
        let add = u(Indices::I64(&idx), Reduction::Add);
        scatter_elements(bytes(&data), 4, &ds, add, &is, 1, &mut out).unwrap();
        assert_eq!(floats(&out), [1.0, 5.2, 3.0, 4.0, 5.0]);
        let neg = [-1i64, -5];
        let replace = u(Indices::I64(&neg), Reduction::None);
        scatter_elements(bytes(&data), 4, &ds, replace, &is, 1, &mut out).unwrap();
        assert_eq!(floats(&out), [2.1, 2.0, 3.0, 4.0, 1.1]);
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
        let dst = bytemuck::cast_slice_mut(&mut out);
        gather_nd(bytes(&data), 4, &s, 0, 2, layout, Indices::I64(&idx), dst).unwrap();
        assert_eq!(out, [0, 3]);
        // indices [[1]] selects row 1 (slice of 2); scatter multiplies it.
        let rows = NdLayout {
            batch: 1,
            tuples: 1,
            batch_elements: 4,
            slice: 2,
        };
        let data = [1.0f32, 2.0, 3.0, 4.0];
        let mut out = [0u8; 16];
        let mul = Updates {
            indices: Indices::I32(&[1]),
            values: bytes(&[10.0f32, 100.0]),
            reduction: Reduction::Mul,
        };
        scatter_nd(bytes(&data), 4, &s, 1, rows, mul, &mut out).unwrap();
        assert_eq!(floats(&out), [1.0, 2.0, 30.0, 400.0]);
        let bad = Updates {
            indices: Indices::I32(&[2]),
            values: bytes(&[1.0f32, 1.0]),
            reduction: Reduction::None,
        };
        assert_eq!(
            scatter_nd(bytes(&data), 4, &s, 1, rows, bad, &mut out),
            Err(CpuError::IndexOutOfRange { index: 2, len: 2 })
        );
    }

    /// GatherElements, ScatterElements (replacement), GatherND and ScatterND over random
    /// shapes, axes and indices (negative ones too), at element sizes 1, 2, 4 and 8, against
    /// each op's definition on element ids.
    #[test]
    fn indexing_matches_its_definition_at_every_element_size() {
        let mut next = generator(0x2545_f491);
        for case in 0..400 {
            let size = [1, 2, 4, 8][case % 4];
            let rank = 1 + next(3);
            let dims: Vec<usize> = (0..rank).map(|_| 1 + next(4)).collect();
            let count: usize = dims.iter().product();
            let ids: Vec<usize> = (0..count).map(|i| (i * 5 + case) % 36).collect();
            let data = encode(&ids, size);
            let data_shape = shape(&dims);
            let axis = next(rank);
            let len = dims[axis];
            // Elements: an index tensor of the data's shape but a random length on `axis`.
            let mut idims = dims.clone();
            idims[axis] = 1 + next(3);
            let icount: usize = idims.iter().product();
            let raw: Vec<i64> = (0..icount)
                .map(|_| next(len) as i64 - if next(2) == 1 { len as i64 } else { 0 })
                .collect();
            let resolved = |r: i64| if r < 0 { r + len as i64 } else { r } as usize;
            let ishape = shape(&idims);
            let mut out = std::vec![0u8; icount * size];
            gather_elements(
                &data,
                size,
                &data_shape,
                Indices::I64(&raw),
                &ishape,
                axis,
                &mut out,
            )
            .unwrap();
            let want: Vec<usize> = (0..icount)
                .map(|p| {
                    let mut at = unflatten(p, &idims);
                    at[axis] = resolved(raw[p]);
                    ids[flatten(&at, &dims)]
                })
                .collect();
            assert_eq!(decode(&out, size), want, "gather_elements case {case}");
            // Scatter: distinct targets per update (the last one wins otherwise), so take the
            // index tensor as a prefix of a permutation along the axis.
            let mut sdims = dims.clone();
            sdims[axis] = 1 + next(len);
            let scount: usize = sdims.iter().product();
            let shift = next(len);
            let sraw: Vec<i64> = (0..scount)
                .map(|p| ((unflatten(p, &sdims)[axis] + shift) % len) as i64)
                .collect();
            let uids: Vec<usize> = (0..scount).map(|p| 40 + p % 30).collect();
            let updates = encode(&uids, size);
            let mut out = std::vec![0u8; count * size];
            let u = Updates {
                indices: Indices::I64(&sraw),
                values: &updates,
                reduction: Reduction::None,
            };
            scatter_elements(&data, size, &data_shape, u, &shape(&sdims), axis, &mut out).unwrap();
            let mut want = ids.clone();
            for p in 0..scount {
                let mut at = unflatten(p, &sdims);
                at[axis] = sraw[p] as usize;
                want[flatten(&at, &dims)] = uids[p];
            }
            assert_eq!(decode(&out, size), want, "scatter_elements case {case}");
            // ND: tuples of q leading coordinates select slices of the rest.
            let q = 1 + next(rank);
            let slice: usize = dims[q..].iter().product();
            let tuples = 1 + next(3);
            let coords: Vec<usize> = (0..tuples)
                .flat_map(|_| dims[..q].to_vec())
                .map(&mut next)
                .collect();
            let nd_raw: Vec<i32> = coords.iter().map(|&c| c as i32).collect();
            let layout = NdLayout {
                batch: 1,
                tuples,
                batch_elements: count,
                slice,
            };
            let mut out = std::vec![0u8; tuples * slice * size];
            gather_nd(
                &data,
                size,
                &data_shape,
                0,
                q,
                layout,
                Indices::I32(&nd_raw),
                &mut out,
            )
            .unwrap();
            let base = |t: usize| flatten(&coords[t * q..(t + 1) * q], &dims[..q]) * slice;
            let want: Vec<usize> = (0..tuples)
                .flat_map(|t| (0..slice).map(move |k| (t, k)))
                .map(|(t, k)| ids[base(t) + k])
                .collect();
            assert_eq!(decode(&out, size), want, "gather_nd case {case}");
            let nd_updates: Vec<usize> = (0..tuples * slice).map(|i| 40 + i % 30).collect();
            let values = encode(&nd_updates, size);
            let u = Updates {
                indices: Indices::I32(&nd_raw),
                values: &values,
                reduction: Reduction::None,
            };
            let mut out = std::vec![0u8; count * size];
            scatter_nd(&data, size, &data_shape, q, layout, u, &mut out).unwrap();
            let mut want = ids.clone();
            for t in 0..tuples {
                for k in 0..slice {
                    want[base(t) + k] = nd_updates[t * slice + k];
                }
            }
            assert_eq!(decode(&out, size), want, "scatter_nd case {case}");
        }
    }
}
