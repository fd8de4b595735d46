//! The rules of window and global pooling, float and integer.

use super::common::*;
use ferrite_hal::{selects, Op, OpKind};

/// Checks a step of this family (the kinds `OPS` selects; any other is refused).
pub(super) fn check<const OPS: Selection>(step: &Step<'_>, fetched: &Fetched) -> Rule {
    operands!(step, fetched => input, output, optional, n_in, n_out);
    match step.op {
        Op::MaxPool(p) | Op::AvgPool(p)
            if selects(OPS, OpKind::MaxPool) || selects(OPS, OpKind::AvgPool) =>
        {
            ensure(n_in == 1 && n_out == 1, "pooling takes 1 input, 1 output")?;
            let (x, y) = (input(0)?, output(0)?);
            // Max pooling also runs on 8-bit integers (a maximum commutes with quantization).
            let integer_max = matches!(step.op, Op::MaxPool(_))
                && matches!(x.dtype, DType::I8 | DType::U8)
                && x.dtype == y.dtype;
            if !integer_max {
                all_f32(&[x.dtype, y.dtype])?;
            }
            check_pool(&p, x, y)
        }
        Op::GlobalAvgPool if selects(OPS, OpKind::GlobalAvgPool) => {
            ensure(n_in == 1 && n_out == 1, "GlobalAveragePool takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x.dtype, y.dtype])?;
            ensure(x.shape.rank() >= 3, "GlobalAveragePool input rank")?;
            let ok = y.shape.rank() == x.shape.rank()
                && same(
                    y.shape.dims_checked().get(..2),
                    x.shape.dims_checked().get(..2),
                )
                && y.shape.dims_checked().iter().skip(2).all(|&d| d == 1);
            ensure(ok, "GlobalAveragePool output shape")
        }
        Op::QGlobalAvgPool(q) if selects(OPS, OpKind::QGlobalAvgPool) => {
            ensure(n_in == 1 && n_out == 1, "QGlobalAveragePool takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            let widest = match x.dtype {
                DType::I8 | DType::U8 => 255,
                DType::I16 => 65535,
                _ => 0,
            };
            ensure(
                widest > 0 && y.dtype == x.dtype,
                "QGlobalAveragePool operands are int8, uint8 or int16, of one type",
            )?;
            let rank = x.shape.rank();
            ensure(
                rank >= 3 && y.shape.rank() == rank,
                "QGlobalAveragePool rank",
            )?;
            let plane = x.shape.product(2..rank);
            ensure(
                y.shape.dim_checked(0) == x.shape.dim_checked(0)
                    && y.shape.dim_checked(1) == x.shape.dim_checked(1)
                    && y.shape.product(2..rank) == 1,
                "QGlobalAveragePool output shape",
            )?;
            // The int32 sum of up to 255 (int16: 65535) per element must not overflow.
            ensure(
                plane <= (i32::MAX / widest) as usize,
                "QGlobalAveragePool plane too large",
            )?;
            let r = q.requantize;
            ensure(
                in_range(x.dtype, r.input_zero),
                "QGlobalAveragePool input zero point outside the input type",
            )?;
            ensure(
                in_range(y.dtype, r.output_zero)
                    && in_range(y.dtype, r.min)
                    && in_range(y.dtype, r.max),
                "QGlobalAveragePool output clamp outside the output type",
            )
        }
        Op::QAvgPool(q) if selects(OPS, OpKind::QAvgPool) => {
            ensure(n_in == 1 && n_out == 1, "QAveragePool takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            ensure(
                is_byte(x) && x.dtype == y.dtype,
                "QAveragePool operands are 8-bit, of one type",
            )?;
            check_pool(&q.pool, x, y)?;
            // The window sum times a Q31 multiplier must fit in 64 bits.
            let [kh, kw] = q.pool.window.kernel;
            ensure(
                kh.checked_mul(kw).is_some_and(|a| a <= 1 << 16),
                "QAveragePool window too large",
            )?;
            let r = q.requantize;
            ensure(
                in_range(x.dtype, r.input_zero)
                    && [r.output_zero, r.min, r.max]
                        .iter()
                        .all(|&v| in_range(y.dtype, v)),
                "QAveragePool zero point or clamp outside its type",
            )
        }
        _ => Err(why(
            "this op kind is not linked into this build (its OPS selection)",
        )),
    }
}

fn check_pool(p: &Pool, x: &TensorDesc, y: &TensorDesc) -> Rule {
    let [n, c, h, w] = nchw(&x.shape).ok_or(why("pooling input must be rank 3 or 4"))?;
    check_window_rank(x, &p.window)?;
    let win = &p.window;
    for axis in 0..2 {
        let span = win.kernel[axis].saturating_mul(win.dilation[axis]);
        ensure(
            win.pads[axis] < span && win.pads[axis + 2] < span,
            "pooling pads larger than the window",
        )?;
    }
    let oh = geometry::pool_out(
        h,
        win.kernel[0],
        win.stride[0],
        win.dilation[0],
        win.pads[0],
        win.pads[2],
        p.ceil_mode,
    )
    .ok_or(why("pooling window larger than input"))?;
    let ow = geometry::pool_out(
        w,
        win.kernel[1],
        win.stride[1],
        win.dilation[1],
        win.pads[1],
        win.pads[3],
        p.ceil_mode,
    )
    .ok_or(why("pooling window larger than input"))?;
    ensure(
        nchw(&y.shape) == Some([n, c, oh, ow]) && y.shape.rank() == x.shape.rank(),
        "pooling output shape",
    )
}
