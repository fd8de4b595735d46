//! The post-training quantization suite: every float test model packed with
//! `--quantize int8` (calibrated on the 16 samples onnxruntime's quantizer used, in
//! `calibration/NAME/`), run on a device and compared with onnxruntime's *float* output.
//!
//! Bounds: SQNR at least [`MIN_SQNR_DB`] against the float output, and, where onnxruntime's own
//! int8 model of the same float model exists (`NAME_qdq`), no more than [`SLACK_DB`] below
//! onnxruntime's SQNR on the same input: Ferrite's quantizer must be as good as the one users
//! already have.

use crate::compare::floats;
use crate::models::check_no_overlap;
use crate::{test_models_dir, Backend};
use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::PackOptions;
use ferrite_tools::compile::ptq::{self, Settings};
use ferrite_tools::host::npy;

/// Least accepted SQNR of an int8 model's output against the float model's, in dB.
pub const MIN_SQNR_DB: f64 = 25.0;
/// How far below onnxruntime's int8 SQNR Ferrite's may fall, in dB.
pub const SLACK_DB: f64 = 3.0;

/// One model's result.
#[derive(Debug)]
pub struct PtqResult {
    /// Float model name.
    pub name: String,
    /// Ferrite int8 vs onnxruntime float, in dB.
    pub sqnr_db: f64,
    /// onnxruntime int8 vs onnxruntime float, when that model exists.
    pub onnxruntime_sqnr_db: Option<f64>,
    /// Arena bytes of the int8 model.
    pub arena_bytes: usize,
    /// Weights bytes of the int8 model.
    pub weights_bytes: usize,
}

/// `10 log10(Σ reference² / Σ (reference − actual)²)`.
pub fn sqnr_db(reference: &[f32], actual: &[f32]) -> f64 {
    let (mut signal, mut noise) = (0.0f64, 0.0f64);
    for (r, a) in reference.iter().zip(actual) {
        signal += (*r as f64).powi(2);
        noise += (*r as f64 - *a as f64).powi(2);
    }
    if noise == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (signal / noise).log10()
    }
}

fn options(name: &str) -> Result<PackOptions, String> {
    let path = test_models_dir().join("manifest.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut input_shapes = Vec::new();
    let shapes = doc[name]["input_shapes"]
        .as_object()
        .ok_or_else(|| format!("{name} is not in manifest.json"))?;
    for (input, dims) in shapes {
        let dims = dims.as_array().ok_or("bad manifest entry")?;
        input_shapes.push((
            input.clone(),
            dims.iter()
                .map(|d| d.as_u64().unwrap_or(0) as usize)
                .collect(),
        ));
    }
    Ok(PackOptions {
        input_shapes,
        ..PackOptions::default()
    })
}

/// Quantizes float model `name` with `method` and runs it on backend `B`.
pub fn run_one<B: Backend>(name: &str, settings: Settings) -> Result<PtqResult, String> {
    let method = settings.method;
    let dir = test_models_dir();
    let onnx = std::fs::read(dir.join(format!("{name}.onnx"))).map_err(|e| e.to_string())?;
    let calibration = dir.join("calibration").join(name);
    let (packed, report) = ptq::quantize(
        &onnx,
        &options(name)?,
        &calibration,
        settings,
        &mut |_, _, _| {},
    )
    .map_err(|e| format!("{name}: {e}"))?;
    check_no_overlap(&packed).map_err(|e| format!("{name}: {e}"))?;
    let count = |op: &str| packed.report.ops.get(op).copied().unwrap_or(0);
    let weighted = count("QConv") + count("QGemm");
    if report.weights == 0 || weighted != report.weights {
        return Err(format!(
            "{name}: {} weight tensors quantized, {weighted} QConv/QGemm ops",
            report.weights
        ));
    }
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let read = |file: String| npy::read(&dir.join(file)).map_err(|e| e.to_string());
    let input = read(format!("{name}.input_0.npy"))?;
    let expected = floats(&read(format!("{name}.output_0.npy"))?);
    let outputs = B::run(&model, &[input]).map_err(|e| format!("{name}: {e}"))?;
    let actual = floats(outputs.first().ok_or("no output")?);
    if actual.len() != expected.len() {
        return Err(format!(
            "{name}: {} outputs, expected {}",
            actual.len(),
            expected.len()
        ));
    }
    let sqnr = sqnr_db(&expected, &actual);
    let onnxruntime_sqnr = match read(format!("{name}_qdq.output_0.npy")) {
        Ok(ort) => Some(sqnr_db(&expected, &floats(&ort))),
        Err(_) => None,
    };
    let floor = onnxruntime_sqnr.map_or(MIN_SQNR_DB, |s| MIN_SQNR_DB.max(s - SLACK_DB));
    if sqnr.is_nan() || sqnr < floor {
        return Err(format!(
            "{name} ({method}): SQNR {sqnr:.1} dB against float, below {floor:.1} dB (onnxruntime int8: {onnxruntime_sqnr:?})"
        ));
    }
    Ok(PtqResult {
        name: name.to_string(),
        sqnr_db: sqnr,
        onnxruntime_sqnr_db: onnxruntime_sqnr,
        arena_bytes: packed.report.arena_bytes,
        weights_bytes: packed.report.weights_bytes,
    })
}

/// Quantizes and runs each of `names` on backend `B` with `method`; all failures in one error.
pub fn run_all<B: Backend>(
    names: &[&str],
    settings: impl Into<Settings>,
) -> Result<Vec<PtqResult>, String> {
    let settings = settings.into();
    let method = settings.method;
    let corrected = if settings.bias_correction {
        ", bias corrected"
    } else {
        ""
    };
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for name in names {
        match run_one::<B>(name, settings) {
            Ok(r) => {
                let ort = r
                    .onnxruntime_sqnr_db
                    .map_or(String::new(), |s| format!(" (onnxruntime int8: {s:.1} dB)"));
                println!(
                    "{:<18} {method}{corrected}: SQNR {:.1} dB{ort}, arena {} B, weights {} B",
                    r.name, r.sqnr_db, r.arena_bytes, r.weights_bytes
                );
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

/// The float test models.
pub const FLOAT_MODELS: [&str; 5] = [
    "mlp",
    "ds_cnn",
    "resnet8",
    "mobilenet_v1_025",
    "fc_autoencoder",
];
