//! The rules of matrix products (Gemm, MatMul, QGemm, MatMulInteger) and of the Fourier
//! transform (DFT: a product with the Fourier matrix).

use super::common::*;
use ferrite_hal::op::QGemmWeights;
use ferrite_hal::{selects, selects_qgemm_weights, Op, OpKind};

/// Checks a step of this family (the kinds `OPS` selects; any other is refused).
pub(super) fn check<const OPS: Selection>(step: &Step<'_>, fetched: &Fetched) -> Rule {
    operands!(step, fetched => input, output, optional, n_in, n_out);
    match step.op {
        Op::Gemm(_) if selects(OPS, OpKind::Gemm) => {
            ensure(
                (2..=3).contains(&n_in) && n_out == 1,
                "Gemm takes 2-3 inputs, 1 output",
            )?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            all_f32(&[a.dtype, b.dtype, y.dtype])?;
            ensure(
                a.shape.rank() == 2 && b.shape.rank() == 2,
                "Gemm operands are matrices",
            )?;
            let (m, k, n) = (
                a.shape.dim_checked(0),
                a.shape.dim_checked(1),
                b.shape.dim_checked(1),
            );
            ensure(b.shape.dim_checked(0) == k, "Gemm inner dimensions differ")?;
            ensure(y.shape.dims_checked() == [m, n], "Gemm output shape")?;
            if let Some(c) = optional(2) {
                all_f32(&[c.dtype])?;
                ensure(
                    broadcasts_to(&c.shape, &y.shape),
                    "Gemm C does not broadcast",
                )?;
            }
            Ok(())
        }
        Op::MatMul { .. } if selects(OPS, OpKind::MatMul) => {
            ensure(n_in == 2 && n_out == 1, "MatMul takes 2 inputs, 1 output")?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            all_f32(&[a.dtype, b.dtype, y.dtype])?;
            let g = MatMulGeometry::new(&a.shape, &b.shape).ok_or(why("MatMul shapes"))?;
            ensure(g.output == y.shape, "MatMul output shape")
        }
        Op::QGemm(q) if selects(OPS, OpKind::QGemm) => {
            ensure(n_in == 4 && n_out == 1, "QGemm takes 4 inputs")?;
            let (a, b, bias, requant, y) = (input(0)?, input(1)?, input(2)?, input(3)?, output(0)?);
            ensure(
                a.shape.rank() == 2 && y.shape.rank() == 2,
                "QGemm operands are matrices",
            )?;
            let (layout, n, b_k) = QGemmWeights::of(&b.shape).ok_or(why(
                "QGemm weights are [N, K] or blocked [N/4, K/4, 4, 4] with K/4 even",
            ))?;
            // Read from the weights' shape, checked once, at load.
            ensure(
                selects_qgemm_weights(OPS, layout),
                "this QGemm weight layout is not linked into this build (its OPS selection)",
            )?;
            let (m, k) = (a.shape.dim_checked(0), a.shape.dim_checked(1));
            ensure(b_k == k, "QGemm inner dimensions differ")?;
            ensure(y.shape.dims_checked() == [m, n], "QGemm output shape")?;
            ensure(bias.shape.dims_checked() == [n], "QGemm bias shape")?;
            check_integer_operands(a, b, bias, requant, y, &q, n)
        }
        Op::MatMulInteger if selects(OPS, OpKind::MatMulInteger) => {
            ensure(n_in == 4 && n_out == 1, "MatMulInteger takes 4 inputs")?;
            let (a, b, a_zero, b_zero, y) =
                (input(0)?, input(1)?, input(2)?, input(3)?, output(0)?);
            ensure(
                is_byte(a) && is_byte(b) && y.dtype == DType::I32,
                "MatMulInteger reads 8-bit tensors and writes int32",
            )?;
            same_dtype(&[a.dtype, a_zero.dtype])?;
            same_dtype(&[b.dtype, b_zero.dtype])?;
            let g = MatMulGeometry::new(&a.shape, &b.shape).ok_or(why("MatMulInteger shapes"))?;
            ensure(g.output == y.shape, "MatMulInteger output shape")?;
            ensure(
                a_zero.elements() == 1 || (a.shape.rank() == 2 && a_zero.elements() == g.m),
                "MatMulInteger A zero point is one value or one per row",
            )?;
            ensure(
                b_zero.elements() == 1 || (b.shape.rank() == 2 && b_zero.elements() == g.n),
                "MatMulInteger B zero point is one value or one per column",
            )
        }
        Op::Dft(d) if selects(OPS, OpKind::Dft) => {
            ensure(
                (2..=3).contains(&n_in) && n_out == 1,
                "DFT takes a signal, its twiddles and an optional window",
            )?;
            let (x, twiddles, y) = (input(0)?, input(1)?, output(0)?);
            all_f32(&[x.dtype, twiddles.dtype, y.dtype])?;
            let g = geometry::DftGeometry::new(&d, &x.shape).ok_or(why("DFT signal shape"))?;
            ensure(g.out_shape == y.shape, "DFT output shape")?;
            ensure(
                twiddles.shape.dims_checked() == [d.length, 2],
                "DFT twiddles are [length, 2]",
            )?;
            if let Some(window) = optional(2) {
                all_f32(&[window.dtype])?;
                ensure(
                    d.frame_step > 0 && window.shape.dims_checked() == [d.length],
                    "an STFT window has the frame's length",
                )?;
            }
            require_scratch(
                step.scratch,
                2 * d.length,
                "DFT needs a scratch of 2·length",
            )
        }
        _ => Err(why(
            "this op kind is not linked into this build (its OPS selection)",
        )),
    }
}
