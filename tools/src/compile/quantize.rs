//! The integer pass: turns the QDQ patterns onnxruntime's quantizer writes into integer ops.
//!
//! A QDQ model computes in float between `DequantizeLinear` and `QuantizeLinear`. Where a
//! convolution or Gemm reads a dequantized 8-bit activation and dequantized int8 weights (zero
//! point 0, per tensor or per output channel), and its only reader quantizes the result, the four
//! ops become one `QConv` / `QGemm`: int8 weights, int32 bias (`round(b / (sx·sw))`, or the
//! quantizer's own int32 bias), and per-channel fixed-point requantization of
//! `sx·sw[c] / sy` precomputed here, with a fused Relu/Clip folded into the output clamp. Residual
//! additions become `QAdd`, products `QMul`, global average pooling `QGlobalAvgPool`, activations a 256-entry
//! `QLookup` table, data movement and max pooling (Transpose,
//! Concat, Slice, MaxPool) between equal quantizations moves the integers, and QuantizeLinear of a
//! DequantizeLinear with the same parameters disappears. What does not match stays mixed (float
//! compute with quantize/dequantize at the borders).
//!
//! int16 activations with int8 weights (TFLite's 16 × 8 scheme, which onnxruntime writes with
//! `activation_type=QInt16`) become `QConv` / `QGemm` the same way, and data
//! movement, residual additions and global average pooling take them too; the byte-table and
//! 32-bit ops (QLookup, QSoftmax, QAvgPool, QMul) stay 8-bit, so an activation or a product
//! between int16 tensors runs in float between its quantizations.

use crate::compile::ir::{PlanGraph, PlanOp, Quantized, TensorId};
use crate::compile::tensor::HostTensor;
use ferrite_hal::op::QADD_LEFT_SHIFT;
use ferrite_hal::op::{
    BinaryOp, PadMode, QAdd, QAvgPool, QConv, QGlobalAvgPool, QMul, QSoftmax, Requantize, Rescale,
    QSOFTMAX_TABLE_BITS,
};
use ferrite_hal::{Activation, DType, Op};

/// `real = multiplier × 2^(shift − 31)` with a Q31 `multiplier` in `[2^30, 2^31)`: TFLite's
/// `QuantizeMultiplier`. `None` for a multiplier that is not positive and finite or too large.
pub fn quantize_multiplier(real: f64) -> Option<(i32, i32)> {
    if !(real.is_finite() && real > 0.0) {
        return None;
    }
    let mut exponent = real.log2().floor() as i32 + 1;
    let mut fraction = real / 2f64.powi(exponent);
    if fraction >= 1.0 {
        exponent += 1;
        fraction /= 2.0;
    } else if fraction < 0.5 {
        exponent -= 1;
        fraction *= 2.0;
    }
    let mut q = (fraction * (1u64 << 31) as f64).round() as i64;
    if q == 1 << 31 {
        q /= 2;
        exponent += 1;
    }
    if exponent < -31 {
        return Some((0, 0));
    }
    if exponent > 30 {
        return None;
    }
    Some((q as i32, exponent))
}

/// A constant scalar's value.
fn scalar(g: &PlanGraph, t: Option<TensorId>) -> Option<f32> {
    let v = g.tensors[t?].value.as_ref()?.to_f32s();
    (v.len() == 1).then(|| v[0])
}

/// The integer range of an 8-bit type (the ops whose kernels index tables by byte, or add
/// and multiply in 32 bits, take only these).
fn range(dtype: DType) -> Option<(i32, i32)> {
    match dtype {
        DType::I8 => Some((-128, 127)),
        DType::U8 => Some((0, 255)),
        _ => None,
    }
}

/// The integer range of an 8-bit type or int16: QConv, QGemm, QAdd and QGlobalAvgPool take int16
/// activations too (TFLite's 16 × 8 scheme, accumulated in 64 bits), and data movement moves
/// them. (uint16 activations stay in float between their quantizations.)
fn integer_range(dtype: DType) -> Option<(i32, i32)> {
    match dtype {
        DType::I16 => Some((-32768, 32767)),
        _ => range(dtype),
    }
}

