//! scikit-learn models as skl2onnx writes them (the `ai.onnx.ml` domain; generated with their
//! onnxruntime outputs by `tests/models/generate.py`, listed in `sklearn.json`), run on any
//! device: labels identical to onnxruntime's, probabilities and values within 1e-5.

use crate::compare::allclose;
use crate::{test_models_dir, Backend};
use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::npy;

/// Elementwise bound on probabilities and regression values (`atol + RTOL·|expected|`).
pub const RTOL: f32 = 1e-5;

/// Runs every model of `sklearn.json` on `B`; returns how many ran, or every failure.
pub fn run_all<B: Backend>() -> Result<usize, String> {
    let dir = test_models_dir();
    let text = std::fs::read_to_string(dir.join("sklearn.json")).map_err(|e| e.to_string())?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let models = doc.as_object().ok_or("sklearn.json is not an object")?;
    let mut failures = Vec::new();
    for (name, entry) in models {
        let shape: Vec<usize> = entry["input_shapes"]["X"]
            .as_array()
            .ok_or("bad sklearn.json")?
            .iter()
            .filter_map(|d| d.as_u64().map(|d| d as usize))
            .collect();
        let count = entry["outputs"].as_u64().ok_or("bad sklearn.json")? as usize;
        let options = PackOptions {
            input_shapes: vec![("X".into(), shape)],
            ..Default::default()
        };
        let result = (|| -> Result<(), String> {
            let onnx =
                std::fs::read(dir.join(format!("{name}.onnx"))).map_err(|e| e.to_string())?;
            let packed = pack(&onnx, &options).map_err(|e| e.to_string())?;
            let bytes = AlignedBytes::from(&packed.bytes[..]);
            let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
            let input =
                npy::read(&dir.join(format!("{name}.input_0.npy"))).map_err(|e| e.to_string())?;
            let outputs = B::run(&model, &[input]).map_err(|e| e.to_string())?;
            if outputs.len() != count {
                return Err(format!(
                    "{} outputs, onnxruntime gives {count}",
                    outputs.len()
                ));
            }
            for (i, actual) in outputs.iter().enumerate() {
                let expected = npy::read(&dir.join(format!("{name}.output_{i}.npy")))
                    .map_err(|e| e.to_string())?;
                allclose(actual, &expected, RTOL, RTOL).map_err(|e| format!("output {i}: {e}"))?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => println!("{name:<26} matches onnxruntime on {}", B::NAME),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    if failures.is_empty() {
        Ok(models.len())
    } else {
        Err(failures.join("\n"))
    }
}
