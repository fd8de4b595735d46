//! The plan decoded once, on a host (`std`): each step's op, operand lists and scratch, and
//! every tensor the steps name, so that a run does not decode the model's records again. On a
//! transformer of 48 small steps that decoding had been a sixth of the run. Microcontroller
//! builds keep decoding each step as they run it (no heap, and flash for nothing).

use crate::base::context::StepMemo;
use crate::program::layout::StepLayout;
use crate::program::normalization::{self, Normalization};
use ferrite_hal::device::ABSENT;
use ferrite_hal::{Activation, Op, Plan, Step, TensorDesc, TensorList, Tensors};
use std::vec::Vec;

/// Tensor indices past this are not cached (a verified plan has far fewer tensors; a plan
/// that names more runs by decoding, as before).
const MAX_TENSORS: usize = 1 << 20;

/// A plan's steps as decoded at `prepare`; `complete` is false where a step did not decode (the
/// run then decodes, and fails, exactly as without the cache).
pub struct Prepared {
    steps: Vec<PreparedStep>,
    tensors: DescTable,
    complete: bool,
    /// Whether 3 × 3 convolutions between blocked tensors may take Winograd's transform.
    winograd: bool,
}

/// What a program planned for one step: its operands' layouts, a fused residual Add's
/// activation, and whether it was fused into the step before it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kept {
    pub(crate) layout: StepLayout,
    pub(crate) residual: Option<Activation>,
    pub(crate) fused_away: bool,
    /// Whether the step may take Winograd's transform ([`crate::program::layout::winograd`]).
    pub(crate) winograd: bool,
    /// The normalization the step runs for the chain it begins ([`crate::program::normalization`]).
    pub(crate) normalization: Option<Normalization>,
}

/// One step: decoded, the state its kernels keep ([`StepMemo`]) and its operands'
/// layouts ([`crate::program::layout`]).
struct PreparedStep {
    decoded: DecodedStep,
    memo: StepMemo,
    layout: StepLayout,
    /// The activation of a residual Add fused into this convolution ([`crate::program::layout::Fusion`]).
    residual: Option<Activation>,
    /// Whether the step was fused into one before it (it then runs nothing).
    fused_away: bool,
    /// The normalization the step runs for the chain it begins ([`crate::program::normalization`]).
    normalization: Option<Normalization>,
}

impl PreparedStep {
    /// What the program planned for the step, Winograd's transform allowed where `winograd`.
    fn kept(&self, winograd: bool) -> Kept {
        Kept {
            layout: self.layout,
            residual: self.residual,
            fused_away: self.fused_away,
            winograd,
            normalization: self.normalization,
        }
    }
}

/// A decoded step: its operand lists as little-endian tensor indices (as in the model).
struct DecodedStep {
    index: usize,
    op: Op,
    inputs: Vec<u8>,
    outputs: Vec<u8>,
    scratch: Option<TensorDesc>,
}

impl DecodedStep {
    /// The step, its operand lists naming `tensors`.
    fn step<'p>(&'p self, tensors: &'p DescTable) -> Step<'p> {
        Step {
            index: self.index,
            op: self.op,
            inputs: TensorList::new(&self.inputs, tensors),
            outputs: TensorList::new(&self.outputs, tensors),
            scratch: self.scratch,
        }
    }
}

/// The decoded tensors, by index.
struct DescTable(Vec<Option<TensorDesc>>);

impl Tensors for DescTable {
    fn tensor(&self, index: u32) -> Option<TensorDesc> {
        self.0.get(index as usize).copied().flatten()
    }
}

impl Prepared {
    /// Decodes every step of `plan` and the tensors they name, and plans which tensors stay
    /// channel-blocked between convolutions ([`crate::program::layout`]).
    pub fn new(plan: &dyn Plan) -> Prepared {
        Prepared::with_layouts(plan, true)
    }

    /// [`Prepared::new`], with channel-blocked tensors only where `blocking` allows them.
    pub fn with_layouts(plan: &dyn Plan, blocking: bool) -> Prepared {
        Prepared::build(plan, blocking, true)
    }

