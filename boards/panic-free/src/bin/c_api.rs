//! Proof 3: the C API (`ferrite-c`, built for the digits MLP's ops with `FERRITE_OPS`, as a
//! firmware for that model builds it) has no panic path: every function, called with pointers,
//! lengths and indices the optimiser knows nothing about, from loading a model to reading an
//! output. It links ferrite-c's own panic handler (not this crate's), so the proof is that the
//! linked binary holds no panic machinery at all (`scripts/panic-free.sh` checks its symbols).
#![no_std]
#![no_main]

use core::mem::MaybeUninit;
use core::ptr::{null, null_mut, read_volatile};
use cortex_m_rt::entry;
use ferrite_c::*;

/// Values a loader the compiler cannot see fills in: pointers, lengths, indices.
static mut OPAQUE: [usize; 16] = [0; 16];

/// The `k`-th opaque value.
fn opaque(k: usize) -> usize {
    // SAFETY: a plain read of a static the optimiser must not assume anything about.
    unsafe { read_volatile((&raw const OPAQUE).cast::<usize>().add(k % 16)) }
}

#[entry]
fn main() -> ! {
    let mut model = MaybeUninit::<ferrite_model>::zeroed();
    let mut session = MaybeUninit::<ferrite_session>::zeroed();
    let mut info = MaybeUninit::<ferrite_tensor_info>::zeroed();
    let mut out: *const u8 = null();
    let mut out_len = 0usize;
    loop {
        // Each call gets either the real handle or an arbitrary pointer, as C may pass.
        let m = if opaque(0) == 0 {
            model.as_mut_ptr()
        } else {
            opaque(1) as *mut ferrite_model
        };
        let s = if opaque(2) == 0 {
            session.as_mut_ptr()
        } else {
            opaque(3) as *mut ferrite_session
        };
        // SAFETY: the proof is about the code's paths, not a run: it only links.
        let statuses = unsafe {
            [
                ferrite_model_load(m, opaque(4) as *const u8, opaque(5)),
                ferrite_model_input_info(m, opaque(6), info.as_mut_ptr()),
                ferrite_model_output_info(m, opaque(7), info.as_mut_ptr()),
                ferrite_session_new(s, m, opaque(8) as *mut u8, opaque(9)),
                ferrite_session_set_input(s, opaque(10), opaque(11) as *const u8, opaque(12)),
                ferrite_session_run(s),
                ferrite_session_output(s, opaque(13), &mut out, &mut out_len),
                ferrite_session_read_output(s, opaque(14), opaque(15) as *mut u8, opaque(5)),
                ferrite_session_output(s, opaque(13), null_mut(), null_mut()),
            ]
        };
        // SAFETY: as above.
        let sizes = unsafe {
            [
                ferrite_model_arena_bytes(m),
                ferrite_arena_alignment(),
                ferrite_model_input_count(m),
                ferrite_model_output_count(m),
            ]
        };
        let message = ferrite_status_message(opaque(0) as i32);
        core::hint::black_box((statuses, sizes, message, out, out_len));
    }
}
