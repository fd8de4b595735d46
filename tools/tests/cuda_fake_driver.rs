//! `--device cuda` end to end on a machine without a GPU: a fake NVIDIA driver
//! (`targets/cuda/emulator/fake_libcuda.cpp`, compiled here with g++) implements the driver calls
//! Ferrite makes on the CPU, running launches with the host emulator of the kernels. So the
//! CUDA device's real GPU program — context, one arena allocation, weight upload, pinned
//! buffers, NVRTC compilation (the real libnvrtc), graph capture with the launch argument
//! arrays, replay, status word, error paths — runs in CI, and the fake driver checks that every
//! run frees every allocation, stream, event, graph, module and context retain it made. Real GPU behaviour (concurrency,
//! limits, speed) needs `scripts/gpu-check.sh` on a GPU.
//!
//! Needs g++ and libnvrtc (CI has both; `FERRITE_REQUIRE_NVRTC=1` makes their absence a
//! failure, otherwise the test prints `SKIPPED:`).

use ferrite_tools::host::npy::{self, NpyArray};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn skip_or_fail(why: &str) {
    if std::env::var("FERRITE_REQUIRE_NVRTC").is_ok_and(|v| v == "1") {
        panic!("fake CUDA driver test: {why}");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\nSKIPPED: fake CUDA driver: {why}");
}

fn floats(a: &NpyArray) -> Vec<f32> {
    a.bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The `ferrite` binary with the fake driver first on the library path.
struct Fake {
    lib_dir: PathBuf,
}

impl Fake {
    fn ferrite(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let path = match std::env::var("LD_LIBRARY_PATH") {
            Ok(rest) if !rest.is_empty() => format!("{}:{rest}", s(&self.lib_dir)),
            _ => s(&self.lib_dir).to_string(),
        };
        let mut command = Command::new(env!("CARGO_BIN_EXE_ferrite"));
        command.args(args).env("LD_LIBRARY_PATH", path);
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().expect("the binary runs");
        // The fake driver reports, at exit, anything not freed: every run must free it all.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("fake libcuda: leaked"),
            "{args:?}: {stderr}"
        );
        out
    }
}

fn assert_one_line_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure; stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(needle), "'{needle}' not in: {stderr}");
}

#[test]
fn the_cuda_device_runs_end_to_end_on_a_fake_driver() {
    if !ferrite_cuda::compiler_present() {
        return skip_or_fail("libnvrtc is not on the library path");
    }
    let work = std::env::temp_dir().join(format!("ferrite-fake-cuda-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    if let Err(why) = ferrite_cuda::build_fake_driver(&work) {
        if why.starts_with("no g++") {
            return skip_or_fail(&why);
        }
        panic!("{why}");
    }
    let fake = Fake {
        lib_dir: work.clone(),
    };

    let listing = fake.ferrite(&["devices"], &[]);
    let stdout = String::from_utf8_lossy(&listing.stdout);
    assert!(
        stdout.contains("cuda:0     Ferrite fake GPU (host emulator), compute capability 8.7"),
        "{stdout}"
    );

    // Every generated test model, against onnxruntime's outputs.
    let models = std::env::var_os("FERRITE_TEST_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-models"));
    let manifest = std::fs::read_to_string(models.join("manifest.json"))
        .unwrap_or_else(|e| panic!("{}: {e}; run tests/models/generate.py", models.display()));
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    // The models the CUDA device refuses (ops without kernels), as the conformance suite lists
    // them: each must still be refused, with the op named.
    let refused: Vec<String> = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/expectations/cuda-models.txt"),
    )
    .unwrap_or_default()
    .lines()
    .filter(|l| !l.starts_with('#'))
    .filter_map(|l| l.split_whitespace().next().map(str::to_string))
    .collect();
    let mut ran = 0;
    for (name, entry) in manifest.as_object().unwrap() {
        let frt = work.join(format!("{name}.frt"));
        let mut args = vec![
            "pack".to_string(),
            s(&models.join(format!("{name}.onnx"))).into(),
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
        let out = fake.ferrite(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
        assert!(out.status.success(), "{name}: pack failed");
        let out_dir = work.join(name);
        let input = models.join(format!("{name}.input_0.npy"));
        let out = fake.ferrite(
            &[
                "run",
                s(&frt),
                "--input",
                s(&input),
                "--device",
                "cuda",
                "--out-dir",
                s(&out_dir),
            ],
            &[],
        );
        if refused.contains(name) {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && err.contains("device does not support"),
                "{name} is listed in tests/expectations/cuda-models.txt but: {err}"
            );
            println!("{name:<18} refused (listed)");
            continue;
        }
        assert!(
            out.status.success(),
            "{name} on the fake driver: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = floats(&npy::read(&models.join(format!("{name}.output_0.npy"))).unwrap());
        let actual = floats(&npy::read(&out_dir.join("output_0.npy")).unwrap());
        assert_eq!(actual.len(), expected.len(), "{name}");
        let max_ref = expected.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let max_err = actual
            .iter()
            .zip(&expected)
            .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            max_err <= 1e-4 * max_ref,
            "{name}: relative error {}",
            max_err / max_ref
        );
        println!("{name:<18} relative error {:.2e}", max_err / max_ref);
        ran += 1;
    }
    assert!(ran >= 8, "only {ran} test models");

    // Replays: `bench` runs the captured graph many times in one session.
    let mlp = work.join("mlp.frt");
    let mlp_input = models.join("mlp.input_0.npy");
    let out = fake.ferrite(
        &[
            "bench",
            s(&mlp),
            "--device",
            "cuda",
            "--runs",
            "20",
            "--json",
            "--input",
            s(&mlp_input),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["runs"].as_u64(), Some(20));

    // Faults: a missing GPU number, device memory short (both sizes), a bad index in the data.
    let run = |frt: &Path, input: &Path, device: &str, env: &[(&str, &str)]| {
        fake.ferrite(
            &[
                "run",
                s(frt),
                "--input",
                s(input),
                "--device",
                device,
                "--out-dir",
                s(&work.join("fault")),
            ],
            env,
        )
    };
    assert_one_line_error(
        &run(&mlp, &mlp_input, "cuda:1", &[]),
        "no CUDA device #1 (1 found)",
    );
    let out = run(
        &mlp,
        &mlp_input,
        "cuda",
        &[("FERRITE_FAKE_CUDA_FREE", "1000")],
    );
    assert_one_line_error(&out, "bytes of GPU memory, the GPU has 1000 bytes free");

    let gather = ferrite_tools::compile::onnx::build::gather_model();
    let onnx = work.join("gather.onnx");
    std::fs::write(&onnx, gather).unwrap();
    let frt = work.join("gather.frt");
    assert!(fake
        .ferrite(&["pack", s(&onnx), "-o", s(&frt)], &[])
        .status
        .success());
    let indices = |values: [i64; 2]| {
        let path = work.join(format!("indices_{}_{}.npy", values[0], values[1]));
        let array = NpyArray {
            dtype: ferrite_hal::DType::I64,
            shape: vec![2],
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        npy::write(&path, &array).unwrap();
        path
    };
    assert_one_line_error(
        &run(&frt, &indices([0, 4]), "cuda", &[]),
        "gather index is out of range",
    );
    let out = run(&frt, &indices([3, -4]), "cuda", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let y = floats(&npy::read(&work.join("fault/output_0.npy")).unwrap());
    assert_eq!(y, [9.0, 10.0, 11.0, 0.0, 1.0, 2.0]);
    let _ = std::fs::remove_dir_all(&work);
}
