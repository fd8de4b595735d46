//! Determinism: every test model (float and int8) run [`RUNS`] times on a device gives
//! bit-identical outputs, run after run on one session and against a fresh one. Nothing in a
//! run may depend on what an earlier run left in the arena, on thread timing or on memory
//! addresses.

use crate::models::expected_unsupported;
use crate::{test_models_dir, Backend};
use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::npy;

/// Runs per model.
pub const RUNS: usize = 100;

/// Runs per model on an emulator that runs in order on one thread (QEMU, the CUDA host
/// emulator): there nothing varies between runs but what a run left in the arena, which the
/// second run already shows.
pub const EMULATOR_RUNS: usize = 5;

/// Every model of `manifest.json` and `quantized.json`, with its pack options and input files.
fn models() -> Result<Vec<(String, PackOptions, Vec<String>)>, String> {
    let mut out = Vec::new();
    for (name, options) in crate::models::manifest()? {
        let input = format!("{name}.input_0.npy");
        out.push((name, options, vec![input]));
    }
    for entry in crate::quantized::manifest()? {
        let input = entry
            .samples
            .first()
            .map(|(i, _)| i.clone())
            .unwrap_or_default();
        out.push((entry.name, entry.options, vec![input]));
    }
    Ok(out)
}

/// Runs every model `runs` times on `B` ([`RUNS`], fewer on slow emulators); returns how many
/// models were checked.
pub fn run_all<B: Backend>(runs: usize) -> Result<usize, String> {
    let dir = test_models_dir();
    let refused = expected_unsupported::<B>();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, options, input_files) in models()? {
        let base = name.strip_suffix("_qdq").or(name.strip_suffix("_qop"));
        if refused.contains(&name) || base.is_some_and(|b| refused.iter().any(|r| r == b)) {
            continue;
        }
        let result = (|| -> Result<(), String> {
            let onnx =
                std::fs::read(dir.join(format!("{name}.onnx"))).map_err(|e| e.to_string())?;
            let packed = pack(&onnx, &options).map_err(|e| e.to_string())?;
            let bytes = AlignedBytes::from(&packed.bytes[..]);
            let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
            let mut inputs = Vec::new();
            for f in &input_files {
                inputs.push(npy::read(&dir.join(f)).map_err(|e| e.to_string())?);
            }
            let runs = match B::run_repeatedly(&model, &inputs, runs) {
                Ok(r) => r,
                // A device that lacks an op of this model (the suites list which) has nothing
                // to repeat.
                Err(ferrite_tools::host::error::RunError::Session {
                    kind: ferrite_hal::ErrorKind::Unsupported,
                    ..
                }) => return Ok(()),
                Err(e) => return Err(e.to_string()),
            };
            let fresh = B::run(&model, &inputs).map_err(|e| e.to_string())?;
            let first = runs.first().ok_or("no runs")?;
            for (k, run) in runs.iter().enumerate() {
                if run != first {
                    return Err(format!("run {k} differs from run 0"));
                }
            }
            if &fresh != first {
                return Err("a fresh session differs from the repeated one".into());
            }
            checked += 1;
            Ok(())
        })();
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    if failures.is_empty() {
        println!(
            "{checked} models, {runs} runs each: bit-identical on {}",
            B::NAME
        );
        Ok(checked)
    } else {
        Err(failures.join("\n"))
    }
}

/// Every model on `A` and on `B` (two builds or settings of one device, such as one thread and
/// several): outputs bit-identical. Returns how many models were compared.
pub fn identical<A: Backend, B: Backend>() -> Result<usize, String> {
    let dir = test_models_dir();
    let refused = expected_unsupported::<A>();
    let mut failures = Vec::new();
    let mut compared = 0;
    for (name, options, input_files) in models()? {
        let base = name.strip_suffix("_qdq").or(name.strip_suffix("_qop"));
        if refused.contains(&name) || base.is_some_and(|b| refused.iter().any(|r| r == b)) {
            continue;
        }
        let result = (|| -> Result<(), String> {
            let onnx =
                std::fs::read(dir.join(format!("{name}.onnx"))).map_err(|e| e.to_string())?;
            let packed = pack(&onnx, &options).map_err(|e| e.to_string())?;
            let bytes = AlignedBytes::from(&packed.bytes[..]);
            let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
            let mut inputs = Vec::new();
            for f in &input_files {
                inputs.push(npy::read(&dir.join(f)).map_err(|e| e.to_string())?);
            }
            let a = A::run(&model, &inputs).map_err(|e| e.to_string())?;
            let b = B::run(&model, &inputs).map_err(|e| e.to_string())?;
            if a != b {
                return Err(format!(
                    "outputs differ between {} and {}",
                    A::NAME,
                    B::NAME
                ));
            }
            compared += 1;
            Ok(())
        })();
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    if failures.is_empty() {
        Ok(compared)
    } else {
        Err(failures.join("\n"))
    }
}
