//! Errors the CPU device can report.

use core::fmt;
use ferrite_hal::message::pieces;
use ferrite_hal::Piece::{Signed, Text};
use ferrite_hal::{ErrorKind, Message, Piece};

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

impl Message for CpuError {
    fn write_message(&self, out: &mut dyn FnMut(Piece<'_>)) {
        match *self {
            CpuError::IndexOutOfRange { index, len } => {
                pieces(
                    out,
                    &[
                        Text("gather index "),
                        Signed(index),
                        Text(" is out of range for an axis of "),
                        Piece::size(len),
                    ],
                );
            }
            CpuError::DivisionByZero => out(Text("integer division by zero")),
            CpuError::CorruptPlan => out(Text("plan step could not be decoded")),
            CpuError::Misaligned => out(Text("operand is misaligned")),
            CpuError::Unsupported => out(Text("op/dtype not implemented by the CPU device")),
        }
    }
}

impl fmt::Display for CpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        ferrite_hal::message::display(self, f)
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
