//! # ferrite (Python)
//!
//! The Python package `ferrite`: `pack` an ONNX model into a `.frt`, run it in a `Session` on
//! the CPU (or a GPU, or an emulated Cortex-M), and `bench` it — with the same checks, errors
//! and reports as the `ferrite` CLI. Everything here only converts between Python and
//! ferrite-tools, which does the work.

mod arrays;
mod errors;
mod json;
mod owned;
mod pack;
mod session;
mod source;

use pyo3::prelude::*;

/// Ferrite: ONNX inference for microcontrollers and edge GPUs.
#[pymodule]
fn _ferrite(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(pack::pack, m)?)?;
    m.add_class::<session::Session>()?;
    m.add_class::<session::TensorInfo>()?;
    m.add_class::<session::Quantization>()?;
    m.add("FerriteError", py.get_type::<errors::FerriteError>())?;
    m.add("PackError", py.get_type::<errors::PackError>())?;
    m.add("ModelError", py.get_type::<errors::ModelError>())?;
    m.add("InputError", py.get_type::<errors::InputError>())?;
    m.add("DeviceError", py.get_type::<errors::DeviceError>())?;
    m.add("SessionError", py.get_type::<errors::SessionError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
