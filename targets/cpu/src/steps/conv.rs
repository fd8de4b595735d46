//! Convolution steps (Conv, ConvTranspose, QConv and ConvInteger): the family's operands taken from the carved step, its
//! kernels in [`crate::ops::conv::reference`], [`crate::ops::integer`] and [`crate::ops::matmul::accumulate`].

use super::operands::*;
#[cfg(feature = "quantized")]
use crate::base::quantized::QuantInt;
#[cfg(feature = "quantized")]
use crate::ops::conv::int8;
use crate::ops::conv::reference as conv;
#[cfg(feature = "quantized")]
use crate::ops::matmul::accumulate;

/// Runs a step of this family with the kernels `OPS` selects.
#[inline(always)]
pub(super) fn run<const OPS: Selection>(
    ctx: StepContext<'_>,
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
    let dims = crate::base::geometry::ConvDims::of(&x.shape, &out_desc.shape)
        .ok_or(CpuError::CorruptPlan)?;
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
                let layout = ctx.layout();
                if layout.input || layout.output {
                    let operands = (f32_in(0)?, f32_in(1)?, optional_f32(2)?);
                    let constant = constant_weights(step);
                    if let Some(activation) = ctx.residual() {
                        // A residual Add fused in: its other operand is input 3.
                        let other = step.inputs.get(3).ok_or(CpuError::CorruptPlan)?;
                        let residual = view.src(&other)?;
                        let job = (layout, residual, activation);
                        return residual_conv::<OPS>(
                            ctx, c, dims, operands, out, scratch, constant, job,
                        );
                    }
                    return blocked_conv::<OPS>(
                        ctx, c, dims, operands, out, scratch, constant, layout,
                    );
                }
            }
            let activated = conv::conv(
                ctx,
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
                |xs, ys| qconv_framed::<OPS, _, _>(ctx, c, dims, xs, w, bias, rq, ys, scratch)
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

/// A Conv step whose input or output is channel-blocked (its context says so): the blocked
/// kernels where they run it, else the planar kernels between layout changes (the same
/// results; a program blocks only what the blocked kernels run, so this is a safety net).
#[cfg(feature = "std")]
#[allow(clippy::too_many_arguments)]
fn blocked_conv<const OPS: Selection>(
    ctx: StepContext<'_>,
    c: &ferrite_hal::op::Conv,
    dims: crate::base::geometry::ConvDims,
    (x, w, b): (&[f32], &[f32], Option<&[f32]>),
    out: &mut [f32],
    scratch: &mut [f32],
    constant: bool,
    layout: crate::base::blocking::Blocking,
) -> Result<(), CpuError> {
    #[cfg(target_arch = "x86_64")]
    if let Some(applied) = crate::ops::conv::blocked::conv(
        ctx,
        c,
        dims,
        x,
        w,
        b,
        out,
        constant,
        (layout, crate::ops::conv::blocked::Residual::None),
    ) {
        if !applied {
            fused::<OPS>(c.activation, out);
        }
        return Ok(());
    }
    let lanes = crate::ops::conv::block_lanes().ok_or(CpuError::CorruptPlan)?;
    let input_plane = dims.h * dims.w;
    let planar_x;
    let x = match layout.input {
        true => {
            planar_x = {
                let mut planar = std::vec![0.0f32; x.len()];
                crate::base::blocking::unblock(x, &mut planar, (dims.c, input_plane), lanes);
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
    if !conv::conv(ctx, c, dims, x, w, b, target, scratch, constant) {
        fused::<OPS>(c.activation, target);
    }
    if layout.output {
        crate::base::blocking::block(&planar_out, out, (dims.oc, dims.oh * dims.ow), lanes);
    }
    Ok(())
}

/// A Conv step with the residual Add after it fused in (its context says so): `out` is the
/// Add's output, `residual` its other operand (the output's own bytes where the Add was
/// written in place of it), `activation` the Add's. The blocked kernels add it as they store;
/// else the convolution alone, then the Add and its activation: the same operations, in the
/// same order, as the two steps.
#[cfg(feature = "std")]
#[allow(clippy::too_many_arguments)]
fn residual_conv<const OPS: Selection>(
    ctx: StepContext<'_>,
    c: &ferrite_hal::op::Conv,
    dims: crate::base::geometry::ConvDims,
    operands: (&[f32], &[f32], Option<&[f32]>),
    out: &mut [f32],
    scratch: &mut [f32],
    constant: bool,
    (layout, residual, activation): (crate::base::blocking::Blocking, Src<'_>, Activation),
) -> Result<(), CpuError> {
    let other = match residual {
        Src::Bytes(bytes) => Some(f32s(bytes)?),
        Src::Output => None,
    };
    #[cfg(target_arch = "x86_64")]
    {
        use crate::ops::conv::blocked::{self as conv_blocked, Residual};
        let with_add = ferrite_hal::op::Conv { activation, ..*c };
        let residual = other.map_or(Residual::Output, Residual::Tensor);
        let (x, w, b) = operands;
        let store = (layout, residual);
        if let Some(applied) =
            conv_blocked::conv(ctx, &with_add, dims, x, w, b, out, constant, store)
        {
            if !applied {
                fused::<OPS>(activation, out);
            }
            return Ok(());
        }
    }
    let mut sums = std::vec![0.0f32; out.len()];
    blocked_conv::<OPS>(ctx, c, dims, operands, &mut sums, scratch, constant, layout)?;
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
    dims: crate::base::geometry::ConvDims,
    view: &Readable<'_>,
    out: &mut [u8],
) -> Result<(), CpuError> {
    let y = cast_mut::<i32>(out)?;
    let input = |i| integer_input(step, view, i);
    let (x, w, zx, zw) = (input(0)?, input(1)?, input(2)?, input(3)?);
    accumulate::conv_integer(c, dims, x, w, zx, zw, y);
    Ok(())
}

/// [`int8::qconv`], its 8-bit kernels in a frame of their own where the families' are
/// ([`out_of_line`]): their accumulators (256 B) out of the family's frame, which the other
/// kinds' deepest calls stack on. 16-bit inputs go straight to their own out-of-line kernels.
#[cfg(feature = "quantized")]
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn qconv_framed<const OPS: Selection, X: QuantInt, Y: QuantInt>(
    ctx: StepContext<'_>,
    c: &ferrite_hal::op::QConv,
    dims: crate::base::geometry::ConvDims,
    xs: &[X],
    w: &[i8],
    bias: &[i32],
    rq: &[i32],
    ys: &mut [Y],
    scratch: &mut [u8],
) -> bool {
    if const { out_of_line(OPS) && !X::WIDE } {
        in_own_frame(
            |(xs, ys, scratch)| int8::qconv(ctx, c, dims, xs, w, bias, rq, ys, scratch),
            (xs, ys, scratch),
        )
    } else {
        int8::qconv(ctx, c, dims, xs, w, bias, rq, ys, scratch)
    }
}

/// Whether a convolution's weights (input 1) are the model's constants, so a host may keep
/// them packed between runs.
#[inline(always)]
fn constant_weights(step: &Step<'_>) -> bool {
    let weights = step.inputs.get(1).map(|t| t.location);
    matches!(weights, Some(ferrite_hal::Location::Weights(_)))
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::base::blocking::{block, unblock, Blocking as StepLayout};
    use ferrite_hal::op::{Conv, Window};

    /// A convolution whose blocked layouts the blocked kernels decline (two groups) changes
    /// them around the planar kernels: the same values as the planar run, bit for bit, with
    /// and without a fused residual Add (the residual its own bytes or another tensor's).
    #[test]
    fn declined_layouts_change_around_the_planar_kernels() {
        // The blocks the program would plan with (none without the blocked kernels).
        let Some(lanes) = crate::ops::conv::block_lanes() else {
            return;
        };
        let d = crate::base::geometry::ConvDims {
            n: 1,
            c: 16,
            h: 5,
            w: 6,
            oc: 16,
            oh: 5,
            ow: 6,
        };
        let c = Conv {
            window: Window {
                kernel: [3, 3],
                stride: [1, 1],
                dilation: [1, 1],
                pads: [1; 4],
            },
            group: 2,
            activation: Activation::Relu,
        };
        let value = |i: usize| ((i * 7919 % 211) as f32 - 105.0) / 53.0;
        let x: Vec<f32> = (0..16 * 30).map(value).collect();
        let w: Vec<f32> = (0..16 * 8 * 9).map(|i| value(i + 5)).collect();
        let b: Vec<f32> = (0..16).map(|i| value(i + 9)).collect();
        let mut scratch = std::vec![0.0f32; 1 << 16];
        let mut want = std::vec![0.0f32; 16 * 30];
        if !conv::conv(
            StepContext::default(),
            &c,
            d,
            &x,
            &w,
            Some(&b),
            &mut want,
            &mut scratch,
            false,
        ) {
            fused::<ALL_OPS>(c.activation, &mut want);
        }
        let mut xb = std::vec![0.0f32; x.len()];
        block(&x, &mut xb, (16, 30), lanes);
        let layout = StepLayout {
            input: true,
            output: true,
        };
        let mut got = std::vec![0.0f32; want.len()];
        let operands = (&xb[..], &w[..], Some(&b[..]));
        let ran = blocked_conv::<ALL_OPS>(
            StepContext::default(),
            &c,
            d,
            operands,
            &mut got,
            &mut scratch,
            false,
            layout,
        );
        assert!(ran.is_ok());
        let mut planar = std::vec![0.0f32; got.len()];
        unblock(&got, &mut planar, (16, 30), lanes);
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same(&planar, &want));
        // With a residual Add (Relu) after a convolution without activation.
        let plain = Conv {
            activation: Activation::None,
            ..c
        };
        let r: Vec<f32> = (0..want.len()).map(|i| value(i + 3)).collect();
        let mut sums = std::vec![0.0f32; want.len()];
        if !conv::conv(
            StepContext::default(),
            &plain,
            d,
            &x,
            &w,
            Some(&b),
            &mut sums,
            &mut scratch,
            false,
        ) {
            fused::<ALL_OPS>(plain.activation, &mut sums);
        }
        let want: Vec<f32> = sums.iter().zip(&r).map(|(s, r)| (s + r).max(0.0)).collect();
        let mut rb = std::vec![0.0f32; r.len()];
        block(&r, &mut rb, (16, 30), lanes);
        for in_place in [false, true] {
            let mut got = match in_place {
                true => rb.clone(),
                false => std::vec![0.0f32; want.len()],
            };
            let residual = match in_place {
                true => Src::Output,
                false => Src::Bytes(bytemuck::cast_slice(&rb)),
            };
            let job = (layout, residual, Activation::Relu);
            let ran = residual_conv::<ALL_OPS>(
                StepContext::default(),
                &plain,
                d,
                operands,
                &mut got,
                &mut scratch,
                false,
                job,
            );
            assert!(ran.is_ok());
            unblock(&got, &mut planar, (16, 30), lanes);
            assert!(same(&planar, &want), "in place: {in_place}");
        }
    }
}
