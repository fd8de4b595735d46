//! Hostile files and graphs at the CLI: each gets a one-line typed error and a non-zero exit (or,
//! for valid-but-unusual input, the right behaviour), never a panic, an endless read, an
//! unbounded allocation or a clobbered input.

use ferrite_hal::DType;
use ferrite_tools::compile::onnx::build::{tiny_mlp, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::data_type;
use ferrite_tools::host::npy::{self, NpyArray};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

mod common;
use common::{assert_error, ferrite, s};

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir(&format!("hostile-{name}"))
}

/// Runs the CLI with a deadline: reading `/dev/zero` used to never end.
fn ferrite_within(args: &[&str], limit: Duration) -> Output {
    use wait_timeout::ChildExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    match child.wait_timeout(limit).expect("wait") {
        Some(_) => child.wait_with_output().expect("output"),
        None => {
            let _ = child.kill();
            panic!("ferrite {args:?} did not finish within {limit:?}");
        }
    }
}

#[test]
fn an_npy_header_claiming_4_gib_is_refused_without_allocating() {
    let dir = temp_dir("npy-header");
    let model = dir.join("mlp.onnx");
    std::fs::write(&model, tiny_mlp()).unwrap();
    for (version, field) in [
        (1u8, &0xfff0u16.to_le_bytes()[..]),
        (2, &0xffff_fff0u32.to_le_bytes()[..]),
    ] {
        let bad = dir.join(format!("v{version}.npy"));
        let mut bytes = b"\x93NUMPY".to_vec();
        bytes.extend_from_slice(&[version, 0]);
        bytes.extend_from_slice(field);
        bytes.extend_from_slice(b"{'descr': '<f4', ");
        std::fs::write(&bad, bytes).unwrap();
        let out = ferrite(&["run", s(&model), "--input", s(&bad), "--out-dir", s(&dir)]);
        assert_error(&out, "the header claims");
    }
    // Not an .npy at all, and an empty file.
    let junk = dir.join("junk.npy");
    std::fs::write(&junk, b"hello").unwrap();
    let out = ferrite(&["run", s(&model), "--input", s(&junk), "--out-dir", s(&dir)]);
    assert_error(&out, "not a valid .npy file");
}

#[cfg(unix)]
#[test]
fn devices_and_fifos_are_refused_not_read_forever() {
    let dir = temp_dir("devices");
    let limit = Duration::from_secs(20);
    let out = ferrite_within(&["inspect", "/dev/zero"], limit);
    assert_error(&out, "not a regular file");
    let out = ferrite_within(&["pack", "/dev/zero", "-o", s(&dir.join("z.frt"))], limit);
    assert_error(&out, "not a regular file");
    assert!(!dir.join("z.frt").exists());
    let out = ferrite_within(&["run", "/dev/zero", "--out-dir", s(&dir)], limit);
    assert_error(&out, "not a regular file");
    let model = dir.join("mlp.onnx");
    std::fs::write(&model, tiny_mlp()).unwrap();
    let out = ferrite_within(
        &[
            "run",
            s(&model),
            "--input",
            "/dev/zero",
            "--out-dir",
            s(&dir),
        ],
        limit,
    );
    assert_error(&out, "not a regular file");
    // A folder where a model should be.
    assert_error(&ferrite(&["inspect", s(&dir)]), "not a regular file");
}

#[test]
fn pack_never_overwrites_its_input_nor_leaves_half_a_file() {
    let dir = temp_dir("overwrite");
    let model = dir.join("m.onnx");
    std::fs::write(&model, tiny_mlp()).unwrap();
    let out = ferrite(&["pack", s(&model), "-o", s(&model)]);
    assert_error(&out, "this is the input file");
    assert_eq!(
        std::fs::read(&model).unwrap(),
        tiny_mlp(),
        "the model is untouched"
    );
    // The same file by another path.
    let other = dir.join(".").join("m.onnx");
    assert_error(
        &ferrite(&["pack", s(&model), "-o", s(&other)]),
        "this is the input file",
    );
    // --emit rust writes OUT.rs: refused when that is the input.
    let rs = dir.join("m.rs");
    std::fs::write(&rs, tiny_mlp()).unwrap();
    let out = ferrite(&[
        "pack",
        s(&rs),
        "-o",
        s(&dir.join("m.frt")),
        "--emit",
        "rust",
    ]);
    assert_error(&out, "this is the input file");
    assert!(
        !dir.join("m.frt").exists(),
        "nothing written before the refusal"
    );
    // A failed pack (an unsupported model) leaves no output and no temporary file behind.
    let bad = dir.join("bad.onnx");
    std::fs::write(&bad, b"\x08\x07\x12\x03abc").unwrap();
    let target = dir.join("bad.frt");
    assert!(!ferrite(&["pack", s(&bad), "-o", s(&target)])
        .status
        .success());
    assert!(!target.exists());
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // An output folder that does not exist.
    let out = ferrite(&["pack", s(&model), "-o", s(&dir.join("missing/m.frt"))]);
    assert_error(&out, "does not exist");
}

