//! The ONNX backend node-test harness.
//!
//! Runs every test under `onnx/backend/test/data/node` (from the `onnx==1.22.0` wheel; the
//! directory comes from `$FERRITE_NODE_TESTS`) on a device: tests whose model the planner
//! refuses are *skipped* with a one-word reason, the rest run and are compared like the ONNX
//! backend runner does (rtol 1e-3, atol 1e-5). The outcome of every test that does not pass is
//! listed in a checked-in expectations file; any difference from it — a new failure, a new skip,
//! or an unexpected pass — fails the suite, so the file always tells the truth.
//! `FERRITE_UPDATE_EXPECTATIONS=1` rewrites the file instead.

use crate::compare::allclose;
use crate::Backend;
use ferrite_core::Model;
use ferrite_hal::DType;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::onnx::proto::{ModelProto, TensorProto};
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::compile::tensor::HostTensor;
use ferrite_tools::host::error::RunError;
use ferrite_tools::host::npy::NpyArray;
use ferrite_tools::PackError;
use prost::Message;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Relative tolerance (as the ONNX backend runner).
pub const RTOL: f32 = 1e-3;
/// Absolute tolerance (ONNX uses 1e-7; 1e-5 allows f32 kernels' summation order).
pub const ATOL: f32 = 1e-5;

/// How one test ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Ran and matched.
    Pass,
    /// Ran (or tried to) and did not match; one-word reason.
    Fail(String),
    /// Refused by the planner; one-word reason.
    Skip(String),
}

impl Outcome {
    fn line(&self) -> Option<String> {
        match self {
            Outcome::Pass => None,
            Outcome::Fail(r) => Some(format!("fail {r}")),
            Outcome::Skip(r) => Some(format!("skip {r}")),
        }
    }
}

/// `$FERRITE_NODE_TESTS`, the `node` directory of the onnx wheel's backend test data.
pub fn node_tests_dir() -> Result<PathBuf, String> {
    let dir = std::env::var_os("FERRITE_NODE_TESTS")
        .map(PathBuf::from)
        .ok_or("FERRITE_NODE_TESTS is not set: point it at onnx/backend/test/data/node of onnx==1.22.0 (scripts/test.sh does)")?;
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    Ok(dir)
}

fn skip_reason(e: &PackError) -> String {
    match e {
        PackError::Unsupported(report) => {
            let reasons: Vec<&str> = report.items.iter().map(|i| i.reason.as_str()).collect();
            if reasons.iter().any(|r| r.contains("data-dependent")) {
                "data-dependent-shape"
            } else if reasons
                .iter()
                .any(|r| r.starts_with("op '") || r.starts_with("domain"))
            {
                "unsupported-op"
            } else if reasons.iter().any(|r| r.contains("type")) {
                "unsupported-dtype"
            } else if reasons.iter().any(|r| r.contains("constant")) {
                "dynamic-input"
            } else {
                "unsupported-attribute"
            }
        }
        PackError::Invalid(m) if m.contains("not a tensor") => "unsupported-type",
        PackError::Invalid(m) if m.contains("type") => "unsupported-dtype",
        PackError::Opset { .. } => "unsupported-opset",
        PackError::Symbolic(_) => "symbolic-shape",
        PackError::Decode(_) => "invalid-model",
        _ => "pack-error",
    }
    .to_string()
}

fn needs_constants(e: &PackError) -> bool {
    matches!(e, PackError::Unsupported(r) if r.items.iter().any(|i| i.reason.contains("must be a constant")))
}

/// Names of the graph inputs that are not initializers, in order.
fn graph_input_names(onnx: &[u8]) -> Vec<String> {
    let Some(graph) = ModelProto::decode(onnx).ok().and_then(|m| m.graph) else {
        return Vec::new();
    };
    graph
        .input
        .iter()
        .filter(|i| !graph.initializer.iter().any(|t| t.name == i.name))
        .map(|i| i.name.clone())
        .collect()
}

fn read_tensor(path: &Path) -> Result<NpyArray, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let proto = TensorProto::decode(&bytes[..]).map_err(|e| e.to_string())?;
    let t = HostTensor::from_proto(&proto).map_err(|e| e.to_string())?;
    Ok(NpyArray {
        dtype: t.dtype,
        shape: t.shape.clone(),
        bytes: t.to_le_bytes(),
    })
}

