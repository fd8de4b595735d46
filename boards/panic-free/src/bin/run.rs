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
use ferrite_core::{Model, Session};
use ferrite_cpu::CpuDevice;
use panic_free as _;

#[repr(C, align(16))]
struct Arena([u8; 4096]);

static mut ARENA: MaybeUninit<Arena> = MaybeUninit::uninit();

#[entry]
fn main() -> ! {
    // SAFETY: `main` runs once and is the only user of the static.
    let arena = unsafe { &mut (*(&raw mut ARENA).cast::<Arena>()).0 };
    loop {
        let Ok(model) = Model::load(panic_free::model_bytes()) else {
            continue;
        };
        let device = CpuDevice::<{ digits::OPS }>::selected();
        let Ok(mut session) = Session::new(&model, device, &mut arena[..]) else {
            continue;
        };
        let input = [0u8; 256];
        let _ = session.set_input(0, &input);
        let _ = session.run();
        core::hint::black_box(session.output(0).ok().map(|o| o.len()));
    }
}
