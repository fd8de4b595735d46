//! The rules of reductions, arg-extremes, TopK, CumSum and Det.

use super::common::*;
use ferrite_hal::{selects, Op, OpKind};

/// Checks a step of this family (the kinds `OPS` selects; any other is refused).
pub(super) fn check<const OPS: Selection>(step: &Step<'_>, fetched: &Fetched) -> Rule {
    operands!(step, fetched => input, output, optional, n_in, n_out);
    match step.op {
        Op::ArgMax(a) | Op::ArgMin(a)
            if selects(OPS, OpKind::ArgMax) || selects(OPS, OpKind::ArgMin) =>
        {
            ensure(n_in == 1 && n_out == 1, "ArgMax/ArgMin take 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x.dtype])?;
            ensure(y.dtype == DType::I64, "ArgMax/ArgMin write int64")?;
            let rank = x.shape.rank();
            ensure(a.axis < rank, "ArgMax/ArgMin axis")?;
            let d = x.shape.dims_checked();
            let kept = y.shape.rank() == rank
                && (0..rank).all(|i| {
                    Some(y.shape.dim_checked(i)) == if i == a.axis { Some(1) } else { at(d, i) }
                });
            let removed = y.shape.rank() + 1 == rank
                && same(d.get(..a.axis), y.shape.dims_checked().get(..a.axis))
                && same(d.get(a.axis + 1..), y.shape.dims_checked().get(a.axis..));
            ensure(kept || removed, "ArgMax/ArgMin output shape")?;
            // An empty axis has no index to report.
            ensure(
                at(d, a.axis).is_some_and(|n| n > 0) || y.elements() == 0,
                "ArgMax/ArgMin of an empty axis",
            )
        }
        Op::Reduce { axes, .. } if selects(OPS, OpKind::Reduce) => {
            ensure(n_in == 1 && n_out == 1, "Reduce takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x.dtype, y.dtype])?;
            let rank = x.shape.rank();
            ensure(rank < 32 && axes >> rank == 0, "Reduce axes")?;
            let kept = x
                .shape
                .dims_checked()
                .iter()
                .enumerate()
                .filter(|(i, _)| axes & (1 << i) == 0)
                .map(|(_, d)| *d);
            let keep_dims = x.shape.dims_checked().iter().enumerate().map(|(i, d)| {
                if axes & (1 << i) != 0 {
                    1
                } else {
                    *d
                }
            });
            let squeezed = y.shape.rank() == kept.clone().count()
                && kept.zip(y.shape.dims_checked()).all(|(a, b)| a == *b);
            let kept_form = y.shape.rank() == rank
                && keep_dims.zip(y.shape.dims_checked()).all(|(a, b)| a == *b);
            ensure(squeezed || kept_form, "Reduce output shape")
        }
        Op::TopK { axis, .. } if selects(OPS, OpKind::TopK) => {
            ensure(n_in == 1 && n_out == 2, "TopK takes 1 input, 2 outputs")?;
            let (x, values, indices) = (input(0)?, output(0)?, output(1)?);
            same_dtype(&[x.dtype, values.dtype])?;
            ensure(
                x.dtype == DType::F32 || x.dtype.is_integer(),
                "TopK compares floats or integers",
            )?;
            ensure(indices.dtype == DType::I64, "TopK indices are int64")?;
            let rank = x.shape.rank();
            ensure(axis < rank, "TopK axis")?;
            ensure(
                values.shape == indices.shape
                    && values.shape.rank() == rank
                    && values.shape.dim_checked(axis) <= x.shape.dim_checked(axis)
                    && (0..rank).all(|d| {
                        d == axis || values.shape.dim_checked(d) == x.shape.dim_checked(d)
                    }),
                "TopK output shapes",
            )
        }
        Op::CumSum { axis, .. } if selects(OPS, OpKind::CumSum) => {
            ensure(n_in == 1 && n_out == 1, "CumSum takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x.dtype, y.dtype])?;
            ensure(
                matches!(x.dtype, DType::F32 | DType::I32 | DType::I64),
                "CumSum is on float32, int32 or int64",
            )?;
            ensure(axis < x.shape.rank() && x.shape == y.shape, "CumSum shapes")
        }
        Op::TreeEnsemble(t) if selects(OPS, OpKind::TreeEnsemble) => {
            ensure(
                n_in == 6 && n_out == 1,
                "a tree ensemble takes x and its five tables",
            )?;
            let (x, nodes, thresholds, roots) = (input(0)?, input(1)?, input(2)?, input(3)?);
            let (targets, weights, y) = (input(4)?, input(5)?, output(0)?);
            all_f32(&[x.dtype, thresholds.dtype, weights.dtype, y.dtype])?;
            ensure(
                [nodes, roots, targets]
                    .iter()
                    .all(|t| t.dtype == DType::I32),
                "tree tables of indices are int32",
            )?;
            let (xd, nd) = (x.shape.dims_checked(), nodes.shape.dims_checked());
            ensure(xd.len() == 2, "tree ensemble input is [N, features]")?;
            ensure(
                nd.len() == 2 && at(nd, 1) == Some(4),
                "tree node table is [nodes, 4]",
            )?;
            ensure(
                thresholds.shape.dims_checked() == [nodes.shape.dim_checked(0)],
                "one threshold per tree node",
            )?;
            ensure(
                roots.shape.rank() == 1 && roots.elements() >= 1,
                "a tree ensemble has trees",
            )?;
            ensure(
                targets.shape.rank() == 1 && weights.shape == targets.shape,
                "one weight per tree vote",
            )?;
            ensure(
                y.shape.dims_checked() == [x.shape.dim_checked(0), t.targets],
                "tree ensemble output is [N, targets]",
            )
        }
        Op::Det if selects(OPS, OpKind::Det) => {
            ensure(n_in == 1 && n_out == 1, "Det takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x.dtype, y.dtype])?;
            let r = x.shape.rank();
            ensure(
                r >= 2 && x.shape.dim_checked(r - 1) == x.shape.dim_checked(r - 2),
                "Det input is square",
            )?;
            ensure(
                y.shape.rank() == r - 2
                    && Some(y.shape.dims_checked()) == x.shape.dims_checked().get(..r - 2),
                "Det output shape",
            )?;
            let n = x.shape.dim_checked(r - 1);
            require_scratch(step.scratch, 2 * n * n, "Det needs a scratch of 2·n·n")
        }
        _ => Err(why(
            "this op kind is not linked into this build (its OPS selection)",
        )),
    }
}
