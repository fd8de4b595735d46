//! Ferrite on an nRF52840-DK: classifies a fixed digit image forever, driving P0.03 high around
//! each inference (as MLPerf Tiny's timing harness expects from a device under test) and logging
//! the prediction with the cycle count of every step (DWT) over defmt/RTT.
//!
//! `cargo run --release` (in this directory) flashes it with probe-rs. The model comes from
//! `build.rs`, which does what `ferrite pack --emit rust` does.
//!
//! Why this board: its Cortex-M4F is the core the CI emulates (QEMU mps2-an386), so instruction
//! counts measured there carry over; its on-board J-Link works with probe-rs out of the box; and
//! 1 MiB flash / 256 KiB RAM hold every MLPerf Tiny model in int8.
#![no_std]
#![no_main]

use defmt_rtt as _;
use panic_probe as _;

#[allow(dead_code)] // The quantization constants describe the model for applications.
mod model {
    include!(concat!(env!("OUT_DIR"), "/digits.rs"));
    include!(concat!(env!("OUT_DIR"), "/sample.rs"));
}

use cortex_m_rt::entry;
use embedded_hal::digital::OutputPin;
use ferrite_core::{Arena, Model, Session};
use ferrite_cortex_m::{CortexMDevice, DwtProfiler};
use nrf52840_hal::gpio::{p0, Level};
use nrf52840_hal::pac;

/// The arena, sized at compile time by the emitted module.
static mut ARENA: Arena<{ model::ARENA_BYTES }> = Arena::new();

fn argmax(scores: &[f32]) -> usize {
    let mut best = 0;
    for (i, s) in scores.iter().enumerate() {
        if *s > scores[best] {
            best = i;
        }
    }
    best
}

#[entry]
fn main() -> ! {
    let (Some(mut core), Some(chip)) = (cortex_m::Peripherals::take(), pac::Peripherals::take())
    else {
        defmt::panic!("peripherals taken twice");
    };
    core.DCB.enable_trace();
    core.DWT.enable_cycle_counter();
    let port0 = p0::Parts::new(chip.P0);
    let mut timing_pin = port0.p0_03.into_push_pull_output(Level::Low);

    let model = match Model::load(model::MODEL) {
        Ok(m) => m,
        Err(e) => defmt::panic!("invalid model: {}", e),
    };
    let mut cycles = [0u32; 16];
    // Only the kernels of the model's op kinds are linked (its `OPS`).
    let device = CortexMDevice::<_, { model::OPS }>::with_profiler(DwtProfiler::new(&mut cycles));
    // SAFETY: `main` runs once and never returns, so this is the only reference to ARENA.
    let arena = unsafe { (*core::ptr::addr_of_mut!(ARENA)).as_mut_bytes() };
    let mut session = match Session::new(&model, device, arena) {
        Ok(s) => s,
        Err(e) => defmt::panic!("session: {}", e),
    };
    let (input, input_type, input_shape) = model::INPUTS[0];
    let (output, _, output_shape) = model::OUTPUTS[0];
    defmt::info!(
        "ferrite: model {} B, arena {} B; {=str} {=str} {=[?]} -> {=str} {=[?]}",
        model::MODEL_BYTES,
        model::ARENA_BYTES,
        input,
        input_type,
        input_shape,
        output,
        output_shape
    );
    loop {
        if let Err(e) = session.set_input_f32(0, &model::SAMPLE) {
            defmt::panic!("input: {}", e);
        }
        let _ = timing_pin.set_high();
        let result = session.run();
        let _ = timing_pin.set_low();
        if let Err(e) = result {
            defmt::panic!("run: {}", e);
        }
        let predicted = session.output_f32(0).map(argmax).unwrap_or(usize::MAX);
        let steps = session.device().profiler().cycles();
        let total: u32 = steps.iter().sum();
        defmt::info!(
            "predicted {} (true {}), {} cycles per step: {=[?]}",
            predicted,
            model::SAMPLE_LABEL,
            total,
            steps
        );
        cortex_m::asm::delay(64_000_000);
    }
}
