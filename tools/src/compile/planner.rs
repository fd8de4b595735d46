//! Memory planning: every runtime tensor gets a fixed arena offset so that no two tensors alive
//! at the same step overlap, and the arena is as small as we can make it.
//!
//! A *buffer* is a root tensor's bytes (aliases share their root's buffer). Its lifetime runs from
//! the step that writes it to the last step that reads it (graph outputs live to the end). An
//! elementwise op may write its output into a dying input's buffer (in place). Offsets are then
//! assigned greedily — largest buffer first, at the lowest offset free over its lifetime — under
//! a few orderings, keeping the smallest arena. The lower bound is the largest total of bytes
//! alive at any one step; `inspect` prints both.

use crate::compile::ir::{PlanGraph, PlanOp, TensorId};
use ferrite_core::format::ARENA_ALIGN;
use ferrite_hal::geometry::{conv_scratch_elements, qadd_scratch_elements, qconv_scratch_elements};
use ferrite_hal::{DType, Op};

/// One arena buffer with its lifetime (inclusive op indices) and placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Root tensor owning the bytes.
    pub root: TensorId,
    /// Size, rounded up to the arena alignment.
    pub size: usize,
    /// First step at which it is alive.
    pub first: usize,
    /// Last step at which it is alive.
    pub last: usize,
    /// Assigned byte offset.
    pub offset: usize,
}

/// The memory plan of a graph.
#[derive(Clone, Debug, Default)]
pub struct MemoryPlan {
    /// Buffers, with offsets.
    pub buffers: Vec<Buffer>,
    /// For each tensor: the buffer holding it (`None` for constants).
    pub buffer_of: Vec<Option<usize>>,
    /// For each op: its scratch tensor, if it needs one.
    pub scratch: Vec<Option<TensorId>>,
    /// Total arena bytes.
    pub arena_bytes: usize,
    /// Largest total of bytes alive at one step.
    pub lower_bound: usize,
}

impl MemoryPlan {
    /// The arena offset of tensor `t`, if it lives in the arena.
    pub fn offset(&self, t: TensorId) -> Option<usize> {
        self.buffer_of
            .get(t)
            .copied()
            .flatten()
            .map(|b| self.buffers[b].offset)
    }
}

fn align(n: usize) -> usize {
    n.div_ceil(ARENA_ALIGN) * ARENA_ALIGN
}

/// Adds what the runtime needs beyond the graph itself: Copy ops for graph outputs that are
/// constants (outputs live in the arena), and scratch tensors.
pub fn prepare(g: &mut PlanGraph) -> Vec<Option<TensorId>> {
    for i in 0..g.outputs.len() {
        let o = g.outputs[i];
        let root = g.root(o);
        if g.tensors[root].value.is_some() {
            let t = &g.tensors[o];
            let name = t.name.clone();
            let (dtype, shape) = (t.dtype, t.shape.clone());
            g.tensors[o].name = format!("{name}:constant");
            let copy = g.add_tensor(name.clone(), dtype, shape);
            g.ops.push(PlanOp {
                name,
                op: Op::Copy,
                inputs: vec![Some(o)],
                outputs: vec![copy],
            });
            g.outputs[i] = copy;
        }
    }
    let mut scratch = Vec::with_capacity(g.ops.len());
    for i in 0..g.ops.len() {
        let need = scratch_elements(&g.tensors, &g.ops[i]);
        let name = format!("{}:scratch", g.ops[i].name);
        scratch.push((need > 0).then(|| g.add_tensor(name, DType::F32, vec![need])));
    }
    scratch
}

