//! Why running a model on the host failed: one error type for every device, each variant
//! printed as one line that says what to fix.

use crate::host::npy::NpyError;
use crate::PackError;
use ferrite_core::FormatError;

/// Why a model could not be run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Reading a file failed.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Packing an `.onnx` given to `run` failed.
    #[error(transparent)]
    Pack(#[from] PackError),
    /// The `.frt` is invalid.
    #[error("{0}")]
    Model(#[from] FormatError),
    /// Bytes given as a model are neither a `.frt` nor ONNX.
    #[error("{0}")]
    NotAModel(String),
    /// An input file is invalid.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// Inputs do not match the model.
    #[error("{0}")]
    Input(String),
    /// The session failed (arena, device, ...).
    #[error("{message}")]
    Session {
        /// What went wrong, in one line.
        message: String,
        /// Its kind.
        kind: ferrite_hal::ErrorKind,
    },
    /// The device name is unknown or not built in.
    #[error("{0}")]
    Device(String),
}

impl<E: ferrite_hal::Error> From<ferrite_core::Error<E>> for RunError {
    fn from(e: ferrite_core::Error<E>) -> Self {
        RunError::Session {
            message: e.to_string(),
            kind: ferrite_hal::Error::kind(&e),
        }
    }
}
