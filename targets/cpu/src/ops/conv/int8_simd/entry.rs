//! The entry points, one per instruction set, each compiled with its features: the strategies
//! of sixteen positions or lanes of channels where they take the step, else the shared
//! geometry with the set's operations inlined.

#![allow(unsafe_code)]

#[cfg(target_arch = "aarch64")]
use super::neon::Neon;
use super::shared::{qconv_with, Operands};
#[cfg(target_arch = "x86_64")]
use super::shared::{scratch_needed, StepKey};
#[cfg(target_arch = "x86_64")]
use super::{avx2::Avx2, avx2_depthwise, avx2_lanes, avx2_wide, vnni::Vnni, vnni_wide};
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
use ferrite_hal::op::QConv;

#[cfg(target_arch = "x86_64")]
/// The entry point compiled with AVX2: the shared geometry and these operations inlined.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn avx2<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: &ConvDims,
    ops: &Operands<'_>,
    x: &[X],
    y: &mut [Y],
    scratch: &mut [u8],
) -> Option<bool> {
    let key = StepKey::new(c, d, ops, X::MIN < 0);
    let depthwise = d.c / c.group.max(1) == 1 && c.group > 1;
    // SAFETY (both): this CPU has AVX2 (the caller's).
    let wide = match (c.is_pointwise(), depthwise) {
        (true, _) => unsafe {
            match avx2_lanes::pointwise(key, ops, d, x, y) {
                None => avx2_wide::pointwise(key, ops, d, x, y),
                done => done,
            }
        },
        (false, false) if scratch.len() >= scratch_needed(c, d) => unsafe {
            avx2_wide::unfolded(key, c, ops, d, x, y)
        },
        (false, true) if scratch.len() >= scratch_needed(c, d) => unsafe {
            avx2_depthwise::depthwise(key, c, ops, d, x, y)
        },
        _ => None,
    };
    if let Some(done) = wide {
        return Some(done);
    }
    qconv_with::<Avx2, X, Y>(c, d, ops, x, y, scratch)
}

#[cfg(target_arch = "x86_64")]
/// The entry point compiled with VNNI: the shared geometry and these operations inlined.
///
/// # Safety
/// The CPU has AVX2, AVX-512VL and AVX-512 VNNI ([`crate::isa::vnni`]).
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn vnni<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: &ConvDims,
    ops: &Operands<'_>,
    x: &[X],
    y: &mut [Y],
    scratch: &mut [u8],
) -> Option<bool> {
    let key = StepKey::new(c, d, ops, X::MIN < 0);
    let depthwise = d.c / c.group.max(1) == 1 && c.group > 1;
    // SAFETY (both): this CPU has the features (the caller's).
    let wide = match (c.is_pointwise(), depthwise) {
        (true, _) => unsafe { vnni_wide::pointwise(key, ops, d, x, y) },
        (false, false) if scratch.len() >= scratch_needed(c, d) => unsafe {
            vnni_wide::unfolded(key, c, ops, d, x, y)
        },
        _ => None,
    };
    if let Some(done) = wide {
        return Some(done);
    }
    qconv_with::<Vnni, X, Y>(c, d, ops, x, y, scratch)
}

#[cfg(target_arch = "aarch64")]
/// The entry point compiled with NEON: the shared geometry and these operations inlined.
///
/// # Safety
/// The CPU has NEON (every aarch64 core does).
#[target_feature(enable = "neon")]
pub(super) unsafe fn neon<X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: &ConvDims,
    ops: &Operands<'_>,
    x: &[X],
    y: &mut [Y],
    scratch: &mut [u8],
) -> Option<bool> {
    qconv_with::<Neon, X, Y>(c, d, ops, x, y, scratch)
}
