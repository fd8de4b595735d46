//! The dispatch: one verified step to its family's `run` (the steps that write several
//! outputs straight to their kernels).

use super::operands::*;
use super::{
    conv, elementwise, indexing, logic, matmul, movement, pool, quantize, recurrent, reduce,
};

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
