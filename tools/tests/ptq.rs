//! `ferrite pack --quantize int8 --calibration DIR`: the quantized plan, its accuracy report, and
//! one clear error (non-zero exit through the CLI) for every bad calibration folder or option.

use ferrite_hal::DType;
use ferrite_tools::compile::onnx::build::{attr_int, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::data_type;
use ferrite_tools::compile::pack::PackOptions;
use ferrite_tools::compile::ptq::{self, Method, OutputAccuracy};
use ferrite_tools::host::npy::{self, NpyArray};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrite-ptq-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// x [1, 8] → Gemm (transB) → Relu → Gemm → y [1, 4].
fn two_layer_model() -> Vec<u8> {
    let w1: Vec<f32> = (0..8 * 16)
        .map(|i| ((i * 7 % 23) as f32 - 11.0) / 13.0)
        .collect();
    let w2: Vec<f32> = (0..16 * 4)
        .map(|i| ((i * 5 % 17) as f32 - 8.0) / 9.0)
        .collect();
    ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(8)])
        .init_f32("w1", &[16, 8], &w1)
        .init_f32("b1", &[16], &[0.05; 16])
        .init_f32("w2", &[4, 16], &w2)
        .node(
            "Gemm",
            "fc1",
            &["x", "w1", "b1"],
            &["h"],
            vec![attr_int("transB", 1)],
        )
        .node("Relu", "relu", &["h"], &["r"], vec![])
        .node(
            "Gemm",
            "fc2",
            &["r", "w2"],
            &["y"],
            vec![attr_int("transB", 1)],
        )
        .output("y")
        .encode()
}

/// Two inputs a, b [1, 8] → Add → MatMul (constant [8, 4]) → y.
fn two_input_model() -> Vec<u8> {
    let w: Vec<f32> = (0..32).map(|i| (i as f32 - 16.0) / 16.0).collect();
    ModelBuilder::new(13)
        .input("a", data_type::FLOAT, &[D::N(1), D::N(8)])
        .input("b", data_type::FLOAT, &[D::N(1), D::N(8)])
        .init_f32("w", &[8, 4], &w)
        .node("Add", "add", &["a", "b"], &["s"], vec![])
        .node("MatMul", "mm", &["s", "w"], &["y"], vec![])
        .output("y")
        .encode()
}

fn floats(shape: &[usize], seed: usize) -> NpyArray {
    let n: usize = shape.iter().product();
    NpyArray {
        dtype: DType::F32,
        shape: shape.to_vec(),
        bytes: (0..n)
            .flat_map(|i| ((((i + seed) * 2654435761) % 1000) as f32 / 500.0 - 1.0).to_le_bytes())
            .collect(),
    }
}

fn save(path: &Path, array: &NpyArray) {
    npy::write(path, array).unwrap();
}

fn quantize(
    onnx: &[u8],
    dir: &Path,
) -> Result<(ferrite_tools::Packed, ptq::QuantizationReport), String> {
    ptq::quantize(
        onnx,
        &PackOptions::default(),
        dir,
        Method::MinMax,
        &mut |_, _, _| {},
    )
    .map_err(|e| e.to_string())
}

