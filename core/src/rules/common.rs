//! What the families' rules share: the operands' view (`operands!`, [`Fetched`]), the dtype,
//! window, scratch and integer-operand checks, and the rule's result type.

pub(super) use crate::error::why;
pub(super) use ferrite_hal::geometry::{
    self, broadcast, broadcasts_to, conv_out, nchw, MatMulGeometry,
};
pub(super) use ferrite_hal::op::{Conv, ConvTranspose, PadMode, Pool, Requantize, Window};
pub(super) use ferrite_hal::{DType, Selection, Step, TensorDesc, TensorList, MAX_RANK};

/// The rules' view of a step's operands, bound to the given names: `input(i)` and `output(i)`
/// (a reference to the fetched tensor, or "missing input/output"), `optional(i)` (input `i`,
/// `None` when absent) and the operand counts.
macro_rules! operands {
    ($step:ident, $fetched:ident => $input:ident, $output:ident, $optional:ident, $n_in:ident, $n_out:ident) => {
        let fetched: &Fetched = $fetched;
        #[allow(unused_variables)]
        let $input = move |i: usize| fetched.input(i);
        #[allow(unused_variables)]
        let $output = move |i: usize| fetched.output(i);
        #[allow(unused_variables)]
        let $optional = move |i: usize| fetched.optional(i);
        #[allow(unused_variables)]
        let $n_in = $step.inputs.len();
        #[allow(unused_variables)]
        let $n_out = $step.outputs.len();
    };
}

/// Inputs a rule reads by position (the most any kind has: TreeEnsemble's six; the recurrent
/// rule, with up to seven, reads its own).
const FETCHED_INPUTS: usize = 6;
/// Outputs a rule reads by position (DynamicQuantizeLinear's three).
const FETCHED_OUTPUTS: usize = 3;

/// A step's leading operands, fetched once, for the rules to borrow: a rule that took each
/// operand by value copied its 52-byte descriptor out of a `Result` at every use (some 130
/// places, 5 KB of a firmware's verifier). One per step, fetched by [`check_step`] and lent to
/// the family's rules: fetched in each family's `check`, each inlined copy took a slot of its
/// own in `check_step`'s frame.
pub(super) struct Fetched {
    inputs: [Option<TensorDesc>; FETCHED_INPUTS],
    outputs: [Option<TensorDesc>; FETCHED_OUTPUTS],
}

/// Fills `slots` with the first operands of `list`. Out of line: one loop, not one unrolled
/// copy per slot (a firmware's verifier is in every firmware).
#[inline(never)]
pub(super) fn fetch_into(list: &TensorList<'_>, slots: &mut [Option<TensorDesc>]) {
    for (i, slot) in slots.iter_mut().enumerate() {
        *slot = list.get(i);
    }
}

impl Fetched {
    /// Fetches `step`'s first operands (absent ones `None`).
    pub(super) fn of(step: &Step<'_>) -> Fetched {
        let mut fetched = Fetched {
            inputs: [None; FETCHED_INPUTS],
            outputs: [None; FETCHED_OUTPUTS],
        };
        fetch_into(&step.inputs, &mut fetched.inputs);
        fetch_into(&step.outputs, &mut fetched.outputs);
        fetched
    }

    /// Input `i`, or the rule "missing input".
    pub(super) fn input(&self, i: usize) -> Result<&TensorDesc, &'static str> {
        self.optional(i).ok_or(why("missing input"))
    }

    /// Input `i`, `None` when absent (an optional input).
    pub(super) fn optional(&self, i: usize) -> Option<&TensorDesc> {
        self.inputs.get(i).and_then(Option::as_ref)
    }

    /// Output `i`, or the rule "missing output".
    pub(super) fn output(&self, i: usize) -> Result<&TensorDesc, &'static str> {
        self.outputs
            .get(i)
            .and_then(Option::as_ref)
            .ok_or(why("missing output"))
    }
}

pub(super) type Rule = Result<(), &'static str>;

/// Element `i` of `d`, `None` past its end (no panicking index on untrusted shapes).
pub(super) fn at(d: &[usize], i: usize) -> Option<usize> {
    d.get(i).copied()
}