/// Scratch `f32` elements `op` needs (the CPU convolution's, by the shared rule of
/// `ferrite_hal::geometry::conv_scratch_elements`, and the integer convolution's by
/// `qconv_scratch_elements`, the integer addition's by `qadd_scratch_elements`); 0 for every
/// other op.
pub fn scratch_elements(tensors: &[crate::compile::ir::Tensor], op: &PlanOp) -> usize {
    if let (Op::QAdd(_), Some(&y)) = (op.op, op.outputs.first()) {
        return qadd_scratch_elements(tensors[y].shape.iter().product(), tensors[y].dtype);
    }
    if let Op::Dft(d) = op.op {
        // One transform's interleaved complex values.
        return 2 * d.length;
    }
    if let (Op::Det, Some(Some(x))) = (op.op, op.inputs.first()) {
        // An n × n f64 working copy, in f32 elements.
        let n = tensors[*x].shape.last().copied().unwrap_or(0);
        return 2 * n * n;
    }
    if let (Op::Recurrent(_), Some(Some(x)), Some(Some(rec))) =
        (op.op, op.inputs.first(), op.inputs.get(2))
    {
        // Both halves of every gate's input (R has gates·hidden rows), for the whole batch.
        let (x, rec) = (&tensors[*x].shape, &tensors[*rec].shape);
        return 2 * x.get(1).unwrap_or(&0) * rec.first().unwrap_or(&0);
    }
    if !matches!(op.op, Op::Conv(_) | Op::QConv(_)) {
        return 0;
    }
    let (Some(Some(w)), Some(y)) = (op.inputs.get(1), op.outputs.first()) else {
        return 0;
    };
    let (w, y) = (&tensors[*w].shape, &tensors[*y].shape);
    let (oh, ow) = match y.len() {
        4 => (y[2], y[3]),
        3 => (1, y[2]),
        _ => return 0,
    };
    let need = |icg: usize| match op.op {
        Op::Conv(c) => conv_scratch_elements(&c, icg, oh, ow),
        Op::QConv(c) => qconv_scratch_elements(&c, icg, oh, ow),
        _ => None,
    };
    w.get(1).and_then(|&icg| need(icg)).unwrap_or(0)
}