/// The dequantized 8-bit or int16 activation behind `xf`: `(xq, scale, zero point)`. When `xf` is a
/// reshaped view (Flatten, Reshape...) of a dequantized tensor, `xq` is that tensor's integers,
/// and the caller views them in `xf`'s shape (see [`integer_view`]).
fn dequantized_input(g: &PlanGraph, xf: TensorId) -> Option<(TensorId, f32, i32)> {
    let d = g.producer(g.root(xf))?;
    let PlanOp {
        op: Op::Dequantize { .. },
        inputs,
        ..
    } = &g.ops[d]
    else {
        return None;
    };
    let xq = inputs[0]?;
    integer_range(g.tensors[xq].dtype)?;
    let scale = scalar(g, inputs[1])?;
    let zero = match inputs.get(2).copied().flatten() {
        Some(z) => g.tensors[z].value.as_ref()?.to_i64s().first().copied()? as i32,
        None => 0,
    };
    Some((xq, scale, zero))
}

/// `xq` in the shape of `xf` (itself when `xf` is not a view): a new alias of `xq`'s bytes.
fn integer_view(g: &mut PlanGraph, xq: TensorId, xf: TensorId) -> TensorId {
    if g.tensors[xf].alias_of.is_none() {
        return xq;
    }
    let t = &g.tensors[xf];
    let (name, shape) = (format!("{}:int8", t.name), t.shape.clone());
    let dtype = g.tensors[xq].dtype;
    let view = g.add_tensor(name, dtype, shape);
    g.tensors[view].alias_of = Some(g.root(xq));
    view
}

/// The int8 weights behind `wf`, with one scale per element of `channel_axis` (or one in all).
fn int8_weights(g: &PlanGraph, wf: TensorId, channel_axis: usize) -> Option<(Vec<i64>, Vec<f32>)> {
    let t = &g.tensors[wf];
    let q: &Quantized = t.quantized.as_ref()?;
    if q.dtype != DType::I8 || q.zero.iter().any(|&z| z != 0) {
        return None;
    }
    if q.scale.len() > 1 && q.axis != channel_axis {
        return None;
    }
    let ints = q.integers(&t.value.as_ref()?.to_f32s(), &t.shape);
    ints.iter()
        .all(|v| (-128..=127).contains(v))
        .then(|| (ints, q.scale.clone()))
}

/// The quantized output: the sole reader of `yf` must be a QuantizeLinear with scalar
/// parameters. Returns `(its op index, yq, scale, zero point)`.
fn quantized_output(g: &PlanGraph, yf: TensorId) -> Option<(usize, TensorId, f32, i32)> {
    if g.is_pinned(yf) || g.readers(yf) != 1 {
        return None;
    }
    let q = g.ops.iter().position(|op| op.inputs.contains(&Some(yf)))?;
    let PlanOp {
        op: Op::Quantize { .. },
        inputs,
        outputs,
        ..
    } = &g.ops[q]
    else {
        return None;
    };
    let scale = scalar(g, inputs[1])?;
    let zero = g.tensors[inputs[2]?]
        .value
        .as_ref()?
        .to_i64s()
        .first()
        .copied()? as i32;
    Some((q, outputs[0], scale, zero))
}

/// The output clamp of `activation` in the output's integers, if it is one a clamp expresses.
fn clamp(activation: Activation, dtype: DType, scale: f32, zero: i32) -> Option<(i32, i32)> {
    let (lo, hi) = integer_range(dtype)?;
    let q = |v: f32| (v / scale).round_ties_even() as i64 + zero as i64;
    let fit = |v: i64| v.clamp(lo as i64, hi as i64) as i32;
    match activation {
        Activation::None => Some((lo, hi)),
        Activation::Relu => Some((fit(zero as i64), hi)),
        Activation::Clip { min, max } => Some((fit(q(min)).max(lo), fit(q(max)).min(hi))),
        _ => None,
    }
}

