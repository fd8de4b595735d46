//! Normalizations as one step, on a host (`std`).
//!
//! A model's LayerNormalization (and InstanceNormalization) reaches the devices as the steps
//! `ferrite pack` composes it of, so that every device runs it: a ReduceMean over the trailing
//! axes, the centred values, their squares, their mean, `+ ε`, Sqrt, Reciprocal, the product,
//! then the scale and the bias — ten steps, two full-size temporaries, each step a pass over
//! the tensor behind its own dispatch. On a transformer's `16 × 32` activations that was a
//! quarter of the run. A program here recognises the chain at `prepare` ([`fusions`]) and runs
//! it as one step ([`run`]): each row's mean and variance, then its outputs, in one visit.
//!
//! The kernel forms the chain's values exactly: the sums in input order from zero, each
//! multiplied by `1 / count` as the ReduceMean kernel does, the squares rounded before they are
//! added, `1 / sqrt(v + ε)`, then `((x − mean) · inv) · scale + bias`. The fused run's outputs
//! are the composed run's bit for bit ([`crate::CpuDevice::with_fusion`] turns it off).

use crate::base::memory::{carve, f32s, f32s_mut, span, Span, Src};
use crate::CpuError;
use ferrite_hal::geometry::broadcast_strides;
use ferrite_hal::op::{BinaryOp, ReduceOp};
use ferrite_hal::{Activation, DType, Location, Op, Shape, Step, TensorDesc, TensorList, MAX_RANK};
use std::vec::Vec;

/// A fused normalization's constants: the first normalized axis (the rest follow it) and the
/// ε added to the variance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Normalization {
    /// The first of the trailing axes each mean runs over.
    pub(crate) from: usize,
    /// Added to the variance.
    pub(crate) epsilon: f32,
}

/// A chain of steps a program runs as one normalization.
pub(crate) struct Fusion {
    /// The chain's first step (the ReduceMean), which runs the whole chain.
    pub(crate) first: usize,
    /// The steps after it that then run nothing.
    pub(crate) rest: Vec<usize>,
    /// The first step's operands as it then runs: the input, the scale, the bias (or absent).
    pub(crate) inputs: [u32; 3],
    /// The chain's output.
    pub(crate) output: u32,
    /// Its constants.
    pub(crate) normalization: Normalization,
}

/// How a scale or bias spreads over the normalized tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spread {
    /// One value per position within a row, the same in every row (LayerNormalization's).
    AlongRow,
    /// One value per row (InstanceNormalization's, per channel), read at these strides over
    /// the leading axes.
    PerRow([usize; MAX_RANK]),
}

/// How `operand` spreads over `x` normalized from axis `from`, if it is one of the two ways.
fn spread(operand: &Shape, x: &Shape, from: usize) -> Option<Spread> {
    if operand.rank() > x.rank() {
        return None;
    }
    let own = broadcast_strides(operand, x);
    let strides = x.strides();
    let dims = x.dims();
    let axes = || (0..x.rank()).filter(|&a| dims.get(a).is_some_and(|&d| d > 1));
    let along_row = axes().all(|a| match a < from {
        true => own.get(a) == Some(&0),
        false => own.get(a) == strides.get(a),
    });
    if along_row {
        return Some(Spread::AlongRow);
    }
    axes()
        .all(|a| a < from || own.get(a) == Some(&0))
        .then_some(Spread::PerRow(own))
}

/// The bit mask of the trailing axes from `from` of a tensor of `rank` axes.
fn trailing(from: usize, rank: usize) -> u32 {
    (from..rank).fold(0, |mask, a| mask | 1 << a)
}

