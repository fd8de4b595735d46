//! Not a proof yet: `run` with every CPU kernel linked (`CpuDevice::new()`). Built only with
//! feature `find`, so `scripts/panic-free.sh --find` can count the panic paths that remain.
#![no_std]
#![no_main]

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
        let Ok(mut session) = Session::new(&model, CpuDevice::new(), &mut arena[..]) else {
            continue;
        };
        let _ = session.set_input(0, &[0u8; 256]);
        let _ = session.run();
        core::hint::black_box(session.output(0).ok().map(|o| o.len()));
    }
}
