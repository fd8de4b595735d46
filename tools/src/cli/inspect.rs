//! `ferrite inspect`: a packed model's steps, tensors and memory plan, as text, JSON or a plot.

use super::common::*;
use ferrite_core::Model;
use ferrite_hal::{Location, Plan};
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::op_label;
use ferrite_tools::host::files;
use ferrite_tools::host::plan_view;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

/// The names `inspect` shows: the file's own, else those of a `--strip-names` side file that
/// belongs to this model, else `#INDEX`.
pub(crate) struct ShownNames {
    pub(crate) side: Option<ferrite_tools::compile::strip::Names>,
}

impl ShownNames {
    pub(crate) fn for_model(model_path: &Path, bytes: &[u8]) -> ShownNames {
        let side = std::fs::read(ferrite_tools::compile::strip::side_file(model_path))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .and_then(|json| ferrite_tools::compile::strip::Names::from_json(&json, bytes));
        ShownNames { side }
    }

    pub(crate) fn tensor(&self, index: usize, stored: &str) -> String {
        self.pick(stored, |n| n.tensors.get(index))
            .unwrap_or_else(|| format!("#{index}"))
    }

    pub(crate) fn op(&self, index: usize, stored: &str) -> String {
        self.pick(stored, |n| n.ops.get(index)).unwrap_or_default()
    }

    /// The stored name, else the side file's (when non-empty).
    pub(crate) fn pick(
        &self,
        stored: &str,
        side: impl Fn(&ferrite_tools::compile::strip::Names) -> Option<&String>,
    ) -> Option<String> {
        if !stored.is_empty() {
            return Some(stored.to_string());
        }
        self.side
            .as_ref()
            .and_then(side)
            .filter(|n| !n.is_empty())
            .cloned()
    }
}