#[test]
fn a_float_model_becomes_integer_ops_with_a_report() {
    let dir = temp_dir("ok");
    // One batched file of 20 samples and one single sample: 21 in all.
    save(&dir.join("a.npy"), &floats(&[20, 8], 1));
    save(&dir.join("b.npy"), &floats(&[1, 8], 2));
    std::fs::write(dir.join("README.txt"), "ignored").unwrap();
    let mut stages = Vec::new();
    let (packed, report) = ptq::quantize(
        &two_layer_model(),
        &PackOptions::default(),
        &dir,
        Method::MinMax,
        &mut |stage, done, total| stages.push((stage, done, total)),
    )
    .unwrap();
    assert_eq!(report.samples, 21);
    assert_eq!(report.weights, 2);
    assert_eq!(
        packed.report.ops.get("QGemm"),
        Some(&2),
        "{:?}",
        packed.report.ops
    );
    assert!(
        !packed.report.ops.contains_key("Gemm"),
        "{:?}",
        packed.report.ops
    );
    assert_eq!(stages.first(), Some(&(ptq::Stage::Ranges, 0, 21)));
    assert_eq!(stages.last(), Some(&(ptq::Stage::Report, 21, 21)));
    match &report.outputs[..] {
        [OutputAccuracy::Float { name, sqnr_db, .. }] => {
            assert_eq!(name, "y", "the output keeps its name");
            assert!(*sqnr_db > 30.0, "SQNR {sqnr_db}");
        }
        other => panic!("{other:?}"),
    }
    // The weights section shrinks (int8 weights instead of f32, plus int32 biases and
    // requantization pairs, which dominate a model this small).
    let float = ferrite_tools::pack(&two_layer_model(), &PackOptions::default()).unwrap();
    assert!(packed.report.weights_bytes < float.report.weights_bytes);
}

#[test]
fn several_inputs_read_one_folder_per_sample_and_matmul_is_quantized() {
    let dir = temp_dir("multi");
    for k in 0..3 {
        let sample = dir.join(format!("sample{k}"));
        std::fs::create_dir(&sample).unwrap();
        save(&sample.join("a.npy"), &floats(&[1, 8], k));
        save(&sample.join("b.npy"), &floats(&[1, 8], k + 10));
    }
    let (packed, report) = quantize(&two_input_model(), &dir).unwrap();
    assert_eq!(report.samples, 3);
    assert_eq!(
        packed.report.ops.get("QGemm"),
        Some(&1),
        "{:?}",
        packed.report.ops
    );
    std::fs::remove_file(dir.join("sample1").join("b.npy")).unwrap();
    let e = quantize(&two_input_model(), &dir).unwrap_err();
    assert!(
        e.contains("sample1") && e.contains("b.npy") && e.contains("missing"),
        "{e}"
    );
}

#[test]
fn bad_calibration_folders_are_refused_naming_the_file() {
    let model = two_layer_model();
    let dir = temp_dir("bad");
    let e = quantize(&model, &dir.join("nowhere")).unwrap_err();
    assert!(
        e.starts_with("calibration: ") && e.contains("not a folder"),
        "{e}"
    );
    let e = quantize(&model, &dir).unwrap_err();
    assert!(e.contains("no .npy sample") && e.contains("'x'"), "{e}");

    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "ints.npy",
            npy::to_bytes(&NpyArray {
                dtype: DType::I32,
                shape: vec![1, 8],
                bytes: vec![0; 32],
            }),
            "holds int32",
        ),
        ("shape.npy", npy::to_bytes(&floats(&[1, 7], 0)), "[1, 7]"),
        ("scalar.npy", npy::to_bytes(&floats(&[], 0)), "needs [1, 8]"),
        (
            "corrupt.npy",
            b"\x93NUMPY garbage".to_vec(),
            "not a valid .npy",
        ),
        (
            "short.npy",
            {
                let mut b = npy::to_bytes(&floats(&[4, 8], 0));
                b.truncate(b.len() - 5);
                b
            },
            "truncated",
        ),
    ];
    for (file, bytes, needle) in cases {
        let case = temp_dir(&format!("bad-{file}"));
        std::fs::write(case.join(file), bytes).unwrap();
        let e = quantize(&model, &case).unwrap_err();
        assert!(e.contains(file) && e.contains(needle), "{file}: {e}");
    }
}

fn ferrite(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn assert_one_line_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "succeeded; stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(needle),
        "{stderr}"
    );
}

