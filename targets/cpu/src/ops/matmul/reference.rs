//! The Gemm and MatMul operators on top of [`crate::micro::sgemm::sgemm`].

use crate::base::context::StepContext;
use crate::base::index::for_each_row;
#[cfg(not(feature = "std"))]
use crate::micro::sgemm::sgemm_unrolled as batched_sgemm;
use crate::micro::sgemm::{sgemm, Mat};
use ferrite_hal::geometry::{broadcast_strides, MatMulGeometry};
use ferrite_hal::op::Gemm;
use ferrite_hal::Shape;
#[cfg(feature = "std")]
use sgemm as batched_sgemm;

/// `out[M×N] = alpha · A · B + beta · C`, `C` broadcast to `[M, N]` (the dispatch applies the
/// fused activation).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn gemm(
    ctx: StepContext<'_>,
    p: &Gemm,
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: Option<(&[f32], Shape)>,
    out: &mut [f32],
) {
    let out_shape = Shape::new(&[m, n]).unwrap_or(Shape::SCALAR);
    match c {
        Some((c, c_shape)) if p.beta != 0.0 => {
            // C broadcasts by rows: each output row starts as beta × (a row of C, or one value).
            let s = broadcast_strides(&c_shape, &out_shape);
            for (i, row) in out.chunks_exact_mut(n.max(1)).take(m).enumerate() {
                let start = i * s[0];
                if s[1] == 1 {
                    let from = c.get(start..start + n).unwrap_or(&[]);
                    for (o, v) in row.iter_mut().zip(from) {
                        *o = p.beta * v;
                    }
                } else {
                    row.fill(p.beta * c.get(start).copied().unwrap_or(0.0));
                }
            }
        }
        _ => out.fill(0.0),
    }
    sgemm(
        ctx,
        m,
        n,
        k,
        p.alpha,
        Mat { data: a, stride: k },
        Mat { data: b, stride: n },
        out,
        n,
        true,
    );
}

/// Batched, broadcasting matrix product.
#[inline(always)]
pub fn matmul(ctx: StepContext<'_>, g: &MatMulGeometry, a: &[f32], b: &[f32], out: &mut [f32]) {
    let (m, k, n) = (g.m, g.k, g.n);
    let batch_out = g.batch.strides().map(|s| s * m * n);
    for_each_row(
        g.batch.dims(),
        [&batch_out, &g.a_batch_strides, &g.b_batch_strides],
        |[o, oa, ob]| {
            // The verifier sized every operand for these offsets; a short one computes nothing.
            let (Some(a), Some(b), Some(out)) = (
                a.get(oa..oa + m * k),
                b.get(ob..ob + k * n),
                out.get_mut(o..o + m * n),
            ) else {
                return;
            };
            batched_sgemm(
                ctx,
                m,
                n,
                k,
                1.0,
                Mat { data: a, stride: k },
                Mat { data: b, stride: n },
                out,
                n,
                false,
            );
        },
    );
}
