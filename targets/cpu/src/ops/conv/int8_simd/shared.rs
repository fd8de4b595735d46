//! The geometry the instruction sets share ([`Isa`]: each supplies a block's packing and
//! products, a depthwise vector's taps, a plane's padding and eight requantizations): pointwise,
//! unfolded and depthwise convolutions over blocks of eight output positions, and the state a
//! step keeps.

#![allow(unsafe_code)]

use crate::base::context::StepContext;
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
use crate::base::requantize::Requantizer;
use ferrite_hal::op::{QConv, Requantize};
use std::vec::Vec;

/// What an instruction set supplies to the shared geometry: whole inner loops (a block's
/// products, a vector's taps, eight requantizations), each compiled with the instruction set's
/// target features, so the shared code around them needs none.
///
/// # Safety
/// Every method may only be called when the CPU has the instruction set's features.
pub(super) trait Isa: 'static {
    /// A channel's requantization prepared for [`Isa::requantize`] (kept across runs).
    type Lanes: Copy + Send + Sync + 'static;

    /// Rows per packed unit of a block and per weight word: 2 (values widened to int16, summed
    /// in pairs) or 4 (bytes summed in fours by VNNI's `vpdpbusd`).
    const ROWS: usize;

    /// What a channel's base adds to the input zero point: 128 where signed inputs are packed
    /// as unsigned bytes (`x + 128`, VNNI multiplies unsigned by signed bytes), else 0.
    fn input_offset(signed: bool) -> i32;

    /// The prepared form of `scalar`.
    unsafe fn lanes(scalar: &Requantizer) -> Self::Lanes;

    /// The output integers of eight sums: [`Requantizer::apply`] of each, bit for bit.
    unsafe fn requantize(lanes: &Self::Lanes, scalar: &Requantizer, sums: [i32; 8]) -> [i32; 8];

    /// [`Isa::requantize`]'s eight outputs as bytes, output `t` in byte `t` (little-endian):
    /// each output's low byte, which is the 8-bit output itself (an int8 output as its two's
    /// complement). Kept in a register, not written as int32s and read back (a store the next
    /// load waited on had been a fifth of a depthwise pass).
    #[inline(always)]
    unsafe fn narrowed(lanes: &Self::Lanes, scalar: &Requantizer, sums: [i32; 8]) -> u64 {
        // SAFETY: the caller's.
        low_bytes_of(unsafe { Self::requantize(lanes, scalar, sums) })
    }

    /// [`Isa::narrowed`] of two vectors' sums: the first's eight output bytes, then the
    /// second's (one sixteen-byte store, the narrowing shared).
    #[inline(always)]
    unsafe fn narrowed_two(
        lanes: &Self::Lanes,
        scalar: &Requantizer,
        [first, second]: [[i32; 8]; 2],
    ) -> [u8; 16] {
        // SAFETY: the caller's.
        let [low, high] = unsafe {
            [
                Self::narrowed(lanes, scalar, first),
                Self::narrowed(lanes, scalar, second),
            ]
        };
        (u128::from(low) | u128::from(high) << 64).to_le_bytes()
    }

    /// The block's rows `x[row(i) + at ..][..8]` (or the bytes its gather picks of sixteen)
    /// packed for [`Isa::product`], `ROWS` rows per 32-byte unit (rows past the block's as
    /// zeros), read once per block whatever the number of output channels.
    ///
    /// # Safety
    /// As the trait's; and every row's eight bytes from `block.at` (sixteen with a gather) are
    /// within `block.x`.
    unsafe fn pack<const SIGNED: bool>(block: &Block<'_>, units: &mut [[u8; 32]]);

    /// The raw sums `Σ_i w[o + j, i] · x[row(i) + at + t]` (wrapping, plus the channels'
    /// [`Isa::input_offset`] term) for `t < 8`, `j < B`, of a block packed into `units`.
    ///
    /// # Safety
    /// As the trait's; `ch` holds `units.len()` words for each channel below `o + B`.
    unsafe fn product<const B: usize>(
        ch: &Channels<Self>,
        units: &[[u8; 32]],
        o: usize,
    ) -> [[i32; 8]; B]
    where
        Self: Sized;

    /// `Σ_taps w · x` for the eight outputs of `gather`: output `t`'s first tap reads
    /// `padded[gather.start + gather.control[t]]` (each tap: sixteen bytes loaded, eight picked).
    ///
    /// # Safety
    /// As the trait's; and every tap's sixteen bytes from `gather.start + offset` are within
    /// `padded`.
    unsafe fn taps<const SIGNED: bool>(
        plan: &TapPlan<'_>,
        padded: &[u8],
        gather: &Gather,
    ) -> [i32; 8];

    /// Writes an input plane's bytes into its padded plane, chunk by chunk of `expansion`,
    /// every byte (padding too) XORed with `flip`.
    ///
    /// # Safety
    /// As the trait's; and `plane` holds at least `expansion.plane` bytes, `padded` at least
    /// `expansion.end`.
    unsafe fn expand(expansion: &Expansion, plane: &[u8], padded: &mut [u8], flip: u8);

    /// A depthwise step's outputs: [`depthwise_passes`] compiled with the instruction set.
    ///
    /// # Safety
    /// As the trait's, and [`depthwise_passes`]'s.
    unsafe fn passes<const SIGNED: bool>(
        state: &mut DepthwiseState<Self>,
        input: &DepthwiseInput<'_>,
        y: &mut [u8],
    ) where
        Self: Sized;

    /// A depthwise channel's outputs: [`depthwise_pass`] compiled with the instruction set, out
    /// of line (for planes of many vectors, whose loop inlined into [`depthwise_passes`] ran
    /// slower: VWW's 48 × 48 layer 14.0 → 15.1 µs).
    ///
    /// # Safety
    /// As the trait's, and [`depthwise_pass`]'s.
    unsafe fn pass<const SIGNED: bool>(
        padded: &[u8],
        channel: &ChannelPass<'_, Self>,
        out: &mut [u8],
    ) where
        Self: Sized;

    /// A regular convolution group's blocks: [`group_blocks`] compiled with the instruction
    /// set, one function per reading.
    ///
    /// # Safety
    /// As the trait's.
    unsafe fn blocks<const READING: u8, Y: QuantInt>(
        group: &GroupBlocks<'_, Self>,
        units: &mut Vec<[u8; 32]>,
        unfolded: &mut [u8],
        y: &mut [Y],
    ) where
        Self: Sized;

    /// Whether [`Isa::grouped`] is a vector kernel (depthwise steps then sum `ROWS` taps per
    /// multiply-add); where it is not, they run [`Isa::taps`].
    const GROUPED: bool = false;

    /// `Σ_groups word · x` for the outputs of `gather` ([`PairedGather`]), each tap group's
    /// bytes read from sixteen at each half's start plus the group's offset (with `WHOLE`,
    /// both halves' start is one: sixteen bytes read once for the two): the raw sums of a
    /// [`DepthwiseTaps::Grouped`] vector, whose padded plane holds unsigned bytes (signed
    /// inputs flipped to `x + 128`). The default is the scalar definition, for instruction
    /// sets without a vector form (never reached: their [`Isa::GROUPED`] is false).
    ///
    /// # Safety
    /// As the trait's; and every group's sixteen bytes from each half's start are within
    /// `padded`.
    unsafe fn grouped<const WHOLE: bool>(
        offsets: &[usize],
        words: &[i32],
        padded: &[u8],
        gather: &PairedGather,
    ) -> [i32; 8] {
        grouped_definition(Self::ROWS, offsets, words, padded, gather)
    }

    /// Whether [`Isa::quads`] is a vector kernel (a three-wide depthwise kernel's channels
    /// whose weights allow it then sum a kernel row per multiply-add, [`QuadTaps`]).
    const QUADS: bool = false;

    /// [`Isa::grouped`] for [`QuadTaps`]: each group's four bytes (a kernel row's three taps and
    /// its first again) against a word of four signed weights, summed in pairs then fours
    /// (AVX2's `vpmaddubsw` and `vpmaddwd`), exact for the words [`quad_word`] makes. The
    /// default is the definition (never reached: [`Isa::QUADS`] is false there).
    ///
    /// # Safety
    /// As [`Isa::grouped`]'s.
    unsafe fn quads<const WHOLE: bool>(
        offsets: &[usize],
        words: &[i32],
        padded: &[u8],
        gather: &PairedGather,
    ) -> [i32; 8] {
        grouped_definition(4, offsets, words, padded, gather)
    }
}

/// Each of eight outputs' low byte, output `t` in byte `t` ([`Isa::narrowed`]'s scalar form).
pub(super) fn low_bytes_of(outputs: [i32; 8]) -> u64 {
    outputs
        .iter()
        .rev()
        .fold(0u64, |bytes, &v| (bytes << 8) | u64::from(v as u8))
}

/// A depthwise output channel's offset and requantization, and its vectors.
pub(super) struct ChannelPass<'a, I: Isa> {
    pub(super) first: i32,
    pub(super) scalar: &'a Requantizer,
    pub(super) lanes: &'a I::Lanes,
    pub(super) taps: DepthwiseTaps<'a>,
}

/// How a depthwise channel's vectors sum their taps.
#[derive(Clone, Copy)]
pub(super) enum DepthwiseTaps<'a> {
    /// One tap per multiply ([`Isa::taps`]): eight outputs of a [`Gather`] per vector.
    Single {
        plan: TapPlan<'a>,
        gathers: &'a [Gather],
    },
    /// [`Isa::ROWS`] neighbouring taps of a kernel row per multiply-add ([`Isa::grouped`]):
    /// group `i` at `offsets[i]` from an output's first tap, its weights `words[i]` (packed
    /// as [`Channels::words`]); `whole` when every gather reads one sixteen-byte window.
    Grouped {
        offsets: &'a [usize],
        words: &'a [i32],
        gathers: &'a [PairedGather],
        whole: bool,
    },
    /// A kernel row of three taps per pair of multiply-adds ([`Isa::quads`], [`QuadTaps`]):
    /// row `i` at `offsets[i]`, its word `words[i]`.
    Quads {
        offsets: &'a [usize],
        words: &'a [i32],
        gathers: &'a [PairedGather],
        whole: bool,
    },
}

