//! The rules of data movement (Transpose, Concat, Split, Slice, Pad, Copy, Expand, Resample, Trilu).

use super::common::*;
use ferrite_hal::{selects, Op, OpKind};

/// Checks a step of this family (the kinds `OPS` selects; any other is refused).
pub(super) fn check<const OPS: Selection>(step: &Step<'_>, fetched: &Fetched) -> Rule {
    operands!(step, fetched => input, output, optional, n_in, n_out);
    match step.op {
        Op::Transpose { perm } if selects(OPS, OpKind::Transpose) => {
            ensure(n_in == 1 && n_out == 1, "Transpose takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x.dtype, y.dtype])?;
            let rank = x.shape.rank();
            ensure(y.shape.rank() == rank, "Transpose rank")?;
            let mut seen = [false; MAX_RANK];
            for (axis, &p) in perm.iter().enumerate().take(rank) {
                let slot = seen.get_mut(p).filter(|s| p < rank && !**s);
                *slot.ok_or(why("Transpose perm is not a permutation"))? = true;
                ensure(
                    at(y.shape.dims_checked(), axis).is_some()
                        && at(y.shape.dims_checked(), axis) == at(x.shape.dims_checked(), p),
                    "Transpose output shape",
                )?;
            }
            Ok(())
        }
        Op::Concat { axis } if selects(OPS, OpKind::Concat) => {
            ensure(n_in >= 1 && n_out == 1, "Concat takes inputs and 1 output")?;
            let y = output(0)?;
            check_parts(step.inputs.iter(), y, axis)
        }
        Op::Split { axis } if selects(OPS, OpKind::Split) => {
            ensure(n_in == 1 && n_out >= 1, "Split takes 1 input")?;
            let x = input(0)?;
            check_parts(step.outputs.iter(), x, axis)
        }
        Op::Slice { starts, steps } if selects(OPS, OpKind::Slice) => {
            ensure(n_in == 1 && n_out == 1, "Slice takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x.dtype, y.dtype])?;
            ensure(x.shape.rank() == y.shape.rank(), "Slice rank")?;
            let axes = x.shape.dims_checked().iter().zip(y.shape.dims_checked());
            for ((&dim, &count), (&start, &step)) in axes.zip(starts.iter().zip(&steps)) {
                if count == 0 {
                    continue;
                }
                let dim = dim as isize;
                let first = start as isize;
                let last = (count as isize - 1)
                    .checked_mul(step)
                    .and_then(|d| d.checked_add(first))
                    .ok_or(why("Slice overflows"))?;
                ensure(
                    (0..dim).contains(&first) && (0..dim).contains(&last),
                    "Slice reads outside its input",
                )?;
            }
            Ok(())
        }
        Op::Pad {
            mode, begins, ends, ..
        } if selects(OPS, OpKind::Pad) => {
            ensure(n_in == 1 && n_out == 1, "Pad takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x.dtype, y.dtype])?;
            ensure(x.shape.rank() == y.shape.rank(), "Pad rank")?;
            for (axis, (&d, &want)) in x
                .shape
                .dims_checked()
                .iter()
                .zip(y.shape.dims_checked())
                .enumerate()
            {
                let (begin, end) = (
                    *begins.get(axis).ok_or(why("Pad rank"))?,
                    *ends.get(axis).ok_or(why("Pad rank"))?,
                );
                let out = d
                    .checked_add(begin)
                    .and_then(|v| v.checked_add(end))
                    .ok_or(why("Pad overflows"))?;
                ensure(out == want, "Pad output shape")?;
                let padded = begin + end > 0;
                match mode {
                    PadMode::Constant => {}
                    PadMode::Edge => ensure(!padded || d > 0, "edge padding of an empty axis")?,
                    PadMode::Reflect => ensure(
                        !padded || (begin < d && end < d),
                        "reflect padding larger than the axis",
                    )?,
                }
            }
            Ok(())
        }
        Op::Copy if selects(OPS, OpKind::Copy) => {
            ensure(n_in == 1 && n_out == 1, "Copy takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x.dtype, y.dtype])?;
            ensure(x.bytes == y.bytes, "Copy sizes differ")
        }
        Op::Expand if selects(OPS, OpKind::Expand) => {
            ensure(n_in == 1 && n_out == 1, "Expand takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x.dtype, y.dtype])?;
            ensure(
                broadcasts_to(&x.shape, &y.shape),
                "Expand output is not a broadcast of the input",
            )
        }
        Op::Resample { axis, .. } if selects(OPS, OpKind::Resample) => {
            ensure(n_in == 3 && n_out == 1, "Resample takes 3 inputs")?;
            let (x, idx, w, y) = (input(0)?, input(1)?, input(2)?, output(0)?);
            all_f32(&[x.dtype, w.dtype, y.dtype])?;
            ensure(idx.dtype == DType::I32, "Resample indices are int32")?;
            let rank = x.shape.rank();
            ensure(axis < rank && y.shape.rank() == rank, "Resample axis")?;
            ensure(
                idx.shape.rank() == 2 && idx.shape == w.shape && idx.shape.dim_checked(1) >= 1,
                "Resample tap tables are [n, taps]",
            )?;
            ensure(
                idx.shape.dim_checked(0) == y.shape.dim_checked(axis)
                    && (0..rank)
                        .all(|d| d == axis || x.shape.dim_checked(d) == y.shape.dim_checked(d)),
                "Resample output shape",
            )
        }
        Op::Trilu { .. } if selects(OPS, OpKind::Trilu) => {
            ensure(n_in == 1 && n_out == 1, "Trilu takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x.dtype, y.dtype])?;
            ensure(x.shape == y.shape, "Trilu output shape")?;
            ensure(x.shape.rank() >= 2, "Trilu input rank")
        }
        _ => Err(why(
            "this op kind is not linked into this build (its OPS selection)",
        )),
    }
}

/// `parts` concatenated along `axis` form `whole`.
fn check_parts(
    parts: impl Iterator<Item = Option<TensorDesc>>,
    whole: &TensorDesc,
    axis: usize,
) -> Rule {
    let rank = whole.shape.rank();
    ensure(axis < rank, "axis out of range")?;
    let mut total = 0usize;
    for part in parts {
        let part = part.ok_or(why("missing operand"))?;
        same_dtype(&[part.dtype, whole.dtype])?;
        ensure(part.shape.rank() == rank, "ranks differ")?;
        for a in 0..rank {
            if a != axis {
                ensure(
                    at(part.shape.dims_checked(), a).is_some()
                        && at(part.shape.dims_checked(), a) == at(whole.shape.dims_checked(), a),
                    "shapes differ off the axis",
                )?;
            }
        }
        total = total
            .checked_add(at(part.shape.dims_checked(), axis).ok_or(why("part rank"))?)
            .ok_or(why("overflow"))?;
    }
    ensure(
        Some(total) == at(whole.shape.dims_checked(), axis),
        "parts do not add up along the axis",
    )
}
