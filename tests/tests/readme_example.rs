//! The firmware example of `docs/usage.md`, compiled and run: the model is packed by `build.rs` (as a
//! firmware crate would) and included with `include_model!`; the arena is a fixed-size
//! `Arena<512>`, the size `ferrite pack` prints.

use ferrite_core::{include_model, Arena, Model, Session};
use ferrite_cpu::{CpuDevice, CpuError};
use ferrite_tools::compile::tensor::HostTensor;
use ferrite_tools::host::npy;

fn classify(image: &[f32; 64]) -> Result<usize, ferrite_core::Error<CpuError>> {
    let model = Model::load(include_model!(concat!(env!("OUT_DIR"), "/digits.frt")))?;
    let mut arena = Arena::<512>::new();
    let mut session = Session::new(&model, CpuDevice::new(), arena.as_mut_bytes())?;
    session.set_input_f32(0, image)?;
    session.run()?;
    let scores = session.output_f32(0)?;
    Ok((0..10)
        .max_by(|&a, &b| scores[a].total_cmp(&scores[b]))
        .unwrap_or(0))
}

#[test]
fn readme_firmware_example_classifies_the_held_out_digits() {
    assert_eq!(
        env!("DIGITS_ARENA_BYTES"),
        "512",
        "update docs/usage.md's example and this test's Arena size"
    );
    let root = ferrite_tests::workspace_root();
    let x = npy::read(&root.join("demo/digits_test_x.npy")).unwrap();
    let y = npy::read(&root.join("demo/digits_test_y.npy")).unwrap();
    let images = HostTensor::from_le_bytes(x.dtype, x.shape, &x.bytes)
        .unwrap()
        .to_f32s();
    let labels = HostTensor::from_le_bytes(y.dtype, y.shape, &y.bytes)
        .unwrap()
        .to_i64s();
    let correct = images
        .chunks_exact(64)
        .zip(&labels)
        .filter(|(image, &label)| classify((*image).try_into().unwrap()).unwrap() as i64 == label)
        .count();
    // onnxruntime gets 349 of the 360 right (demo/ort_reference.py).
    assert_eq!(correct, 349);
}
