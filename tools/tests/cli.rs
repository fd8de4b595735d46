//! The `ferrite` CLI end to end: the DESIGN.md contract, and one-line errors with a non-zero
//! exit (never a panic) for every bad input.

use ferrite_hal::DType;
use ferrite_tools::compile::onnx::build::{
    attr_int, border_quantized_model, tiny_mlp, ModelBuilder, D,
};
use ferrite_tools::compile::onnx::proto::{data_type, TensorProto};
use ferrite_tools::host::npy::{self, NpyArray};
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{assert_error, ferrite, s, temp_dir};

/// A fresh directory holding the tiny MLP as `mlp.onnx` and packed as `mlp.frt`.
fn packed_mlp(name: &str) -> (PathBuf, PathBuf) {
    let dir = temp_dir(name);
    let onnx = dir.join("mlp.onnx");
    std::fs::write(&onnx, tiny_mlp()).unwrap();
    let frt = dir.join("mlp.frt");
    assert!(ferrite(&["pack", s(&onnx), "-o", s(&frt)]).status.success());
    (dir, frt)
}

fn write_input(dir: &Path, name: &str, dtype: DType, shape: Vec<usize>) -> PathBuf {
    let n: usize = shape.iter().product();
    let bytes = match dtype {
        DType::F32 => (0..n)
            .flat_map(|i| (i as f32 * 0.5 - 1.0).to_le_bytes())
            .collect(),
        _ => vec![0; n * dtype.size()],
    };
    let path = dir.join(name);
    npy::write(
        &path,
        &NpyArray {
            dtype,
            shape,
            bytes,
        },
    )
    .unwrap();
    path
}

#[test]
fn pack_run_inspect_bench_devices() {
    let dir = temp_dir("happy");
    let onnx = dir.join("tiny.onnx");
    std::fs::write(&onnx, tiny_mlp()).unwrap();
    let frt = dir.join("tiny.frt");
    let out = ferrite(&["pack", s(&onnx), "-o", s(&frt)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for word in ["ops:", "weights:", "arena:", "file:"] {
        assert!(text.contains(word), "pack output lacks {word}: {text}");
    }
    let x = write_input(&dir, "x.npy", DType::F32, vec![1, 4]);
    let out_dir = dir.join("out");
    for model in [&frt, &onnx] {
        let out = ferrite(&["run", s(model), "--input", s(&x), "--out-dir", s(&out_dir)]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let y = npy::read(&out_dir.join("output_0.npy")).unwrap();
        assert_eq!((y.dtype, y.shape.clone()), (DType::F32, vec![1, 3]));
    }
    let named = format!("x={}", s(&x));
    assert!(
        ferrite(&["run", s(&frt), "--input", &named, "--out-dir", s(&out_dir)])
            .status
            .success()
    );
    let out = ferrite(&["inspect", s(&frt), "--json"]);
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "file_bytes",
        "weights_bytes",
        "arena_bytes",
        "ops",
        "inputs",
        "outputs",
    ] {
        assert!(!doc[key].is_null(), "inspect --json lacks {key}");
    }
    assert_eq!(doc["inputs"][0]["name"], "x");
    assert_eq!(doc["inputs"][0]["shape"], serde_json::json!([1, 4]));
    assert!(ferrite(&["inspect", s(&frt)]).status.success());
    let out = ferrite(&["bench", s(&frt), "--runs", "5", "--json"]);
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["runs"], 5);
    assert!(doc["median_us"].as_f64().unwrap() > 0.0 && doc["p90_us"].as_f64().is_some());
    let out = ferrite(&["devices"]);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("cpu"));
    assert!(ferrite(&["check", s(&onnx)]).status.success());
}

