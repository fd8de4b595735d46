//! Not a proof yet: `run` with every CPU kernel linked (`CpuDevice::new()`). Built only with
//! feature `find`, so `scripts/panic-free.sh --find` can count the panic paths that remain.
#![no_std]
#![no_main]

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
        panic_free::load_and_run(CpuDevice::new(), &mut arena[..]);
    }
}
