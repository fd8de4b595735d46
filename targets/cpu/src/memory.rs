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

/// The read-only rest of the arena, plus the weights.
pub(crate) struct Readable<'x> {
    segments: [(usize, &'x [u8]); 3],
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
                        return Ok(Src::Bytes(&seg[o - base..end - base]));
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
pub(crate) fn carve<'x>(
    arena: &'x mut [u8],
    weights: &'x [u8],
    output: Span,
    scratch: Option<Span>,
) -> Result<Carved<'x>, CpuError> {
    let bad = CpuError::CorruptPlan;
    let (first, second, scratch_first) = match scratch {
        Some(s) if s.0 < output.0 => (s, Some(output), true),
        Some(s) => (output, Some(s), false),
        None => (output, None, false),
    };
    if first.1 < first.0 || first.1 > arena.len() {
        return Err(bad);
    }
    let (seg0, rest) = arena.split_at_mut(first.0);
    let (m1, rest) = rest.split_at_mut(first.1 - first.0);
    let (seg1, m2, seg2, second_end) = match second {
        Some(s) => {
            if s.0 < first.1 || s.1 < s.0 || s.1 - first.1 > rest.len() {
                return Err(bad);
            }
            let (seg1, rest) = rest.split_at_mut(s.0 - first.1);
            let (m2, seg2) = rest.split_at_mut(s.1 - s.0);
            (seg1, Some(m2), seg2, s.1)
        }
        None => (rest, None, &mut [][..], first.1),
    };
    let readable = Readable {
        segments: [(0, &*seg0), (first.1, &*seg1), (second_end, &*seg2)],
        weights,
        output,
    };
    let (out, scratch) = if scratch_first {
        (m2.ok_or(bad)?, Some(m1))
    } else {
        (m1, m2)
    };
    Ok((readable, out, scratch))
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