#[test]
fn bad_onnx_files() {
    let dir = temp_dir("onnx");
    let frt = dir.join("out.frt");
    let garbage = dir.join("garbage.onnx");
    std::fs::write(&garbage, b"\x08\x07this is not protobuf \xff\xff\xff").unwrap();
    assert_error(
        &ferrite(&["pack", s(&garbage), "-o", s(&frt)]),
        "cannot parse ONNX model",
    );
    let truncated = dir.join("truncated.onnx");
    let tiny = tiny_mlp();
    std::fs::write(&truncated, &tiny[..tiny.len() / 2]).unwrap();
    assert_error(&ferrite(&["pack", s(&truncated), "-o", s(&frt)]), "ONNX");
    assert_error(
        &ferrite(&["pack", s(&dir.join("missing.onnx")), "-o", s(&frt)]),
        "missing.onnx",
    );

    // Two unsupported ops and a foreign domain: all reported at once, with node names.
    let unsupported = dir.join("unsupported.onnx");
    let model = ModelBuilder::new(13)
        .import("com.microsoft", 1)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(4)])
        .node("Unique", "unique_node", &["x"], &["a"], vec![])
        .node("RoiAlign", "roi_node", &["a"], &["b"], vec![])
        .node_in(
            "com.microsoft",
            "FusedGemm",
            "fused",
            &["b"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode();
    std::fs::write(&unsupported, model).unwrap();
    let out = ferrite(&["pack", s(&unsupported), "-o", s(&frt)]);
    assert_error(&out, "3 node(s) cannot run");
    let err = String::from_utf8_lossy(&out.stderr);
    for name in [
        "unique_node",
        "roi_node",
        "fused",
        "Unique",
        "RoiAlign",
        "com.microsoft:FusedGemm",
    ] {
        assert!(err.contains(name), "{name} missing from: {err}");
    }
    let out = ferrite(&["check", s(&unsupported)]);
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout);
    for name in [
        "unique_node",
        "roi_node",
        "fused",
        "RoiAlign (1 node(s))",
        "data-dependent shape",
        "com.microsoft:FusedGemm",
    ] {
        assert!(report.contains(name), "{name} missing from: {report}");
    }

    // Unknown opset.
    let future = dir.join("future.onnx");
    let model = ModelBuilder::new(99)
        .input("x", data_type::FLOAT, &[D::N(1)])
        .node("Relu", "r", &["x"], &["y"], vec![])
        .output("y")
        .encode();
    std::fs::write(&future, model).unwrap();
    assert_error(&ferrite(&["pack", s(&future), "-o", s(&frt)]), "opset 99");

    // Symbolic dims: named until fixed.
    let symbolic = dir.join("symbolic.onnx");
    let model = ModelBuilder::new(13)
        .input("images", data_type::FLOAT, &[D::S("batch"), D::N(3)])
        .node("Relu", "r", &["images"], &["y"], vec![])
        .output("y")
        .encode();
    std::fs::write(&symbolic, model).unwrap();
    // A leading symbolic dimension is taken as 1, with a note; --strict-shapes refuses with
    // the exact flag to pass.
    let out = ferrite(&["pack", s(&symbolic), "-o", s(&frt)]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("note:") && text.contains("its leading dimension 'batch' is taken as 1"),
        "{text}"
    );
    assert_error(
        &ferrite(&["pack", s(&symbolic), "-o", s(&frt), "--strict-shapes"]),
        "'images' is [batchx3]: pass --input-shape images=1x3",
    );
    assert!(ferrite(&[
        "pack",
        s(&symbolic),
        "-o",
        s(&frt),
        "--input-shape",
        "images=2x3"
    ])
    .status
    .success());
    assert_error(
        &ferrite(&[
            "pack",
            s(&symbolic),
            "-o",
            s(&frt),
            "--input-shape",
            "nope=2x3",
        ]),
        "no input or symbolic dimension 'nope'",
    );
    assert_error(
        &ferrite(&[
            "pack",
            s(&symbolic),
            "-o",
            s(&frt),
            "--input-shape",
            "images=2xq",
        ]),
        "bad --input-shape",
    );

    // External data.
    let external = dir.join("external.onnx");
    let mut t = TensorProto {
        name: "W".into(),
        dims: vec![2],
        data_type: data_type::FLOAT,
        data_location: 1,
        ..Default::default()
    };
    t.external_data.push(
        ferrite_tools::compile::onnx::proto::StringStringEntryProto {
            key: "location".into(),
            value: "w.bin".into(),
        },
    );
    let model = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2)])
        .init(t)
        .node("Add", "a", &["x", "W"], &["y"], vec![])
        .output("y")
        .encode();
    std::fs::write(&external, model).unwrap();
    assert_error(
        &ferrite(&["pack", s(&external), "-o", s(&frt)]),
        "external file",
    );

    // A bad attribute value is reported, not panicked on.
    let bad_axis = dir.join("bad_axis.onnx");
    let model = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(4)])
        .node("Softmax", "sm", &["x"], &["y"], vec![attr_int("axis", 7)])
        .output("y")
        .encode();
    std::fs::write(&bad_axis, model).unwrap();
    assert_error(&ferrite(&["pack", s(&bad_axis), "-o", s(&frt)]), "axis 7");
}

