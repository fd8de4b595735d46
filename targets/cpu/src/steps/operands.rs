//! What every family's dispatch shares: the operand accessors (inputs by index, as bytes or
//! f32, typed views, the int8/uint8/int16 pairs) and the frame rules of a firmware (which
//! builds call a family out of line). Its macros are declared for the family modules.

pub(crate) use crate::base::context::StepContext;
pub(crate) use crate::base::memory::{carve, carve_spans, f32s, f32s_mut, span, Readable, Src};
pub(crate) use crate::CpuError;
pub(crate) use ferrite_hal::geometry::{lanes, nchw, MatMulGeometry};
pub(crate) use ferrite_hal::op::Family;
pub(crate) use ferrite_hal::{
    selects, selects_dtype, selects_size, Activation, DType, Op, OpKind, Selection, Step,
    TensorDesc, ALL_OPS,
};

/// The element size of `dtype` when `OPS` selects a type of that size (the kernels that only
/// move elements take bytes and a size), else `Unsupported`.
#[inline(always)]
pub(super) fn element_size<const OPS: Selection>(dtype: DType) -> Result<usize, CpuError> {
    let size = dtype.size();
    if selects_size(OPS, size) {
        Ok(size)
    } else {
        Err(CpuError::Unsupported)
    }
}

/// Whether a build selecting `OPS`, whose int8 steps of the kinds in `covered_int8` run
/// elsewhere, needs the portable kernel of `kind`: not when the kind is covered and no other
/// activation type (uint8, int16) is selected (then the arm, with its operand decoding, is not
/// linked at all).
#[cfg(feature = "quantized")]
#[inline(always)]
pub(super) const fn needs_portable(ops: Selection, covered_int8: Selection, kind: OpKind) -> bool {
    let other_types = selects_dtype(ops, DType::U8) || selects_dtype(ops, DType::I16);
    selects(ops, kind) && (!selects(covered_int8, kind) || other_types)
}

/// Runs `$body` with `$xs`/`$ys` as the input and output slices their dtype says (both int8 or
/// both uint8, or both int16 where `$int16` says the kind takes it, as the verifier requires;
/// int8 only when the kind is not in `$covered`); anything else is `Unsupported`.
#[cfg(feature = "quantized")]
macro_rules! with_quantized_pair {
    ($ops:ident, $covered:expr, $kind:expr, $int16:literal, $x_dtype:expr, $y_dtype:expr, $x:expr, $y:expr, |$xs:ident, $ys:ident| $body:expr) => {
        match ($x_dtype, $y_dtype) {
            (DType::I8, DType::I8)
                if selects_dtype($ops, DType::I8) && !selects($covered, $kind) =>
            {
                let ($xs, $ys) = (cast::<i8>($x)?, cast_mut::<i8>($y)?);
                $body
            }
            (DType::U8, DType::U8) if selects_dtype($ops, DType::U8) => {
                let ($xs, $ys) = (cast::<u8>($x)?, cast_mut::<u8>($y)?);
                $body
            }
            (DType::I16, DType::I16) if $int16 && selects_dtype($ops, DType::I16) => {
                let ($xs, $ys) = (cast::<i16>($x)?, cast_mut::<i16>($y)?);
                $body
            }
            _ => return Err(CpuError::Unsupported),
        }
    };
}

/// The 8-bit type of a step whose input and output are both int8 or both uint8 (as the
/// verifier requires), for the kernels that take either as bytes; `Unsupported` for a type
/// `OPS` does not select.
#[cfg(feature = "quantized")]
pub(super) fn bytes8<const OPS: Selection>(
    x: DType,
    y: DType,
) -> Result<crate::base::quantized::Bytes8, CpuError> {
    use crate::base::quantized::Bytes8;
    match (x, y) {
        (DType::I8, DType::I8) if selects_dtype(OPS, DType::I8) => Ok(Bytes8::INT8),
        (DType::U8, DType::U8) if selects_dtype(OPS, DType::U8) => Ok(Bytes8::UINT8),
        _ => Err(CpuError::Unsupported),
    }
}

/// Applies an op's fused activation to its f32 output, after its kernel: one out-of-line copy
/// of the activations' code, shared by every kernel that fuses one (Conv, ConvTranspose, Gemm,
/// MatMul, float binary ops, batch norm).
#[inline(never)]
pub(super) fn fused<const OPS: Selection>(act: Activation, out: &mut [f32]) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if crate::isa::level() >= crate::isa::Level::Avx2 {
        // Built for AVX2 (out of line, the activations had been built for the baseline: half
        // as wide). SAFETY: the AVX2 level runs only where the CPU has AVX2 and FMA.
        #[allow(unsafe_code)]
        unsafe {
            crate::micro::activation::activate_fused_avx2::<OPS>(act, out)
        };
        return;
    }
    crate::micro::activation::activate_fused::<OPS>(act, out)
}

/// Bytes viewed as `T` (aligned by the planner).
#[inline(always)]
pub(super) fn cast<T: bytemuck::Pod>(bytes: &[u8]) -> Result<&[T], CpuError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| CpuError::Misaligned)
}

/// Mutable bytes viewed as `T`.
#[inline(always)]
pub(super) fn cast_mut<T: bytemuck::Pod>(bytes: &mut [u8]) -> Result<&mut [T], CpuError> {
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| CpuError::Misaligned)
}

