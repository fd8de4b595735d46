//! A session that owns what it borrows: the model's bytes, the loaded (verified) model and the
//! arena live on the heap beside the `ferrite_core::Session` that refers to them, so a Python
//! object can hold all four. The model is verified once, when the session is made.

use ferrite_core::{Model, Session};
use ferrite_cpu::CpuDevice;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::host::error::RunError;
use ferrite_tools::host::npy::NpyArray;
use ferrite_tools::host::qemu::Board;
use ferrite_tools::host::runner::{self, DeviceSpec};
use ferrite_vulkan::VulkanDevice;
use std::ptr::NonNull;

/// The session on the chosen device.
enum Running {
    Cpu(Session<'static, 'static, CpuDevice>),
    Vulkan(Box<Session<'static, 'static, VulkanDevice>>),
    /// An NVIDIA GPU: each run opens the device and its plan (`runner::run`), because cudarc's
    /// CUDA graphs are bound to the thread that made them and a Python object moves between
    /// threads.
    Cuda(usize),
    /// Ferrite's firmware on an emulated Cortex-M: each run starts QEMU (`runner::run`).
    Qemu(Board),
}

/// Runs `$body` with `$s` bound to whichever device's session this is.
macro_rules! on_session {
    ($running:expr, $s:ident => $body:expr, qemu => $qemu:expr) => {
        match $running {
            Running::Cpu($s) => $body,
            Running::Vulkan($s) => $body,
            Running::Cuda(_) | Running::Qemu(_) => $qemu,
        }
    };
}

/// A model loaded once and bound to a device with its own arena.
pub struct OwnedSession {
    // Field order is drop order: the session goes first, while what it borrows still lives.
    running: Running,
    /// The outputs of the last run on QEMU or CUDA (the others read theirs from the arena).
    replayed_outputs: Vec<NpyArray>,
    /// The loaded model (the session borrows it); freed in `Drop`, after `running`.
    model: NonNull<Model<'static>>,
    /// The arena, mutably borrowed by the session: never touched here.
    _arena: AlignedBytes,
    /// The file, borrowed by `model`: never touched mutably.
    bytes: AlignedBytes,
}

// SAFETY: every part is `Send` (checked below) except the `NonNull` to the heap model, which
// only this value owns and frees; moving the value to another thread moves that ownership.
unsafe impl Send for OwnedSession {}

const _: () = {
    const fn send<T: Send>() {}
    send::<Session<'static, 'static, CpuDevice>>();
    send::<Session<'static, 'static, VulkanDevice>>();
    send::<Model<'static>>();
    send::<AlignedBytes>();
};

