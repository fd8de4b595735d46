//! Graph passes on the plan IR: fold batch norms into convolutions and Gemms, turn
//! MatMul + Add into Gemm, fuse activations into their producers, and drop dead ops.

use crate::ir::{PlanGraph, TensorId};
use crate::tensor::HostTensor;
use ferrite_hal::op::BinaryOp;
use ferrite_hal::{Activation, Op};

/// What the passes did, for `pack`'s report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassStats {
    /// Batch norms folded into a Conv or Gemm.
    pub batch_norms_folded: usize,
    /// MatMul + Add pairs turned into Gemm.
    pub matmul_add_fused: usize,
    /// Activations fused into their producer.
    pub activations_fused: usize,
    /// Ops removed because nothing used their results.
    pub dead_ops_removed: usize,
    /// Quantized Conv/Gemm patterns turned into integer ops.
    pub integer_ops: usize,
}

/// Runs every pass, in an order where each one exposes work for the next.
pub fn optimize(g: &mut PlanGraph) -> PassStats {
    let mut stats = PassStats {
        dead_ops_removed: remove_dead(g),
        ..PassStats::default()
    };
    stats.batch_norms_folded = fold_batch_norms(g);
    stats.matmul_add_fused = fuse_matmul_add(g);
    stats.activations_fused = fuse_activations(g);
    stats.integer_ops = crate::quantize::fuse_integer_ops(g);
    stats.dead_ops_removed += remove_dead(g);
    stats
}

/// The op reading `t` if exactly one op reads it, once, and nothing else needs it.
fn sole_reader(g: &PlanGraph, t: TensorId) -> Option<usize> {
    if g.is_pinned(t) || g.readers(t) != 1 {
        return None;
    }
    g.ops.iter().position(|op| op.inputs.contains(&Some(t)))
}

fn constant(g: &PlanGraph, t: Option<TensorId>) -> Option<Vec<f32>> {
    g.tensors[t?].value.as_ref().map(HostTensor::to_f32s)
}

/// Replaces `op`'s activation, if it has a slot for one.
fn with_activation(op: Op, act: Activation) -> Option<Op> {
    if !act.is_fusable() {
        return None;
    }
    Some(match op {
        Op::Conv(mut c) => {
            c.activation = act;
            Op::Conv(c)
        }
        Op::ConvTranspose(mut c) => {
            c.activation = act;
            Op::ConvTranspose(c)
        }
        Op::Gemm(mut p) => {
            p.activation = act;
            Op::Gemm(p)
        }
        Op::MatMul { .. } => Op::MatMul { activation: act },
        Op::Binary { op, .. } => Op::Binary {
            op,
            activation: act,
        },
        Op::BatchNorm { epsilon, .. } => Op::BatchNorm {
            epsilon,
            activation: act,
        },
        _ => return None,
    })
}

fn fold_batch_norms(g: &mut PlanGraph) -> usize {
    let mut folded = 0;
    let mut i = 0;
    while i < g.ops.len() {
        if let Some(()) = try_fold_batch_norm(g, i) {
            folded += 1;
        } else {
            i += 1;
        }
    }
    folded
}

/// Folds batch norm `bn` into the Conv or Gemm producing its input.
fn try_fold_batch_norm(g: &mut PlanGraph, bn: usize) -> Option<()> {
    let Op::BatchNorm {
        epsilon,
        activation,
    } = g.ops[bn].op
    else {
        return None;
    };
    let x = g.ops[bn].inputs[0]?;
    if sole_reader(g, x) != Some(bn) {
        return None;
    }
    let p = g.producer(x)?;
    let params: Vec<Vec<f32>> = (1..5)
        .map(|i| constant(g, g.ops[bn].inputs[i]))
        .collect::<Option<_>>()?;
    let (scale, shift): (Vec<f32>, Vec<f32>) = (0..params[0].len())
        .map(|c| {
            let k = params[0][c] / (params[3][c] + epsilon).sqrt();
            (k, params[1][c] - params[2][c] * k)
        })
        .unzip();
    let y = g.ops[bn].outputs[0];
    let name = g.ops[p].name.clone();
    match g.ops[p].op {
        Op::Conv(mut c) if c.activation == Activation::None => {
            let w_id = g.ops[p].inputs[1]?;
            let mut w = g.tensors[w_id].value.clone()?;
            let oc = w.shape[0];
            let per = w.len() / oc.max(1);
            let mut values = w.to_f32s();
            for (o, chunk) in values.chunks_mut(per.max(1)).enumerate() {
                chunk.iter_mut().for_each(|v| *v *= scale[o]);
            }
            w.data = crate::tensor::Data::Float(values);
            let bias = match constant(g, g.ops[p].inputs.get(2).copied().flatten()) {
                Some(b) => b,
                None if g.ops[p].inputs.get(2).copied().flatten().is_none() => vec![0.0; oc],
                None => return None,
            };
            let new_bias: Vec<f32> = (0..oc).map(|o| bias[o] * scale[o] + shift[o]).collect();
            let w_new = g.add_constant(format!("{name}:weight_bn"), w);
            let b_new = g.add_constant(
                format!("{name}:bias_bn"),
                HostTensor::float(vec![oc], new_bias),
            );
            c.activation = activation;
            g.ops[p].op = Op::Conv(c);
            g.ops[p].inputs = vec![g.ops[p].inputs[0], Some(w_new), Some(b_new)];
        }
        Op::Gemm(mut gm) if gm.activation == Activation::None => {
            let b_id = g.ops[p].inputs[1]?;
            let mut b = g.tensors[b_id].value.clone()?;
            let n = b.shape[1];
            if scale.len() != n {
                return None;
            }
            let mut values = b.to_f32s();
            for row in values.chunks_mut(n) {
                row.iter_mut().zip(&scale).for_each(|(v, k)| *v *= k);
            }
            b.data = crate::tensor::Data::Float(values);
            let c = match g.ops[p].inputs.get(2).copied().flatten() {
                None => vec![0.0; n],
                Some(c) => {
                    let shape = &g.tensors[c].shape;
                    if !(shape == &[n] || shape == &[1, n]) {
                        return None;
                    }
                    constant(g, Some(c))?.iter().map(|v| v * gm.beta).collect()
                }
            };
            let c_new: Vec<f32> = (0..n).map(|j| c[j] * scale[j] + shift[j]).collect();
            let b_new = g.add_constant(format!("{name}:B_bn"), b);
            let c_new = g.add_constant(format!("{name}:C_bn"), HostTensor::float(vec![n], c_new));
            gm.beta = 1.0;
            gm.activation = activation;
            g.ops[p].op = Op::Gemm(gm);
            g.ops[p].inputs = vec![g.ops[p].inputs[0], Some(b_new), Some(c_new)];
        }
        _ => return None,
    }
    g.ops[p].outputs = vec![y];
    g.ops.remove(bn);
    Some(())
}