#[test]
fn bad_frt_and_inputs() {
    let (dir, frt) = packed_mlp("frt");
    let out_dir = dir.join("out");
    let x = write_input(&dir, "x.npy", DType::F32, vec![1, 4]);
    let bytes = std::fs::read(&frt).unwrap();

    let corrupt = dir.join("corrupt.frt");
    let mut c = bytes.clone();
    let n = c.len();
    c[n - 2] ^= 1;
    std::fs::write(&corrupt, &c).unwrap();
    assert_error(
        &ferrite(&[
            "run",
            s(&corrupt),
            "--input",
            s(&x),
            "--out-dir",
            s(&out_dir),
        ]),
        "checksum mismatch",
    );
    assert_error(&ferrite(&["inspect", s(&corrupt)]), "checksum mismatch");
    std::fs::write(&corrupt, &bytes[..40]).unwrap();
    assert_error(&ferrite(&["bench", s(&corrupt)]), "truncated");
    std::fs::write(
        &corrupt,
        b"PK\x03\x04 a zip, not a model at all, long enough",
    )
    .unwrap();
    assert_error(&ferrite(&["inspect", s(&corrupt)]), "bad magic");

    let wrong_shape = write_input(&dir, "shape.npy", DType::F32, vec![1, 5]);
    assert_error(
        &ferrite(&[
            "run",
            s(&frt),
            "--input",
            s(&wrong_shape),
            "--out-dir",
            s(&out_dir),
        ]),
        "has shape [1, 4]",
    );
    let wrong_dtype = write_input(&dir, "dtype.npy", DType::I64, vec![1, 4]);
    assert_error(
        &ferrite(&[
            "run",
            s(&frt),
            "--input",
            s(&wrong_dtype),
            "--out-dir",
            s(&out_dir),
        ]),
        "is float32",
    );
    assert_error(
        &ferrite(&[
            "run",
            s(&frt),
            "--input",
            s(&x),
            s(&x),
            "--out-dir",
            s(&out_dir),
        ]),
        "more input files than the model's 1 input(s) (inputs: x)",
    );
    let not_npy = dir.join("not.npy");
    std::fs::write(&not_npy, b"hello").unwrap();
    assert_error(
        &ferrite(&[
            "run",
            s(&frt),
            "--input",
            s(&not_npy),
            "--out-dir",
            s(&out_dir),
        ]),
        "not a valid .npy",
    );
    let mut truncated = npy::to_bytes(&NpyArray {
        dtype: DType::F32,
        shape: vec![1, 4],
        bytes: vec![0; 16],
    });
    truncated.truncate(truncated.len() - 3);
    std::fs::write(&not_npy, truncated).unwrap();
    assert_error(
        &ferrite(&[
            "run",
            s(&frt),
            "--input",
            s(&not_npy),
            "--out-dir",
            s(&out_dir),
        ]),
        "truncated",
    );
    // No NVIDIA driver on CI machines: one line saying so (a GPU machine runs it).
    if !ferrite_cuda::driver_present() {
        assert_error(
            &ferrite(&[
                "run",
                s(&frt),
                "--input",
                s(&x),
                "--device",
                "cuda",
                "--out-dir",
                s(&out_dir),
            ]),
            "libcuda) is not installed",
        );
    }
    assert_error(
        &ferrite(&[
            "run",
            s(&frt),
            "--input",
            s(&x),
            "--device",
            "cuda:x",
            "--out-dir",
            s(&out_dir),
        ]),
        "expected cuda:N",
    );
    assert_error(
        &ferrite(&[
            "run",
            s(&frt),
            "--input",
            s(&x),
            "--device",
            "vulkan:x",
            "--out-dir",
            s(&out_dir),
        ]),
        "expected vulkan:N",
    );
    assert_error(
        &ferrite(&[
            "run",
            s(&frt),
            "--input",
            s(&x),
            "--device",
            "tpu",
            "--out-dir",
            s(&out_dir),
        ]),
        "unknown device 'tpu'",
    );
    assert_error(&ferrite(&["bench", s(&frt), "--runs", "0"]), "--runs");
}

