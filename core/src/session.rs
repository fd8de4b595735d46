//! A session: one model, one device, one caller-provided arena.
//!
//! Creation checks the arena (size, alignment) and the device's capabilities against every step,
//! then lets the device prepare the plan once. Each inference writes every input
//! ([`Session::set_input`] or [`Session::input_mut`]), calls [`Session::run`], and reads outputs.
//! Inputs must be written before *every* run: the planner reuses an input's bytes once the input
//! is dead, and `run` refuses to start on stale inputs rather than compute garbage.

use crate::error::{Error, MissingOps};
use crate::format::ARENA_ALIGN;
use crate::model::{Model, TensorInfo};
use ferrite_hal::{DType, Device, Location, OpSet, Plan, Selection, ALL_OPS};

/// A model bound to a device and an arena. `OPS` is the model's op selection
/// ([`Model::load_selected`]; every kind by default).
pub struct Session<'m, 'a, D: Device, const OPS: Selection = ALL_OPS> {
    model: &'m Model<'m, OPS>,
    device: D,
    program: D::Program,
    arena: &'a mut [u8],
    inputs_written: u64,
    has_run: bool,
}

impl<'m, 'a, D: Device, const OPS: Selection> Session<'m, 'a, D, OPS> {
    /// Binds `model` to `device` with `arena` (at least [`Model::arena_bytes`] long, 16-byte
    /// aligned, e.g. an [`crate::Arena`]), and prepares the plan on the device.
    // Out of line: run once per load or inference, so inlining only copies it (flash).
    #[inline(never)]
    pub fn new(
        model: &'m Model<'m, OPS>,
        mut device: D,
        arena: &'a mut [u8],
    ) -> Result<Self, Error<D::Error>> {
        let needed = model.arena_bytes();
        let caps = device.capabilities();
        if needed > caps.max_arena_bytes {
            return Err(Error::ArenaTooLarge {
                needed,
                max: caps.max_arena_bytes,
            });
        }
        if arena.len() < needed {
            return Err(Error::ArenaTooSmall {
                needed,
                got: arena.len(),
            });
        }
        if !(arena.as_ptr() as usize).is_multiple_of(ARENA_ALIGN) {
            return Err(Error::ArenaMisaligned { align: ARENA_ALIGN });
        }
        let mut missing = OpSet::empty();
        for i in 0..model.len() {
            let Some(step) = model.step(i) else { continue };
            let dtype = step.kernel_dtype();
            let kind = step.op.kind();
            if !caps.ops.contains(kind, dtype) {
                missing = missing.with(kind, &[dtype]);
            }
        }
        if missing != OpSet::empty() {
            return Err(Error::Unsupported(MissingOps(missing)));
        }
        let program = device.prepare(model).map_err(Error::Device)?;
        Ok(Session {
            model,
            device,
            program,
            arena,
            inputs_written: 0,
            has_run: false,
        })
    }

    /// The model this session runs.
    pub fn model(&self) -> &Model<'m, OPS> {
        self.model
    }

    /// The device (e.g. to read its profiling counters).
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The device, mutably (e.g. to change a GPU's fence timeout between runs).
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// The device's prepared program (e.g. a GPU's statistics about the recorded plan).
    pub fn program(&self) -> &D::Program {
        &self.program
    }

    /// Graph input `index`.
    pub fn input_info(&self, index: usize) -> Result<TensorInfo<'m>, Error<D::Error>> {
        self.model.input(index).ok_or(Error::NoSuchTensor {
            index,
            count: self.model.input_count(),
        })
    }

    /// Graph output `index`.
    pub fn output_info(&self, index: usize) -> Result<TensorInfo<'m>, Error<D::Error>> {
        self.model.output(index).ok_or(Error::NoSuchTensor {
            index,
            count: self.model.output_count(),
        })
    }

    fn arena_span(&self, info: &TensorInfo<'_>) -> (usize, usize) {
        match info.desc.location {
            Location::Arena(o) => (o, o + info.desc.bytes),
            // Verified at load: graph inputs and outputs live in the arena.
            Location::Weights(_) => (0, 0),
        }
    }

    /// The bytes of input `index` to fill in place; marks the input as written.
    pub fn input_mut(&mut self, index: usize) -> Result<&mut [u8], Error<D::Error>> {
        let info = self.input_info(index)?;
        let (start, end) = self.arena_span(&info);
        self.inputs_written |= 1u64 << index;
        self.has_run = false;
        self.arena.get_mut(start..end).ok_or(Error::NotRun)
    }

    /// Copies `bytes` (little-endian elements) into input `index`.
    pub fn set_input(&mut self, index: usize, bytes: &[u8]) -> Result<(), Error<D::Error>> {
        let expected = self.input_info(index)?.desc.bytes;
        let slot = self.input_mut(index)?;
        if bytes.len() != expected || slot.len() != bytes.len() {
            return Err(Error::InputSize {
                index,
                expected,
                got: bytes.len(),
            });
        }
        slot.copy_from_slice(bytes);
        Ok(())
    }

    /// Copies `values` into the `float32` input `index`.
    pub fn set_input_f32(&mut self, index: usize, values: &[f32]) -> Result<(), Error<D::Error>> {
        let info = self.input_info(index)?;
        if info.desc.dtype != DType::F32 {
            return Err(Error::DTypeMismatch {
                expected: info.desc.dtype,
                got: DType::F32,
            });
        }
        if values.len() * 4 != info.desc.bytes {
            return Err(Error::InputSize {
                index,
                expected: info.desc.bytes,
                got: values.len() * 4,
            });
        }
        let dst = self.input_mut(index)?;
        for (chunk, v) in dst.chunks_exact_mut(4).zip(values) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }

    /// Runs the plan once. Every input must have been written since the previous run.
    // Out of line: run once per load or inference, so inlining only copies it (flash).
    #[inline(never)]
    pub fn run(&mut self) -> Result<(), Error<D::Error>> {
        for index in 0..self.model.input_count() {
            if self.inputs_written & (1u64 << index) == 0 {
                return Err(Error::InputNotSet { index });
            }
        }
        self.has_run = false;
        self.inputs_written = 0;
        self.device
            .execute(&mut self.program, self.model, self.arena)
            .map_err(Error::Device)?;
        self.has_run = true;
        Ok(())
    }

    /// The bytes of output `index` after a successful run.
    pub fn output(&self, index: usize) -> Result<&[u8], Error<D::Error>> {
        if !self.has_run {
            return Err(Error::NotRun);
        }
        let info = self.output_info(index)?;
        let (start, end) = self.arena_span(&info);
        self.arena.get(start..end).ok_or(Error::NotRun)
    }

    /// The `float32` output `index`, as a slice (the arena is 16-byte aligned, so no copy).
    pub fn output_f32(&self, index: usize) -> Result<&[f32], Error<D::Error>> {
        let dtype = self.output_info(index)?.desc.dtype;
        if dtype != DType::F32 {
            return Err(Error::DTypeMismatch {
                expected: dtype,
                got: DType::F32,
            });
        }
        let bytes = self.output(index)?;
        f32_slice(bytes).ok_or(Error::NotRun)
    }
}

/// Views little-endian bytes as `f32`s when aligned (always true for arena tensors).
fn f32_slice(bytes: &[u8]) -> Option<&[f32]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    crate::cast::f32s(bytes)
}
