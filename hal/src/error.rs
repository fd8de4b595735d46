//! The small error vocabulary every device and the core share, in the style of embedded-hal.

use core::fmt;

/// What went wrong, in terms a caller can act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ErrorKind {
    /// The model file is corrupt, truncated or inconsistent.
    InvalidModel,
    /// An input given at run time has the wrong size, or its data is out of range.
    InvalidInput,
    /// The model needs an op, dtype or feature this device lacks.
    Unsupported,
    /// Not enough memory (arena too small, device memory exhausted).
    OutOfMemory,
    /// The device stopped responding or was removed.
    DeviceLost,
    /// An operation took longer than allowed.
    Timeout,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// A short description of the kind.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::InvalidModel => "invalid model",
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::OutOfMemory => "out of memory",
            ErrorKind::DeviceLost => "device lost",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Other => "error",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// An error that can say which [`ErrorKind`] it is.
pub trait Error: fmt::Debug + fmt::Display {
    /// The kind of this error.
    fn kind(&self) -> ErrorKind;
}

impl Error for ErrorKind {
    fn kind(&self) -> ErrorKind {
        *self
    }
}

impl Error for core::convert::Infallible {
    fn kind(&self) -> ErrorKind {
        match *self {}
    }
}
