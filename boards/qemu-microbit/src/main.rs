//! Ferrite firmware for QEMU's microbit (nRF51822, Cortex-M0 without FPU, 16 KiB RAM), the
//! `qemu-m0` device. The digits model is embedded in flash at build time (the module
//! `ferrite pack --emit rust` writes) and the arena is a static sized by `ARENA_BYTES`; the host's
//! `model.frt` must be the same model. The protocol is `ferrite-qemu-firmware`'s.
#![no_std]
#![no_main]

#[allow(dead_code)] // INPUTS/OUTPUTS describe the model for applications; the protocol reads files.
mod digits {
    include!(concat!(env!("OUT_DIR"), "/digits.rs"));
}

use core::mem::MaybeUninit;
use cortex_m_rt::entry;
use ferrite_qemu_firmware::{run, Aligned, Buffer, ModelSource};

static mut ARENA: MaybeUninit<Aligned<{ digits::ARENA_BYTES }>> = MaybeUninit::uninit();

#[entry]
fn main() -> ! {
    // SAFETY: `main` runs once; the static is used only through this buffer.
    let arena = unsafe { Buffer::from_static(&raw mut ARENA) };
    // Only the kernels the digits model uses are linked (its `OPS`).
    run::<{ digits::OPS }>(ModelSource::Embedded(digits::MODEL), arena)
}
