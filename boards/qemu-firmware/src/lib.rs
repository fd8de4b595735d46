//! The firmware side of Ferrite's QEMU runner, shared by every emulated board.
//!
//! The host (`ferrite run/bench --device qemu-m0|qemu-m4|qemu-m7|qemu-m33`) writes `model.frt` and
//! `input_<i>.bin` into a directory and starts QEMU with `arg=ferrite,arg=DIR,arg=RUNS`. The
//! firmware gets the model — read over semihosting into a RAM buffer, or embedded in flash on a
//! board too small to hold it in RAM (then the host's `model.frt` must be byte-identical) —
//! verifies it (`Model::load`), runs it RUNS times on the Cortex-M device, calling
//! [`ferrite_marker`] just before and after each `Session::run` so QEMU's instruction-count
//! plugin reports instructions per inference exactly, writes `output_<i>.bin`, and prints one
//! `ferrite: ok ...` line with the model's sizes and the measured stack depth. With a fourth
//! argument `profile`, the marker is also called around every step (instructions per op). Any failure
//! prints one `error:` line on stderr and exits non-zero. No heap.
#![no_std]

mod host;
mod stack;
#[cfg(feature = "vector-table")]
mod vectors;

use core::mem::MaybeUninit;
use cortex_m_semihosting::{debug, hio};
use ferrite_core::{Model, Session};
use ferrite_cortex_m::{CortexMDevice, CpuError};
use ferrite_hal::message::pieces;
use ferrite_hal::Device;
use ferrite_hal::Piece::{Text, Unsigned};
/// Every op kind: the kernel selection of firmware that runs models sent by the host.
pub use ferrite_hal::ALL_OPS;
use ferrite_hal::{Line, Message, Piece};
use host::{File, HostError};

/// 16-byte aligned bytes, as the core requires for models and arenas.
#[repr(C, align(16))]
pub struct Aligned<const N: usize>(pub [u8; N]);

/// A board's static buffer (model or arena), handed to [`run`] once.
pub struct Buffer {
    start: *mut u8,
    capacity: usize,
}

impl Buffer {
    /// The buffer behind a static.
    ///
    /// # Safety
    /// Call once per static, and use the static through nothing else afterwards.
    pub unsafe fn from_static<const N: usize>(buffer: *mut MaybeUninit<Aligned<N>>) -> Buffer {
        Buffer {
            start: buffer.cast(),
            capacity: N,
        }
    }

    /// The first `len` bytes, zeroed, or `TooLarge`.
    fn take(self, len: usize, what: Region) -> Result<&'static mut [u8], Failure> {
        if len > self.capacity {
            return Err(Failure(Reason::TooLarge {
                what,
                needed: len,
                available: self.capacity,
            }));
        }
        // SAFETY: `from_static`'s contract makes this the only use of the buffer; the first
        // `len` bytes are initialised (zeroed) before the slice is formed.
        unsafe {
            core::ptr::write_bytes(self.start, 0, len);
            Ok(core::slice::from_raw_parts_mut(self.start, len))
        }
    }
}

/// Where the model comes from.
pub enum ModelSource {
    /// Read `model.frt` from the host into this buffer.
    Host(Buffer),
    /// Built into the firmware (in flash); the host's `model.frt` must be the same bytes.
    Embedded(&'static [u8]),
}

/// Called just before and just after each inference; the instruction-count plugin reports the
/// count at every call (its address comes from the firmware's symbol table).
#[no_mangle]
#[inline(never)]
pub extern "C" fn ferrite_marker() {
    cortex_m::asm::nop();
}

/// The files of the protocol, for messages.
#[derive(Clone, Copy)]
enum Name {
    CommandLine,
    Model,
    Input(usize),
    Output(usize),
}

impl Message for Name {
    fn write_message(&self, out: &mut dyn FnMut(Piece<'_>)) {
        let (text, index) = match *self {
            Name::CommandLine => ("the command line", None),
            Name::Model => ("model.frt", None),
            Name::Input(i) => ("input_", Some(i)),
            Name::Output(i) => ("output_", Some(i)),
        };
        out(Text(text));
        if let Some(i) = index {
            pieces(out, &[Unsigned(i as u64), Text(".bin")]);
        }
    }
}

/// The two large buffers.
#[derive(Clone, Copy)]
enum Region {
    ModelFile,
    Arena,
}

impl Region {
    fn name(self) -> &'static str {
        match self {
            Region::ModelFile => "model file",
            Region::Arena => "arena",
        }
    }
}

/// Why the firmware stopped: printed as one `error:` line by [`exit`].
pub struct Failure(Reason);

/// The reasons behind a [`Failure`].
enum Reason {
    Host(HostError, Name),
    Usage,
    TooLarge {
        what: Region,
        needed: usize,
        available: usize,
    },
    InputSize {
        index: usize,
        expected: usize,
        got: usize,
    },
    OtherModel,
    Model(ferrite_core::FormatError),
    Session(ferrite_core::Error<CpuError>),
}

impl From<ferrite_core::FormatError> for Failure {
    fn from(e: ferrite_core::FormatError) -> Self {
        Failure(Reason::Model(e))
    }
}

impl From<ferrite_core::Error<CpuError>> for Failure {
    fn from(e: ferrite_core::Error<CpuError>) -> Self {
        Failure(Reason::Session(e))
    }
}

impl Failure {
    /// The message without numbers or context: all a firmware built without the `messages`
    /// feature prints (its flash holds a few short strings instead of every message).
    fn short(&self) -> &'static str {
        match &self.0 {
            Reason::Host(e, _) => e.0,
            Reason::Usage => "usage: ferrite DIR RUNS",
            Reason::TooLarge { .. } => "the model or its arena is too large for this board",
            Reason::InputSize { .. } => "an input's size differs from the model's",
            Reason::OtherModel => "this firmware embeds a different model than model.frt",
            Reason::Model(e) => e.kind.describe(),
            Reason::Session(e) => ferrite_hal::Error::kind(e).describe(),
        }
    }
}