impl OwnedSession {
    /// Loads (verifies) `bytes`, a packed model, and binds it to `device` with a new arena.
    pub fn open(bytes: AlignedBytes, device: DeviceSpec) -> Result<OwnedSession, RunError> {
        // SAFETY: the file's heap buffer neither moves nor changes while `bytes` lives (it is
        // only read, and moving an `AlignedBytes` moves its handle, not the buffer); `bytes` is
        // dropped last of all, after the model and the session that borrow it.
        let file: &'static [u8] = unsafe { &*(bytes.as_bytes() as *const [u8]) };
        let model = NonNull::from(Box::leak(Box::new(Model::load(file)?)));
        // From here on the model is freed by `OwnedSession`'s Drop, or below on failure.
        let free_model = |model: NonNull<Model<'static>>| {
            // SAFETY: `model` came from `Box::leak` above and nothing borrows it any more.
            drop(unsafe { Box::from_raw(model.as_ptr()) })
        };
        // SAFETY: the model lives until `Drop` frees it, after the session is gone.
        let model_ref: &'static Model<'static> = unsafe { model.as_ref() };
        let mut arena = runner::arena_for(model_ref);
        // SAFETY: as for the file: the arena's buffer stays put, and only the session uses it
        // (this value never reads or writes `_arena`), until the session is dropped.
        let arena_ref: &'static mut [u8] = unsafe { &mut *(arena.as_mut_bytes() as *mut [u8]) };
        let running = match device {
            DeviceSpec::Cpu { threads } => {
                Session::new(model_ref, CpuDevice::new().with_threads(threads), arena_ref)
                    .map(Running::Cpu)
                    .map_err(RunError::from)
            }
            DeviceSpec::Vulkan(i) => runner::open_vulkan(i).and_then(|d| {
                Session::new(model_ref, d, arena_ref)
                    .map(|s| Running::Vulkan(Box::new(s)))
                    .map_err(RunError::from)
            }),
            // Opened once here, so a missing driver or GPU is an error now, not at the first run.
            DeviceSpec::Cuda(i) => runner::open_cuda(i).map(|_| Running::Cuda(i)),
            DeviceSpec::Qemu(board) => match board.unavailable() {
                None => Ok(Running::Qemu(board)),
                Some(why) => Err(RunError::Device(format!(
                    "device '{}' is unavailable: {why}",
                    board.device_name()
                ))),
            },
        };
        match running {
            Ok(running) => Ok(OwnedSession {
                running,
                replayed_outputs: Vec::new(),
                model,
                _arena: arena,
                bytes,
            }),
            Err(e) => {
                free_model(model);
                Err(e)
            }
        }
    }

    /// The loaded model.
    pub fn model(&self) -> &Model<'static> {
        // SAFETY: freed only in Drop.
        unsafe { self.model.as_ref() }
    }

    /// The packed model's bytes (16-byte aligned).
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_bytes()
    }

    /// Runs once on `inputs` (each input's bytes, in input order, already checked against the
    /// model by [`inputs::match_feeds`]).
    pub fn run(&mut self, inputs: &[(usize, &[u8])]) -> Result<(), RunError> {
        let spec = match self.running {
            Running::Qemu(board) => Some(DeviceSpec::Qemu(board)),
            Running::Cuda(i) => Some(DeviceSpec::Cuda(i)),
            _ => None,
        };
        if let Some(spec) = spec {
            let model = self.model();
            let mut arrays = Vec::with_capacity(inputs.len());
            for i in 0..model.input_count() {
                let info = model
                    .input(i)
                    .ok_or_else(|| RunError::Input(format!("no input #{i}")))?;
                let bytes = inputs
                    .iter()
                    .find(|(k, _)| *k == i)
                    .map(|(_, b)| b.to_vec())
                    .ok_or_else(|| RunError::Input(format!("input '{}' is missing", info.name)))?;
                arrays.push(NpyArray {
                    dtype: info.desc.dtype,
                    shape: info.desc.shape.dims().to_vec(),
                    bytes,
                });
            }
            self.replayed_outputs = runner::run(self.bytes.as_bytes(), &arrays, spec)?;
            return Ok(());
        }
        on_session!(&mut self.running, s => {
            for (i, bytes) in inputs {
                s.set_input(*i, bytes)?;
            }
            s.run()?;
            Ok(())
        }, qemu => Ok(()))
    }

    /// Output `i`'s bytes after a run.
    pub fn output(&self, i: usize) -> Result<&[u8], RunError> {
        on_session!(&self.running, s => Ok(s.output(i)?), qemu => self
            .replayed_outputs
            .get(i)
            .map(|a| a.bytes.as_slice())
            .ok_or_else(|| RunError::Input("the session has not run yet".into())))
    }
}

impl Drop for OwnedSession {
    fn drop(&mut self) {
        // The session must go before the model it borrows: replace it by a borrow-free value.
        self.running = Running::Qemu(Board::M4);
        // SAFETY: `model` came from `Box::leak` in `open`; the session that borrowed it is gone,
        // and `self` is being dropped, so nothing reads it after this.
        drop(unsafe { Box::from_raw(self.model.as_ptr()) });
    }
}
