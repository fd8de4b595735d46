//! `ferrite.pack(...)`: an ONNX model to `.frt` bytes and the report `ferrite pack` prints.

use crate::arrays;
use crate::errors::{from_pack_error, PackError};
use crate::json::to_python;
use crate::source;
use ferrite_tools::compile::ptq::{self, calibration};
use ferrite_tools::host::npy::NpyArray;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use std::path::PathBuf;

/// Where calibration samples come from.
enum Calibration {
    /// A folder, as `--calibration DIR` reads it.
    Folder(PathBuf),
    /// Arrays given in memory.
    Entries(Vec<calibration::Entry>),
}

/// One calibration entry: an array (a one-input model's sample or batch), a dict of arrays by
/// input name, or a tuple/list of arrays in input order.
fn entry(value: &Bound<'_, PyAny>, k: usize) -> PyResult<calibration::Entry> {
    let what = |name: &str| format!("calibration entry {k}, {name}");
    let array = |v: &Bound<'_, PyAny>, name: &str| -> PyResult<NpyArray> {
        Ok(arrays::view(v, &what(name))?.to_npy())
    };
    if let Ok(dict) = value.cast::<PyDict>() {
        return dict
            .iter()
            .map(|(name, v)| {
                let name: String = name.extract()?;
                let a = array(&v, &format!("input '{name}'"))?;
                Ok((Some(name), a))
            })
            .collect();
    }
    if value.is_instance_of::<PyTuple>() || value.is_instance_of::<PyList>() {
        return value
            .try_iter()?
            .enumerate()
            .map(|(i, v)| Ok((None, array(&v?, &format!("array {i}"))?)))
            .collect();
    }
    Ok(vec![(None, array(value, "array")?)])
}

/// `calibration=`: a folder, one entry, or a list of entries.
fn calibration_of(value: &Bound<'_, PyAny>) -> PyResult<Calibration> {
    if let Ok(path) = value.extract::<PathBuf>() {
        return Ok(Calibration::Folder(path));
    }
    if value.is_instance_of::<PyList>() {
        let entries = value
            .try_iter()?
            .enumerate()
            .map(|(k, v)| entry(&v?, k))
            .collect::<PyResult<_>>()?;
        return Ok(Calibration::Entries(entries));
    }
    Ok(Calibration::Entries(vec![entry(value, 0)?]))
}

/// Packs an ONNX model (a path, bytes or an `onnx.ModelProto`) into a `.frt`.
///
/// Returns `(frt_bytes, report)`: the report is what `ferrite pack` prints, as a dict (ops,
/// weights, arena, file size, convolution strategies, passes, and with `quantize="int8"` the
/// int8-vs-float accuracy per output).
///
/// `input_shapes` fixes inputs' shapes (`{"x": (1, 49, 10, 1)}`) or sizes symbolic dimensions
/// (`{"batch": 4}`; a leading one left over is 1, unless `strict_shapes`), `constants` freezes
/// inputs to values (`{"shape": np.array([...])}`, or a number for an input of one element: `{"sr": 16000}`). The report's `notes` say what was assumed. `quantize="int8"` needs `calibration`: a folder of
/// `.npy` samples, an array (one input; a sample or a batch along a new first axis), a dict of
/// arrays by input name, or a list of those. `calibration_method` is `minmax`, `percentile`,
/// `percentile=P` or `entropy`; `bias_correction` adds the int8 weights' expected error to the
/// biases.
#[pyfunction]
#[pyo3(signature = (model, input_shapes=None, constants=None, quantize=None, calibration=None, calibration_method="minmax", bias_correction=false, strict_shapes=false))]
#[allow(clippy::too_many_arguments)]
pub fn pack<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    input_shapes: Option<&Bound<'py, PyDict>>,
    constants: Option<&Bound<'py, PyDict>>,
    quantize: Option<&str>,
    calibration: Option<&Bound<'py, PyAny>>,
    calibration_method: &str,
    bias_correction: bool,
    strict_shapes: bool,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyAny>)> {
    let onnx = source::read(model)?.bytes;
    if onnx.starts_with(&ferrite_core::format::MAGIC) {
        return Err(PackError::new_err(
            "the model is already packed (a .frt file): load it with ferrite.Session",
        ));
    }
    let options = source::options(input_shapes, constants, strict_shapes)?;
    let quantization = match quantize {
        None if calibration.is_some() => {
            return Err(PackError::new_err("calibration needs quantize=\"int8\""))
        }
        None if bias_correction => {
            return Err(PackError::new_err(
                "bias_correction needs quantize=\"int8\"",
            ))
        }
        None => None,
        Some("int8") => {
            let calibration = calibration.ok_or_else(|| {
                PackError::new_err(
                    "quantize=\"int8\" needs calibration= (a folder of .npy samples, or arrays)",
                )
            })?;
            let method = ptq::Method::parse(calibration_method).ok_or_else(|| {
                PackError::new_err(format!(
                    "calibration_method={calibration_method:?}: use minmax, percentile, percentile=P (50 < P <= 100) or entropy"
                ))
            })?;
            let settings = ptq::Settings {
                method,
                bias_correction,
            };
            Some((calibration_of(calibration)?, settings))
        }
        Some(other) => {
            return Err(PackError::new_err(format!(
                "quantize={other:?}: the only type is \"int8\""
            )))
        }
    };
    // Packing (and calibrating) runs without the GIL: other Python threads go on.
    let (packed, quantized) = py
        .detach(move || {
            let mut quiet = |_: ptq::Stage, _: usize, _: usize| {};
            match quantization {
                None => ferrite_tools::pack(&onnx, &options).map(|p| (p, None)),
                Some((Calibration::Folder(dir), settings)) => {
                    ptq::quantize(&onnx, &options, &dir, settings, &mut quiet)
                        .map(|(p, r)| (p, Some(r)))
                }
                Some((Calibration::Entries(entries), settings)) => {
                    ptq::quantize_in_memory(&onnx, &options, entries, settings, &mut quiet)
                        .map(|(p, r)| (p, Some(r)))
                }
            }
        })
        .map_err(from_pack_error)?;
    let mut report = packed.report.to_json();
    report["quantization"] = quantized
        .as_ref()
        .map_or(serde_json::Value::Null, |r| r.to_json());
    Ok((PyBytes::new(py, &packed.bytes), to_python(py, &report)?))
}
