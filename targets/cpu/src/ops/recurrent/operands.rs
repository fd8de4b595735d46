//! The operands and sizes of one recurrent layer, and the one order in which every build adds a
//! dot product's partial sums.

/// The operands of one recurrent layer direction (f32, shapes checked by the verifier).
pub struct Operands<'a> {
    /// `[seq, batch, input]`.
    pub x: &'a [f32],
    /// `[gates·hidden, input]`.
    pub w: &'a [f32],
    /// `[gates·hidden, hidden]`.
    pub r: &'a [f32],
    /// `[2·gates·hidden]`: W's biases, then R's.
    pub b: Option<&'a [f32]>,
    /// `[batch, hidden]`.
    pub initial_h: Option<&'a [f32]>,
    /// `[batch, hidden]` (LSTM).
    pub initial_c: Option<&'a [f32]>,
    /// `[3·hidden]`: peepholes i, o, f (LSTM).
    pub p: Option<&'a [f32]>,
    /// Whether `w` and `r` are the model's constants (not computed in the arena), so that a
    /// host may keep them packed between runs.
    pub constant_weights: bool,
}

/// The sizes of a recurrent layer.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    /// Time steps.
    pub seq: usize,
    /// Sequences in the batch.
    pub batch: usize,
    /// Features per input step.
    pub input: usize,
    /// Hidden units.
    pub hidden: usize,
}

/// The eight partial sums of a dot product, added pairwise: one fixed order on every build.
#[inline(always)]
pub(super) fn pairwise(sums: [f32; 8]) -> f32 {
    let [s0, s1, s2, s3, s4, s5, s6, s7] = sums;
    ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))
}
