//! The CLI a new user meets: symbolic shapes, input and constant errors that name what is
//! wrong, files recognised by content, output files named, and the small things (units,
//! plurals, help text) — one check per item of the "CLI a new user meets" issue.

use ferrite_hal::DType;
use ferrite_tools::compile::onnx::build::{attr_int, tiny_mlp, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::data_type;
use ferrite_tools::host::npy::{self, NpyArray};
use std::path::{Path, PathBuf};

mod common;
use common::{assert_error, ferrite, s, temp_dir};

fn stdout(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn floats(dir: &Path, name: &str, shape: &[usize]) -> PathBuf {
    let n: usize = shape.iter().product();
    let path = dir.join(name);
    npy::write(
        &path,
        &NpyArray {
            dtype: DType::F32,
            shape: shape.to_vec(),
            bytes: (0..n)
                .flat_map(|i| (i as f32 * 0.25).to_le_bytes())
                .collect(),
        },
    )
    .unwrap();
    path
}

/// x [batch, 3, h] → Relu → y.
fn symbolic_model(dir: &Path) -> PathBuf {
    let path = dir.join("symbolic.onnx");
    let model = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::S("batch"), D::N(3), D::S("h")])
        .node("Relu", "r", &["x"], &["y"], vec![])
        .output("y")
        .encode();
    std::fs::write(&path, model).unwrap();
    path
}