/// `--device vulkan` on a machine whose Vulkan loader finds no driver (`VK_ICD_FILENAMES` and
/// `VK_DRIVER_FILES` pointing at nothing): one line, non-zero exit, for run, bench and devices
/// listing it as unavailable.
#[test]
fn vulkan_without_a_driver_is_a_one_line_error() {
    let (dir, frt) = packed_mlp("no-vulkan");
    let x = write_input(&dir, "x.npy", DType::F32, vec![1, 4]);
    let without_driver = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ferrite"))
            .args(args)
            .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
            .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
            .output()
            .expect("the binary runs")
    };
    let out_dir = dir.join("out");
    for device in ["vulkan", "vulkan:1"] {
        assert_error(
            &without_driver(&[
                "run",
                s(&frt),
                "--input",
                s(&x),
                "--device",
                device,
                "--out-dir",
                s(&out_dir),
            ]),
            "Vulkan",
        );
    }
    assert_error(
        &without_driver(&["bench", s(&frt), "--device", "vulkan", "--runs", "1"]),
        "Vulkan",
    );
    let listing = without_driver(&["devices"]);
    assert!(listing.status.success());
    let text = String::from_utf8_lossy(&listing.stdout);
    assert!(text.contains("cpu"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("vulkan") && (l.contains("unavailable") || l.contains("none"))),
        "{text}"
    );
}

/// `ferrite run --device vulkan` agrees with `--device cpu` (when a Vulkan device exists).
#[test]
fn vulkan_run_matches_cpu_through_the_cli() {
    let dir = temp_dir("vulkan-run");
    let onnx = dir.join("mlp.onnx");
    std::fs::write(&onnx, tiny_mlp()).unwrap();
    let x = write_input(&dir, "x.npy", DType::F32, vec![1, 4]);
    let run = |device: &str| {
        let out = dir.join(device);
        let result = ferrite(&[
            "run",
            s(&onnx),
            "--input",
            s(&x),
            "--device",
            device,
            "--out-dir",
            s(&out),
        ]);
        (result, out.join("output_0.npy"))
    };
    let (cpu, cpu_path) = run("cpu");
    assert!(cpu.status.success());
    let (gpu, gpu_path) = run("vulkan");
    if !gpu.status.success() {
        let why = String::from_utf8_lossy(&gpu.stderr);
        if std::env::var("FERRITE_REQUIRE_VULKAN").is_ok_and(|v| v == "1") {
            panic!("vulkan required: {why}");
        }
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "\nSKIPPED: cli vulkan run: {}",
            why.trim()
        );
        return;
    }
    let floats = |p: &Path| -> Vec<f32> {
        npy::read(p)
            .unwrap()
            .bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let (a, b) = (floats(&gpu_path), floats(&cpu_path));
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-12);
    for (g, c) in a.iter().zip(&b) {
        assert!((g - c).abs() / scale <= 1e-4, "{g} vs {c}");
    }
    let bench = ferrite(&[
        "bench",
        s(&onnx),
        "--device",
        "vulkan",
        "--runs",
        "5",
        "--json",
    ]);
    assert!(
        bench.status.success(),
        "{}",
        String::from_utf8_lossy(&bench.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
    assert_eq!(doc["device"], "vulkan");
    assert!(doc["median_us"].as_f64().unwrap() > 0.0);
}

/// The generated test models (if present) through `ferrite pack` and `ferrite run` on the CPU and
/// on Vulkan, compared with onnxruntime's outputs within 1e-4 relative. `scripts/test.sh` generates them; without them
/// this test fails and says how to make them.
#[test]
fn test_models_through_the_cli() {
    let dir = std::env::var_os("FERRITE_TEST_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-models"));
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `python tests/models/generate.py {}`",
            dir.display(),
            dir.display()
        )
    });
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let work = temp_dir("models");
    let floats = |a: &NpyArray| -> Vec<f32> {
        a.bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    // The CPU always; the first Vulkan device when the machine has one (CI: lavapipe, required).
    let listing = ferrite(&["devices"]);
    let has_vulkan = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .any(|l| l.starts_with("vulkan:0"));
    if !has_vulkan {
        if std::env::var("FERRITE_REQUIRE_VULKAN").is_ok_and(|v| v == "1") {
            panic!("vulkan required but `ferrite devices` lists none");
        }
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "\nSKIPPED: test models through the cli on vulkan"
        );
    }
    let devices: &[&str] = if has_vulkan {
        &["cpu", "vulkan"]
    } else {
        &["cpu"]
    };
    for (name, entry) in manifest.as_object().unwrap() {
        let onnx = dir.join(format!("{name}.onnx"));
        let frt = work.join(format!("{name}.frt"));
        let mut args = vec![
            "pack".to_string(),
            s(&onnx).into(),
            "-o".into(),
            s(&frt).into(),
        ];
        for (input, dims) in entry["input_shapes"].as_object().unwrap() {
            let dims: Vec<String> = dims
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.to_string())
                .collect();
            args.push("--input-shape".into());
            args.push(format!("{input}={}", dims.join("x")));
        }
        let out = ferrite(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let input = dir.join(format!("{name}.input_0.npy"));
        let expected = floats(&npy::read(&dir.join(format!("{name}.output_0.npy"))).unwrap());
        // Models a device refuses at load are listed per device (as in the model suite).
        let refused = |device: &str| {
            let list = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("../tests/expectations/{device}-models.txt"));
            std::fs::read_to_string(list)
                .unwrap_or_default()
                .lines()
                .any(|l| l.split_whitespace().next() == Some(name.as_str()))
        };
        for device in devices {
            let out_dir = work.join(format!("{name}-{device}"));
            if refused(device) {
                let out = ferrite(&[
                    "run",
                    s(&frt),
                    "--input",
                    s(&dir.join(format!("{name}.input_0.npy"))),
                    "--device",
                    device,
                    "--out-dir",
                    s(&out_dir),
                ]);
                assert_error(&out, "device does not support");
                continue;
            }
            let out = ferrite(&[
                "run",
                s(&frt),
                "--input",
                s(&input),
                "--device",
                device,
                "--out-dir",
                s(&out_dir),
            ]);
            assert!(
                out.status.success(),
                "{name} on {device}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let actual = floats(&npy::read(&out_dir.join("output_0.npy")).unwrap());
            assert_eq!(actual.len(), expected.len(), "{name}");
            let max_ref = expected.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let max_err = actual
                .iter()
                .zip(&expected)
                .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                max_err <= 1e-4 * max_ref,
                "{name} on {device}: relative error {}",
                max_err / max_ref
            );
        }
    }
}

