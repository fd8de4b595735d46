//! The graph side of post-training quantization: which tensors to quantize, and the QDQ form
//! the integer pass (`crate::compile::quantize`) then turns into integer ops.
//!
//! A Conv or Gemm with constant weights (and a MatMul with a constant matrix, made a Gemm) is
//! quantizable. Its weights become per-channel symmetric int8 (stored dequantized, with their
//! integers recorded in [`Quantized`]); its input and output activations get a
//! QuantizeLinear → DequantizeLinear pair with the calibrated per-tensor parameters. This is the
//! same form onnxruntime's quantizer writes, so the same pass fuses both, and whatever it cannot
//! fuse still runs (mixed float and int8).

use super::ranges::{int8_parameters, symmetric_weights};
use crate::compile::ir::{PlanGraph, PlanOp, Quantized, TensorId};
use crate::compile::tensor::HostTensor;
use ferrite_hal::op::Gemm;
use ferrite_hal::{DType, Op};

/// The weight axis holding output channels, if op `i` is quantizable.
fn channel_axis(g: &PlanGraph, op: &PlanOp) -> Option<usize> {
    let w = g.tensors[op.inputs.get(1).copied().flatten()?]
        .value
        .as_ref()?;
    if w.dtype != DType::F32 || g.tensors[op.inputs[0]?].dtype != DType::F32 {
        return None;
    }
    match op.op {
        Op::Conv(_) => Some(0),
        Op::Gemm(p) if p.alpha == 1.0 && p.beta == 1.0 => Some(1),
        _ => None,
    }
}

/// Turns `MatMul(A [M, K], B constant [K, N])` into a Gemm without bias, so it can be quantized.
fn matmul_as_gemm(g: &mut PlanGraph) {
    for op in &mut g.ops {
        let Op::MatMul { activation } = op.op else {
            continue;
        };
        let (Some(Some(a)), Some(Some(b))) = (op.inputs.first(), op.inputs.get(1)) else {
            continue;
        };
        let (a, b) = (&g.tensors[*a], &g.tensors[*b]);
        if a.shape.len() == 2 && b.shape.len() == 2 && b.value.is_some() {
            op.op = Op::Gemm(Gemm {
                alpha: 1.0,
                beta: 1.0,
                activation,
            });
        }
    }
}

/// The activations to quantize: every quantizable op's input and output, as the tensors that own
/// the bytes (a Flatten view is quantized through the tensor it views). Ordered, no repeats.
pub fn activations_to_quantize(g: &mut PlanGraph) -> Vec<TensorId> {
    matmul_as_gemm(g);
    let mut out = Vec::new();
    for op in &g.ops {
        if channel_axis(g, op).is_none() {
            continue;
        }
        for t in [op.inputs[0], op.outputs.first().copied()]
            .into_iter()
            .flatten()
        {
            let root = g.root(t);
            // (A graph input that is also an output would lose its name; left in float.)
            let input_and_output = g.inputs.contains(&root) && g.outputs.contains(&root);
            if g.tensors[root].value.is_none() && !input_and_output && !out.contains(&root) {
                out.push(root);
            }
        }
    }
    out
}

/// Replaces every quantizable op's weights by per-channel symmetric int8 ones; returns how many.
pub fn quantize_weights(g: &mut PlanGraph) -> usize {
    let mut count = 0;
    for i in 0..g.ops.len() {
        let Some(axis) = channel_axis(g, &g.ops[i]) else {
            continue;
        };
        let Some(w) = g.ops[i].inputs[1] else {
            continue;
        };
        let t = &g.tensors[w];
        let Some(value) = &t.value else { continue };
        let (scale, ints) = symmetric_weights(&value.to_f32s(), &t.shape, axis);
        let channel = |k: usize| {
            let inner: usize = t.shape[axis + 1..].iter().product::<usize>().max(1);
            (k / inner) % scale.len()
        };
        let values = ints
            .iter()
            .enumerate()
            .map(|(k, &q)| q as f32 * scale[channel(k)])
            .collect();
        let (name, shape) = (format!("{}:int8_weights", t.name), t.shape.clone());
        let zero = vec![0; scale.len()];
        // A copy per op: the float original may feed other (unquantized) ops.
        let copy = g.add_constant(name, HostTensor::float(shape, values));
        g.tensors[copy].quantized = Some(Quantized {
            dtype: DType::I8,
            scale,
            zero,
            axis,
        });
        g.ops[i].inputs[1] = Some(copy);
        count += 1;
    }
    count
}

/// The quantizable ops (Conv, Gemm with constant weights), by index, with their float weights —
/// taken before [`quantize_weights`] replaces them.
pub fn quantizable_ops(g: &PlanGraph) -> Vec<(usize, TensorId)> {
    g.ops
        .iter()
        .enumerate()
        .filter(|(_, op)| channel_axis(g, op).is_some())
        .filter_map(|(i, op)| Some((i, op.inputs.get(1).copied().flatten()?)))
        .collect()
}

