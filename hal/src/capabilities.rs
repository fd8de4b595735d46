//! What a device can run, as data: the core compares it with a model before a session starts.

use crate::{DType, OpKind};

/// Every op kind, as a kind mask (bit `code` set for each [`OpKind`]): the default kernel
/// selection of a device.
pub const ALL_OPS: u64 = u64::MAX;

/// The kind mask of `kinds` (bit `code` per kind): a firmware's kernel selection, as
/// `ferrite pack --emit rust` writes it (`OPS`) for one model.
pub const fn op_mask(kinds: &[OpKind]) -> u64 {
    let mut mask = 0;
    let mut i = 0;
    while i < kinds.len() {
        mask |= 1u64 << (kinds[i] as u16);
        i += 1;
    }
    mask
}

/// Whether kind mask `ops` selects `kind`.
pub const fn selects(ops: u64, kind: OpKind) -> bool {
    ops & (1u64 << (kind as u16)) != 0
}

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

    /// The pairs of this set whose kind is in kind mask `ops`.
    pub fn only(mut self, ops: u64) -> OpSet {
        for bits in self.per_dtype.iter_mut() {
            *bits &= ops;
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