/// Up to eight outputs of a depthwise channel, in two halves of up to four (lanes 0–3 and
/// 4–7): outputs `to..to + lens[0]`, then `lens[1]` more. Each half reads sixteen bytes from
/// `starts[h]` (plus a tap group's offset); `control` places, in each output's 32-bit lane,
/// its group's `ROWS` tap bytes (`dw` apart) at one per `4 / ROWS` bytes, the other bytes
/// `0x80` (zero): int16 pairs for `vpmaddwd`, byte fours for `vpdpbusd`.
#[derive(Clone, Copy)]
pub(super) struct PairedGather {
    pub(super) starts: [usize; 2],
    pub(super) to: usize,
    pub(super) lens: [usize; 2],
    pub(super) control: [u8; 32],
}

/// The [`PairedGather`]s of a depthwise step's `oh × ow` outputs on a padded plane `pw` wide,
/// `stride` apart, for tap groups of `taps` taps `dw` apart packed `rows` to a lane, and
/// whether each reads one window: the next eight outputs share one when their first taps lie
/// within `16 − (taps − 1)·dw` bytes of the first's (both halves then start there); else each
/// half takes the next outputs while it has fewer than four and theirs lie so near its first.
/// `None` when a group's taps span more than sixteen.
pub(super) fn paired_gathers(
    [oh, ow]: [usize; 2],
    [sh, sw]: [usize; 2],
    pw: usize,
    [rows, taps, dw]: [usize; 3],
) -> Option<(Vec<PairedGather>, bool)> {
    let reach = taps.checked_sub(1)?.checked_mul(dw)?;
    let limit = 15usize.checked_sub(reach)?;
    let per_tap = 4 / rows.clamp(1, 4);
    let count = oh * ow;
    let at = |p: usize| (p / ow) * sh * pw + (p % ow) * sw;
    let mut gathers = Vec::with_capacity(count.div_ceil(8));
    let mut every_whole = true;
    let mut p = 0;
    while p < count {
        let mut gather = PairedGather {
            starts: [at(p); 2],
            to: p,
            lens: [0; 2],
            control: [0x80; 32],
        };
        let next = (p..count.min(p + 8)).map(at);
        let whole = next.clone().all(|a| a - gather.starts[0] <= limit);
        every_whole &= whole;
        for half in 0..2 {
            if p >= count {
                break;
            }
            let start = if whole { gather.starts[0] } else { at(p) };
            gather.starts[half] = start;
            while gather.lens[half] < 4 && p < count {
                let offset = at(p) - start;
                if offset > limit {
                    break;
                }
                let lane = 4 * half + gather.lens[half];
                for j in 0..taps.min(rows) {
                    if let Some(slot) = gather.control.get_mut(4 * lane + j * per_tap) {
                        *slot = (offset + j * dw) as u8;
                    }
                }
                gather.lens[half] += 1;
                p += 1;
            }
        }
        gathers.push(gather);
    }
    Some((gathers, every_whole))
}

/// [`Isa::grouped`]'s definition, output by output (`rows` taps to a word: int8 fours or
/// int16 pairs; the padded plane's bytes unsigned).
pub(super) fn grouped_definition(
    rows: usize,
    offsets: &[usize],
    words: &[i32],
    padded: &[u8],
    gather: &PairedGather,
) -> [i32; 8] {
    let per_tap = 4 / rows.clamp(1, 4);
    let mut sums = [0i32; 8];
    for (lane, sum) in sums.iter_mut().enumerate() {
        let start = gather.starts.get(lane / 4).copied().unwrap_or(0);
        for (&offset, &word) in offsets.iter().zip(words) {
            let bytes = word.to_le_bytes();
            for j in 0..rows {
                let index = gather.control.get(4 * lane + j * per_tap).copied();
                let Some(index) = index.filter(|&i| i < 16) else {
                    continue;
                };
                let x = padded.get(start + offset + index as usize).copied();
                let w = match rows {
                    4 => bytes.get(j).map(|&b| b as i8 as i32),
                    _ => bytes
                        .get(2 * j..2 * j + 2)
                        .map(|b| i16::from_le_bytes([b[0], b[1]]) as i32),
                };
                *sum = sum.wrapping_add(x.unwrap_or(0) as i32 * w.unwrap_or(0));
            }
        }
    }
    sums
}

/// Up to eight outputs of a depthwise channel, `to..to + len`: output `to + t` reads its first
/// tap at `padded[start + control[t]]` (`0x80` past `len`). Outputs whose first taps lie within
/// sixteen padded bytes share a vector: eight of a stride-1 or stride-2 row, rows narrower than
/// eight together; one load and one byte shuffle per tap, whatever the geometry.
#[derive(Clone, Copy)]
pub(super) struct Gather {
    pub(super) start: usize,
    pub(super) to: usize,
    pub(super) len: usize,
    pub(super) control: [u8; 16],
}

/// The vectors of a depthwise step's `oh × ow` outputs on a padded plane `pw` wide, `stride`
/// apart, in output order: each takes the next outputs while there are fewer than eight and
/// their first taps lie within sixteen bytes of its first.
pub(super) fn depthwise_gathers(
    oh: usize,
    ow: usize,
    [sh, sw]: [usize; 2],
    pw: usize,
) -> Vec<Gather> {
    let count = oh * ow;
    let at = |[oy, ox]: [usize; 2]| oy * sh * pw + ox * sw;
    let mut gathers = Vec::with_capacity(count.div_ceil(8));
    // The vector's first output, and its row and column; then those of the output being added.
    let (mut to, mut first) = (0, [0, 0]);
    while to < count {
        let start = at(first);
        let mut gather = Gather {
            start,
            to,
            len: 0,
            control: [0x80; 16],
        };
        let mut next = first;
        for (t, slot) in gather
            .control
            .iter_mut()
            .take(8.min(count - to))
            .enumerate()
        {
            match u8::try_from(at(next) - start) {
                Ok(offset) if offset < 16 => *slot = offset,
                _ => break,
            }
            gather.len = t + 1;
            next = if next[1] + 1 >= ow {
                [next[0] + 1, 0]
            } else {
                [next[0], next[1] + 1]
            };
        }
        (to, first) = (to + gather.len, next);
        gathers.push(gather);
    }
    gathers
}

/// A depthwise channel's outputs (`out`, one per output position): for each of the channel's
/// vectors, sums over the taps, offset, requantized. Each instruction set's [`Isa::pass`]
/// inlines this, so its taps and requantization inline too.
///
/// # Safety
/// The CPU has `I`'s features; every tap (group) of every vector reads sixteen bytes within
/// `padded`.
#[inline(always)]
pub(super) unsafe fn depthwise_pass<I: Isa, const SIGNED: bool>(
    padded: &[u8],
    channel: &ChannelPass<'_, I>,
    out: &mut [u8],
) {
    match channel.taps {
        // The depthwise kernel of nearly every network (3×3) with its taps unrolled.
        DepthwiseTaps::Single { plan, gathers } => match plan.exactly::<9>() {
            Some(nine) => vectors::<I, SIGNED>(&nine, gathers, padded, channel, out),
            None => vectors::<I, SIGNED>(&plan, gathers, padded, channel, out),
        },
        // 3×3 in groups: three of four taps (VNNI), six of two (AVX2).
        DepthwiseTaps::Grouped {
            offsets,
            words,
            gathers,
            whole,
        } => match (offsets.len(), words.len(), whole) {
            (3, 3, true) => {
                paired_fixed::<I, 3, false>(offsets, words, gathers, padded, channel, out)
            }
            (6, 6, true) => {
                paired_fixed::<I, 6, false>(offsets, words, gathers, padded, channel, out)
            }
            (_, _, true) => {
                paired_vectors::<I, true, false>(offsets, words, gathers, padded, channel, out)
            }
            _ => paired_vectors::<I, false, false>(offsets, words, gathers, padded, channel, out),
        },
        // 3×3 by rows: three pairs of multiply-adds (AVX2, where the weights allow).
        DepthwiseTaps::Quads {
            offsets,
            words,
            gathers,
            whole,
        } => match (offsets.len(), words.len(), whole) {
            (3, 3, true) => {
                paired_fixed::<I, 3, true>(offsets, words, gathers, padded, channel, out)
            }
            (_, _, true) => {
                paired_vectors::<I, true, true>(offsets, words, gathers, padded, channel, out)
            }
            _ => paired_vectors::<I, false, true>(offsets, words, gathers, padded, channel, out),
        },
    }
}

/// [`paired_vectors`] of `N` whole-window groups, their offsets and words copied into local
/// arrays first: kept in registers across the vectors, where slices were read again for
/// every vector (the output stores might have changed them).
///
/// # Safety
/// As [`depthwise_pass`]'s.
#[inline(always)]
pub(super) unsafe fn paired_fixed<I: Isa, const N: usize, const QUADS: bool>(
    offsets: &[usize],
    words: &[i32],
    gathers: &[PairedGather],
    padded: &[u8],
    channel: &ChannelPass<'_, I>,
    out: &mut [u8],
) {
    let (Ok(offsets), Ok(words)) = (<[usize; N]>::try_from(offsets), <[i32; N]>::try_from(words))
    else {
        return;
    };
    // SAFETY: the caller's.
    unsafe { paired_vectors::<I, true, QUADS>(&offsets, &words, gathers, padded, channel, out) }
}

/// [`depthwise_pass`]'s loop over single-tap vectors.
///
/// # Safety
/// As [`depthwise_pass`]'s.
#[inline(always)]
pub(super) unsafe fn vectors<I: Isa, const SIGNED: bool>(
    plan: &TapPlan<'_>,
    gathers: &[Gather],
    padded: &[u8],
    channel: &ChannelPass<'_, I>,
    out: &mut [u8],
) {
    for gather in gathers {
        // SAFETY: the caller's bounds.
        let mut sums = unsafe { I::taps::<SIGNED>(plan, padded, gather) };
        // A loop, not `array::map`: its closure could be left out of line, built apart from
        // the instruction set (a call per eight outputs).
        offset_all(&mut sums, channel.first);
        // SAFETY: the caller's.
        let bytes = unsafe { I::narrowed(channel.lanes, channel.scalar, sums) }.to_le_bytes();
        // A whole vector as one store; a part of one byte by byte (a copy of a length not
        // known here would be a library call).
        match out.get_mut(gather.to..gather.to + 8) {
            Some(slots) if gather.len == 8 => slots.copy_from_slice(&bytes),
            _ => {
                let slots = out.iter_mut().skip(gather.to).take(gather.len);
                for (slot, &r) in slots.zip(&bytes) {
                    *slot = r;
                }
            }
        }
    }
}

