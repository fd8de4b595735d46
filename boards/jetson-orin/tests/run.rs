//! The Jetson example end to end: it falls back along the user's device list, matches the CPU
//! device's outputs, and reports a bad model, a bad input and an exhausted list in one line.

use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::npy::NpyArray;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrite-jetson-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn jetson(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferrite-jetson"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The tiny MLP packed into `dir/tiny.frt`, and an input for it in `dir/x.bin`.
fn setup(dir: &Path) -> (PathBuf, PathBuf, Vec<f32>) {
    let packed = pack(
        &ferrite_tools::compile::onnx::build::tiny_mlp(),
        &PackOptions::default(),
    )
    .unwrap();
    let frt = dir.join("tiny.frt");
    std::fs::write(&frt, &packed.bytes).unwrap();
    let x: Vec<u8> = [0.5f32, -1.0, 2.0, 0.25]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let input = dir.join("x.bin");
    std::fs::write(&input, &x).unwrap();
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    let model = ferrite_core::Model::load(bytes.as_bytes()).unwrap();
    let array = NpyArray {
        dtype: ferrite_hal::DType::F32,
        shape: vec![1, 4],
        bytes: x,
    };
    let cpu = ferrite_tools::host::runner::run_cpu(&model, &[array]).unwrap();
    let expected = cpu[0]
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (frt, input, expected)
}

#[test]
fn runs_on_the_first_device_that_can_and_matches_the_cpu() {
    let dir = temp_dir("fallback");
    let (frt, input, expected) = setup(&dir);
    let out_dir = dir.join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite-jetson"))
        .arg(&frt)
        .args(["--device", "cuda,cpu", "--runs", "3", "--input"])
        .arg(&input)
        .arg("--out-dir")
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", stderr(&out));
    if !ferrite_cuda::driver_present() {
        // No GPU here: the CUDA failure is one line, then the CPU runs it.
        assert!(
            stderr(&out).contains("cuda: the NVIDIA driver"),
            "{}",
            stderr(&out)
        );
        assert!(stdout.contains("ran on cpu"), "{stdout}");
    }
    let got: Vec<f32> = std::fs::read(out_dir.join("output_0.bin"))
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert!(
            (g - e).abs() <= 1e-4 * e.abs().max(1.0),
            "{got:?} vs {expected:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_files_and_an_exhausted_list_are_one_line_errors() {
    let dir = temp_dir("errors");
    let (frt, _, _) = setup(&dir);
    let short = dir.join("short.bin");
    std::fs::write(&short, [0u8; 5]).unwrap();
    let out = jetson(&[&frt, Path::new("--input"), &short]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("needs 16 bytes"), "{}", stderr(&out));

    let corrupt = dir.join("corrupt.frt");
    std::fs::write(&corrupt, b"not a model at all, just some bytes").unwrap();
    let out = jetson(&[&corrupt]);
    assert!(!out.status.success());
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));

    let out = jetson(&[&frt, Path::new("--device"), Path::new("tpu")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown device 'tpu'"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("no device of tpu can run this model"));
    let _ = std::fs::remove_dir_all(&dir);
}