/// Bias in int32 at scale `sx × sw[c]`: the quantizer's integers when it stored them so, else
/// rounded here. Absent bias: zeros.
fn int32_bias(
    g: &PlanGraph,
    b: Option<TensorId>,
    sx: f32,
    sw: &[f32],
    n: usize,
) -> Option<Vec<i64>> {
    let Some(b) = b else {
        return Some(vec![0; n]);
    };
    let t = &g.tensors[b];
    let values = t.value.as_ref()?.to_f32s();
    if values.len() != n {
        return None;
    }
    let scale = |c: usize| sx as f64 * sw[if sw.len() == 1 { 0 } else { c }] as f64;
    if let Some(q) = &t.quantized {
        let same = q.dtype == DType::I32
            && q.zero.iter().all(|&z| z == 0)
            && (0..n).all(|c| {
                let s = q.scale[if q.scale.len() == 1 { 0 } else { c }] as f64;
                (s - scale(c)).abs() <= 1e-6 * scale(c)
            });
        if same {
            return Some(q.integers(&values, &t.shape));
        }
    }
    let ints: Vec<i64> = (0..n)
        .map(|c| (values[c] as f64 / scale(c)).round_ties_even() as i64)
        .collect();
    ints.iter()
        .all(|v| (i32::MIN as i64..=i32::MAX as i64).contains(v))
        .then_some(ints)
}

/// Per-channel `(multiplier, shift)` pairs for `sx × sw[c] / sy`, as a `[C, 2]` int32 tensor.
fn requantization(sx: f32, sw: &[f32], sy: f32) -> Option<HostTensor> {
    let mut pairs = Vec::with_capacity(2 * sw.len());
    for &s in sw {
        let (m, shift) = quantize_multiplier(sx as f64 * s as f64 / sy as f64)?;
        pairs.extend([m as i64, shift as i64]);
    }
    Some(HostTensor::int(DType::I32, vec![sw.len(), 2], pairs))
}