/// [`depthwise_pass`]'s loop over grouped vectors ([`Isa::quads`] with `QUADS`, else
/// [`Isa::grouped`]).
///
/// # Safety
/// As [`depthwise_pass`]'s.
#[inline(always)]
pub(super) unsafe fn paired_vectors<I: Isa, const WHOLE: bool, const QUADS: bool>(
    offsets: &[usize],
    words: &[i32],
    gathers: &[PairedGather],
    padded: &[u8],
    channel: &ChannelPass<'_, I>,
    out: &mut [u8],
) {
    let mut rest = gathers;
    loop {
        match rest {
            // Two whole vectors of consecutive outputs: narrowed together, one store.
            [first, second, tail @ ..]
                if first.lens == [4, 4] && second.lens == [4, 4] && second.to == first.to + 8 =>
            {
                // SAFETY: the caller's (both).
                let sums = unsafe {
                    [
                        paired_sums::<I, WHOLE, QUADS>(offsets, words, padded, channel, first),
                        paired_sums::<I, WHOLE, QUADS>(offsets, words, padded, channel, second),
                    ]
                };
                // SAFETY: the caller's.
                let bytes = unsafe { I::narrowed_two(channel.lanes, channel.scalar, sums) };
                if let Some(slots) = out.get_mut(first.to..first.to + 16) {
                    slots.copy_from_slice(&bytes);
                }
                rest = tail;
            }
            [gather, tail @ ..] => {
                // SAFETY: the caller's (both).
                let sums = unsafe {
                    paired_sums::<I, WHOLE, QUADS>(offsets, words, padded, channel, gather)
                };
                let bytes =
                    unsafe { I::narrowed(channel.lanes, channel.scalar, sums) }.to_le_bytes();
                match out.get_mut(gather.to..gather.to + 8) {
                    Some(slots) if gather.lens == [4, 4] => slots.copy_from_slice(&bytes),
                    _ => {
                        let [low, high] = gather.lens;
                        let lanes = bytes
                            .iter()
                            .take(low)
                            .chain(bytes.iter().skip(4).take(high));
                        for (slot, &r) in out.iter_mut().skip(gather.to).zip(lanes) {
                            *slot = r;
                        }
                    }
                }
                rest = tail;
            }
            [] => break,
        }
    }
}

/// A grouped vector's sums ([`Isa::quads`] with `QUADS`, else [`Isa::grouped`]) plus its
/// channel's offset.
///
/// # Safety
/// As [`depthwise_pass`]'s.
#[inline(always)]
pub(super) unsafe fn paired_sums<I: Isa, const WHOLE: bool, const QUADS: bool>(
    offsets: &[usize],
    words: &[i32],
    padded: &[u8],
    channel: &ChannelPass<'_, I>,
    gather: &PairedGather,
) -> [i32; 8] {
    // SAFETY: the caller's bounds.
    let mut sums = unsafe {
        match QUADS {
            true => I::quads::<WHOLE>(offsets, words, padded, gather),
            false => I::grouped::<WHOLE>(offsets, words, padded, gather),
        }
    };
    offset_all(&mut sums, channel.first);
    sums
}

#[cfg(test)]
std::thread_local! {
    /// The depthwise channels set to run by [`QuadTaps`] on this thread (counted for tests).
    pub(super) static QUAD_CHANNELS: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// The dispatch by geometry, inlined into each instruction set's entry point.
#[inline(always)]
pub(super) fn qconv_with<I: Isa, X: QuantInt, Y: QuantInt>(
    c: &QConv,
    d: &ConvDims,
    ops: &Operands<'_>,
    x: &[X],
    y: &mut [Y],
    scratch: &mut [u8],
) -> Option<bool> {
    let group = c.group.max(1);
    let depthwise = d.c / group == 1 && group > 1;
    let bytes: &[u8] = bytemuck::cast_slice(x);
    let signed = X::MIN < 0;
    let key = StepKey::new(c, d, ops, signed);
    if c.is_pointwise() {
        return pointwise::<I, Y>(key, ops, d, bytes, signed, y);
    }
    if scratch.len() < scratch_needed(c, d) {
        return Some(false);
    }
    if depthwise {
        depthwise_conv::<I, Y>(key, c, ops, d, bytes, signed, y)
    } else {
        columns::<I, Y>(key, c, ops, d, bytes, signed, y)
    }
}

/// The portable kernels' scratch bytes for a convolution that is not pointwise (a padded
/// plane, or one int16 column): required of the SIMD kernels too, so that every build refuses
/// the same steps, whether or not its kernel reads the scratch.
pub(super) fn scratch_needed(c: &QConv, d: &ConvDims) -> usize {
    let group = c.group.max(1);
    let [kh, kw] = c.window.kernel;
    if d.c / group == 1 && group > 1 {
        let [sh, sw] = c.window.stride;
        let [dh, dw] = c.window.dilation;
        let span = |out: usize, s: usize, k: usize, dil: usize| {
            out.saturating_sub(1) * s + k.saturating_sub(1) * dil + 1
        };
        span(d.oh, sh, kh, dh) * span(d.ow, sw, kw, dw)
    } else {
        2 * (d.c / group) * kh * kw
    }
}

/// A step's weights and requantization, and its context (the state its kernels keep).
pub(super) struct Operands<'a> {
    pub(super) ctx: StepContext<'a>,
    pub(super) w: &'a [i8],
    pub(super) bias: &'a [i32],
    pub(super) requant: &'a [i32],
    pub(super) q: &'a Requantize,
}

impl Operands<'_> {
    pub(super) fn rescaler(&self, channel: usize) -> Requantizer {
        Requantizer::of_channel(self.requant, channel, self.q)
    }
}

/// What a step's kept state (its context's `StepMemo`) is built from: the convolution, its sizes, its
/// operands (by address and length: a prepared plan's weights do not move) and the input's
/// signedness. The instruction set is the state's type.
#[derive(Clone, Copy, PartialEq)]
pub(super) struct StepKey {
    pub(super) conv: QConv,
    pub(super) dims: ConvDims,
    pub(super) operands: [(usize, usize); 3],
    pub(super) signed: bool,
}

impl StepKey {
    pub(super) fn new(conv: &QConv, dims: &ConvDims, ops: &Operands<'_>, signed: bool) -> StepKey {
        let at = |bytes: &[u8]| (bytes.as_ptr() as usize, bytes.len());
        StepKey {
            conv: *conv,
            dims: *dims,
            operands: [
                at(bytemuck::cast_slice(ops.w)),
                at(bytemuck::cast_slice(ops.bias)),
                at(bytemuck::cast_slice(ops.requant)),
            ],
            signed,
        }
    }
}

/// `bias − zx · Σ w`: what a channel's sum of raw products is offset by.
pub(super) fn base(bias: i32, zx: i32, weights: &[i8]) -> i32 {
    let sum = weights.iter().fold(0i32, |s, &v| s.wrapping_add(v as i32));
    bias.wrapping_sub(zx.wrapping_mul(sum))
}

/// Every output channel's weights in words, offset and requantization, worked out once per
/// step.
pub(super) struct Channels<I: Isa> {
    /// Channel `o`'s weights, [`Isa::ROWS`] rows per word (little-endian: the lowest part is
    /// the first row): int16 pairs or int8 fours; zeros past the row count. `units` per channel.
    pub(super) words: Vec<i32>,
    pub(super) units: usize,
    /// The same words for each whole group of eight channels from channel 0, interleaved
    /// `[group][unit][8]`: a unit's eight broadcasts then read one line at constant offsets
    /// from one pointer (from eight rows `units` apart, the address arithmetic had cost as many
    /// instructions as the multiply-adds).
    pub(super) eights: Vec<i32>,
    /// `bias − (zx + offset) · Σ w`: what the channel's sum of raw products is offset by.
    pub(super) bases: Vec<i32>,
    pub(super) scalar: Vec<Requantizer>,
    pub(super) lanes: Vec<I::Lanes>,
}

impl<I: Isa> Channels<I> {
    /// From weight rows of `k` values, one per output channel, for inputs of the signedness.
    #[inline(always)]
    pub(super) fn new(ops: &Operands<'_>, k: usize, channels: usize, signed: bool) -> Channels<I> {
        let units = k.div_ceil(I::ROWS);
        let rows = ops.w.chunks_exact(k.max(1)).take(channels);
        let mut words = std::vec![0i32; channels * units];
        let zero = ops.q.input_zero.wrapping_add(I::input_offset(signed));
        let bases = rows
            .clone()
            .enumerate()
            .map(|(o, row)| base(ops.bias.get(o).copied().unwrap_or(0), zero, row))
            .collect();
        if I::ROWS == 4 {
            let bytes: &mut [i8] = bytemuck::cast_slice_mut(&mut words);
            for (row, out) in rows.zip(bytes.chunks_exact_mut(4 * units)) {
                if let Some(out) = out.get_mut(..row.len()) {
                    out.copy_from_slice(row);
                }
            }
        } else {
            let halves: &mut [i16] = bytemuck::cast_slice_mut(&mut words);
            for (row, out) in rows.zip(halves.chunks_exact_mut(2 * units)) {
                for (half, &v) in out.iter_mut().zip(row) {
                    *half = v as i16;
                }
            }
        }
        let mut eights = std::vec![0i32; channels / 8 * 8 * units];
        for (g, group) in eights.chunks_exact_mut(8 * units).enumerate() {
            for (u, line) in group.chunks_exact_mut(8).enumerate() {
                for (j, word) in line.iter_mut().enumerate() {
                    *word = words[(8 * g + j) * units + u];
                }
            }
        }
        let scalar: Vec<Requantizer> = (0..channels).map(|o| ops.rescaler(o)).collect();
        // SAFETY: only reached from an instruction set's entry point, on a CPU that has it.
        let lanes = scalar.iter().map(|s| unsafe { I::lanes(s) }).collect();
        Channels {
            words,
            units,
            eights,
            bases,
            scalar,
            lanes,
        }
    }