/// The chains in `steps` that a program runs as one normalization: ten consecutive steps (nine
/// without a bias) as `ferrite pack` composes a normalization, every value between them read
/// by the chain alone (also through no view) and no model output, each step planar, the input
/// and the output either the same bytes or apart, and the scale and bias in the weights or
/// apart from the output.
/// `epsilon` reads a constant's value from the weights.
pub(crate) fn fusions(
    steps: &[Step<'_>],
    outputs: &TensorList<'_>,
    planar: impl Fn(usize) -> bool,
    epsilon: impl Fn(&TensorDesc) -> Option<f32>,
) -> Vec<Fusion> {
    let mut reads = std::collections::BTreeMap::<u32, usize>::new();
    for step in steps {
        for slot in 0..step.inputs.len() {
            if let Some(t) = step.inputs.index(slot) {
                *reads.entry(t).or_default() += 1;
            }
        }
    }
    let mut found = Vec::new();
    let mut at = 0;
    while at < steps.len() {
        match chain(steps, at, &reads, outputs, &planar, &epsilon) {
            Some(fusion) => {
                at = fusion.rest.last().map_or(at + 1, |&last| last + 1);
                found.push(fusion);
            }
            None => at += 1,
        }
    }
    found
}

/// The normalization chain starting at step `at`, if there is one (see [`fusions`]).
fn chain(
    steps: &[Step<'_>],
    at: usize,
    reads: &std::collections::BTreeMap<u32, usize>,
    outputs: &TensorList<'_>,
    planar: &impl Fn(usize) -> bool,
    epsilon: &impl Fn(&TensorDesc) -> Option<f32>,
) -> Option<Fusion> {
    let step = |i: usize| steps.get(at + i);
    let input = |i: usize, slot: usize| step(i)?.inputs.index(slot);
    let output = |i: usize| step(i)?.outputs.index(0);
    let desc = |i: usize, slot: usize| step(i)?.inputs.get(slot);
    let plain = |op: BinaryOp| Op::Binary {
        op,
        activation: Activation::None,
    };
    // The step's two operands: `known` and the other, in either order.
    let other = |i: usize, known: u32| match (input(i, 0)?, input(i, 1)?) {
        (a, b) if a == known => Some(b),
        (a, b) if b == known => Some(a),
        _ => None,
    };
    // ReduceMean over trailing axes; the centred values; their squares; their mean.
    let Op::Reduce {
        op: ReduceOp::Mean,
        axes,
    } = step(0)?.op
    else {
        return None;
    };
    let x_desc = desc(0, 0)?;
    let (x, mean) = (input(0, 0)?, output(0)?);
    let rank = x_desc.shape.rank();
    let from = axes.trailing_zeros() as usize;
    if x_desc.dtype != DType::F32 || from >= rank || axes != trailing(from, rank) {
        return None;
    }
    let ops = [
        plain(BinaryOp::Sub),
        plain(BinaryOp::Mul),
        step(0)?.op,
        plain(BinaryOp::Add),
        Op::Unary(Activation::Sqrt),
        Op::Unary(Activation::Reciprocal),
        plain(BinaryOp::Mul),
        plain(BinaryOp::Mul),
    ];
    if (1..=8).any(|i| step(i).map(|s| s.op) != ops.get(i - 1).copied()) {
        return None;
    }
    let centred = output(1)?;
    let (squares, variance, shifted, root, inverse, normalized) = (
        output(2)?,
        output(3)?,
        output(4)?,
        output(5)?,
        output(6)?,
        output(7)?,
    );
    let eps = other(4, variance)?;
    let links = [
        (input(1, 0)? == x && input(1, 1)? == mean),
        (input(2, 0)? == centred && input(2, 1)? == centred),
        input(3, 0)? == squares,
        input(5, 0)? == shifted,
        input(6, 0)? == root,
        other(7, centred)? == inverse,
    ];
    let eps_slot = (0..2).find(|&slot| input(4, slot) == Some(eps))?;
    let eps_desc = desc(4, eps_slot)?;
    let epsilon = epsilon(&eps_desc)?;
    let scale = other(8, normalized)?;
    let scaled = output(8)?;
    // The bias, when an Add of the scaled values follows.
    let bias = match step(9).map(|s| s.op) {
        Some(op) if op == plain(BinaryOp::Add) => other(9, scaled),
        _ => None,
    };
    let last = if bias.is_some() { 9 } else { 8 };
    let y = output(last)?;
    let y_desc = step(last)?.outputs.get(0)?;
    // Each intermediate value read by the chain alone (its reads counted), no model output.
    let internal = [
        (mean, 1),
        (centred, 3),
        (squares, 1),
        (variance, 1),
        (shifted, 1),
        (root, 1),
        (inverse, 1),
        (normalized, 1),
    ];
    let mut internal = internal.to_vec();
    if bias.is_some() {
        internal.push((scaled, 1));
    }
    let model_outputs: Vec<u32> = list(outputs).map(|(t, _)| t).collect();
    let private = internal
        .iter()
        .all(|&(t, n)| reads.get(&t) == Some(&n) && !model_outputs.contains(&t));
    // The chain's own shapes: the per-row values keep the normalized axes as 1s, the others
    // are the input's shape (a scale or bias that broadcast the result larger is left alone).
    let shape_of = |i: usize| step(i).and_then(|s| s.outputs.get(0)).map(|d| d.shape);
    let mut kept = [1usize; MAX_RANK];
    for (slot, &d) in kept.iter_mut().zip(x_desc.shape.dims().get(..from)?) {
        *slot = d;
    }
    let per_row = Shape::new(kept.get(..rank)?)?;
    let shapes = [0, 3, 4, 5, 6]
        .iter()
        .all(|&i| shape_of(i) == Some(per_row))
        && [1, 2, 7, 8, last]
            .iter()
            .all(|&i| shape_of(i) == Some(x_desc.shape));
    let scale_desc = desc(8, if input(8, 0)? == scale { 0 } else { 1 })?;
    let bias_desc = match bias {
        Some(b) => Some(desc(9, if input(9, 0)? == b { 0 } else { 1 })?),
        None => None,
    };
    let spreads = [Some(scale_desc), bias_desc]
        .into_iter()
        .flatten()
        .all(|d| d.dtype == DType::F32 && spread(&d.shape, &x_desc.shape, from).is_some());
    // Memory: the input and output the same bytes or apart; the scale and bias in the weights
    // or apart from the output (as the fused step carves them).
    let out_span = span(&y_desc)?;
    let apart = |d: &TensorDesc| span(d).is_none_or(|s| disjoint(s, out_span));
    let memory = (span(&x_desc) == Some(out_span) || apart(&x_desc))
        && [Some(scale_desc), bias_desc]
            .into_iter()
            .flatten()
            .all(|d| apart(&d));
    let layouts = (0..=last).all(|i| planar(at + i));
    // The values the fused step does not form, in the arena: none may be read on through a
    // view (another tensor on the same bytes), nor be the scale's or the bias's bytes.
    // (Bytes the output covers are formed: those of a value the output was placed on.)
    let mut values: Vec<u32> = internal.iter().map(|&(t, _)| t).collect();
    values.push(y);
    let spans: Vec<Span> = (0..last)
        .filter_map(|i| step(i)?.outputs.get(0).as_ref().and_then(span))
        .flat_map(|(start, end)| [(start, end.min(out_span.0)), (start.max(out_span.1), end)])
        .filter(|&(start, end)| start < end)
        .collect();
    let viewed = read_through_views(steps, at + last, &values, &spans, outputs)
        || [Some(scale_desc), bias_desc]
            .into_iter()
            .flatten()
            .filter_map(|d| span(&d))
            .any(|s| spans.iter().any(|&v| !disjoint(v, s)));
    if !(links.iter().all(|&l| l) && private && shapes && spreads && memory && layouts && !viewed) {
        return None;
    }
    Some(Fusion {
        first: at,
        rest: (at + 1..=at + last).collect(),
        inputs: [x, scale, bias.unwrap_or(ferrite_hal::device::ABSENT)],
        output: y,
        normalization: Normalization { from, epsilon },
    })
}

/// Whether bytes of a chain's values (`spans`) are read after its last step `end` under another
/// tensor than `values` — a view, sharing their bytes — by a later step or as a model output.
/// Bytes that a step after the chain writes before the read hold another value by then (the
/// arena reused), not the chain's.
fn read_through_views(
    steps: &[Step<'_>],
    end: usize,
    values: &[u32],
    spans: &[Span],
    outputs: &TensorList<'_>,
) -> bool {
    let overlaps = |s: Span| spans.iter().any(|&v| !disjoint(v, s));
    // Whether a step after the chain and before step `before` writes bytes of `s`.
    let rewritten = |s: Span, before: usize| {
        steps
            .get(end + 1..before)
            .unwrap_or(&[])
            .iter()
            .any(|p| list(&p.outputs).any(|(_, d)| span(&d).is_some_and(|o| !disjoint(o, s))))
    };
    let read = |tensors: &TensorList<'_>, before: usize| {
        list(tensors).any(|(t, d)| {
            !values.contains(&t) && span(&d).is_some_and(|s| overlaps(s) && !rewritten(s, before))
        })
    };
    let later = steps.iter().enumerate().skip(end + 1);
    later.into_iter().any(|(at, step)| read(&step.inputs, at)) || read(outputs, steps.len())
}

/// The tensors of a list, with their indices (absent ones left out).
fn list<'a>(tensors: &'a TensorList<'_>) -> impl Iterator<Item = (u32, TensorDesc)> + 'a {
    (0..tensors.len()).filter_map(|i| Some((tensors.index(i)?, tensors.get(i)?)))
}

/// Whether two byte ranges share no byte.
fn disjoint(a: Span, b: Span) -> bool {
    a.1 <= b.0 || b.1 <= a.0 || a.0 == a.1 || b.0 == b.1
}

/// The value of a one-element f32 constant in `weights`.
pub(crate) fn constant(desc: &TensorDesc, weights: &[u8]) -> Option<f32> {
    match desc.location {
        Location::Weights(o) if desc.dtype == DType::F32 && desc.bytes == 4 => {
            let bytes = weights.get(o..o + 4)?;
            Some(f32::from_le_bytes(bytes.try_into().ok()?))
        }
        _ => None,
    }
}

/// Runs a fused normalization: `step`'s inputs are the normalized tensor, the scale and the
/// bias (absent: none), its output the result.
pub(crate) fn run(
    step: &Step<'_>,
    normalization: Normalization,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    let bad = CpuError::CorruptPlan;
    let (x_desc, y_desc) = (
        step.inputs.get(0).ok_or(bad)?,
        step.outputs.get(0).ok_or(bad)?,
    );
    let scale_desc = step.inputs.get(1).ok_or(bad)?;
    let bias_desc = step.inputs.get(2);
    let shape = x_desc.shape;
    let from = normalization.from;
    let spread_of = |d: &TensorDesc| spread(&d.shape, &shape, from).ok_or(CpuError::Unsupported);
    let scale_spread = spread_of(&scale_desc)?;
    let bias_spread = bias_desc.as_ref().map(spread_of).transpose()?;
    let (view, out, _) = carve(arena, weights, span(&y_desc).ok_or(bad)?, None)?;
    let x = match view.src(&x_desc)? {
        Src::Bytes(bytes) => Some(f32s(bytes)?),
        Src::Output => None,
    };
    let scale = f32s(view.bytes(&scale_desc)?)?;
    let bias = match &bias_desc {
        Some(d) => Some(f32s(view.bytes(d)?)?),
        None => None,
    };
    let out = f32s_mut(out)?;
    let row: usize = shape.dims().get(from..).ok_or(bad)?.iter().product();
    let lead = shape.dims().get(..from).ok_or(bad)?;
    let rows: usize = lead.iter().product();
    if row == 0 || rows == 0 {
        return Ok(());
    }
    if out.len() < rows * row || x.is_some_and(|x| x.len() < rows * row) {
        return Err(bad);
    }
    let scale = Operand {
        values: scale,
        spread: scale_spread,
        lead,
    };
    let bias = bias.zip(bias_spread).map(|(values, spread)| Operand {
        values,
        spread,
        lead,
    });
    normalize_rows(
        x,
        out,
        row,
        rows,
        normalization.epsilon,
        &scale,
        bias.as_ref(),
    );
    Ok(())
}

/// A scale or bias and how it spreads over the rows (`lead`: the leading axes' sizes).
struct Operand<'a> {
    values: &'a [f32],
    spread: Spread,
    lead: &'a [usize],
}

impl Operand<'_> {
    /// The values row `r` reads: a row's worth, or one (empty where the operand is short).
    fn row(&self, r: usize, len: usize) -> &[f32] {
        match self.spread {
            Spread::AlongRow => self.values.get(..len).unwrap_or(&[]),
            Spread::PerRow(strides) => {
                let (mut rest, mut at) = (r, 0);
                for (a, &d) in self.lead.iter().enumerate().rev() {
                    at += (rest % d.max(1)) * strides.get(a).copied().unwrap_or(0);
                    rest /= d.max(1);
                }
                self.values.get(at..at + 1).unwrap_or(&[])
            }
        }
    }
}