#[test]
fn the_cli_quantizes_and_refuses_bad_options() {
    let dir = temp_dir("cli");
    let onnx = dir.join("m.onnx");
    std::fs::write(&onnx, two_layer_model()).unwrap();
    let calibration = dir.join("calibration");
    std::fs::create_dir(&calibration).unwrap();
    save(&calibration.join("x.npy"), &floats(&[16, 8], 3));
    let out_path = dir.join("m.frt");
    let (onnx, out, cal) = (
        onnx.to_str().unwrap(),
        out_path.to_str().unwrap(),
        calibration.to_str().unwrap(),
    );
    let pack = |extra: &[&str]| {
        let mut args = vec!["pack", onnx, "-o", out];
        args.extend_from_slice(extra);
        ferrite(&args)
    };
    for method in ["minmax", "percentile", "percentile=99.9", "entropy"] {
        let ok = pack(&[
            "--quantize",
            "int8",
            "--calibration",
            cal,
            "--calibration-method",
            method,
        ]);
        let stdout = String::from_utf8_lossy(&ok.stdout);
        assert!(
            ok.status.success(),
            "{method}: {}",
            String::from_utf8_lossy(&ok.stderr)
        );
        assert!(
            stdout.contains("QGemm x2") && stdout.contains("y: SQNR"),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("16 samples ({method}")),
            "{stdout}"
        );
    }
    assert_one_line_error(&pack(&["--quantize", "int8"]), "needs --calibration");
    assert_one_line_error(&pack(&["--calibration", cal]), "needs --quantize int8");
    assert_one_line_error(&pack(&["--quantize", "int4", "--calibration", cal]), "int4");
    assert_one_line_error(
        &pack(&[
            "--quantize",
            "int8",
            "--calibration",
            cal,
            "--calibration-method",
            "kl",
        ]),
        "--calibration-method kl",
    );
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_one_line_error(
        &pack(&[
            "--quantize",
            "int8",
            "--calibration",
            empty.to_str().unwrap(),
        ]),
        "calibration: ",
    );
}

/// Weights that int8 rounds the same way (each `(j + 0.45)/127` of a column whose largest is
/// 1.0 loses 0.45 steps) and inputs with a positive mean shift every output by the same amount;
/// bias correction moves that shift into the bias: the output error drops and the SQNR rises.
#[test]
fn bias_correction_removes_the_weights_systematic_error() {
    let (k, n) = (64usize, 4usize);
    let w: Vec<f32> = (0..k * n)
        .map(|i| {
            let (row, col) = (i / n, i % n);
            if row == 0 {
                1.0
            } else {
                (((row * 7 + col * 3) % 90) as f32 - 45.0 + 0.45) / 127.0
            }
        })
        .collect();
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(k as i64)])
        .init_f32("w", &[k as i64, n as i64], &w)
        .node("MatMul", "mm", &["x", "w"], &["y"], vec![])
        .output("y")
        .encode();
    let dir = temp_dir("bias");
    let samples = NpyArray {
        dtype: DType::F32,
        shape: vec![32, 1, k],
        bytes: (0..32 * k)
            .flat_map(|i| (0.5 + ((i * 2654435761) % 1000) as f32 / 1000.0).to_le_bytes())
            .collect(),
    };
    save(&dir.join("x.npy"), &samples);
    let sqnr = |bias_correction: bool| {
        let settings = ptq::Settings {
            method: Method::MinMax,
            bias_correction,
        };
        let (packed, report) = ptq::quantize(
            &onnx,
            &PackOptions::default(),
            &dir,
            settings,
            &mut |_, _, _| {},
        )
        .unwrap();
        assert_eq!(
            packed.report.ops.get("QGemm"),
            Some(&1),
            "{:?}",
            packed.report.ops
        );
        assert_eq!(report.biases_corrected, usize::from(bias_correction));
        match &report.outputs[..] {
            [OutputAccuracy::Float { sqnr_db, .. }] => *sqnr_db,
            other => panic!("{other:?}"),
        }
    };
    let (plain, corrected) = (sqnr(false), sqnr(true));
    assert!(
        corrected > plain + 6.0,
        "SQNR {plain:.1} dB without, {corrected:.1} dB with bias correction"
    );
    // And through the CLI (the option needs --quantize).
    let out = dir.join("m.frt");
    let model = dir.join("m.onnx");
    std::fs::write(&model, &onnx).unwrap();
    let run = ferrite(&[
        "pack",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--quantize",
        "int8",
        "--calibration",
        dir.to_str().unwrap(),
        "--bias-correction",
    ]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && text.contains("bias correction: 1"),
        "{text}"
    );
    let run = ferrite(&[
        "pack",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--bias-correction",
    ]);
    let text = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && text.contains("--bias-correction needs --quantize"),
        "{text}"
    );
}