    /// Where channels `o..o + B`'s words start and how far apart they lie, `[per channel, per
    /// unit]`: in [`Channels::eights`] for eight or four channels within a whole group of
    /// eight, else in [`Channels::words`] (`None` past the channels).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the x86-64 products read these
    pub(super) fn lines<const B: usize>(&self, o: usize) -> Option<(*const i32, [usize; 2])> {
        let units = self.units;
        if 8 % B == 0 && B > 1 && o.is_multiple_of(B) {
            // Channels `o..o + B` within one whole group of eight (B of 8 or 4).
            let group = o / 8;
            let line = self
                .eights
                .get(group * 8 * units + o % 8..(group + 1) * 8 * units);
            if let Some(line) = line {
                return Some((line.as_ptr(), [1, 8]));
            }
        }
        let first = self.words.get(o * units..(o + B) * units)?;
        Some((first.as_ptr(), [units, 1]))
    }

    /// Channel `o`'s weights as int16, one per row (`2·units` of them; [`Isa::ROWS`] 2).
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))] // the NEON products read these
    pub(super) fn halves(&self, o: usize) -> &[i16] {
        let words = self.words.get(o * self.units..(o + 1) * self.units);
        bytemuck::cast_slice(words.unwrap_or(&[]))
    }
}

/// Where a block product reads and writes: row `i` of the eight positions from `at` is
/// `x[row(i) + at ..][..8]`, `row(i)` being `i · stride` or `offsets[i]`; their outputs go to
/// `y[o·y_stride + to[t]]` for output channel `o` (`to[t] == SKIP`: a position that is not an
/// output).
pub(super) struct Block<'a> {
    pub(super) x: &'a [u8],
    pub(super) rows: Rows<'a>,
    pub(super) at: usize,
    /// Where the eight positions' bytes lie in a row when they are not contiguous: each row
    /// is then sixteen bytes from `at`, position `t` at `gather[t]` (strided windows).
    pub(super) gather: Option<&'a [u8; 16]>,
    pub(super) y_stride: usize,
    pub(super) to: [usize; 8],
}

/// Where a [`Block`]'s rows start in its `x`.
#[derive(Clone, Copy)]
pub(super) enum Rows<'a> {
    /// `k` rows, `stride` apart (input channels, unfolded windows).
    Strided { k: usize, stride: usize },
    /// One offset per row (taps read in place from a padded input).
    Table(&'a [usize]),
}

impl Rows<'_> {
    /// The number of rows and the farthest one's offset.
    pub(super) fn extent(&self) -> (usize, usize) {
        match *self {
            Rows::Strided { k, stride } => (k, k.saturating_sub(1) * stride),
            Rows::Table(offsets) => (offsets.len(), offsets.iter().copied().max().unwrap_or(0)),
        }
    }

    /// Row `i`'s offset.
    #[inline(always)]
    pub(super) fn offset(&self, i: usize) -> usize {
        match *self {
            Rows::Strided { stride, .. } => i * stride,
            Rows::Table(offsets) => offsets.get(i).copied().unwrap_or(0),
        }
    }
}

/// A [`Block`] position that is not an output (past the row on a padded grid).
pub(super) const SKIP: usize = usize::MAX;

/// The block product for channels `from..to`: the block packed once (into `units`, grown as
/// needed), then eight channels at a time, four, then one: raw sums, offset, requantized and
/// written; nothing when a row would read past `x` (which the callers' shapes rule out).
#[inline(always)]
pub(super) fn product_channels<I: Isa, Y: QuantInt>(
    signed: bool,
    ch: &Channels<I>,
    block: &Block<'_>,
    [from, to]: [usize; 2],
    units: &mut Vec<[u8; 32]>,
    y: &mut [Y],
) {
    let (k, farthest) = block.rows.extent();
    let reach = farthest + block.at + if block.gather.is_some() { 16 } else { 8 };
    let rows_ok = k.div_ceil(I::ROWS) == ch.units && reach <= block.x.len();
    if !rows_ok || to * ch.units > ch.words.len() || to > ch.bases.len() {
        return;
    }
    units.resize(ch.units, [0; 32]);
    // SAFETY: every row's eight bytes are within `x` (`reach`); an instruction set's entry point.
    unsafe {
        if signed {
            I::pack::<true>(block, units);
        } else {
            I::pack::<false>(block, units);
        }
    }
    let mut o = from;
    while o < to {
        // SAFETY: channels below `to` hold `ch.units` words each (checked above).
        unsafe {
            match to - o {
                8.. => store::<I, 8, Y>(ch, block, o, I::product::<8>(ch, units, o), y),
                4..=7 => store::<I, 4, Y>(ch, block, o, I::product::<4>(ch, units, o), y),
                _ => store::<I, 1, Y>(ch, block, o, I::product::<1>(ch, units, o), y),
            }
        }
        o += match to - o {
            8.. => 8,
            4..=7 => 4,
            _ => 1,
        };
    }
}

/// A block's raw sums for channels `o..o + B`: offset by each channel's base, requantized and
/// written where the block says.
#[inline(always)]
pub(super) fn store<I: Isa, const B: usize, Y: QuantInt>(
    ch: &Channels<I>,
    block: &Block<'_>,
    o: usize,
    sums: [[i32; 8]; B],
    y: &mut [Y],
) {
    for (j, sums) in sums.iter().enumerate() {
        let (Some(&base), Some(lanes), Some(scalar)) = (
            ch.bases.get(o + j),
            ch.lanes.get(o + j),
            ch.scalar.get(o + j),
        ) else {
            return;
        };
        let mut sums = *sums;
        offset_all(&mut sums, base);
        // SAFETY: only reached from an instruction set's entry point, on a CPU that has it.
        let out = unsafe { I::requantize(lanes, scalar, sums) };
        let row = (o + j) * block.y_stride;
        let [first, last] = [block.to[0], block.to[7]];
        if first != SKIP && last == first + 7 {
            // Eight outputs in a row (every block but those across a padded grid's row end).
            if let Some(slots) = y.get_mut(row + first..row + first + 8) {
                for (slot, v) in slots.iter_mut().zip(out) {
                    *slot = Y::narrow(v);
                }
            }
            continue;
        }
        for (&to, v) in block.to.iter().zip(out) {
            if to != SKIP {
                if let Some(slot) = y.get_mut(row + to) {
                    *slot = Y::narrow(v);
                }
            }
        }
    }
}

/// Output positions `p0..p0 + 8` written contiguously from `y_at`.
pub(super) fn contiguous(y_at: usize) -> [usize; 8] {
    core::array::from_fn(|t| y_at + t)
}

/// Pointwise convolution, `Y[o, p] = bias[o] − zx·Σw[o] + Σ_i W[o, i]·X[i, p]`: the input
/// channels are the rows of the block product, eight positions at a time (the last eight
/// overlapping the block before when the plane is not a multiple of eight: those outputs are
/// computed twice, identically). `None` for a plane of fewer than eight positions.
#[inline(always)]
pub(super) fn pointwise<I: Isa, Y: QuantInt>(
    key: StepKey,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[u8],
    signed: bool,
    y: &mut [Y],
) -> Option<bool> {
    let (c, oc, plane) = (d.c, d.oc, d.h * d.w);
    if !operands_fit(ops, d, c, [x.len(), y.len()]) {
        return Some(false);
    }
    if plane < 8 || c == 0 {
        return None;
    }
    let build = || ProductState::<I> {
        channels: Channels::new(ops, c, oc, signed),
        units: Vec::new(),
    };
    let mut kept = ops.ctx.take(key, build);
    let ProductState { channels, units } = kept.state();
    for b in 0..d.n {
        let xb = &x[b * c * plane..(b + 1) * c * plane];
        let yb = &mut y[b * oc * plane..(b + 1) * oc * plane];
        for start in 0..plane.div_ceil(8) {
            let p0 = (8 * start).min(plane - 8);
            let block = Block {
                x: xb,
                rows: Rows::Strided {
                    k: c,
                    stride: plane,
                },
                at: p0,
                gather: None,
                y_stride: plane,
                to: contiguous(p0),
            };
            product_channels(signed, channels, &block, [0, oc], units, yb);
        }
    }
    ops.ctx.keep(kept);
    Some(true)
}

/// Whether a convolution's operands hold what its sizes say: `x` and `y` of `x_len` and
/// `y_len` elements, weights of `k` values per output channel.
pub(super) fn operands_fit(
    ops: &Operands<'_>,
    d: &ConvDims,
    k: usize,
    [x_len, y_len]: [usize; 2],
) -> bool {
    x_len >= d.n * d.c * d.h * d.w
        && y_len >= d.n * d.oc * d.oh * d.ow
        && ops.w.len() >= d.oc * k
        && ops.bias.len() >= d.oc
}

/// A pointwise step's kept state: its channels, and the block's packed rows.
pub(super) struct ProductState<I: Isa> {
    pub(super) channels: Channels<I>,
    pub(super) units: Vec<[u8; 32]>,
}

