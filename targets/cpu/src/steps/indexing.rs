//! Indexing steps (Gather, GatherElements, ScatterElements, GatherND and ScatterND): the family's operands taken from the carved step, its
//! kernels in [`crate::ops::movement::reference`] and [`crate::ops::indexing::reference`].

use super::operands::*;
use crate::ops::indexing::reference as indexing;
use crate::ops::movement::reference as movement;

/// Runs a step of this family with the kernels `OPS` selects.
#[inline(always)]
pub(super) fn run<const OPS: Selection>(
    step: &Step<'_>,
    #[allow(unused_variables)] out_desc: &TensorDesc,
    view: &Readable<'_>,
    out: &mut [u8],
    #[allow(unused_variables)] scratch: Option<&mut [u8]>,
    #[allow(unused_variables)] covered_int8: Selection,
) -> Result<(), CpuError> {
    step_inputs!(step, view => f32_in, optional_f32, bytes_in);
    match step.op {
        Op::GatherElements { axis } if selects(OPS, OpKind::GatherElements) => {
            input!(step, x = 0);
            input!(step, idx = 1);
            let (bytes, indices) = (view.bytes(x)?, index_view(view, idx)?);
            let size = element_size::<OPS>(x.dtype)?;
            indexing::gather_elements(bytes, size, &x.shape, indices, &idx.shape, axis, out)?;
        }
        Op::ScatterElements { axis, reduction } if selects(OPS, OpKind::ScatterElements) => {
            input!(step, x = 0);
            input!(step, idx = 1);
            input!(step, up = 2);
            let (bytes, indices) = (view.bytes(x)?, index_view(view, idx)?);
            let size = element_size::<OPS>(x.dtype)?;
            let u = indexing::Updates {
                indices,
                values: view.bytes(up)?,
                reduction,
            };
            indexing::scatter_elements(bytes, size, &x.shape, u, &idx.shape, axis, out)?;
        }
        Op::GatherNd { batch_dims } if selects(OPS, OpKind::GatherNd) => {
            input!(step, x = 0);
            input!(step, idx = 1);
            let (bytes, indices) = (view.bytes(x)?, index_view(view, idx)?);
            let (q, layout) = nd_layout(x, idx, batch_dims);
            let size = element_size::<OPS>(x.dtype)?;
            indexing::gather_nd(bytes, size, &x.shape, batch_dims, q, layout, indices, out)?;
        }
        Op::ScatterNd { reduction } if selects(OPS, OpKind::ScatterNd) => {
            input!(step, x = 0);
            input!(step, idx = 1);
            input!(step, up = 2);
            let (bytes, indices) = (view.bytes(x)?, index_view(view, idx)?);
            let (q, layout) = nd_layout(x, idx, 0);
            let size = element_size::<OPS>(x.dtype)?;
            let u = indexing::Updates {
                indices,
                values: view.bytes(up)?,
                reduction,
            };
            indexing::scatter_nd(bytes, size, &x.shape, q, layout, u, out)?;
        }
        Op::Gather { axis } if selects(OPS, OpKind::Gather) => {
            input!(step, x = 0);
            input!(step, idx = 1);
            let bytes = view.bytes(x)?;
            let idx_bytes = view.bytes(idx)?;
            gather::<OPS>(x, bytes, axis, idx, idx_bytes, out)?;
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}

/// An index tensor's elements (the verifier allows int32 and int64).
fn index_view<'x>(view: &Readable<'x>, t: &TensorDesc) -> Result<indexing::Indices<'x>, CpuError> {
    let bytes = view.bytes(t)?;
    match t.dtype {
        DType::I32 => Ok(indexing::Indices::I32(cast(bytes)?)),
        DType::I64 => Ok(indexing::Indices::I64(cast(bytes)?)),
        _ => Err(CpuError::Unsupported),
    }
}

/// The tuple length and layout of a GatherND/ScatterND (shapes checked by the verifier).
fn nd_layout(x: &TensorDesc, idx: &TensorDesc, batch_dims: usize) -> (usize, indexing::NdLayout) {
    let (r, m) = (x.shape.rank(), idx.shape.rank());
    let q = idx.shape.dim(m - 1);
    let batch = x.shape.product(0..batch_dims);
    let layout = indexing::NdLayout {
        batch,
        tuples: idx.shape.product(batch_dims..m - 1),
        batch_elements: x.shape.product(batch_dims..r),
        slice: x.shape.product(batch_dims + q..r),
    };
    (q, layout)
}

#[inline(always)]
fn gather<const OPS: Selection>(
    x: &TensorDesc,
    src: &[u8],
    axis: usize,
    idx: &TensorDesc,
    idx_bytes: &[u8],
    dst: &mut [u8],
) -> Result<(), CpuError> {
    // int64 or int32 indices read by their width: one gather for both.
    let width = match idx.dtype {
        DType::I64 if selects_dtype(OPS, DType::I64) => 8,
        DType::I32 if selects_dtype(OPS, DType::I32) => 4,
        _ => return Err(CpuError::Unsupported),
    };
    gather_typed::<OPS>(x, src, axis, index_values(idx_bytes, width), dst)
}

/// The signed little-endian integers of `width` bytes (4 or 8) in `bytes`, as i64.
fn index_values(bytes: &[u8], width: usize) -> impl Iterator<Item = i64> + Clone + '_ {
    bytes.chunks_exact(width.clamp(1, 8)).map(move |c| {
        let mut word = [0u8; 8];
        for (b, &v) in word.iter_mut().zip(c) {
            *b = v;
        }
        // Sign-extended from the element's top byte.
        let shift = 64 - 8 * c.len() as u32;
        (i64::from_le_bytes(word) << shift) >> shift
    })
}

#[inline(always)]
fn gather_typed<const OPS: Selection>(
    x: &TensorDesc,
    src: &[u8],
    axis: usize,
    ix: impl Iterator<Item = i64> + Clone,
    dst: &mut [u8],
) -> Result<(), CpuError> {
    let size = element_size::<OPS>(x.dtype)?;
    movement::gather(src, size, &x.shape, axis, ix, dst)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    /// int32 and int64 indices read back as their values, negative ones included.
    #[test]
    fn index_values_read_either_width() {
        let values = [0i64, 1, -1, 7, -8, i32::MAX as i64, i32::MIN as i64];
        let wide: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let narrow: Vec<u8> = values
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect();
        assert_eq!(super::index_values(&wide, 8).collect::<Vec<_>>(), values);
        assert_eq!(super::index_values(&narrow, 4).collect::<Vec<_>>(), values);
        let big = [i64::MIN, i64::MAX];
        let bytes: Vec<u8> = big.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(super::index_values(&bytes, 8).collect::<Vec<_>>(), big);
    }
}