/// Rewrites op `i` if it is a quantizable Conv, Gemm or 2-D MatMul (8-bit activations, or int16 ones with
/// int8 weights); returns whether it did.
fn try_fuse(g: &mut PlanGraph, i: usize) -> Option<()> {
    let op = g.ops[i].clone();
    let (activation, channel_axis) = match op.op {
        Op::Conv(c) => (c.activation, 0),
        Op::Gemm(p) if p.alpha == 1.0 && p.beta == 1.0 => (p.activation, 1),
        // A matrix times constant weights `[K, N]`: a Gemm without bias.
        Op::MatMul { activation } => {
            let rank = |t: Option<TensorId>| t.map(|t| g.tensors[t].shape.len());
            if rank(op.inputs[0]) != Some(2) || rank(op.inputs[1]) != Some(2) {
                return None;
            }
            (activation, 1)
        }
        _ => return None,
    };
    let (xq, sx, zx) = dequantized_input(g, op.inputs[0]?)?;
    let wf = op.inputs[1]?;
    let (w_ints, sw) = int8_weights(g, wf, channel_axis)?;
    let channels = g.tensors[wf].shape[channel_axis];
    let (q_index, yq, sy, zy) = quantized_output(g, op.outputs[0])?;
    // Integer ops read and write one 8-bit type or int16.
    if g.tensors[xq].dtype != g.tensors[yq].dtype {
        return None;
    }
    let (min, max) = clamp(activation, g.tensors[yq].dtype, sy, zy)?;
    let bias_input = op.inputs.get(2).copied().flatten();
    if let Some(b) = bias_input {
        // Gemm's C must be one value per output column to become a bias.
        let shape = &g.tensors[b].shape;
        if shape.iter().product::<usize>() != channels || shape.len() > 2 {
            return None;
        }
    }
    let bias = int32_bias(g, bias_input, sx, &sw, channels)?;
    let requant = requantization(sx, &sw, sy)?;
    let requantize = Requantize {
        input_zero: zx,
        output_zero: zy,
        min,
        max,
    };
    let new_op = match op.op {
        Op::Conv(c) => Op::QConv(QConv {
            window: c.window,
            group: c.group,
            requantize,
        }),
        _ => Op::QGemm(requantize),
    };
    let name = op.name.clone();
    let xq = integer_view(g, xq, op.inputs[0]?);
    let mut w_shape = g.tensors[wf].shape.clone();
    let w_ints = if matches!(op.op, Op::Gemm(_) | Op::MatMul { .. }) {
        let (k, n) = (w_shape[0], w_shape[1]);
        // The blocked layout feeds the int8 DSP kernels; int16 rows run one dot product each.
        let int8 = g.tensors[xq].dtype != DType::I16;
        if int8 && n % 4 == 0 && k % 8 == 0 {
            // Blocked ([`QGemmWeights::Blocked`]): [N/4, K/4, 4, 4], element (block, group,
            // column, kk) the weight of output 4·block + column at k = 4·group + kk.
            w_shape = vec![n / 4, k / 4, 4, 4];
            (0..n * k)
                .map(|i| {
                    let (block, group, c, kk) = (i / (4 * k), i / 16 % (k / 4), i / 4 % 4, i % 4);
                    w_ints[(4 * group + kk) * n + 4 * block + c]
                })
                .collect()
        } else {
            // One row of weights per output: [K, N] → [N, K].
            w_shape = vec![n, k];
            (0..n * k).map(|i| w_ints[(i % k) * n + i / k]).collect()
        }
    } else {
        w_ints
    };
    let w = g.add_constant(
        format!("{name}:weight_int8"),
        HostTensor::int(DType::I8, w_shape, w_ints),
    );
    let b = g.add_constant(
        format!("{name}:bias_int32"),
        HostTensor::int(DType::I32, vec![channels], bias),
    );
    let r = g.add_constant(format!("{name}:requantization"), requant);
    g.ops[i] = PlanOp {
        name,
        op: new_op,
        inputs: vec![Some(xq), Some(w), Some(b), Some(r)],
        outputs: vec![yq],
    };
    g.ops.remove(q_index);
    Some(())
}

/// Makes op `i` the integer `op` (named `name`, reading `inputs`, writing the quantized `yq`) and
/// removes the QuantizeLinear at `q_index` it absorbs.
fn absorb(
    g: &mut PlanGraph,
    i: usize,
    q_index: usize,
    name: String,
    op: Op,
    inputs: Vec<Option<TensorId>>,
    yq: TensorId,
) -> Option<()> {
    g.ops[i] = PlanOp {
        name,
        op,
        inputs,
        outputs: vec![yq],
    };
    g.ops.remove(q_index);
    Some(())
}

/// `real` as a [`Rescale`], if it is one.
fn rescale(real: f64) -> Option<Rescale> {
    let (multiplier, shift) = quantize_multiplier(real)?;
    Some(Rescale { multiplier, shift })
}