/// Regular and grouped convolution, on a zero-point-padded copy of the group's input planes
/// whose taps the block product reads in place. Stride 1: each tap of eight neighbouring
/// positions of the padded width is eight contiguous bytes at a fixed offset (positions past
/// an output row are computed and dropped). Other strides, and planes of fewer than eight
/// positions: up to eight outputs' bytes gathered from sixteen per tap ([`depthwise_gathers`]).
#[inline(always)]
pub(super) fn columns<I: Isa, Y: QuantInt>(
    key: StepKey,
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    bytes: &[u8],
    signed: bool,
    y: &mut [Y],
) -> Option<bool> {
    let group = c.group.max(1);
    let (icg, ocg) = (d.c / group, d.oc / group);
    let [kh, kw] = c.window.kernel;
    let k = icg * kh * kw;
    let positions = d.oh * d.ow;
    if !operands_fit(ops, d, k, [bytes.len(), y.len()]) {
        return Some(false);
    }
    if positions == 0 || k == 0 || d.h * d.w == 0 {
        return None;
    }
    let [ph, pw] = padded_extent(c, d, icg)?;
    let [dh, dw] = c.window.dilation;
    let [sh, sw] = c.window.stride;
    // Stride 1 on at least eight positions of the padded width: eight contiguous bytes per
    // tap. Otherwise the outputs' bytes are gathered from sixteen per tap.
    let grid = (d.oh - 1) * pw + d.ow;
    let contiguous_taps = [sh, sw] == [1, 1] && grid >= 8;
    let build = || {
        let zero = c.requantize.input_zero as u8;
        let gathers = if contiguous_taps {
            Vec::new()
        } else {
            depthwise_gathers(d.oh, d.ow, [sh, sw], pw)
        };
        let reading = reading_of(contiguous_taps, [k, positions, d.ow], gathers.len());
        let unfold_whole = reading == Reading::Matrix;
        ColumnsState::<I> {
            product: ProductState {
                channels: Channels::new(ops, k, d.oc, signed),
                units: Vec::new(),
            },
            offsets: window_taps(icg, [kh, kw], [dh, dw], [ph, pw]),
            padded: std::vec![zero; icg * ph * pw + 16],
            expansion: Expansion::new(d, c.window.pads, [ph, pw], zero),
            gathers,
            unfolded: match reading {
                Reading::Unfolded => std::vec![0u8; k * 8],
                _ => Vec::new(),
            },
            matrix: if unfold_whole {
                std::vec![0u8; k * positions]
            } else {
                Vec::new()
            },
            windows: if unfold_whole {
                Windows::new([d.oh, d.ow], [sh, sw], pw)
            } else {
                Windows::new([0, 0], [sh, sw], pw)
            },
            reading,
        }
    };
    let mut kept = ops.ctx.take(key, build);
    {
        let ColumnsState {
            product:
                ProductState {
                    channels: ch,
                    units,
                },
            offsets,
            padded,
            expansion,
            gathers,
            unfolded,
            matrix,
            windows,
            reading,
        } = kept.state();
        for b in 0..d.n {
            let yb = &mut y[b * d.oc * positions..(b + 1) * d.oc * positions];
            for g in 0..group {
                let xg = &bytes[(b * d.c + g * icg) * d.h * d.w..][..icg * d.h * d.w];
                let planes = xg
                    .chunks_exact(d.h * d.w)
                    .zip(padded.chunks_exact_mut(ph * pw));
                for (plane, out) in planes {
                    pad_interior::<I>(expansion.as_ref(), plane, d, c.window.pads, out, pw, 0);
                }
                if *reading == Reading::Matrix {
                    let zero = c.requantize.input_zero as u8;
                    gather_matrix(matrix, padded, offsets, windows, zero);
                }
                let blocks = GroupBlocks {
                    signed,
                    ch,
                    channels: [g * ocg, (g + 1) * ocg],
                    padded,
                    offsets,
                    gathers,
                    matrix,
                    conv: c,
                    dims: d,
                    xg,
                    sizes: [k, positions, grid, pw],
                };
                // Each reading's loop a function of its own, built for the instruction set:
                // inlined together here, one reading's blocks had lost a seventh to a third
                // to the others' code (register allocation).
                // SAFETY: an instruction set's entry point.
                unsafe {
                    match *reading {
                        Reading::InPlace => I::blocks::<IN_PLACE, Y>(&blocks, units, unfolded, yb),
                        Reading::Gathered => I::blocks::<GATHERED, Y>(&blocks, units, unfolded, yb),
                        Reading::Matrix => I::blocks::<MATRIX, Y>(&blocks, units, unfolded, yb),
                        Reading::Unfolded => I::blocks::<UNFOLDED, Y>(&blocks, units, unfolded, yb),
                    }
                }
            }
        }
    }
    ops.ctx.keep(kept);
    Some(true)
}

/// A regular or grouped step's kept state: its channels, tap offsets, padded planes (their
/// borders the zero point, written once), padding shuffles, gathers and unfolded block.
pub(super) struct ColumnsState<I: Isa> {
    pub(super) product: ProductState<I>,
    pub(super) offsets: Vec<usize>,
    pub(super) padded: Vec<u8>,
    pub(super) expansion: Option<Expansion>,
    pub(super) gathers: Vec<Gather>,
    pub(super) unfolded: Vec<u8>,
    /// The `[k, positions]` matrix of every window ([`gather_matrix`]), when gathered whole,
    /// and where the windows lie in the padded planes.
    pub(super) matrix: Vec<u8>,
    pub(super) windows: Windows,
    pub(super) reading: Reading,
}

/// A group's blocks of a regular convolution: what [`group_blocks`] reads and writes.
pub(super) struct GroupBlocks<'a, I: Isa> {
    pub(super) signed: bool,
    pub(super) ch: &'a Channels<I>,
    /// The group's output channels, `from..to`.
    pub(super) channels: [usize; 2],
    pub(super) padded: &'a [u8],
    pub(super) offsets: &'a [usize],
    pub(super) gathers: &'a [Gather],
    pub(super) matrix: &'a [u8],
    pub(super) conv: &'a QConv,
    pub(super) dims: &'a ConvDims,
    /// The group's input planes.
    pub(super) xg: &'a [u8],
    /// `[k, positions, grid, pw]`: rows, outputs, the padded grid's positions and width.
    pub(super) sizes: [usize; 4],
}

/// [`Isa::blocks`]'s readings ([`Reading`] as a constant).
pub(super) const IN_PLACE: u8 = 0;
/// See [`IN_PLACE`].
pub(super) const GATHERED: u8 = 1;
/// See [`IN_PLACE`].
pub(super) const MATRIX: u8 = 2;
/// See [`IN_PLACE`].
pub(super) const UNFOLDED: u8 = 3;

/// The block products of a group's blocks read as `READING` says, into `y` (the batch's
/// outputs); `units` and `unfolded` are the packed and unfolded blocks' buffers. Each
/// instruction set's [`Isa::blocks`] inlines this.
#[inline(always)]
pub(super) fn group_blocks<I: Isa, const READING: u8, Y: QuantInt>(
    g: &GroupBlocks<'_, I>,
    units: &mut Vec<[u8; 32]>,
    unfolded: &mut [u8],
    y: &mut [Y],
) {
    let [k, positions, grid, pw] = g.sizes;
    let (signed, ch, channels) = (g.signed, g.ch, g.channels);
    match READING {
        IN_PLACE => {
            for start in 0..grid.div_ceil(8) {
                let j0 = (8 * start).min(grid.saturating_sub(8));
                let to = core::array::from_fn(|t| {
                    let (oy, ox) = ((j0 + t) / pw.max(1), (j0 + t) % pw.max(1));
                    if ox < g.dims.ow {
                        oy * g.dims.ow + ox
                    } else {
                        SKIP
                    }
                });
                let block = Block {
                    x: g.padded,
                    rows: Rows::Table(g.offsets),
                    at: j0,
                    gather: None,
                    y_stride: positions,
                    to,
                };
                product_channels(signed, ch, &block, channels, units, y);
            }
        }
        GATHERED => {
            for gather in g.gathers {
                let block = Block {
                    x: g.padded,
                    rows: Rows::Table(g.offsets),
                    at: gather.start,
                    gather: Some(&gather.control),
                    y_stride: positions,
                    to: core::array::from_fn(|t| if t < gather.len { gather.to + t } else { SKIP }),
                };
                product_channels(signed, ch, &block, channels, units, y);
            }
        }
        MATRIX => {
            for start in 0..positions.div_ceil(8) {
                let p0 = (8 * start).min(positions.saturating_sub(8));
                let block = Block {
                    x: g.matrix,
                    rows: Rows::Strided {
                        k,
                        stride: positions,
                    },
                    at: p0,
                    gather: None,
                    y_stride: positions,
                    to: contiguous(p0),
                };
                product_channels(signed, ch, &block, channels, units, y);
            }
        }
        _ => {
            for start in 0..positions.div_ceil(8) {
                let p0 = (8 * start).min(positions.saturating_sub(8));
                unfold_eight(g.conv, g.dims, g.xg, p0, unfolded);
                let block = Block {
                    x: unfolded,
                    rows: Rows::Strided { k, stride: 8 },
                    at: 0,
                    gather: None,
                    y_stride: positions,
                    to: contiguous(p0),
                };
                product_channels(signed, ch, &block, channels, units, y);
            }
        }
    }
}

/// How a regular convolution's blocks read their windows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    /// Eight contiguous bytes per tap of the padded planes (stride 1 on rows of eight or more).
    InPlace,
    /// From the matrix of every window ([`gather_matrix`]).
    Matrix,
    /// Eight positions' windows unfolded per block ([`unfold_eight`]).
    Unfolded,
    /// Up to eight outputs' bytes gathered from sixteen per tap ([`depthwise_gathers`]).
    Gathered,
}

/// The [`Reading`] of a convolution of `k` rows over `positions` outputs in rows of `ow`,
/// whose gathers would number `gathers`: in place where it can; else the matrix of windows
/// where it is small, or its rows narrower than eight would leave the gathers' lanes empty
/// (measured on DS-CNN's first layer and ResNet-8's strided ones: gathers win on strided rows
/// of eight or more); else unfolded blocks where the gathers would be sparse; else gathers.
pub(super) fn reading_of(
    in_place: bool,
    [k, positions, ow]: [usize; 3],
    gathers: usize,
) -> Reading {
    let sparse = gathers * 3 > positions.div_ceil(8) * 4;
    let matrix = k * positions;
    match () {
        _ if in_place => Reading::InPlace,
        _ if positions < 8 => Reading::Gathered,
        _ if matrix <= MAX_UNFOLDED / 8 || (ow < 8 && matrix <= MAX_UNFOLDED) => Reading::Matrix,
        _ if sparse => Reading::Unfolded,
        _ => Reading::Gathered,
    }
}

/// The most bytes a convolution's matrix of windows may have to be gathered whole: past it,
/// gathering costs more than the block product saves.
pub(super) const MAX_UNFOLDED: usize = 64 << 10;

/// Where a convolution's windows lie in its padded planes: `oh × ow` outputs, `stride` apart on
/// planes `pw` wide; for rows of fewer than sixteen outputs, each output's first tap
/// ([`first_taps`]).
pub(super) struct Windows {
    pub(super) out: [usize; 2],
    pub(super) stride: [usize; 2],
    pub(super) pw: usize,
    pub(super) firsts: Vec<usize>,
}

impl Windows {
    /// The windows of `[oh, ow]` outputs `stride` apart on planes `pw` wide.
    pub(super) fn new(out: [usize; 2], stride: [usize; 2], pw: usize) -> Windows {
        let firsts = if out[1] < 16 {
            first_taps(out, stride, pw)
        } else {
            Vec::new()
        };
        Windows {
            out,
            stride,
            pw,
            firsts,
        }
    }
}

/// Where each of `oh × ow` outputs' first tap lies in a padded plane `pw` wide, `stride` apart.
pub(super) fn first_taps([oh, ow]: [usize; 2], [sh, sw]: [usize; 2], pw: usize) -> Vec<usize> {
    (0..oh * ow)
        .map(|p| (p / ow.max(1)) * sh * pw + (p % ow.max(1)) * sw)
        .collect()
}

