//! Per-op rules checked at load: operand counts, dtypes, shapes and memory overlap.
//!
//! After these pass, a device may index its tensors without further checks: every shape a kernel
//! derives from the op's parameters agrees with the sizes the plan gave the tensors.

use ferrite_hal::geometry::{self, broadcast, broadcasts_to, conv_out, nchw, MatMulGeometry};
use ferrite_hal::op::{Conv, ConvTranspose, PadMode, Pool, Requantize, Window};
use ferrite_hal::{selects, DType, Location, Op, OpKind, Selection, Step, TensorDesc, MAX_RANK};

type Rule = Result<(), &'static str>;

/// Element `i` of `d`, `None` past its end (no panicking index on untrusted shapes).
fn at(d: &[usize], i: usize) -> Option<usize> {
    d.get(i).copied()
}

/// Whether two sub-slices both exist and are equal.
fn same(a: Option<&[usize]>, b: Option<&[usize]>) -> bool {
    matches!((a, b), (Some(x), Some(y)) if x == y)
}

fn ensure(cond: bool, rule: &'static str) -> Rule {
    if cond {
        Ok(())
    } else {
        Err(rule)
    }
}

/// Checks one step against its op's rules.
// Out of line: run once per load or inference, so inlining only copies it (flash).
#[inline(never)]
pub(crate) fn check_step<const OPS: Selection>(step: &Step<'_>) -> Rule {
    check_overlap(step)?;
    if let Some(a) = step.op.activation() {
        ensure(
            a.is_fusable(),
            "a fused activation must be Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid or HardSwish",
        )?;
    }
    let input = |i: usize| step.inputs.get(i).ok_or("missing input");
    let output = |i: usize| step.outputs.get(i).ok_or("missing output");
    let n_in = step.inputs.len();
    let n_out = step.outputs.len();
    match step.op {
        Op::Conv(c) if selects(OPS, OpKind::Conv) => {
            ensure(
                (2..=3).contains(&n_in) && n_out == 1,
                "Conv takes 2-3 inputs, 1 output",
            )?;
            let bias = step.inputs.get(2);
            check_conv(
                &c,
                &input(0)?,
                &input(1)?,
                bias.as_ref(),
                &output(0)?,
                step.scratch,
            )
        }
        Op::ConvTranspose(c) if selects(OPS, OpKind::ConvTranspose) => {
            ensure(
                (2..=3).contains(&n_in) && n_out == 1,
                "ConvTranspose takes 2-3 inputs",
            )?;
            let bias = step.inputs.get(2);
            check_conv_transpose(&c, &input(0)?, &input(1)?, bias.as_ref(), &output(0)?)
        }
        Op::Gemm(_) if selects(OPS, OpKind::Gemm) => {
            ensure(
                (2..=3).contains(&n_in) && n_out == 1,
                "Gemm takes 2-3 inputs, 1 output",
            )?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            all_f32(&[a, b, y])?;
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
            if let Some(c) = step.inputs.get(2) {
                all_f32(&[c])?;
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
            all_f32(&[a, b, y])?;
            let g = MatMulGeometry::new(&a.shape, &b.shape).ok_or("MatMul shapes")?;
            ensure(g.output == y.shape, "MatMul output shape")
        }
        Op::Binary { .. } if selects(OPS, OpKind::Binary) => {
            ensure(
                n_in == 2 && n_out == 1,
                "binary op takes 2 inputs, 1 output",
            )?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            same_dtype(&[a, b, y])?;
            let Op::Binary { op, activation } = step.op else {
                return Err("binary op");
            };
            if a.dtype == DType::F32 {
                ensure(op.takes_floats(), "shifts are on integers")?;
            } else {
                ensure(
                    a.dtype.is_integer(),
                    "binary op operands are float32 or integers",
                )?;
                ensure(
                    activation == ferrite_hal::Activation::None,
                    "integer binary ops fuse no activation",
                )?;
            }
            ensure(
                broadcast(&a.shape, &b.shape) == Some(y.shape),
                "binary output is not the broadcast of its inputs",
            )
        }
        Op::Convert if selects(OPS, OpKind::Convert) => {
            ensure(n_in == 1 && n_out == 1, "Cast takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            ensure(x.shape == y.shape, "Cast output shape")
        }
        Op::Unary(_) | Op::Softmax { .. } | Op::LogSoftmax { .. } | Op::Hardmax { .. }
            if selects(OPS, OpKind::Unary)
                || selects(OPS, OpKind::Softmax)
                || selects(OPS, OpKind::LogSoftmax)
                || selects(OPS, OpKind::Hardmax) =>
        {
            ensure(n_in == 1 && n_out == 1, "takes 1 input, 1 output")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x, y])?;
            ensure(x.shape == y.shape, "output shape differs from input")?;
            if let Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::Hardmax { axis } = step.op {
                ensure(axis < x.shape.rank(), "softmax axis")?;
            }
            Ok(())
        }
        Op::ArgMax(a) | Op::ArgMin(a)
            if selects(OPS, OpKind::ArgMax) || selects(OPS, OpKind::ArgMin) =>
        {
            ensure(n_in == 1 && n_out == 1, "ArgMax/ArgMin take 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x])?;
            ensure(y.dtype == DType::I64, "ArgMax/ArgMin write int64")?;
            let rank = x.shape.rank();
            ensure(a.axis < rank, "ArgMax/ArgMin axis")?;
            let d = x.shape.dims_checked();
            let kept = y.shape.rank() == rank
                && (0..rank).all(|i| {
                    Some(y.shape.dim_checked(i)) == if i == a.axis { Some(1) } else { at(d, i) }
                });
            let removed = y.shape.rank() + 1 == rank
                && same(d.get(..a.axis), y.shape.dims_checked().get(..a.axis))
                && same(d.get(a.axis + 1..), y.shape.dims_checked().get(a.axis..));
            ensure(kept || removed, "ArgMax/ArgMin output shape")?;
            // An empty axis has no index to report.
            ensure(
                at(d, a.axis).is_some_and(|n| n > 0) || y.elements() == 0,
                "ArgMax/ArgMin of an empty axis",
            )
        }
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
                all_f32(&[x, y])?;
            }
            check_pool(&p, &x, &y)
        }
        Op::GlobalAvgPool if selects(OPS, OpKind::GlobalAvgPool) => {
            ensure(n_in == 1 && n_out == 1, "GlobalAveragePool takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x, y])?;
            ensure(x.shape.rank() >= 3, "GlobalAveragePool input rank")?;
            let ok = y.shape.rank() == x.shape.rank()
                && same(
                    y.shape.dims_checked().get(..2),
                    x.shape.dims_checked().get(..2),
                )
                && y.shape.dims_checked().iter().skip(2).all(|&d| d == 1);
            ensure(ok, "GlobalAveragePool output shape")
        }
        Op::BatchNorm { .. } if selects(OPS, OpKind::BatchNorm) => {
            ensure(n_in == 5 && n_out == 1, "BatchNormalization takes 5 inputs")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x, y])?;
            ensure(
                x.shape.rank() >= 2 && x.shape == y.shape,
                "BatchNormalization shapes",
            )?;
            for i in 1..5 {
                let p = input(i)?;
                all_f32(&[p])?;
                ensure(
                    p.shape.dims_checked() == [x.shape.dim_checked(1)],
                    "BatchNormalization parameter shape",
                )?;
            }
            Ok(())
        }
        Op::Transpose { perm } if selects(OPS, OpKind::Transpose) => {
            ensure(n_in == 1 && n_out == 1, "Transpose takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x, y])?;
            let rank = x.shape.rank();
            ensure(y.shape.rank() == rank, "Transpose rank")?;
            let mut seen = [false; MAX_RANK];
            for (axis, &p) in perm.iter().enumerate().take(rank) {
                let slot = seen.get_mut(p).filter(|s| p < rank && !**s);
                *slot.ok_or("Transpose perm is not a permutation")? = true;
                ensure(
                    at(y.shape.dims_checked(), axis).is_some()
                        && at(y.shape.dims_checked(), axis) == at(x.shape.dims_checked(), p),
                    "Transpose output shape",
                )?;
            }
            Ok(())
        }
        Op::Concat { axis } if selects(OPS, OpKind::Concat) => {
            ensure(n_in >= 1 && n_out == 1, "Concat takes inputs and 1 output")?;
            let y = output(0)?;
            check_parts(step.inputs.iter(), &y, axis)
        }
        Op::Split { axis } if selects(OPS, OpKind::Split) => {
            ensure(n_in == 1 && n_out >= 1, "Split takes 1 input")?;
            let x = input(0)?;
            check_parts(step.outputs.iter(), &x, axis)
        }
        Op::Slice { starts, steps } if selects(OPS, OpKind::Slice) => {
            ensure(n_in == 1 && n_out == 1, "Slice takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x, y])?;
            ensure(x.shape.rank() == y.shape.rank(), "Slice rank")?;
            let axes = x.shape.dims_checked().iter().zip(y.shape.dims_checked());
            for ((&dim, &count), (&start, &step)) in axes.zip(starts.iter().zip(&steps)) {
                if count == 0 {
                    continue;
                }
                let dim = dim as isize;
                let first = start as isize;
                let last = (count as isize - 1)
                    .checked_mul(step)
                    .and_then(|d| d.checked_add(first))
                    .ok_or("Slice overflows")?;
                ensure(
                    (0..dim).contains(&first) && (0..dim).contains(&last),
                    "Slice reads outside its input",
                )?;
            }
            Ok(())
        }
        Op::Pad {
            mode, begins, ends, ..
        } if selects(OPS, OpKind::Pad) => {
            ensure(n_in == 1 && n_out == 1, "Pad takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x, y])?;
            ensure(x.shape.rank() == y.shape.rank(), "Pad rank")?;
            for (axis, (&d, &want)) in x
                .shape
                .dims_checked()
                .iter()
                .zip(y.shape.dims_checked())
                .enumerate()
            {
                let (begin, end) = (
                    *begins.get(axis).ok_or("Pad rank")?,
                    *ends.get(axis).ok_or("Pad rank")?,
                );
                let out = d
                    .checked_add(begin)
                    .and_then(|v| v.checked_add(end))
                    .ok_or("Pad overflows")?;
                ensure(out == want, "Pad output shape")?;
                let padded = begin + end > 0;
                match mode {
                    PadMode::Constant => {}
                    PadMode::Edge => ensure(!padded || d > 0, "edge padding of an empty axis")?,
                    PadMode::Reflect => ensure(
                        !padded || (begin < d && end < d),
                        "reflect padding larger than the axis",
                    )?,
                }
            }
            Ok(())
        }
        Op::Gather { axis } if selects(OPS, OpKind::Gather) => {
            ensure(n_in == 2 && n_out == 1, "Gather takes 2 inputs")?;
            let (data, idx, y) = (input(0)?, input(1)?, output(0)?);
            same_dtype(&[data, y])?;
            ensure(
                matches!(idx.dtype, DType::I32 | DType::I64),
                "Gather indices type",
            )?;
            let r = data.shape.rank();
            ensure(axis < r, "Gather axis")?;
            let d = data.shape.dims_checked();
            let expected = d
                .get(..axis)
                .unwrap_or(&[])
                .iter()
                .chain(idx.shape.dims_checked())
                .chain(d.get(axis + 1..).unwrap_or(&[]));
            ensure(
                y.shape.rank() == r - 1 + idx.shape.rank()
                    && expected.zip(y.shape.dims_checked()).all(|(a, b)| a == b),
                "Gather output shape",
            )
        }
        Op::Reduce { axes, .. } if selects(OPS, OpKind::Reduce) => {
            ensure(n_in == 1 && n_out == 1, "Reduce takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x, y])?;
            let rank = x.shape.rank();
            ensure(rank < 32 && axes >> rank == 0, "Reduce axes")?;
            let kept = x
                .shape
                .dims_checked()
                .iter()
                .enumerate()
                .filter(|(i, _)| axes & (1 << i) == 0)
                .map(|(_, d)| *d);
            let keep_dims = x.shape.dims_checked().iter().enumerate().map(|(i, d)| {
                if axes & (1 << i) != 0 {
                    1
                } else {
                    *d
                }
            });
            let squeezed = y.shape.rank() == kept.clone().count()
                && kept.zip(y.shape.dims_checked()).all(|(a, b)| a == *b);
            let kept_form = y.shape.rank() == rank
                && keep_dims.zip(y.shape.dims_checked()).all(|(a, b)| a == *b);
            ensure(squeezed || kept_form, "Reduce output shape")
        }
        Op::Copy if selects(OPS, OpKind::Copy) => {
            ensure(n_in == 1 && n_out == 1, "Copy takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x, y])?;
            ensure(x.bytes == y.bytes, "Copy sizes differ")
        }
        Op::QConv(c) if selects(OPS, OpKind::QConv) => {
            ensure(n_in == 4 && n_out == 1, "QConv takes 4 inputs")?;
            let (x, w, bias, requant, y) = (input(0)?, input(1)?, input(2)?, input(3)?, output(0)?);
            let [oc, icg, oh, ow] =
                check_conv_geometry(&c.window, c.group, &x, &w, Some(&bias), &y)?;
            check_integer_operands(&x, &w, &bias, &requant, &y, &c.requantize, oc)?;
            let need = geometry::qconv_scratch_elements(&c, icg, oh, ow)
                .ok_or("QConv scratch overflows")?;
            require_scratch(step.scratch, need, "QConv scratch is missing or too small")
        }
        Op::QGemm(q) if selects(OPS, OpKind::QGemm) => {
            ensure(n_in == 4 && n_out == 1, "QGemm takes 4 inputs")?;
            let (a, b, bias, requant, y) = (input(0)?, input(1)?, input(2)?, input(3)?, output(0)?);
            ensure(
                a.shape.rank() == 2 && b.shape.rank() == 2 && y.shape.rank() == 2,
                "QGemm operands are matrices",
            )?;
            let (m, k, n) = (
                a.shape.dim_checked(0),
                a.shape.dim_checked(1),
                b.shape.dim_checked(0),
            );
            ensure(b.shape.dim_checked(1) == k, "QGemm inner dimensions differ")?;
            ensure(y.shape.dims_checked() == [m, n], "QGemm output shape")?;
            ensure(bias.shape.dims_checked() == [n], "QGemm bias shape")?;
            check_integer_operands(&a, &b, &bias, &requant, &y, &q, n)
        }
        Op::QAdd(q) if selects(OPS, OpKind::QAdd) => {
            ensure(n_in == 2 && n_out == 1, "QAdd takes 2 inputs")?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            ensure(
                a.shape == y.shape && b.shape == y.shape,
                "QAdd shapes differ",
            )?;
            check_integer_binary(
                &a,
                &b,
                &y,
                [q.a_zero, q.b_zero, q.output_zero, q.min, q.max],
            )?;
            let need = geometry::qadd_scratch_elements(y.elements());
            require_scratch(step.scratch, need, "QAdd scratch is missing or too small")
        }
        Op::QGlobalAvgPool(q) if selects(OPS, OpKind::QGlobalAvgPool) => {
            ensure(n_in == 1 && n_out == 1, "QGlobalAveragePool takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            ensure(
                matches!(x.dtype, DType::I8 | DType::U8)
                    && matches!(y.dtype, DType::I8 | DType::U8),
                "QGlobalAveragePool operands are 8-bit",
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
            // The int32 sum of up to 255 per element must not overflow.
            ensure(
                plane <= (i32::MAX / 255) as usize,
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
        Op::QMul(q) if selects(OPS, OpKind::QMul) => {
            ensure(n_in == 2 && n_out == 1, "QMul takes 2 inputs")?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            ensure(
                broadcast(&a.shape, &b.shape) == Some(y.shape),
                "QMul output is not the broadcast of its inputs",
            )?;
            check_integer_binary(
                &a,
                &b,
                &y,
                [q.a_zero, q.b_zero, q.output_zero, q.min, q.max],
            )
        }
        Op::QLookup if selects(OPS, OpKind::QLookup) => {
            ensure(n_in == 2 && n_out == 1, "QLookup takes 2 inputs")?;
            let (x, table, y) = (input(0)?, input(1)?, output(0)?);
            ensure(
                matches!(x.dtype, DType::I8 | DType::U8)
                    && x.dtype == y.dtype
                    && table.dtype == y.dtype,
                "QLookup operands are 8-bit, of one type",
            )?;
            ensure(x.shape == y.shape, "QLookup output shape")?;
            ensure(table.elements() == 256, "QLookup table has 256 entries")
        }
        Op::MatMulInteger if selects(OPS, OpKind::MatMulInteger) => {
            ensure(n_in == 4 && n_out == 1, "MatMulInteger takes 4 inputs")?;
            let (a, b, a_zero, b_zero, y) =
                (input(0)?, input(1)?, input(2)?, input(3)?, output(0)?);
            ensure(
                is_byte(&a) && is_byte(&b) && y.dtype == DType::I32,
                "MatMulInteger reads 8-bit tensors and writes int32",
            )?;
            same_dtype(&[a, a_zero])?;
            same_dtype(&[b, b_zero])?;
            let g = MatMulGeometry::new(&a.shape, &b.shape).ok_or("MatMulInteger shapes")?;
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
        Op::ConvInteger(c) if selects(OPS, OpKind::ConvInteger) => {
            ensure(n_in == 4 && n_out == 1, "ConvInteger takes 4 inputs")?;
            let (x, w, x_zero, w_zero, y) =
                (input(0)?, input(1)?, input(2)?, input(3)?, output(0)?);
            ensure(
                is_byte(&x) && is_byte(&w) && y.dtype == DType::I32,
                "ConvInteger reads 8-bit tensors and writes int32",
            )?;
            same_dtype(&[x, x_zero])?;
            same_dtype(&[w, w_zero])?;
            let [oc, ..] = check_conv_geometry(&c.window, c.group, &x, &w, None, &y)?;
            ensure(
                x_zero.elements() == 1,
                "ConvInteger input zero point is one value",
            )?;
            ensure(
                w_zero.elements() == 1 || w_zero.elements() == oc,
                "ConvInteger weight zero point is one value or one per output channel",
            )
        }
        Op::DynamicQuantize if selects(OPS, OpKind::DynamicQuantize) => {
            ensure(
                n_in == 1 && n_out == 3,
                "DynamicQuantizeLinear takes 1 input, 3 outputs",
            )?;
            let (x, y, scale, zero) = (input(0)?, output(0)?, output(1)?, output(2)?);
            all_f32(&[x, scale])?;
            ensure(
                y.dtype == DType::U8 && zero.dtype == DType::U8,
                "DynamicQuantizeLinear writes uint8",
            )?;
            ensure(x.shape == y.shape, "DynamicQuantizeLinear output shape")?;
            ensure(
                scale.elements() == 1 && zero.elements() == 1,
                "DynamicQuantizeLinear scale and zero point are scalars",
            )
        }
        Op::QSoftmax(q) if selects(OPS, OpKind::QSoftmax) => {
            ensure(n_in == 2 && n_out == 1, "QSoftmax takes 2 inputs")?;
            let (x, table, y) = (input(0)?, input(1)?, output(0)?);
            ensure(
                is_byte(&x) && x.dtype == y.dtype,
                "QSoftmax operands are 8-bit, of one type",
            )?;
            ensure(x.shape == y.shape, "QSoftmax output shape")?;
            ensure(q.axis < x.shape.rank(), "QSoftmax axis")?;
            ensure(
                table.dtype == DType::I32 && table.elements() == 256,
                "QSoftmax table is 256 int32 values",
            )?;
            ensure(
                [q.output_zero, q.min, q.max]
                    .iter()
                    .all(|&v| in_range(y.dtype, v)),
                "QSoftmax zero point or clamp outside its type",
            )
        }
        Op::QAvgPool(q) if selects(OPS, OpKind::QAvgPool) => {
            ensure(n_in == 1 && n_out == 1, "QAveragePool takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            ensure(
                is_byte(&x) && x.dtype == y.dtype,
                "QAveragePool operands are 8-bit, of one type",
            )?;
            check_pool(&q.pool, &x, &y)?;
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
        Op::Compare(_) | Op::Logical(_)
            if selects(OPS, OpKind::Compare) || selects(OPS, OpKind::Logical) =>
        {
            ensure(n_in == 2 && n_out == 1, "takes 2 inputs, 1 output")?;
            let (a, b, y) = (input(0)?, input(1)?, output(0)?);
            same_dtype(&[a, b])?;
            ensure(y.dtype == DType::Bool, "comparisons and logic write bool")?;
            if matches!(step.op, Op::Logical(_)) {
                ensure(a.dtype == DType::Bool, "logic reads bool")?;
            }
            ensure(
                broadcast(&a.shape, &b.shape) == Some(y.shape),
                "output is not the broadcast of the inputs",
            )
        }
        Op::Expand if selects(OPS, OpKind::Expand) => {
            ensure(n_in == 1 && n_out == 1, "Expand takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x, y])?;
            ensure(
                broadcasts_to(&x.shape, &y.shape),
                "Expand output is not a broadcast of the input",
            )
        }
        Op::GatherElements { axis } if selects(OPS, OpKind::GatherElements) => {
            ensure(n_in == 2 && n_out == 1, "GatherElements takes 2 inputs")?;
            let (data, idx, y) = (input(0)?, input(1)?, output(0)?);
            same_dtype(&[data, y])?;
            is_index(&idx)?;
            let rank = data.shape.rank();
            ensure(
                axis < rank && idx.shape.rank() == rank && y.shape == idx.shape,
                "GatherElements shapes",
            )?;
            within(&idx, &data, axis)
        }
        Op::ScatterElements { axis, reduction } if selects(OPS, OpKind::ScatterElements) => {
            ensure(n_in == 3 && n_out == 1, "ScatterElements takes 3 inputs")?;
            let (data, idx, up, y) = (input(0)?, input(1)?, input(2)?, output(0)?);
            same_dtype(&[data, up, y])?;
            is_index(&idx)?;
            check_reduction(reduction, &data)?;
            let rank = data.shape.rank();
            ensure(
                axis < rank
                    && idx.shape == up.shape
                    && idx.shape.rank() == rank
                    && y.shape == data.shape,
                "ScatterElements shapes",
            )?;
            within(&idx, &data, axis)
        }
        Op::GatherNd { batch_dims } if selects(OPS, OpKind::GatherNd) => {
            ensure(n_in == 2 && n_out == 1, "GatherND takes 2 inputs")?;
            let (data, idx, y) = (input(0)?, input(1)?, output(0)?);
            same_dtype(&[data, y])?;
            is_index(&idx)?;
            let q = nd_depth(&data, &idx, batch_dims)?;
            let (r, m) = (data.shape.rank(), idx.shape.rank());
            let mut want = [0usize; MAX_RANK];
            let mut n = 0;
            let outer = idx
                .shape
                .dims_checked()
                .get(..m - 1)
                .ok_or("GatherND index rank")?;
            let inner = data.shape.dims_checked().get(batch_dims + q..r);
            for d in outer
                .iter()
                .chain(inner.ok_or("GatherND index tuple length")?)
            {
                *want.get_mut(n).ok_or("GatherND output rank")? = *d;
                n += 1;
            }
            ensure(
                y.shape.dims_checked() == &want[..n],
                "GatherND output shape",
            )
        }
        Op::ScatterNd { reduction } if selects(OPS, OpKind::ScatterNd) => {
            ensure(n_in == 3 && n_out == 1, "ScatterND takes 3 inputs")?;
            let (data, idx, up, y) = (input(0)?, input(1)?, input(2)?, output(0)?);
            same_dtype(&[data, up, y])?;
            is_index(&idx)?;
            check_reduction(reduction, &data)?;
            let q = nd_depth(&data, &idx, 0)?;
            let m = idx.shape.rank();
            let want_rank = m - 1 + data.shape.rank() - q;
            ensure(
                up.shape.rank() == want_rank
                    && same(
                        up.shape.dims_checked().get(..m - 1),
                        idx.shape.dims_checked().get(..m - 1),
                    )
                    && same(
                        up.shape.dims_checked().get(m - 1..),
                        data.shape.dims_checked().get(q..),
                    ),
                "ScatterND updates shape",
            )?;
            ensure(y.shape == data.shape, "ScatterND output shape")
        }
        Op::TopK { axis, .. } if selects(OPS, OpKind::TopK) => {
            ensure(n_in == 1 && n_out == 2, "TopK takes 1 input, 2 outputs")?;
            let (x, values, indices) = (input(0)?, output(0)?, output(1)?);
            same_dtype(&[x, values])?;
            ensure(
                x.dtype == DType::F32 || x.dtype.is_integer(),
                "TopK compares floats or integers",
            )?;
            ensure(indices.dtype == DType::I64, "TopK indices are int64")?;
            let rank = x.shape.rank();
            ensure(axis < rank, "TopK axis")?;
            ensure(
                values.shape == indices.shape
                    && values.shape.rank() == rank
                    && values.shape.dim_checked(axis) <= x.shape.dim_checked(axis)
                    && (0..rank).all(|d| {
                        d == axis || values.shape.dim_checked(d) == x.shape.dim_checked(d)
                    }),
                "TopK output shapes",
            )
        }
        Op::CumSum { axis, .. } if selects(OPS, OpKind::CumSum) => {
            ensure(n_in == 1 && n_out == 1, "CumSum takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x, y])?;
            ensure(
                matches!(x.dtype, DType::F32 | DType::I32 | DType::I64),
                "CumSum is on float32, int32 or int64",
            )?;
            ensure(axis < x.shape.rank() && x.shape == y.shape, "CumSum shapes")
        }
        Op::Recurrent(r) if selects(OPS, OpKind::Recurrent) => check_recurrent(&r, step),
        Op::Det if selects(OPS, OpKind::Det) => {
            ensure(n_in == 1 && n_out == 1, "Det takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            all_f32(&[x, y])?;
            let r = x.shape.rank();
            ensure(
                r >= 2 && x.shape.dim_checked(r - 1) == x.shape.dim_checked(r - 2),
                "Det input is square",
            )?;
            ensure(
                y.shape.rank() == r - 2
                    && Some(y.shape.dims_checked()) == x.shape.dims_checked().get(..r - 2),
                "Det output shape",
            )?;
            let n = x.shape.dim_checked(r - 1);
            require_scratch(step.scratch, 2 * n * n, "Det needs a scratch of 2·n·n")
        }
        Op::Resample { axis, .. } if selects(OPS, OpKind::Resample) => {
            ensure(n_in == 3 && n_out == 1, "Resample takes 3 inputs")?;
            let (x, idx, w, y) = (input(0)?, input(1)?, input(2)?, output(0)?);
            all_f32(&[x, w, y])?;
            ensure(idx.dtype == DType::I32, "Resample indices are int32")?;
            let rank = x.shape.rank();
            ensure(axis < rank && y.shape.rank() == rank, "Resample axis")?;
            ensure(
                idx.shape.rank() == 2 && idx.shape == w.shape && idx.shape.dim_checked(1) >= 1,
                "Resample tap tables are [n, taps]",
            )?;
            ensure(
                idx.shape.dim_checked(0) == y.shape.dim_checked(axis)
                    && (0..rank)
                        .all(|d| d == axis || x.shape.dim_checked(d) == y.shape.dim_checked(d)),
                "Resample output shape",
            )
        }
        Op::Trilu { .. } if selects(OPS, OpKind::Trilu) => {
            ensure(n_in == 1 && n_out == 1, "Trilu takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            same_dtype(&[x, y])?;
            ensure(x.shape == y.shape, "Trilu output shape")?;
            ensure(x.shape.rank() >= 2, "Trilu input rank")
        }
        Op::Not if selects(OPS, OpKind::Not) => {
            ensure(n_in == 1 && n_out == 1, "Not takes 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            ensure(
                x.dtype == DType::Bool && y.dtype == DType::Bool,
                "Not is on bool",
            )?;
            ensure(x.shape == y.shape, "Not output shape")
        }
        Op::Classify(_) if selects(OPS, OpKind::Classify) => {
            ensure(n_in == 1 && n_out == 1, "IsNaN/IsInf take 1 input")?;
            let (x, y) = (input(0)?, output(0)?);
            ensure(
                x.dtype == DType::F32 && y.dtype == DType::Bool,
                "IsNaN/IsInf: float to bool",
            )?;
            ensure(x.shape == y.shape, "IsNaN/IsInf output shape")
        }
        Op::Where if selects(OPS, OpKind::Where) => {
            ensure(n_in == 3 && n_out == 1, "Where takes 3 inputs")?;
            let (c, x, z, y) = (input(0)?, input(1)?, input(2)?, output(0)?);
            ensure(c.dtype == DType::Bool, "Where's condition is bool")?;
            same_dtype(&[x, z, y])?;
            let xz = broadcast(&x.shape, &z.shape).ok_or("Where shapes")?;
            ensure(
                broadcast(&c.shape, &xz) == Some(y.shape),
                "Where output is not the broadcast of its inputs",
            )
        }
        Op::Quantize { axis } if selects(OPS, OpKind::Quantize) => {
            ensure(n_in == 3 && n_out == 1, "QuantizeLinear takes 3 inputs")?;
            let (x, scale, zero, y) = (input(0)?, input(1)?, input(2)?, output(0)?);
            all_f32(&[x, scale])?;
            ensure(
                matches!(zero.dtype, DType::I8 | DType::U8),
                "QuantizeLinear zero point type",
            )?;
            same_dtype(&[zero, y])?;
            ensure(x.shape == y.shape, "QuantizeLinear output shape")?;
            check_quantization_parameters(&x, axis, &scale, Some(&zero))
        }
        Op::Dequantize { axis } if selects(OPS, OpKind::Dequantize) => {
            ensure(
                (2..=3).contains(&n_in) && n_out == 1,
                "DequantizeLinear takes 2-3 inputs",
            )?;
            let (x, scale, y) = (input(0)?, input(1)?, output(0)?);
            ensure(
                matches!(x.dtype, DType::I8 | DType::U8 | DType::I32),
                "DequantizeLinear input type",
            )?;
            all_f32(&[scale, y])?;
            ensure(x.shape == y.shape, "DequantizeLinear output shape")?;
            let zero = step.inputs.get(2);
            if let Some(z) = &zero {
                same_dtype(&[x, *z])?;
            }
            check_quantization_parameters(&x, axis, &scale, zero.as_ref())
        }
        _ => Err("this op kind is not linked into this build (its OPS selection)"),
    }
}

/// Scale (and zero point) are one value, or one per element of `x` along `axis`.
fn check_quantization_parameters(
    x: &TensorDesc,
    axis: usize,
    scale: &TensorDesc,
    zero: Option<&TensorDesc>,
) -> Rule {
    let n = scale.elements();
    ensure(
        scale.shape.rank() <= 1,
        "quantization scale is a scalar or a vector",
    )?;
    ensure(
        n == 1 || (axis < x.shape.rank() && n == x.shape.dim_checked(axis)),
        "quantization scale length",
    )?;
    if let Some(z) = zero {
        ensure(z.shape == scale.shape, "zero point and scale shapes differ")?;
    }
    Ok(())
}

fn all_f32(ts: &[TensorDesc]) -> Rule {
    ensure(
        ts.iter().all(|t| t.dtype == DType::F32),
        "operands must be float32",
    )
}

fn same_dtype(ts: &[TensorDesc]) -> Rule {
    ensure(
        ts.windows(2).all(|w| w[0].dtype == w[1].dtype),
        "operands must share one element type",
    )
}

/// `parts` concatenated along `axis` form `whole`.
fn check_parts(
    parts: impl Iterator<Item = Option<TensorDesc>>,
    whole: &TensorDesc,
    axis: usize,
) -> Rule {
    let rank = whole.shape.rank();
    ensure(axis < rank, "axis out of range")?;
    let mut total = 0usize;
    for part in parts {
        let part = part.ok_or("missing operand")?;
        same_dtype(&[part, *whole])?;
        ensure(part.shape.rank() == rank, "ranks differ")?;
        for a in 0..rank {
            if a != axis {
                ensure(
                    at(part.shape.dims_checked(), a).is_some()
                        && at(part.shape.dims_checked(), a) == at(whole.shape.dims_checked(), a),
                    "shapes differ off the axis",
                )?;
            }
        }
        total = total
            .checked_add(at(part.shape.dims_checked(), axis).ok_or("part rank")?)
            .ok_or("overflow")?;
    }
    ensure(
        Some(total) == at(whole.shape.dims_checked(), axis),
        "parts do not add up along the axis",
    )
}

fn check_window_rank(x: &TensorDesc, window: &ferrite_hal::op::Window) -> Rule {
    if x.shape.rank() == 3 {
        let w = window;
        ensure(
            w.kernel[0] == 1
                && w.stride[0] == 1
                && w.dilation[0] == 1
                && w.pads[0] == 0
                && w.pads[2] == 0,
            "1-D window must have height 1",
        )?;
    }
    Ok(())
}

use geometry::conv_scratch_elements;

fn check_conv(
    c: &Conv,
    x: &TensorDesc,
    w: &TensorDesc,
    b: Option<&TensorDesc>,
    y: &TensorDesc,
    scratch: Option<TensorDesc>,
) -> Rule {
    all_f32(&[*x, *w, *y])?;
    if let Some(b) = b {
        all_f32(&[*b])?;
    }
    let [_, icg, oh, ow] = check_conv_geometry(&c.window, c.group, x, w, b, y)?;
    let need = conv_scratch_elements(c, icg, oh, ow).ok_or("Conv scratch overflows")?;
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
    let [n, ch, h, wd] = nchw(&x.shape).ok_or("Conv input must be rank 3 or 4")?;
    ensure(w.shape.rank() == x.shape.rank(), "Conv weight rank")?;
    let [oc, icg, kh, kw] = nchw(&w.shape).ok_or("Conv weight rank")?;
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
    .ok_or("Conv window larger than input")?;
    let ow = conv_out(
        wd,
        kw,
        win.stride[1],
        win.dilation[1],
        win.pads[1],
        win.pads[3],
    )
    .ok_or("Conv window larger than input")?;
    ensure(
        nchw(&y.shape) == Some([n, oc, oh, ow]) && y.shape.rank() == x.shape.rank(),
        "Conv output shape",
    )?;
    Ok([oc, icg, oh, ow])
}

/// The operand types of an integer op: 8-bit input and output, int8 weights, int32 bias, and
/// `[channels, 2]` int32 requantization parameters with `channels` 1 or `per_channel`.
/// The operands of QAdd/QMul: 8-bit, of one type; `[a zero, b zero, output zero, min, max]`
/// values of it.
fn check_integer_binary(a: &TensorDesc, b: &TensorDesc, y: &TensorDesc, zeros: [i32; 5]) -> Rule {
    ensure(
        matches!(y.dtype, DType::I8 | DType::U8) && a.dtype == y.dtype && b.dtype == y.dtype,
        "integer binary op operands are 8-bit, of one type",
    )?;
    ensure(
        zeros.iter().all(|&v| in_range(y.dtype, v)),
        "integer binary op zero point or clamp outside its type",
    )
}

/// One direction of an RNN/GRU/LSTM: every operand's shape follows from X's and R's.
fn check_recurrent(r: &ferrite_hal::op::Recurrent, step: &Step<'_>) -> Rule {
    let lstm = matches!(r.cell, ferrite_hal::op::Cell::Lstm { .. });
    let (n_in, n_out) = (step.inputs.len(), step.outputs.len());
    ensure(
        (3..=7).contains(&n_in) && n_out == if lstm { 3 } else { 2 },
        "Recurrent operand counts",
    )?;
    let input = |i: usize| step.inputs.get(i).ok_or("missing input");
    let output = |i: usize| step.outputs.get(i).ok_or("missing output");
    let (x, w, rec) = (input(0)?, input(1)?, input(2)?);
    ensure(
        x.shape.rank() == 3 && w.shape.rank() == 2 && rec.shape.rank() == 2,
        "Recurrent ranks",
    )?;
    let (seq, batch, features) = (
        x.shape.dim_checked(0),
        x.shape.dim_checked(1),
        x.shape.dim_checked(2),
    );
    let hidden = rec.shape.dim_checked(1);
    let gates = r.cell.gates();
    let rows = gates * hidden;
    ensure(
        hidden > 0
            && w.shape.dims_checked() == [rows, features]
            && rec.shape.dim_checked(0) == rows,
        "Recurrent weight shapes",
    )?;
    let mut all = [x, w, rec];
    all_f32(&all)?;
    let vector = |t: &TensorDesc, n: usize| t.shape.rank() == 1 && t.shape.dim_checked(0) == n;
    let state = |t: &TensorDesc| t.shape.dims_checked() == [batch, hidden];
    if let Some(b) = step.inputs.get(3) {
        ensure(
            vector(&b, 2 * rows) && b.dtype == DType::F32,
            "Recurrent bias shape",
        )?;
    }
    if let Some(h) = step.inputs.get(4) {
        ensure(
            state(&h) && h.dtype == DType::F32,
            "Recurrent initial_h shape",
        )?;
    }
    if let Some(c) = step.inputs.get(5) {
        ensure(
            lstm && state(&c) && c.dtype == DType::F32,
            "Recurrent initial_c shape",
        )?;
    }
    if let Some(p) = step.inputs.get(6) {
        ensure(
            lstm && vector(&p, 3 * hidden) && p.dtype == DType::F32,
            "Recurrent peephole shape",
        )?;
    }
    let y = output(0)?;
    ensure(
        y.shape.dims_checked() == [seq, batch, hidden],
        "Recurrent Y shape",
    )?;
    for i in 1..n_out {
        let t = output(i)?;
        ensure(state(&t), "Recurrent state output shape")?;
        all[0] = t;
        all_f32(&all[..1])?;
    }
    all_f32(&[y])?;
    require_scratch(
        step.scratch,
        2 * batch * rows,
        "Recurrent needs a scratch of 2·batch·gates·hidden",
    )
}

/// Element-wise indices are no larger than the data on every axis but `axis`.
fn within(idx: &TensorDesc, data: &TensorDesc, axis: usize) -> Rule {
    ensure(
        (0..data.shape.rank())
            .all(|d| d == axis || idx.shape.dim_checked(d) <= data.shape.dim_checked(d)),
        "indices are larger than the data",
    )
}

/// Index tensors are int32 or int64.
fn is_index(t: &TensorDesc) -> Rule {
    ensure(
        matches!(t.dtype, DType::I32 | DType::I64),
        "indices are int32 or int64",
    )
}

/// Scatter reductions other than replacement compute in f32.
fn check_reduction(reduction: ferrite_hal::op::Reduction, data: &TensorDesc) -> Rule {
    ensure(
        reduction == ferrite_hal::op::Reduction::None || data.dtype == DType::F32,
        "scatter reductions are on float32",
    )
}

/// The index-tuple length `q` of GatherND/ScatterND indices, checked against `data`.
fn nd_depth(data: &TensorDesc, idx: &TensorDesc, batch_dims: usize) -> Result<usize, &'static str> {
    let (r, m) = (data.shape.rank(), idx.shape.rank());
    ensure(
        m >= 1 && batch_dims < m && batch_dims < r.max(1),
        "ND index ranks",
    )?;
    let q = idx.shape.dim_checked(m - 1);
    ensure(q >= 1 && batch_dims + q <= r, "ND index tuple length")?;
    ensure(
        same(
            data.shape.dims_checked().get(..batch_dims),
            idx.shape.dims_checked().get(..batch_dims),
        ),
        "ND batch dims differ",
    )?;
    Ok(q)
}

/// A step that needs `need` f32 elements of scratch (0: none) has at least that much.
fn require_scratch(scratch: Option<TensorDesc>, need: usize, message: &'static str) -> Rule {
    if need == 0 {
        return Ok(());
    }
    let s = scratch.ok_or(message)?;
    ensure(s.dtype == DType::F32 && s.elements() >= need, message)
}

/// Whether `t` holds 8-bit integers.
fn is_byte(t: &TensorDesc) -> bool {
    matches!(t.dtype, DType::I8 | DType::U8)
}

/// Whether `v` is a value of 8-bit type `dtype`.
fn in_range(dtype: DType, v: i32) -> bool {
    match dtype {
        DType::I8 => (-128..=127).contains(&v),
        DType::U8 => (0..=255).contains(&v),
        _ => false,
    }
}

fn check_integer_operands(
    x: &TensorDesc,
    w: &TensorDesc,
    bias: &TensorDesc,
    requant: &TensorDesc,
    y: &TensorDesc,
    q: &Requantize,
    per_channel: usize,
) -> Rule {
    let byte = |t: &TensorDesc| matches!(t.dtype, DType::I8 | DType::U8);
    ensure(byte(x) && byte(y), "integer op input and output are 8-bit")?;
    ensure(w.dtype == DType::I8, "integer op weights are int8")?;
    ensure(
        bias.dtype == DType::I32 && requant.dtype == DType::I32,
        "integer op bias and requantization are int32",
    )?;
    let channels = requant.elements() / 2;
    ensure(
        requant.shape.rank() == 2
            && requant.shape.dim_checked(1) == 2
            && (channels == 1 || channels == per_channel),
        "requantization shape",
    )?;
    let (lo, hi) = if y.dtype == DType::I8 {
        (-128, 127)
    } else {
        (0, 255)
    };
    ensure(
        q.min >= lo && q.max <= hi && (lo..=hi).contains(&q.output_zero),
        "output clamp outside the output type",
    )?;
    let (lo, hi) = if x.dtype == DType::I8 {
        (-128, 127)
    } else {
        (0, 255)
    };
    ensure(
        (lo..=hi).contains(&q.input_zero),
        "input zero point outside the input type",
    )
}

fn check_conv_transpose(
    c: &ConvTranspose,
    x: &TensorDesc,
    w: &TensorDesc,
    b: Option<&TensorDesc>,
    y: &TensorDesc,
) -> Rule {
    all_f32(&[*x, *w, *y])?;
    let [n, ch, h, wd] = nchw(&x.shape).ok_or("ConvTranspose input must be rank 3 or 4")?;
    ensure(
        w.shape.rank() == x.shape.rank(),
        "ConvTranspose weight rank",
    )?;
    let [wc, ocg, kh, kw] = nchw(&w.shape).ok_or("ConvTranspose weight rank")?;
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
        .ok_or("ConvTranspose channels overflow")?;
    if let Some(b) = b {
        all_f32(&[*b])?;
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
    let oh = out(0, h, kh).ok_or("ConvTranspose output size")?;
    let ow = out(1, wd, kw).ok_or("ConvTranspose output size")?;
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

fn check_pool(p: &Pool, x: &TensorDesc, y: &TensorDesc) -> Rule {
    let [n, c, h, w] = nchw(&x.shape).ok_or("pooling input must be rank 3 or 4")?;
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
    .ok_or("pooling window larger than input")?;
    let ow = geometry::pool_out(
        w,
        win.kernel[1],
        win.stride[1],
        win.dilation[1],
        win.pads[1],
        win.pads[3],
        p.ceil_mode,
    )
    .ok_or("pooling window larger than input")?;
    ensure(
        nchw(&y.shape) == Some([n, c, oh, ow]) && y.shape.rank() == x.shape.rank(),
        "pooling output shape",
    )
}

fn arena_range(t: &TensorDesc) -> Option<(usize, usize)> {
    match t.location {
        Location::Arena(o) => Some((o, o + t.bytes)),
        Location::Weights(_) => None,
    }
}

fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1 && a.0 < a.1 && b.0 < b.1
}

/// Outputs are disjoint from each other and from the scratch; an input either avoids an output
/// or, for in-place ops, is exactly it (same bytes, same shape).
fn check_overlap(step: &Step<'_>) -> Rule {
    let scratch = step.scratch.as_ref().and_then(arena_range);
    for (i, out) in step.outputs.iter().enumerate() {
        let out = out.ok_or("missing output")?;
        let o = arena_range(&out).ok_or("output not in arena")?;
        if let Some(s) = scratch {
            ensure(!overlaps(o, s), "scratch overlaps an output")?;
        }
        for other in step.outputs.iter().skip(i + 1).flatten() {
            if let Some(r) = arena_range(&other) {
                ensure(!overlaps(o, r), "outputs overlap")?;
            }
        }
        for input in step.inputs.iter().flatten() {
            let Some(r) = arena_range(&input) else {
                continue;
            };
            if overlaps(o, r) {
                let exact = r == o && input.shape == out.shape && input.dtype == out.dtype;
                ensure(
                    step.op.allows_in_place() && exact,
                    "input partially overlaps output",
                )?;
            }
        }
    }
    if let Some(s) = scratch {
        for input in step.inputs.iter().flatten() {
            if let Some(r) = arena_range(&input) {
                ensure(!overlaps(s, r), "scratch overlaps an input")?;
            }
        }
    }
    Ok(())
}
