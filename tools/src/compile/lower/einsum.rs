//! Einsum of one or two operands as Transpose, ReduceSum, reshapes and one batched MatMul:
//! the contractions PyTorch and TensorFlow exports use (matrix and batched products, inner and
//! outer products, sums, transposes), with `...` and the implicit output form. A subscript
//! repeated in one operand takes that operand's diagonal first (a Transpose and a
//! constant-index Gather); three or more operands are refused.

use super::attrs::Attrs;
use super::lowerer::{Lowerer, Reason};
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;
use ferrite_hal::op::ReduceOp;
use ferrite_hal::{Activation, DType, Op, MAX_RANK};

/// A tensor with one label per axis.
#[derive(Clone)]
struct Labelled {
    t: TensorId,
    labels: Vec<char>,
}

/// Parses one operand's subscripts, expanding `...` to `rank − named` fresh labels.
fn subscripts(term: &str, rank: usize, ellipsis: &[char]) -> Result<Vec<char>, Reason> {
    let named = term.replace("...", "");
    if !named.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(format!("subscripts '{term}' are not letters"));
    }
    let named: Vec<char> = named.chars().collect();
    if term.contains("...") {
        let extra = rank
            .checked_sub(named.len())
            .ok_or_else(|| format!("'{term}' names more axes than the rank {rank}"))?;
        let (before, after) = term.split_once("...").unwrap_or((term, ""));
        let mut out: Vec<char> = before.chars().collect();
        out.extend(&ellipsis[ellipsis.len() - extra..]);
        out.extend(after.chars());
        Ok(out)
    } else if named.len() != rank {
        Err(format!(
            "'{term}' has {} subscripts for rank {rank}",
            named.len()
        ))
    } else {
        Ok(named)
    }
}

/// Emits a Transpose of `x` so its labels come in `order` (nothing when they already do).
fn permute(lw: &mut Lowerer, node: &Node, x: Labelled, order: &[char]) -> Result<Labelled, Reason> {
    if x.labels == order {
        return Ok(x);
    }
    let perm: Vec<usize> = order
        .iter()
        .map(|c| x.labels.iter().position(|l| l == c).unwrap_or(0))
        .collect();
    let s = lw.shape(x.t);
    let out: Vec<usize> = perm.iter().map(|&p| s[p]).collect();
    let y = lw.temp(node, "permuted", DType::F32, out);
    let mut p = [0usize; MAX_RANK];
    p[..perm.len()].copy_from_slice(&perm);
    lw.emit(node, Op::Transpose { perm: p }, vec![Some(x.t)], vec![y])?;
    Ok(Labelled {
        t: y,
        labels: order.to_vec(),
    })
}

/// `x` with each label repeated in it replaced by the diagonal of its axes (`ii -> i`): the
/// two axes moved last, viewed as one of `n·n`, and the elements `k·(n + 1)` gathered.
fn diagonals(lw: &mut Lowerer, node: &Node, mut x: Labelled) -> Result<Labelled, Reason> {
    while let Some(q) = (0..x.labels.len()).find(|&q| x.labels[..q].contains(&x.labels[q])) {
        let c = x.labels[q];
        let p = x.labels.iter().position(|&l| l == c).unwrap_or(0);
        let s = lw.shape(x.t);
        let n = s[q];
        let mut order: Vec<usize> = (0..s.len()).filter(|&a| a != p && a != q).collect();
        order.extend([p, q]);
        let moved: Vec<usize> = order.iter().map(|&a| s[a]).collect();
        let y = lw.temp(node, "diagonal_axes_last", DType::F32, moved.clone());
        let mut perm = [0usize; MAX_RANK];
        perm[..order.len()].copy_from_slice(&order);
        lw.emit(node, Op::Transpose { perm }, vec![Some(x.t)], vec![y])?;
        let mut flat = moved[..moved.len() - 2].to_vec();
        flat.push(n * n);
        let flat_view = lw.temp_alias(node, "square_flat", y, flat.clone());
        let picks = (0..n as i64).map(|k| k * (n as i64 + 1)).collect();
        let idx = lw.constant(
            node,
            "diagonal",
            crate::compile::tensor::HostTensor::int(DType::I64, vec![n], picks),
        );
        let mut out = flat;
        *out.last_mut().ok_or("a diagonal of nothing")? = n;
        let d = lw.temp(node, "diagonal", DType::F32, out);
        let axis = moved.len() - 2;
        lw.emit(
            node,
            Op::Gather { axis },
            vec![Some(flat_view), Some(idx)],
            vec![d],
        )?;
        let mut labels: Vec<char> = order[..order.len() - 2]
            .iter()
            .map(|&a| x.labels[a])
            .collect();
        labels.push(c);
        x = Labelled { t: d, labels };
    }
    Ok(x)
}

/// Sums `x` over the labels not in `keep` (removing those axes).
fn sum_out(lw: &mut Lowerer, node: &Node, x: Labelled, keep: &[char]) -> Result<Labelled, Reason> {
    let axes: u32 = x
        .labels
        .iter()
        .enumerate()
        .filter(|(_, c)| !keep.contains(c))
        .fold(0, |m, (i, _)| m | 1 << i);
    if axes == 0 {
        return Ok(x);
    }
    let s = lw.shape(x.t);
    let kept: Vec<usize> = (0..s.len())
        .map(|i| if axes & 1 << i != 0 { 1 } else { s[i] })
        .collect();
    let y = lw.temp(node, "summed", DType::F32, kept);
    let op = Op::Reduce {
        op: ReduceOp::Sum,
        axes,
    };
    lw.emit(node, op, vec![Some(x.t)], vec![y])?;
    let labels: Vec<char> = x
        .labels
        .iter()
        .copied()
        .filter(|c| keep.contains(c))
        .collect();
    let dims: Vec<usize> = (0..s.len())
        .filter(|i| axes & 1 << i == 0)
        .map(|i| s[i])
        .collect();
    Ok(Labelled {
        t: lw.temp_alias(node, "summed_view", y, dims),
        labels,
    })
}

