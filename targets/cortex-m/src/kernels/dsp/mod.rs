//! Kernels for cores with the DSP extension (Cortex-M4, M7, M33): dual 16-bit multiply-
//! accumulates (`SMLAD`) on int8 data unpacked four bytes at a time (`SXTB16`), as CMSIS-NN does.
//! Integer arithmetic is exact, so every kernel here is bit-exact with its portable counterpart
//! (checked under QEMU by `tests/tests/qemu.rs`).

mod instructions;
#[macro_use]
mod requantize;
#[macro_use]
mod block;
mod conv;
mod depthwise;
mod gemm;

use ferrite_cpu::CpuError;
use ferrite_hal::{selects, DType, Op, OpKind, Selection, Step};

/// The kinds whose int8 steps (int8 input) [`run_step`] always runs: the portable kernels need
/// not cover them.
pub const COVERED_INT8: Selection = ferrite_hal::op_mask(&[OpKind::QGemm, OpKind::QConv]);

/// The DSP kernel for `step`, if there is one for its op and dtypes among the kinds in `OPS`.
#[inline]
pub fn run_step<const OPS: Selection>(
    step: &Step<'_>,
    arena: &mut [u8],
    weights: &[u8],
) -> Option<Result<(), CpuError>> {
    // Each kernel only where `OPS` selects its kind (a constant: a float model's firmware has
    // no trace of them); the decision is out of line, and the optimiser would not see that it
    // never names an unselected one.
    let (gemm, conv) = (selects(OPS, OpKind::QGemm), selects(OPS, OpKind::QConv));
    // Only integer ops are looked at further (a tensor lookup costs a record decode).
    if !(gemm || conv) || !matches!(step.op, Op::QGemm(_) | Op::QConv(_)) {
        return None;
    }
    Some(match kernel_for::<OPS>(step)? {
        Kernel::Gemm if gemm => gemm::qgemm::<OPS>(step, arena, weights),
        Kernel::Depthwise if conv => depthwise::depthwise(step, arena, weights),
        Kernel::Columns if conv => conv::columns(step, arena, weights),
        _ => return None,
    })
}

/// The DSP kernels a step can take.
#[derive(Clone, Copy)]
enum Kernel {
    /// [`gemm::qgemm`].
    Gemm,
    /// [`depthwise::depthwise`].
    Depthwise,
    /// [`conv::columns`].
    Columns,
}

/// Which DSP kernel takes `step` (an int8 input among the kinds `OPS` selects), if one does.
/// Out of line: the tensor descriptors it looks up are not in the run loop's frame, under
/// every kernel's.
#[inline(never)]
fn kernel_for<const OPS: Selection>(step: &Step<'_>) -> Option<Kernel> {
    if step.inputs.get(0)?.dtype != DType::I8 {
        return None;
    }
    match step.op {
        Op::QGemm(_) if selects(OPS, OpKind::QGemm) => Some(Kernel::Gemm),
        Op::QConv(c) if selects(OPS, OpKind::QConv) => {
            let icg = step.inputs.get(1)?.shape.dim(1);
            Some(if icg == 1 && c.group > 1 {
                Kernel::Depthwise
            } else {
                Kernel::Columns
            })
        }
        _ => None,
    }
}
