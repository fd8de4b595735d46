//! Typed errors of loading and running a model; each prints as one line and has a `kind()`.

use core::fmt;
use ferrite_hal::{DType, ErrorKind, OpKind, OpSet};

/// What is wrong with a model file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FormatErrorKind {
    /// The file does not start with `FRT\0`.
    BadMagic,
    /// The file's major version is not the one this reader understands.
    UnsupportedVersion {
        /// Major version found.
        major: u16,
        /// Minor version found.
        minor: u16,
    },
    /// The file is shorter than its structure says.
    Truncated,
    /// The stored CRC-32 does not match the content.
    ChecksumMismatch {
        /// CRC in the header.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// An offset, count or index points outside its table or section.
    OutOfRange,
    /// A size computation overflows.
    Overflow,
    /// A value is outside its domain (unknown code, zero stride, bad UTF-8, ...).
    InvalidValue,
    /// Data is not aligned as required.
    Misaligned,
    /// A required section is missing.
    MissingSection,
    /// A section appears twice.
    DuplicateSection,
    /// An op's tensors disagree with its rules (shapes, dtypes, operand count, overlap).
    InvalidOp,
}

/// A model-file error: what is wrong, where, and (when relevant) which record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FormatError {
    /// What is wrong.
    pub kind: FormatErrorKind,
    /// Where: a short description of the field or rule.
    pub context: &'static str,
    /// The index of the record (tensor, op, section), if any.
    pub index: Option<usize>,
}

impl FormatError {
    pub(crate) fn new(kind: FormatErrorKind, context: &'static str) -> Self {
        FormatError {
            kind,
            context,
            index: None,
        }
    }

    pub(crate) fn at(mut self, index: usize) -> Self {
        self.index = Some(index);
        self
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid model: ")?;
        match self.kind {
            FormatErrorKind::BadMagic => f.write_str("not a .frt file (bad magic)")?,
            FormatErrorKind::UnsupportedVersion { major, minor } => write!(
                f,
                "format version {major}.{minor} is not supported (this reader reads {}.x)",
                crate::format::VERSION_MAJOR
            )?,
            FormatErrorKind::Truncated => f.write_str("file is truncated")?,
            FormatErrorKind::ChecksumMismatch { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): file is corrupt"
            )?,
            FormatErrorKind::OutOfRange => f.write_str("value out of range")?,
            FormatErrorKind::Overflow => f.write_str("size overflows")?,
            FormatErrorKind::InvalidValue => f.write_str("invalid value")?,
            FormatErrorKind::Misaligned => f.write_str("misaligned data")?,
            FormatErrorKind::MissingSection => f.write_str("missing section")?,
            FormatErrorKind::DuplicateSection => f.write_str("duplicate section")?,
            FormatErrorKind::InvalidOp => f.write_str("op is inconsistent with its tensors")?,
        }
        if !self.context.is_empty() {
            write!(f, " ({})", self.context)?;
        }
        if let Some(i) = self.index {
            write!(f, " at #{i}")?;
        }
        Ok(())
    }
}

/// The (op, dtype) pairs a model needs that a device lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissingOps(pub OpSet);

#[cfg(feature = "defmt")]
impl defmt::Format for MissingOps {
    fn format(&self, f: defmt::Formatter<'_>) {
        for kind in OpKind::ALL {
            for dtype in DType::ALL {
                if self.0.contains(kind, dtype) {
                    defmt::write!(f, "{=str}({=str}) ", kind.name(), dtype.name());
                }
            }
        }
    }
}

impl fmt::Display for MissingOps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for kind in OpKind::ALL {
            for dtype in DType::ALL {
                if self.0.contains(kind, dtype) {
                    if !first {
                        f.write_str(", ")?;
                    }
                    first = false;
                    write!(f, "{}({})", kind.name(), dtype)?;
                }
            }
        }
        Ok(())
    }
}

/// Any error of the core; `E` is the device's error type.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error<E> {
    /// The model file is invalid.
    Format(FormatError),
    /// The arena is smaller than the plan needs.
    ArenaTooSmall {
        /// Bytes the plan needs.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// The arena does not start at a multiple of its required alignment.
    ArenaMisaligned {
        /// Required alignment in bytes.
        align: usize,
    },
    /// The plan's arena exceeds what the device can hold.
    ArenaTooLarge {
        /// Bytes the plan needs.
        needed: usize,
        /// Device maximum.
        max: usize,
    },
    /// The device lacks ops the model needs (all of them are listed).
    Unsupported(MissingOps),
    /// No input or output with this index.
    NoSuchTensor {
        /// Index asked for.
        index: usize,
        /// How many there are.
        count: usize,
    },
    /// Input bytes of the wrong size.
    InputSize {
        /// Input index.
        index: usize,
        /// Bytes expected.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// Typed access with the wrong element type.
    DTypeMismatch {
        /// The tensor's type.
        expected: DType,
        /// The type asked for.
        got: DType,
    },
    /// `run` was called before every input was written since the last run.
    InputNotSet {
        /// First input not written.
        index: usize,
    },
    /// Outputs were read before a successful run.
    NotRun,
    /// The device failed.
    Device(E),
}

impl<E> From<FormatError> for Error<E> {
    fn from(e: FormatError) -> Self {
        Error::Format(e)
    }
}

impl<E: ferrite_hal::Error> ferrite_hal::Error for Error<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Format(_) => ErrorKind::InvalidModel,
            Error::ArenaTooSmall { .. } | Error::ArenaTooLarge { .. } => ErrorKind::OutOfMemory,
            Error::ArenaMisaligned { .. } => ErrorKind::InvalidInput,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::NoSuchTensor { .. }
            | Error::InputSize { .. }
            | Error::DTypeMismatch { .. }
            | Error::InputNotSet { .. }
            | Error::NotRun => ErrorKind::InvalidInput,
            Error::Device(e) => e.kind(),
        }
    }
}

impl ferrite_hal::Error for FormatError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidModel
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Format(e) => e.fmt(f),
            Error::ArenaTooSmall { needed, got } => write!(
                f,
                "arena too small: the model needs {needed} bytes, {got} were given"
            ),
            Error::ArenaMisaligned { align } => {
                write!(f, "arena must start at a multiple of {align} bytes")
            }
            Error::ArenaTooLarge { needed, max } => write!(
                f,
                "the model needs a {needed}-byte arena but the device holds at most {max}"
            ),
            Error::Unsupported(m) => write!(f, "device does not support: {m}"),
            Error::NoSuchTensor { index, count } => {
                write!(f, "no tensor #{index} (there are {count})")
            }
            Error::InputSize {
                index,
                expected,
                got,
            } => write!(f, "input #{index} needs {expected} bytes, {got} were given"),
            Error::DTypeMismatch { expected, got } => {
                write!(f, "tensor is {expected}, accessed as {got}")
            }
            Error::InputNotSet { index } => {
                write!(f, "input #{index} was not written before run")
            }
            Error::NotRun => f.write_str("outputs read before a successful run"),
            Error::Device(e) => write!(f, "device error: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for FormatError {}

#[cfg(feature = "std")]
impl<E: fmt::Debug + fmt::Display> std::error::Error for Error<E> {}
