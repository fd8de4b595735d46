//! What the bindings hand the runner: model bytes recognised by their content (a `.frt`, ONNX,
//! or neither), and arrays offered to a model's inputs by name, each misfit refused naming the
//! input.

use ferrite_core::Model;
use ferrite_hal::DType;
use ferrite_tools::compile::onnx::build::{attr_int, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::data_type;
use ferrite_tools::compile::pack::PackOptions;
use ferrite_tools::host::error::RunError;
use ferrite_tools::host::inputs::{self, Feed};
use ferrite_tools::host::runner;

/// a [1, 4] f32 + b [2] i64 → two outputs.
fn two_input_model() -> Vec<u8> {
    ModelBuilder::new(13)
        .input("a", data_type::FLOAT, &[D::N(1), D::N(4)])
        .input("b", data_type::INT64, &[D::N(2)])
        .node("Relu", "relu", &["a"], &["y"], vec![])
        .node(
            "Cast",
            "cast",
            &["b"],
            &["z"],
            vec![attr_int("to", data_type::FLOAT as i64)],
        )
        .output("y")
        .output("z")
        .encode()
}

#[test]
fn model_bytes_are_recognised_by_content() {
    let onnx = two_input_model();
    let options = PackOptions::default();
    let (packed, _) = runner::load_model_from_bytes(&onnx, &options).unwrap();
    let frt = packed.as_bytes();
    assert!(runner::is_frt(frt) && !runner::is_frt(&onnx));
    // A .frt comes back as itself.
    let (again, notes) = runner::load_model_from_bytes(frt, &options).unwrap();
    assert_eq!(again.as_bytes(), frt);
    assert!(notes.is_empty());
    // A .frt cut anywhere, even inside its magic, is reported as a truncated model.
    for cut in [1, 3, 10, frt.len() / 2, frt.len() - 1] {
        let (bytes, _) = runner::load_model_from_bytes(&frt[..cut], &options).unwrap();
        let e = Model::load(bytes.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("truncated"), "cut at {cut}: {e}");
    }
    // Neither: one line that says so.
    match runner::load_model_from_bytes(b"\xff\xfe garbage", &options) {
        Err(RunError::NotAModel(m)) => assert!(m.starts_with("neither a packed model"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn feeds_are_matched_by_name_and_checked() {
    let (bytes, _) =
        runner::load_model_from_bytes(&two_input_model(), &PackOptions::default()).unwrap();
    let model = Model::load(bytes.as_bytes()).unwrap();
    let a = Feed {
        name: "a",
        dtype: DType::F32,
        shape: &[1, 4],
    };
    let b = Feed {
        name: "b",
        dtype: DType::I64,
        shape: &[2],
    };
    assert_eq!(inputs::match_feeds(&model, &[b, a]).unwrap(), vec![1, 0]);
    let refused = |feeds: &[Feed<'_>]| inputs::match_feeds(&model, feeds).unwrap_err().to_string();
    let c = Feed { name: "c", ..a };
    assert_eq!(
        refused(&[a, b, c]),
        "the model has no input 'c' (inputs: a, b)"
    );
    assert_eq!(refused(&[a, a, b]), "input 'a' is given twice");
    assert_eq!(refused(&[b]), "missing input(s): a (inputs: a, b)");
    assert_eq!(refused(&[]), "missing input(s): a, b (inputs: a, b)");
    let wrong_type = Feed {
        dtype: DType::F64,
        ..a
    };
    assert_eq!(
        refused(&[wrong_type, b]),
        "input 'a' is float32, the array is float64"
    );
    let wrong_shape = Feed { shape: &[4], ..a };
    assert_eq!(
        refused(&[wrong_shape, b]),
        "input 'a' has shape [1, 4], the array has [4]"
    );
}