/// Rows normalized at a time: their sums run side by side (each in its own order), where one
/// row's sum is a chain of dependent additions.
const ROWS: usize = 8;

/// Normalizes `rows` rows of `len` values of `x` (or of `out` itself, in place) into `out`.
fn normalize_rows(
    x: Option<&[f32]>,
    out: &mut [f32],
    len: usize,
    rows: usize,
    epsilon: f32,
    scale: &Operand<'_>,
    bias: Option<&Operand<'_>>,
) {
    let inv_count = 1.0 / len as f32;
    for first in (0..rows).step_by(ROWS) {
        let count = ROWS.min(rows - first);
        let block = first * len..(first + count) * len;
        let source: &[f32] = match x {
            Some(x) => x.get(block.clone()).unwrap_or(&[]),
            None => out.get(block.clone()).unwrap_or(&[]),
        };
        // Each row's mean, then the mean of its squared deviations: the rows' values side by
        // side, each row's from its own iterator (an empty one past the last row).
        let rows_of = || -> [core::slice::Iter<'_, f32>; ROWS] {
            core::array::from_fn(|r| match r < count {
                true => source.get(r * len..(r + 1) * len).unwrap_or(&[]).iter(),
                false => [].iter(),
            })
        };
        let mut sums = [0.0f32; ROWS];
        let mut rows = rows_of();
        for _ in 0..len {
            for (sum, row) in sums.iter_mut().zip(rows.iter_mut()) {
                if let Some(v) = row.next() {
                    *sum += v;
                }
            }
        }
        let means = sums.map(|sum| sum * inv_count);
        let mut squares = [0.0f32; ROWS];
        let mut rows = rows_of();
        for _ in 0..len {
            for ((square, row), mean) in squares.iter_mut().zip(rows.iter_mut()).zip(means) {
                if let Some(v) = row.next() {
                    let centred = v - mean;
                    *square += centred * centred;
                }
            }
        }
        let inverses =
            squares.map(|square| 1.0 / crate::base::math::sqrt(square * inv_count + epsilon));
        // The outputs, a row at a time (in place, each value read before it is written).
        for r in 0..count {
            let at = (first + r) * len;
            let (mean, inverse) = (means[r], inverses[r]);
            let scales = scale.row(first + r, len);
            let biases = bias.map(|b| b.row(first + r, len));
            let Some(dst) = out.get_mut(at..at + len) else {
                return;
            };
            // Out of place, the row's inputs first (then each formed where it lies).
            if let Some(row) = x.and_then(|x| x.get(at..at + len)) {
                dst.copy_from_slice(row);
            }
            match (scales, biases) {
                (&[s], None) => dst.iter_mut().for_each(|v| *v = (*v - mean) * inverse * s),
                (&[s], Some(&[b])) => dst
                    .iter_mut()
                    .for_each(|v| *v = (*v - mean) * inverse * s + b),
                (s, None) if s.len() == len => {
                    for (v, &s) in dst.iter_mut().zip(s) {
                        *v = (*v - mean) * inverse * s;
                    }
                }
                (s, Some(b)) if s.len() == len && b.len() == len => {
                    for ((v, &s), &b) in dst.iter_mut().zip(s).zip(b) {
                        *v = (*v - mean) * inverse * s + b;
                    }
                }
                (s, Some(&[b])) if s.len() == len => {
                    for (v, &s) in dst.iter_mut().zip(s) {
                        *v = (*v - mean) * inverse * s + b;
                    }
                }
                (&[s], Some(b)) if b.len() == len => {
                    for (v, &b) in dst.iter_mut().zip(b) {
                        *v = (*v - mean) * inverse * s + b;
                    }
                }
                _ => {}
            }
        }
    }
}
