//! A firmware for one model. Copy this folder, write your model into `model/` with
//! `ferrite pack MODEL.onnx -o model/model.frt --emit rust` (or point `FERRITE_MODEL_RS` in
//! `.cargo/config.toml` at your module), set your part's memory in `memory.x`, and
//! `cargo build --release`. Only the model's op kinds (`model::OPS`) are decoded, verified and
//! linked. On QEMU (`cargo run --release`, or `ferrite bench MODEL.frt --device qemu-m4`) the
//! `Host` calls serve the host runner; on a board, replace them with your sensor and application.
#![no_std]
#![no_main]

#[allow(dead_code)] // INPUTS, OUTPUTS, their quantization and MODEL_BYTES describe the model.
mod model {
    include!(env!("FERRITE_MODEL_RS"));
}

use ferrite_core::{Arena, Model, Session};
use ferrite_cortex_m::CortexMDevice;
use ferrite_qemu_firmware::{exit, Failure, Host, ModelSource};

static mut ARENA: Arena<{ model::ARENA_BYTES }> = Arena::new();

#[cortex_m_rt::entry]
fn main() -> ! {
    // SAFETY: `main` runs once and is the arena's only user.
    let arena = unsafe { &mut *core::ptr::addr_of_mut!(ARENA) }.as_mut_bytes();
    exit(serve(arena))
}

fn serve(arena: &'static mut [u8]) -> Result<(), Failure> {
    let mut host = Host::connect()?;
    let bytes = host.model(ModelSource::Embedded(model::MODEL))?;
    let model = Model::<{ model::OPS }>::load_selected(bytes)?;
    let device = CortexMDevice::<_, { model::OPS }>::selected();
    let mut session = Session::new(&model, device, arena)?;
    for _ in 0..host.runs() {
        host.read_inputs(&mut session)?; // your sensor: session.input_mut(0)?.copy_from_slice(..)
        host.measure(|| session.run())?;
    }
    host.finish(&session) // your application: session.output(0)?
}
