//! Graph passes on the plan IR: fold batch norms into convolutions and Gemms, turn
//! MatMul + Add into Gemm, a written-out GELU into one step, fuse activations into their
//! producers, and drop dead ops.

use crate::compile::ir::{PlanGraph, TensorId};
use crate::compile::tensor::HostTensor;
use ferrite_hal::op::BinaryOp;
use ferrite_hal::{Activation, Op};

/// What the passes did, for `pack`'s report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassStats {
    /// Batch norms folded into a Conv or Gemm.
    pub batch_norms_folded: usize,
    /// MatMul + Add pairs turned into Gemm.
    pub matmul_add_fused: usize,
    /// GELUs written out as Div, Erf, Add and Muls turned into one Gelu step.
    pub gelus_fused: usize,
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
    stats.gelus_fused = fuse_gelus(g);
    stats.activations_fused = fuse_activations(g);
    stats.integer_ops = crate::compile::quantize::fuse_integer_ops(g);
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
            w.data = crate::compile::tensor::Data::Float(values);
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
            b.data = crate::compile::tensor::Data::Float(values);
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

/// Turns MatMul `mm` by a constant 2-D matrix, followed by the Add of a constant row, into a
/// Gemm with that row as its bias. An input of more than two axes (`[…, M, K]`, a transformer's
/// tokens) is multiplied as the `[… · M, K]` matrix it is in memory, a view of it, and the Add's
/// output becomes a view of the Gemm's `[… · M, N]` one.
fn try_matmul_add(g: &mut PlanGraph, mm: usize) -> Option<()> {
    let Op::MatMul {
        activation: Activation::None,
    } = g.ops[mm].op
    else {
        return None;
    };
    let (a, b) = (g.ops[mm].inputs[0]?, g.ops[mm].inputs[1]?);
    let a_shape = g.tensors[a].shape.clone();
    if a_shape.len() < 2 || g.tensors[b].shape.len() != 2 || g.tensors[b].value.is_none() {
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
    // The Add must not broadcast the product to more than it is.
    if g.tensors[y].shape != g.tensors[t].shape {
        return None;
    }
    let (a, y) = match a_shape.len() {
        2 => (a, y),
        _ => {
            let k = *a_shape.last()?;
            let rows: usize = a_shape.iter().product::<usize>() / k.max(1);
            let dtype = g.tensors[y].dtype;
            let name = g.ops[mm].name.clone();
            let a2 = g.add_tensor(format!("{name}:rows"), g.tensors[a].dtype, vec![rows, k]);
            g.tensors[a2].alias_of = Some(g.root(a));
            let y2 = g.add_tensor(format!("{name}:product"), dtype, vec![rows, n]);
            // `y` and every view of it now use the Gemm's bytes.
            for tensor in g.tensors.iter_mut() {
                if tensor.alias_of == Some(y) {
                    tensor.alias_of = Some(y2);
                }
            }
            g.tensors[y].alias_of = Some(y2);
            (a2, y2)
        }
    };
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

/// The value of `t` if it is a constant of one element.
fn scalar(g: &PlanGraph, t: TensorId) -> Option<f32> {
    match constant(g, Some(t))?.as_slice() {
        [v] => Some(*v),
        _ => None,
    }
}

/// Whether `v` is `want` to within a few of its last bits (exporters write √2 and 1/√2 in
/// float or double, rounded either way).
fn near(v: f32, want: f32) -> bool {
    (v - want).abs() <= want.abs() * 4.0 * f32::EPSILON
}

/// Op `i`'s operands if it is the Binary `op` with no fused activation.
fn binary_operands(g: &PlanGraph, i: usize, op: BinaryOp) -> Option<(TensorId, TensorId)> {
    match g.ops[i].op {
        Op::Binary {
            op: o,
            activation: Activation::None,
        } if o == op => Some((
            g.ops[i].inputs.first()?.to_owned()?,
            g.ops[i].inputs.get(1)?.to_owned()?,
        )),
        _ => None,
    }
}

/// Of op `i`'s two operands (a Binary `op`), the one that is not the constant `value`.
fn with_constant(g: &PlanGraph, i: usize, op: BinaryOp, value: f32) -> Option<TensorId> {
    let (a, b) = binary_operands(g, i, op)?;
    match (scalar(g, a), scalar(g, b)) {
        (_, Some(v)) if near(v, value) => Some(a),
        (Some(v), _) if near(v, value) && op != BinaryOp::Div => Some(b),
        _ => None,
    }
}

/// Of op `i`'s two operands (a Mul), the other one than `t`.
fn times(g: &PlanGraph, i: usize, t: TensorId) -> Option<TensorId> {
    match binary_operands(g, i, BinaryOp::Mul)? {
        (a, b) if a == t => Some(b),
        (a, b) if b == t => Some(a),
        _ => None,
    }
}

fn fuse_gelus(g: &mut PlanGraph) -> usize {
    let mut fused = 0;
    let mut i = 0;
    while i < g.ops.len() {
        match try_gelu(g, i) {
            Some(()) => fused += 1,
            None => i += 1,
        }
    }
    fused
}

/// Turns the exact GELU as exporters write it, `x · 0.5 · (1 + erf(x / √2))` — a Div by √2 (or a
/// Mul by 1/√2), the Erf (op `erf`), an Add of 1 and two Muls grouping `x`, 0.5 and the sum in
/// any order — into one Gelu step where the last Mul was. Every value in between must have no
/// other reader.
fn try_gelu(g: &mut PlanGraph, erf: usize) -> Option<()> {
    if g.ops[erf].op != Op::Unary(Activation::Erf) {
        return None;
    }
    let scaled = g.ops[erf].inputs.first().copied().flatten()?;
    let divide = g
        .producer(scaled)
        .filter(|_| sole_reader(g, scaled) == Some(erf))?;
    let x = with_constant(g, divide, BinaryOp::Div, core::f32::consts::SQRT_2)
        .or_else(|| with_constant(g, divide, BinaryOp::Mul, core::f32::consts::FRAC_1_SQRT_2))?;
    let e = *g.ops[erf].outputs.first()?;
    let add = sole_reader(g, e)?;
    if with_constant(g, add, BinaryOp::Add, 1.0)? != e {
        return None;
    }
    let sum = *g.ops[add].outputs.first()?;
    let first = sole_reader(g, sum)?;
    let other = times(g, first, sum)?;
    let first_out = *g.ops[first].outputs.first()?;
    // (x · 0.5) · sum, or (sum · 0.5) · x, or (sum · x) · 0.5.
    let (last, half) = if other == x || scalar(g, other).is_some_and(|v| v == 0.5) {
        let last = sole_reader(g, first_out)?;
        let rest = times(g, last, first_out)?;
        let fits = match other == x {
            true => scalar(g, rest) == Some(0.5),
            false => rest == x,
        };
        (fits.then_some(last)?, None)
    } else {
        let half = g
            .producer(other)
            .filter(|_| sole_reader(g, other) == Some(first))?;
        (
            first,
            (with_constant(g, half, BinaryOp::Mul, 0.5)? == x).then_some(half),
        )
    };
    let y = *g.ops[last].outputs.first()?;
    let f32_shape = |t: TensorId| {
        (g.tensors[t].dtype == ferrite_hal::DType::F32).then_some(&g.tensors[t].shape)
    };
    if f32_shape(x)? != f32_shape(y)? {
        return None;
    }
    g.ops[last].op = Op::Unary(Activation::Gelu { tanh: false });
    g.ops[last].inputs = vec![Some(x)];
    let mut gone = vec![divide, erf, add];
    gone.extend(half);
    if last != first {
        gone.push(first);
    }
    gone.sort_unstable();
    for op in gone.into_iter().rev() {
        g.ops.remove(op);
    }
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