#[test]
fn symbolic_shapes_say_the_flag_to_pass_and_symbols_can_be_fixed_everywhere() {
    let dir = temp_dir("ux-shapes");
    let onnx = symbolic_model(&dir);
    let frt = dir.join("out.frt");
    // A non-leading symbol: the exact flag, with the symbol to size.
    assert_error(
        &ferrite(&["pack", s(&onnx), "-o", s(&frt)]),
        "'x' is [batchx3xh]: pass --input-shape x=1x3xh with sizes for h (or --input-shape SYMBOL=N",
    );
    // `check` reports what `pack` would refuse.
    let out = ferrite(&["check", s(&onnx)]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("x: shape not fully known"), "{text}");
    // SYMBOL=N fixes the symbol; the leading one is taken as 1 with a note.
    let text = stdout(&ferrite(&[
        "pack",
        s(&onnx),
        "-o",
        s(&frt),
        "--input-shape",
        "h=5",
    ]));
    assert!(
        text.contains("leading dimension 'batch' is taken as 1"),
        "{text}"
    );
    let info = stdout(&ferrite(&["inspect", s(&frt), "--json"]));
    let json: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(json["inputs"][0]["shape"], serde_json::json!([1, 3, 5]));
    let text = stdout(&ferrite(&[
        "pack",
        s(&onnx),
        "-o",
        s(&frt),
        "--input-shape",
        "h=5",
        "--input-shape",
        "batch=4",
    ]));
    assert!(!text.contains("note:"), "{text}");
    let info = stdout(&ferrite(&["inspect", s(&frt), "--json"]));
    let json: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(json["inputs"][0]["shape"], serde_json::json!([4, 3, 5]));
    assert_error(
        &ferrite(&["pack", s(&onnx), "-o", s(&frt), "--input-shape", "w=5"]),
        "no input or symbolic dimension 'w' (inputs: x; symbolic dimensions: batch, h)",
    );
    assert_error(
        &ferrite(&["pack", s(&onnx), "-o", s(&frt), "--input-shape", "h=5x2"]),
        "'h' is a symbolic dimension: give it one size",
    );
    assert_error(
        &ferrite(&[
            "pack",
            s(&onnx),
            "-o",
            s(&frt),
            "--input-shape",
            "h=5",
            "--input-shape",
            "h=6",
        ]),
        "--input-shape h is given twice",
    );
    // `run` of an .onnx takes the shapes from the arrays; `bench` accepts --input-shape.
    let x = floats(&dir, "x.npy", &[2, 3, 7]);
    let out_dir = dir.join("out");
    let text = stdout(&ferrite(&[
        "run",
        s(&onnx),
        "--input",
        s(&x),
        "--out-dir",
        s(&out_dir),
    ]));
    assert!(text.contains("y float32 [2, 3, 7]"), "{text}");
    let out = ferrite(&[
        "bench",
        s(&onnx),
        "--runs",
        "3",
        "--input-shape",
        "h=4",
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["runs"], 3);
}

#[test]
fn inputs_and_constants_that_do_not_fit_are_named() {
    let dir = temp_dir("ux-inputs");
    // a [1, 2] + b [1, 2] → y; and a Reshape whose target shape is an input.
    let two = dir.join("two.onnx");
    let model = ModelBuilder::new(13)
        .input("a", data_type::FLOAT, &[D::N(1), D::N(2)])
        .input("b", data_type::FLOAT, &[D::N(1), D::N(2)])
        .node("Add", "add", &["a", "b"], &["y"], vec![])
        .output("y")
        .encode();
    std::fs::write(&two, model).unwrap();
    let a = floats(&dir, "a.npy", &[1, 2]);
    let out_dir = dir.join("out");
    let run = |args: &[&str]| {
        let mut all = vec!["run", s(&two), "--out-dir", s(&out_dir), "--input"];
        all.extend_from_slice(args);
        ferrite(&all)
    };
    let c_arg = format!("c={}", s(&a));
    assert_error(&run(&[&c_arg]), "the model has no input 'c' (inputs: a, b)");
    let a_arg = format!("a={}", s(&a));
    assert_error(&run(&[&a_arg]), "missing input(s): b (inputs: a, b");
    assert_error(&run(&[&a_arg, &a_arg]), "input 'a' is given twice");
    let b_arg = format!("b={}", s(&a));
    assert!(stdout(&run(&[&b_arg, &a_arg])).contains("output_0.npy  y float32 [1, 2]"));

    let reshape = dir.join("reshape.onnx");
    let model = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(3)])
        .input("shape", data_type::INT64, &[D::N(1)])
        .node("Reshape", "r", &["x", "shape"], &["y"], vec![])
        .output("y")
        .encode();
    std::fs::write(&reshape, model).unwrap();
    let frt = dir.join("reshape.frt");
    let out = ferrite(&["pack", s(&reshape), "-o", s(&frt)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains(
                "it depends on graph input 'shape': freeze it with --constant shape=NUMBER (one value) or shape=FILE.npy"
            ),
        "{err}"
    );
    let floats_for_int64 = floats(&dir, "six.npy", &[1]);
    let pack = |constants: &[&str]| {
        let mut all = vec!["pack", s(&reshape), "-o", s(&frt)];
        for c in constants {
            all.extend_from_slice(&["--constant", c]);
        }
        ferrite(&all)
    };
    let wrong_type = format!("shape={}", s(&floats_for_int64));
    assert_error(
        &pack(&[&wrong_type]),
        "--constant shape: input 'shape' is int64, the array is float32",
    );
    let six = dir.join("six64.npy");
    npy::write(
        &six,
        &NpyArray {
            dtype: DType::I64,
            shape: vec![1],
            bytes: 6i64.to_le_bytes().to_vec(),
        },
    )
    .unwrap();
    let unknown = format!("shap={}", s(&six));
    assert_error(
        &pack(&[&unknown]),
        "--constant shap: the model has no input 'shap' (inputs: x, shape)",
    );
    let good = format!("shape={}", s(&six));
    assert_error(&pack(&[&good, &good]), "--constant shape is given twice");
    assert!(pack(&[&good]).status.success());
    // A plain number freezes a one-element input, converted to its type.
    assert!(pack(&["shape=6"]).status.success());
    assert_error(
        &pack(&["shape=6.5"]),
        "--constant shape=6.5: input 'shape' is int64, which cannot hold 6.5",
    );
    assert_error(&pack(&["shape"]), "expected NAME=FILE.npy or NAME=NUMBER");
}

