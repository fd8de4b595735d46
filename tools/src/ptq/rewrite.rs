//! The graph side of post-training quantization: which tensors to quantize, and the QDQ form
//! the integer pass (`crate::quantize`) then turns into integer ops.
//!
//! A Conv or Gemm with constant weights (and a MatMul with a constant matrix, made a Gemm) is
//! quantizable. Its weights become per-channel symmetric int8 (stored dequantized, with their
//! integers recorded in [`Quantized`]); its input and output activations get a
//! QuantizeLinear → DequantizeLinear pair with the calibrated per-tensor parameters. This is the
//! same form onnxruntime's quantizer writes, so the same pass fuses both, and whatever it cannot
//! fuse still runs (mixed float and int8).

use super::ranges::{int8_parameters, symmetric_weights};
use crate::ir::{PlanGraph, PlanOp, Quantized, TensorId};
use crate::tensor::HostTensor;
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
