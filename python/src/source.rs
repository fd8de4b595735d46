//! What a model argument may be — a path, `bytes`, or an `onnx.ModelProto` — and the pack-time
//! options (`input_shapes=`, `constants=`) as ferrite-tools takes them.

use crate::arrays;
use crate::errors::{from_run_error, PackError};
use ferrite_tools::compile::pack::{parse_input_shape, Constant, PackOptions};
use ferrite_tools::compile::tensor::HostTensor;
use ferrite_tools::host::error::RunError;
use ferrite_tools::host::files;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyMemoryView, PyString};
use std::path::PathBuf;

/// A model's bytes and how reports name it.
pub struct ModelSource {
    /// The file's bytes (`.frt` or ONNX).
    pub bytes: Vec<u8>,
    /// The path it was read from, else `<bytes>` or `<onnx.ModelProto>`.
    pub label: String,
}

/// Reads a model argument: `str` or `os.PathLike` (a file), `bytes`/`bytearray`/`memoryview`,
/// or anything with `SerializeToString()` (an `onnx.ModelProto`).
pub fn read(value: &Bound<'_, PyAny>) -> PyResult<ModelSource> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(ModelSource {
            bytes: bytes.as_bytes().to_vec(),
            label: "<bytes>".into(),
        });
    }
    if value.is_instance_of::<PyByteArray>() || value.is_instance_of::<PyMemoryView>() {
        let bytes = value.py().get_type::<PyBytes>().call1((value,))?;
        return read(&bytes);
    }
    if value.hasattr("SerializeToString")? && !value.is_instance_of::<PyString>() {
        let bytes = value.call_method0("SerializeToString")?;
        let mut source = read(&bytes)?;
        source.label = "<onnx.ModelProto>".into();
        return Ok(source);
    }
    let path: PathBuf = value.extract().map_err(|_| {
        PackError::new_err(format!(
            "a model is a path, bytes or an onnx.ModelProto, not {}",
            value
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    let bytes = files::read_bounded(&path, files::MODEL_LIMIT, "a model").map_err(|e| match e {
        files::FileError::Io { source, .. } => from_run_error(RunError::Io {
            path: path.display().to_string(),
            source,
        }),
        other => from_run_error(RunError::Input(other.to_string())),
    })?;
    Ok(ModelSource {
        bytes,
        label: path.display().to_string(),
    })
}

/// `input_shapes={"x": (1, 3, 96, 96)}` (or `"1x3x96x96"`; `{"batch": 4}` sizes a symbolic
/// dimension in every input), `constants={"k": array}` (or a number: `{"sr": 16000}`) and `strict_shapes` as pack options.
pub fn options(
    input_shapes: Option<&Bound<'_, PyDict>>,
    constants: Option<&Bound<'_, PyDict>>,
    strict_shapes: bool,
) -> PyResult<PackOptions> {
    let mut options = PackOptions {
        strict_shapes,
        ..PackOptions::default()
    };
    for (name, dims) in input_shapes.into_iter().flat_map(|d| d.iter()) {
        let name: String = name.extract()?;
        let shape = match dims.extract::<String>() {
            Ok(text) => parse_input_shape(&format!("{name}={text}"))
                .map_err(crate::errors::from_pack_error)?
                .1,
            Err(_) if dims.extract::<usize>().is_ok() => vec![dims.extract::<usize>()?],
            Err(_) => dims.extract::<Vec<usize>>().map_err(|_| {
                PackError::new_err(format!(
                    "bad input_shapes['{name}']: a sequence of non-negative integers or 'DIMxDIM...'"
                ))
            })?,
        };
        options.input_shapes.push((name, shape));
    }
    for (name, value) in constants.into_iter().flat_map(|d| d.iter()) {
        let name: String = name.extract()?;
        // A Python number freezes an input of one element, converted to its type.
        if value.is_instance_of::<PyBool>()
            || value.is_instance_of::<PyInt>()
            || value.is_instance_of::<PyFloat>()
        {
            let number: f64 = value.extract()?;
            options.constants.push((name, Constant::Number(number)));
            continue;
        }
        let array = arrays::view(&value, &format!("constant '{name}'"))?;
        let tensor = HostTensor::from_le_bytes(array.dtype, array.shape.clone(), array.bytes())
            .ok_or_else(|| {
                PackError::new_err(format!("constant '{name}': the array is too large"))
            })?;
        options.constants.push((name, Constant::Array(tensor)));
    }
    Ok(options)
}
