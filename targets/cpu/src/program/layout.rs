//! Channel-blocked tensors between convolutions, on an x86-64 host (`std`).
//!
//! ONNX's tensors are NCHW: a channel's pixels side by side. The channel-lane kernels put a
//! vector of output channels in a register, so each tile had been turned into channel rows to
//! store it, and a depthwise layer's planes turned channels-last and back again (a tenth of a
//! pointwise layer, a third of a small depthwise one). As onnxruntime does with its NCHWc
//! layout, a program here keeps a tensor that only convolutions and elementwise steps touch
//! channel-blocked instead: `[channel / lanes][pixel][channel % lanes]`, `lanes` those of the
//! CPU's vectors (sixteen with AVX-512, eight with AVX2). The bytes are the same in number
//! and place in the arena; only their order differs, so the plan (offsets, sizes, arena) is
//! untouched, and the model's inputs and outputs keep their layout.
//!
//! The program decides at `prepare` ([`plan`]), tensor by tensor: a tensor of one image whose
//! channels are whole blocks, written by one step and read by steps that all run it blocked (a
//! convolution the blocked kernels take, `ops::conv::blocked`; an elementwise step whose
//! operands are all blocked; a global average pooling), and whose bytes no other tensor reads while it lives (an in-place
//! Reshape's alias, a model output). Each step gets its layouts in its context
//! (`base::context::StepContext`), which the program passes down. The blocked kernels form the channel-lane kernels' sums in the same
//! order, so the outputs are the planar run's bit for bit wherever that run takes those kernels
//! (every layer of the test models; where a plan's scratch is too short for them, the planar
//! run multiplies unfolded windows instead, which rounds differently); a convolution that does
//! not run its layouts after all changes them around the planar kernels. Measured: DS-CNN
//! 73 → 62 µs, MobileNetV1-0.25 238 → 205 µs, ResNet-8 265 → 242 µs (AVX-512, one thread).
//! `FERRITE_CPU_LAYOUT=planar`, or [`crate::CpuDevice::with_channel_blocking`], keeps every
//! tensor planar.

pub use crate::base::blocking::Blocking;
use crate::base::geometry::ConvDims;
use ferrite_hal::op::{BinaryOp, Conv};
use ferrite_hal::{Activation, DType, Location, Op, Step, TensorDesc, TensorList};
use std::collections::{BTreeMap, BTreeSet};
use std::vec::Vec;

/// A step's layouts (see [`Blocking`]).
pub type StepLayout = Blocking;

/// The lanes of a block on this CPU, where the blocked kernels run and the environment does
/// not ask for planar tensors (`FERRITE_CPU_LAYOUT=planar`).
fn lanes() -> Option<usize> {
    let planar = std::env::var("FERRITE_CPU_LAYOUT").as_deref() == Ok("planar");
    if planar {
        return None;
    }
    crate::ops::conv::block_lanes()
}

/// A model input or output: its index and description.
type Listed = (u32, TensorDesc);

/// What the planner knows of a tensor.
struct Use {
    desc: TensorDesc,
    /// The steps that write it, and those that read it.
    writers: Vec<usize>,
    readers: Vec<usize>,
}

