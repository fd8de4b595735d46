//! Ferrite firmware for QEMU's mps2-an386 (Cortex-M4F).
//!
//! The host (`ferrite run/bench --device qemu-m4`) writes `model.frt` and `input_<i>.bin` into a
//! directory and starts QEMU with `arg=ferrite,arg=DIR,arg=RUNS`. The firmware reads the model
//! into memory, verifies it (`Model::load`), runs it RUNS times on the Cortex-M device — calling
//! `ferrite_marker` just before and after each `Session::run`, so QEMU's instruction-count plugin
//! can report instructions per inference exactly — writes `output_<i>.bin`, and prints one
//! `ferrite:` line with the model's sizes and the measured stack depth. Any failure prints one
//! `error:` line on stderr and exits non-zero (semihosting). No heap.
#![no_std]
#![no_main]

mod host;
mod stack;

use core::fmt::{self, Write};
use core::mem::MaybeUninit;
use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hio};
use ferrite_core::{Model, Session};
use ferrite_cortex_m::{CortexMDevice, CpuError};
use host::{File, HostError};

/// Largest model file the firmware accepts (PSRAM, standing in for flash).
const MODEL_CAPACITY: usize = 8 << 20;
/// Largest arena (PSRAM).
const ARENA_CAPACITY: usize = (8 << 20) - 4096;

/// 16-byte aligned bytes, as the core requires for models and arenas.
#[repr(C, align(16))]
struct Aligned<const N: usize>([u8; N]);

#[link_section = ".psram.model"]
static mut MODEL: MaybeUninit<Aligned<MODEL_CAPACITY>> = MaybeUninit::uninit();
#[link_section = ".psram.arena"]
static mut ARENA: MaybeUninit<Aligned<ARENA_CAPACITY>> = MaybeUninit::uninit();

/// Called just before and just after each inference; the instruction-count plugin reports the
/// count at every call (its address comes from this ELF's symbol table).
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

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Name::CommandLine => f.write_str("the command line"),
            Name::Model => f.write_str("model.frt"),
            Name::Input(i) => write!(f, "input_{i}.bin"),
            Name::Output(i) => write!(f, "output_{i}.bin"),
        }
    }
}

/// The two large buffers.
#[derive(Clone, Copy)]
enum Region {
    ModelFile,
    Arena,
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Region::ModelFile => "model file",
            Region::Arena => "arena",
        })
    }
}

/// Why the firmware stopped.
enum Failure {
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
    Model(ferrite_core::FormatError),
    Session(ferrite_core::Error<CpuError>),
}

impl From<ferrite_core::Error<CpuError>> for Failure {
    fn from(e: ferrite_core::Error<CpuError>) -> Self {
        Failure::Session(e)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Host(e, name) => write!(f, "{}: {name}", e.0),
            Failure::Usage => f.write_str("usage: ferrite DIR RUNS (semihosting arguments)"),
            Failure::TooLarge {
                what,
                needed,
                available,
            } => write!(
                f,
                "the {what} needs {needed} bytes, this board has {available}"
            ),
            Failure::InputSize {
                index,
                expected,
                got,
            } => write!(
                f,
                "input #{index} has {got} bytes, the model expects {expected}"
            ),
            Failure::Model(e) => write!(f, "{e}"),
            Failure::Session(e) => write!(f, "{e}"),
        }
    }
}

/// Opens `dir/name` on the host.
fn open(dir: &str, name: Name, write: bool) -> Result<File, Failure> {
    let mut path = heapless::String::<256>::new();
    let _ = write!(path, "{dir}/{name}");
    File::open(&path, write).map_err(|e| Failure::Host(e, name))
}

/// `len` zeroed bytes of a static buffer, or `TooLarge`.
///
/// # Safety
/// Call at most once per buffer: the slice is the buffer's only reference for the program's life.
unsafe fn zeroed<const N: usize>(
    buffer: *mut MaybeUninit<Aligned<N>>,
    len: usize,
    what: Region,
) -> Result<&'static mut [u8], Failure> {
    if len > N {
        return Err(Failure::TooLarge {
            what,
            needed: len,
            available: N,
        });
    }
    // SAFETY: the caller takes each buffer once, so this is the only reference; the first `len`
    // bytes are initialised (zeroed) before the slice is formed.
    unsafe {
        let start = buffer.cast::<u8>();
        core::ptr::write_bytes(start, 0, len);
        Ok(core::slice::from_raw_parts_mut(start, len))
    }
}

fn run() -> Result<(), Failure> {
    let mut line = [0u8; 512];
    let args = host::command_line(&mut line).map_err(|e| Failure::Host(e, Name::CommandLine))?;
    let mut words = args.split_ascii_whitespace();
    let (Some(_), Some(dir), Some(runs)) = (words.next(), words.next(), words.next()) else {
        return Err(Failure::Usage);
    };
    let runs: u32 = runs.parse().map_err(|_| Failure::Usage)?;

    let host = |name| move |e| Failure::Host(e, name);
    let file = open(dir, Name::Model, false)?;
    let len = file.len().map_err(host(Name::Model))?;
    // SAFETY: `run` runs once and takes each static buffer once.
    let model_bytes = unsafe { zeroed(&raw mut MODEL, len, Region::ModelFile)? };
    file.read_exact(model_bytes).map_err(host(Name::Model))?;
    drop(file);
    let model = Model::load(model_bytes).map_err(Failure::Model)?;

    // SAFETY: as above.
    let arena = unsafe { zeroed(&raw mut ARENA, model.arena_bytes().max(16), Region::Arena)? };
    let device = CortexMDevice::new().with_max_arena(ARENA_CAPACITY);
    let mut session = Session::new(&model, device, arena)?;
    for _ in 0..runs.max(1) {
        for index in 0..model.input_count() {
            let name = Name::Input(index);
            let file = open(dir, name, false)?;
            let got = file.len().map_err(host(name))?;
            let slot = session.input_mut(index)?;
            if got != slot.len() {
                return Err(Failure::InputSize {
                    index,
                    expected: slot.len(),
                    got,
                });
            }
            file.read_exact(slot).map_err(host(name))?;
        }
        ferrite_marker();
        let result = session.run();
        ferrite_marker();
        result?;
    }
    for index in 0..model.output_count() {
        let name = Name::Output(index);
        let file = open(dir, name, true)?;
        file.write_all(session.output(index)?).map_err(host(name))?;
    }
    if let Ok(mut out) = hio::hstdout() {
        let _ = writeln!(
            out,
            "ferrite: ok steps={} arena_bytes={} weights_bytes={} file_bytes={} stack_bytes={} kernels={}",
            ferrite_hal::Plan::len(&model),
            model.arena_bytes(),
            model.weights_bytes(),
            model.file_bytes(),
            stack::max_depth(),
            CortexMDevice::<ferrite_cortex_m::NoProfiler>::kernel_set(),
        );
    }
    Ok(())
}

#[entry]
fn main() -> ! {
    stack::paint();
    let status = match run() {
        Ok(()) => debug::EXIT_SUCCESS,
        Err(failure) => {
            if let Ok(mut err) = hio::hstderr() {
                let _ = writeln!(err, "error: {failure}");
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
    if let Ok(mut err) = hio::hstderr() {
        let _ = writeln!(err, "error: firmware panic: {info}");
    }
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
