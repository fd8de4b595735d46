//! Matrix product steps (Gemm, MatMul, QGemm, MatMulInteger and DFT): the family's operands taken from the carved step, its
//! kernels in [`crate::ops::matmul::reference`], [`crate::ops::integer`], [`crate::ops::matmul::accumulate`] and [`crate::ops::matmul::fourier`].

use super::operands::*;
#[cfg(feature = "quantized")]
use crate::ops::matmul::accumulate;
use crate::ops::matmul::fourier;
#[cfg(feature = "quantized")]
use crate::ops::matmul::int8;
use crate::ops::matmul::reference as matmul;

/// The family's kinds by the function that runs them: the dispatch calls each apart where
/// families run out of line (see [`out_of_line`]), so that the batched products' geometry and
/// batch walk (about 300 B), the DFT's and the plain products' locals each take a frame of their
/// own instead of one frame under every product (a MatMul nested under the Gemm arm's frame, a
/// DFT under both, was the every-kernel firmware's deepest path, 1.8 KB).
pub(super) enum Runner {
    /// Gemm and QGemm: [`run`].
    Products,
    /// MatMul and MatMulInteger: [`run_batched`].
    Batched,
    /// DFT: [`run_dft`].
    Transform,
}

/// Which function runs `op` (a kind of this family).
#[inline(always)]
pub(super) fn runner(op: &Op) -> Runner {
    match op {
        Op::MatMul { .. } | Op::MatMulInteger => Runner::Batched,
        Op::Dft(_) => Runner::Transform,
        _ => Runner::Products,
    }
}

/// Runs a Gemm or QGemm step with the kernels `OPS` selects.
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
    // Both kinds take inputs 0 and 1: their descriptors decoded once, into two slots the arms
    // share.
    input!(step, a = 0);
    input!(step, b = 1);
    match step.op {
        Op::Gemm(g) if selects(OPS, OpKind::Gemm) => {
            let c = match step.inputs.get(2) {
                Some(t) => Some((f32s(view.bytes(&t)?)?, t.shape)),
                None => None,
            };
            let (m, k, n) = (a.shape.dim(0), a.shape.dim(1), b.shape.dim(1));
            let out = f32s_mut(out)?;
            matmul::gemm(ctx, &g, m, k, n, f32_in(0)?, f32_in(1)?, c, out);
            fused::<OPS>(g.activation, out);
        }
        #[cfg(feature = "quantized")]
        Op::QGemm(q) if needs_portable(OPS, covered_int8, OpKind::QGemm) => {
            let (layout, n, _) =
                ferrite_hal::op::QGemmWeights::of(&b.shape).ok_or(CpuError::CorruptPlan)?;
            // Only the selected layouts' loops are linked (the build's selection is a constant).
            if !ferrite_hal::selects_qgemm_weights(OPS, layout) {
                return Err(CpuError::CorruptPlan);
            }
            let dims = [a.shape.dim(0), a.shape.dim(1), n];
            let (ab, bw) = (view.bytes(a)?, cast::<i8>(view.bytes(b)?)?);
            let bias = cast::<i32>(bytes_in(2)?)?;
            let rq = cast::<i32>(bytes_in(3)?)?;
            with_quantized_pair!(
                OPS,
                covered_int8,
                OpKind::QGemm,
                true,
                a.dtype,
                out_desc.dtype,
                ab,
                out,
                |xs, ys| int8::qgemm(&q, dims, layout, xs, bw, bias, rq, ys)
            );
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}

/// Runs a MatMul or MatMulInteger step with the kernels `OPS` selects.
#[inline(always)]
pub(super) fn run_batched<const OPS: Selection>(
    ctx: StepContext<'_>,
    step: &Step<'_>,
    #[allow(unused_variables)] out_desc: &TensorDesc,
    view: &Readable<'_>,
    out: &mut [u8],
    #[allow(unused_variables)] scratch: Option<&mut [u8]>,
    #[allow(unused_variables)] covered_int8: Selection,
) -> Result<(), CpuError> {
    step_inputs!(step, view => f32_in, optional_f32, bytes_in);
    if !(selects(OPS, OpKind::MatMul) || selects(OPS, OpKind::MatMulInteger)) {
        return Err(CpuError::Unsupported);
    }
    // One geometry for both kinds, built in its slot (returned, it (148 B) took a slot in each
    // frame it passed through).
    let mut geometry = MatMulGeometry::EMPTY;
    batched_geometry(step, &mut geometry)?;
    let g = &geometry;
    match step.op {
        Op::MatMul { activation } if selects(OPS, OpKind::MatMul) => {
            let out = f32s_mut(out)?;
            matmul::matmul(ctx, g, f32_in(0)?, f32_in(1)?, out);
            fused::<OPS>(activation, out);
        }
        #[cfg(feature = "quantized")]
        Op::MatMulInteger if selects(OPS, OpKind::MatMulInteger) => {
            matmul_integer(step, view, g, out)?
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}

/// The geometry of a MatMul or MatMulInteger step's inputs 0 and 1, written into `geometry`.
/// Out of line on a firmware:
/// their descriptors (104 B) are decoded in this frame, not the one the product runs under.
#[cfg_attr(not(feature = "std"), inline(never))]
fn batched_geometry(step: &Step<'_>, geometry: &mut MatMulGeometry) -> Result<(), CpuError> {
    input!(step, a = 0);
    input!(step, b = 1);
    geometry
        .build_in(&a.shape, &b.shape)
        .ok_or(CpuError::CorruptPlan)
}

/// A MatMulInteger step's operands and product; in a frame of its own on a firmware (its four
/// operands out of the MatMul arm's frame).
#[cfg(feature = "quantized")]
#[cfg_attr(not(feature = "std"), inline(never))]
fn matmul_integer(
    step: &Step<'_>,
    view: &Readable<'_>,
    g: &MatMulGeometry,
    out: &mut [u8],
) -> Result<(), CpuError> {
    let y = cast_mut::<i32>(out)?;
    let input = |i| integer_input(step, view, i);
    let (a, b, za, zb) = (input(0)?, input(1)?, input(2)?, input(3)?);
    accumulate::matmul_integer(g, a, b, za, zb, y);
    Ok(())
}

/// Runs a DFT step with the kernels `OPS` selects.
#[inline(always)]
pub(super) fn run_dft<const OPS: Selection>(
    step: &Step<'_>,
    _: &TensorDesc,
    view: &Readable<'_>,
    out: &mut [u8],
    scratch: Option<&mut [u8]>,
    _: Selection,
) -> Result<(), CpuError> {
    let Op::Dft(d) = &step.op else {
        return Err(CpuError::Unsupported);
    };
    if !selects(OPS, OpKind::Dft) {
        return Err(CpuError::Unsupported);
    }
    step_inputs!(step, view => f32_in, optional_f32, bytes_in);
    input!(step, signal = 0);
    let g =
        ferrite_hal::geometry::DftGeometry::new(d, &signal.shape).ok_or(CpuError::CorruptPlan)?;
    let v = fourier::Operands {
        x: f32_in(0)?,
        twiddles: f32_in(1)?,
        window: optional_f32(2)?,
    };
    let scratch = f32s_mut(scratch.ok_or(CpuError::CorruptPlan)?)?;
    if !fourier::dft(d, &g, &v, f32s_mut(out)?, scratch) {
        return Err(CpuError::CorruptPlan);
    }
    Ok(())
}
