//! # ferrite-benches
//!
//! Benchmarks, never assertions: criterion benches of whole test models (`benches/models.rs`) and
//! of the hot kernels (`benches/kernels.rs`), and `side_by_side.py`, which times `ferrite bench`
//! and onnxruntime (one thread) interleaved in one run and prints their ratio per model.

use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::{pack, PackOptions};
use std::path::PathBuf;

/// The generated test models (`$FERRITE_TEST_MODELS`, default `target/test-models`), packed.
pub fn packed_test_models() -> Vec<(String, AlignedBytes)> {
    let dir = std::env::var_os("FERRITE_TEST_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-models"));
    let Ok(text) = std::fs::read_to_string(dir.join("manifest.json")) else {
        eprintln!(
            "no test models in {}; run `python tests/models/generate.py {}`",
            dir.display(),
            dir.display()
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in text.lines() {
        // manifest.json: { "name": {"input_shapes": {"input": [..]}}, ... } — names are the keys.
        let Some(name) = line
            .trim()
            .strip_prefix('"')
            .and_then(|l| l.split('"').next())
        else {
            continue;
        };
        if name == "input_shapes" || name == "input" {
            continue;
        }
        let Ok(onnx) = std::fs::read(dir.join(format!("{name}.onnx"))) else {
            continue;
        };
        let shape = ferrite_tools::host::npy::read(&dir.join(format!("{name}.input_0.npy")))
            .map(|a| a.shape)
            .unwrap_or_default();
        let options = PackOptions {
            input_shapes: vec![("input".into(), shape)],
            ..PackOptions::default()
        };
        match pack(&onnx, &options) {
            Ok(p) => out.push((name.to_string(), AlignedBytes::from(&p.bytes[..]))),
            Err(e) => eprintln!("{name}: {e}"),
        }
    }
    out
}

/// Loads packed bytes (already verified by `pack`).
pub fn model(bytes: &AlignedBytes) -> Model<'_> {
    Model::load(bytes.as_bytes()).expect("packed models verify")
}