impl Message for Failure {
    fn write_message(&self, out: &mut dyn FnMut(Piece<'_>)) {
        if !cfg!(feature = "messages") {
            if let Reason::Model(_) = self.0 {
                out(Text("invalid model: "));
            }
            return out(Text(self.short()));
        }
        match &self.0 {
            Reason::Host(e, name) => {
                pieces(out, &[Text(e.0), Text(": ")]);
                name.write_message(out);
            }
            Reason::Usage => out(Text("usage: ferrite DIR RUNS (semihosting arguments)")),
            Reason::TooLarge {
                what,
                needed,
                available,
            } => {
                pieces(
                    out,
                    &[
                        Text("the "),
                        Text(what.name()),
                        Text(" needs "),
                        Piece::size(*needed),
                        Text(" bytes, this board has "),
                        Piece::size(*available),
                    ],
                );
            }
            Reason::InputSize {
                index,
                expected,
                got,
            } => {
                pieces(
                    out,
                    &[
                        Text("input #"),
                        Piece::size(*index),
                        Text(" has "),
                        Piece::size(*got),
                        Text(" bytes, the model expects "),
                        Piece::size(*expected),
                    ],
                );
            }
            Reason::OtherModel => out(Text(
                "this firmware embeds a different model than model.frt (rebuild it for this model)",
            )),
            Reason::Model(e) => e.write_message(out),
            Reason::Session(e) => e.write_message(out),
        }
    }
}

/// Opens `dir/name` on the host.
fn open(dir: &[u8], name: Name, write: bool) -> Result<File, Failure> {
    let mut path = Line::<256>::new();
    path.bytes(dir).text("/").message(&name);
    File::open(path.as_bytes(), write).map_err(|e| Failure(Reason::Host(e, name)))
}

fn host(name: Name) -> impl Fn(HostError) -> Failure {
    move |e| Failure(Reason::Host(e, name))
}

/// The host runner's request (its directory of files and how many inferences to run) and
/// what the firmware measured while serving it.
pub struct Host {
    dir: Line<256>,
    runs: u32,
    profile: bool,
    firmware_stack: usize,
    inference_stack: usize,
}

/// Splits `line` at ASCII whitespace into `words` (the first `words.len()` of them); returns
/// how many it found.
fn split_words<'a>(line: &'a [u8], words: &mut [&'a [u8]]) -> usize {
    let mut count = 0;
    let mut start = None;
    for (i, b) in line.iter().chain(b" ").enumerate() {
        match (b.is_ascii_whitespace(), start) {
            (true, Some(s)) => {
                if let (Some(slot), Some(word)) = (words.get_mut(count), line.get(s..i)) {
                    *slot = word;
                }
                count += 1;
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    count
}

/// `digits` as a decimal number: `None` if empty, not all digits, or above `u32::MAX`.
fn decimal(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u32, |n, &d| {
        let digit = d.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u32::from(digit))
    })
}

impl Host {
    /// Paints the stack (to measure its depth later) and reads the request from the command
    /// line: `ferrite DIR RUNS [profile]`.
    pub fn connect() -> Result<Host, Failure> {
        stack::paint();
        let mut line = [0u8; 256];
        let args = host::command_line(&mut line).map_err(host(Name::CommandLine))?;
        // Bytes and one plain loop, not `str` iterators: those cost a firmware a kilobyte.
        let mut words: [&[u8]; 4] = [&[]; 4];
        if split_words(args, &mut words) < 3 {
            return Err(Failure(Reason::Usage));
        }
        let [_, dir, runs, profile] = words;
        let mut host = Host {
            dir: Line::new(),
            runs: decimal(runs).ok_or(Failure(Reason::Usage))?,
            profile: profile == b"profile",
            firmware_stack: 0,
            inference_stack: 0,
        };
        host.dir.bytes(dir);
        Ok(host)
    }

    /// How many inferences the host asked for (at least one).
    pub fn runs(&self) -> u32 {
        self.runs.max(1)
    }

    /// The model's bytes: read from the host into the buffer, or the embedded ones after
    /// checking that the host's `model.frt` is identical (in chunks: the board may have less
    /// RAM than the model).
    pub fn model(&self, source: ModelSource) -> Result<&'static [u8], Failure> {
        let file = open(self.dir.as_bytes(), Name::Model, false)?;
        let len = file.len().map_err(host(Name::Model))?;
        match source {
            ModelSource::Host(buffer) => {
                let bytes = buffer.take(len, Region::ModelFile)?;
                file.read_exact(bytes).map_err(host(Name::Model))?;
                Ok(bytes)
            }
            ModelSource::Embedded(bytes) => {
                if len != bytes.len() {
                    return Err(Failure(Reason::OtherModel));
                }
                let mut chunk = [0u8; 256];
                for expected in bytes.chunks(chunk.len()) {
                    let got = chunk
                        .get_mut(..expected.len())
                        .ok_or(Failure(Reason::OtherModel))?;
                    file.read_exact(got).map_err(host(Name::Model))?;
                    if got != expected {
                        return Err(Failure(Reason::OtherModel));
                    }
                }
                Ok(bytes)
            }
        }
    }

    /// Writes every input of `session` from the host's `input_<i>.bin`.
    pub fn read_inputs<D: Device<Error = CpuError>, const OPS: ferrite_hal::Selection>(
        &self,
        session: &mut Session<'_, '_, D, OPS>,
    ) -> Result<(), Failure> {
        for index in 0..session.model().input_count() {
            let name = Name::Input(index);
            let file = open(self.dir.as_bytes(), name, false)?;
            let got = file.len().map_err(host(name))?;
            let slot = session.input_mut(index)?;
            if got != slot.len() {
                return Err(Failure(Reason::InputSize {
                    index,
                    expected: slot.len(),
                    got,
                }));
            }
            file.read_exact(slot).map_err(host(name))?;
        }
        Ok(())
    }

    /// Runs one inference (`session.run()` in `infer`) between two [`ferrite_marker`] calls,
    /// so the plugin counts its instructions, and measures the stack it used.
    pub fn measure<E>(&mut self, infer: impl FnOnce() -> Result<(), E>) -> Result<(), Failure>
    where
        Failure: From<E>,
    {
        // The deepest stack so far (boot, file I/O, verification); the inference is then
        // measured on a fresh paint.
        self.firmware_stack = self.firmware_stack.max(stack::max_depth());
        stack::paint();
        let base = stack::current_depth();
        ferrite_marker();
        let result = infer();
        ferrite_marker();
        // What the inference itself needs below its caller's frame.
        self.inference_stack = self
            .inference_stack
            .max(stack::max_depth().saturating_sub(base));
        self.firmware_stack = self.firmware_stack.max(stack::max_depth());
        Ok(result?)
    }

    /// Writes every output of `session` to the host's `output_<i>.bin` and reports the model's
    /// sizes and the measured stack on one `ferrite: ok` line.
    pub fn finish<D: Device<Error = CpuError>, const OPS: ferrite_hal::Selection>(
        &self,
        session: &Session<'_, '_, D, OPS>,
    ) -> Result<(), Failure> {
        let model = session.model();
        for index in 0..model.output_count() {
            let name = Name::Output(index);
            let file = open(self.dir.as_bytes(), name, true)?;
            file.write_all(session.output(index)?).map_err(host(name))?;
        }
        let mut line = Line::<256>::new();
        line.text("ferrite: ok steps=")
            .unsigned(ferrite_hal::Plan::len(model) as u64)
            .text(" arena_bytes=")
            .unsigned(model.arena_bytes() as u64)
            .text(" weights_bytes=")
            .unsigned(model.weights_bytes() as u64)
            .text(" file_bytes=")
            .unsigned(model.file_bytes() as u64)
            .text(" stack_bytes=")
            .unsigned(self.firmware_stack as u64)
            .text(" inference_stack_bytes=")
            .unsigned(self.inference_stack as u64)
            .text(" kernels=")
            .text(CortexMDevice::<ferrite_cortex_m::NoProfiler>::kernel_set())
            .text("\n");
        if let Ok(mut out) = hio::hstdout() {
            let _ = out.write_all(line.as_bytes());
        }
        Ok(())
    }
}

fn serve<const OPS: ferrite_hal::Selection>(
    source: ModelSource,
    arena: Buffer,
) -> Result<(), Failure> {
    let mut host = Host::connect()?;
    let model = Model::<OPS>::load_selected(host.model(source)?)?;
    let capacity = arena.capacity;
    let arena = arena.take(model.arena_bytes().max(16), Region::Arena)?;
    // One instantiation, profiled or not: a second copy of the inference path (session,
    // dispatch, host calls) for an unprofiled run without the flag's test cost 1.7 KB of flash.
    let markers = StepMarkers {
        enabled: host.profile,
    };
    let device = CortexMDevice::<_, OPS>::with_profiler(markers).with_max_arena(capacity);
    infer(&mut host, &model, device, arena)
}

/// Calls [`ferrite_marker`] before and after every step when the host asked for a profile, so
/// the plugin reports instructions per step (`ferrite bench --device qemu-* --profile`);
/// otherwise each step pays two tests of the flag (a few instructions).
struct StepMarkers {
    enabled: bool,
}

impl ferrite_cortex_m::Profiler for StepMarkers {
    #[inline(always)]
    fn start(&mut self, _: usize) {
        if self.enabled {
            ferrite_marker();
        }
    }
    #[inline(always)]
    fn end(&mut self, _: usize) {
        if self.enabled {
            ferrite_marker();
        }
    }
}

/// Runs the model as many times as the host asked on `device`, then writes the outputs and
/// reports.
fn infer<P: ferrite_cortex_m::Profiler, const OPS: ferrite_hal::Selection>(
    host: &mut Host,
    model: &Model<'_, OPS>,
    device: CortexMDevice<P, OPS>,
    arena: &'static mut [u8],
) -> Result<(), Failure> {
    let mut session = Session::new(model, device, arena)?;
    for _ in 0..host.runs() {
        host.read_inputs(&mut session)?;
        host.measure(|| session.run())?;
    }
    host.finish(&session)
}

/// The `main` of a board that reads any model from the host: two static buffers (model file and
/// arena, `MaybeUninit` so nothing zeroes or loads them at boot) in `$section` (a `NOLOAD` region
/// of the board's `memory.x`), then [`run`].
#[macro_export]
macro_rules! host_model_firmware {
    (section: $section:literal, model: $model:expr, arena: $arena:expr) => {
        #[link_section = concat!($section, ".model")]
        static mut MODEL: core::mem::MaybeUninit<$crate::Aligned<{ $model }>> =
            core::mem::MaybeUninit::uninit();
        #[link_section = concat!($section, ".arena")]
        static mut ARENA: core::mem::MaybeUninit<$crate::Aligned<{ $arena }>> =
            core::mem::MaybeUninit::uninit();

        #[cortex_m_rt::entry]
        fn main() -> ! {
            // SAFETY: `main` runs once; the statics are used only through these buffers.
            let (model, arena) = unsafe {
                (
                    $crate::Buffer::from_static(&raw mut MODEL),
                    $crate::Buffer::from_static(&raw mut ARENA),
                )
            };
            $crate::run::<{ $crate::ALL_OPS }>($crate::ModelSource::Host(model), arena)
        }
    };
}

/// Serves one request from the host runner and exits QEMU (non-zero on failure).
///
/// `OPS` selects the op kinds whose kernels the firmware links (`ferrite_hal::ALL_OPS` for a
/// firmware that runs models sent by the host; a model's own `OPS` when it is embedded).
pub fn run<const OPS: ferrite_hal::Selection>(model: ModelSource, arena: Buffer) -> ! {
    exit(serve::<OPS>(model, arena))
}

/// Exits QEMU: success, or one `error:` line on the host's stderr and a failure status.
pub fn exit(result: Result<(), Failure>) -> ! {
    let status = match result {
        Ok(()) => debug::EXIT_SUCCESS,
        Err(failure) => {
            let mut line = Line::<512>::new();
            line.text("error: ").message(&failure).text("\n");
            if let Ok(mut err) = hio::hstderr() {
                let _ = err.write_all(line.as_bytes());
            }
            debug::EXIT_FAILURE
        }
    };
    debug::exit(status);
    loop {
        cortex_m::asm::wfi();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    // The location only: the message would need `core::fmt`.
    let mut line = Line::<256>::new();
    line.text("error: firmware panic");
    if let Some(at) = info.location() {
        line.text(" at ")
            .text(at.file())
            .text(":")
            .unsigned(at.line().into());
    }
    line.text("\n");
    if let Ok(mut err) = hio::hstderr() {
        let _ = err.write_all(line.as_bytes());
    }
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