/// The `[k, positions]` matrix of a convolution's windows: row `t` holds tap `t`'s byte
/// (`padded[taps[t] + oy·sh·pw + ox·sw]`) for every position `(oy, ox)`, the zero point where
/// an index would pass the planes (which the geometry rules out). Rows of sixteen outputs or
/// more run by run: a copy for stride 1, every other byte of 32 by two SSE2 instructions for
/// stride 2 on x86-64 (byte by byte, VWW's first layer had spent 17 µs gathering its 62 KB);
/// shorter ones position by position from [`first_taps`] (DS-CNN's first layer, rows of five:
/// 2 µs faster so than run by run).
pub(super) fn gather_matrix(
    matrix: &mut [u8],
    padded: &[u8],
    taps: &[usize],
    windows: &Windows,
    zero: u8,
) {
    let Windows {
        out: [oh, ow],
        stride: [sh, sw],
        pw,
        ref firsts,
    } = *windows;
    let positions = (oh * ow).max(1);
    if !firsts.is_empty() {
        for (row, &tap) in matrix.chunks_exact_mut(positions).zip(taps) {
            let source = padded.get(tap..).unwrap_or(&[]);
            for (slot, &first) in row.iter_mut().zip(firsts) {
                *slot = source.get(first).copied().unwrap_or(zero);
            }
        }
        return;
    }
    for (row, &tap) in matrix.chunks_exact_mut(positions).zip(taps) {
        for (oy, run) in row.chunks_exact_mut(ow.max(1)).enumerate() {
            let start = tap + oy * sh * pw;
            let source = padded.get(start..).unwrap_or(&[]);
            gather_run(run, source, sw, zero);
        }
    }
}

/// `run[i] = source[i·stride]` (the zero point past `source`).
#[inline(always)]
pub(super) fn gather_run(run: &mut [u8], source: &[u8], stride: usize, zero: u8) {
    if stride == 1 {
        if let Some(bytes) = source.get(..run.len()) {
            run.copy_from_slice(bytes);
            return;
        }
    }
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))] // only x86-64 runs vectors
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if stride == 2 {
        use core::arch::x86_64::*;
        // Sixteen outputs from 32 bytes while those lie within `source`.
        while done + 16 <= run.len() && 2 * done + 32 <= source.len() {
            // SAFETY: SSE2 (every x86-64 CPU); bytes `2·done..2·done + 32` of `source` and
            // `done..done + 16` of `run` are in bounds (the loop's condition).
            unsafe {
                let at = source.as_ptr().add(2 * done);
                let low = _mm_loadu_si128(at.cast());
                let high = _mm_loadu_si128(at.add(16).cast());
                let even = _mm_set1_epi16(0xff);
                let bytes = _mm_packus_epi16(_mm_and_si128(low, even), _mm_and_si128(high, even));
                _mm_storeu_si128(run.as_mut_ptr().add(done).cast(), bytes);
            }
            done += 16;
        }
    }
    for (i, slot) in run.iter_mut().enumerate().skip(done) {
        *slot = source.get(i * stride).copied().unwrap_or(zero);
    }
}

/// The windows of output positions `p0..p0 + 8` as `[k, 8]` bytes: row `(ci·kh + ky)·kw + kx`
/// holds that tap's input byte for each position, the zero point where it falls in the
/// padding. Eight positions in one output row, of stride 1 or 2, whose tap lies inside the
/// input row copy eight bytes (every other of sixteen for stride 2).
#[inline(always)]
pub(super) fn unfold_eight(c: &QConv, d: &ConvDims, xg: &[u8], p0: usize, block: &mut [u8]) {
    let [kh, kw] = c.window.kernel;
    let [sh, sw] = c.window.stride;
    let [dh, dw] = c.window.dilation;
    let zero = c.requantize.input_zero as u8;
    let ow = d.ow.max(1);
    let plane = d.h * d.w;
    let (oy, ox) = (p0 / ow, p0 % ow);
    let iy0 = (oy * sh).wrapping_sub(c.window.pads[0]);
    let ix0 = (ox * sw).wrapping_sub(c.window.pads[1]);
    let one_row = ox + 8 <= d.ow && (sw == 1 || sw == 2);
    let span = 8 * sw;
    // Each position's window origin (wrapping below zero: outside, as any index past the end).
    let origins: [[usize; 2]; 8] = core::array::from_fn(|t| {
        let (oy, ox) = ((p0 + t) / ow, (p0 + t) % ow);
        [
            (oy * sh).wrapping_sub(c.window.pads[0]),
            (ox * sw).wrapping_sub(c.window.pads[1]),
        ]
    });
    let mut rows = block.chunks_exact_mut(8);
    for ci in 0..xg.len() / plane.max(1) {
        let xp = &xg[ci * plane..(ci + 1) * plane];
        for ky in 0..kh {
            let iy = iy0.wrapping_add(ky * dh);
            let row = (iy < d.h).then(|| &xp[iy * d.w..(iy + 1) * d.w]);
            for kx in 0..kw {
                let Some(out) = rows.next() else {
                    return;
                };
                let at = ix0.wrapping_add(kx * dw);
                let inside = one_row && at < d.w && at + span <= d.w;
                match row {
                    Some(row) if inside => {
                        for (slot, &v) in out.iter_mut().zip(row[at..at + span].iter().step_by(sw))
                        {
                            *slot = v;
                        }
                    }
                    None if one_row => out.fill(zero),
                    _ => {
                        for (slot, origin) in out.iter_mut().zip(&origins) {
                            let iy = origin[0].wrapping_add(ky * dh);
                            let ix = origin[1].wrapping_add(kx * dw);
                            let inside = iy < d.h && ix < d.w;
                            *slot = if inside { xp[iy * d.w + ix] } else { zero };
                        }
                    }
                }
            }
        }
    }
    // Rows past the group's channels (none in a verified plan) read as padding.
    for out in rows {
        out.fill(zero);
    }
}

/// A depthwise output channel's taps: weight `i` reads the padded plane `offsets[i]` bytes
/// after an output's first tap.
#[derive(Clone, Copy)]
pub(super) struct TapPlan<'a> {
    pub(super) weights: &'a [i8],
    pub(super) offsets: &'a [usize],
}

impl<'a> TapPlan<'a> {
    /// Each tap's weight and offset.
    #[inline(always)]
    pub(super) fn taps(&self) -> impl Iterator<Item = (i32, usize)> + 'a {
        let weights = self.weights.iter().map(|&w| w as i32);
        weights.zip(self.offsets.iter().copied())
    }

    /// The same taps when there are exactly `N` (their count then known to the compiler, which
    /// unrolls them and keeps every weight in a register), else `None`.
    #[inline(always)]
    pub(super) fn exactly<const N: usize>(&self) -> Option<TapPlan<'a>> {
        let weights = self.weights.get(..N).filter(|_| self.weights.len() == N)?;
        let offsets = self.offsets.get(..N).filter(|_| self.offsets.len() == N)?;
        Some(TapPlan { weights, offsets })
    }
}

/// The padded-plane offsets of a `[kh, kw]` window's taps, dilated, on a plane `pw` wide.
pub(super) fn tap_offsets(kernel: [usize; 2], dilation: [usize; 2], pw: usize) -> Vec<usize> {
    window_taps(1, kernel, dilation, [1, pw])
}

/// The offsets of a window's taps over `planes` consecutive `[ph, pw]` padded planes, plane by
/// plane, each `[kh, kw]` dilated: row `(ci·kh + ky)·kw + kx` of the unfolded windows.
pub(super) fn window_taps(
    planes: usize,
    [kh, kw]: [usize; 2],
    [dh, dw]: [usize; 2],
    [ph, pw]: [usize; 2],
) -> Vec<usize> {
    (0..planes)
        .flat_map(|ci| {
            (0..kh).flat_map(move |ky| (0..kw).map(move |kx| ci * ph * pw + ky * dh * pw + kx * dw))
        })
        .collect()
}

/// Adds `offset` to each of eight sums, wrapping.
#[inline(always)]
pub(super) fn offset_all(sums: &mut [i32; 8], offset: i32) {
    for s in sums {
        *s = s.wrapping_add(offset);
    }
}

/// The `[height, width]` of a step's zero-point-padded planes (every input position its outputs
/// read, `oh, ow ≥ 1`), or `None` when `planes` of them would be absurdly large (strides or
/// dilations a verified plan allows but no network has: the portable kernel runs those).
pub(super) fn padded_extent(c: &QConv, d: &ConvDims, planes: usize) -> Option<[usize; 2]> {
    let span = |out: usize, stride: usize, k: usize, dilation: usize| {
        let windows = (out.checked_sub(1)?).checked_mul(stride)?;
        windows
            .checked_add((k.checked_sub(1)?).checked_mul(dilation)?)?
            .checked_add(1)
    };
    let [kh, kw] = c.window.kernel;
    let [sh, sw] = c.window.stride;
    let [dh, dw] = c.window.dilation;
    let ph = span(d.oh, sh, kh, dh)?;
    let pw = span(d.ow, sw, kw, dw)?;
    let bytes = ph.checked_mul(pw)?.checked_mul(planes)?;
    (bytes <= 1 << 26).then_some([ph, pw])
}