#[test]
fn files_are_recognised_by_content_and_outputs_are_named() {
    let dir = temp_dir("ux-files");
    let onnx = dir.join("mlp.onnx");
    std::fs::write(&onnx, tiny_mlp()).unwrap();
    let frt = dir.join("mlp.frt");
    stdout(&ferrite(&["pack", s(&onnx), "-o", s(&frt)]));
    assert_error(
        &ferrite(&["inspect", s(&onnx)]),
        "is an ONNX model, not a packed one: `ferrite pack",
    );
    // By content: a packed model renamed .onnx is still refused by pack as packed.
    let renamed = dir.join("renamed.onnx");
    std::fs::copy(&frt, &renamed).unwrap();
    assert_error(
        &ferrite(&["pack", s(&renamed), "-o", s(&dir.join("again.frt"))]),
        "is already packed (a .frt file)",
    );
    assert_error(
        &ferrite(&["pack", s(&onnx), "-o", s(&dir.join("missing/out.frt"))]),
        "the folder",
    );
    let text = stdout(&ferrite(&[
        "pack",
        s(&onnx),
        "-o",
        s(&dir.join("my-model.v2.frt")),
        "--emit",
        "rust",
    ]));
    assert!(text.contains("my_model_v2.rs"), "{text}");
    assert!(dir.join("my_model_v2.rs").is_file());
    // run: which file is which output; --print shows the values or the top scores.
    let x = floats(&dir, "x.npy", &[1, 4]);
    let not_a_dir = dir.join("file");
    std::fs::write(&not_a_dir, b"").unwrap();
    assert_error(
        &ferrite(&["run", s(&frt), "--input", s(&x), "--out-dir", s(&not_a_dir)]),
        "exists and is not a folder",
    );
    let out_dir = dir.join("out");
    let text = stdout(&ferrite(&[
        "run",
        s(&frt),
        "--input",
        s(&x),
        "--out-dir",
        s(&out_dir),
        "--print",
    ]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].ends_with("output_0.npy  y float32 [1, 3]"),
        "{text}"
    );
    assert!(lines[1].trim_start().starts_with("top 3 of 3: "), "{text}");
}

#[test]
fn small_things_a_user_reads() {
    let dir = temp_dir("ux-small");
    let onnx = dir.join("mlp.onnx");
    std::fs::write(&onnx, tiny_mlp()).unwrap();
    let frt = dir.join("mlp.frt");
    // --max-arena with units.
    assert!(
        ferrite(&["pack", s(&onnx), "-o", s(&frt), "--max-arena", "64K"])
            .status
            .success()
    );
    assert_error(
        &ferrite(&["pack", s(&onnx), "-o", s(&frt), "--max-arena", "0K"]),
        "more than --max-arena 0 bytes",
    );
    let out = ferrite(&["pack", s(&onnx), "-o", s(&frt), "--max-arena", "lots"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("a number of bytes, or with K, M or G"));
    // The help lists the device values and what --profile measures where.
    let help = stdout(&ferrite(&["bench", "--help"]));
    assert!(
        help.contains(
            "cpu, vulkan or vulkan:N, cuda or cuda:N, qemu-m0, qemu-m4, qemu-m7, qemu-m33"
        ),
        "{help}"
    );
    assert!(help.contains("instructions on qemu-*"), "{help}");
    // `devices` does not call the CPU float-only.
    let devices = stdout(&ferrite(&["devices"]));
    assert!(
        devices.contains("(float and int8)") && !devices.contains("(f32)"),
        "{devices}"
    );
    // No "ops: 0 ()": a model whose output is its input.
    let identity = dir.join("identity.onnx");
    let model = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(2)])
        .node("Identity", "i", &["x"], &["y"], vec![])
        .output("y")
        .encode();
    std::fs::write(&identity, model).unwrap();
    let text = stdout(&ferrite(&[
        "pack",
        s(&identity),
        "-o",
        s(&dir.join("identity.frt")),
    ]));
    assert!(
        text.contains("ops:          none") && !text.contains("0 ()"),
        "{text}"
    );
    // The opset range in the error is the code's.
    let old = dir.join("old.onnx");
    let model = ModelBuilder::new(1)
        .input("x", data_type::FLOAT, &[D::N(1)])
        .node("Relu", "r", &["x"], &["y"], vec![])
        .output("y")
        .encode();
    std::fs::write(&old, model).unwrap();
    assert_error(
        &ferrite(&["pack", s(&old), "-o", s(&frt)]),
        &format!(
            "reads opsets {} to {}",
            ferrite_tools::compile::onnx::MIN_OPSET,
            ferrite_tools::compile::onnx::MAX_OPSET
        ),
    );
}

