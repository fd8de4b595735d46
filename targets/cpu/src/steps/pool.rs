//! Pooling steps (MaxPool, AveragePool, GlobalAveragePool, QGlobalAveragePool and QAveragePool): the family's operands taken from the carved step, its
//! kernels in [`crate::ops::pool::reference`] and [`crate::ops::integer`].

use super::operands::*;
#[cfg(feature = "quantized")]
use crate::ops::pool::int8;
use crate::ops::pool::reference as pool;

/// Runs a step of this family with the kernels `OPS` selects.
#[inline(always)]
pub(super) fn run<const OPS: Selection>(
    #[allow(unused_variables)] ctx: StepContext<'_>,
    step: &Step<'_>,
    #[allow(unused_variables)] out_desc: &TensorDesc,
    view: &Readable<'_>,
    out: &mut [u8],
    #[allow(unused_variables)] scratch: Option<&mut [u8]>,
    #[allow(unused_variables)] covered_int8: Selection,
) -> Result<(), CpuError> {
    step_inputs!(step, view => f32_in, optional_f32, bytes_in);
    match step.op {
        Op::MaxPool(p) | Op::AvgPool(p)
            if selects(OPS, OpKind::MaxPool) || selects(OPS, OpKind::AvgPool) =>
        {
            input!(step, x_desc = 0);
            let input_dims = nchw(&x_desc.shape).ok_or(CpuError::CorruptPlan)?;
            let [_, _, oh, ow] = nchw(&out_desc.shape).ok_or(CpuError::CorruptPlan)?;
            let dims = crate::base::geometry::PoolDims {
                input: input_dims,
                output: [oh, ow],
            };
            let is_max = matches!(step.op, Op::MaxPool(_));
            input!(step, x = 0);
            match x.dtype {
                DType::I8 if is_max => {
                    let xs = cast::<i8>(view.bytes(x)?)?;
                    pool::max_pool_integer(&p, dims, xs, cast_mut(out)?, i8::MIN);
                }
                DType::U8 if is_max => {
                    pool::max_pool_integer(&p, dims, view.bytes(x)?, out, u8::MIN);
                }
                DType::I16 if is_max && selects_dtype(OPS, DType::I16) => {
                    let xs = cast::<i16>(view.bytes(x)?)?;
                    pool::max_pool_integer(&p, dims, xs, cast_mut(out)?, i16::MIN);
                }
                _ => pool::pool(&p, dims, is_max, f32_in(0)?, f32s_mut(out)?),
            }
        }
        Op::GlobalAvgPool if selects(OPS, OpKind::GlobalAvgPool) => {
            input!(step, x = 0);
            let plane = x.shape.product(2..x.shape.rank());
            #[cfg(feature = "std")]
            if ctx.layout().input {
                let lanes = crate::ops::conv::block_lanes().ok_or(CpuError::CorruptPlan)?;
                pool::global_avg_pool_blocked(f32_in(0)?, plane, lanes, f32s_mut(out)?);
                return Ok(());
            }
            pool::global_avg_pool(f32_in(0)?, plane, f32s_mut(out)?);
        }
        #[cfg(feature = "quantized")]
        Op::QGlobalAvgPool(q) if selects(OPS, OpKind::QGlobalAvgPool) => {
            input!(step, x = 0);
            let plane = x.shape.product(2..x.shape.rank());
            with_quantized_pair!(
                OPS,
                covered_int8,
                OpKind::QGlobalAvgPool,
                true,
                x.dtype,
                out_desc.dtype,
                view.bytes(x)?,
                out,
                |xs, ys| int8::qglobal_avg_pool(&q, plane, xs, ys)
            );
        }
        #[cfg(feature = "quantized")]
        Op::QAvgPool(q) if selects(OPS, OpKind::QAvgPool) => {
            input!(step, x = 0);
            let [n, c, h, w] = nchw(&x.shape).ok_or(CpuError::CorruptPlan)?;
            let [_, _, oh, ow] = nchw(&out_desc.shape).ok_or(CpuError::CorruptPlan)?;
            let dims = crate::base::geometry::PoolDims {
                input: [n, c, h, w],
                output: [oh, ow],
            };
            let ty = bytes8::<OPS>(x.dtype, out_desc.dtype)?;
            int8::qavg_pool(&q, dims, (view.bytes(x)?, ty), out);
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}