/// Runs one node test directory on backend `B`, returning its outcome and main op type.
pub fn run_test<B: Backend>(dir: &Path) -> (Outcome, String) {
    let Ok(onnx) = std::fs::read(dir.join("model.onnx")) else {
        return (Outcome::Skip("no-model".into()), String::new());
    };
    let op = ModelProto::decode(&onnx[..])
        .ok()
        .and_then(|m| m.graph)
        .and_then(|g| g.node.first().map(|n| n.op_type.clone()))
        .unwrap_or_default();
    let data = dir.join("test_data_set_0");
    let mut inputs = Vec::new();
    let mut expected = Vec::new();
    for (prefix, list) in [("input", &mut inputs), ("output", &mut expected)] {
        for i in 0.. {
            let path = data.join(format!("{prefix}_{i}.pb"));
            if !path.exists() {
                break;
            }
            match read_tensor(&path) {
                Ok(t) => list.push(t),
                Err(_) => return (Outcome::Skip("unsupported-dtype".into()), op),
            }
        }
    }
    // Ferrite plans statically: shape-like inputs (integers, scalars such as Clip's bounds) must
    // be known at pack time. When the planner asks for that, the test's values are frozen in.
    let input_names = graph_input_names(&onnx);
    let mut options = PackOptions::default();
    let packed = match pack(&onnx, &options) {
        Ok(p) => p,
        Err(e) if needs_constants(&e) && input_names.len() == inputs.len() => {
            // First the shape-like inputs (integers, scalars); then, if still needed, every
            // input but the first (float parameters such as Resize's scales).
            let freeze = |options: &mut PackOptions, all: bool| {
                options.constants.clear();
                for (k, (name, value)) in input_names.iter().zip(&inputs).enumerate() {
                    let shape_like = value.dtype != DType::F32 || value.shape.is_empty();
                    if shape_like || (all && k > 0) {
                        let t = HostTensor::from_le_bytes(
                            value.dtype,
                            value.shape.clone(),
                            &value.bytes,
                        );
                        if let Some(t) = t {
                            options.constants.push((
                                name.clone(),
                                ferrite_tools::compile::pack::Constant::Array(t),
                            ));
                        }
                    }
                }
            };
            freeze(&mut options, false);
            match pack(&onnx, &options) {
                Ok(p) => p,
                Err(e) if needs_constants(&e) => {
                    freeze(&mut options, true);
                    match pack(&onnx, &options) {
                        Ok(p) => p,
                        Err(e) => return (Outcome::Skip(skip_reason(&e)), op),
                    }
                }
                Err(e) => return (Outcome::Skip(skip_reason(&e)), op),
            }
        }
        Err(e) => return (Outcome::Skip(skip_reason(&e)), op),
    };
    let inputs: Vec<NpyArray> = input_names
        .iter()
        .zip(inputs)
        .filter(|(n, _)| !options.constants.iter().any(|(c, _)| c == *n))
        .map(|(_, v)| v)
        .collect();
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = match Model::load(bytes.as_bytes()) {
        Ok(m) => m,
        Err(_) => return (Outcome::Fail("invalid-plan".into()), op),
    };
    // Inputs that folded away (constant in the test) are not model inputs.
    let inputs: Vec<NpyArray> = if inputs.len() == model.input_count() {
        inputs
    } else {
        return (Outcome::Skip("constant-input".into()), op);
    };
    let outputs = match B::run(&model, &inputs) {
        Ok(o) => o,
        Err(RunError::Session {
            kind: ferrite_hal::ErrorKind::Unsupported,
            ..
        }) => return (Outcome::Fail("device-unsupported".into()), op),
        Err(_) => return (Outcome::Fail("runtime-error".into()), op),
    };
    if outputs.len() != expected.len() {
        return (Outcome::Fail("output-count".into()), op);
    }
    for (a, e) in outputs.iter().zip(&expected) {
        if allclose(a, e, RTOL, ATOL).is_err() {
            return (Outcome::Fail("mismatch".into()), op);
        }
    }
    (Outcome::Pass, op)
}

/// Parses an expectations file: `test_name fail|skip reason` per line, `#` comments.
pub fn read_expectations(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            l.split_once(' ')
                .map(|(n, r)| (n.to_string(), r.trim().to_string()))
        })
        .collect()
}

