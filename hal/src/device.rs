//! The device trait and the read-only view of a verified plan that the core hands to a device.
//!
//! The life cycle is *prepare once, execute many*: [`Device::prepare`] receives the whole plan at
//! session creation and returns a device-side program (for a GPU: pipelines, one arena buffer at
//! the planned offsets, weights uploaded once and the whole plan recorded once); each inference is
//! one [`Device::execute`] call, which a CPU runs inline and a GPU replays.
//!
//! # What the core guarantees
//! Before a device sees a plan, `ferrite-core` has verified it: every step's op parameters are in
//! their domain, every tensor's shape × dtype size fits, every arena tensor lies inside the arena,
//! every step's shapes and dtypes agree with the op's rules (e.g. a convolution's output size
//! matches its window), an output never partially overlaps an input (it is either disjoint or,
//! for ops that allow it, exactly the same bytes), and scratch is disjoint from all operands.
//! A device may rely on all of this. It must still check *data* that only exists at run time
//! (e.g. gather indices) and report it as [`crate::ErrorKind::InvalidInput`] — a GPU does so
//! after the fact, from a status word its kernels set, and must not read or write out of bounds
//! meanwhile.
//!
//! # The arena a device is handed
//! [`Device::execute`] always receives the caller's host arena, at least
//! [`Plan::arena_bytes`] long, with the graph inputs written at their planned offsets; on success
//! the graph outputs must be there. A device whose [`Capabilities::host_arena`] is `true` (the CPU)
//! computes every tensor in that buffer. A device with its own memory (`false`: a GPU) keeps the
//! whole arena there at the same offsets and moves only [`Plan::inputs`] in and
//! [`Plan::outputs`] out; other bytes of the host arena are left untouched. Weights are the
//! plan's [`Plan::weights`] bytes, which such a device uploads once in `prepare`.
//!
//! # What the Vulkan device changed
//! The trait was first written against the CPU. The GPU showed two things missing: a plan must
//! name its graph inputs and outputs ([`Plan::inputs`], [`Plan::outputs`]), because a device
//! with its own memory has to know which bytes cross the host boundary; and a session must give
//! mutable access to its device and read access to its program, because a GPU has settings that
//! change between runs (a fence timeout) and state worth reading (timings, statistics).

use crate::{Capabilities, DType, Error, Op, Shape};

/// Where a tensor's bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// At this byte offset in the arena.
    Arena(usize),
    /// At this byte offset in the model's weights section (read-only, in place).
    Weights(usize),
}

/// A tensor as the plan describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorDesc {
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Shape,
    /// Where its bytes are.
    pub location: Location,
    /// Size in bytes (= elements × dtype size).
    pub bytes: usize,
}

impl TensorDesc {
    /// Number of elements.
    pub fn elements(&self) -> usize {
        self.bytes / self.dtype.size()
    }
}

/// Looks up tensors of a verified plan by index.
pub trait Tensors {
    /// The tensor with this index, or `None` for an index out of range.
    fn tensor(&self, index: u32) -> Option<TensorDesc>;
}

/// Marker for an absent optional operand.
pub const ABSENT: u32 = u32::MAX;

/// The operands (inputs or outputs) of one step.
#[derive(Clone, Copy)]
pub struct TensorList<'a> {
    indices: &'a [u8],
    tensors: &'a dyn Tensors,
}

impl<'a> TensorList<'a> {
    /// A list over little-endian `u32` tensor indices (`u32::MAX` = absent operand).
    pub fn new(indices: &'a [u8], tensors: &'a dyn Tensors) -> Self {
        TensorList { indices, tensors }
    }

    /// Number of operand slots (including absent ones).
    pub fn len(&self) -> usize {
        self.indices.len() / 4
    }

    /// True when there are no operand slots.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tensor index in slot `i`, or `None` if absent or out of range.
    pub fn index(&self, i: usize) -> Option<u32> {
        let start = i.checked_mul(4)?;
        let raw: [u8; 4] = self.indices.get(start..start + 4)?.try_into().ok()?;
        let index = u32::from_le_bytes(raw);
        (index != ABSENT).then_some(index)
    }

