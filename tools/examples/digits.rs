//! The digits demo: classify every held-out image with a packed model on a device (the CPU,
//! `vulkan[:N]`, or the Cortex-M4F firmware on QEMU, `qemu-m4`) and compare with onnxruntime's
//! predictions (exactly, for a float model; within one point of accuracy for an int8 one).
//!
//! `cargo run --release -p ferrite-tools --example digits -- MODEL.frt TEST_X.npy TEST_Y.npy ORT_PREDICTIONS.npy [DEVICE]`

use ferrite_core::{Model, Session};
use ferrite_cpu::CpuDevice;
use ferrite_hal::Device;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::tensor::HostTensor;
use ferrite_tools::host::npy;
use ferrite_tools::host::runner::DeviceSpec;
use std::path::Path;
use std::time::Instant;

fn labels(path: &str) -> Result<Vec<i64>, String> {
    let a = npy::read(Path::new(path)).map_err(|e| e.to_string())?;
    Ok(HostTensor::from_le_bytes(a.dtype, a.shape, &a.bytes)
        .ok_or("bad labels")?
        .to_i64s())
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (model_path, x_path, y_path, ort_path, device) = match args.as_slice() {
        [m, x, y, o] => (m, x, y, o, "cpu"),
        [m, x, y, o, d] => (m, x, y, o, d.as_str()),
        _ => {
            return Err(
                "usage: digits MODEL.frt TEST_X.npy TEST_Y.npy ORT_PREDICTIONS.npy [DEVICE]".into(),
            )
        }
    };
    let bytes = AlignedBytes::from(&std::fs::read(model_path).map_err(|e| e.to_string())?[..]);
    let model = Model::load(bytes.as_bytes()).map_err(|e| e.to_string())?;
    let images = npy::read(Path::new(x_path)).map_err(|e| e.to_string())?;
    let truth = labels(y_path)?;
    let ort = labels(ort_path)?;
    let image_bytes = model.input(0).ok_or("model has no input")?.desc.bytes;
    if images.bytes.len() != truth.len() * image_bytes {
        return Err("images and labels do not match the model's input".into());
    }
    let args = Classify {
        model: &model,
        images: &images.bytes,
        image_bytes,
        truth: &truth,
        ort: &ort,
        name: device,
    };
    match DeviceSpec::parse(device).map_err(|e| e.to_string())? {
        DeviceSpec::Cpu { threads } => classify(&args, CpuDevice::new().with_threads(threads)),
        DeviceSpec::Vulkan(i) => classify(
            &args,
            ferrite_tools::host::runner::open_vulkan(i).map_err(|e| e.to_string())?,
        ),
        DeviceSpec::Cuda(i) => classify(
            &args,
            ferrite_tools::host::runner::open_cuda(i).map_err(|e| e.to_string())?,
        ),
        DeviceSpec::Qemu(board) => classify_on_qemu(&args, board, bytes.as_bytes()),
    }
}

/// Classifies every image with the firmware on an emulated Cortex-M (one QEMU run per image) and
/// reports instructions per inference instead of latency.
fn classify_on_qemu(
    a: &Classify<'_>,
    board: ferrite_tools::host::qemu::Board,
    bytes: &[u8],
) -> Result<(), String> {
    let info = a.model.input(0).ok_or("model has no input")?;
    let (mut correct, mut agree, mut instructions) = (0, 0, 0);
    for (i, image) in a.images.chunks_exact(a.image_bytes).enumerate() {
        let input = ferrite_tools::host::npy::NpyArray {
            dtype: info.desc.dtype,
            shape: info.desc.shape.dims().to_vec(),
            bytes: image.to_vec(),
        };
        let run = ferrite_tools::host::qemu::run(board, bytes, a.model, &[input], 1)
            .map_err(|e| e.to_string())?;
        instructions = run.instructions.first().copied().unwrap_or(0);
        let scores: Vec<f32> = run.outputs[0]
            .bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let predicted = argmax(&scores);
        correct += (predicted == a.truth[i]) as usize;
        agree += (predicted == a.ort[i]) as usize;
    }
    let n = a.truth.len();
    println!(
        "ferrite ({}, {} firmware): accuracy {:.4} ({correct}/{n}), {instructions} instructions per image",
        board.device_name(),
        board.describe(),
        correct as f64 / n as f64
    );
    println!("ferrite and onnxruntime agree on {agree}/{n} images");
    judge(a, correct, agree)
}

/// A float model must predict exactly what onnxruntime predicts; an int8 one (`ferrite pack
/// --quantize int8`) must keep its accuracy within one point of onnxruntime's float accuracy.
fn judge(a: &Classify<'_>, correct: usize, agree: usize) -> Result<(), String> {
    let n = a.truth.len();
    let is_int8 = (0..a.model.tensor_count())
        .filter_map(|t| a.model.tensor_info(t))
        .any(|t| t.desc.dtype == ferrite_hal::DType::I8);
    if !is_int8 {
        return match agree == n {
            true => Ok(()),
            false => Err("ferrite and onnxruntime disagree".into()),
        };
    }
    let float_correct = a.truth.iter().zip(a.ort).filter(|(t, o)| t == o).count();
    let drop = (float_correct as f64 - correct as f64) / n as f64;
    let change = (correct as f64 - float_correct as f64) / n as f64 * 100.0;
    println!(
        "int8 accuracy {:.4} vs float {:.4} (onnxruntime): {:+.2} points",
        correct as f64 / n as f64,
        float_correct as f64 / n as f64,
        change
    );
    if drop > 0.01 {
        return Err("the int8 model lost more than one point of accuracy".into());
    }
    Ok(())
}

/// The index of the largest score.
fn argmax(scores: &[f32]) -> i64 {
    scores
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(k, _)| k as i64)
        .unwrap_or(-1)
}

/// What [`classify`] needs.
struct Classify<'a> {
    model: &'a Model<'a>,
    images: &'a [u8],
    image_bytes: usize,
    truth: &'a [i64],
    ort: &'a [i64],
    name: &'a str,
}

/// Classifies every image on `device`, prints accuracy and latency, and fails if any prediction
/// differs from onnxruntime's.
fn classify<D: Device>(a: &Classify<'_>, device: D) -> Result<(), String> {
    let (model, truth, ort) = (a.model, a.truth, a.ort);
    let mut arena = AlignedBytes::zeroed(model.arena_bytes());
    let mut session =
        Session::new(model, device, arena.as_mut_bytes()).map_err(|e| e.to_string())?;
    let mut correct = 0;
    let mut agree = 0;
    let mut times = Vec::with_capacity(truth.len());
    for (i, image) in a.images.chunks_exact(a.image_bytes).enumerate() {
        let start = Instant::now();
        session.set_input(0, image).map_err(|e| e.to_string())?;
        session.run().map_err(|e| e.to_string())?;
        let probabilities = session.output_f32(0).map_err(|e| e.to_string())?;
        let predicted = argmax(probabilities);
        times.push(start.elapsed().as_secs_f64() * 1e6);
        correct += (predicted == truth[i]) as usize;
        agree += (predicted == ort[i]) as usize;
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let n = truth.len();
    println!(
        "ferrite ({}): accuracy {:.4} ({correct}/{n}), median {:.1} us per image, arena {} bytes, weights {} bytes",
        a.name,
        correct as f64 / n as f64,
        times[n / 2],
        model.arena_bytes(),
        model.weights_bytes()
    );
    println!("ferrite and onnxruntime agree on {agree}/{n} images");
    judge(a, correct, agree)
}