fn fuse_matmul_add(g: &mut PlanGraph) -> usize {
    let mut fused = 0;
    let mut i = 0;
    while i < g.ops.len() {
        if try_matmul_add(g, i).is_some() {
            fused += 1;
        }
        i += 1;
    }
    fused
}

fn try_matmul_add(g: &mut PlanGraph, mm: usize) -> Option<()> {
    let Op::MatMul {
        activation: Activation::None,
    } = g.ops[mm].op
    else {
        return None;
    };
    let (a, b) = (g.ops[mm].inputs[0]?, g.ops[mm].inputs[1]?);
    if g.tensors[a].shape.len() != 2
        || g.tensors[b].shape.len() != 2
        || g.tensors[b].value.is_none()
    {
        return None;
    }
    let t = g.ops[mm].outputs[0];
    let add = sole_reader(g, t)?;
    let Op::Binary {
        op: BinaryOp::Add,
        activation,
    } = g.ops[add].op
    else {
        return None;
    };
    let other = g.ops[add]
        .inputs
        .iter()
        .flatten()
        .copied()
        .find(|&x| x != t)?;
    let n = g.tensors[b].shape[1];
    let cs = &g.tensors[other].shape;
    if g.tensors[other].value.is_none() || !(cs == &[n] || cs == &[1, n]) {
        return None;
    }
    let y = g.ops[add].outputs[0];
    g.ops[mm].op = Op::Gemm(ferrite_hal::op::Gemm {
        alpha: 1.0,
        beta: 1.0,
        activation,
    });
    g.ops[mm].inputs = vec![Some(a), Some(b), Some(other)];
    g.ops[mm].outputs = vec![y];
    g.ops.remove(add);
    Some(())
}

fn fuse_activations(g: &mut PlanGraph) -> usize {
    let mut fused = 0;
    let mut i = 0;
    while i < g.ops.len() {
        if let Op::Unary(act) = g.ops[i].op {
            if let Some(x) = g.ops[i].inputs[0] {
                if let Some(p) = g.producer(x).filter(|_| sole_reader(g, x) == Some(i)) {
                    if g.ops[p].op.activation() == Some(Activation::None)
                        && g.ops[p].outputs.len() == 1
                    {
                        if let Some(op) = with_activation(g.ops[p].op, act) {
                            g.ops[p].op = op;
                            g.ops[p].outputs = g.ops[i].outputs.clone();
                            g.ops.remove(i);
                            fused += 1;
                            continue;
                        }
                    }
                }
            }
        }
        i += 1;
    }
    fused
}

/// Removes ops none of whose outputs reach a graph output.
pub fn remove_dead(g: &mut PlanGraph) -> usize {
    let mut needed = vec![false; g.tensors.len()];
    for &o in &g.outputs {
        needed[o] = true;
        needed[g.root(o)] = true;
    }
    // Aliases of needed tensors need their roots; roots are produced by ops.
    let mut live = vec![false; g.ops.len()];
    for i in (0..g.ops.len()).rev() {
        let produces_needed = g.ops[i].outputs.iter().any(|&o| needed[o]);
        if produces_needed {
            live[i] = true;
            for &input in g.ops[i].inputs.iter().flatten() {
                needed[input] = true;
                let r = g.root(input);
                needed[r] = true;
            }
        }
    }
    let before = g.ops.len();
    let mut keep = live.into_iter();
    g.ops.retain(|_| keep.next().unwrap_or(true));
    before - g.ops.len()
}