#[test]
fn inputs_the_schema_lacks_are_refused() {
    let dir = temp_dir("schema");
    let onnx = dir.join("reduce13.onnx");
    let model = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(3)])
        .init_i64("axes", &[1], &[1])
        .node("ReduceMean", "mean", &["x", "axes"], &["y"], vec![])
        .output("y")
        .encode();
    std::fs::write(&onnx, model).unwrap();
    assert_error(
        &ferrite(&["pack", s(&onnx), "-o", s(&dir.join("m.frt"))]),
        "ReduceMean takes at most 1 input(s) in opset 13",
    );
}

#[test]
fn shape_inputs_can_be_frozen_with_constant() {
    let dir = temp_dir("constant");
    let onnx = dir.join("reshape.onnx");
    let model = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(2), D::N(6)])
        .input("shape", data_type::INT64, &[D::N(2)])
        .node("Reshape", "reshape", &["x", "shape"], &["y"], vec![])
        .output("y")
        .encode();
    std::fs::write(&onnx, model).unwrap();
    let frt = dir.join("m.frt");
    assert_error(
        &ferrite(&["pack", s(&onnx), "-o", s(&frt)]),
        "must be a constant",
    );
    let shape = dir.join("shape.npy");
    let bytes = [3i64, 4].iter().flat_map(|v| v.to_le_bytes()).collect();
    npy::write(
        &shape,
        &NpyArray {
            dtype: DType::I64,
            shape: vec![2],
            bytes,
        },
    )
    .unwrap();
    let frozen = format!("shape={}", s(&shape));
    let out = ferrite(&["pack", s(&onnx), "-o", s(&frt), "--constant", &frozen]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ferrite(&["inspect", s(&frt), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["inputs"].as_array().unwrap().len(), 1);
    assert_eq!(doc["outputs"][0]["shape"], serde_json::json!([3, 4]));
    assert_error(
        &ferrite(&["pack", s(&onnx), "-o", s(&frt), "--constant", "shape"]),
        "NAME=FILE.npy",
    );
}

/// `ferrite run/bench --device qemu-m4`: the firmware's outputs equal the CPU device's (same
/// kernels, same f32 arithmetic), and `bench --json` reports what a firmware engineer needs.
#[test]
fn qemu_m4_through_the_cli() {
    let listing = ferrite(&["devices"]);
    let text = String::from_utf8_lossy(&listing.stdout).to_string();
    if !text
        .lines()
        .any(|l| l.starts_with("qemu-m4") && !l.contains("unavailable"))
    {
        if std::env::var("FERRITE_REQUIRE_QEMU_M4").is_ok_and(|v| v == "1") {
            panic!("qemu-m4 required: {text}");
        }
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "\nSKIPPED: cli qemu-m4: {}", text.trim());
        return;
    }
    let (dir, frt) = packed_mlp("qemu-m4");
    let x = write_input(&dir, "x.npy", DType::F32, vec![1, 4]);
    let outputs: Vec<Vec<u8>> = ["cpu", "qemu-m4"]
        .iter()
        .map(|device| {
            let out = dir.join(device);
            let result = ferrite(&[
                "run",
                s(&frt),
                "--input",
                s(&x),
                "--device",
                device,
                "--out-dir",
                s(&out),
            ]);
            assert!(
                result.status.success(),
                "{device}: {}",
                String::from_utf8_lossy(&result.stderr)
            );
            npy::read(&out.join("output_0.npy")).unwrap().bytes
        })
        .collect();
    assert_eq!(outputs[0], outputs[1]);
    let bench = ferrite(&["bench", s(&frt), "--device", "qemu-m4", "--json"]);
    assert!(
        bench.status.success(),
        "{}",
        String::from_utf8_lossy(&bench.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
    for key in [
        "instructions_per_inference",
        "flash_bytes",
        "ram_bytes",
        "stack_bytes",
        "inference_stack_bytes",
    ] {
        assert!(doc[key].as_u64().unwrap_or(0) > 0, "{key} in {doc}");
    }
    assert_eq!(doc["deterministic"], true);
    // The model's own firmware, built for the bench: the same model in less flash.
    let own = &doc["model_firmware"];
    let runtime = own["runtime_flash_bytes"].as_u64().unwrap_or(0);
    assert!(
        runtime > 0 && runtime < doc["firmware_flash_bytes"].as_u64().unwrap_or(0),
        "{doc}"
    );
    assert!(
        own["inference_stack_bytes"].as_u64().unwrap_or(0) > 0,
        "{doc}"
    );
    // --profile adds instructions per op.
    let args = [
        "bench",
        s(&frt),
        "--device",
        "qemu-m4",
        "--profile",
        "--json",
    ];
    let profiled: serde_json::Value = serde_json::from_slice(&ferrite(&args).stdout).unwrap();
    let ops = profiled["ops"].as_array().expect("ops");
    assert!(!ops.is_empty(), "{profiled}");
    assert!(ops
        .iter()
        .all(|op| op["instructions"].as_u64().unwrap_or(0) > 0));
    let text = String::from_utf8_lossy(&ferrite(&args[..5]).stdout).into_owned();
    assert!(text.contains("instr.") && text.contains("%"), "{text}");
    // More runs than QEMU needs: it says what it does, and the trace counts instructions.
    let trace = dir.join("trace.json");
    let out = ferrite(&[
        "bench",
        s(&frt),
        "--device",
        "qemu-m4",
        "--runs",
        "5",
        "--profile",
        "--trace",
        s(&trace),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("3 runs of the 5 asked for"), "{text}");
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    assert_eq!(
        trace["traceEvents"].as_array().map(Vec::len),
        Some(ops.len())
    );
    assert!(trace["traceEvents"][0]["args"]["instructions"].as_f64() > Some(0.0));
}

/// `pack --emit rust` writes the module next to the `.frt`; `--max-arena` refuses a model whose
/// arena exceeds the board's budget, naming both sizes; an unknown language is an error.
#[test]
fn pack_emits_a_rust_module_and_enforces_the_arena_budget() {
    let dir = temp_dir("emit");
    let onnx = dir.join("mlp.onnx");
    std::fs::write(&onnx, tiny_mlp()).unwrap();
    let frt = dir.join("mlp.frt");
    let out = ferrite(&["pack", s(&onnx), "-o", s(&frt), "--emit", "rust"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let module = std::fs::read_to_string(dir.join("mlp.rs")).unwrap();
    assert!(
        module.contains("pub const ARENA_BYTES: usize = "),
        "{module}"
    );
    assert!(module.contains("include_model!(\"mlp.frt\")"), "{module}");
    let arena: usize = module
        .lines()
        .find_map(|l| l.strip_prefix("pub const ARENA_BYTES: usize = "))
        .and_then(|v| v.trim_end_matches(';').parse().ok())
        .unwrap();
    assert!(ferrite(&[
        "pack",
        s(&onnx),
        "-o",
        s(&frt),
        "--max-arena",
        &arena.to_string()
    ])
    .status
    .success());
    assert_error(
        &ferrite(&[
            "pack",
            s(&onnx),
            "-o",
            s(&frt),
            "--max-arena",
            &(arena - 1).to_string(),
        ]),
        &format!(
            "the arena needs {arena} bytes, more than --max-arena {}",
            arena - 1
        ),
    );
    assert_error(
        &ferrite(&["pack", s(&onnx), "-o", s(&frt), "--emit", "go"]),
        "--emit go: the languages are `rust` and `c`",
    );
}

/// `pack --strip-names` writes the model without names and the names beside it; `inspect`
/// shows them from there, or indices once the side file is gone; `run` gives the same outputs.
#[test]
fn strip_names_moves_the_names_out_of_the_model() {
    let (dir, frt) = packed_mlp("strip-names");
    let onnx = dir.join("mlp.onnx");
    let bare = dir.join("bare.frt");
    let out = ferrite(&["pack", s(&onnx), "-o", s(&bare), "--strip-names"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("bytes of names stripped, kept in"), "{text}");
    let side = dir.join("bare.names.json");
    assert!(side.is_file());
    assert!(std::fs::metadata(&bare).unwrap().len() < std::fs::metadata(&frt).unwrap().len());
    let inspect = |path: &Path| -> serde_json::Value {
        serde_json::from_slice(&ferrite(&["inspect", s(path), "--json"]).stdout).unwrap()
    };
    let (named, stripped) = (inspect(&frt), inspect(&bare));
    assert_eq!(
        named["inputs"], stripped["inputs"],
        "names come from the side file"
    );
    assert_eq!(named["ops"], stripped["ops"]);
    std::fs::remove_file(&side).unwrap();
    let indexed = inspect(&bare);
    assert!(
        indexed["inputs"][0]["name"]
            .as_str()
            .unwrap()
            .starts_with('#'),
        "{indexed}"
    );
    assert_eq!(indexed["inputs"][0]["shape"], named["inputs"][0]["shape"]);
    let x = write_input(&dir, "x.npy", DType::F32, vec![1, 4]);
    let outputs: Vec<Vec<u8>> = [&frt, &bare]
        .iter()
        .enumerate()
        .map(|(i, model)| {
            let out_dir = dir.join(format!("out{i}"));
            let run = ferrite(&["run", s(model), "--input", s(&x), "--out-dir", s(&out_dir)]);
            assert!(
                run.status.success(),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            npy::read(&out_dir.join("output_0.npy")).unwrap().bytes
        })
        .collect();
    assert_eq!(outputs[0], outputs[1]);
}

/// A reader that goes away (`ferrite inspect ... | head -1`) ends the CLI quietly: no panic.
#[test]
fn a_closed_stdout_ends_quietly() {
    let dir = temp_dir("pipe");
    let onnx = dir.join("mlp.onnx");
    std::fs::write(&onnx, tiny_mlp()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["pack", s(&onnx), "-o", s(&dir.join("mlp.frt"))])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A stub NVIDIA driver that reports no device: `ferrite devices` says so and `--device cuda`
/// fails with that one line — a typed error, not a panic. (Needs a C compiler; CI has gcc.)
#[test]
fn a_driver_without_devices_is_reported() {
    let dir = temp_dir("stub-libcuda");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets/cuda/tests/stub_libcuda.c");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("libcuda.so"))
        .arg(&source)
        .status();
    if !built.is_ok_and(|s| s.success()) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "\nSKIPPED: stub libcuda (no C compiler)");
        return;
    }
    let with_stub = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ferrite"))
            .args(args)
            .env("LD_LIBRARY_PATH", &dir)
            .output()
            .expect("the binary runs")
    };
    let listing = with_stub(&["devices"]);
    let stdout = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.status.success(), "{stdout}");
    assert!(
        stdout.contains("cuda       unavailable: the NVIDIA driver reports no CUDA device"),
        "{stdout}"
    );
    let model = dir.join("tiny.onnx");
    std::fs::write(&model, ferrite_tools::compile::onnx::build::tiny_mlp()).unwrap();
    let x = dir.join("x.npy");
    let out = ferrite(&["pack", s(&model), "-o", s(&dir.join("tiny.frt"))]);
    assert!(out.status.success());
    let input = ferrite_tools::host::npy::NpyArray {
        dtype: ferrite_hal::DType::F32,
        shape: vec![1, 4],
        bytes: [0.5f32, -1.0, 2.0, 0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    };
    ferrite_tools::host::npy::write(&x, &input).unwrap();
    let run = with_stub(&[
        "run",
        s(&dir.join("tiny.frt")),
        "--input",
        s(&x),
        "--device",
        "cuda",
        "--out-dir",
        s(&dir.join("out")),
    ]);
    assert_error(&run, "reports no CUDA device");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An int8-in, int8-out model: `inspect` (table and `--json`) and `--emit rust` show each input's
/// and output's scale and zero point, which a firmware needs to quantize features and
/// dequantize scores.
#[test]
fn inspect_and_emit_rust_show_the_borders_scale_and_zero_point() {
    let onnx_bytes = border_quantized_model();
    let dir = temp_dir("io-quantization");
    let onnx = dir.join("q.onnx");
    std::fs::write(&onnx, onnx_bytes).unwrap();
    let frt = dir.join("q.frt");
    let out = ferrite(&["pack", s(&onnx), "-o", s(&frt), "--emit", "rust"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&ferrite(&["inspect", s(&frt), "--json"]).stdout).unwrap();
    assert_eq!(doc["inputs"][0]["scale"], 0.25);
    assert_eq!(doc["inputs"][0]["zero_point"], 3);
    assert_eq!(doc["outputs"][0]["scale"], 0.125);
    assert_eq!(doc["outputs"][0]["zero_point"], -7);
    let table = String::from_utf8(ferrite(&["inspect", s(&frt)]).stdout).unwrap();
    assert!(table.contains("scale 0.25, zero point 3"), "{table}");
    assert!(table.contains("scale 0.125, zero point -7"), "{table}");
    // --emit c: a header with the same figures, and a source the C compiler takes.
    let frt_c = dir.join("q-c.v2.frt");
    let out = ferrite(&["pack", s(&onnx), "-o", s(&frt_c), "--emit", "c"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header = std::fs::read_to_string(dir.join("q_c_v2.h")).unwrap();
    for line in [
        "#define Q_C_V2_INPUT0_SCALE 0.25f",
        "#define Q_C_V2_INPUT0_ZERO_POINT 3",
        "#define Q_C_V2_OUTPUT0_SCALE 0.125f",
        "#define Q_C_V2_OUTPUT0_ZERO_POINT -7",
        "#define Q_C_V2_INPUT0_DIMS {1, 8}",
        "#define Q_C_V2_INPUT0_DTYPE 4 /* ferrite_dtype: int8 */",
        "extern const uint8_t q_c_v2_model[Q_C_V2_MODEL_BYTES];",
    ] {
        assert!(header.contains(line), "{line} not in\n{header}");
    }
    let compiled = std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-c"])
        .arg(dir.join("q_c_v2.c"))
        .arg("-o")
        .arg(dir.join("q_c_v2.o"))
        .output()
        .expect("a C compiler");
    assert!(
        compiled.status.success(),
        "{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let module = std::fs::read_to_string(dir.join("q.rs")).unwrap();
    assert!(
        module.contains(
            "pub const INPUT_QUANTIZATION: [Option<(f32, i32)>; 1] = [\n    Some((0.25, 3)),"
        ),
        "{module}"
    );
    assert!(
        module.contains(
            "pub const OUTPUT_QUANTIZATION: [Option<(f32, i32)>; 1] = [\n    Some((0.125, -7)),"
        ),
        "{module}"
    );
}

/// `--threads`: the same outputs on several threads, a thread count in the bench report, and a
/// one-line error for a count out of range or a device without threads.
#[test]
fn threads_option_runs_benches_and_refuses_what_it_cannot_do() {
    let (dir, frt) = packed_mlp("threads");
    let x = write_input(&dir, "x.npy", DType::F32, vec![1, 4]);
    let outputs = |threads: &str| {
        let out_dir = dir.join(format!("out{threads}"));
        let args = ["run", s(&frt), "--input", s(&x), "--out-dir", s(&out_dir)];
        let out = ferrite(&[&args[..], &["--threads", threads]].concat());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read(out_dir.join("output_0.npy")).unwrap()
    };
    assert_eq!(outputs("1"), outputs("3"));
    let out = ferrite(&["bench", s(&frt), "--runs", "3", "--threads", "2", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (json["device"].as_str(), json["threads"].as_u64()),
        (Some("cpu"), Some(2))
    );
    let out = ferrite(&["bench", s(&frt), "--runs", "3", "--threads", "2"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("on cpu (2 threads)"));
    let out = ferrite(&["bench", s(&frt), "--threads", "0"]);
    assert_error(&out, "--threads 0: expected 1 to 64");
    let out = ferrite(&["bench", s(&frt), "--device", "qemu-m4", "--threads", "2"]);
    assert_error(
        &out,
        "--threads 2: only the cpu device runs its kernels on threads",
    );
}