/// Rewrites op `i` if it is an Add or a Mul of two dequantized 8-bit tensors whose result is
/// quantized, all of one type: a `QAdd` (residual connections; the inputs must have the output's
/// shape) or a `QMul` (any numpy broadcasting: squeeze-and-excitation scaling, say).
fn try_fuse_binary(g: &mut PlanGraph, i: usize) -> Option<()> {
    let op = g.ops[i].clone();
    let Op::Binary {
        op: kind @ (BinaryOp::Add | BinaryOp::Mul),
        activation,
    } = op.op
    else {
        return None;
    };
    let (af, bf) = (op.inputs[0]?, op.inputs[1]?);
    let (aq, sa, za) = dequantized_input(g, af)?;
    let (bq, sb, zb) = dequantized_input(g, bf)?;
    let (q_index, yq, sy, zy) = quantized_output(g, op.outputs[0])?;
    let dtype = g.tensors[yq].dtype;
    if g.tensors[aq].dtype != dtype || g.tensors[bq].dtype != dtype {
        return None;
    }
    // QMul multiplies in int32: 8-bit only. QAdd takes int16 too.
    if kind == BinaryOp::Mul {
        range(dtype)?;
    }
    let (min, max) = clamp(activation, dtype, sy, zy)?;
    let (sa, sb, sy) = (sa as f64, sb as f64, sy as f64);
    let integer_op = if kind == BinaryOp::Add {
        let shape = &g.tensors[op.outputs[0]].shape;
        if g.tensors[af].shape != *shape || g.tensors[bf].shape != *shape {
            return None;
        }
        let twice_max = 2.0 * sa.max(sb);
        Op::QAdd(QAdd {
            a: rescale(sa / twice_max)?,
            b: rescale(sb / twice_max)?,
            output: rescale(twice_max / ((1u64 << QADD_LEFT_SHIFT) as f64 * sy))?,
            a_zero: za,
            b_zero: zb,
            output_zero: zy,
            min,
            max,
        })
    } else {
        Op::QMul(QMul {
            rescale: rescale(sa * sb / sy)?,
            a_zero: za,
            b_zero: zb,
            output_zero: zy,
            min,
            max,
        })
    };
    let (aq, bq) = (integer_view(g, aq, af), integer_view(g, bq, bf));
    absorb(
        g,
        i,
        q_index,
        op.name,
        integer_op,
        vec![Some(aq), Some(bq)],
        yq,
    )
}

/// Rewrites op `i` if it is a GlobalAveragePool of a dequantized 8-bit or int16 tensor whose
/// result is quantized: one `QGlobalAvgPool`.
fn try_fuse_global_pool(g: &mut PlanGraph, i: usize) -> Option<()> {
    let op = g.ops[i].clone();
    if !matches!(op.op, Op::GlobalAvgPool) {
        return None;
    }
    let xf = op.inputs[0]?;
    let (xq, sx, zx) = dequantized_input(g, xf)?;
    let (q_index, yq, sy, zy) = quantized_output(g, op.outputs[0])?;
    if g.tensors[xq].dtype != g.tensors[yq].dtype {
        return None;
    }
    let shape = &g.tensors[xf].shape;
    let plane: usize = shape.get(2..)?.iter().product();
    let (min, max) = clamp(Activation::None, g.tensors[yq].dtype, sy, zy)?;
    let pool = QGlobalAvgPool {
        rescale: rescale(sx as f64 / (sy as f64 * plane as f64))?,
        requantize: Requantize {
            input_zero: zx,
            output_zero: zy,
            min,
            max,
        },
    };
    let xq = integer_view(g, xq, xf);
    absorb(
        g,
        i,
        q_index,
        op.name,
        Op::QGlobalAvgPool(pool),
        vec![Some(xq)],
        yq,
    )
}

/// For every byte of an 8-bit `dtype`: what DequantizeLinear `(sx, zx)` → `activation` →
/// QuantizeLinear `(sy, zy)` gives, with the same arithmetic as those kernels.
fn lookup_table(
    dtype: DType,
    (sx, zx): (f32, i32),
    activation: Activation,
    (sy, zy): (f32, i32),
) -> Option<Vec<i64>> {
    let (lo, hi) = range(dtype)?;
    let value = |b: u8| match dtype {
        DType::I8 => b as i8 as i32,
        _ => b as i32,
    };
    let mut reals: Vec<f32> = (0..=255u8).map(|b| (value(b) - zx) as f32 * sx).collect();
    ferrite_cpu::micro::activation::activate::<{ ferrite_hal::ALL_OPS }>(activation, &mut reals);
    let table = reals
        .iter()
        .map(|&v| {
            let q = (v / sy).round_ties_even();
            let q = if q.is_nan() {
                0
            } else {
                q.clamp(-1e9, 1e9) as i64
            };
            (q + zy as i64).clamp(lo as i64, hi as i64)
        })
        .collect();
    Some(table)
}

