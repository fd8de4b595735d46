//! Indexing steps (Gather, GatherElements, ScatterElements, GatherND and ScatterND): the family's operands taken from the carved step, its
//! kernels in [`crate::kernels::movement`] and [`crate::kernels::indexing`].

use super::*;
use crate::kernels::{indexing, movement};

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
    let bad = |_| CpuError::Misaligned;
    let indices: &[u8] = idx_bytes;
    match idx.dtype {
        DType::I64 if selects_dtype(OPS, DType::I64) => {
            let ix: &[i64] = bytemuck::try_cast_slice(indices).map_err(bad)?;
            gather_typed::<OPS>(x, src, axis, ix.iter().copied(), dst)
        }
        DType::I32 if selects_dtype(OPS, DType::I32) => {
            let ix: &[i32] = bytemuck::try_cast_slice(indices).map_err(bad)?;
            gather_typed::<OPS>(x, src, axis, ix.iter().map(|&v| v as i64), dst)
        }
        _ => Err(CpuError::Unsupported),
    }
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
