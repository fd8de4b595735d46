//! The exceptions Ferrite raises: one per kind of failure, each carrying the CLI's one-line
//! message, all under `ferrite.FerriteError`.

use ferrite_tools::host::error::RunError;
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyOSError};
use pyo3::PyErr;

pyo3::create_exception!(
    ferrite,
    FerriteError,
    PyException,
    "Base of every error Ferrite raises."
);
pyo3::create_exception!(
    ferrite,
    PackError,
    FerriteError,
    "The ONNX model cannot be packed: not ONNX, unsupported nodes, unknown shapes, bad calibration."
);
pyo3::create_exception!(
    ferrite,
    ModelError,
    FerriteError,
    "The packed model (.frt) is corrupt or of another format version."
);
pyo3::create_exception!(
    ferrite,
    InputError,
    FerriteError,
    "An input does not fit the model: unknown, missing or repeated name, wrong dtype or shape."
);
pyo3::create_exception!(
    ferrite,
    DeviceError,
    FerriteError,
    "The device is unknown, not built in, or not present on this machine."
);
pyo3::create_exception!(
    ferrite,
    SessionError,
    FerriteError,
    "The session failed: the arena, the device, or a run."
);

/// The exception of a failed load, run or bench, with the error's one-line message.
pub fn from_run_error(e: RunError) -> PyErr {
    let message = e.to_string();
    match e {
        RunError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(message)
        }
        RunError::Io { .. } => PyOSError::new_err(message),
        RunError::Pack(_) => PackError::new_err(message),
        RunError::Model(_) | RunError::NotAModel(_) => ModelError::new_err(message),
        RunError::Npy(_) | RunError::Input(_) => InputError::new_err(message),
        RunError::Session { .. } => SessionError::new_err(message),
        RunError::Device(_) => DeviceError::new_err(message),
    }
}

/// The exception of a failed pack.
pub fn from_pack_error(e: ferrite_tools::PackError) -> PyErr {
    PackError::new_err(e.to_string())
}
