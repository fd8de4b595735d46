//! Elements as bytes: the byte range of a run of elements of any size, one element's copy, and
//! integers of any width and signedness loaded to and stored from 64 bits. What the kernels
//! that move or convert elements of every type share (movement, indexing, logic, numeric,
//! quantization).

use ferrite_hal::{selects_dtype, DType, Selection};

/// Bytes `[at, at + len)` of `xs` (in elements of `size` bytes), `None` past the end.
#[inline(always)]
pub(crate) fn elements(xs: &[u8], at: usize, len: usize, size: usize) -> Option<&[u8]> {
    xs.get(at.checked_mul(size)?..)?
        .get(..len.checked_mul(size)?)
}

/// [`elements`], mutable.
#[inline(always)]
pub(crate) fn elements_mut(xs: &mut [u8], at: usize, len: usize, size: usize) -> Option<&mut [u8]> {
    xs.get_mut(at.checked_mul(size)?..)?
        .get_mut(..len.checked_mul(size)?)
}

/// Copies the bytes of one element (as many as both hold): no call to `memcpy` for a few bytes.
#[inline(always)]
pub(crate) fn copy_element(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s;
    }
}

/// Whether `ops` selects an integer type of this signedness and `size` bytes (any size: 0).
/// The kernels below compile only the widths and signedness a model's types need.
pub(crate) const fn selects_integer(ops: Selection, signed: bool, size: usize) -> bool {
    let types = if signed {
        [DType::I8, DType::I16, DType::I32, DType::I64]
    } else {
        [DType::U8, DType::U16, DType::U32, DType::U64]
    };
    let mut i = 0;
    while i < types.len() {
        if (size == 0 || types[i].size() == size) && selects_dtype(ops, types[i]) {
            return true;
        }
        i += 1;
    }
    false
}

/// Whether `ops` selects an integer type of `size` bytes.
pub(crate) const fn selects_width(ops: Selection, size: usize) -> bool {
    selects_integer(ops, true, size) || selects_integer(ops, false, size)
}

/// Element `i` of little-endian elements of `size` bytes, sign-extended when `signed`, as 64
/// bits; `None` past the end or for a width `OPS` selects no integer type of.
#[cfg_attr(feature = "std", inline(always))]
#[cfg_attr(not(feature = "std"), inline(never))]
pub(crate) fn load<const OPS: Selection>(
    bytes: &[u8],
    i: usize,
    size: usize,
    signed: bool,
) -> Option<u64> {
    let b = bytes.get(i.checked_mul(size)?..)?;
    let raw = match size {
        1 if const { selects_width(OPS, 1) } => u64::from(*b.first()?),
        2 if const { selects_width(OPS, 2) } => {
            u64::from(u16::from_le_bytes(b.get(..2)?.try_into().ok()?))
        }
        4 if const { selects_width(OPS, 4) } => {
            u64::from(u32::from_le_bytes(b.get(..4)?.try_into().ok()?))
        }
        8 if const { selects_width(OPS, 8) } => u64::from_le_bytes(b.get(..8)?.try_into().ok()?),
        _ => return None,
    };
    let unused = 64 - 8 * size.min(8) as u32;
    Some(if signed && const { selects_integer(OPS, true, 0) } {
        (((raw << unused) as i64) >> unused) as u64
    } else {
        raw
    })
}

/// Writes the low `size` bytes of `v` as element `i` (nothing past the end).
#[inline(always)]
pub(crate) fn store(bytes: &mut [u8], i: usize, size: usize, v: u64) {
    if let Some(slot) = i
        .checked_mul(size)
        .and_then(|at| bytes.get_mut(at..)?.get_mut(..size))
    {
        let all = v.to_le_bytes();
        for (d, s) in slot.iter_mut().zip(all) {
            *d = s;
        }
    }
}

/// Whether `dtype` is a signed integer type.
pub fn is_signed(dtype: DType) -> bool {
    matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64)
}
