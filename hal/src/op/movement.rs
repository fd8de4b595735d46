//! Data movement (Transpose, Concat, Split, Slice, Pad, Copy, Trilu, Resample, Expand): their
//! parameters. One module per family, as
//! [`super::Family`] lists them; the words' codec is `codec/movement.rs`.

use crate::MAX_RANK;

/// Padding mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    /// Fill with a constant.
    Constant,
    /// Mirror without repeating the edge.
    Reflect,
    /// Repeat the edge.
    Edge,
}

/// Per-axis arrays for axis-wise ops; only the first `rank` entries are meaningful.
pub type AxisArray<T> = [T; MAX_RANK];