/// Runs all node tests on `B` and checks them against `expectations`. Returns the summary on
/// success, every difference on failure.
pub fn run_suite<B: Backend>(expectations: &Path) -> Result<String, String> {
    run_suites::<B>(&[node_tests_dir()?], "node tests", expectations)
}

/// The model tests the onnx wheel ships next to the node tests: `pytorch-converted` (PyTorch
/// modules) and `pytorch-operator` (single PyTorch operators), run like node tests.
pub fn pytorch_dirs() -> Result<Vec<PathBuf>, String> {
    let node = node_tests_dir()?;
    let data = node
        .parent()
        .ok_or("the node tests directory has no parent")?;
    let dirs: Vec<PathBuf> = ["pytorch-converted", "pytorch-operator"]
        .iter()
        .map(|d| data.join(d))
        .collect();
    match dirs.iter().find(|d| !d.is_dir()) {
        Some(missing) => Err(format!("{} is not a directory", missing.display())),
        None => Ok(dirs),
    }
}

/// Runs every test directory under each of `dirs` on `B` and checks the outcomes against
/// `expectations` (see [`run_suite`]).
pub fn run_suites<B: Backend>(
    dirs: &[PathBuf],
    label: &str,
    expectations: &Path,
) -> Result<String, String> {
    let mut names: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        names.extend(
            std::fs::read_dir(dir)
                .map_err(|e| e.to_string())?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir()),
        );
    }
    names.sort_by_key(|p| p.file_name().map(|n| n.to_os_string()));
    let mut outcomes = BTreeMap::new();
    let mut per_op: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for path in &names {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let (outcome, op) = std::panic::catch_unwind(|| run_test::<B>(path))
            .unwrap_or((Outcome::Fail("panic".into()), String::new()));
        match &outcome {
            Outcome::Pass => passed += 1,
            Outcome::Fail(_) => failed += 1,
            Outcome::Skip(_) => skipped += 1,
        }
        if !matches!(outcome, Outcome::Skip(_)) {
            let entry = per_op.entry(op).or_default();
            entry.1 += 1;
            if outcome == Outcome::Pass {
                entry.0 += 1;
            }
        }
        outcomes.insert(name, outcome);
    }
    let mut per_op_line = String::new();
    for (op, (p, t)) in &per_op {
        per_op_line.push_str(&format!("{op} {p}/{t}, "));
    }
    let summary = format!(
        "{label} on {} ({} in all): {passed} passed, {failed} failed (all expected), {skipped} skipped\nper op (passed/run): {}",
        B::NAME,
        names.len(),
        per_op_line.trim_end_matches(", ")
    );
    if std::env::var_os("FERRITE_UPDATE_EXPECTATIONS").is_some() {
        let mut text = format!("# ONNX {label} on the {} device that do not pass: `name fail|skip reason`.\n# Regenerate with FERRITE_UPDATE_EXPECTATIONS=1 cargo test -p ferrite-tests --test {}\n", B::NAME, B::NAME);
        for (name, outcome) in &outcomes {
            if let Some(l) = outcome.line() {
                text.push_str(&format!("{name} {l}\n"));
            }
        }
        std::fs::write(expectations, text).map_err(|e| e.to_string())?;
        return Ok(summary);
    }
    let expected = read_expectations(expectations);
    let mut differences = Vec::new();
    for (name, outcome) in &outcomes {
        let actual = outcome.line();
        let wanted = expected.get(name).cloned();
        if actual != wanted {
            differences.push(format!(
                "{name}: expected {}, got {}",
                wanted.as_deref().unwrap_or("pass"),
                actual.as_deref().unwrap_or("pass")
            ));
        }
    }
    for name in expected.keys() {
        if !outcomes.contains_key(name) {
            differences.push(format!("{name}: listed in the expectations but not found"));
        }
    }
    if differences.is_empty() {
        Ok(summary)
    } else {
        Err(format!(
            "{} of the {label} differ from {} (update it with FERRITE_UPDATE_EXPECTATIONS=1 if the change is intended):\n{}\n{summary}",
            differences.len(),
            expectations.display(),
            differences.join("\n")
        ))
    }
}
