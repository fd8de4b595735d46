//! The rules of convolutions (Conv, ConvTranspose, QConv, ConvInteger).

use super::common::*;
use ferrite_hal::{selects, Op, OpKind};

/// Checks a step of this family (the kinds `OPS` selects; any other is refused).
pub(super) fn check<const OPS: Selection>(step: &Step<'_>, fetched: &Fetched) -> Rule {
    operands!(step, fetched => input, output, optional, n_in, n_out);
    match step.op {
        Op::Conv(c) if selects(OPS, OpKind::Conv) => {
            ensure(
                (2..=3).contains(&n_in) && n_out == 1,
                "Conv takes 2-3 inputs, 1 output",
            )?;
            let bias = optional(2);
            check_conv(&c, input(0)?, input(1)?, bias, output(0)?, step.scratch)
        }
        Op::ConvTranspose(c) if selects(OPS, OpKind::ConvTranspose) => {
            ensure(
                (2..=3).contains(&n_in) && n_out == 1,
                "ConvTranspose takes 2-3 inputs",
            )?;
            let bias = optional(2);
            check_conv_transpose(&c, input(0)?, input(1)?, bias, output(0)?)
        }
        Op::QConv(c) if selects(OPS, OpKind::QConv) => {
            ensure(n_in == 4 && n_out == 1, "QConv takes 4 inputs")?;
            let (x, w, bias, requant, y) = (input(0)?, input(1)?, input(2)?, input(3)?, output(0)?);
            let [oc, icg, oh, ow] = check_conv_geometry(&c.window, c.group, x, w, Some(bias), y)?;
            check_integer_operands(x, w, bias, requant, y, &c.requantize, oc)?;
            let need = geometry::qconv_scratch_elements(&c, icg, oh, ow)
                .ok_or(why("QConv scratch overflows"))?;
            require_scratch(step.scratch, need, "QConv scratch is missing or too small")
        }
        Op::ConvInteger(c) if selects(OPS, OpKind::ConvInteger) => {
            ensure(n_in == 4 && n_out == 1, "ConvInteger takes 4 inputs")?;
            let (x, w, x_zero, w_zero, y) =
                (input(0)?, input(1)?, input(2)?, input(3)?, output(0)?);
            ensure(
                is_byte(x) && is_byte(w) && y.dtype == DType::I32,
                "ConvInteger reads 8-bit tensors and writes int32",
            )?;
            same_dtype(&[x.dtype, x_zero.dtype])?;
            same_dtype(&[w.dtype, w_zero.dtype])?;
            let [oc, ..] = check_conv_geometry(&c.window, c.group, x, w, None, y)?;
            ensure(
                x_zero.elements() == 1,
                "ConvInteger input zero point is one value",
            )?;
            ensure(
                w_zero.elements() == 1 || w_zero.elements() == oc,
                "ConvInteger weight zero point is one value or one per output channel",
            )
        }
        _ => Err(why(
            "this op kind is not linked into this build (its OPS selection)",
        )),
    }
}

fn check_conv(
    c: &Conv,
    x: &TensorDesc,
    w: &TensorDesc,
    b: Option<&TensorDesc>,
    y: &TensorDesc,
    scratch: Option<TensorDesc>,
) -> Rule {
    all_f32(&[x.dtype, w.dtype, y.dtype])?;
    if let Some(b) = b {
        all_f32(&[b.dtype])?;
    }
    let [_, icg, oh, ow] = check_conv_geometry(&c.window, c.group, x, w, b, y)?;
    let need = conv_scratch_elements(c, icg, oh, ow).ok_or(why("Conv scratch overflows"))?;
    require_scratch(scratch, need, "Conv scratch is missing or too small")
}

/// The shape rules every convolution shares; returns `[oc, icg, oh, ow]`.
fn check_conv_geometry(
    win: &Window,
    group: usize,
    x: &TensorDesc,
    w: &TensorDesc,
    b: Option<&TensorDesc>,
    y: &TensorDesc,
) -> Result<[usize; 4], &'static str> {
    let [n, ch, h, wd] = nchw(&x.shape).ok_or(why("Conv input must be rank 3 or 4"))?;
    ensure(w.shape.rank() == x.shape.rank(), "Conv weight rank")?;
    let [oc, icg, kh, kw] = nchw(&w.shape).ok_or(why("Conv weight rank"))?;
    check_window_rank(x, win)?;
    ensure(
        [kh, kw] == win.kernel,
        "Conv kernel differs from weight shape",
    )?;
    ensure(
        icg.checked_mul(group) == Some(ch) && oc.checked_rem(group) == Some(0),
        "Conv groups do not divide channels",
    )?;
    if let Some(b) = b {
        ensure(b.shape.dims_checked() == [oc], "Conv bias shape")?;
    }
    let oh = conv_out(
        h,
        kh,
        win.stride[0],
        win.dilation[0],
        win.pads[0],
        win.pads[2],
    )
    .ok_or(why("Conv window larger than input"))?;
    let ow = conv_out(
        wd,
        kw,
        win.stride[1],
        win.dilation[1],
        win.pads[1],
        win.pads[3],
    )
    .ok_or(why("Conv window larger than input"))?;
    ensure(
        nchw(&y.shape) == Some([n, oc, oh, ow]) && y.shape.rank() == x.shape.rank(),
        "Conv output shape",
    )?;
    Ok([oc, icg, oh, ow])
}

fn check_conv_transpose(
    c: &ConvTranspose,
    x: &TensorDesc,
    w: &TensorDesc,
    b: Option<&TensorDesc>,
    y: &TensorDesc,
) -> Rule {
    all_f32(&[x.dtype, w.dtype, y.dtype])?;
    let [n, ch, h, wd] = nchw(&x.shape).ok_or(why("ConvTranspose input must be rank 3 or 4"))?;
    ensure(
        w.shape.rank() == x.shape.rank(),
        "ConvTranspose weight rank",
    )?;
    let [wc, ocg, kh, kw] = nchw(&w.shape).ok_or(why("ConvTranspose weight rank"))?;
    check_window_rank(x, &c.window)?;
    ensure(
        [kh, kw] == c.window.kernel,
        "ConvTranspose kernel differs from weight",
    )?;
    ensure(
        wc == ch && ch.checked_rem(c.group) == Some(0),
        "ConvTranspose groups",
    )?;
    let oc = ocg
        .checked_mul(c.group)
        .ok_or(why("ConvTranspose channels overflow"))?;
    if let Some(b) = b {
        all_f32(&[b.dtype])?;
        ensure(b.shape.dims_checked() == [oc], "ConvTranspose bias shape")?;
    }
    let win = &c.window;
    let out = |i: usize, len: usize, k: usize| {
        geometry::conv_transpose_out(
            len,
            k,
            win.stride[i],
            win.dilation[i],
            win.pads[i],
            win.pads[i + 2],
            c.output_padding[i],
        )
    };
    let oh = out(0, h, kh).ok_or(why("ConvTranspose output size"))?;
    let ow = out(1, wd, kw).ok_or(why("ConvTranspose output size"))?;
    ensure(
        c.output_padding[0] < win.stride[0].max(win.dilation[0])
            && c.output_padding[1] < win.stride[1].max(win.dilation[1]),
        "output_padding too large",
    )?;
    ensure(
        nchw(&y.shape) == Some([n, oc, oh, ow]) && y.shape.rank() == x.shape.rank(),
        "ConvTranspose output shape",
    )
}
