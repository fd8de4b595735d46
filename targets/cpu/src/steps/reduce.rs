//! Reduction steps (Reduce, ArgMax, ArgMin, TopK, CumSum, Det and TreeEnsemble): the family's operands taken from the carved step, its
//! kernels in [`crate::ops::reduce::reference`] and [`crate::ops::reduce::trees`].

use super::operands::*;
use crate::ops::elementwise::numeric;
use crate::ops::reduce::reference as reduce;
use crate::ops::reduce::trees;

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
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } if selects(OPS, OpKind::CumSum) => {
            input!(step, x = 0);
            let lanes = lanes(&x.shape, axis);
            let bytes = view.bytes(x)?;
            match x.dtype {
                DType::F32 => reduce::cumulative_sum(
                    f32s(bytes)?,
                    lanes,
                    exclusive,
                    reverse,
                    0.0,
                    |a, b| a + b,
                    f32s_mut(out)?,
                ),
                DType::I32 => reduce::cumulative_sum(
                    cast::<i32>(bytes)?,
                    lanes,
                    exclusive,
                    reverse,
                    0,
                    i32::wrapping_add,
                    cast_mut(out)?,
                ),
                DType::I64 => reduce::cumulative_sum(
                    cast::<i64>(bytes)?,
                    lanes,
                    exclusive,
                    reverse,
                    0,
                    i64::wrapping_add,
                    cast_mut(out)?,
                ),
                _ => return Err(CpuError::Unsupported),
            }
        }
        Op::Det if selects(OPS, OpKind::Det) => {
            input!(step, x = 0);
            let n = x.shape.dim(x.shape.rank() - 1);
            let scratch = cast_mut::<f64>(scratch.ok_or(CpuError::CorruptPlan)?)?;
            reduce::determinant(f32_in(0)?, n, scratch, f32s_mut(out)?);
        }
        Op::ArgMax(a) | Op::ArgMin(a)
            if selects(OPS, OpKind::ArgMax) || selects(OPS, OpKind::ArgMin) =>
        {
            input!(step, x_desc = 0);
            let lanes = lanes(&x_desc.shape, a.axis);
            let max = matches!(step.op, Op::ArgMax(_));
            reduce::arg_extreme(f32_in(0)?, lanes, max, a.last, cast_mut(out)?);
        }
        Op::Reduce { op, axes } if selects(OPS, OpKind::Reduce) => {
            input!(step, x = 0);
            reduce::reduce(op, f32_in(0)?, &x.shape, axes, f32s_mut(out)?);
        }
        Op::TreeEnsemble(e) if selects(OPS, OpKind::TreeEnsemble) => {
            input!(step, x = 0);
            let tables = trees::Tables {
                nodes: cast::<i32>(bytes_in(1)?)?,
                thresholds: f32_in(2)?,
                roots: cast::<i32>(bytes_in(3)?)?,
                targets: cast::<i32>(bytes_in(4)?)?,
                weights: f32_in(5)?,
            };
            trees::tree_ensemble(&e, x.shape.dim(1), f32_in(0)?, &tables, f32s_mut(out)?)?;
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}

/// TopK writes two outputs: the values (carved as the output) and the indices (carved where a
/// scratch would be: another disjoint span).
#[inline(always)]
pub(super) fn top_k<const OPS: Selection>(
    step: &Step<'_>,
    axis: usize,
    largest: bool,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    input!(step, x = 0);
    let desc = |i: usize| step.outputs.get(i).ok_or(CpuError::CorruptPlan);
    let (values, indices) = (desc(0)?, desc(1)?);
    let span_of = |t: &TensorDesc| span(t).ok_or(CpuError::CorruptPlan);
    let (view, out, idx) = carve(arena, weights, span_of(&values)?, Some(span_of(&indices)?))?;
    let idx = cast_mut::<i64>(idx.ok_or(CpuError::CorruptPlan)?)?;
    let lanes = lanes(&x.shape, axis);
    let bytes = view.bytes(x)?;
    match x.dtype {
        DType::F32 => reduce::top_k(
            cast::<f32>(bytes)?,
            lanes,
            largest,
            cast_mut::<f32>(out)?,
            idx,
        ),
        other if other.is_integer() && selects_dtype(OPS, other) => {
            let size = other.size();
            let k = idx.len() / (lanes[0] * lanes[2]).max(1);
            let element = |at: usize| bytes.get(at.checked_mul(size)?..)?.get(..size);
            let copy = |slot: usize, at: usize, j: usize| {
                let dst = slot
                    .checked_mul(size)
                    .and_then(|s| out.get_mut(s..)?.get_mut(..size));
                if let (Some(dst), Some(src), Some(i)) = (dst, element(at), idx.get_mut(slot)) {
                    for (d, s) in dst.iter_mut().zip(src) {
                        *d = *s;
                    }
                    *i = j as i64;
                }
            };
            let integers = numeric::Integers {
                dtype: other,
                bytes,
                shape: x.shape,
            };
            // Signed values ranked as unsigned ones with the sign bit flipped (the same order,
            // the same ties): one copy of the ranking for every integer type.
            let flip = if crate::base::elements::is_signed(other) {
                1 << 63
            } else {
                0
            };
            reduce::rank(
                lanes,
                k,
                largest,
                |at| integers.get::<OPS>(at).map(|v| v ^ flip),
                copy,
            )
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}