/// Depthwise convolution, any stride and dilation, on a zero-point-padded copy of each plane
/// (with sixteen bytes of slack, so every vector's load stays inside): output `(oy, ox)` reads
/// the padded plane from `oy·sh·pw + ox·sw` at each tap's offset, and [`depthwise_gathers`]
/// picks up to eight outputs' bytes from one load per tap. `Some(false)` when an operand is too
/// small.
#[inline(always)]
pub(super) fn depthwise_conv<I: Isa, Y: QuantInt>(
    key: StepKey,
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[u8],
    signed: bool,
    y: &mut [Y],
) -> Option<bool> {
    let win = &c.window;
    let [kh, kw] = win.kernel;
    let [sh, sw] = win.stride;
    let (oh, ow) = (d.oh, d.ow);
    if oh == 0 || ow == 0 || kh == 0 || kw == 0 || sh == 0 || sw == 0 {
        return None;
    }
    let [ph, pw] = padded_extent(c, d, 1)?;
    let multiplier = d.oc / d.c.max(1);
    let fits = x.len() >= d.n * d.c * d.h * d.w
        && y.len() >= d.n * d.oc * oh * ow
        && ops.w.len() >= d.oc * kh * kw
        && ops.bias.len() >= d.oc
        && multiplier * d.c == d.oc;
    if !fits {
        return Some(false);
    }
    // The passes write the outputs' bytes: 8-bit outputs only (as every SIMD kernel).
    if Y::WIDE {
        return None;
    }
    let y_bytes: &mut [u8] = bytemuck::cast_slice_mut(y);
    let build = || DepthwiseState::<I>::new(c, ops, d, [ph, pw], signed);
    let mut kept = ops.ctx.take(key, build);
    let input = DepthwiseInput {
        x,
        d,
        pads: win.pads,
        extent: [ph, pw],
        multiplier,
        weights: ops.w,
        kernel: [kh, kw],
    };
    // SAFETY: an instruction set's entry point; the sizes checked above.
    unsafe {
        if signed {
            I::passes::<true>(kept.state(), &input, y_bytes);
        } else {
            I::passes::<false>(kept.state(), &input, y_bytes);
        }
    }
    ops.ctx.keep(kept);
    Some(true)
}

/// What a depthwise step's passes read ([`depthwise_passes`]): the input and its sizes, the
/// padding and the padded plane's extent, the output channels per input channel, the weights
/// and the kernel (all checked by [`depthwise_conv`]).
pub(super) struct DepthwiseInput<'a> {
    pub(super) x: &'a [u8],
    pub(super) d: &'a ConvDims,
    pub(super) pads: [usize; 4],
    pub(super) extent: [usize; 2],
    pub(super) multiplier: usize,
    pub(super) weights: &'a [i8],
    pub(super) kernel: [usize; 2],
}

/// Vectors per channel up to which [`depthwise_passes`] inlines a channel's pass.
pub(super) const INLINED_VECTORS: usize = 8;

/// Every image's and channel's depthwise outputs (`y`, a byte each): each input plane padded
/// into the state's plane, then each of its output channels' [`depthwise_pass`]. Each
/// instruction set's [`Isa::passes`] inlines this, so one call runs the whole step with the
/// padding and the passes inlined: a call of each per channel, with its set-up, had cost more
/// than a small plane's few vectors (VWW's 6 × 6 layers, 128 channels of five vectors).
///
/// # Safety
/// The CPU has `I`'s features; the operands are as [`depthwise_conv`] checked them.
#[inline(always)]
pub(super) unsafe fn depthwise_passes<I: Isa, const SIGNED: bool>(
    state: &mut DepthwiseState<I>,
    input: &DepthwiseInput<'_>,
    y: &mut [u8],
) {
    let DepthwiseState {
        padded,
        flip,
        expansion,
        offsets,
        single,
        paired,
        group_offsets,
        words,
        quads,
        channels,
    } = state;
    let d = input.d;
    let [ph, pw] = input.extent;
    let [kh, kw] = input.kernel;
    let (oh, ow) = (d.oh, d.ow);
    let groups = group_offsets.len();
    let vectors = paired
        .as_ref()
        .map_or(single.len(), |(gathers, _)| gathers.len());
    for b in 0..d.n {
        for ch in 0..d.c {
            let first = (b * d.c + ch) * d.h * d.w;
            let Some(plane) = input.x.get(first..first + d.h * d.w) else {
                return;
            };
            let Some(interior) = padded.get_mut(..ph * pw) else {
                return;
            };
            pad_interior::<I>(
                expansion.as_ref(),
                plane,
                d,
                input.pads,
                interior,
                pw,
                *flip,
            );
            for m in 0..input.multiplier {
                let o = ch * input.multiplier + m;
                let (Some(channel), Some(out)) = (
                    channels.get(o),
                    y.get_mut((b * d.oc + o) * oh * ow..(b * d.oc + o + 1) * oh * ow),
                ) else {
                    return;
                };
                let quad = quads.as_ref().filter(|q| q.usable.get(o) == Some(&true));
                let rows = quad.map_or(0, |q| q.offsets.len());
                let taps = match (paired.as_ref(), quad) {
                    (_, Some(q)) => DepthwiseTaps::Quads {
                        offsets: &q.offsets,
                        words: q.words.get(o * rows..(o + 1) * rows).unwrap_or(&[]),
                        gathers: &q.gathers,
                        whole: q.whole,
                    },
                    (Some((gathers, whole)), None) => DepthwiseTaps::Grouped {
                        offsets: group_offsets,
                        words: words.get(o * groups..(o + 1) * groups).unwrap_or(&[]),
                        gathers,
                        whole: *whole,
                    },
                    (None, None) => DepthwiseTaps::Single {
                        plan: TapPlan {
                            weights: input
                                .weights
                                .get(o * kh * kw..(o + 1) * kh * kw)
                                .unwrap_or(&[]),
                            offsets,
                        },
                        gathers: single,
                    },
                };
                let channel = ChannelPass {
                    first: channel.first,
                    scalar: &channel.scalar,
                    lanes: &channel.lanes,
                    taps,
                };
                // SAFETY: the caller's features; a vector's first taps lie within the last
                // output's, (oh − 1)·sh·pw + (ow − 1)·sw, and the farthest tap (a group's
                // first tap is one) ends the plane: every sixteen-byte load ends within its
                // slack.
                unsafe {
                    match vectors <= INLINED_VECTORS {
                        true => depthwise_pass::<I, SIGNED>(padded, &channel, out),
                        false => I::pass::<SIGNED>(padded, &channel, out),
                    }
                };
            }
        }
    }
}

/// A depthwise step's kept state: its padded plane (the border the zero point, written once)
/// and padding shuffles, its taps and vectors (single taps, or grouped where the instruction
/// set sums [`Isa::ROWS`] at a time), each channel's weight words and requantization, and the
/// channel's sums before they narrow.
pub(super) struct DepthwiseState<I: Isa> {
    pub(super) padded: Vec<u8>,
    /// What the padded plane's bytes are XORed with: `0x80` where the grouped sums read
    /// signed inputs as unsigned bytes (`x + 128`).
    pub(super) flip: u8,
    pub(super) expansion: Option<Expansion>,
    pub(super) offsets: Vec<usize>,
    pub(super) single: Vec<Gather>,
    pub(super) paired: Option<(Vec<PairedGather>, bool)>,
    pub(super) group_offsets: Vec<usize>,
    /// `group_offsets.len()` words per output channel.
    pub(super) words: Vec<i32>,
    pub(super) quads: Option<QuadTaps>,
    pub(super) channels: Vec<DepthwiseChannel<I>>,
}

/// A three-wide depthwise kernel's rows summed as byte fours where the instruction set sums
/// them in pairs first ([`Isa::quads`]: `vpmaddubsw` then `vpmaddwd`, three multiplies where
/// int16 pairs take six, and half the loads and shuffles): each output's lane reads a row's
/// taps `x0, x1, x2` and `x0` again, against a channel's word `[a, w1, w2, w0 − a]`
/// ([`quad_word`]). `vpmaddubsw` saturates its int16 pair sums, so a channel runs so only where
/// every row has such a word whose two pairs cannot overflow for any bytes (a weight paired
/// with one of the other sign or a zero, or with magnitudes summing to at most 128); the others
/// keep [`DepthwiseTaps::Grouped`]. Measured on the MLPerf Tiny models: 93 % of DS-CNN's
/// trained channels, 74 % of MLPerf KWS's, 80 % of VWW's.
pub(super) struct QuadTaps {
    pub(super) gathers: Vec<PairedGather>,
    pub(super) whole: bool,
    /// Each kernel row's offset from an output's first tap.
    pub(super) offsets: Vec<usize>,
    /// `offsets.len()` words per output channel (zeros for a channel that cannot).
    pub(super) words: Vec<i32>,
    /// Whether each output channel runs so.
    pub(super) usable: Vec<bool>,
}

impl QuadTaps {
    /// The quads of a `[kh, 3]` kernel (rows `dh · pw` apart in the padded plane, taps `dw`
    /// apart) with `oh × ow` outputs `[sh, sw]` apart, for the weights `w` of `oc` channels;
    /// `None` where the gathers do not fit or no channel can.
    pub(super) fn new(
        [oh, ow]: [usize; 2],
        [sh, sw]: [usize; 2],
        [kh, pw, dh, dw]: [usize; 4],
        w: &[i8],
        oc: usize,
    ) -> Option<QuadTaps> {
        let (mut gathers, whole) = paired_gathers([oh, ow], [sh, sw], pw, [4, 3, dw])?;
        // Each lane's fourth byte: its first tap again (where the lane has outputs).
        for gather in &mut gathers {
            for lane in gather.control.chunks_exact_mut(4) {
                if lane[0] != 0x80 {
                    lane[3] = lane[0];
                }
            }
        }
        let mut words = std::vec![0i32; oc * kh];
        let mut usable = std::vec![false; oc];
        for ((weights, words), usable) in w
            .chunks_exact(3 * kh)
            .zip(words.chunks_exact_mut(kh.max(1)))
            .zip(usable.iter_mut())
        {
            let row_words: Option<Vec<i32>> = weights
                .chunks_exact(3)
                .map(|row| quad_word([row[0], row[1], row[2]]))
                .collect();
            if let Some(row_words) = row_words {
                words.copy_from_slice(&row_words);
                *usable = true;
            }
        }
        #[cfg(test)]
        QUAD_CHANNELS.set(QUAD_CHANNELS.get() + usable.iter().filter(|&&u| u).count());
        if !usable.contains(&true) {
            return None;
        }
        Some(QuadTaps {
            gathers,
            whole,
            offsets: (0..kh).map(|ky| ky * dh * pw).collect(),
            words,
            usable,
        })
    }
}