/// `calibration=` arrays given in memory (the Python package): the same samples as the folder
/// form, by name or in input order, batched or not; and one clear error per bad entry.
#[test]
fn samples_given_in_memory_quantize_as_the_same_samples_in_a_folder_do() {
    let in_memory = |entries: Vec<ptq::calibration::Entry>| {
        ptq::quantize_in_memory(
            &two_input_model(),
            &PackOptions::default(),
            entries,
            Method::MinMax,
            &mut |_, _, _| {},
        )
        .map(|(p, r)| (p.bytes, r.samples))
        .map_err(|e| e.to_string())
    };
    let dir = temp_dir("memory");
    for k in 0..3 {
        let sample = dir.join(format!("sample{k}"));
        std::fs::create_dir(&sample).unwrap();
        save(&sample.join("a.npy"), &floats(&[1, 8], k));
        save(&sample.join("b.npy"), &floats(&[1, 8], k + 10));
    }
    let (folder, _) = quantize(&two_input_model(), &dir).unwrap();
    let named: Vec<ptq::calibration::Entry> = (0..3)
        .map(|k| {
            vec![
                (Some("b".to_string()), floats(&[1, 8], k + 10)),
                (Some("a".to_string()), floats(&[1, 8], k)),
            ]
        })
        .collect();
    let positional: Vec<ptq::calibration::Entry> = (0..3)
        .map(|k| vec![(None, floats(&[1, 8], k)), (None, floats(&[1, 8], k + 10))])
        .collect();
    assert_eq!(in_memory(named).unwrap(), (folder.bytes.clone(), 3));
    assert_eq!(in_memory(positional).unwrap(), (folder.bytes, 3));
    // A batch along a new first axis is several samples.
    let batched = |n: usize| NpyArray {
        shape: vec![n, 1, 8],
        ..floats(&[n, 8], 0)
    };
    let (_, samples) = in_memory(vec![vec![(None, batched(5)), (None, batched(5))]]).unwrap();
    assert_eq!(samples, 5);
    let refusals: [(Vec<ptq::calibration::Entry>, &str); 6] = [
        (vec![], "no calibration sample"),
        (
            vec![vec![(None, floats(&[1, 8], 0))]],
            "entry 0: 1 array(s) for 2 input(s) (a, b); name them",
        ),
        (
            vec![vec![(Some("c".into()), floats(&[1, 8], 0))]],
            "entry 0: the model has no input 'c' (inputs: a, b)",
        ),
        (
            vec![vec![
                (Some("a".into()), floats(&[1, 8], 0)),
                (Some("a".into()), floats(&[1, 8], 0)),
            ]],
            "entry 0: input 'a' is given twice",
        ),
        (
            vec![vec![(Some("a".into()), floats(&[1, 8], 0))]],
            "entry 0: input 'b' is missing",
        ),
        (
            vec![vec![(None, batched(2)), (None, batched(3))]],
            "entry 0: the inputs hold different numbers of samples",
        ),
    ];
    for (entries, needle) in refusals {
        let e = in_memory(entries).unwrap_err();
        assert!(e.starts_with("calibration: ") && e.contains(needle), "{e}");
    }
}
