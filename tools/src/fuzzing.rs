//! The bodies of Ferrite's fuzz targets (`fuzz/fuzz_targets/`, cargo-fuzz with libFuzzer), kept
//! here so the same code replays the committed corpus as an ordinary test on stable
//! (`tools/tests/fuzz_corpus.rs`). Each takes arbitrary bytes and must return without
//! panicking, reading out of bounds or allocating without bound; what it returns is ignored.

use crate::aligned::AlignedBytes;
use ferrite_core::{Model, Session};

/// The largest arena a fuzzed model may ask for (larger ones are refused before allocating).
pub const ARENA_CAP: usize = 1 << 22;

/// `.frt` bytes: re-sealed with a valid CRC-32 (else almost every mutation stops at the CRC check
/// and the verifier's rules behind it are never reached; the CRC check itself is tested in
/// `tests/tests/frt_format.rs`), loaded and verified; if that succeeds, a CPU session in an arena
/// of exactly the planned size (at most [`ARENA_CAP`]) runs once on deterministic inputs.
pub fn frt(data: &[u8]) {
    let mut sealed = data.to_vec();
    if sealed.len() >= ferrite_core::format::CRC_START {
        let crc = crc32fast::hash(&sealed[ferrite_core::format::CRC_START..]);
        sealed[12..16].copy_from_slice(&crc.to_le_bytes());
    }
    let bytes = AlignedBytes::from(&sealed[..]);
    let Ok(model) = Model::load(bytes.as_bytes()) else {
        return;
    };
    run_bounded(&model);
}

/// Runs a verified model once on the CPU device if its arena fits [`ARENA_CAP`].
fn run_bounded(model: &Model<'_>) {
    if model.arena_bytes() > ARENA_CAP {
        return;
    }
    let mut arena = AlignedBytes::zeroed(model.arena_bytes());
    let Ok(mut session) = Session::new(model, ferrite_cpu::CpuDevice::new(), arena.as_mut_bytes())
    else {
        return;
    };
    for i in 0..model.input_count() {
        let Some(info) = model.input(i) else { continue };
        let len = info.desc.bytes;
        if len > ARENA_CAP {
            continue;
        }
        // Small varied bytes: valid indices for gathers sometimes, invalid ones other times.
        let input: Vec<u8> = (0..len).map(|k| (k % 7) as u8).collect();
        let _ = session.set_input(i, &input);
    }
    let _ = session.run();
}

/// ONNX bytes: import, check and pack with default options; a packed model is loaded and run as
/// [`frt`] does.
pub fn onnx(data: &[u8]) {
    let options = crate::compile::pack::PackOptions::default();
    let _ = crate::compile::pack::check(data, &options);
    let Ok(packed) = crate::compile::pack::pack(data, &options) else {
        return;
    };
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    match Model::load(bytes.as_bytes()) {
        Ok(model) => run_bounded(&model),
        // The writer's output must always verify.
        Err(e) => panic!("pack wrote a model the verifier refuses: {e}"),
    }
}

/// `.npy` bytes: parse; a parsed array is written back and parsed again to the same array.
pub fn npy(data: &[u8]) {
    let Ok(array) = crate::host::npy::from_bytes(data, "fuzz.npy") else {
        return;
    };
    let again = crate::host::npy::from_bytes(&crate::host::npy::to_bytes(&array), "again.npy");
    match again {
        Ok(a) if a == array => {}
        // bfloat16 has no numpy name of its own: written as raw 2-byte values, read back as such.
        Ok(_) | Err(_) if array.dtype == ferrite_hal::DType::BF16 => {}
        other => panic!("an .npy round trip changed the array: {other:?}"),
    }
}
