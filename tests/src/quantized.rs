//! The int8 model suite: the MLP, DS-CNN and ResNet-8 quantized by onnxruntime's
//! `quantize_static` (QDQ and QOperator forms, per-channel int8 weights, int8 activations), run on
//! a device and compared with onnxruntime's own int8 outputs in units of the output's
//! quantization step.
//!
//! Bound: at least 99 % of output elements within one step of onnxruntime's, none more than
//! [`MAX_STEPS`] off. Both forms pack to the same integer ops (QOperator nodes are lowered as the
//! QDQ nodes they stand for); what the integer pass does not cover runs in float between
//! QuantizeLinear and DequantizeLinear.
//!
//! The same models quantized dynamically (`quantize_dynamic`: DynamicQuantizeLinear,
//! MatMulInteger, ConvInteger, float outputs) must match onnxruntime to
//! [`DYNAMIC_RELATIVE`] of the output's largest magnitude: their integer arithmetic is exact.

use crate::compare::floats;
use crate::models::check_no_overlap;
use crate::{test_models_dir, Backend};
use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::npy;
use ferrite_tools::pack::{pack, PackOptions};

/// Fraction of output elements that must be within one quantization step.
pub const WITHIN_ONE_STEP: f64 = 0.99;
/// Largest accepted difference, in quantization steps.
pub const MAX_STEPS: f32 = 3.0;

/// Bound for dynamically quantized models: largest difference over the largest expected
/// magnitude.
pub const DYNAMIC_RELATIVE: f32 = 1e-5;

/// One quantized model's result.
#[derive(Debug)]
pub struct QuantizedResult {
    /// Model name (`mlp_qdq`, ...).
    pub name: String,
    /// Fraction of elements within one step of onnxruntime (dynamic models: within the bound).
    pub within_one_step: f64,
    /// Largest difference, in steps (dynamic models: relative to the largest magnitude).
    pub max_steps: f32,
    /// Arena bytes.
    pub arena_bytes: usize,
    /// Dynamically quantized (float output, relative bound).
    pub dynamic: bool,
}

/// One entry of `quantized.json`.
struct Entry {
    name: String,
    options: PackOptions,
    /// The output's quantization step; `None` for a float output (dynamic quantization).
    step: Option<f32>,
}

fn manifest() -> Result<Vec<Entry>, String> {
    let path = test_models_dir().join("quantized.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} — generate with `python tests/models/generate.py` (scripts/test.sh does)",
            path.display()
        )
    })?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (name, entry) in doc.as_object().ok_or("quantized.json is not an object")? {
        let mut input_shapes = Vec::new();
        for (input, dims) in entry["input_shapes"].as_object().ok_or("bad entry")? {
            let dims = dims
                .as_array()
                .ok_or("bad entry")?
                .iter()
                .map(|d| d.as_u64().unwrap_or(0) as usize)
                .collect();
            input_shapes.push((input.clone(), dims));
        }
        out.push(Entry {
            name: name.clone(),
            options: PackOptions {
                input_shapes,
                ..PackOptions::default()
            },
            step: match entry["form"].as_str() {
                Some("dyn") => None,
                _ => Some(entry["output_step"].as_f64().ok_or("missing output_step")? as f32),
            },
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn run_one<B: Backend>(entry: &Entry) -> Result<QuantizedResult, String> {
    let dir = test_models_dir();
    let name = &entry.name;
    let onnx = std::fs::read(dir.join(format!("{name}.onnx"))).map_err(|e| e.to_string())?;
    let packed = pack(&onnx, &entry.options);
    let packed = packed.map_err(|e| format!("{name}: {e}"))?;
    check_no_overlap(&packed).map_err(|e| format!("{name}: {e}"))?;
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let input = npy::read(&dir.join(format!("{name}.input_0.npy"))).map_err(|e| e.to_string())?;
    let expected =
        npy::read(&dir.join(format!("{name}.output_0.npy"))).map_err(|e| e.to_string())?;
    let outputs = B::run(&model, &[input]).map_err(|e| format!("{name}: {e}"))?;
    let actual = outputs.first().ok_or("no output")?;
    let (a, e) = (floats(actual), floats(&expected));
    if a.len() != e.len() {
        return Err(format!("{name}: {} outputs, expected {}", a.len(), e.len()));
    }
    let Some(step) = entry.step else {
        let largest = e
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()))
            .max(f32::MIN_POSITIVE);
        let relative = a
            .iter()
            .zip(&e)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs() / largest));
        if relative.is_nan() || relative > DYNAMIC_RELATIVE {
            return Err(format!(
                "{name}: largest difference {relative:e} of the output's range (bound {DYNAMIC_RELATIVE:e})"
            ));
        }
        return Ok(QuantizedResult {
            name: name.clone(),
            within_one_step: 1.0,
            max_steps: relative,
            arena_bytes: packed.report.arena_bytes,
            dynamic: true,
        });
    };
    let steps: Vec<f32> = a
        .iter()
        .zip(&e)
        .map(|(x, y)| (x - y).abs() / step)
        .collect();
    // A hair of slack: "one step" computed in f32 from dequantized values.
    let within = steps.iter().filter(|s| **s <= 1.0 + 1e-3).count() as f64 / steps.len() as f64;
    let max = steps.iter().fold(0f32, |m, s| m.max(*s));
    if within < WITHIN_ONE_STEP || max.is_nan() || max > MAX_STEPS {
        return Err(format!(
            "{name}: {:.1} % within one step (need {:.0} %), max {max} steps (bound {MAX_STEPS})",
            within * 100.0,
            WITHIN_ONE_STEP * 100.0
        ));
    }
    Ok(QuantizedResult {
        name: name.clone(),
        within_one_step: within,
        max_steps: max,
        arena_bytes: packed.report.arena_bytes,
        dynamic: false,
    })
}

/// Runs every quantized model on backend `B`; returns their results.
pub fn run_all<B: Backend>() -> Result<Vec<QuantizedResult>, String> {
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for entry in manifest()? {
        match run_one::<B>(&entry) {
            Ok(r) => {
                if r.dynamic {
                    println!(
                        "{:<14} largest difference {:.1e} of the output range, arena {} B",
                        r.name, r.max_steps, r.arena_bytes
                    );
                } else {
                    println!(
                        "{:<14} {:.1} % within one step, max {:.2} steps, arena {} B",
                        r.name,
                        r.within_one_step * 100.0,
                        r.max_steps,
                        r.arena_bytes
                    );
                }
                results.push(r);
            }
            Err(e) => failures.push(e),
        }
    }
    if failures.is_empty() {
        Ok(results)
    } else {
        Err(failures.join("\n"))
    }
}