#[test]
fn an_opset_out_of_range_names_the_range_and_the_converter() {
    let dir = temp_dir("ux-opset");
    let frt = dir.join("out.frt");
    for opset in [5, 28] {
        let onnx = dir.join(format!("opset{opset}.onnx"));
        let model = ModelBuilder::new(opset)
            .input("x", data_type::FLOAT, &[D::N(1), D::N(4)])
            .node("Relu", "relu", &["x"], &["y"], vec![])
            .output("y")
            .encode();
        std::fs::write(&onnx, model).unwrap();
        let out = ferrite(&["pack", s(&onnx), "-o", s(&frt)]);
        assert_error(
            &out,
            &format!("ONNX opset {opset} is not supported (Ferrite reads opsets 6 to 27)"),
        );
        assert_error(&out, "onnx.version_converter.convert_version");
        assert!(!frt.exists(), "a refused model left an output file");
    }
}

#[test]
fn check_says_which_ops_a_device_cannot_run() {
    let dir = temp_dir("ux-check");
    let onnx = dir.join("mlp.onnx");
    std::fs::write(&onnx, tiny_mlp()).unwrap();
    let text = stdout(&ferrite(&["check", s(&onnx), "--device", "vulkan"]));
    assert!(
        text.contains("vulkan runs every op of the packed plan"),
        "{text}"
    );
    // An integer model: the CPU runs it, Vulkan and the float-only Cortex-M0 firmware do not.
    let int8 = dir.join("int8.onnx");
    std::fs::write(
        &int8,
        ferrite_tools::compile::onnx::build::border_quantized_model(),
    )
    .unwrap();
    assert!(stdout(&ferrite(&["check", s(&int8), "--device", "cpu"])).contains("cpu runs every op"));
    for device in ["vulkan", "qemu-m0"] {
        let out = ferrite(&["check", s(&int8), "--device", device]);
        assert!(!out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("but {device} cannot run")) && text.contains("(int8)"),
            "{text}"
        );
    }
    assert_error(
        &ferrite(&["check", s(&onnx), "--device", "tpu"]),
        "unknown device 'tpu'",
    );
}

/// A minimal XML check: every tag closed in order, attributes quoted, text escaped.
fn well_formed(xml: &str) -> Result<usize, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut elements = 0;
    let mut rest = xml;
    while let Some(start) = rest.find('<') {
        let text = &rest[..start];
        if text.contains('>') || (text.contains('&') && !text.contains(';')) {
            return Err(format!("unescaped text: {text}"));
        }
        let end = rest[start..].find('>').ok_or("an unclosed tag")? + start;
        let tag = &rest[start + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            if stack.pop().as_deref() != Some(name.trim()) {
                return Err(format!("</{name}> closes nothing open"));
            }
        } else {
            elements += 1;
            let name: String = tag
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '/')
                .collect();
            if !tag.matches('"').count().is_multiple_of(2) {
                return Err(format!("unbalanced quotes in <{tag}>"));
            }
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        rest = &rest[end + 1..];
    }
    if stack.is_empty() {
        Ok(elements)
    } else {
        Err(format!("unclosed: {stack:?}"))
    }
}