/// The input channel of each element of a tensor of `shape` (axis 1: Conv's channels, Gemm's
/// inner dimension) and how many channels there are.
pub fn input_channels(shape: &[usize]) -> (usize, usize) {
    let channels = shape.get(1).copied().unwrap_or(1).max(1);
    let inner: usize = shape.iter().skip(2).product::<usize>().max(1);
    (channels, inner)
}

/// Bias correction of op `i` after its weights were quantized (`float_w` holds the float
/// originals): the expected error the int8 weights add to each output, `(W − W_q)·E[x]` with
/// `E[x]` the per-channel means of the op's input over the calibration data, is added to the
/// bias (a new constant; a missing bias becomes one). Returns whether it corrected it.
pub fn correct_bias(g: &mut PlanGraph, i: usize, float_w: TensorId, means: &[f64]) -> bool {
    let op = &g.ops[i];
    let Some(wq) = op.inputs.get(1).copied().flatten() else {
        return false;
    };
    let (Some(w), Some(q)) = (&g.tensors[float_w].value, &g.tensors[wq].value) else {
        return false;
    };
    let (w, q, shape) = (w.to_f32s(), q.to_f32s(), g.tensors[wq].shape.clone());
    let error = |k: usize| (w[k] - q[k]) as f64;
    let delta: Vec<f64> = match op.op {
        Op::Conv(c) if shape.len() >= 3 => {
            let (oc, icg) = (shape[0], shape[1]);
            let per = w.len() / oc.max(1);
            let window = per / icg.max(1);
            let per_group = oc / c.group.max(1);
            (0..oc)
                .map(|o| {
                    let first = (o / per_group.max(1)) * icg;
                    (0..per)
                        .map(|j| error(o * per + j) * means.get(first + j / window).unwrap_or(&0.0))
                        .sum()
                })
                .collect()
        }
        Op::Gemm(_) if shape.len() == 2 => {
            let (k, n) = (shape[0], shape[1]);
            (0..n)
                .map(|col| {
                    (0..k)
                        .map(|r| error(r * n + col) * means.get(r).unwrap_or(&0.0))
                        .sum()
                })
                .collect()
        }
        _ => return false,
    };
    let channels = delta.len();
    let (name, bias) = match op.inputs.get(2).copied().flatten() {
        Some(b) => {
            let t = &g.tensors[b];
            match &t.value {
                Some(v) if v.len() == channels && t.shape.len() <= 2 => {
                    (t.name.clone(), (t.shape.clone(), v.to_f32s()))
                }
                _ => return false,
            }
        }
        None => (op.name.clone(), (vec![channels], vec![0.0; channels])),
    };
    let (shape, values) = bias;
    let corrected = values
        .iter()
        .zip(&delta)
        .map(|(b, d)| (*b as f64 + d) as f32)
        .collect();
    let b = g.add_constant(
        format!("{name}:bias_corrected"),
        HostTensor::float(shape, corrected),
    );
    let inputs = &mut g.ops[i].inputs;
    inputs.resize(3, None);
    inputs[2] = Some(b);
    true
}

/// Puts `t` through QuantizeLinear → DequantizeLinear with `[lo, hi]`'s int8 parameters, right
/// after it is computed; every reader, view and graph output of `t` then sees the dequantized
/// copy (a graph output keeps its name).
pub fn insert_quantize_dequantize(g: &mut PlanGraph, t: TensorId, lo: f32, hi: f32) {
    let (scale, zero) = int8_parameters(lo, hi);
    let name = g.tensors[t].name.clone();
    let shape = g.tensors[t].shape.clone();
    let q = g.add_tensor(format!("{name}:int8"), DType::I8, shape.clone());
    let dq = g.add_tensor(format!("{name}:dequantized"), DType::F32, shape);
    let s = g.add_constant(
        format!("{name}:scale"),
        HostTensor::float(vec![], vec![scale]),
    );
    let z = g.add_constant(
        format!("{name}:zero_point"),
        HostTensor::int(DType::I8, vec![], vec![zero]),
    );
    for op in &mut g.ops {
        for input in op.inputs.iter_mut().filter(|i| **i == Some(t)) {
            *input = Some(dq);
        }
    }
    for tensor in &mut g.tensors {
        if tensor.alias_of == Some(t) {
            tensor.alias_of = Some(dq);
        }
    }
    for output in g.outputs.iter_mut().filter(|o| **o == t) {
        *output = dq;
        g.tensors[t].name = format!("{name}:float");
        g.tensors[dq].name = name.clone();
    }
    let at = g.producer(t).map_or(0, |p| p + 1);
    let quantize = PlanOp {
        name: format!("{name}:quantize"),
        op: Op::Quantize { axis: 0 },
        inputs: vec![Some(t), Some(s), Some(z)],
        outputs: vec![q],
    };
    let dequantize = PlanOp {
        name: format!("{name}:dequantize"),
        op: Op::Dequantize { axis: 0 },
        inputs: vec![Some(q), Some(s), Some(z)],
        outputs: vec![dq],
    };
    g.ops.insert(at, quantize);
    g.ops.insert(at + 1, dequantize);
}