/// A kernel row's weights `[w0, w1, w2]` as the word `[a, w1, w2, w0 − a]` (a byte each,
/// little-endian) that [`QuadTaps`] reads against `[x0, x1, x2, x0]`: the same sum, in two
/// pairs `a·x0 + w1·x1` and `w2·x2 + (w0 − a)·x0` that stay within int16 for every unsigned
/// byte (so `vpmaddubsw` never saturates): a pair of weights of opposite signs (or a zero)
/// spans at most `255 · 128`, one of the same sign at most `255 · (|p| + |q|)`, within range
/// while `|p| + |q| ≤ 128`. `a` is `w0` where that pair is safe, else `0`, else any that
/// makes both safe; `None` when none does (three large weights of one sign).
pub(super) fn quad_word([w0, w1, w2]: [i8; 3]) -> Option<i32> {
    let (w0, w1, w2) = (i32::from(w0), i32::from(w1), i32::from(w2));
    let safe = |p: i32, q: i32| p * q <= 0 || p.abs() + q.abs() <= 128;
    let byte = |v: i32| v as i8 as u8;
    [w0, 0]
        .into_iter()
        .chain(-128..=127)
        .find(|&a| {
            let rest = w0 - a;
            (-128..=127).contains(&rest) && safe(a, w1) && safe(w2, rest)
        })
        .map(|a| i32::from_le_bytes([byte(a), byte(w1), byte(w2), byte(w0 - a)]))
}

/// A depthwise output channel's offset (`bias − zx·Σw`, with the grouped sums' input offset)
/// and requantization.
pub(super) struct DepthwiseChannel<I: Isa> {
    pub(super) first: i32,
    pub(super) scalar: Requantizer,
    pub(super) lanes: I::Lanes,
}

impl<I: Isa> DepthwiseState<I> {
    /// The state of a depthwise step with a `[ph, pw]` padded plane (its operands checked).
    #[inline(always)]
    pub(super) fn new(
        c: &QConv,
        ops: &Operands<'_>,
        d: &ConvDims,
        [ph, pw]: [usize; 2],
        signed: bool,
    ) -> DepthwiseState<I> {
        let win = &c.window;
        let [kh, kw] = win.kernel;
        let [dh, dw] = win.dilation;
        let [sh, sw] = win.stride;
        let (oh, ow) = (d.oh, d.ow);
        let zx = ops.q.input_zero;
        // Taps summed `ROWS` at a time along kernel rows, where the instruction set can and a
        // group's taps lie within the sixteen bytes a half loads.
        let group = I::ROWS.min(kw);
        let paired = if I::GROUPED {
            paired_gathers([oh, ow], [sh, sw], pw, [I::ROWS, group, dw])
        } else {
            None
        };
        let single = match paired {
            Some(_) => Vec::new(),
            None => depthwise_gathers(oh, ow, [sh, sw], pw),
        };
        let groups_per_row = kw.div_ceil(group);
        let group_offsets: Vec<usize> = (0..kh)
            .flat_map(|ky| (0..groups_per_row).map(move |g| ky * dh * pw + g * group * dw))
            .collect();
        let groups = group_offsets.len();
        // The grouped sums read signed inputs as `x + 128` (unsigned bytes for `vpdpbusd`,
        // bytes zero-extended for `vpmaddwd`), flipped as the plane is padded.
        let flipped = paired.is_some() && signed;
        let (input_offset, flip) = if flipped { (128, 0x80) } else { (0, 0) };
        let taps = kh * kw;
        let mut words = std::vec![0i32; d.oc * groups];
        let mut channels = Vec::with_capacity(d.oc);
        for (o, weights) in ops.w.chunks_exact(taps).take(d.oc).enumerate() {
            if paired.is_some() {
                if let Some(words) = words.get_mut(o * groups..(o + 1) * groups) {
                    pack_groups(I::ROWS, weights, kw, group, words);
                }
            }
            let scalar = ops.rescaler(o);
            // SAFETY: only reached from an instruction set's entry point.
            let lanes = unsafe { I::lanes(&scalar) };
            channels.push(DepthwiseChannel {
                first: base(ops.bias[o], zx.wrapping_add(input_offset), weights),
                scalar,
                lanes,
            });
        }
        // Three-wide kernels' rows as byte fours, where the instruction set sums them so and the
        // plane is padded as the grouped sums read it (unsigned bytes).
        let quads = match paired.is_some() && I::QUADS && kw == 3 {
            true => QuadTaps::new([oh, ow], [sh, sw], [kh, pw, dh, dw], ops.w, d.oc),
            false => None,
        };
        DepthwiseState {
            padded: std::vec![zx as u8 ^ flip; ph * pw + 16],
            flip,
            expansion: Expansion::new(d, win.pads, [ph, pw], zx as u8),
            offsets: tap_offsets([kh, kw], [dh, dw], pw),
            single,
            paired,
            group_offsets,
            words,
            quads,
            channels,
        }
    }
}

/// A depthwise channel's `[kh, kw]` weights (row by row) as words of `group` neighbouring taps
/// of a kernel row (zeros past the row's end), `rows` to a word as [`Channels::words`] packs
/// them: `kw.div_ceil(group)` words per kernel row.
pub(super) fn pack_groups(rows: usize, weights: &[i8], kw: usize, group: usize, words: &mut [i32]) {
    let mut words = words.iter_mut();
    for row in weights.chunks_exact(kw.max(1)) {
        for taps in row.chunks(group.max(1)) {
            let tap = |j: usize| taps.get(j).map_or(0, |&w| w as i32);
            let word = if rows == 4 {
                i32::from_le_bytes([tap(0), tap(1), tap(2), tap(3)].map(|w| w as u8))
            } else {
                (tap(0) as u16 as u32 | ((tap(1) as u16 as u32) << 16)) as i32
            };
            if let Some(slot) = words.next() {
                *slot = word;
            }
        }
    }
}

/// How an input plane's bytes land in the interior rows of its zero-point-padded plane, as
/// 16-byte chunks each made by one byte shuffle of 16 neighbouring input bytes: worked out once
/// per step (every plane of a step pads alike), then each plane is a few loads, shuffles and
/// stores ([`Isa::expand`]) instead of a copy per row (a library call each for short rows).
pub(super) struct Expansion {
    pub(super) chunks: Vec<Chunk>,
    /// The interior rows' bytes of the padded plane: `chunks` cover `..end`.
    pub(super) end: usize,
    /// The input plane's bytes: every chunk's source is within `..plane`.
    pub(super) plane: usize,
}

/// One [`Expansion`] chunk: padded bytes `to..to + 16` are the input's `from + control[i]`,
/// or `fill[i]` (the zero point) where `control[i]` is `0x80` (a padding byte).
#[derive(Clone, Copy)]
pub(super) struct Chunk {
    pub(super) to: usize,
    pub(super) from: usize,
    pub(super) control: [u8; 16],
    pub(super) fill: [u8; 16],
}

impl Expansion {
    /// The chunks of a `[ph, pw]` padded plane's interior rows (from row `pads[0]` while input
    /// rows last), or `None` where shuffles do not fit — a plane or interior of under 16 bytes,
    /// or a chunk whose input bytes span more than 16 (a padded plane narrower than the input)
    /// — or do not pay (rows of 32 bytes or more).
    pub(super) fn new(
        d: &ConvDims,
        pads: [usize; 4],
        [ph, pw]: [usize; 2],
        zero: u8,
    ) -> Option<Expansion> {
        let [top, left] = [pads[0], pads[1]];
        let plane = d.h.checked_mul(d.w)?;
        let start = top.checked_mul(pw)?;
        let end = (top.checked_add(d.h)?).min(ph).checked_mul(pw)?;
        let interior = end.checked_sub(start)?;
        // Rows of 32 bytes or more copy as fast one call per row (and a large plane's chunks
        // would cost more to work out than they save).
        if plane < 16 || interior < 16 || d.w >= 32 {
            return None;
        }
        let mut chunks = Vec::with_capacity(interior.div_ceil(16));
        for n in 0..interior.div_ceil(16) {
            let to = start + (16 * n).min(interior - 16);
            // Each lane's input byte, walking the padded row and column from `to` (two
            // divisions a chunk, not two a byte: they had been a twentieth of an int8 DS-CNN).
            let (mut row, mut col) = (to / pw, to % pw);
            let mut lanes = [None; 16];
            for lane in lanes.iter_mut() {
                let (iy, ix) = (row.wrapping_sub(top), col.wrapping_sub(left));
                *lane = (iy < d.h && ix < d.w).then(|| iy * d.w + ix);
                col += 1;
                if col == pw {
                    (row, col) = (row + 1, 0);
                }
            }
            let first = lanes.iter().flatten().copied().min().unwrap_or(0);
            let from = first.min(plane - 16);
            let mut chunk = Chunk {
                to,
                from,
                control: [0x80; 16],
                fill: [zero; 16],
            };
            for (i, lane) in lanes.iter().enumerate() {
                if let Some(at) = *lane {
                    let index = at.checked_sub(from).filter(|&i| i < 16)?;
                    chunk.control[i] = index as u8;
                    chunk.fill[i] = 0;
                }
            }
            chunks.push(chunk);
        }
        Some(Expansion { chunks, end, plane })
    }
}

/// One input plane into the interior of its zero-point-padded plane (whose border already holds
/// the zero point), every byte XORed with `flip`: by `expansion`'s shuffles when there is one,
/// else row by row.
#[inline(always)]
pub(super) fn pad_interior<I: Isa>(
    expansion: Option<&Expansion>,
    plane: &[u8],
    d: &ConvDims,
    pads: [usize; 4],
    padded: &mut [u8],
    pw: usize,
    flip: u8,
) {
    match expansion {
        Some(e) if plane.len() >= e.plane && padded.len() >= e.end => {
            // SAFETY: every chunk reads 16 bytes below `e.plane` and writes 16 below `e.end`;
            // only reached from an instruction set's entry point.
            unsafe { I::expand(e, plane, padded, flip) }
        }
        _ => copy_interior(plane, d, pads, padded, pw, flip),
    }
}

/// One input plane into a zero-point-padded plane (`pw` wide) whose border already holds the
/// zero point, each byte XORed with `flip`: only the interior is written (the border is the
/// same for every plane of a step, so the callers fill it once). Rows are copied element by
/// element: they are short, and a library call per row would cost more. Out of line: inlined
/// into an instruction set's [`depthwise_passes`], its loops had run slower.
#[inline(never)]
pub(super) fn copy_interior(
    plane: &[u8],
    d: &ConvDims,
    pads: [usize; 4],
    padded: &mut [u8],
    pw: usize,
    flip: u8,
) {
    let [top, left] = [pads[0], pads[1]];
    let width = d.w.min(pw.saturating_sub(left));
    for (iy, source) in plane.chunks_exact(d.w.max(1)).take(d.h).enumerate() {
        let Some(row) = padded.get_mut((iy + top) * pw + left..) else {
            break;
        };
        for (slot, &v) in row.iter_mut().zip(&source[..width]) {
            *slot = v ^ flip;
        }
    }
}