/// Einsum.
pub(super) fn einsum(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let equation: String = node
        .string("equation", "")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (equation.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != node.inputs.len() || !(1..=2).contains(&terms.len()) {
        return Err(format!(
            "equation '{equation}' has {} operands; one or two are supported",
            terms.len()
        ));
    }
    // Fresh labels for `...`: capital letters no subscript uses.
    let ellipsis: Vec<char> = ('A'..='Z').filter(|c| !equation.contains(*c)).collect();
    let mut operands = Vec::new();
    let mut sizes: Vec<(char, usize)> = Vec::new();
    for (i, term) in terms.iter().enumerate() {
        let t = lw.input(node, i)?;
        lw.require_f32(&[t])?;
        let shape = lw.shape(t);
        let labels = subscripts(term, shape.len(), &ellipsis)?;
        for (k, c) in labels.iter().enumerate() {
            match sizes.iter().find(|(l, _)| l == c) {
                Some(&(_, n)) if n != shape[k] => {
                    return Err(format!("subscript '{c}' is {n} and {} long", shape[k]))
                }
                Some(_) => {}
                None => sizes.push((*c, shape[k])),
            }
        }
        let operand = diagonals(lw, node, Labelled { t, labels })?;
        operands.push(operand);
    }
    let out: Vec<char> = match rhs {
        Some(r) => {
            let rank = if r.contains("...") {
                r.replace("...", "").len()
                    + ellipsis
                        .iter()
                        .filter(|c| sizes.iter().any(|(l, _)| l == *c))
                        .count()
            } else {
                r.len()
            };
            subscripts(&r, rank, &ellipsis)?
        }
        None => {
            // Implicit: the `...` labels, then every label used once, alphabetically.
            let mut once: Vec<char> = sizes
                .iter()
                .map(|(c, _)| *c)
                .filter(|c| !ellipsis.contains(c))
                .filter(|c| operands.iter().filter(|o| o.labels.contains(c)).count() == 1)
                .collect();
            once.sort_unstable();
            let mut v: Vec<char> = ellipsis
                .iter()
                .rev()
                .copied()
                .filter(|c| sizes.iter().any(|(l, _)| l == c))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            v.extend(once);
            v
        }
    };
    if let Some(c) = out.iter().find(|c| !sizes.iter().any(|(l, _)| l == *c)) {
        return Err(format!("output subscript '{c}' names no input axis"));
    }
    let size = |c: &char| sizes.iter().find(|(l, _)| l == c).map_or(1, |(_, n)| *n);
    let result = if operands.len() == 1 {
        let x = sum_out(lw, node, operands.remove(0), &out)?;
        permute(lw, node, x, &out)?
    } else {
        let b = operands.pop().ok_or("missing operand")?;
        let a = operands.pop().ok_or("missing operand")?;
        // Labels one operand alone uses and the output does not: summed first.
        let keep_a: Vec<char> = a
            .labels
            .iter()
            .copied()
            .filter(|c| out.contains(c) || b.labels.contains(c))
            .collect();
        let keep_b: Vec<char> = b
            .labels
            .iter()
            .copied()
            .filter(|c| out.contains(c) || a.labels.contains(c))
            .collect();
        let a = sum_out(lw, node, a, &keep_a)?;
        let b = sum_out(lw, node, b, &keep_b)?;
        let batch: Vec<char> = a
            .labels
            .iter()
            .copied()
            .filter(|c| b.labels.contains(c) && out.contains(c))
            .collect();
        let contracted: Vec<char> = a
            .labels
            .iter()
            .copied()
            .filter(|c| b.labels.contains(c) && !out.contains(c))
            .collect();
        let left: Vec<char> = a
            .labels
            .iter()
            .copied()
            .filter(|c| !b.labels.contains(c))
            .collect();
        let right: Vec<char> = b
            .labels
            .iter()
            .copied()
            .filter(|c| !a.labels.contains(c))
            .collect();
        let product = |v: &[char]| v.iter().map(size).product::<usize>();
        let (pb, pl, pc, pr) = (
            product(&batch),
            product(&left),
            product(&contracted),
            product(&right),
        );
        let a_order: Vec<char> = [&batch[..], &left, &contracted].concat();
        let b_order: Vec<char> = [&batch[..], &contracted, &right].concat();
        let a = permute(lw, node, a, &a_order)?;
        let b = permute(lw, node, b, &b_order)?;
        let a3 = lw.temp_alias(node, "a_matrix", a.t, vec![pb, pl, pc]);
        let b3 = lw.temp_alias(node, "b_matrix", b.t, vec![pb, pc, pr]);
        let y = lw.temp(node, "product", DType::F32, vec![pb, pl, pr]);
        let op = Op::MatMul {
            activation: Activation::None,
        };
        lw.emit(node, op, vec![Some(a3), Some(b3)], vec![y])?;
        let labels: Vec<char> = [&batch[..], &left, &right].concat();
        let dims: Vec<usize> = labels.iter().map(size).collect();
        let y = Labelled {
            t: lw.temp_alias(node, "product_view", y, dims),
            labels,
        };
        permute(lw, node, y, &out)?
    };
    let shape = lw.shape(result.t);
    lw.alias_output(node, 0, result.t, shape)
}
