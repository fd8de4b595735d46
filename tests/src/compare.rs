//! Output comparison with stated tolerances.

use ferrite_hal::DType;
use ferrite_tools::compile::tensor::HostTensor;
use ferrite_tools::host::npy::NpyArray;

/// `max |a - b| / max |b|` over two float arrays (0 when both are all zero).
pub fn relative_error(actual: &[f32], expected: &[f32]) -> f32 {
    let max_ref = expected.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let max_err = actual.iter().zip(expected).fold(0.0f32, |m, (a, b)| {
        if a.is_nan() || b.is_nan() {
            if a.is_nan() && b.is_nan() {
                m
            } else {
                f32::INFINITY
            }
        } else {
            m.max((a - b).abs())
        }
    });
    if max_ref == 0.0 {
        max_err
    } else {
        max_err / max_ref
    }
}

/// Values of an array as floats.
pub fn floats(a: &NpyArray) -> Vec<f32> {
    HostTensor::from_le_bytes(a.dtype, a.shape.clone(), &a.bytes)
        .map(|t| t.to_f32s())
        .unwrap_or_default()
}

/// Compares like the ONNX backend tests: same dtype and shape; floats (of any width) within
/// `atol + rtol × |expected|` elementwise (NaN matches NaN); other types exactly.
pub fn allclose(
    actual: &NpyArray,
    expected: &NpyArray,
    rtol: f32,
    atol: f32,
) -> Result<(), String> {
    if actual.dtype != expected.dtype || actual.shape != expected.shape {
        return Err(format!(
            "got {} {:?}, expected {} {:?}",
            actual.dtype, actual.shape, expected.dtype, expected.shape
        ));
    }
    if actual.dtype != DType::F32 && !actual.dtype.is_interface_float() {
        return if actual.bytes == expected.bytes {
            Ok(())
        } else {
            Err("values differ".into())
        };
    }
    let (a, e) = (floats(actual), floats(expected));
    for (i, (x, y)) in a.iter().zip(&e).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= atol + rtol * y.abs();
        if !ok {
            return Err(format!("element {i}: got {x}, expected {y}"));
        }
    }
    Ok(())
}
