//! Proof 2: loading and running a model with the digits MLP's kernels (`OPS`) on the CPU
//! device — `Model::load`, `Session::new`, `set_input`, `Session::run`, `output` — has no panic
//! path.
#![no_std]
#![no_main]

#[allow(dead_code)]
mod digits {
    include!(concat!(env!("OUT_DIR"), "/digits.rs"));
}

use core::mem::MaybeUninit;
use cortex_m_rt::entry;
use ferrite_cpu::CpuDevice;
use panic_free::Arena;

static mut ARENA: MaybeUninit<Arena> = MaybeUninit::uninit();

#[entry]
fn main() -> ! {
    // SAFETY: `main` runs once and is the only user of the static.
    let arena = unsafe { &mut (*(&raw mut ARENA).cast::<Arena>()).0 };
    loop {
        panic_free::load_and_run(CpuDevice::<{ digits::OPS }>::selected(), &mut arena[..]);
    }
}
