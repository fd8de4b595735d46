//! The CPU's step dispatch, one module per op family (`ferrite_hal::op::Family`, a column of
//! hal's op table, as the verifier's rules in `ferrite-core`): each family's `run` takes its
//! kinds' operands out of the carved step and calls their kernels. `run_step_inline`
//! dispatches by family; on a firmware whose selection spans many families it calls each
//! family's `run` out of line (see `out_of_line`), so the deepest frame is one family's,
//! not the union of every kernel's locals. The families whose kernels read the step's
//! context (kept state, layouts, threads: conv, matmul, pool, recurrent) get it as their
//! first argument.
//!
//! Adding an op: one arm in its family's `run` here (the kernel itself in the family's folder
//! under `ops/`); a new family, one module here and one arm in `run_step_inline`.

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
fn element_size<const OPS: Selection>(dtype: DType) -> Result<usize, CpuError> {
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
const fn needs_portable(ops: Selection, covered_int8: Selection, kind: OpKind) -> bool {
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
fn bytes8<const OPS: Selection>(
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
fn fused<const OPS: Selection>(act: Activation, out: &mut [f32]) {
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
fn cast<T: bytemuck::Pod>(bytes: &[u8]) -> Result<&[T], CpuError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| CpuError::Misaligned)
}

/// Mutable bytes viewed as `T`.
#[inline(always)]
fn cast_mut<T: bytemuck::Pod>(bytes: &mut [u8]) -> Result<&mut [T], CpuError> {
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
fn optional_input_bytes<'x>(
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
fn optional_input_f32<'x>(
    step: &Step<'_>,
    view: &Readable<'x>,
    i: usize,
) -> Result<Option<&'x [f32]>, CpuError> {
    optional_input_bytes(step, view, i)?.map(f32s).transpose()
}

/// Input `i`'s bytes (`CorruptPlan` when absent), out of line as [`optional_input_bytes`].
#[inline(never)]
fn input_bytes<'x>(step: &Step<'_>, view: &Readable<'x>, i: usize) -> Result<&'x [u8], CpuError> {
    optional_input_bytes(step, view, i)?.ok_or(CpuError::CorruptPlan)
}

/// Input `i`'s bytes as f32 (`CorruptPlan` when absent), out of line as [`optional_input_f32`].
#[inline(never)]
fn input_f32<'x>(step: &Step<'_>, view: &Readable<'x>, i: usize) -> Result<&'x [f32], CpuError> {
    optional_input_f32(step, view, i)?.ok_or(CpuError::CorruptPlan)
}

/// Input `i`'s bytes with their signedness (int8 or uint8), for ConvInteger and
/// MatMulInteger (`CorruptPlan` when absent). Out of line, as [`input_bytes`]: the descriptor
/// is decoded in this frame, not into a slot of the family's.
#[cfg(feature = "quantized")]
#[inline(never)]
fn integer_input<'x>(
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

mod conv;
mod elementwise;
mod indexing;
mod logic;
mod matmul;
mod movement;
mod pool;
mod quantize;
mod recurrent;
mod reduce;
mod run;

pub use run::{
    run_step, run_step_after, run_step_in, run_step_selected, run_step_selected_in, step_operands,
    step_operands_and_scratch,
};

/// Whether a build selecting `OPS` has some kind of `family`.
const fn selects_family(ops: Selection, family: Family) -> bool {
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
const fn families(ops: Selection) -> usize {
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
const fn out_of_line(ops: Selection) -> bool {
    let families = families(ops);
    !cfg!(feature = "std") && families >= 2
}

/// Calls `run` on `args` in a frame of its own (one instance per call site).
#[inline(never)]
fn in_own_frame<A, R, F: FnOnce(A) -> R>(run: F, args: A) -> R {
    run(args)
}

/// Runs one verified step with the kernels `OPS` selects (int8 steps of the kinds in
/// `COVERED_INT8` excepted: a device runs those with kernels of its own). Inlined into each
/// build of `run_step`.
#[inline(always)]
pub(crate) fn run_step_inline<const OPS: Selection, const COVERED_INT8: Selection>(
    ctx: StepContext<'_>,
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Result<(), CpuError> {
    let covered_int8 = COVERED_INT8;
    /// `$body` with `$args` bound to `$pattern`, in a frame of its own where [`out_of_line`]
    /// says so. Otherwise written in place, not called as a closure: a closure is a function
    /// of its own, built without the instruction set of the SIMD build it is called from (the
    /// kernels behind it had run as baseline SSE2 code in the AVX2 build).
    macro_rules! call {
        (|$pattern:pat_param| $body:expr, $args:expr) => {
            if const { out_of_line(OPS) } {
                in_own_frame(|$pattern| $body, $args)
            } else {
                let $pattern = $args;
                $body
            }
        };
    }
    // The steps that write several outputs carve their own.
    match step.op {
        Op::Split { axis } if selects(OPS, OpKind::Split) => {
            return call!(
                |(s, a, w)| movement::split::<OPS>(s, axis, a, w),
                (step, arena, weights)
            )
        }
        Op::TopK { axis, largest } if selects(OPS, OpKind::TopK) => {
            return call!(
                |(s, a, w)| reduce::top_k::<OPS>(s, axis, largest, a, w),
                (step, arena, weights)
            )
        }
        Op::DynamicQuantize if selects(OPS, OpKind::DynamicQuantize) => {
            return call!(
                |(s, a, w)| quantize::dynamic_quantize(s, a, w),
                (step, arena, weights)
            )
        }
        Op::Recurrent(_) if selects(OPS, OpKind::Recurrent) => {
            return call!(
                |(c, s, a, w)| recurrent::run::<OPS>(c, s, a, w),
                (ctx, step, arena, weights)
            )
        }
        _ => {}
    }
    // The output's descriptor and the carved operands stay in the slots they were built in:
    // moved out (as `?` would), each was copied to a second slot under every kernel the
    // dispatch calls (the every-kernel M4 firmware's dispatch frame 316 -> 212 B).
    let out_slot = step.outputs.get(0);
    let Some(out_desc) = &out_slot else {
        return Err(CpuError::CorruptPlan);
    };
    let out_span = span(out_desc).ok_or(CpuError::CorruptPlan)?;
    let scratch_span = step.scratch.as_ref().and_then(span);
    let mut carved = carve(arena, weights, out_span, scratch_span);
    let (view, out, scratch) = match &mut carved {
        Ok(carved) => carved,
        Err(e) => return Err(*e),
    };
    macro_rules! family {
        // A family whose kernels read the step's context (kept state, layouts, threads).
        (in context $module:ident) => {
            family!(in context $module::run)
        };
        (in context $module:ident :: $run:ident) => {
            call!(
                |(c, o, v, y, s)| $module::$run::<OPS>(c, step, o, v, y, s, covered_int8),
                (ctx, out_desc, &*view, &mut **out, scratch.as_deref_mut())
            )
        };
        ($module:ident) => {
            family!($module::run)
        };
        ($module:ident :: $run:ident) => {
            call!(
                |(o, v, y, s)| $module::$run::<OPS>(step, o, v, y, s, covered_int8),
                (out_desc, &*view, &mut **out, scratch.as_deref_mut())
            )
        };
    }
    match step.op.kind().family() {
        Family::Conv if const { selects_family(OPS, Family::Conv) } => family!(in context conv),
        Family::MatMul if const { selects_family(OPS, Family::MatMul) } => {
            match matmul::runner(&step.op) {
                matmul::Runner::Products => family!(in context matmul),
                matmul::Runner::Batched => family!(in context matmul::run_batched),
                matmul::Runner::Transform => family!(matmul::run_dft),
            }
        }
        Family::Elementwise if const { selects_family(OPS, Family::Elementwise) } => {
            family!(elementwise)
        }
        Family::Pool if const { selects_family(OPS, Family::Pool) } => family!(in context pool),
        Family::Movement if const { selects_family(OPS, Family::Movement) } => family!(movement),
        Family::Indexing if const { selects_family(OPS, Family::Indexing) } => family!(indexing),
        Family::Reduce if const { selects_family(OPS, Family::Reduce) } => family!(reduce),
        Family::Quantize if const { selects_family(OPS, Family::Quantize) } => family!(quantize),
        Family::Logic if const { selects_family(OPS, Family::Logic) } => family!(logic),
        _ => Err(CpuError::Unsupported),
    }
}
