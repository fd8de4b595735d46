//! Ferrite firmware for QEMU's mps2-an386 (Cortex-M4F), the `qemu-m4` device: the model is read
//! from the host into PSRAM (standing in for flash), the arena lives in PSRAM too. The protocol
//! is `ferrite-qemu-firmware`'s.
#![no_std]
#![no_main]

use core::mem::MaybeUninit;
use cortex_m_rt::entry;
use ferrite_qemu_firmware::{run, Aligned, Buffer, ModelSource};

/// Largest model file this board accepts.
const MODEL_CAPACITY: usize = 8 << 20;
/// Largest arena.
const ARENA_CAPACITY: usize = (8 << 20) - 4096;

#[link_section = ".psram.model"]
static mut MODEL: MaybeUninit<Aligned<MODEL_CAPACITY>> = MaybeUninit::uninit();
#[link_section = ".psram.arena"]
static mut ARENA: MaybeUninit<Aligned<ARENA_CAPACITY>> = MaybeUninit::uninit();

#[entry]
fn main() -> ! {
    // SAFETY: `main` runs once; the statics are used only through these buffers.
    let (model, arena) = unsafe {
        (
            Buffer::from_static(&raw mut MODEL),
            Buffer::from_static(&raw mut ARENA),
        )
    };
    run(ModelSource::Host(model), arena)
}
