//! Checked reinterpretation of aligned little-endian bytes as numbers (no `unsafe` here).

/// `bytes` as `f32`s, or `None` if misaligned or not a whole number of elements.
pub(crate) fn f32s(bytes: &[u8]) -> Option<&[f32]> {
    bytemuck::try_cast_slice(bytes).ok()
}
