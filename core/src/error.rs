//! Typed errors of loading and running a model; each prints as one line and has a `kind()`.

use core::fmt;
use ferrite_hal::message::pieces;
use ferrite_hal::Piece::{Hex, Text, Unsigned};
use ferrite_hal::{DType, ErrorKind, Message, OpKind, OpSet, Piece};

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
    /// The model uses an op kind, activation or arithmetic this build does not link (its `OPS`
    /// selection): a valid file, for another firmware.
    NotLinked,
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

/// `text` where the error says what and where (feature `error-context`, on by default), else
/// `""`: without the feature, the texts of the verifier's rules and the file's fields are not
/// linked (about 1.3 KB of a firmware's flash) and an error names only its kind and record.
#[inline(always)]
pub(crate) const fn why(text: &'static str) -> &'static str {
    if cfg!(feature = "error-context") {
        text
    } else {
        ""
    }
}

impl FormatError {
    #[inline(always)]
    pub(crate) fn new(kind: FormatErrorKind, context: &'static str) -> Self {
        FormatError {
            kind,
            context: why(context),
            index: None,
        }
    }

    pub(crate) fn at(mut self, index: usize) -> Self {
        self.index = Some(index);
        self
    }
}

impl FormatErrorKind {
    /// The kind's message, without the numbers some kinds carry.
    pub fn describe(&self) -> &'static str {
        match self {
            FormatErrorKind::BadMagic => "not a .frt file (bad magic)",
            FormatErrorKind::UnsupportedVersion { .. } => "format version is not supported",
            FormatErrorKind::Truncated => "file is truncated",
            FormatErrorKind::ChecksumMismatch { .. } => "checksum mismatch: file is corrupt",
            FormatErrorKind::OutOfRange => "value out of range",
            FormatErrorKind::Overflow => "size overflows",
            FormatErrorKind::InvalidValue => "invalid value",
            FormatErrorKind::Misaligned => "misaligned data",
            FormatErrorKind::MissingSection => "missing section",
            FormatErrorKind::DuplicateSection => "duplicate section",
            FormatErrorKind::InvalidOp => "op is inconsistent with its tensors",
            FormatErrorKind::NotLinked => "the model uses an op this build does not link",
        }
    }
}

