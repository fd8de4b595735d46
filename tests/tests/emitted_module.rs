//! The module `ferrite pack --emit rust` writes, compiled into this test as firmware would
//! include it: the model is a 16-byte aligned static, the arena is sized by `ARENA_BYTES` at
//! compile time, and the model runs in it with the same results as the CLI's `.frt`.

mod digits {
    include!(concat!(env!("OUT_DIR"), "/digits.rs"));
}

use ferrite_core::{Arena, Model, Session};
use ferrite_cpu::CpuDevice;

#[test]
fn the_emitted_module_runs_in_an_arena_sized_at_compile_time() {
    assert_eq!(
        digits::MODEL.as_ptr() as usize % 16,
        0,
        "aligned for Model::load"
    );
    assert_eq!(digits::MODEL.len(), digits::MODEL_BYTES);
    let model = Model::load(digits::MODEL).expect("the embedded model verifies");
    assert_eq!(model.arena_bytes(), digits::ARENA_BYTES);
    let (name, dtype, shape) = digits::INPUTS[0];
    assert_eq!((name, dtype), ("image", "float32"));
    assert_eq!(shape, model.input(0).unwrap().desc.shape.dims());
    assert_eq!(digits::OUTPUTS[0].2, &[1, 10]);
    // A float model: no input or output is quantized.
    assert_eq!(digits::INPUT_QUANTIZATION, [None]);
    assert_eq!(digits::OUTPUT_QUANTIZATION, [None]);

    let mut arena = Arena::<{ digits::ARENA_BYTES }>::new();
    let mut session =
        Session::new(&model, CpuDevice::new(), arena.as_mut_bytes()).expect("exactly enough");
    let image: Vec<f32> = (0..64).map(|i| (i % 16) as f32).collect();
    session.set_input_f32(0, &image).unwrap();
    session.run().unwrap();
    let scores = session.output_f32(0).unwrap();
    let total: f32 = scores.iter().sum();
    assert!((total - 1.0).abs() < 1e-5, "softmax sums to {total}");

    // One byte less than ARENA_BYTES is refused, naming both sizes.
    let mut small = Arena::<{ digits::ARENA_BYTES }>::new();
    let short = &mut small.as_mut_bytes()[..digits::ARENA_BYTES - 16];
    match Session::new(&model, CpuDevice::new(), short) {
        Err(e) => assert!(
            e.to_string().contains(&digits::ARENA_BYTES.to_string()),
            "{e}"
        ),
        Ok(_) => panic!("a short arena was accepted"),
    }
}

/// A device made with the module's `OPS` (the digits model's op kinds) runs the model exactly
/// as the full device does, and refuses at session creation a model needing another kind.
#[test]
fn a_device_selected_by_the_emitted_ops_runs_its_model_and_refuses_others() {
    use ferrite_hal::{selects, selects_activation, Activation, OpKind};
    assert!(selects(digits::OPS, OpKind::Gemm) && selects(digits::OPS, OpKind::Softmax));
    assert!(!selects(digits::OPS, OpKind::Conv));
    // Its one activation, the Relu fused into the first Gemm, and no other.
    assert!(selects_activation(digits::OPS, &Activation::Relu));
    assert!(!selects_activation(digits::OPS, &Activation::Tanh));
    let model = Model::load(digits::MODEL).expect("the embedded model verifies");
    let image: Vec<f32> = (0..64).map(|i| (i * 7 % 16) as f32).collect();
    assert_eq!(
        scores::<{ digits::OPS }>(&model, &image),
        scores::<{ ferrite_hal::ALL_OPS }>(&model, &image)
    );

    use ferrite_tools::compile::onnx::build::{ModelBuilder, D};
    use ferrite_tools::compile::onnx::proto::data_type;
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(1), D::N(4), D::N(4)])
        .init_f32("w", &[1, 1, 3, 3], &[0.5; 9])
        .node("Conv", "conv", &["x", "w"], &["y"], vec![])
        .output("y")
        .encode();
    let packed = ferrite_tools::pack(&onnx, &ferrite_tools::PackOptions::default()).unwrap();
    let bytes = ferrite_tools::aligned::AlignedBytes::from(&packed.bytes[..]);
    let conv = Model::load(bytes.as_bytes()).unwrap();
    let mut arena = vec![0u8; conv.arena_bytes() + 64];
    match Session::new(&conv, CpuDevice::<{ digits::OPS }>::selected(), &mut arena) {
        Err(e) => assert!(e.to_string().contains("Conv"), "{e}"),
        Ok(_) => panic!("a device without Conv kernels accepted a convolution"),
    }
}

/// The digits model's scores for `image` on a CPU device with the kernels of `OPS`.
fn scores<const OPS: ferrite_hal::Selection>(model: &Model<'_>, image: &[f32]) -> Vec<f32> {
    let mut arena = Arena::<{ digits::ARENA_BYTES }>::new();
    let device = CpuDevice::<OPS>::selected();
    let mut session = Session::new(model, device, arena.as_mut_bytes()).unwrap();
    session.set_input_f32(0, image).unwrap();
    session.run().unwrap();
    session.output_f32(0).unwrap().to_vec()
}