    /// The tensor in slot `i`, or `None` if absent. Out of line: one copy of the descriptor's
    /// decoding serves every operand fetch (inlined, a firmware carried one per fetch).
    #[inline(never)]
    pub fn get(&self, i: usize) -> Option<TensorDesc> {
        self.tensors.tensor(self.index(i)?)
    }

    /// Iterates over the slots.
    pub fn iter(&self) -> impl Iterator<Item = Option<TensorDesc>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// One step of a plan: an op and its tensors.
#[derive(Clone, Copy)]
pub struct Step<'a> {
    /// Position in execution order.
    pub index: usize,
    /// What to compute.
    pub op: Op,
    /// Input operands (optional ones may be absent).
    pub inputs: TensorList<'a>,
    /// Output operands (all present).
    pub outputs: TensorList<'a>,
    /// Arena scratch reserved for this step (e.g. im2col columns), if any.
    pub scratch: Option<TensorDesc>,
}

impl Step<'_> {
    /// The element type a device's kernel list ([`crate::OpSet`]) is keyed by for this step:
    /// its first present input's, else f32.
    pub fn kernel_dtype(&self) -> crate::DType {
        self.inputs
            .iter()
            .flatten()
            .next()
            .map(|t| t.dtype)
            .unwrap_or(crate::DType::F32)
    }
}

/// A verified, static execution plan.
pub trait Plan {
    /// Number of steps.
    fn len(&self) -> usize;
    /// True for a plan without steps.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Step `index`, or `None` past the end.
    fn step(&self, index: usize) -> Option<Step<'_>>;
    /// [`Plan::step`] written into `slot`, for a run loop that keeps one step on its stack under
    /// every kernel (a microcontroller's): a returned step may be copied through a second.
    fn step_into<'s>(&'s self, index: usize, slot: &mut Option<Step<'s>>) {
        *slot = self.step(index);
    }
    /// The weights section (tensors with [`Location::Weights`] point into it).
    fn weights(&self) -> &[u8];
    /// Arena bytes the plan needs.
    fn arena_bytes(&self) -> usize;
    /// The graph inputs, in order (all in the arena). A device whose arena lives in its own
    /// memory copies exactly these in before a run.
    fn inputs(&self) -> TensorList<'_>;
    /// The graph outputs, in order (all in the arena), which such a device copies back.
    fn outputs(&self) -> TensorList<'_>;
}

/// A compute device: prepares a plan once and executes it per inference.
///
/// Implementations should be cheap to call through `&mut T` (a blanket impl is provided).
pub trait Device {
    /// The device's error type.
    type Error: Error;
    /// Device-side state for one prepared plan.
    type Program;

    /// What the device supports; the core refuses a plan that needs more, before `prepare`.
    fn capabilities(&self) -> Capabilities;

    /// Prepares `plan` for repeated execution (compile, allocate, upload, record).
    fn prepare(&mut self, plan: &dyn Plan) -> Result<Self::Program, Self::Error>;

    /// Runs the plan once. On entry the input tensors' bytes are in `arena` at their planned
    /// offsets; on success the output tensors' bytes are there.
    fn execute(
        &mut self,
        program: &mut Self::Program,
        plan: &dyn Plan,
        arena: &mut [u8],
    ) -> Result<(), Self::Error>;
}

impl<T: Device + ?Sized> Device for &mut T {
    type Error = T::Error;
    type Program = T::Program;

    fn capabilities(&self) -> Capabilities {
        T::capabilities(self)
    }

    fn prepare(&mut self, plan: &dyn Plan) -> Result<Self::Program, Self::Error> {
        T::prepare(self, plan)
    }

    fn execute(
        &mut self,
        program: &mut Self::Program,
        plan: &dyn Plan,
        arena: &mut [u8],
    ) -> Result<(), Self::Error> {
        T::execute(self, program, plan, arena)
    }
}