/// Each step's layouts for a plan's `steps`, whose inputs and outputs are `inputs` and
/// `outputs` (kept planar). Every step planar where the CPU has no blocked kernels.
pub fn plan(
    steps: &[Step<'_>],
    inputs: &TensorList<'_>,
    outputs: &TensorList<'_>,
) -> Vec<StepLayout> {
    let planar = std::vec![StepLayout::default(); steps.len()];
    let Some(lanes) = lanes() else {
        return planar;
    };
    let mut uses: BTreeMap<u32, Use> = BTreeMap::new();
    let mut note = |index: Option<u32>, desc: Option<TensorDesc>, step: usize, write: bool| {
        if let (Some(index), Some(desc)) = (index, desc) {
            let entry = uses.entry(index).or_insert(Use {
                desc,
                writers: Vec::new(),
                readers: Vec::new(),
            });
            match write {
                true => entry.writers.push(step),
                false => entry.readers.push(step),
            }
        }
    };
    for (s, step) in steps.iter().enumerate() {
        for i in 0..step.inputs.len() {
            note(step.inputs.index(i), step.inputs.get(i), s, false);
        }
        for i in 0..step.outputs.len() {
            note(step.outputs.index(i), step.outputs.get(i), s, true);
        }
    }
    let listed = |list: &TensorList<'_>| -> Vec<Listed> {
        (0..list.len())
            .filter_map(|i| Some((list.index(i)?, list.get(i)?)))
            .collect()
    };
    let (model_inputs, model_outputs) = (listed(inputs), listed(outputs));
    let ends: BTreeSet<u32> = model_inputs
        .iter()
        .chain(&model_outputs)
        .map(|&(i, _)| i)
        .collect();
    let mut blocked: BTreeSet<u32> = uses
        .iter()
        .filter(|&(index, u)| {
            !ends.contains(index)
                && blockable(&u.desc, lanes)
                && u.writers.len() == 1
                && !u.readers.is_empty()
                && alone(*index, u, &uses, (&model_inputs, &model_outputs))
        })
        .map(|(&index, _)| index)
        .collect();
    // Unblock what a step cannot run blocked until every step can (only ever fewer). A real
    // model settles in a few passes (each unblocking spreads along a chain); a plan that does
    // not within `PASSES` keeps everything planar, so that no plan costs more than `PASSES`
    // passes over its steps.
    const PASSES: usize = 64;
    let mut settled = false;
    for _ in 0..PASSES {
        let mut changed = false;
        for step in steps {
            for index in unblocked_by(step, &blocked) {
                changed |= blocked.remove(&index);
            }
        }
        if !changed {
            settled = true;
            break;
        }
    }
    if !settled {
        return planar;
    }
    let is = |list: &TensorList<'_>| list.index(0).is_some_and(|i| blocked.contains(&i));
    steps
        .iter()
        .map(|step| Blocking {
            input: is(&step.inputs),
            output: is(&step.outputs),
        })
        .collect()
}

/// Whether a tensor may be blocked at all: floats in the arena, one image of whole blocks of
/// channels and more than one pixel (one pixel is the same either way).
fn blockable(desc: &TensorDesc, lanes: usize) -> bool {
    let dims = desc.shape.dims();
    matches!(desc.location, Location::Arena(_))
        && desc.dtype == DType::F32
        && dims.len() == 4
        && dims[0] == 1
        && dims[1] >= lanes
        && dims[1].is_multiple_of(lanes)
        && dims[2].saturating_mul(dims[3]) > 1
}

/// The arena bytes of a tensor.
fn bytes(desc: &TensorDesc) -> Option<core::ops::Range<usize>> {
    match desc.location {
        Location::Arena(at) => Some(at..at.checked_add(desc.bytes)?),
        Location::Weights(_) => None,
    }
}

/// Whether no other tensor reads or writes tensor `index`'s bytes while it lives (from its
/// writer to its last reader): another step's output written in between, a model input read
/// after it is written, or an alias of it (a tensor no step writes, read by a step or as a
/// model output: an in-place Reshape's, whose bytes are those of the latest tensor written
/// over them before it is read).
fn alone(
    index: u32,
    tensor: &Use,
    uses: &BTreeMap<u32, Use>,
    (inputs, outputs): (&[Listed], &[Listed]),
) -> bool {
    let Some(range) = bytes(&tensor.desc) else {
        return false;
    };
    let overlap = |a: &core::ops::Range<usize>, b: &core::ops::Range<usize>| {
        a.start < b.end && b.start < a.end && !a.is_empty() && !b.is_empty()
    };
    let overlaps = |desc: &TensorDesc| bytes(desc).is_some_and(|r| overlap(&r, &range));
    let born = tensor.writers.first().copied().unwrap_or(0);
    let dies = tensor.readers.iter().copied().max().unwrap_or(born);
    let model_input = |i: &u32| inputs.iter().any(|(j, _)| j == i);
    // The tensor an alias's bytes hold when it is first read at step `first`.
    let root = |alias: &TensorDesc, first: usize| {
        let alias = bytes(alias)?;
        uses.iter()
            .filter(|(_, u)| bytes(&u.desc).is_some_and(|r| overlap(&r, &alias)))
            .filter_map(|(&i, u)| {
                Some((u.writers.iter().copied().filter(|&w| w < first).max()?, i))
            })
            .max()
            .map(|(_, i)| i)
    };
    let unwritten_outputs = outputs
        .iter()
        .filter(|(i, _)| uses.get(i).is_none_or(|u| u.writers.is_empty()));
    for (_, desc) in unwritten_outputs {
        if overlaps(desc) && root(desc, usize::MAX) == Some(index) {
            return false;
        }
    }
    uses.iter().all(|(other, u)| {
        if *other == index || !overlaps(&u.desc) {
            return true;
        }
        if u.writers.is_empty() {
            if model_input(other) {
                // A model input may share bytes it no longer needs.
                return u.readers.iter().all(|&r| r <= born);
            }
            let first = u.readers.iter().copied().min().unwrap_or(usize::MAX);
            return root(&u.desc, first) != Some(index);
        }
        u.writers.iter().all(|&w| w < born || w >= dies)
    })
}

