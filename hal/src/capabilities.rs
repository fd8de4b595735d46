//! What a device can run, as data: the core compares it with a model before a session starts.

use crate::{DType, OpKind};

/// A set of (op kind, element type) pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpSet {
    per_dtype: [u64; DType::ALL.len()],
}

impl OpSet {
    /// The empty set.
    pub const fn empty() -> OpSet {
        OpSet {
            per_dtype: [0; DType::ALL.len()],
        }
    }

    /// Every op kind for every element type.
    pub fn all() -> OpSet {
        let mut s = OpSet::empty();
        for kind in OpKind::ALL {
            s = s.with(kind, &DType::ALL);
        }
        s
    }

    /// This set plus `kind` for each of `dtypes`.
    pub fn with(mut self, kind: OpKind, dtypes: &[DType]) -> OpSet {
        for t in dtypes {
            self.per_dtype[t.index()] |= kind.bit();
        }
        self
    }

    /// The pairs of this set whose kind and element type selection `ops` selects.
    pub fn only(mut self, ops: crate::Selection) -> OpSet {
        for (bits, dtype) in self.per_dtype.iter_mut().zip(DType::ALL) {
            *bits &= if crate::selects_dtype(ops, dtype) {
                ops as u64 // the kind bits
            } else {
                0
            };
        }
        self
    }

    /// Whether `kind` on `dtype` is in the set.
    pub fn contains(&self, kind: OpKind, dtype: DType) -> bool {
        self.per_dtype[dtype.index()] & kind.bit() != 0
    }
}

/// What a device supports and requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Supported ops, keyed by the dtype of the op's first input.
    pub ops: OpSet,
    /// Largest arena the device can hold, in bytes.
    pub max_arena_bytes: usize,
    /// The host arena handed to `execute` holds every tensor (true for a CPU). A GPU that keeps
    /// the arena in device memory uses the host arena only for inputs and outputs.
    pub host_arena: bool,
}