fn pack_error(onnx: Vec<u8>, needle: &str) {
    let dir = temp_dir(&format!("graph-{}", needle.len()));
    let model = dir.join("m.onnx");
    std::fs::write(&model, onnx).unwrap();
    assert_error(
        &ferrite(&["pack", s(&model), "-o", s(&dir.join("m.frt"))]),
        needle,
    );
}

#[test]
fn graphs_onnxruntime_rejects_are_rejected() {
    let relu = |b: ModelBuilder| {
        b.input("x", data_type::FLOAT, &[D::N(1), D::N(4)]).node(
            "Relu",
            "relu",
            &["x"],
            &["y"],
            vec![],
        )
    };
    // Two graph outputs of one name.
    pack_error(
        relu(ModelBuilder::new(13)).output("y").output("y").encode(),
        "the graph lists output 'y' twice",
    );
    // An output declared int32 that the graph computes as float.
    let mut declared = relu(ModelBuilder::new(13)).output("y").encode();
    {
        use prost::Message;
        let mut m = ferrite_tools::compile::onnx::proto::ModelProto::decode(&declared[..]).unwrap();
        let graph = m.graph.as_mut().unwrap();
        graph.output[0] = graph.input[0].clone();
        graph.output[0].name = "y".into();
        graph.output[0]
            .r#type
            .as_mut()
            .unwrap()
            .tensor_type
            .as_mut()
            .unwrap()
            .elem_type = data_type::INT32;
        declared = m.encode_to_vec();
    }
    pack_error(declared, "is declared int32 but the graph computes float32");
    // Gelu (opset 20) in an opset-17 model.
    let gelu = ModelBuilder::new(17)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(4)])
        .node("Gelu", "gelu", &["x"], &["y"], vec![])
        .output("y")
        .encode();
    pack_error(
        gelu,
        "Gelu was added in opset 20; the model imports opset 17",
    );
}

#[test]
fn fortran_order_arrays_are_read_in_c_order() {
    let dir = temp_dir("fortran");
    // np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)), as numpy saves it.
    let header = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let padded = format!("{header:<117}\n");
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    // Column-major: (0,0) (1,0) (0,1) (1,1) (0,2) (1,2).
    for v in [0f32, 3.0, 1.0, 4.0, 2.0, 5.0] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    let path = dir.join("f.npy");
    std::fs::write(&path, bytes).unwrap();
    let array = npy::read(&path).unwrap();
    assert_eq!(array.shape, vec![2, 3]);
    let values: Vec<f32> = array
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(values, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    // Rank 3 and 1: the reorder against a direct computation.
    let c: Vec<u8> = (0..24u8).collect();
    let f: Vec<u8> = (0..24)
        .map(|k| {
            // Fortran offset k ↔ index (i, j, l) with k = i + 2j + 6l over shape (2, 3, 4).
            let (i, j, l) = (k % 2, k / 2 % 3, k / 6);
            c[i * 12 + j * 4 + l]
        })
        .collect();
    let header = "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3, 4), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let padded = format!("{header:<117}\n");
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    bytes.extend_from_slice(&f);
    let array = npy::from_bytes(&bytes, "f3.npy").unwrap();
    assert_eq!(array.bytes, c);
    let _ = NpyArray {
        dtype: DType::U8,
        shape: vec![],
        bytes: vec![],
    };
}

#[test]
fn a_model_without_inputs_runs_without_input_flags() {
    let dir = temp_dir("no-inputs");
    let model = ModelBuilder::new(13)
        .init_f32("c", &[2, 2], &[1.0, -2.0, 3.0, -4.0])
        .node("Relu", "relu", &["c"], &["y"], vec![])
        .output("y")
        .encode();
    let onnx = dir.join("const.onnx");
    std::fs::write(&onnx, model).unwrap();
    let frt = dir.join("const.frt");
    let out = ferrite(&["pack", s(&onnx), "-o", s(&frt)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ferrite(&["run", s(&frt), "--out-dir", s(&dir)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let y = npy::read(&dir.join("output_0.npy")).unwrap();
    let values: Vec<f32> = y
        .bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(values, vec![1.0, 0.0, 3.0, 0.0]);
    // An output path that is one of the inputs is refused.
    let x = dir.join("x.npy");
    let mlp = dir.join("mlp.onnx");
    std::fs::write(&mlp, tiny_mlp()).unwrap();
    npy::write(
        &x,
        &NpyArray {
            dtype: DType::F32,
            shape: vec![1, 4],
            bytes: vec![0; 16],
        },
    )
    .unwrap();
    let out_dir = dir.join("o");
    std::fs::create_dir_all(&out_dir).unwrap();
    let clobber = out_dir.join("output_0.npy");
    std::fs::copy(&x, &clobber).unwrap();
    let out = ferrite(&[
        "run",
        s(&mlp),
        "--input",
        s(&clobber),
        "--out-dir",
        s(&out_dir),
    ]);
    assert_error(&out, "this is the input file");
}