/// The blocked tensors among `step`'s operands that it cannot run blocked.
fn unblocked_by(step: &Step<'_>, blocked: &BTreeSet<u32>) -> Vec<u32> {
    let operands = |list: &TensorList<'_>| -> Vec<Option<u32>> {
        (0..list.len()).map(|i| list.index(i)).collect()
    };
    let (ins, outs) = (operands(&step.inputs), operands(&step.outputs));
    let all: Vec<u32> = ins.iter().chain(&outs).flatten().copied().collect();
    let is = |i: Option<u32>| i.is_some_and(|i| blocked.contains(&i));
    let blocked_ones = |list: &[u32]| -> Vec<u32> {
        list.iter()
            .copied()
            .filter(|i| blocked.contains(i))
            .collect()
    };
    match &step.op {
        Op::Conv(c) => {
            let (x, y) = (
                ins.first().copied().flatten(),
                outs.first().copied().flatten(),
            );
            // Only the data input and the output may be blocked.
            let mut drop: Vec<u32> = ins
                .iter()
                .skip(1)
                .chain(outs.iter().skip(1))
                .flatten()
                .copied()
                .filter(|i| blocked.contains(i))
                .collect();
            let wanted = Blocking {
                input: is(x),
                output: is(y),
            };
            let dims = step
                .inputs
                .get(0)
                .zip(step.outputs.get(0))
                .and_then(|(x, y)| ConvDims::of(&x.shape, &y.shape));
            let runs = |b: Blocking| dims.is_some_and(|d| conv_runs(c, d, b));
            if (wanted.input || wanted.output) && !runs(wanted) {
                let output_only = Blocking {
                    input: false,
                    ..wanted
                };
                if wanted.input && wanted.output && runs(output_only) {
                    drop.extend(x);
                } else {
                    drop.extend(x.filter(|_| wanted.input));
                    drop.extend(y.filter(|_| wanted.output));
                }
            }
            drop
        }
        // Elementwise over operands of one shape: the layout is theirs, if it is all of theirs.
        Op::Unary(_) | Op::Binary { .. } => {
            let descs = (0..step.inputs.len())
                .map(|i| step.inputs.get(i))
                .chain((0..step.outputs.len()).map(|i| step.outputs.get(i)));
            let mut shapes = descs.map(|d| d.map(|d| d.shape));
            let first = shapes.next().flatten();
            let same = first.is_some() && shapes.all(|s| s == first);
            let every = ins.iter().chain(&outs).all(|&i| is(i));
            if same && every {
                Vec::new()
            } else {
                blocked_ones(&all)
            }
        }
        // Reads a blocked input (its output, one pixel a channel, is never blocked).
        Op::GlobalAvgPool => blocked_ones(&all)
            .into_iter()
            .filter(|&i| Some(i) != ins.first().copied().flatten())
            .collect(),
        _ => blocked_ones(&all),
    }
}

