//! Parameter words shared by several families' codecs: axis lists, zero points and clamps, and
//! the domain checks of single values.

use super::movement::AxisArray;
use crate::words::{WordReader, WordWriter};
use crate::MAX_RANK;

pub(super) fn encode_axes<T: Copy>(
    w: &mut WordWriter,
    values: &AxisArray<T>,
    f: impl Fn(T) -> u32,
) {
    for v in values {
        w.u32(f(*v));
    }
}

pub(super) fn decode_axes<T: Copy + Default>(
    r: &mut WordReader<'_>,
    f: impl Fn(u32) -> Option<T>,
) -> Option<AxisArray<T>> {
    let mut out = [T::default(); MAX_RANK];
    for slot in out.iter_mut() {
        *slot = f(r.u32()?)?;
    }
    Some(out)
}

/// Two input zero points, the output zero point and the output clamp of a binary integer op:
/// five words, each a value of an 8-bit type, with `min <= max`.
pub(super) fn decode_zeros_and_clamp(r: &mut WordReader<'_>) -> Option<[i32; 5]> {
    let v = [r.i32()?, r.i32()?, r.i32()?, r.i32()?, r.i32()?];
    // Values of some 8- or 16-bit type; the verifier checks them against the operands' types.
    let integer = -32768..=65535;
    (v.iter().all(|x| integer.contains(x)) && v[3] <= v[4]).then_some(v)
}

pub(super) fn positive(v: usize) -> Option<usize> {
    (v >= 1).then_some(v)
}

pub(super) fn finite(v: f32) -> Option<f32> {
    v.is_finite().then_some(v)
}
