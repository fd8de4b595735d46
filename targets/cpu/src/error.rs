//! Errors the CPU device can report.

use core::fmt;
use ferrite_hal::ErrorKind;

/// A CPU-device error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CpuError {
    /// A gather index is outside its axis (index, axis length).
    IndexOutOfRange {
        /// The index found in the data.
        index: i64,
        /// The axis length.
        len: usize,
    },
    /// An integer division or remainder by zero (Div, Mod on integer tensors).
    DivisionByZero,
    /// A step could not be read back from a plan that the core verified (a core bug).
    CorruptPlan,
    /// Operand bytes are misaligned for their element type (a caller bypassed the core).
    Misaligned,
    /// The step needs an op/dtype pair the kernels do not implement.
    Unsupported,
}

impl fmt::Display for CpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuError::IndexOutOfRange { index, len } => {
                write!(
                    f,
                    "gather index {index} is out of range for an axis of {len}"
                )
            }
            CpuError::DivisionByZero => f.write_str("integer division by zero"),
            CpuError::CorruptPlan => f.write_str("plan step could not be decoded"),
            CpuError::Misaligned => f.write_str("operand is misaligned"),
            CpuError::Unsupported => f.write_str("op/dtype not implemented by the CPU device"),
        }
    }
}

impl ferrite_hal::Error for CpuError {
    fn kind(&self) -> ErrorKind {
        match self {
            CpuError::IndexOutOfRange { .. } | CpuError::DivisionByZero => ErrorKind::InvalidInput,
            CpuError::CorruptPlan | CpuError::Misaligned => ErrorKind::Other,
            CpuError::Unsupported => ErrorKind::Unsupported,
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CpuError {}