impl Message for FormatError {
    fn write_message(&self, out: &mut dyn FnMut(Piece<'_>)) {
        out(Text("invalid model: "));
        match self.kind {
            FormatErrorKind::UnsupportedVersion { major, minor } => {
                pieces(
                    out,
                    &[
                        Text("format version "),
                        Unsigned(major.into()),
                        Text("."),
                        Unsigned(minor.into()),
                        Text(" is not supported (this reader reads "),
                        Unsigned(crate::format::VERSION_MAJOR.into()),
                        Text(".x)"),
                    ],
                );
            }
            FormatErrorKind::ChecksumMismatch { stored, computed } => {
                pieces(
                    out,
                    &[
                        Text("checksum mismatch (stored "),
                        Hex(stored),
                        Text(", computed "),
                        Hex(computed),
                        Text("): file is corrupt"),
                    ],
                );
            }
            kind => out(Text(kind.describe())),
        }
        if !self.context.is_empty() {
            pieces(out, &[Text(" ("), Text(self.context), Text(")")]);
        }
        if let Some(i) = self.index {
            pieces(out, &[Text(" at #"), Unsigned(i as u64)]);
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        ferrite_hal::message::display(self, f)
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

impl Message for MissingOps {
    fn write_message(&self, out: &mut dyn FnMut(Piece<'_>)) {
        let mut first = true;
        for kind in OpKind::ALL {
            for dtype in DType::ALL {
                if self.0.contains(kind, dtype) {
                    if !first {
                        out(Text(", "));
                    }
                    first = false;
                    pieces(
                        out,
                        &[Text(kind.name()), Text("("), Text(dtype.name()), Text(")")],
                    );
                }
            }
        }
    }
}

impl fmt::Display for MissingOps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        ferrite_hal::message::display(self, f)
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

impl<E> Error<E> {
    /// Writes the message's pieces; for a device error, only its prefix, returning the device's
    /// error for the caller to print.
    fn write_own(&self, out: &mut dyn FnMut(Piece<'_>)) -> Option<&E> {
        match self {
            Error::Format(e) => e.write_message(out),
            Error::ArenaTooSmall { needed, got } => {
                pieces(
                    out,
                    &[
                        Text("arena too small: the model needs "),
                        Piece::size(*needed),
                        Text(" bytes, "),
                        Piece::size(*got),
                        Text(" were given"),
                    ],
                );
            }
            Error::ArenaMisaligned { align } => {
                pieces(
                    out,
                    &[
                        Text("arena must start at a multiple of "),
                        Piece::size(*align),
                        Text(" bytes"),
                    ],
                );
            }
            Error::ArenaTooLarge { needed, max } => {
                pieces(
                    out,
                    &[
                        Text("the model needs a "),
                        Piece::size(*needed),
                        Text("-byte arena but the device holds at most "),
                        Piece::size(*max),
                    ],
                );
            }
            Error::Unsupported(m) => {
                out(Text("device does not support: "));
                m.write_message(out);
            }
            Error::NoSuchTensor { index, count } => {
                pieces(
                    out,
                    &[
                        Text("no tensor #"),
                        Piece::size(*index),
                        Text(" (there are "),
                        Piece::size(*count),
                        Text(")"),
                    ],
                );
            }
            Error::InputSize {
                index,
                expected,
                got,
            } => {
                pieces(
                    out,
                    &[
                        Text("input #"),
                        Piece::size(*index),
                        Text(" needs "),
                        Piece::size(*expected),
                        Text(" bytes, "),
                        Piece::size(*got),
                        Text(" were given"),
                    ],
                );
            }
            Error::DTypeMismatch { expected, got } => {
                pieces(
                    out,
                    &[
                        Text("tensor is "),
                        Text(expected.name()),
                        Text(", accessed as "),
                        Text(got.name()),
                    ],
                );
            }
            Error::InputNotSet { index } => {
                pieces(
                    out,
                    &[
                        Text("input #"),
                        Piece::size(*index),
                        Text(" was not written before run"),
                    ],
                );
            }
            Error::NotRun => out(Text("outputs read before a successful run")),
            Error::Device(e) => {
                out(Text("device error: "));
                return Some(e);
            }
        }
        None
    }
}

impl<E: Message> Message for Error<E> {
    fn write_message(&self, out: &mut dyn FnMut(Piece<'_>)) {
        if let Some(device) = self.write_own(out) {
            device.write_message(out);
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut result = Ok(());
        let device = self.write_own(&mut |piece| {
            if result.is_ok() {
                result = ferrite_hal::message::write_piece(f, piece);
            }
        });
        result?;
        match device {
            Some(e) => write!(f, "{e}"),
            None => Ok(()),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for FormatError {}

#[cfg(feature = "std")]
impl<E: fmt::Debug + fmt::Display> std::error::Error for Error<E> {}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_hal::Line;

    /// With `error-context` an error says which field or rule; without it (a firmware's
    /// build), only its kind and record, and the same error kind is returned.
    #[test]
    fn the_context_is_kept_only_with_error_context() {
        let e = FormatError::new(FormatErrorKind::InvalidOp, "Conv bias shape").at(3);
        assert_eq!(e.kind, FormatErrorKind::InvalidOp);
        let mut line = Line::<160>::new();
        line.message(&e);
        let text = core::str::from_utf8(line.as_bytes()).unwrap();
        if cfg!(feature = "error-context") {
            assert_eq!(e.context, "Conv bias shape");
            assert!(text.ends_with("(Conv bias shape) at #3"), "{text}");
        } else {
            assert_eq!(e.context, "");
            assert!(!text.contains('(') && text.ends_with(" at #3"), "{text}");
        }
    }
}
