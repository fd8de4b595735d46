//! `ferrite.Session`: a model loaded once on a device, run on `{name: array}` feeds, in
//! Ferrite's form (`run(feeds) -> dict`) or onnxruntime's (`run(None, feeds) -> list`).

use crate::arrays;
use crate::errors::{from_run_error, InputError};
use crate::json::to_python;
use crate::owned::OwnedSession;
use crate::source;
use ferrite_core::Model;
use ferrite_hal::DType;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::host::bench::{self, BenchRequest};
use ferrite_tools::host::inputs;
use ferrite_tools::host::inputs::Feed;
use ferrite_tools::host::npy;
use ferrite_tools::host::runner::{self, DeviceSpec};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::{Mutex, TryLockError};

/// The scale and zero point of an int8 (or other integer) input or output:
/// `real = (q - zero_point) * scale`.
#[pyclass(module = "ferrite", frozen, get_all, eq)]
#[derive(Clone, Copy, PartialEq)]
pub struct Quantization {
    /// The step between neighbouring integers.
    pub scale: f64,
    /// The integer that stands for 0.
    pub zero_point: i64,
}

#[pymethods]
impl Quantization {
    fn __repr__(&self) -> String {
        format!(
            "Quantization(scale={}, zero_point={})",
            self.scale, self.zero_point
        )
    }
}

/// A model input or output: its name, shape, numpy dtype and (for quantized integer tensors)
/// its quantization.
#[pyclass(module = "ferrite", frozen)]
pub struct TensorInfo {
    name: String,
    shape: Vec<usize>,
    dtype: DType,
    quantization: Option<Quantization>,
}

/// The numpy dtype of a Ferrite dtype (bfloat16: `ml_dtypes.bfloat16` when installed).
fn numpy_dtype<'py>(py: Python<'py>, dtype: DType) -> PyResult<Bound<'py, PyAny>> {
    let numpy = py.import("numpy")?;
    if dtype == DType::BF16 {
        if let Ok(ml) = py.import("ml_dtypes") {
            return numpy.call_method1("dtype", (ml.getattr("bfloat16")?,));
        }
        return numpy.call_method1("dtype", ("<u2",));
    }
    numpy.call_method1("dtype", (npy::descr_of(dtype),))
}

#[pymethods]
impl TensorInfo {
    /// The name in the ONNX graph.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The static shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type, as a numpy dtype.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        numpy_dtype(py, self.dtype)
    }

    /// Scale and zero point of a quantized tensor, else None.
    #[getter]
    fn quantization(&self) -> Option<Quantization> {
        self.quantization
    }

    fn __repr__(&self) -> String {
        let q = self
            .quantization
            .map(|q| format!(", quantization={}", q.__repr__()))
            .unwrap_or_default();
        format!(
            "TensorInfo(name={:?}, shape={:?}, dtype={}{q})",
            self.name,
            self.shape,
            self.dtype.name()
        )
    }
}

/// The model's inputs and outputs, described.
fn describe(model: &Model<'_>) -> (Vec<TensorInfo>, Vec<TensorInfo>) {
    let info =
        |t: ferrite_core::TensorInfo<'_>, q: Option<ferrite_core::Quantization>| TensorInfo {
            name: t.name.to_string(),
            shape: t.desc.shape.dims().to_vec(),
            dtype: t.desc.dtype,
            quantization: q.map(|q| Quantization {
                scale: f64::from(q.scale),
                zero_point: i64::from(q.zero_point),
            }),
        };
    let inputs = (0..model.input_count())
        .filter_map(|i| Some(info(model.input(i)?, model.input_quantization(i))))
        .collect();
    let outputs = (0..model.output_count())
        .filter_map(|i| Some(info(model.output(i)?, model.output_quantization(i))))
        .collect();
    (inputs, outputs)
}

/// A packed model bound to a device, with its own arena: `Session(model, device="cpu")`.
///
/// `model` is a `.frt` or ONNX model: a path, bytes, or an `onnx.ModelProto` (ONNX is packed in
/// memory first, with `input_shapes` and `constants` as in `ferrite.pack`). `device` is `cpu`,
/// `vulkan[:N]`, `cuda[:N]`, or `qemu-m0|m4|m7|m33` (Ferrite's firmware on an emulated
/// Cortex-M, in a checkout of the repository). `threads` (cpu only, default 1) runs the big
/// kernels on that many threads, with outputs identical to one thread.
#[pyclass(module = "ferrite")]
pub struct Session {
    session: Mutex<OwnedSession>,
    label: String,
    device: String,
    threads: usize,
    inputs: Vec<Py<TensorInfo>>,
    outputs: Vec<Py<TensorInfo>>,
}

