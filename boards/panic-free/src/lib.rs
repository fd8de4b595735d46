//! Link-time proofs that code has no panic path (`scripts/panic-free.sh`, run by CI): each
//! binary's panic handler calls `ferrite_panic_path_reached`, a symbol defined nowhere. After
//! optimisation (fat LTO, `panic = "abort"`) a binary links only if the optimiser removed every
//! call to the panic handler, i.e. only if no input can reach a panic. The model bytes come from
//! memory the compiler knows nothing about, so nothing is folded away on the model's behalf.
#![no_std]

use core::panic::PanicInfo;

/// The model's bytes: a region of RAM filled by a loader the compiler cannot see.
pub fn model_bytes() -> &'static [u8] {
    extern "C" {
        static mut FERRITE_MODEL: [u8; 65536];
        static FERRITE_MODEL_LEN: usize;
    }
    // SAFETY: the proof never runs; the symbols (defined in `memory.x`)
    // stand for memory whose contents the optimiser must not assume.
    unsafe {
        let len = core::ptr::read_volatile(&raw const FERRITE_MODEL_LEN).min(65536);
        core::slice::from_raw_parts((&raw const FERRITE_MODEL).cast::<u8>(), len)
    }
}

/// Loads the model from [`model_bytes`], runs it once on `device` in `arena` and keeps the
/// first output's length: every step a firmware takes, each of which must stay panic-free.
pub fn load_and_run<D: ferrite_hal::Device>(device: D, arena: &mut [u8]) {
    let Ok(model) = ferrite_core::Model::load(model_bytes()) else {
        return;
    };
    let Ok(mut session) = ferrite_core::Session::new(&model, device, arena) else {
        return;
    };
    let _ = session.set_input(0, &[0u8; 256]);
    let _ = session.run();
    core::hint::black_box(session.output(0).ok().map(|o| o.len()));
}

/// A 16-byte aligned arena for the proofs.
#[repr(C, align(16))]
pub struct Arena(pub [u8; 4096]);

#[panic_handler]
fn panic(_: &PanicInfo) -> ! {
    extern "C" {
        /// Defined nowhere: a reachable panic fails the link with this name.
        fn ferrite_panic_path_reached() -> !;
    }
    // SAFETY: never defined, so never called in a binary that links.
    unsafe { ferrite_panic_path_reached() }
}

/// With feature `find`, the missing symbol is defined, so the binary links and
/// `scripts/panic-free.sh --find` can list the places that still reach the panic handler.
#[cfg(feature = "find")]
#[no_mangle]
pub extern "C" fn ferrite_panic_path_reached() -> ! {
    loop {
        core::hint::spin_loop();
    }
}