    /// [`Prepared::with_layouts`], with composed normalizations run as one step where
    /// `fusing` ([`crate::program::normalization`]).
    pub(crate) fn build(plan: &dyn Plan, blocking: bool, fusing: bool) -> Prepared {
        let mut table: Vec<Option<TensorDesc>> = Vec::new();
        let mut steps = Vec::with_capacity(plan.len());
        let incomplete = |table| Prepared {
            steps: Vec::new(),
            tensors: DescTable(table),
            complete: false,
            winograd: false,
        };
        for index in 0..plan.len() {
            let Some(step) = plan.step(index) else {
                return incomplete(table);
            };
            let mut lists = [Vec::new(), Vec::new()];
            for (list, operands) in lists.iter_mut().zip([step.inputs, step.outputs]) {
                for slot in 0..operands.len() {
                    let tensor = operands.index(slot);
                    list.extend_from_slice(&tensor.unwrap_or(ABSENT).to_le_bytes());
                    let Some(tensor) = tensor else { continue };
                    let at = tensor as usize;
                    if at >= MAX_TENSORS {
                        return incomplete(table);
                    }
                    if at >= table.len() {
                        table.resize(at + 1, None);
                    }
                    table[at] = operands.get(slot);
                }
            }
            let [inputs, outputs] = lists;
            steps.push(PreparedStep {
                decoded: DecodedStep {
                    index: step.index,
                    op: step.op,
                    inputs,
                    outputs,
                    scratch: step.scratch,
                },
                memo: StepMemo::default(),
                layout: StepLayout::default(),
                residual: None,
                fused_away: false,
                normalization: None,
            });
        }
        let tensors = DescTable(table);
        let views: Vec<Step<'_>> = steps.iter().map(|s| s.decoded.step(&tensors)).collect();
        let layouts = match blocking {
            true => crate::program::layout::plan(&views, &plan.inputs(), &plan.outputs()),
            false => std::vec![StepLayout::default(); views.len()],
        };
        let fusions = match blocking {
            true => crate::program::layout::residual_fusions(&views, &layouts, &plan.outputs()),
            false => Vec::new(),
        };
        let normalizations = match fusing {
            true => normalization::fusions(
                &views,
                &plan.outputs(),
                |i| layouts.get(i) == Some(&StepLayout::default()),
                |desc| normalization::constant(desc, plan.weights()),
            ),
            false => Vec::new(),
        };
        drop(views);
        for fusion in normalizations {
            let ([x, scale, bias], output) = (fusion.inputs, fusion.output);
            let Some(first) = steps.get_mut(fusion.first) else {
                continue;
            };
            first.decoded.inputs = [x, scale, bias]
                .iter()
                .flat_map(|t| t.to_le_bytes())
                .collect();
            first.decoded.outputs = output.to_le_bytes().to_vec();
            first.normalization = Some(fusion.normalization);
            for &i in &fusion.rest {
                if let Some(step) = steps.get_mut(i) {
                    step.fused_away = true;
                }
            }
        }
        for (step, layout) in steps.iter_mut().zip(layouts) {
            step.layout = layout;
        }
        for fusion in fusions {
            // The convolution writes the Add's output and reads its other operand as input 3.
            let Some(conv) = steps.get_mut(fusion.conv) else {
                continue;
            };
            let inputs = &mut conv.decoded.inputs;
            while inputs.len() < 3 * 4 {
                inputs.extend_from_slice(&ABSENT.to_le_bytes());
            }
            inputs.truncate(3 * 4);
            inputs.extend_from_slice(&fusion.residual.to_le_bytes());
            conv.decoded.outputs = fusion.output.to_le_bytes().to_vec();
            conv.residual = Some(fusion.activation);
            if let Some(add) = steps.get_mut(fusion.add) {
                add.fused_away = true;
            }
        }
        Prepared {
            steps,
            tensors,
            complete: true,
            winograd: blocking && std::env::var("FERRITE_CPU_WINOGRAD").as_deref() != Ok("off"),
        }
    }

    /// The same program, its 3 × 3 convolutions between channel-blocked tensors by Winograd's
    /// transform (`true`, the default with blocked tensors, unless `FERRITE_CPU_WINOGRAD=off`)
    /// or by the direct kernels, whose results equal the planar layout's bit for bit
    /// (`false`).
    pub fn with_winograd(self, winograd: bool) -> Prepared {
        Prepared {
            winograd: winograd && self.winograd,
            ..self
        }
    }

    /// The decoded steps, in order, when they are `plan`'s (the same count: a program runs
    /// with the plan it was prepared for); `None` to decode as the run goes.
    pub fn steps<'p>(&'p self, plan: &dyn Plan) -> Option<impl Iterator<Item = Step<'p>> + 'p> {
        (self.complete && self.steps.len() == plan.len())
            .then(|| self.steps.iter().map(|s| s.decoded.step(&self.tensors)))
    }

    /// Calls `run` on each of [`Prepared::steps`] in turn, with its kept kernel state (which
    /// names operands by address: a program runs with the plan it was prepared from, whose
    /// weights do not move) and its layouts, until one fails; `None` (nothing run) where the
    /// steps are not `plan`'s. Each step is formed in place and lent: an iterator's item had
    /// been moved three times (a step holds its op, 240 bytes), a copy call each.
    pub(crate) fn run_each<E>(
        &mut self,
        plan: &dyn Plan,
        mut run: impl FnMut(&Step<'_>, &mut StepMemo, Kept) -> Result<(), E>,
    ) -> Option<Result<(), E>> {
        if !(self.complete && self.steps.len() == plan.len()) {
            return None;
        }
        let tensors = &self.tensors;
        for s in self.steps.iter_mut() {
            let kept = s.kept(self.winograd);
            if let Err(e) = run(&s.decoded.step(tensors), &mut s.memo, kept) {
                return Some(Err(e));
            }
        }
        Some(Ok(()))
    }

    /// Step `position`'s kept kernel state, or `None` past the end.
    pub fn memo(&mut self, position: usize) -> Option<&mut StepMemo> {
        self.steps.get_mut(position).map(|s| &mut s.memo)
    }

    /// Step `position` as the program runs it (a convolution with a residual Add fused in
    /// writes the Add's output and reads its other operand, see [`crate::program::layout::Fusion`]),
    /// its kept kernel state and what the program planned for it; `None` past the end or where
    /// the plan did not decode.
    pub(crate) fn kept(&mut self, position: usize) -> Option<(Step<'_>, &mut StepMemo, Kept)> {
        if !self.complete {
            return None;
        }
        let tensors = &self.tensors;
        let winograd = self.winograd;
        self.steps.get_mut(position).map(move |s| {
            let kept = s.kept(winograd);
            (s.decoded.step(tensors), &mut s.memo, kept)
        })
    }

    /// How many chains of steps the program runs as one normalization (see
    /// [`crate::CpuDevice::with_fusion`]).
    pub fn fused_normalizations(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.normalization.is_some())
            .count()
    }

    /// How many tensors the program keeps channel-blocked between steps (outputs of steps
    /// that write them blocked; see [`crate::program::layout`]).
    pub fn blocked_tensors(&self) -> usize {
        self.steps.iter().filter(|s| s.layout.output).count()
    }
}