#[test]
fn inspect_is_readable_and_draws_the_plan() {
    let dir = temp_dir("ux-inspect");
    // A chain of convolutions with a 250-character name, as tf2onnx writes them.
    let long = format!("model/{}/conv", "block".repeat(49));
    let w: Vec<f32> = (0..4 * 2 * 3 * 3)
        .map(|i| (i % 7) as f32 * 0.1 - 0.3)
        .collect();
    let onnx = dir.join("conv.onnx");
    let model = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(2), D::N(8), D::N(8)])
        .init_f32("w", &[4, 2, 3, 3], &w)
        .node("Conv", &long, &["x", "w"], &["c"], vec![])
        .node(
            "Softmax",
            "softmax",
            &["c"],
            &["y"],
            vec![attr_int("axis", 1)],
        )
        .output("y")
        .encode();
    std::fs::write(&onnx, model).unwrap();
    let frt = dir.join("conv.frt");
    stdout(&ferrite(&["pack", s(&onnx), "-o", s(&frt)]));
    let svg_path = dir.join("plan.svg");
    let text = stdout(&ferrite(&["inspect", s(&frt), "--plot", s(&svg_path)]));
    // Names shortened in the table, in full in --json; output shape and MACs per step.
    assert!(text.lines().all(|l| l.chars().count() < 140), "{text}");
    assert!(
        text.contains("model/blockblock") && text.contains('…'),
        "{text}"
    );
    // 4 x 6 x 6 outputs, each 2 channels x 3x3.
    assert!(
        text.contains("float32 [1,4,6,6]") && text.contains("2,592"),
        "{text}"
    );
    assert!(text.contains("steps   0-1"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&ferrite(&["inspect", s(&frt), "--json"]))).unwrap();
    assert_eq!(json["ops"][0]["name"], serde_json::json!(long));
    assert_eq!(json["ops"][0]["macs"], serde_json::json!(2592));
    assert_eq!(json["ops"][1]["macs"], serde_json::Value::Null);
    assert_eq!(
        json["ops"][0]["output_shape"],
        serde_json::json!([1, 4, 6, 6])
    );
    let plan = json["arena_plan"].as_array().unwrap();
    assert!(plan
        .iter()
        .any(|r| r["first_step"] == 0 && r["last_step"] == 1));
    // The picture: well-formed, one rectangle with a title per plan row, the peak marked.
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    well_formed(&svg).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    let rects = svg.matches("<rect class=\"tensor\"").count()
        + svg.matches("<rect class=\"scratch\"").count();
    assert_eq!(rects, plan.len());
    assert!(
        svg.contains(&format!("<title>scratch of step 0 ({long})")),
        "full names on hover"
    );
    assert!(svg.contains("class=\"peak\"") && svg.contains("peak: "));
    assert!(well_formed("<a><b></a>").is_err());
}

#[test]
fn bench_writes_the_profile_as_a_trace_and_as_csv() {
    let dir = temp_dir("ux-trace");
    let onnx = dir.join("mlp.onnx");
    std::fs::write(&onnx, tiny_mlp()).unwrap();
    let frt = dir.join("mlp.frt");
    stdout(&ferrite(&["pack", s(&onnx), "-o", s(&frt)]));
    let steps = {
        let json: serde_json::Value =
            serde_json::from_str(&stdout(&ferrite(&["inspect", s(&frt), "--json"]))).unwrap();
        json["ops"].as_array().unwrap().clone()
    };
    let trace_path = dir.join("trace.json");
    let text = stdout(&ferrite(&[
        "bench",
        s(&frt),
        "--runs",
        "3",
        "--profile",
        "--trace",
        s(&trace_path),
    ]));
    assert!(text.contains("trace written to"), "{text}");
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&trace_path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    assert_eq!(events.len(), steps.len());
    let mut at = 0.0;
    for (event, step) in events.iter().zip(&steps) {
        assert_eq!(event["ph"], "X");
        assert_eq!(event["name"], step["op"]);
        assert_eq!(event["args"]["macs"], step["macs"]);
        assert!(
            (event["ts"].as_f64().unwrap() - at).abs() < 1e-6,
            "back to back"
        );
        at += event["dur"].as_f64().unwrap();
        assert!(event["args"]["median_us"].as_f64().unwrap() >= 0.0);
    }
    let csv = stdout(&ferrite(&[
        "bench",
        s(&frt),
        "--runs",
        "3",
        "--profile",
        "--csv",
    ]));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "step,op,name,macs,median_us");
    assert_eq!(lines.len(), steps.len() + 1);
    for (line, step) in lines[1..].iter().zip(&steps) {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields[1], format!("\"{}\"", step["op"].as_str().unwrap()));
        assert_eq!(
            fields[3],
            step["macs"]
                .as_u64()
                .map(|m| m.to_string())
                .unwrap_or_default()
        );
    }
}
