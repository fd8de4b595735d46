//! The model suite: every generated test model is packed, checked for a sound and tight memory
//! plan, run on a device, and compared with onnxruntime's output.

use crate::compare::{floats, relative_error};
use crate::{test_models_dir, Backend};
use ferrite_core::Model;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::ir::PlanGraph;
use ferrite_tools::compile::pack::{pack, PackOptions, Packed};
use ferrite_tools::host::npy;
use std::path::Path;

/// Largest accepted `max |ferrite - onnxruntime| / max |onnxruntime|`.
pub const TOLERANCE: f32 = 1e-4;
/// Largest accepted arena / lower bound.
pub const ARENA_SLACK: f64 = 1.10;

/// One model's results.
#[derive(Debug)]
pub struct ModelResult {
    /// Model name.
    pub name: String,
    /// Arena bytes.
    pub arena_bytes: usize,
    /// Lower bound.
    pub lower_bound: usize,
    /// Relative error against onnxruntime.
    pub relative_error: f32,
}

/// Names and pack options of the generated models (from `manifest.json`).
pub fn manifest() -> Result<Vec<(String, PackOptions)>, String> {
    let dir = test_models_dir();
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!("{}: {e} — generate the models with `python tests/models/generate.py {}` (scripts/test.sh does)", path.display(), dir.display())
    })?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (name, entry) in doc.as_object().ok_or("manifest is not an object")? {
        let mut input_shapes = Vec::new();
        for (input, dims) in entry["input_shapes"].as_object().ok_or("bad manifest")? {
            let dims = dims
                .as_array()
                .ok_or("bad manifest")?
                .iter()
                .map(|d| d.as_u64().unwrap_or(0) as usize)
                .collect();
            input_shapes.push((input.clone(), dims));
        }
        out.push((
            name.clone(),
            PackOptions {
                input_shapes,
                ..PackOptions::default()
            },
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Checks that no two tensors alive at the same step share bytes, except an alias and its root
/// and an in-place op's output with the dying input it overwrites.
pub fn check_no_overlap(packed: &Packed) -> Result<(), String> {
    let g: &PlanGraph = &packed.graph;
    let n = g.ops.len();
    let mut spans = Vec::new();
    for t in 0..g.tensors.len() {
        let Some(offset) = packed.memory.offset(t) else {
            continue;
        };
        let def = g.ops.iter().position(|op| op.outputs.contains(&t));
        let scratch_step = packed.memory.scratch.iter().position(|s| *s == Some(t));
        let readers: Vec<usize> = (0..n)
            .filter(|&s| g.ops[s].inputs.contains(&Some(t)))
            .collect();
        let is_input = g.inputs.contains(&t);
        let first = match (def, scratch_step, is_input) {
            (Some(d), _, _) => d,
            (None, Some(s), _) => s,
            (None, None, true) => 0,
            // Aliases are live whenever their readers are.
            (None, None, false) => match readers.first() {
                Some(&r) => r,
                None if g.outputs.contains(&t) => n,
                None => continue,
            },
        };
        let mut last = readers.last().copied().unwrap_or(first).max(first);
        if g.outputs.contains(&t) {
            last = n;
        }
        spans.push((t, offset, offset + g.tensors[t].bytes(), first, last));
    }
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            let live_together = a.3 <= b.4 && b.3 <= a.4;
            let bytes_overlap = a.1 < b.2 && b.1 < a.2 && a.1 < a.2 && b.1 < b.2;
            if !live_together || !bytes_overlap || g.root(a.0) == g.root(b.0) {
                continue;
            }
            let in_place = |x: &(usize, usize, usize, usize, usize),
                            y: &(usize, usize, usize, usize, usize)| {
                x.4 == y.3
                    && (x.1, x.2) == (y.1, y.2)
                    && g.ops[y.3].op.allows_in_place()
                    && g.ops[y.3]
                        .inputs
                        .iter()
                        .flatten()
                        .any(|&i| g.root(i) == g.root(x.0))
            };
            if in_place(a, b) || in_place(b, a) {
                continue;
            }
            return Err(format!(
                "'{}' [{}..{}) live {}..={} overlaps '{}' [{}..{}) live {}..={}",
                g.tensors[a.0].name, a.1, a.2, a.3, a.4, g.tensors[b.0].name, b.1, b.2, b.3, b.4
            ));
        }
    }
    Ok(())
}

/// Packs, checks and runs one model on backend `B`.
pub fn run_model<B: Backend>(
    dir: &Path,
    name: &str,
    options: &PackOptions,
) -> Result<ModelResult, String> {
    let onnx = std::fs::read(dir.join(format!("{name}.onnx"))).map_err(|e| e.to_string())?;
    let packed = pack(&onnx, options).map_err(|e| format!("{name}: {e}"))?;
    check_no_overlap(&packed).map_err(|e| format!("{name}: {e}"))?;
    let r = &packed.report;
    if r.arena_bytes as f64 > ARENA_SLACK * r.arena_lower_bound as f64 {
        return Err(format!(
            "{name}: arena {} exceeds {ARENA_SLACK} x lower bound {}",
            r.arena_bytes, r.arena_lower_bound
        ));
    }
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let input = npy::read(&dir.join(format!("{name}.input_0.npy"))).map_err(|e| e.to_string())?;
    let expected =
        npy::read(&dir.join(format!("{name}.output_0.npy"))).map_err(|e| e.to_string())?;
    let outputs = match B::run(&model, std::slice::from_ref(&input)) {
        Ok(o) => o,
        Err(ferrite_tools::host::error::RunError::Session {
            kind: ferrite_hal::ErrorKind::Unsupported,
            ..
        }) => return Err(format!("{name}: {UNSUPPORTED}")),
        Err(e) => return Err(format!("{name}: {e}")),
    };
    let actual = outputs.first().ok_or("no output")?;
    if B::NAME != crate::Cpu::NAME {
        // Every device must agree with the CPU device, not just with onnxruntime.
        let cpu = crate::Cpu::run(&model, &[input]).map_err(|e| format!("{name}: cpu: {e}"))?;
        let cpu = cpu.first().ok_or("no cpu output")?;
        let err = relative_error(&floats(actual), &floats(cpu));
        if err.is_nan() || err > TOLERANCE {
            return Err(format!(
                "{name}: relative error {err:e} against the cpu device exceeds {TOLERANCE:e}"
            ));
        }
    }
    if actual.shape != expected.shape {
        return Err(format!(
            "{name}: output shape {:?}, expected {:?}",
            actual.shape, expected.shape
        ));
    }
    let err = relative_error(&floats(actual), &floats(&expected));
    if err.is_nan() || err > TOLERANCE {
        return Err(format!(
            "{name}: relative error {err:e} exceeds {TOLERANCE:e}"
        ));
    }
    Ok(ModelResult {
        name: name.to_string(),
        arena_bytes: r.arena_bytes,
        lower_bound: r.arena_lower_bound,
        relative_error: err,
    })
}

/// How [`run_model`] reports a model the device refuses (an op kind it lacks).
pub const UNSUPPORTED: &str = "device-unsupported";

/// The models `tests/expectations/<device>-models.txt` lists as refused by device `B` (one
/// name per line, then a reason; `#` comments). A listed model that runs is a failure too, so
/// the list stays exact.
pub fn expected_unsupported<B: Backend>() -> Vec<String> {
    let path = crate::workspace_root()
        .join("tests/expectations")
        .join(format!("{}-models.txt", B::NAME));
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Runs every generated model on backend `B`; returns all results or all failures.
pub fn run_all<B: Backend>() -> Result<Vec<ModelResult>, String> {
    let dir = test_models_dir();
    let mut results = Vec::new();
    let mut failures = Vec::new();
    let refused = expected_unsupported::<B>();
    for (name, options) in manifest()? {
        let listed = refused.contains(&name);
        match run_model::<B>(&dir, &name, &options) {
            Ok(_) if listed => failures.push(format!(
                "{name} runs on {} but tests/expectations/{}-models.txt lists it as unsupported",
                B::NAME,
                B::NAME
            )),
            Err(e) if listed && e.ends_with(UNSUPPORTED) => {
                println!("{name:<18} unsupported on {} (expected)", B::NAME);
            }
            Ok(r) => {
                println!(
                    "{:<18} arena {:>8} B  lower bound {:>8} B  ({:.3}x)  rel err {:.2e}",
                    r.name,
                    r.arena_bytes,
                    r.lower_bound,
                    r.arena_bytes as f64 / r.lower_bound.max(1) as f64,
                    r.relative_error
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
