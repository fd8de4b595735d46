//! The int8 model suite: the MLP, DS-CNN and ResNet-8 quantized by onnxruntime's
//! `quantize_static` (QDQ and QOperator forms, per-channel int8 weights, int8 activations; and
//! QDQ with int16 activations, TFLite's 16 × 8 scheme) and
//! the four MLPerf Tiny reference models (tf2onnx from TFLite, int8 in and out, six inputs each),
//! run on a device and compared in units of the output's quantization step.
//!
//! The reference is onnxruntime's *definitional* run (`ORT_DISABLE_ALL`: DequantizeLinear, the
//! float op, QuantizeLinear — the ONNX definition), never its optimized one: its fused int8
//! kernels round differently on AVX2, AVX-512 and Arm machines (two steps apart on DS-CNN), so a
//! reference made with them would depend on the CI host. The float op's own rounding (its
//! summation order per SIMD level) can move a value across a rounding boundary, which the
//! bounds allow for.
//!
//! Bound: at least 99 % of output elements within one step of the reference, none more than
//! [`MAX_STEPS`] off. Both forms pack to the same integer ops (QOperator nodes are lowered as the
//! QDQ nodes they stand for, and their reference is the QDQ model's); what the integer pass does
//! not cover runs in float between QuantizeLinear and DequantizeLinear.
//!
//! [`run_layers`] checks each integer op alone: the QDQ models cut after each QuantizeLinear,
//! each cut fed the exact int8 tensors the definitional run gives it; at least
//! [`LAYER_EXACT`] of each cut's elements must equal the reference, none more than one step off.
//!
//! The same models quantized dynamically (`quantize_dynamic`: DynamicQuantizeLinear,
//! MatMulInteger, ConvInteger, float outputs) must match onnxruntime to
//! [`DYNAMIC_RELATIVE`] of the output's largest magnitude: their integer arithmetic is exact.

use crate::compare::floats;
use crate::models::check_no_overlap;
use crate::{test_models_dir, Backend};
use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::npy;

/// Fraction of output elements that must be within one quantization step.
pub const WITHIN_ONE_STEP: f64 = 0.99;
/// Largest accepted difference, in quantization steps.
pub const MAX_STEPS: f32 = 2.0;

/// Fraction of a 16-bit model's output elements that must be within one step (none may be more
/// than [`MAX_STEPS`] off). Each integer op is exact against the definition (the layer cuts:
/// [`LAYER_EXACT`]), but a 16-bit step is 256 times finer than an 8-bit one, so the float32
/// rounding of onnxruntime's reference run, which differs from one CPU to another, carried
/// through the layers, moves some outputs of the whole model by a step.
pub const WIDE_WITHIN_ONE_STEP: f64 = 0.75;

/// How far the tie brackets may move a 16-bit model's output, in steps, before a sample counts
/// as ill-conditioned: ±2e-6 of a scale moves a 16-bit value 256 times more steps than an 8-bit
/// one (measured: 2 steps on the DS-CNN).
pub const WIDE_CONDITIONED_STEPS: f32 = 8.0;

/// The relative change of the QuantizeLinear scales in the reference's tie brackets
/// (`TIE_BRACKET` in `tests/models/generate.py`).
pub const TIE_BRACKET: f32 = 2e-6;

/// Fraction of a layer cut's elements that must equal the definitional output exactly.
pub const LAYER_EXACT: f64 = 0.999;

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
pub(crate) struct Entry {
    /// Model name (`mlp_qdq`, `mlperf_kws_ds_cnn`, ...).
    pub(crate) name: String,
    /// Pack options (input shapes).
    pub(crate) options: PackOptions,
    /// The output's quantization step; `None` for a float output (dynamic quantization).
    step: Option<f32>,
    /// 16-bit activations (form `qdq16`): a sample is ill-conditioned only past
    /// [`WIDE_CONDITIONED_STEPS`], and [`WIDE_WITHIN_ONE_STEP`] of the elements must be within
    /// one step.
    wide: bool,
    /// `(input, expected output)` files, relative to the test-model folder.
    pub(crate) samples: Vec<(String, String)>,
}