/// A residual Add fused into the convolution just before it: the convolution writes the Add's
/// output, adding the Add's other operand to each sum before the Add's activation (what
/// onnxruntime's NCHWc convolutions do with a "sum" input). The same operations in the same
/// order as the two steps, so the same results; the Add's memory traffic saved (ResNet-8's
/// three, 4.7 µs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fusion {
    /// The convolution's step.
    pub conv: usize,
    /// The Add's step (then skipped).
    pub add: usize,
    /// The Add's other operand (a tensor index).
    pub residual: u32,
    /// The Add's output (a tensor index), which the convolution then writes.
    pub output: u32,
    /// The Add's activation.
    pub activation: Activation,
}

/// The residual Adds of `steps` (with their `layouts`, from [`plan`]) that fuse into the
/// convolution just before them: an Add (activation none, Relu or Clip) of two blocked tensors
/// of one shape into a blocked one, one of them the output of a one-group convolution without
/// activation that nothing else reads and that is not a model output; the Add's output neither
/// overlapping the convolution's input or scratch nor partly the other operand (it may be the
/// other operand's bytes: an Add in place; each value is then read before it is written).
pub fn residual_fusions(
    steps: &[Step<'_>],
    layouts: &[StepLayout],
    outputs: &TensorList<'_>,
) -> Vec<Fusion> {
    let mut readers: BTreeMap<u32, usize> = BTreeMap::new();
    for step in steps {
        for i in 0..step.inputs.len() {
            if let Some(index) = step.inputs.index(i) {
                *readers.entry(index).or_default() += 1;
            }
        }
    }
    let model_output = |i: u32| (0..outputs.len()).any(|o| outputs.index(o) == Some(i));
    let overlap = |a: Option<core::ops::Range<usize>>, b: Option<core::ops::Range<usize>>| {
        a.zip(b)
            .is_some_and(|(a, b)| a.start < b.end && b.start < a.end && !a.is_empty())
    };
    let mut fusions = Vec::new();
    for add in 1..steps.len() {
        let (conv, step) = (add - 1, &steps[add]);
        let Op::Binary {
            op: BinaryOp::Add,
            activation,
        } = step.op
        else {
            continue;
        };
        let Op::Conv(c) = steps[conv].op else {
            continue;
        };
        let fusable = matches!(
            activation,
            Activation::None | Activation::Relu | Activation::Clip { .. }
        ) && c.activation == Activation::None
            && c.group == 1
            && layouts[conv].output
            && layouts[add].input
            && layouts[add].output
            && step.inputs.len() == 2;
        let conv_out = steps[conv].outputs.index(0);
        let (Some(t), Some(a), Some(b), Some(y)) = (
            conv_out,
            step.inputs.index(0),
            step.inputs.index(1),
            step.outputs.index(0),
        ) else {
            continue;
        };
        let other = match (a == t, b == t) {
            (true, false) => b,
            (false, true) => a,
            _ => continue,
        };
        let desc = |list: &TensorList<'_>, i: usize| list.get(i).and_then(|d| bytes(&d));
        let (y_bytes, other_bytes) = (
            desc(&step.outputs, 0),
            desc(&step.inputs, usize::from(a == t)),
        );
        let x_bytes = desc(&steps[conv].inputs, 0);
        let scratch = steps[conv].scratch.and_then(|d| bytes(&d));
        let places = y_bytes.is_some()
            && other_bytes.is_some()
            && (y_bytes == other_bytes || !overlap(y_bytes.clone(), other_bytes.clone()))
            && !overlap(y_bytes.clone(), x_bytes)
            && !overlap(y_bytes, scratch.clone())
            && !overlap(other_bytes, scratch);
        if fusable && places && readers.get(&t) == Some(&1) && !model_output(t) {
            fusions.push(Fusion {
                conv,
                add,
                residual: other,
                output: y,
                activation,
            });
        }
    }
    fusions
}

/// Whether the blocked convolution kernels run `c` of dimensions `d` with `blocking`.
fn conv_runs(c: &Conv, d: ConvDims, blocking: Blocking) -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::ops::conv::blocked::runs(c, d, blocking);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (c, d, blocking);
        false
    }
}
