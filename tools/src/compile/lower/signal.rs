//! Signal processing: the Fourier transforms DFT and STFT (one `Op::Dft` step each, with its
//! twiddle table computed here), and the ops whose results are constants at pack time: the
//! window functions (HannWindow, HammingWindow, BlackmanWindow) and MelWeightMatrix. Their
//! inputs are sizes and frequencies, known when the model is packed; the tensors they give are
//! computed here, in f64 as ONNX's reference does, and stored with the model (a `size`-element
//! window, a `bins × mel` matrix), so a device runs no trigonometry for them.

use super::attrs::Attrs;
use super::lowerer::{Lowerer, Reason};
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;
use crate::compile::tensor::{dtype_from_onnx, HostTensor, MAX_CONSTANT_ELEMENTS};
use ferrite_hal::geometry::DftGeometry;
use ferrite_hal::op::{Dft, MAX_DFT_LENGTH};
use ferrite_hal::{DType, Op, Shape};
use std::f64::consts::PI;

/// The `[n, 2]` table `cos, −sin` of `2πk/n` the transform kernels read.
fn twiddles(lw: &mut Lowerer, node: &Node, n: usize) -> TensorId {
    let values = (0..n)
        .flat_map(|k| {
            let a = 2.0 * PI * k as f64 / n as f64;
            [a.cos() as f32, -a.sin() as f32]
        })
        .collect();
    lw.constant(node, "twiddles", HostTensor::float(vec![n, 2], values))
}

/// Emits the transform `op` of `x` (and `window`) into output 0 of `node`.
fn transform(
    lw: &mut Lowerer,
    node: &Node,
    op: Dft,
    x: TensorId,
    window: Option<TensorId>,
) -> Result<(), Reason> {
    if !(1..=MAX_DFT_LENGTH).contains(&op.length) {
        return Err(format!(
            "a transform of length {} (at most {MAX_DFT_LENGTH})",
            op.length
        ));
    }
    let shape = Shape::new(&lw.shape(x)).ok_or("the signal's rank is too high")?;
    let g = DftGeometry::new(&op, &shape).ok_or_else(|| {
        format!(
            "signal {:?} does not fit (last dimension 1 for real or 2 for complex values; a one-sided transform of real values; an STFT frame no longer than the signal)",
            lw.shape(x)
        )
    })?;
    let t = twiddles(lw, node, op.length);
    let y = lw.output(node, 0, DType::F32, g.out_shape.dims().to_vec())?;
    lw.emit(node, Op::Dft(op), vec![Some(x), Some(t), window], vec![y])
}

/// DFT (opset 17: `axis` attribute; opset 20: an input): forward or inverse, full or one-sided,
/// zero-padded or truncated to `dft_length`.
pub(super) fn dft(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let s = lw.shape(x);
    let rank = s.len() as i64;
    let axis = if lw.opset() >= 20 {
        match lw.const_ints(node, 2, "DFT axis")? {
            Some(v) if v.len() == 1 => v[0],
            Some(_) => return Err("the DFT axis must be a scalar".into()),
            None => -2,
        }
    } else {
        node.int("axis", 1)?
    };
    let axis = if axis < 0 { axis + rank } else { axis };
    if axis < 0 || axis + 1 >= rank {
        return Err(format!(
            "axis {axis} is not a signal axis of a rank-{rank} input"
        ));
    }
    let (inverse, onesided) = (node.int("inverse", 0)? != 0, node.int("onesided", 0)? != 0);
    let signal = s[axis as usize];
    let length = match lw.const_ints(node, 1, "dft_length")? {
        Some(v) if v.len() == 1 => {
            usize::try_from(v[0]).map_err(|_| "dft_length must be positive")?
        }
        Some(_) => return Err("dft_length must be a scalar".into()),
        None if inverse && onesided => 2 * signal.saturating_sub(1),
        None => signal,
    };
    let op = Dft {
        axis: axis as usize,
        length,
        frame_step: 0,
        inverse,
        onesided,
    };
    transform(lw, node, op, x, None)
}

/// STFT: frames of `frame_length` samples every `frame_step`, each multiplied by the window
/// (when given) and transformed; output `[batch, frames, bins, 2]`.
pub(super) fn stft(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let x = lw.input(node, 0)?;
    lw.require_f32(&[x])?;
    let step = int_input(lw, node, 1, "frame_step")?;
    let window = lw.optional_input(node, 2);
    if let Some(w) = window {
        lw.require_f32(&[w])?;
    }
    let frame_length = match lw.optional_input(node, 3) {
        Some(_) => Some(int_input(lw, node, 3, "frame_length")?),
        None => None,
    };
    let window_length = window.map(|w| lw.shape(w));
    let length = match (frame_length, &window_length) {
        (Some(n), Some(w)) if w[..] != [n.max(0) as usize] => {
            return Err(format!(
                "the window has shape {w:?}, the frame length is {n}"
            ));
        }
        (Some(n), _) => n,
        (None, Some(w)) if w.len() == 1 => w[0] as i64,
        (None, Some(w)) => return Err(format!("the window has shape {w:?}, not one axis")),
        (None, None) => return Err("STFT needs a frame_length or a window".into()),
    };
    if step < 1 || length < 1 {
        return Err(format!(
            "frame_step {step} and frame length {length} must be positive"
        ));
    }
    let op = Dft {
        axis: 1,
        length: length as usize,
        frame_step: step as usize,
        inverse: false,
        onesided: node.int("onesided", 1)? != 0,
    };
    transform(lw, node, op, x, window)
}

