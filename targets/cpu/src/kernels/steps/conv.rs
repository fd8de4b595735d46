//! Convolution steps (Conv, ConvTranspose, QConv and ConvInteger): the family's operands taken from the carved step, its
//! kernels in [`crate::kernels::conv`], [`crate::kernels::integer`] and [`crate::kernels::accumulate`].

use super::*;
#[cfg(feature = "quantized")]
use crate::kernels::accumulate;
use crate::kernels::conv;
#[cfg(feature = "quantized")]
use crate::kernels::integer;
#[cfg(feature = "quantized")]
use crate::kernels::quantize::QuantInt;

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
    // Every kind of the family reads its input's shape and the output's into the same
    // dimensions: decoded once, into slots the arms share (per arm, each took its own in the
    // family's frame, which the convolutions' products stack on).
    input!(step, x = 0);
    let dims = conv::ConvDims::of(&x.shape, &out_desc.shape).ok_or(CpuError::CorruptPlan)?;
    // The op's parameters borrowed in the step (matched by value, each arm copied its kind's
    // into a slot of its own).
    match &step.op {
        Op::Conv(c) if selects(OPS, OpKind::Conv) => {
            let scratch = match scratch {
                Some(s) => f32s_mut(s)?,
                None => &mut [][..],
            };
            let out = f32s_mut(out)?;
            #[cfg(feature = "std")]
            {
                let layout = crate::layout::current();
                if layout.input || layout.output {
                    let operands = (f32_in(0)?, f32_in(1)?, optional_f32(2)?);
                    let constant = constant_weights(step);
                    if let Some(activation) = crate::layout::residual() {
                        // A residual Add fused in: its other operand is input 3.
                        let other = step.inputs.get(3).ok_or(CpuError::CorruptPlan)?;
                        let residual = view.src(&other)?;
                        let job = (layout, residual, activation);
                        return residual_conv::<OPS>(
                            c, dims, operands, out, scratch, constant, job,
                        );
                    }
                    return blocked_conv::<OPS>(c, dims, operands, out, scratch, constant, layout);
                }
            }
            let activated = conv::conv(
                c,
                dims,
                f32_in(0)?,
                f32_in(1)?,
                optional_f32(2)?,
                out,
                scratch,
                constant_weights(step),
            );
            if !activated {
                fused::<OPS>(c.activation, out);
            }
        }
        Op::ConvTranspose(c) if selects(OPS, OpKind::ConvTranspose) => {
            let out = f32s_mut(out)?;
            conv::conv_transpose(c, dims, f32_in(0)?, f32_in(1)?, optional_f32(2)?, out);
            fused::<OPS>(c.activation, out);
        }
        #[cfg(feature = "quantized")]
        Op::QConv(c) if needs_portable(OPS, covered_int8, OpKind::QConv) => {
            let (xb, w) = (view.bytes(x)?, cast::<i8>(bytes_in(1)?)?);
            let bias = cast::<i32>(bytes_in(2)?)?;
            let rq = cast::<i32>(bytes_in(3)?)?;
            let scratch = scratch.unwrap_or(&mut []);
            let done = with_quantized_pair!(
                OPS,
                covered_int8,
                OpKind::QConv,
                true,
                x.dtype,
                out_desc.dtype,
                xb,
                out,
                |xs, ys| qconv_framed::<OPS, _, _>(c, dims, xs, w, bias, rq, ys, scratch)
            );
            if !done {
                return Err(CpuError::CorruptPlan);
            }
        }
        #[cfg(feature = "quantized")]
        Op::ConvInteger(c) if selects(OPS, OpKind::ConvInteger) => {
            conv_integer(step, c, dims, view, out)?
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}

/// A Conv step whose input or output is channel-blocked ([`crate::layout`]): the blocked
/// kernels where they run it, else the planar kernels between layout changes (the same
/// results; a program blocks only what the blocked kernels run, so this is a safety net).
#[cfg(feature = "std")]
#[allow(clippy::too_many_arguments)]
fn blocked_conv<const OPS: Selection>(
    c: &ferrite_hal::op::Conv,
    dims: conv::ConvDims,
    (x, w, b): (&[f32], &[f32], Option<&[f32]>),
    out: &mut [f32],
    scratch: &mut [f32],
    constant: bool,
    layout: crate::layout::StepLayout,
) -> Result<(), CpuError> {
    #[cfg(target_arch = "x86_64")]
    if let Some(applied) = crate::kernels::conv_blocked::conv(
        c,
        dims,
        x,
        w,
        b,
        out,
        constant,
        (layout, crate::kernels::conv_blocked::Residual::None),
    ) {
        if !applied {
            fused::<OPS>(c.activation, out);
        }
        return Ok(());
    }
    let lanes = crate::layout::block_lanes().ok_or(CpuError::CorruptPlan)?;
    let input_plane = dims.h * dims.w;
    let planar_x;
    let x = match layout.input {
        true => {
            planar_x = {
                let mut planar = std::vec![0.0f32; x.len()];
                crate::layout::unblock(x, &mut planar, (dims.c, input_plane), lanes);
                planar
            };
            &planar_x[..]
        }
        false => x,
    };
    let mut planar_out = match layout.output {
        true => std::vec![0.0f32; out.len()],
        false => std::vec::Vec::new(),
    };
    let target = match layout.output {
        true => &mut planar_out[..],
        false => &mut *out,
    };
    if !conv::conv(c, dims, x, w, b, target, scratch, constant) {
        fused::<OPS>(c.activation, target);
    }
    if layout.output {
        crate::layout::block(&planar_out, out, (dims.oc, dims.oh * dims.ow), lanes);
    }
    Ok(())
}

/// A Conv step with the residual Add after it fused in ([`crate::layout`]): `out` is the
/// Add's output, `residual` its other operand (the output's own bytes where the Add was
/// written in place of it), `activation` the Add's. The blocked kernels add it as they store;
/// else the convolution alone, then the Add and its activation: the same operations, in the
/// same order, as the two steps.
#[cfg(feature = "std")]
#[allow(clippy::too_many_arguments)]
fn residual_conv<const OPS: Selection>(
    c: &ferrite_hal::op::Conv,
    dims: conv::ConvDims,
    operands: (&[f32], &[f32], Option<&[f32]>),
    out: &mut [f32],
    scratch: &mut [f32],
    constant: bool,
    (layout, residual, activation): (crate::layout::StepLayout, Src<'_>, Activation),
) -> Result<(), CpuError> {
    let other = match residual {
        Src::Bytes(bytes) => Some(f32s(bytes)?),
        Src::Output => None,
    };
    #[cfg(target_arch = "x86_64")]
    {
        use crate::kernels::conv_blocked::{self, Residual};
        let with_add = ferrite_hal::op::Conv { activation, ..*c };
        let residual = other.map_or(Residual::Output, Residual::Tensor);
        let (x, w, b) = operands;
        let store = (layout, residual);
        if let Some(applied) = conv_blocked::conv(&with_add, dims, x, w, b, out, constant, store) {
            if !applied {
                fused::<OPS>(activation, out);
            }
            return Ok(());
        }
    }
    let mut sums = std::vec![0.0f32; out.len()];
    blocked_conv::<OPS>(c, dims, operands, &mut sums, scratch, constant, layout)?;
    match other {
        Some(other) => {
            for ((o, s), r) in out.iter_mut().zip(&sums).zip(other) {
                *o = s + r;
            }
        }
        None => out.iter_mut().zip(&sums).for_each(|(o, s)| *o += s),
    }
    fused::<OPS>(activation, out);
    Ok(())
}

/// A ConvInteger step's operands and accumulation; in a frame of its own on a firmware (its four
/// operands, 150 B of slots, out of the family's frame, under every convolution).
#[cfg(feature = "quantized")]
#[cfg_attr(not(feature = "std"), inline(never))]
fn conv_integer(
    step: &Step<'_>,
    c: &ferrite_hal::op::ConvInteger,
    dims: conv::ConvDims,
    view: &Readable<'_>,
    out: &mut [u8],
) -> Result<(), CpuError> {
    let y = cast_mut::<i32>(out)?;
    let input = |i| integer_input(step, view, i);
    let (x, w, zx, zw) = (input(0)?, input(1)?, input(2)?, input(3)?);
    accumulate::conv_integer(c, dims, x, w, zx, zw, y);
    Ok(())
}

/// [`integer::qconv`], its 8-bit kernels in a frame of their own where the families' are
/// ([`out_of_line`]): their accumulators (256 B) out of the family's frame, which the other
/// kinds' deepest calls stack on. 16-bit inputs go straight to their own out-of-line kernels.
#[cfg(feature = "quantized")]
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn qconv_framed<const OPS: Selection, X: QuantInt, Y: QuantInt>(
    c: &ferrite_hal::op::QConv,
    dims: conv::ConvDims,
    xs: &[X],
    w: &[i8],
    bias: &[i32],
    rq: &[i32],
    ys: &mut [Y],
    scratch: &mut [u8],
) -> bool {
    if const { out_of_line(OPS) && !X::WIDE } {
        in_own_frame(
            |(xs, ys, scratch)| integer::qconv(c, dims, xs, w, bias, rq, ys, scratch),
            (xs, ys, scratch),
        )
    } else {
        integer::qconv(c, dims, xs, w, bias, rq, ys, scratch)
    }
}

/// Whether a convolution's weights (input 1) are the model's constants, so a host may keep
/// them packed between runs.
#[inline(always)]
fn constant_weights(step: &Step<'_>) -> bool {
    let weights = step.inputs.get(1).map(|t| t.location);
    matches!(weights, Some(ferrite_hal::Location::Weights(_)))
}