impl Session {
    /// The session, locked with the GIL released (so a thread waiting here never holds the
    /// GIL that the thread inside needs back).
    fn lock<'s>(&'s self, py: Python<'_>) -> PyResult<std::sync::MutexGuard<'s, OwnedSession>> {
        loop {
            match self.session.try_lock() {
                Ok(guard) => return Ok(guard),
                Err(TryLockError::Poisoned(_)) => {
                    return Err(crate::errors::SessionError::new_err(
                        "an earlier run of this session failed midway",
                    ))
                }
                // Wait for the other thread's run without the GIL, then try again with it.
                Err(TryLockError::WouldBlock) => py.detach(|| drop(self.session.lock())),
            }
        }
    }

    /// Runs on `feeds` (a dict of arrays by input name) and returns every output's array.
    fn run_feeds<'py>(
        &self,
        py: Python<'py>,
        feeds: &Bound<'py, PyDict>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let mut names = Vec::with_capacity(feeds.len());
        let mut views = Vec::with_capacity(feeds.len());
        for (name, value) in feeds.iter() {
            let name: String = name
                .extract()
                .map_err(|_| InputError::new_err("feeds are a dict of arrays by input name"))?;
            views.push(arrays::view(&value, &format!("input '{name}'"))?);
            names.push(name);
        }
        let mut guard = self.lock(py)?;
        let session = &mut *guard;
        let feeds: Vec<Feed<'_>> = names
            .iter()
            .zip(&views)
            .map(|(name, v)| Feed {
                name,
                dtype: v.dtype,
                shape: &v.shape,
            })
            .collect();
        let order = inputs::match_feeds(session.model(), &feeds).map_err(from_run_error)?;
        let inputs: Vec<(usize, &[u8])> = order
            .iter()
            .zip(&views)
            .map(|(&i, v)| (i, v.bytes()))
            .collect();
        session.run(&inputs).map_err(from_run_error)?;
        let model = session.model();
        (0..model.output_count())
            .map(|i| {
                let info = model
                    .output(i)
                    .ok_or_else(|| InputError::new_err(format!("no output #{i}")))?;
                let bytes = session.output(i).map_err(from_run_error)?;
                arrays::new_array(py, info.desc.dtype, info.desc.shape.dims(), bytes)
            })
            .collect()
    }
}

#[pymethods]
impl Session {
    #[new]
    #[pyo3(signature = (model, device="cpu", input_shapes=None, constants=None, strict_shapes=false, threads=1))]
    fn new(
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        device: &str,
        input_shapes: Option<&Bound<'_, PyDict>>,
        constants: Option<&Bound<'_, PyDict>>,
        strict_shapes: bool,
        threads: usize,
    ) -> PyResult<Session> {
        let source = source::read(model)?;
        let label = source.label.clone();
        let options = source::options(input_shapes, constants, strict_shapes)?;
        let spec = DeviceSpec::parse(device)
            .and_then(|spec| spec.with_threads(threads))
            .map_err(from_run_error)?;
        let (session, notes) = py
            .detach(move || {
                let (bytes, notes): (AlignedBytes, _) =
                    runner::load_model_from_bytes(&source.bytes, &options)?;
                Ok((OwnedSession::open(bytes, spec)?, notes))
            })
            .map_err(from_run_error)?;
        // What packing an ONNX model assumed (a batch taken as 1), as Python warnings.
        for note in notes {
            let message = std::ffi::CString::new(note).unwrap_or_default();
            PyErr::warn(
                py,
                &py.get_type::<pyo3::exceptions::PyUserWarning>(),
                &message,
                1,
            )?;
        }
        let (inputs, outputs) = describe(session.model());
        let objects = |list: Vec<TensorInfo>| -> PyResult<Vec<Py<TensorInfo>>> {
            list.into_iter().map(|t| Py::new(py, t)).collect()
        };
        Ok(Session {
            label,
            device: device.to_string(),
            threads,
            inputs: objects(inputs)?,
            outputs: objects(outputs)?,
            session: Mutex::new(session),
        })
    }

