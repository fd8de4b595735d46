//! # ferrite-tests
//!
//! Conformance suites defined once and instantiated per device (as tract's `test-rt` does):
//! a device implements [`Backend`]; [`models`] runs the generated test models against
//! onnxruntime's outputs and [`node_tests`] runs the ONNX backend node tests against a checked-in
//! expectations file. Adding a device = one `Backend` impl + one test file + its expectations.

pub mod compare;
pub mod models;
pub mod node_tests;

use ferrite_core::{Model, Session};
use ferrite_tools::npy::NpyArray;
use std::path::PathBuf;

/// A device under test.
pub trait Backend {
    /// Short name, used for the expectations file (`tests/expectations/<name>-node.txt`).
    const NAME: &'static str;
    /// Runs a verified model once.
    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, String>;
}

/// The portable CPU device.
pub struct Cpu;

impl Backend for Cpu {
    const NAME: &'static str = "cpu";

    fn run(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, String> {
        ferrite_tools::runner::run_cpu(model, inputs).map_err(|e| e.to_string())
    }
}

/// Runs through the core's session API directly (used by tests of the API itself).
pub fn run_with_session(model: &Model<'_>, inputs: &[NpyArray]) -> Result<Vec<NpyArray>, String> {
    let mut arena = ferrite_tools::runner::arena_for(model);
    let mut session = Session::new(model, ferrite_cpu::CpuDevice::new(), arena.as_mut_bytes())
        .map_err(|e| e.to_string())?;
    for (i, a) in inputs.iter().enumerate() {
        session.set_input(i, &a.bytes).map_err(|e| e.to_string())?;
    }
    session.run().map_err(|e| e.to_string())?;
    (0..model.output_count())
        .map(|i| {
            let info = session.output_info(i).map_err(|e| e.to_string())?;
            Ok(NpyArray {
                dtype: info.desc.dtype,
                shape: info.desc.shape.dims().to_vec(),
                bytes: session.output(i).map_err(|e| e.to_string())?.to_vec(),
            })
        })
        .collect()
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where the generated test models are: `$FERRITE_TEST_MODELS` or `target/test-models`.
pub fn test_models_dir() -> PathBuf {
    std::env::var_os("FERRITE_TEST_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/test-models"))
}