/// Whether two sub-slices both exist and are equal.
pub(super) fn same(a: Option<&[usize]>, b: Option<&[usize]>) -> bool {
    matches!((a, b), (Some(x), Some(y)) if x == y)
}

#[inline(always)]
pub(super) fn ensure(cond: bool, rule: &'static str) -> Rule {
    if cond {
        Ok(())
    } else {
        Err(why(rule))
    }
}

/// Every type in `types` is float32 (the operands' element types: an array of whole descriptors
/// copied each one, 52 B, at every rule).
pub(super) fn all_f32(types: &[DType]) -> Rule {
    ensure(
        types.iter().all(|&t| t == DType::F32),
        "operands must be float32",
    )
}

/// The types in `types` are one (the operands' element types, as [`all_f32`]).
pub(super) fn same_dtype(types: &[DType]) -> Rule {
    ensure(
        types.windows(2).all(|w| w.first() == w.last()),
        "operands must share one element type",
    )
}

pub(super) fn check_window_rank(x: &TensorDesc, window: &ferrite_hal::op::Window) -> Rule {
    if x.shape.rank() == 3 {
        let w = window;
        ensure(
            w.kernel[0] == 1
                && w.stride[0] == 1
                && w.dilation[0] == 1
                && w.pads[0] == 0
                && w.pads[2] == 0,
            "1-D window must have height 1",
        )?;
    }
    Ok(())
}

pub(super) use geometry::conv_scratch_elements;

/// A step that needs `need` f32 elements of scratch (0: none) has at least that much.
pub(super) fn require_scratch(
    scratch: Option<TensorDesc>,
    need: usize,
    message: &'static str,
) -> Rule {
    if need == 0 {
        return Ok(());
    }
    let s = scratch.ok_or(why(message))?;
    ensure(s.dtype == DType::F32 && s.elements() >= need, message)
}

/// Whether `t` holds 8-bit integers.
pub(super) fn is_byte(t: &TensorDesc) -> bool {
    matches!(t.dtype, DType::I8 | DType::U8)
}

/// Whether `v` is a value of `dtype`, an integer ops' activation type (int8, uint8, int16;
/// false for any other type). Out of line: the rules call it often, and every byte of the
/// verifier is in every firmware.
#[inline(never)]
pub(super) fn in_range(dtype: DType, v: i32) -> bool {
    let (lo, hi) = match dtype {
        DType::I8 => (-128, 127),
        DType::U8 => (0, 255),
        DType::I16 => (-32768, 32767),
        _ => (1, 0),
    };
    lo <= v && v <= hi
}

/// The operands of QConv and QGemm: 8-bit activations (or int16 ones, TFLite's 16 × 8 scheme,
/// accumulated in 64 bits), one type in and out; int8 weights; int32 bias and requantization
/// pairs, one or one per channel; zero points and clamp values of their types.
pub(super) fn check_integer_operands(
    x: &TensorDesc,
    w: &TensorDesc,
    bias: &TensorDesc,
    requant: &TensorDesc,
    y: &TensorDesc,
    q: &Requantize,
    per_channel: usize,
) -> Rule {
    ensure(
        in_range(x.dtype, 0) && x.dtype == y.dtype,
        "integer op input and output are int8, uint8 or int16, of one type",
    )?;
    ensure(w.dtype == DType::I8, "integer op weights are int8")?;
    ensure(
        bias.dtype == DType::I32 && requant.dtype == DType::I32,
        "integer op bias and requantization are int32",
    )?;
    let channels = requant.elements() / 2;
    ensure(
        requant.shape.rank() == 2
            && requant.shape.dim_checked(1) == 2
            && (channels == 1 || channels == per_channel),
        "requantization shape",
    )?;
    ensure(
        in_range(y.dtype, q.min) && in_range(y.dtype, q.max) && in_range(y.dtype, q.output_zero),
        "output clamp outside the output type",
    )?;
    ensure(
        in_range(x.dtype, q.input_zero),
        "input zero point outside the input type",
    )
}