/// Binds `$name` to input `$i`'s descriptor by reference, returning `CorruptPlan` from the
/// enclosing function when the input is absent. The descriptor stays in the slot the lookup
/// decoded it into: moved out of the `Option` (as `?` would), every fetch copied its 52 bytes
/// to a slot of its own, 2-5 KB of code and several slots of a family's frame on a firmware.
macro_rules! input {
    ($step:ident, $name:ident = $i:expr) => {
        let slot = $step.inputs.get($i);
        let Some($name) = &slot else {
            return Err(CpuError::CorruptPlan);
        };
    };
}

/// Input `i`'s bytes, `None` when the optional input is absent. Out of line: one copy of the
/// operand lookup serves every kernel (inlined, a firmware carried one per fetch).
#[inline(never)]
pub(super) fn optional_input_bytes<'x>(
    step: &Step<'_>,
    view: &Readable<'x>,
    i: usize,
) -> Result<Option<&'x [u8]>, CpuError> {
    match step.inputs.get(i) {
        Some(t) => Ok(Some(view.bytes(&t)?)),
        None => Ok(None),
    }
}

/// [`optional_input_bytes`] as f32 (out of line with the cast).
#[inline(never)]
pub(super) fn optional_input_f32<'x>(
    step: &Step<'_>,
    view: &Readable<'x>,
    i: usize,
) -> Result<Option<&'x [f32]>, CpuError> {
    optional_input_bytes(step, view, i)?.map(f32s).transpose()
}

/// Input `i`'s bytes (`CorruptPlan` when absent), out of line as [`optional_input_bytes`].
#[inline(never)]
pub(super) fn input_bytes<'x>(
    step: &Step<'_>,
    view: &Readable<'x>,
    i: usize,
) -> Result<&'x [u8], CpuError> {
    optional_input_bytes(step, view, i)?.ok_or(CpuError::CorruptPlan)
}

/// Input `i`'s bytes as f32 (`CorruptPlan` when absent), out of line as [`optional_input_f32`].
#[inline(never)]
pub(super) fn input_f32<'x>(
    step: &Step<'_>,
    view: &Readable<'x>,
    i: usize,
) -> Result<&'x [f32], CpuError> {
    optional_input_f32(step, view, i)?.ok_or(CpuError::CorruptPlan)
}

/// Input `i`'s bytes with their signedness (int8 or uint8), for ConvInteger and
/// MatMulInteger (`CorruptPlan` when absent). Out of line, as [`input_bytes`]: the descriptor
/// is decoded in this frame, not into a slot of the family's.
#[cfg(feature = "quantized")]
#[inline(never)]
pub(super) fn integer_input<'x>(
    step: &Step<'_>,
    view: &Readable<'x>,
    i: usize,
) -> Result<crate::ops::matmul::accumulate::Bytes<'x>, CpuError> {
    input!(step, t = i);
    Ok(crate::ops::matmul::accumulate::Bytes::new(
        view.bytes(t)?,
        t.dtype == DType::I8,
    ))
}

/// Binds the step's input accessors: `$f32_in(i)` (input `i`'s bytes as f32),
/// `$optional_f32(i)` (the same, `None` for an absent optional input) and `$bytes_in(i)` (its
/// bytes); each absent required input is `CorruptPlan`.
macro_rules! step_inputs {
    ($step:ident, $view:ident => $f32_in:ident, $optional_f32:ident, $bytes_in:ident) => {
        #[allow(unused_variables)]
        let $bytes_in = |i: usize| input_bytes($step, $view, i);
        #[allow(unused_variables)]
        let $f32_in = |i: usize| input_f32($step, $view, i);
        #[allow(unused_variables)]
        let $optional_f32 = |i: usize| optional_input_f32($step, $view, i);
    };
}

/// Whether a build selecting `OPS` has some kind of `family`.
pub(super) const fn selects_family(ops: Selection, family: Family) -> bool {
    let mut i = 0;
    while i < OpKind::ALL.len() {
        let kind = OpKind::ALL[i];
        if kind.family() as u8 == family as u8 && selects(ops, kind) {
            return true;
        }
        i += 1;
    }
    false
}

/// How many op families a build selecting `OPS` has.
pub(super) const fn families(ops: Selection) -> usize {
    let all = [
        Family::Conv,
        Family::MatMul,
        Family::Elementwise,
        Family::Pool,
        Family::Movement,
        Family::Indexing,
        Family::Reduce,
        Family::Quantize,
        Family::Logic,
        Family::Recurrent,
    ];
    let (mut n, mut i) = (0, 0);
    while i < all.len() {
        if selects_family(ops, all[i]) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Whether a build selecting `OPS` calls each family's `run` out of line: a firmware
/// (`no_std`) whose selection spans two families or more. Inlined into one dispatch, every
/// family's locals take their own stack slots in one frame (rustc 1.95 leaves values moved into
/// calls without the lifetime markers LLVM needs to share slots: the every-kernel dispatch's
/// frame was 2 KB); out of line, a step's stack is its family's. Measured with the footprint
/// gate: the float CNNs' inference stack 2.1-2.3 KB -> 1.5 KB and 1-3 % fewer instructions; the
/// two-family models (the digits MLP: Gemm and Softmax; the scikit-learn linear regressor: a
/// Scaler's Sub and Mul, then Gemm) 1,292 -> 1,208 B and 1,412 -> 1,204 B, instructions within
/// 0.2 %. One family's kernels stay inlined (nothing to share a frame with). A host inlines all
/// of them into each SIMD build.
pub(super) const fn out_of_line(ops: Selection) -> bool {
    let families = families(ops);
    !cfg!(feature = "std") && families >= 2
}

/// Calls `run` on `args` in a frame of its own (one instance per call site).
#[inline(never)]
pub(super) fn in_own_frame<A, R, F: FnOnce(A) -> R>(run: F, args: A) -> R {
    run(args)
}