/// Rewrites op `i` if it is an activation (Sigmoid, Tanh, HardSwish, LeakyRelu, ...) between a
/// dequantized 8-bit tensor and a quantization of the same type: a `QLookup` whose 256-entry
/// table holds, for every input byte, what DequantizeLinear → activation → QuantizeLinear gives.
fn try_fuse_lookup(g: &mut PlanGraph, i: usize) -> Option<()> {
    let op = g.ops[i].clone();
    let Op::Unary(activation) = op.op else {
        return None;
    };
    let xf = op.inputs[0]?;
    let (xq, sx, zx) = dequantized_input(g, xf)?;
    let (q_index, yq, sy, zy) = quantized_output(g, op.outputs[0])?;
    let dtype = g.tensors[yq].dtype;
    if g.tensors[xq].dtype != dtype {
        return None;
    }
    let table = lookup_table(dtype, (sx, zx), activation, (sy, zy))?;
    let table = g.add_constant(
        format!("{}:table", op.name),
        HostTensor::int(dtype, vec![256], table),
    );
    let xq = integer_view(g, xq, xf);
    absorb(
        g,
        i,
        q_index,
        op.name,
        Op::QLookup,
        vec![Some(xq), Some(table)],
        yq,
    )
}

/// Rewrites op `i` if it is a Softmax between a dequantized 8-bit tensor and a quantization of
/// the same type: a `QSoftmax` with the table of `2^30·exp(−s_x·d)` for the 256 integer
/// distances `d` from the maximum.
fn try_fuse_softmax(g: &mut PlanGraph, i: usize) -> Option<()> {
    let op = g.ops[i].clone();
    let Op::Softmax { axis } = op.op else {
        return None;
    };
    let xf = op.inputs[0]?;
    let (xq, sx, _) = dequantized_input(g, xf)?;
    let (q_index, yq, sy, zy) = quantized_output(g, op.outputs[0])?;
    let dtype = g.tensors[yq].dtype;
    if g.tensors[xq].dtype != dtype {
        return None;
    }
    let (min, max) = range(dtype)?;
    let one = (1u64 << QSOFTMAX_TABLE_BITS) as f64;
    let table = (0..256)
        .map(|d| (one * (-(sx as f64) * d as f64).exp()).round() as i64)
        .collect();
    let softmax = QSoftmax {
        axis,
        rescale: rescale(1.0 / sy as f64)?,
        output_zero: zy,
        min,
        max,
    };
    let table = g.add_constant(
        format!("{}:exp_table", op.name),
        HostTensor::int(DType::I32, vec![256], table),
    );
    let xq = integer_view(g, xq, xf);
    absorb(
        g,
        i,
        q_index,
        op.name,
        Op::QSoftmax(softmax),
        vec![Some(xq), Some(table)],
        yq,
    )
}

/// Rewrites op `i` if it is an AveragePool between a dequantized 8-bit tensor and a
/// quantization of the same type: one `QAvgPool`.
fn try_fuse_avg_pool(g: &mut PlanGraph, i: usize) -> Option<()> {
    let op = g.ops[i].clone();
    let Op::AvgPool(pool) = op.op else {
        return None;
    };
    let xf = op.inputs[0]?;
    let (xq, sx, zx) = dequantized_input(g, xf)?;
    let (q_index, yq, sy, zy) = quantized_output(g, op.outputs[0])?;
    let dtype = g.tensors[yq].dtype;
    if g.tensors[xq].dtype != dtype {
        return None;
    }
    let (min, max) = range(dtype)?;
    let pooled = QAvgPool {
        pool,
        rescale: rescale(sx as f64 / sy as f64)?,
        requantize: Requantize {
            input_zero: zx,
            output_zero: zy,
            min,
            max,
        },
    };
    let xq = integer_view(g, xq, xf);
    absorb(
        g,
        i,
        q_index,
        op.name,
        Op::QAvgPool(pooled),
        vec![Some(xq)],
        yq,
    )
}