pub(crate) fn cmd_inspect(model_path: &Path, as_json: bool, plot: Option<&Path>) -> CliResult {
    let raw = read(model_path)?;
    if !is_packed(model_path, &raw) && ferrite_tools::compile::onnx::import(&raw).is_ok() {
        return Err(format!(
            "{path} is an ONNX model, not a packed one: `ferrite pack {path} -o MODEL.frt` packs it (`ferrite check {path}` lists what Ferrite cannot run)",
            path = model_path.display()
        ));
    }
    let bytes = AlignedBytes::from(&raw[..]);
    let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let names = ShownNames::for_model(model_path, bytes.as_bytes());
    let describe = |index: usize| {
        model.tensor_info(index).map(|t| json!({"name": names.tensor(index, t.name), "index": index, "dtype": t.desc.dtype.name(), "shape": t.desc.shape.dims()}))
    };
    // An input's or output's scale and zero point, when the model is quantized at its border.
    let with_quantization = |mut t: serde_json::Value, q: Option<ferrite_core::Quantization>| {
        if let Some(q) = q {
            t["scale"] = json!(q.scale);
            t["zero_point"] = json!(q.zero_point);
        }
        t
    };
    let inputs: Vec<_> = (0..model.input_count())
        .filter_map(|i| {
            Some(with_quantization(
                describe(model.input_tensor(i)?)?,
                model.input_quantization(i),
            ))
        })
        .collect();
    let outputs: Vec<_> = (0..model.output_count())
        .filter_map(|i| {
            Some(with_quantization(
                describe(model.output_tensor(i)?)?,
                model.output_quantization(i),
            ))
        })
        .collect();
    let mut ops = Vec::new();
    for i in 0..model.len() {
        let Some(step) = model.step(i) else { continue };
        let tensors = |list: ferrite_hal::TensorList<'_>| -> Vec<serde_json::Value> {
            (0..list.len())
                .map(|k| {
                    list.index(k)
                        .and_then(|t| Some((t as usize, model.tensor_info(t as usize)?)))
                        .map(|(t, info)| json!(names.tensor(t, info.name)))
                        .unwrap_or(json!(null))
                })
                .collect()
        };
        let output = step.outputs.get(0);
        ops.push(json!({
            "index": i,
            "op": op_label(&step.op),
            "output_dtype": output.map(|d| d.dtype.name()),
            "output_shape": output.map(|d| d.shape.dims().to_vec()),
            "macs": plan_view::macs(&model, i),
            "name": names.op(i, model.op_name(i).unwrap_or("")),
            "inputs": tensors(step.inputs),
            "outputs": tensors(step.outputs),
            "scratch_bytes": step.scratch.map(|s| s.bytes).unwrap_or(0),
        }));
    }
    let mut arena = Vec::new();
    for t in 0..model.tensor_count() {
        if let Some(info) = model.tensor_info(t) {
            if let Location::Arena(offset) = info.desc.location {
                arena.push(json!({"name": names.tensor(t, info.name), "offset": offset, "bytes": info.desc.bytes, "dtype": info.desc.dtype.name(), "shape": info.desc.shape.dims()}));
            }
        }
    }
    let plan = plan_view::lifetimes(&model, |t, stored| names.tensor(t, stored));
    if let Some(path) = plot {
        let title = model_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let svg = plan_view::svg(&model, &plan, &title);
        files::write_atomic(path, svg.as_bytes(), &[model_path]).map_err(|e| e.to_string())?;
    }
    let plan_json: Vec<serde_json::Value> = plan
        .iter()
        .map(|r| json!({"name": r.name, "aliases": r.aliases, "offset": r.offset, "bytes": r.bytes, "first_step": r.first, "last_step": r.last, "scratch": r.scratch}))
        .collect();
    let doc = json!({
        "file_bytes": model.file_bytes(),
        "weights_bytes": model.weights_bytes(),
        "arena_bytes": model.arena_bytes(),
        "arena_lower_bound": model.arena_lower_bound(),
        "ops": ops,
        "inputs": inputs,
        "outputs": outputs,
        "arena_tensors": arena,
        "arena_plan": plan_json,
    });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", model_path.display());
    println!(
        "  file {} bytes, weights {} bytes",
        model.file_bytes(),
        model.weights_bytes()
    );
    println!(
        "  arena {} bytes, lower bound {} bytes ({:.3}x)",
        model.arena_bytes(),
        model.arena_lower_bound(),
        ratio(model.arena_bytes(), model.arena_lower_bound())
    );
    for (label, list) in [("input", &doc["inputs"]), ("output", &doc["outputs"])] {
        for t in list.as_array().into_iter().flatten() {
            let quantization = match (t["scale"].as_f64(), t["zero_point"].as_i64()) {
                (Some(scale), Some(zero)) => format!("  scale {}, zero point {zero}", scale as f32),
                _ => String::new(),
            };
            println!(
                "  {label}  {} {} {}{quantization}",
                t["name"].as_str().unwrap_or(""),
                t["dtype"].as_str().unwrap_or(""),
                t["shape"]
            );
        }
    }
    println!("  ops ({}):", model.len());
    println!(
        "    {:<4} {:<22} {:<26} {:>12}  name",
        "#", "op", "output", "MACs"
    );
    for op in &ops {
        let shape: Vec<String> = op["output_shape"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| d.to_string())
            .collect();
        let output = format!(
            "{} [{}]",
            op["output_dtype"].as_str().unwrap_or(""),
            shape.join(",")
        );
        let macs = op["macs"]
            .as_u64()
            .map_or_else(|| "-".to_string(), thousands);
        let scratch = match op["scratch_bytes"].as_u64() {
            Some(0) | None => String::new(),
            Some(s) => format!("  (scratch {s} B)"),
        };
        println!(
            "    {:<4} {:<22} {:<26} {:>12}  {}{scratch}",
            op["index"].as_u64().unwrap_or(0),
            op["op"].as_str().unwrap_or(""),
            output,
            macs,
            plan_view::shorten(op["name"].as_str().unwrap_or(""), 48)
        );
    }
    let total: u64 = ops.iter().filter_map(|o| o["macs"].as_u64()).sum();
    if total > 0 {
        println!("    {:>67}  in all", thousands(total));
    }
    println!("  arena plan (offset, bytes, the steps each region is live in):");
    for r in &plan {
        let also = r.aliases_note();
        println!(
            "    [{:>8} .. {:>8}) {:>8} B  steps {:>3}-{:<3}  {}{also}",
            r.offset,
            r.offset + r.bytes,
            r.bytes,
            r.first,
            r.last,
            plan_view::shorten(&r.name, 48)
        );
    }
    if let Some(path) = plot {
        println!("  plan drawn in {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
