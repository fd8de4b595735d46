//! Proof 1: `Model::load` — parsing and verifying an untrusted `.frt` — has no panic path.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use panic_free as _;

#[entry]
fn main() -> ! {
    loop {
        let result = ferrite_core::Model::load(panic_free::model_bytes());
        core::hint::black_box(result.map(|m| m.arena_bytes()).ok());
    }
}