/// Rewrites op `i` if it is a Concat of dequantized 8-bit tensors with different quantizations
/// whose result is quantized (onnxruntime's QLinearConcat): each input whose parameters differ
/// from the output's is requantized by a 256-entry `QLookup`, and the integers are concatenated.
fn try_fuse_concat(g: &mut PlanGraph, i: usize) -> Option<()> {
    let op = g.ops[i].clone();
    let Op::Concat { .. } = op.op else {
        return None;
    };
    let mut parts = Vec::with_capacity(op.inputs.len());
    for xf in op.inputs.iter().copied() {
        let xf = xf?;
        parts.push((xf, dequantized_input(g, xf)?));
    }
    let (q_index, yq, sy, zy) = quantized_output(g, op.outputs[0])?;
    let dtype = g.tensors[yq].dtype;
    if parts
        .iter()
        .any(|(_, (xq, ..))| g.tensors[*xq].dtype != dtype)
    {
        return None;
    }
    let mut tables = Vec::with_capacity(parts.len());
    for (_, (_, sx, zx)) in &parts {
        let same = *sx == sy && *zx == zy;
        tables.push(if same {
            None
        } else {
            Some(lookup_table(dtype, (*sx, *zx), Activation::None, (sy, zy))?)
        });
    }
    g.ops.remove(q_index);
    let mut lookups = Vec::new();
    let mut inputs = Vec::with_capacity(parts.len());
    for (k, ((xf, (xq, ..)), table)) in parts.into_iter().zip(tables).enumerate() {
        let xq = integer_view(g, xq, xf);
        let Some(table) = table else {
            inputs.push(Some(xq));
            continue;
        };
        let name = format!("{}:requantize{k}", op.name);
        let table = g.add_constant(
            format!("{name}:table"),
            HostTensor::int(dtype, vec![256], table),
        );
        let shape = g.tensors[xf].shape.clone();
        let requantized = g.add_tensor(format!("{name}:int8"), dtype, shape);
        lookups.push(PlanOp {
            name,
            op: Op::QLookup,
            inputs: vec![Some(xq), Some(table)],
            outputs: vec![requantized],
        });
        inputs.push(Some(requantized));
    }
    g.ops[i] = PlanOp {
        name: op.name,
        op: op.op,
        inputs,
        outputs: vec![yq],
    };
    for (k, lookup) in lookups.into_iter().enumerate() {
        g.ops.insert(i + k, lookup);
    }
    Some(())
}

/// Removes op `i` if it is a QuantizeLinear of a dequantized tensor (possibly reshaped) with the
/// same scale, zero point and type: its output becomes a view of the integers it started from.
fn try_elide_requantization(g: &mut PlanGraph, i: usize) -> Option<()> {
    let op = g.ops[i].clone();
    if !matches!(op.op, Op::Quantize { .. }) {
        return None;
    }
    let (xf, yq) = (op.inputs[0]?, op.outputs[0]);
    let (xq, sx, zx) = dequantized_input(g, xf)?;
    let sy = scalar(g, op.inputs[1])?;
    let zy = g.tensors[op.inputs[2]?]
        .value
        .as_ref()?
        .to_i64s()
        .first()
        .copied()? as i32;
    let same = sx == sy && zx == zy && g.tensors[xq].dtype == g.tensors[yq].dtype;
    if !same || g.inputs.contains(&yq) {
        return None;
    }
    g.tensors[yq].alias_of = Some(g.root(xq));
    g.ops.remove(i);
    Some(())
}

