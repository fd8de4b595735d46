//! The rules of gathers and scatters.

use super::common::*;
use ferrite_hal::{selects, Op, OpKind};

/// Checks a step of this family (the kinds `OPS` selects; any other is refused).
pub(super) fn check<const OPS: Selection>(step: &Step<'_>, fetched: &Fetched) -> Rule {
    operands!(step, fetched => input, output, optional, n_in, n_out);
    match step.op {
        Op::Gather { axis } if selects(OPS, OpKind::Gather) => {
            ensure(n_in == 2 && n_out == 1, "Gather takes 2 inputs")?;
            let (data, idx, y) = (input(0)?, input(1)?, output(0)?);
            same_dtype(&[data.dtype, y.dtype])?;
            ensure(
                matches!(idx.dtype, DType::I32 | DType::I64),
                "Gather indices type",
            )?;
            let r = data.shape.rank();
            ensure(axis < r, "Gather axis")?;
            let d = data.shape.dims_checked();
            let expected = d
                .get(..axis)
                .unwrap_or(&[])
                .iter()
                .chain(idx.shape.dims_checked())
                .chain(d.get(axis + 1..).unwrap_or(&[]));
            ensure(
                y.shape.rank() == r - 1 + idx.shape.rank()
                    && expected.zip(y.shape.dims_checked()).all(|(a, b)| a == b),
                "Gather output shape",
            )
        }
        Op::GatherElements { axis } if selects(OPS, OpKind::GatherElements) => {
            ensure(n_in == 2 && n_out == 1, "GatherElements takes 2 inputs")?;
            let (data, idx, y) = (input(0)?, input(1)?, output(0)?);
            same_dtype(&[data.dtype, y.dtype])?;
            is_index(idx)?;
            let rank = data.shape.rank();
            ensure(
                axis < rank && idx.shape.rank() == rank && y.shape == idx.shape,
                "GatherElements shapes",
            )?;
            within(idx, data, axis)
        }
        Op::ScatterElements { axis, reduction } if selects(OPS, OpKind::ScatterElements) => {
            ensure(n_in == 3 && n_out == 1, "ScatterElements takes 3 inputs")?;
            let (data, idx, up, y) = (input(0)?, input(1)?, input(2)?, output(0)?);
            same_dtype(&[data.dtype, up.dtype, y.dtype])?;
            is_index(idx)?;
            check_reduction(reduction, data)?;
            let rank = data.shape.rank();
            ensure(
                axis < rank
                    && idx.shape == up.shape
                    && idx.shape.rank() == rank
                    && y.shape == data.shape,
                "ScatterElements shapes",
            )?;
            within(idx, data, axis)
        }
        Op::GatherNd { batch_dims } if selects(OPS, OpKind::GatherNd) => {
            ensure(n_in == 2 && n_out == 1, "GatherND takes 2 inputs")?;
            let (data, idx, y) = (input(0)?, input(1)?, output(0)?);
            same_dtype(&[data.dtype, y.dtype])?;
            is_index(idx)?;
            let q = nd_depth(data, idx, batch_dims)?;
            let (r, m) = (data.shape.rank(), idx.shape.rank());
            let mut want = [0usize; MAX_RANK];
            let mut n = 0;
            let outer = idx
                .shape
                .dims_checked()
                .get(..m - 1)
                .ok_or(why("GatherND index rank"))?;
            let inner = data.shape.dims_checked().get(batch_dims + q..r);
            for d in outer
                .iter()
                .chain(inner.ok_or(why("GatherND index tuple length"))?)
            {
                *want.get_mut(n).ok_or(why("GatherND output rank"))? = *d;
                n += 1;
            }
            ensure(
                y.shape.dims_checked() == &want[..n],
                "GatherND output shape",
            )
        }
        Op::ScatterNd { reduction } if selects(OPS, OpKind::ScatterNd) => {
            ensure(n_in == 3 && n_out == 1, "ScatterND takes 3 inputs")?;
            let (data, idx, up, y) = (input(0)?, input(1)?, input(2)?, output(0)?);
            same_dtype(&[data.dtype, up.dtype, y.dtype])?;
            is_index(idx)?;
            check_reduction(reduction, data)?;
            let q = nd_depth(data, idx, 0)?;
            let m = idx.shape.rank();
            let want_rank = m - 1 + data.shape.rank() - q;
            ensure(
                up.shape.rank() == want_rank
                    && same(
                        up.shape.dims_checked().get(..m - 1),
                        idx.shape.dims_checked().get(..m - 1),
                    )
                    && same(
                        up.shape.dims_checked().get(m - 1..),
                        data.shape.dims_checked().get(q..),
                    ),
                "ScatterND updates shape",
            )?;
            ensure(y.shape == data.shape, "ScatterND output shape")
        }
        _ => Err(why(
            "this op kind is not linked into this build (its OPS selection)",
        )),
    }
}

/// Element-wise indices are no larger than the data on every axis but `axis`.
fn within(idx: &TensorDesc, data: &TensorDesc, axis: usize) -> Rule {
    ensure(
        (0..data.shape.rank())
            .all(|d| d == axis || idx.shape.dim_checked(d) <= data.shape.dim_checked(d)),
        "indices are larger than the data",
    )
}

/// Index tensors are int32 or int64.
fn is_index(t: &TensorDesc) -> Rule {
    ensure(
        matches!(t.dtype, DType::I32 | DType::I64),
        "indices are int32 or int64",
    )
}

/// Scatter reductions other than replacement compute in f32.
fn check_reduction(reduction: ferrite_hal::op::Reduction, data: &TensorDesc) -> Rule {
    ensure(
        reduction == ferrite_hal::op::Reduction::None || data.dtype == DType::F32,
        "scatter reductions are on float32",
    )
}

/// The index-tuple length `q` of GatherND/ScatterND indices, checked against `data`.
fn nd_depth(data: &TensorDesc, idx: &TensorDesc, batch_dims: usize) -> Result<usize, &'static str> {
    let (r, m) = (data.shape.rank(), idx.shape.rank());
    ensure(
        m >= 1 && batch_dims < m && batch_dims < r.max(1),
        "ND index ranks",
    )?;
    let q = idx.shape.dim_checked(m - 1);
    ensure(q >= 1 && batch_dims + q <= r, "ND index tuple length")?;
    ensure(
        same(
            data.shape.dims_checked().get(..batch_dims),
            idx.shape.dims_checked().get(..batch_dims),
        ),
        "ND batch dims differ",
    )?;
    Ok(q)
}