/// The element type an `output_datatype` attribute names (float by default).
fn output_type(node: &Node) -> Result<DType, Reason> {
    let code = node.int("output_datatype", 1)?;
    dtype_from_onnx(code as i32)
        .filter(|&t| t != DType::Bool)
        .ok_or_else(|| format!("output_datatype {code} is not supported"))
}

/// Integer scalar input `i`, which must be a constant.
fn int_input(lw: &Lowerer, node: &Node, i: usize, what: &str) -> Result<i64, Reason> {
    let v = lw
        .const_ints(node, i, what)?
        .ok_or_else(|| format!("{what} is required"))?;
    match v[..] {
        [x] => Ok(x),
        _ => Err(format!("{what} must be a scalar")),
    }
}

/// Values computed in f64, stored as `dtype` (the reference computes in f64 and casts).
fn values_as(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> HostTensor {
    HostTensor::float(shape, v.into_iter().map(|x| x as f32).collect()).cast(dtype)
}

/// HannWindow, HammingWindow, BlackmanWindow: `size` values of the window, periodic (the
/// default: the DFT's convention, `N` in the denominator) or symmetric (`N − 1`).
pub(super) fn window(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let size = int_input(lw, node, 0, "the window size")?;
    if !(0..=MAX_CONSTANT_ELEMENTS as i64).contains(&size) {
        return Err(format!("window size {size} is out of range"));
    }
    let periodic = node.int("periodic", 1)? != 0;
    let dtype = output_type(node)?;
    let n = if periodic { size } else { size - 1 } as f64;
    let phase = |i: usize, k: f64| (k * PI * i as f64 / n).cos();
    let value = |i: usize| match node.op_type.as_str() {
        "HannWindow" => (PI * i as f64 / n).sin().powi(2),
        "HammingWindow" => 25.0 / 46.0 - (21.0 / 46.0) * phase(i, 2.0),
        _ => 0.42 - 0.5 * phase(i, 2.0) + 0.08 * phase(i, 4.0),
    };
    let v = (0..size as usize).map(value).collect();
    lw.const_output(node, 0, values_as(dtype, vec![size as usize], v));
    Ok(())
}

/// MelWeightMatrix: `[dft_length / 2 + 1, num_mel_bins]` triangular filters between the two
/// edge frequencies, on the mel scale `2595 · log10(1 + f / 700)`, with the filter edges
/// placed at `floor((dft_length + 1) · f / sample_rate)` exactly as ONNX's reference does.
pub(super) fn mel_weight_matrix(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let mel_bins = int_input(lw, node, 0, "num_mel_bins")?;
    let dft_length = int_input(lw, node, 1, "dft_length")?;
    let sample_rate = int_input(lw, node, 2, "sample_rate")?;
    let edge = |i: usize, what: &str| -> Result<f32, Reason> {
        lw.const_scalar(node, i, what)?
            .ok_or_else(|| format!("{what} is required"))
    };
    let (lower, upper) = (edge(3, "lower_edge_hertz")?, edge(4, "upper_edge_hertz")?);
    let limit = MAX_CONSTANT_ELEMENTS as i64;
    if !(1..=limit).contains(&mel_bins) || !(1..=limit).contains(&dft_length) {
        return Err(format!(
            "num_mel_bins {mel_bins} and dft_length {dft_length} must be positive"
        ));
    }
    if sample_rate <= 0 || !(lower.is_finite() && upper.is_finite()) || lower < 0.0 {
        return Err("sample_rate must be positive and the edges finite, from 0 Hz".into());
    }
    let (bins, mels) = (dft_length as usize / 2 + 1, mel_bins as usize);
    if bins.saturating_mul(mels) > MAX_CONSTANT_ELEMENTS {
        return Err("the matrix is too large".into());
    }
    // The reference's arithmetic: the mel edges in f32 (its inputs' type), the rest in f64.
    let mel = |hz: f32| 2595.0f32 * (1.0f32 + hz / 700.0f32).log10();
    let (low_mel, high_mel) = (mel(lower), mel(upper));
    let step = (high_mel - low_mel) / (mels + 2) as f32;
    let edges: Vec<i64> = (0..mels + 2)
        .map(|i| {
            let m = i as f64 * f64::from(step) + f64::from(low_mel);
            let hz = 700.0 * (10f64.powf(m / 2595.0) - 1.0);
            (((dft_length + 1) as f64 * hz) / sample_rate as f64).floor() as i64
        })
        .collect();
    let mut w = vec![0.0f64; bins * mels];
    let mut set = |j: i64, i: usize, v: f64| -> Result<(), Reason> {
        let slot = usize::try_from(j)
            .ok()
            .filter(|&j| j < bins)
            .and_then(|j| w.get_mut(j * mels + i))
            .ok_or_else(|| {
                format!(
                    "the filters reach bin {j}, past the {bins} bins of dft_length {dft_length}"
                )
            })?;
        *slot = v;
        Ok(())
    };
    for i in 0..mels {
        let (left, center, right) = (edges[i], edges[i + 1], edges[i + 2]);
        if center == left {
            set(center, i, 1.0)?;
        } else {
            for j in left..=center {
                set(j, i, (j - left) as f64 / (center - left) as f64)?;
            }
        }
        for j in center..right {
            set(j, i, (right - j) as f64 / (right - center) as f64)?;
        }
    }
    let dtype = output_type(node)?;
    lw.const_output(node, 0, values_as(dtype, vec![bins, mels], w));
    Ok(())
}
