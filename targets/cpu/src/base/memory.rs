//! Carving one step's operands out of the arena without `unsafe`.
//!
//! A step writes its output (and maybe scratch) while reading inputs from the rest of the arena
//! and from the weights. The arena is split around the mutable ranges; each input is then found
//! in one of the remaining read-only segments, or is the output itself (an in-place op).

use crate::CpuError;
use ferrite_hal::{Location, TensorDesc};

/// Byte range `[start, end)` of an arena tensor.
pub(crate) type Span = (usize, usize);

/// Where an input's bytes are.
pub(crate) enum Src<'x> {
    /// Separate bytes.
    Bytes(&'x [u8]),
    /// The output's own bytes (the op runs in place).
    Output,
}

/// Most mutable spans one step carves (outputs plus scratch).
pub(crate) const MAX_MUTABLE: usize = 4;

/// The read-only rest of the arena, plus the weights.
pub(crate) struct Readable<'x> {
    segments: [(usize, &'x [u8]); MAX_MUTABLE + 1],
    weights: &'x [u8],
    output: Span,
}

/// The arena span of a tensor, if it is in the arena.
pub(crate) fn span(t: &TensorDesc) -> Option<Span> {
    match t.location {
        Location::Arena(o) => Some((o, o + t.bytes)),
        Location::Weights(_) => None,
    }
}

impl<'x> Readable<'x> {
    /// The bytes of input `t`, or [`Src::Output`] if it occupies the output's bytes.
    pub(crate) fn src(&self, t: &TensorDesc) -> Result<Src<'x>, CpuError> {
        match t.location {
            Location::Weights(o) => self
                .weights
                .get(o..o + t.bytes)
                .map(Src::Bytes)
                .ok_or(CpuError::CorruptPlan),
            Location::Arena(o) => {
                let end = o + t.bytes;
                if (o, end) == self.output && t.bytes > 0 {
                    return Ok(Src::Output);
                }
                for (base, seg) in self.segments {
                    if o >= base && end <= base + seg.len() {
                        if let Some(bytes) = seg.get(o - base..end - base) {
                            return Ok(Src::Bytes(bytes));
                        }
                    }
                }
                Err(CpuError::CorruptPlan)
            }
        }
    }

    /// The bytes of an input that must not alias the output.
    pub(crate) fn bytes(&self, t: &TensorDesc) -> Result<&'x [u8], CpuError> {
        match self.src(t)? {
            Src::Bytes(b) => Ok(b),
            Src::Output => Err(CpuError::CorruptPlan),
        }
    }
}

/// A step's view of the arena: the read-only rest, the output, and the scratch (if any).
pub(crate) type Carved<'x> = (Readable<'x>, &'x mut [u8], Option<&'x mut [u8]>);

/// Splits `arena` into the output span, an optional scratch span (mutable, disjoint) and the
/// read-only remainder.
#[inline(never)]
pub(crate) fn carve<'x>(
    arena: &'x mut [u8],
    weights: &'x [u8],
    output: Span,
    scratch: Option<Span>,
) -> Result<Carved<'x>, CpuError> {
    // One instance of the split for both cases (two, each inlined into the dispatch, doubled
    // its code and its frame's slots on a firmware): without scratch, an empty span where the
    // output ends stands in for it (an empty segment holds no input's bytes).
    let (view, [out, carved]) = carve_spans(
        arena,
        weights,
        [output, scratch.unwrap_or((output.1, output.1))],
    )?;
    Ok((view, out, scratch.map(|_| carved)))
}

/// Splits `arena` into `N` disjoint mutable spans (the first is the step's output, which an
/// input may alias) and the read-only remainder.
pub(crate) fn carve_spans<'x, const N: usize>(
    arena: &'x mut [u8],
    weights: &'x [u8],
    spans: [Span; N],
) -> Result<(Readable<'x>, [&'x mut [u8]; N]), CpuError> {
    let bad = CpuError::CorruptPlan;
    if N == 0 || N > MAX_MUTABLE {
        return Err(bad);
    }
    let mut order: [usize; N] = core::array::from_fn(|i| i);
    order.sort_unstable_by_key(|&i| spans.get(i).map_or(0, |span| span.0));
    let mut segments: [(usize, &'x [u8]); MAX_MUTABLE + 1] = [(0, &[]); MAX_MUTABLE + 1];
    let mut parts: [Option<&'x mut [u8]>; N] = core::array::from_fn(|_| None);
    let mut rest: &'x mut [u8] = arena;
    let mut at = 0;
    // `order` holds 0..N and `segments` N + 1 slots; through `get` all the same (no panic path).
    for (k, &i) in order.iter().enumerate() {
        let Some(&(start, end)) = spans.get(i) else {
            return Err(bad);
        };
        if start < at || end < start || end - at > rest.len() {
            return Err(bad);
        }
        let (before, tail) = core::mem::take(&mut rest)
            .split_at_mut_checked(start - at)
            .ok_or(CpuError::CorruptPlan)?;
        let (part, tail) = tail
            .split_at_mut_checked(end - start)
            .ok_or(CpuError::CorruptPlan)?;
        let (Some(segment), Some(slot)) = (segments.get_mut(k), parts.get_mut(i)) else {
            return Err(bad);
        };
        *segment = (at, &*before);
        *slot = Some(part);
        rest = tail;
        at = end;
    }
    let Some(last) = segments.get_mut(N) else {
        return Err(bad);
    };
    *last = (at, &*rest);
    let readable = Readable {
        segments,
        weights,
        output: spans[0],
    };
    let mut out: [&'x mut [u8]; N] = core::array::from_fn(|_| &mut [][..]);
    for (slot, part) in out.iter_mut().zip(parts.iter_mut()) {
        *slot = part.take().ok_or(bad)?;
    }
    Ok((readable, out))
}

/// `bytes` as `f32`s.
pub(crate) fn f32s(bytes: &[u8]) -> Result<&[f32], CpuError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| CpuError::Misaligned)
}

/// `bytes` as mutable `f32`s.
pub(crate) fn f32s_mut(bytes: &mut [u8]) -> Result<&mut [f32], CpuError> {
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| CpuError::Misaligned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_hal::{DType, Shape};

    fn t(offset: usize, bytes: usize) -> TensorDesc {
        TensorDesc {
            dtype: DType::U8,
            shape: Shape::new(&[bytes]).unwrap(),
            location: Location::Arena(offset),
            bytes,
        }
    }

    #[test]
    fn carve_finds_inputs_around_output_and_scratch() {
        let mut arena = [0u8; 64];
        for (i, b) in arena.iter_mut().enumerate() {
            *b = i as u8;
        }
        let (view, out, scratch) = carve(&mut arena, &[], (16, 32), Some((48, 56))).unwrap();
        assert_eq!(out.len(), 16);
        assert_eq!(scratch.unwrap().len(), 8);
        match view.src(&t(0, 16)).unwrap() {
            Src::Bytes(b) => assert_eq!(b[3], 3),
            Src::Output => panic!(),
        }
        match view.src(&t(32, 16)).unwrap() {
            Src::Bytes(b) => assert_eq!(b[0], 32),
            Src::Output => panic!(),
        }
        assert!(matches!(view.src(&t(16, 16)).unwrap(), Src::Output));
        assert!(view.src(&t(40, 16)).is_err());
    }
}