    /// The inputs: name, shape, dtype, quantization.
    #[getter(inputs)]
    fn input_infos<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.inputs.iter().map(|t| t.clone_ref(py)))
    }

    /// The outputs: name, shape, dtype, quantization.
    #[getter(outputs)]
    fn output_infos<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.outputs.iter().map(|t| t.clone_ref(py)))
    }

    /// onnxruntime's name for `inputs`.
    #[pyo3(name = "get_inputs")]
    fn onnxruntime_inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.input_infos(py)
    }

    /// onnxruntime's name for `outputs`.
    #[pyo3(name = "get_outputs")]
    fn onnxruntime_outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.output_infos(py)
    }

    /// The device this session runs on.
    #[getter]
    fn device(&self) -> &str {
        &self.device
    }

    /// Threads the cpu device's big kernels run on (1 on every other device).
    #[getter]
    fn threads(&self) -> usize {
        self.threads
    }

    /// Bytes of the arena the model runs in.
    #[getter]
    fn arena_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.lock(py)?.model().arena_bytes())
    }

    /// The packed model (`.frt` bytes).
    fn frt<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let guard = self.lock(py)?;
        Ok(pyo3::types::PyBytes::new(py, guard.bytes()))
    }

    /// Runs the model once.
    ///
    /// `run(feeds)` takes `{input name: array}` and returns `{output name: array}`;
    /// `run(output_names, feeds)` is onnxruntime's form: a list of the named outputs' arrays
    /// (every output when `output_names` is None). Each array must have its input's dtype
    /// and shape.
    #[pyo3(signature = (output_names=None, input_feed=None, run_options=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        output_names: Option<&Bound<'py, PyAny>>,
        input_feed: Option<&Bound<'py, PyDict>>,
        run_options: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // onnxruntime's RunOptions (log level, tags, termination) have nothing to set here.
        let _ = run_options;
        let out_names =
            || -> Vec<String> { self.outputs.iter().map(|t| t.get().name.clone()).collect() };
        match (output_names, input_feed) {
            // Ferrite's form: run(feeds) -> dict.
            (Some(feeds), None) if feeds.is_instance_of::<PyDict>() => {
                let arrays = self.run_feeds(py, feeds.cast::<PyDict>()?)?;
                let result = PyDict::new(py);
                for (name, array) in out_names().into_iter().zip(arrays) {
                    result.set_item(name, array)?;
                }
                Ok(result.into_any())
            }
            // A model without inputs: run() -> dict.
            (None, None) => {
                let arrays = self.run_feeds(py, &PyDict::new(py))?;
                let result = PyDict::new(py);
                for (name, array) in out_names().into_iter().zip(arrays) {
                    result.set_item(name, array)?;
                }
                Ok(result.into_any())
            }
            // onnxruntime's form: run(output_names, feeds) -> list.
            (names, Some(feeds)) => {
                let all = out_names();
                let wanted: Vec<usize> = match names {
                    None => (0..all.len()).collect(),
                    Some(n) if n.is_none() => (0..all.len()).collect(),
                    Some(n) => {
                        let requested: Vec<String> = n.extract().map_err(|_| {
                            InputError::new_err("output_names is a list of output names, or None")
                        })?;
                        requested
                            .iter()
                            .map(|r| {
                                all.iter().position(|a| a == r).ok_or_else(|| {
                                    InputError::new_err(format!(
                                        "the model has no output '{r}' (outputs: {})",
                                        all.join(", ")
                                    ))
                                })
                            })
                            .collect::<PyResult<_>>()?
                    }
                };
                let arrays = self.run_feeds(py, feeds)?;
                let list = PyList::empty(py);
                for i in wanted {
                    list.append(&arrays[i])?;
                }
                Ok(list.into_any())
            }
            (Some(_), None) => Err(InputError::new_err(
                "run(feeds) takes a dict of arrays by input name; run(output_names, feeds) is onnxruntime's form",
            )),
        }
    }

    /// Times `runs` inferences (or, on `qemu-*`, counts instructions) and returns the figures of
    /// `ferrite bench --json` as a dict. `feeds` (a dict by input name) defaults to the same
    /// deterministic random data as the CLI; `profile=True` adds a per-op table.
    #[pyo3(signature = (runs=200, feeds=None, profile=false))]
    fn bench<'py>(
        &self,
        py: Python<'py>,
        runs: usize,
        feeds: Option<&Bound<'py, PyDict>>,
        profile: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let guard = self.lock(py)?;
        let model = guard.model();
        let arrays = match feeds {
            None => runner::synthetic_inputs(model),
            Some(feeds) => {
                let mut named = Vec::with_capacity(feeds.len());
                for (name, value) in feeds.iter() {
                    let name: String = name.extract()?;
                    let view = arrays::view(&value, &format!("input '{name}'"))?;
                    named.push((name, view.to_npy()));
                }
                let listed: Vec<Feed<'_>> = named
                    .iter()
                    .map(|(name, a)| Feed {
                        name,
                        dtype: a.dtype,
                        shape: &a.shape,
                    })
                    .collect();
                let order = inputs::match_feeds(model, &listed).map_err(from_run_error)?;
                let mut by_input: Vec<_> = order.into_iter().zip(named).collect();
                by_input.sort_by_key(|(i, _)| *i);
                by_input.into_iter().map(|(_, (_, a))| a).collect()
            }
        };
        let request = BenchRequest {
            label: &self.label,
            device: &self.device,
            runs,
            profile,
            threads: self.threads,
        };
        let bytes = guard.bytes();
        let report = py
            .detach(|| bench::bench(bytes, model, &arrays, request))
            .map_err(from_run_error)?;
        to_python(py, report.json())
    }

    fn __repr__(&self) -> String {
        format!(
            "ferrite.Session({:?}, device={:?}, {} input(s), {} output(s))",
            self.label,
            self.device,
            self.inputs.len(),
            self.outputs.len()
        )
    }
}