/// Plans the arena of `g` (after [`prepare`]).
pub fn plan(g: &PlanGraph, scratch: Vec<Option<TensorId>>) -> MemoryPlan {
    let n_ops = g.ops.len();
    let mut buffer_of: Vec<Option<usize>> = vec![None; g.tensors.len()];
    let mut buffers: Vec<Buffer> = Vec::new();
    let root_buffer = |g: &PlanGraph,
                       t: TensorId,
                       buffers: &mut Vec<Buffer>,
                       buffer_of: &mut Vec<Option<usize>>,
                       first: usize| {
        let root = g.root(t);
        if g.tensors[root].value.is_some() {
            return None;
        }
        if let Some(b) = buffer_of[root] {
            buffer_of[t] = Some(b);
            return Some(b);
        }
        buffers.push(Buffer {
            root,
            size: align(g.tensors[root].bytes()).max(ARENA_ALIGN),
            first,
            last: first,
            offset: 0,
        });
        let b = buffers.len() - 1;
        buffer_of[root] = Some(b);
        buffer_of[t] = Some(b);
        Some(b)
    };
    for &i in &g.inputs {
        root_buffer(g, i, &mut buffers, &mut buffer_of, 0);
    }
    // Last reader of every root, to decide in-place reuse.
    let mut last_read = vec![None; g.tensors.len()];
    for (s, op) in g.ops.iter().enumerate() {
        for &t in op.inputs.iter().flatten() {
            last_read[g.root(t)] = Some(s);
        }
    }
    let output_roots: Vec<TensorId> = g.outputs.iter().map(|&o| g.root(o)).collect();
    for (s, op) in g.ops.iter().enumerate() {
        for &t in op.inputs.iter().flatten() {
            root_buffer(g, t, &mut buffers, &mut buffer_of, s);
        }
        for &o in &op.outputs {
            if op.op.allows_in_place() && g.tensors[o].alias_of.is_none() && buffer_of[o].is_none()
            {
                if let Some(b) =
                    in_place_candidate(g, op, o, s, &last_read, &buffer_of, &output_roots)
                {
                    buffer_of[o] = Some(b);
                    continue;
                }
            }
            root_buffer(g, o, &mut buffers, &mut buffer_of, s);
        }
        if let Some(t) = scratch[s] {
            root_buffer(g, t, &mut buffers, &mut buffer_of, s);
        }
    }
    // Later aliases of in-place outputs follow their root.
    for t in 0..g.tensors.len() {
        if buffer_of[t].is_none() && g.tensors[t].alias_of.is_some() {
            buffer_of[t] = buffer_of[g.root(t)];
        }
    }
    // Lifetimes end at the last step touching any view of the buffer; outputs live to the end.
    for (s, op) in g.ops.iter().enumerate() {
        for &t in op.inputs.iter().flatten().chain(&op.outputs) {
            if let Some(b) = buffer_of[t] {
                buffers[b].last = buffers[b].last.max(s);
            }
        }
    }
    for &o in &g.outputs {
        if let Some(b) = buffer_of[o] {
            buffers[b].last = n_ops;
        }
    }
    let lower_bound = (0..=n_ops)
        .map(|s| {
            buffers
                .iter()
                .filter(|b| b.first <= s && s <= b.last)
                .map(|b| b.size)
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    let arena_bytes = assign_offsets(&mut buffers);
    MemoryPlan {
        buffers,
        buffer_of,
        scratch,
        arena_bytes,
        lower_bound,
    }
}

/// A dying input of `op` that `output` may overwrite: same shape and type, its last reader is
/// this step, no other view of it is read here, and it is not a graph output.
fn in_place_candidate(
    g: &PlanGraph,
    op: &PlanOp,
    output: TensorId,
    step: usize,
    last_read: &[Option<usize>],
    buffer_of: &[Option<usize>],
    output_roots: &[TensorId],
) -> Option<usize> {
    let out = &g.tensors[output];
    if out.dtype != DType::F32 {
        // Only the float kernels read an operand that shares the output's bytes.
        return None;
    }
    for &input in op.inputs.iter().flatten() {
        let t = &g.tensors[input];
        let root = g.root(input);
        if t.shape != out.shape || t.dtype != out.dtype || g.tensors[root].value.is_some() {
            continue;
        }
        if last_read[root] != Some(step)
            || output_roots.contains(&root)
            || g.tensors[root].bytes() != out.bytes()
        {
            continue;
        }
        let other_views = op
            .inputs
            .iter()
            .flatten()
            .any(|&x| x != input && g.root(x) == root);
        if other_views {
            continue;
        }
        return buffer_of[root];
    }
    None
}

/// Greedy placement under several orderings; keeps the smallest. Returns the arena size.
fn assign_offsets(buffers: &mut [Buffer]) -> usize {
    let orders: [fn(&Buffer, &Buffer) -> std::cmp::Ordering; 3] = [
        |a, b| b.size.cmp(&a.size).then(a.first.cmp(&b.first)),
        |a, b| (b.size * (b.last - b.first + 1)).cmp(&(a.size * (a.last - a.first + 1))),
        |a, b| a.first.cmp(&b.first).then(b.size.cmp(&a.size)),
    ];
    let mut best: Option<(usize, Vec<usize>)> = None;
    for order in orders {
        let mut idx: Vec<usize> = (0..buffers.len()).collect();
        idx.sort_by(|&x, &y| order(&buffers[x], &buffers[y]));
        let mut offsets = vec![0usize; buffers.len()];
        let mut placed: Vec<usize> = Vec::new();
        let mut total = 0;
        for &i in &idx {
            let b = &buffers[i];
            let mut busy: Vec<(usize, usize)> = placed
                .iter()
                .filter(|&&j| buffers[j].first <= b.last && b.first <= buffers[j].last)
                .map(|&j| (offsets[j], offsets[j] + buffers[j].size))
                .collect();
            busy.sort();
            let mut offset = 0;
            for (start, end) in busy {
                if start >= offset + b.size {
                    break;
                }
                offset = offset.max(end);
            }
            offsets[i] = offset;
            total = total.max(offset + b.size);
            placed.push(i);
        }
        if best.as_ref().is_none_or(|(t, _)| total < *t) {
            best = Some((total, offsets));
        }
    }
    let (total, offsets) = best.unwrap_or((0, vec![]));
    for (b, o) in buffers.iter_mut().zip(offsets) {
        b.offset = o;
    }
    total
}