/// The entries of `quantized.json`, sorted by name.
pub(crate) fn manifest() -> Result<Vec<Entry>, String> {
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
            wide: entry["form"].as_str() == Some("qdq16"),
            step: match entry["form"].as_str() {
                Some("dyn") => None,
                _ => Some(entry["output_step"].as_f64().ok_or("missing output_step")? as f32),
            },
            samples: match entry["samples"].as_array() {
                Some(pairs) => pairs
                    .iter()
                    .map(|p| {
                        let file = |i: usize| p[i].as_str().unwrap_or_default().to_string();
                        (file(0), file(1))
                    })
                    .collect(),
                None => vec![(
                    format!("{name}.input_0.npy"),
                    format!("{name}.output_0.npy"),
                )],
            },
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The reference output at `path` (`NAME.npy`), element by element the point nearest to
/// `actual` of the interval it spans with its tie brackets (`NAME.lo.npy`, `NAME.hi.npy`,
/// written by `generate.py` where the model has QuantizeLinear nodes: the definitional run with
/// every QuantizeLinear scale moved by ±2e-6). onnxruntime's float32 arithmetic breaks exact
/// ties either way where Ferrite's integers round them to even, and on some inputs (uniform
/// noise into ResNet-8) those ties decide the output by tens of steps: the definition is only
/// determined to within that interval there. Where no tie is near, the interval is one value.
///
/// Also returns the interval's largest width (in output units): how far the definition itself
/// moves under the brackets.
fn nearest_reference(actual: &[f32], path: &std::path::Path) -> Result<(Vec<f32>, f32), String> {
    let read = |p: &std::path::Path| -> Result<Vec<f32>, String> {
        Ok(floats(
            &npy::read(p).map_err(|e| format!("{}: {e}", p.display()))?,
        ))
    };
    let plain = read(path)?;
    let (mut lo, mut hi) = (plain.clone(), plain);
    for tag in ["lo", "hi"] {
        let bracket = path.with_extension(format!("{tag}.npy"));
        if !bracket.exists() {
            continue;
        }
        let other = read(&bracket)?;
        if other.len() != lo.len() {
            return Err(format!("{}: wrong length", bracket.display()));
        }
        for ((l, h), o) in lo.iter_mut().zip(hi.iter_mut()).zip(other) {
            *l = l.min(o);
            *h = h.max(o);
        }
    }
    let spread = lo.iter().zip(&hi).fold(0f32, |m, (l, h)| m.max(h - l));
    let nearest = actual
        .iter()
        .zip(lo.iter().zip(&hi))
        .map(|(a, (l, h))| if a.is_nan() { *l } else { a.clamp(*l, *h) })
        .chain(lo.iter().skip(actual.len()).copied())
        .collect();
    Ok((nearest, spread))
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
    let (mut a, mut e) = (Vec::new(), Vec::new());
    let mut ill_conditioned = 0;
    for (input_file, output) in &entry.samples {
        let input = npy::read(&dir.join(input_file)).map_err(|e| e.to_string())?;
        let outputs = B::run(&model, &[input]).map_err(|e| format!("{name}: {e}"))?;
        let actual = outputs.first().ok_or("no output")?;
        let sa = floats(actual);
        let (se, spread) = nearest_reference(&sa, &dir.join(output))?;
        if sa.len() != se.len() {
            return Err(format!(
                "{name}: {} outputs, expected {}",
                sa.len(),
                se.len()
            ));
        }
        if let Some(step) = entry.step {
            let conditioned = if entry.wide {
                WIDE_CONDITIONED_STEPS
            } else {
                MAX_STEPS
            };
            if spread > conditioned * step {
                // Ill-conditioned: the definition itself moves by more than the bound.
                let off = sa
                    .iter()
                    .zip(&se)
                    .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
                println!(
                    "{name}: {input_file}: ill-conditioned (the definition moves {} steps under \
                     ±{TIE_BRACKET:e} of its scales), not counted; {} steps off",
                    spread / step,
                    off / step
                );
                ill_conditioned += 1;
                continue;
            }
        }
        a.extend(sa);
        e.extend(se);
    }
    if 2 * ill_conditioned > entry.samples.len() {
        return Err(format!(
            "{name}: {ill_conditioned} of {} samples ill-conditioned: too few to judge",
            entry.samples.len()
        ));
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
    let need = if entry.wide {
        WIDE_WITHIN_ONE_STEP
    } else {
        WITHIN_ONE_STEP
    };
    if within < need || max.is_nan() || max > MAX_STEPS + 1e-3 {
        return Err(format!(
            "{name}: {:.1} % within one step (need {:.0} %), max {max} steps (bound {MAX_STEPS})",
            within * 100.0,
            need * 100.0
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

/// One layer cut's result: how many of its elements equal the definitional output.
#[derive(Debug)]
pub struct LayerResult {
    /// The model it was cut from.
    pub model: String,
    /// The cut (`NAME.cutKK`).
    pub cut: String,
    /// The ops between its inputs and its QuantizeLinear.
    pub ops: String,
    /// Elements compared.
    pub elements: usize,
    /// Elements that differ from the reference.
    pub mismatched: usize,
    /// Largest difference, in steps.
    pub max_steps: f32,
}

fn run_layer<B: Backend>(entry: &serde_json::Value) -> Result<LayerResult, String> {
    let dir = test_models_dir();
    let field = |k: &str| entry[k].as_str().unwrap_or_default().to_string();
    let cut = field("cut");
    let onnx = std::fs::read(dir.join(field("onnx"))).map_err(|e| format!("{cut}: {e}"))?;
    let packed = pack(&onnx, &PackOptions::default()).map_err(|e| format!("{cut}: {e}"))?;
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).map_err(|e| format!("{cut}: {e}"))?;
    let mut inputs = Vec::new();
    for file in entry["inputs"].as_array().into_iter().flatten() {
        let path = dir.join(file.as_str().unwrap_or_default());
        inputs.push(npy::read(&path).map_err(|e| format!("{cut}: {e}"))?);
    }
    let outputs = B::run(&model, &inputs).map_err(|e| format!("{cut}: {e}"))?;
    let actual = outputs.first().ok_or("no output")?;
    let a = floats(actual);
    let (e, _) =
        nearest_reference(&a, &dir.join(field("output"))).map_err(|e| format!("{cut}: {e}"))?;
    if a.len() != e.len() || a.is_empty() {
        return Err(format!("{cut}: {} outputs, expected {}", a.len(), e.len()));
    }
    let diffs: Vec<f32> = a.iter().zip(&e).map(|(x, y)| (x - y).abs()).collect();
    let ops = entry["ops"].as_array().into_iter().flatten();
    Ok(LayerResult {
        model: field("model"),
        cut,
        ops: ops.filter_map(|o| o.as_str()).collect::<Vec<_>>().join("+"),
        elements: diffs.len(),
        mismatched: diffs.iter().filter(|d| **d != 0.0).count(),
        max_steps: diffs
            .iter()
            .fold(0f32, |m, d| if d.is_nan() { f32::NAN } else { m.max(*d) }),
    })
}

/// Runs every layer cut (`layers.json`) on backend `B`, prints each one's mismatch rate and
/// fails when a cut has more than `1 − LAYER_EXACT` of its elements off or any off by more
/// than one step.
pub fn run_layers<B: Backend>() -> Result<Vec<LayerResult>, String> {
    let path = test_models_dir().join("layers.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for entry in doc.as_array().ok_or("layers.json is not a list")? {
        match run_layer::<B>(entry) {
            Ok(r) => {
                let rate = r.mismatched as f64 / r.elements as f64;
                println!(
                    "{:<26} {:<28} {:>7} elements, {:>5} off ({:.3} %), max {} steps",
                    r.cut,
                    r.ops,
                    r.elements,
                    r.mismatched,
                    rate * 100.0,
                    r.max_steps
                );
                if rate > 1.0 - LAYER_EXACT || r.max_steps.is_nan() || r.max_steps > 1.0 {
                    failures.push(format!(
                        "{}: {} of {} elements differ from the definitional output, max {} steps",
                        r.cut, r.mismatched, r.elements, r.max_steps
                    ));
                }
                results.push(r);
            }
            Err(e) => failures.push(e),
        }
    }
    let (elements, mismatched) = results
        .iter()
        .fold((0, 0), |(e, m), r| (e + r.elements, m + r.mismatched));
    println!(
        "layer cuts: {} cuts, {mismatched} of {elements} elements differ ({:.4} %)",
        results.len(),
        mismatched as f64 * 100.0 / elements.max(1) as f64
    );
    if failures.is_empty() {
        Ok(results)
    } else {
        Err(failures.join("\n"))
    }
}
