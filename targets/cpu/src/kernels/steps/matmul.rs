//! Matrix product steps (Gemm, MatMul, QGemm, MatMulInteger and DFT): the family's operands taken from the carved step, its
//! kernels in [`crate::kernels::matmul`], [`crate::kernels::integer`], [`crate::kernels::accumulate`] and [`crate::kernels::fourier`].

use super::*;
#[cfg(feature = "quantized")]
use crate::kernels::accumulate;
#[cfg(feature = "quantized")]
use crate::kernels::integer;
use crate::kernels::{fourier, matmul};

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
        Op::Gemm(g) if selects(OPS, OpKind::Gemm) => {
            input!(step, a = 0);
            input!(step, b = 1);
            let c = match step.inputs.get(2) {
                Some(t) => Some((f32s(view.bytes(&t)?)?, t.shape)),
                None => None,
            };
            let (m, k, n) = (a.shape.dim(0), a.shape.dim(1), b.shape.dim(1));
            let out = f32s_mut(out)?;
            matmul::gemm(&g, m, k, n, f32_in(0)?, f32_in(1)?, c, out);
            fused::<OPS>(g.activation, out);
        }
        Op::MatMul { activation } if selects(OPS, OpKind::MatMul) => {
            // Borrowed where it was built: moved out of the `Option`, the geometry (148 B)
            // took a second slot in the family's frame.
            input!(step, a = 0);
            input!(step, b = 1);
            let geometry = MatMulGeometry::new(&a.shape, &b.shape);
            let g = geometry.as_ref().ok_or(CpuError::CorruptPlan)?;
            let out = f32s_mut(out)?;
            matmul::matmul(g, f32_in(0)?, f32_in(1)?, out);
            fused::<OPS>(activation, out);
        }
        #[cfg(feature = "quantized")]
        Op::QGemm(q) if needs_portable(OPS, covered_int8, OpKind::QGemm) => {
            input!(step, a = 0);
            input!(step, b = 1);
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
                |xs, ys| integer::qgemm(&q, dims, layout, xs, bw, bias, rq, ys)
            );
        }
        #[cfg(feature = "quantized")]
        Op::MatMulInteger if selects(OPS, OpKind::MatMulInteger) => {
            input!(step, a = 0);
            input!(step, b = 1);
            input!(step, za = 2);
            input!(step, zb = 3);
            let geometry = MatMulGeometry::new(&a.shape, &b.shape);
            let g = geometry.as_ref().ok_or(CpuError::CorruptPlan)?;
            let bytes = |t: &TensorDesc| -> Result<accumulate::Bytes<'_>, CpuError> {
                Ok(accumulate::Bytes::new(view.bytes(t)?, t.dtype == DType::I8))
            };
            let y = cast_mut::<i32>(out)?;
            accumulate::matmul_integer(g, bytes(a)?, bytes(b)?, bytes(za)?, bytes(zb)?, y);
        }
        Op::Dft(d) if selects(OPS, OpKind::Dft) => {
            input!(step, x_desc = 0);
            let g = ferrite_hal::geometry::DftGeometry::new(&d, &x_desc.shape)
                .ok_or(CpuError::CorruptPlan)?;
            let v = fourier::Operands {
                x: f32_in(0)?,
                twiddles: f32_in(1)?,
                window: optional_f32(2)?,
            };
            let scratch = f32s_mut(scratch.ok_or(CpuError::CorruptPlan)?)?;
            if !fourier::dft(&d, &g, &v, f32s_mut(out)?, scratch) {
                return Err(CpuError::CorruptPlan);
            }
        }
        _ => return Err(CpuError::Unsupported),
    }
    Ok(())
}