/// Rewrites op `i` if it only moves or selects data (Transpose, Concat, Slice, MaxPool: each
/// commutes with a monotonic dequantization) and all it reads is
/// dequantized from 8-bit or int16 tensors with one scale, zero point and type: it then moves the
/// integers, and one DequantizeLinear after it gives the float result to its readers. Moving the
/// DequantizeLinear down this way lets a following QuantizeLinear with the same parameters cancel
/// it, and a following Conv or Add see integers.
fn try_sink_dequantize(g: &mut PlanGraph, i: usize) -> Option<()> {
    let op = g.ops[i].clone();
    if !matches!(
        op.op,
        Op::Transpose { .. }
            | Op::Concat { .. }
            | Op::Slice { .. }
            | Op::MaxPool(_)
            | Op::Pad { .. }
    ) {
        return None;
    }
    let yf = *op.outputs.first()?;
    let mut integers = Vec::with_capacity(op.inputs.len());
    let mut parameters = None;
    for xf in op.inputs.iter().copied() {
        let xf = xf?;
        let (xq, sx, zx) = dequantized_input(g, xf)?;
        let dq = &g.ops[g.producer(g.root(xf))?];
        let here = (sx, zx, g.tensors[xq].dtype);
        match parameters {
            None => parameters = Some((here, dq.inputs.clone())),
            Some((first, _)) if first != here => return None,
            Some(_) => {}
        }
        integers.push((xq, xf));
    }
    let ((sx, zx, dtype), dq_inputs) = parameters?;
    let moved = match op.op {
        // A constant fill must be a value of the integers' grid.
        Op::Pad {
            mode: PadMode::Constant,
            begins,
            ends,
            value,
        } => {
            let q = (value / sx).round_ties_even() + zx as f32;
            let (lo, hi) = integer_range(dtype)?;
            if !(lo as f32..=hi as f32).contains(&q) || (q - zx as f32) * sx != value {
                return None;
            }
            Op::Pad {
                mode: PadMode::Constant,
                begins,
                ends,
                value: q,
            }
        }
        other => other,
    };
    let inputs = integers
        .into_iter()
        .map(|(xq, xf)| Some(integer_view(g, xq, xf)))
        .collect();
    let t = &g.tensors[yf];
    let (name, shape) = (format!("{}:int8", t.name), t.shape.clone());
    let yq = g.add_tensor(name, dtype, shape);
    let mut dequantize_inputs = dq_inputs;
    dequantize_inputs[0] = Some(yq);
    g.ops[i] = PlanOp {
        name: op.name.clone(),
        op: moved,
        inputs,
        outputs: vec![yq],
    };
    g.ops.insert(
        i + 1,
        PlanOp {
            name: format!("{}:dequantize", op.name),
            op: Op::Dequantize { axis: 0 },
            inputs: dequantize_inputs,
            outputs: vec![yf],
        },
    );
    Some(())
}

/// Runs `rewrite` on every op until none changes; returns how many did.
fn rewrite_all(g: &mut PlanGraph, rewrite: fn(&mut PlanGraph, usize) -> Option<()>) -> usize {
    let mut count = 0;
    let mut i = 0;
    while i < g.ops.len() {
        if rewrite(g, i).is_some() {
            count += 1;
        } else {
            i += 1;
        }
    }
    count
}

/// Runs the pass; returns how many ops became integer ops (quantize/dequantize pairs that
/// cancel are removed too, and not counted).
pub fn fuse_integer_ops(g: &mut PlanGraph) -> usize {
    // Data movement first, so the ops after it see DequantizeLinear.
    let moved = rewrite_all(g, try_sink_dequantize);
    let fused = moved + rewrite_all(g, try_fuse) + rewrite_all(g, try_fuse_binary);
    let fused = fused + rewrite_all(g, try_fuse_global_pool) + rewrite_all(g, try_fuse_lookup);
    let fused = fused + rewrite_all(g, try_fuse_softmax) + rewrite_all(g, try_fuse_avg_pool);
    let fused = fused + rewrite_all(g, try_fuse_concat);
    rewrite_all(g, try_elide_requantization);
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipliers_round_trip() {
        for real in [0.75, 0.5, 0.999_999_9, 1.0, 3.25, 1e-3, 2.5e-6] {
            let (m, shift) = quantize_multiplier(real).unwrap();
            assert!((1 << 30..=i32::MAX).contains(&m), "{real}: {m}");
            let back = m as f64 / (1u64 << 31) as f64 * 2f64.powi(shift);
            assert!((back - real).abs() <= real * 1e-9, "{real}: {back}");
        }
        assert_eq!(quantize_multiplier(0.0), None);
        assert_eq!(quantize_multiplier(f64::NAN), None);
        assert_eq!(quantize_multiplier(1e-12), Some((0, 0)));
    }
}
