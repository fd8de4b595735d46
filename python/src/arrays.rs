//! numpy arrays in and out, without copies of our own: an input is read in place through the
//! array interface (`numpy.ascontiguousarray` copies only an array that is not C-ordered, or is
//! big-endian), an output is one new array the session's bytes are copied into.

use crate::errors::InputError;
use ferrite_hal::DType;
use ferrite_tools::host::npy::{self, NpyArray};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// A numpy array's bytes, read in place: valid while the array lives (it is held here) and
/// while the GIL is held (no Python code can resize it meanwhile).
pub struct ArrayView<'py> {
    /// The C-ordered, little-endian array the bytes belong to.
    _array: Bound<'py, PyAny>,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
    address: usize,
    len: usize,
}

impl ArrayView<'_> {
    /// The elements' bytes, C order, little-endian.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: numpy's array interface gives the address of `len` (= `nbytes`) readable bytes
        // of a C-contiguous array; `_array` keeps that array alive for `self`'s lifetime and the
        // GIL, held by whoever holds a `Bound<'py, _>`, keeps other Python code from freeing or
        // resizing its buffer.
        unsafe { std::slice::from_raw_parts(self.address as *const u8, self.len) }
    }

    /// An owned copy (for `bench` and calibration, which keep the arrays).
    pub fn to_npy(&self) -> NpyArray {
        NpyArray {
            dtype: self.dtype,
            shape: self.shape.clone(),
            bytes: self.bytes().to_vec(),
        }
    }
}

/// The element type of a numpy type string; bfloat16 is `ml_dtypes`' two raw bytes.
fn dtype_of(typestr: &str) -> Option<DType> {
    match typestr {
        "<V2" | "|V2" => Some(DType::BF16),
        other => npy::dtype_from_descr(other),
    }
}

/// The address and byte length of an array's data, from its array interface.
fn data_of(array: &Bound<'_, PyAny>) -> PyResult<(String, Vec<usize>, usize, usize)> {
    let interface = array.getattr("__array_interface__")?;
    let typestr: String = interface.get_item("typestr")?.extract()?;
    let shape: Vec<usize> = interface.get_item("shape")?.extract()?;
    let (address, _read_only): (usize, bool) = interface.get_item("data")?.extract()?;
    let len: usize = array.getattr("nbytes")?.extract()?;
    Ok((typestr, shape, address, len))
}

/// Reads `value` (a numpy array, or anything `numpy.asarray` takes) in place; `what` names it
/// in errors (`input 'x'`).
pub fn view<'py>(value: &Bound<'py, PyAny>, what: &str) -> PyResult<ArrayView<'py>> {
    let numpy = value.py().import("numpy")?;
    let mut array = numpy.call_method1("ascontiguousarray", (value,))?;
    let mut data = data_of(&array)?;
    if data.0.starts_with('>') {
        let little = array
            .getattr("dtype")?
            .call_method1("newbyteorder", ("<",))?;
        array = array.call_method1("astype", (little,))?;
        data = data_of(&array)?;
    }
    let (typestr, shape, address, len) = data;
    let dtype = dtype_of(&typestr).ok_or_else(|| {
        InputError::new_err(format!(
            "{what}: numpy type '{typestr}' has no Ferrite dtype (float16/32/64, int8-64, uint8-64, bool)"
        ))
    })?;
    let expected = shape
        .iter()
        .try_fold(dtype.size(), |n, &d| n.checked_mul(d));
    if expected != Some(len) {
        return Err(InputError::new_err(format!(
            "{what}: {len} bytes do not hold a {dtype} array of shape {shape:?}"
        )));
    }
    Ok(ArrayView {
        _array: array,
        dtype,
        shape,
        address,
        len,
    })
}

/// A new numpy array of `dtype` and `shape` holding `bytes` (bfloat16: `ml_dtypes.bfloat16`
/// when installed, else the raw bits as uint16).
pub fn new_array<'py>(
    py: Python<'py>,
    dtype: DType,
    shape: &[usize],
    bytes: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    let numpy = py.import("numpy")?;
    let descr = match dtype {
        DType::BF16 => match py.import("ml_dtypes") {
            Ok(ml) => ml.getattr("bfloat16")?,
            Err(_) => "<u2".into_pyobject(py)?.into_any(),
        },
        other => npy::descr_of(other).into_pyobject(py)?.into_any(),
    };
    let array = numpy.call_method1("empty", (PyTuple::new(py, shape)?, descr))?;
    let (_, _, address, len) = data_of(&array)?;
    if len != bytes.len() {
        return Err(crate::errors::SessionError::new_err(format!(
            "an output of {} bytes does not fill a {dtype} array of shape {shape:?}",
            bytes.len()
        )));
    }
    if len > 0 {
        // SAFETY: `array` was just made by numpy.empty: C-contiguous, `len` writable bytes at
        // `address`, owned by nobody else yet; `bytes` is Rust memory, so they do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), address as *mut u8, len) };
    }
    Ok(array)
}
