//! Convolutions with the output channels across a vector's lanes (x86-64 with AVX2 or
//! AVX-512, `std`).
//!
//! The in-place product of [`crate::ops::conv::reference`] puts output pixels across the lanes: its vectors are
//! input rows read at each tap's offset, mostly unaligned, over a grid as wide as the padded
//! rows (the columns past each output row computed and dropped), and planes narrower than its
//! 32-wide panels fall to 8-wide and scalar tails (ResNet-8's 8 × 8 stage, DS-CNN's 25 × 5).
//! Here the lanes are output channels instead (sixteen with AVX-512, eight with AVX2), as in
//! onnxruntime's channel-blocked kernels: the weights, packed once per prepared step as
//! `[k][lanes·V]`, are aligned vector loads, each of eight output pixels' input values is
//! broadcast from wherever its tap lies, and the `8 × lanes·V` tile is summed in registers
//! over every tap, then turned (in registers) into eight-pixel rows of each channel's output
//! plane, the bias added and Relu or Clip applied on the way. No
//! column is wasted, any plane width fills the tiles (they run across output rows), and each
//! output is the same sum in the same order as the in-place product's (from zero over the taps,
//! one FMA each, then the bias added), so the results are bit for bit those.

use super::tiles::{Block, PIXELS};
use super::{tiles_avx2, tiles_avx512};
use crate::base::aligned::Aligned;
use crate::base::context::StepContext;
use crate::isa::activation_lanes::Finish;
use ferrite_hal::Activation;
use std::vec::Vec;

/// Multiply-adds below which a convolution stays on one thread: a part costs the helper's
/// start-up (a few microseconds on a VM), which DS-CNN's 0.5 M multiply-add pointwise layers,
/// split at the matrix products' 256 Ki, did not earn back (72 → 79 µs on 2 threads).
#[cfg(feature = "threads")]
const PARALLEL_WORK: usize = 1 << 20;

/// The vector instructions a packing and its tiles are for.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Isa {
    /// Sixteen lanes, up to three vectors a block: `8 × 3` accumulators, three weight vectors
    /// and the broadcast value take 28 of the 32 registers.
    Avx512,
    /// Eight lanes, up to two vectors a block, six pixels a tile: twelve accumulators, two
    /// weight vectors and the broadcast value take 15 of the 16 registers (eight pixels of
    /// one vector, eight accumulators, had left the FMA units waiting on their latency).
    Avx2,
}

impl Isa {
    /// The best this CPU runs (none without AVX2).
    pub(super) fn here() -> Option<Isa> {
        use crate::isa::{level, Level};
        match level() {
            Level::Avx512 => Some(Isa::Avx512),
            Level::Avx2 => Some(Isa::Avx2),
            Level::Portable => None,
        }
    }

    /// Lanes of a vector.
    pub(super) const fn lanes(self) -> usize {
        match self {
            Isa::Avx512 => 16,
            Isa::Avx2 => 8,
        }
    }

    /// The widest block, in vectors.
    const fn max_vectors(self) -> usize {
        match self {
            Isa::Avx512 => 3,
            Isa::Avx2 => 2,
        }
    }

    /// Pixels of a tile.
    pub(super) const fn pixels(self) -> usize {
        match self {
            Isa::Avx512 => 8,
            Isa::Avx2 => 6,
        }
    }
}

/// A convolution's input as read in place: `input[base(pixel) + taps[k]]` is the `k`-th
/// product term of an output pixel (weights `[channel][k]` in the same order), where
/// `base(oy, ox) = oy · pitch + ox · step`: zero-padded phase planes (step 1), or a pointwise
/// convolution's own input (pitch = the stride's rows, step = its columns, taps = each
/// channel's plane).
pub(super) struct Reading<'a> {
    /// The values the taps read.
    pub input: &'a [f32],
    /// Each product term's offset from its pixel's base.
    pub taps: &'a [usize],
    /// The distance between two output rows' bases.
    pub pitch: usize,
    /// The distance between two output columns' bases.
    pub step: usize,
    /// The output plane's height and width.
    pub plane: [usize; 2],
    /// The kernel's rows and columns: the terms run over input channels, then kernel rows,
    /// then kernel columns.
    pub kernel: [usize; 2],
    /// Per output row, the kernel rows that read inside the input (bit `ky`; empty: all of
    /// them everywhere). A tile whose pixels all lie in rows of one such set leaves out the
    /// other kernel rows' terms, which read only padding: zeros, whose products (±0 with finite
    /// weights) never change a sum (it starts at +0 and rounds to nearest, so it is never −0),
    /// so the result is bit for bit the full sum's (an infinite weight would have made a NaN
    /// of the padding, which onnxruntime, skipping it too, does not). onnxruntime's kernels skip the padding likewise; here
    /// only whole padded rows, 16 % of an 8 × 8 plane's 3 × 3 products.
    pub rows: &'a [u32],
}

/// The terms of the kernel rows in `rows` (bit `ky`): their indices among all `k` terms.
fn terms_of(rows: u32, [kh, kw]: [usize; 2], k: usize) -> Vec<usize> {
    (0..k)
        .filter(|t| rows & (1 << (t / kw.max(1) % kh.max(1)).min(31)) != 0)
        .collect()
}

/// The weights of one convolution group packed for [`run`] again for the tiles that leave out
/// some kernel rows (see [`Reading::rows`]).
struct Variant {
    /// The kernel rows read (bit `ky`).
    rows: u32,
    /// The offsets of the terms read.
    taps: Vec<usize>,
    /// Each block's start in the packed values.
    blocks: Vec<usize>,
}

/// The weights of one convolution group packed for [`run`]: per block of output channels,
/// `[k][lanes·V]` (channels past the last zero), each block 64-byte aligned; then the same for
/// each [`Variant`].
pub(super) struct Packed {
    /// The instructions it is packed for.
    isa: Isa,
    /// The packed values, from a 64-byte boundary.
    values: Aligned,
    /// Each block: first output channel, vectors, start in the packed values.
    blocks: Vec<(usize, usize, usize)>,
    /// Output channels.
    channels: usize,
    /// The packings of the kernel-row sets that leave rows out.
    variants: Vec<Variant>,
}

/// What a group's packed weights were built from: their address and length, the channel
/// count, the terms per output, the instructions, the kernel and its row sets.
#[derive(PartialEq)]
pub(super) struct Key {
    weights: (usize, usize),
    channels: usize,
    k: usize,
    isa: Isa,
    kernel: [usize; 2],
    variants: RowSets,
}

/// The distinct kernel-row sets of `reading`'s rows that leave rows out (at most seven).
fn partial_row_sets(reading: &Reading<'_>) -> RowSets {
    let all = 1u32
        .checked_shl(reading.kernel[0] as u32)
        .map_or(u32::MAX, |b| b - 1);
    let mut sets = RowSets::default();
    for &rows in reading.rows {
        if rows != all && rows != 0 && !sets.as_slice().contains(&rows) && sets.count < 7 {
            sets.sets[sets.count] = rows;
            sets.count += 1;
        }
    }
    sets
}

/// Up to seven kernel-row sets, without an allocation per run.
#[derive(Clone, Copy, Default, PartialEq)]
pub(super) struct RowSets {
    sets: [u32; 7],
    count: usize,
}

impl RowSets {
    /// The sets.
    fn as_slice(&self) -> &[u32] {
        &self.sets[..self.count]
    }
}

/// Whether [`run`] applies `activation` as it stores (then the caller need not): Relu and
/// Clip, which give the same result applied twice, so a caller that applies them once more
/// to outputs of several groups or batches, not all of them from here, stays exact.
pub(super) fn fuses(activation: Activation) -> bool {
    matches!(activation, Activation::Relu | Activation::Clip { .. })
}

/// Whether [`run`] would take a layer of `channels` outputs of `plane` pixels, `k` terms each
/// (before checking its operands), so that a caller can lay the input out for it.
pub(super) fn will_run(k: usize, channels: usize, plane: usize, strided: bool) -> bool {
    Isa::here().is_some_and(|isa| pays(k, channels, plane, strided, isa))
}

/// The block widths, in vectors, for `channels` output channels: the widest while that leaves
/// no narrow remainder, then narrower (the last possibly partial).
pub(super) fn block_vectors(channels: usize, isa: Isa) -> impl Iterator<Item = usize> {
    let mut left = channels.div_ceil(isa.lanes());
    let widest = isa.max_vectors();
    core::iter::from_fn(move || {
        let v = match left {
            0 => return None,
            // 4 = 2 + 2 and 5 = 3 + 2 rather than a lone vector after three.
            4 if widest == 3 => 2,
            n => n.min(widest),
        };
        left -= v;
        Some(v)
    })
}

/// Whether this kernel beats the in-place product for a group of `channels` outputs of
/// `plane` pixels, `k` terms each (measured on the test models' layers, Zen 4): turning each
/// tile into channel rows costs about what 7 terms of its sums do, so few terms over a wide
/// plane (MobileNet's first pointwise layers: 8 to 32 terms on 576 to 2,304 pixels, ResNet-8's
/// 27-term first layer) stay with the product, whose panels those planes fill; fewer channels
/// than a vector's lanes would leave lanes empty. A `strided` reading in
/// place (a 1 × 1 kernel at stride 2) always pays: the product would first copy the whole
/// input into phase planes (ResNet-8's shortcut layers 7.6 → 4.5 and 6.6 → 3.4 µs).
fn pays(k: usize, channels: usize, plane: usize, strided: bool, isa: Isa) -> bool {
    k > 0 && channels >= isa.lanes() && (strided || k >= 48 || plane <= 160)
}

impl Packed {
    /// `weights` (`[channels][k]`) packed for `isa`, and again for each of the kernel-row
    /// `sets` (the terms of `taps` in their rows).
    fn new(
        weights: &[f32],
        (channels, k): (usize, usize),
        isa: Isa,
        taps: &[usize],
        (kernel, sets): ([usize; 2], &[u32]),
    ) -> Self {
        let lanes = isa.lanes();
        let widths: Vec<usize> = block_vectors(channels, isa).collect();
        let all: Vec<usize> = (0..k).collect();
        let kept: Vec<Vec<usize>> = sets.iter().map(|&rows| terms_of(rows, kernel, k)).collect();
        // Every packing's blocks one after another: the full one's, then each set's.
        let mut starts: Vec<Vec<usize>> = Vec::new();
        let mut start = 0;
        for terms in core::iter::once(&all).chain(&kept) {
            let mut at = Vec::new();
            for &v in &widths {
                at.push(start);
                start += terms.len() * lanes * v;
            }
            starts.push(at);
        }
        let mut aligned = Aligned::zeroed(start);
        let values = aligned.as_mut_slice();
        for (terms, at) in core::iter::once(&all).chain(&kept).zip(&starts) {
            let mut first = 0;
            for (&v, &at) in widths.iter().zip(at) {
                let width = lanes * v;
                for (j, row) in weights.chunks_exact(k).skip(first).take(width).enumerate() {
                    for (i, &t) in terms.iter().enumerate() {
                        values[at + i * width + j] = row[t];
                    }
                }
                first += width;
            }
        }
        let mut first = 0;
        let blocks = widths
            .iter()
            .zip(&starts[0])
            .map(|(&v, &at)| {
                let block = (first, v, at);
                first += lanes * v;
                block
            })
            .collect();
        let variants = sets
            .iter()
            .zip(&kept)
            .zip(starts.iter().skip(1))
            .map(|((&rows, terms), at)| Variant {
                rows,
                taps: terms.iter().map(|&t| taps[t]).collect(),
                blocks: at.clone(),
            })
            .collect();
        Packed {
            isa,
            values: aligned,
            blocks,
            channels,
            variants,
        }
    }
}

/// One convolution group's output, `out[channel][pixel]` (with `blocked_out`, channel-blocked:
/// `out[channel / lanes][pixel][channel % lanes]`, see [`crate::program::layout`]), from its input as
/// `reading` says and its weights `[channels][k]`, plus `bias`, then `activation` where it
/// [`fuses`] it. False,
/// with nothing written, where this CPU has no AVX2, the layer is one the in-place product
/// runs faster, or an operand is shorter than the geometry needs (the caller runs its own
/// kernels), or a blocked output's channels are not whole vectors. `constant` weights are
/// packed once per prepared step; others at every call.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    ctx: StepContext<'_>,
    reading: &Reading<'_>,
    weights: &[f32],
    channels: usize,
    bias: Option<&[f32]>,
    activation: Activation,
    out: &mut [f32],
    constant: bool,
    (blocked_out, residual): (bool, Residual<'_>),
) -> bool {
    let k = reading.taps.len();
    let [oh, ow] = reading.plane;
    let Some(isa) = Isa::here() else {
        return false;
    };
    let Some(plane) = oh.checked_mul(ow) else {
        return false;
    };
    if plane == 0 || !(blocked_out || pays(k, channels, plane, reading.step > 1, isa)) {
        return false;
    }
    compute(
        ctx,
        isa,
        reading,
        (weights, channels),
        bias,
        activation,
        (out, blocked_out, residual),
        constant,
    )
}

/// What a blocked output's tiles add to each sum before the activation (a residual Add fused
/// into the convolution before it): nothing, the output's own values (an Add written in place
/// of its other operand), or another tensor's, laid out as the output.
#[derive(Clone, Copy)]
pub(crate) enum Residual<'a> {
    /// Nothing.
    None,
    /// The output's values before the tiles store theirs.
    Output,
    /// This tensor's values.
    Tensor(&'a [f32]),
}

/// The lanes of this CPU's vectors where [`run`] runs here (the channel block of a blocked
/// layout), else `None`.
pub(crate) fn lanes() -> Option<usize> {
    Isa::here().map(Isa::lanes)
}

/// [`run`] with `isa`'s tiles, whether or not they pay; false where an operand is too short.
#[allow(clippy::too_many_arguments)]
fn compute(
    ctx: StepContext<'_>,
    isa: Isa,
    reading: &Reading<'_>,
    (weights, channels): (&[f32], usize),
    bias: Option<&[f32]>,
    activation: Activation,
    (out, blocked, residual): (&mut [f32], bool, Residual<'_>),
    constant: bool,
) -> bool {
    let k = reading.taps.len();
    let [oh, ow] = reading.plane;
    if blocked && !channels.is_multiple_of(isa.lanes()) {
        return false;
    }
    // A residual only with a blocked output, and as long as it.
    let residual = match residual {
        Residual::None => None,
        _ if !blocked => return false,
        Residual::Output => Some(out.as_ptr()),
        Residual::Tensor(r) if r.len() >= out.len() => Some(r.as_ptr()),
        Residual::Tensor(_) => return false,
    };
    let Some(plane) = oh.checked_mul(ow).filter(|&p| p > 0) else {
        return false;
    };
    // Sizes checked without overflow: a verified plan can still hold absurd geometry.
    let furthest = (|| {
        let last_base = (oh - 1)
            .checked_mul(reading.pitch)?
            .checked_add((ow - 1).checked_mul(reading.step)?)?;
        last_base.checked_add(*reading.taps.iter().max()?)
    })();
    let fits = furthest.is_some_and(|f| f < reading.input.len())
        && channels.checked_mul(k).is_some_and(|n| weights.len() >= n)
        && channels.checked_mul(plane).is_some_and(|n| out.len() >= n)
        && bias.is_none_or(|b| b.len() >= channels);
    if !fits {
        return false;
    }
    let weights = &weights[..channels * k];
    let sets = partial_row_sets(reading);
    let rows_fit = reading.rows.is_empty() || reading.rows.len() >= oh;
    if !rows_fit {
        return false;
    }
    let build = || {
        let kernel = (reading.kernel, sets.as_slice());
        Packed::new(weights, (channels, k), isa, reading.taps, kernel)
    };
    let key = Key {
        weights: (weights.as_ptr() as usize, weights.len()),
        channels,
        k,
        isa,
        kernel: reading.kernel,
        variants: sets,
    };
    let mut kept = if constant {
        Some(ctx.take(key, build))
    } else {
        None
    };
    let mut fresh = None;
    let packed = match kept.as_mut() {
        Some(kept) => &*kept.state(),
        None => &*fresh.insert(build()),
    };
    let finish = Finish::of(activation);
    let job = Job {
        reading,
        packed,
        bias,
        finish,
        out: Output(out.as_mut_ptr()),
        blocked,
        residual: residual.map(Input),
        plane,
    };
    #[cfg(feature = "threads")]
    if let Some(parts) = job.split(ctx.threads(), k) {
        ctx.for_each(parts, |(block, pixels)| job.tiles(block, pixels));
        if let Some(kept) = kept {
            ctx.keep(kept);
        }
        return true;
    }
    for block in 0..packed.blocks.len() {
        job.tiles(block, 0..plane);
    }
    if let Some(kept) = kept {
        ctx.keep(kept);
    }
    true
}

/// A block's packed weights (from its first) and the offsets of the terms they are for.
type Packing<'a> = (*const f32, &'a [usize]);

/// The output's first value, shared by the parts of a threaded run, which write disjoint
/// outputs (each a block of channels over a range of pixels).
#[derive(Clone, Copy)]
struct Output(*mut f32);

// SAFETY: the parts write disjoint elements, and the run waits for all of them.
#[allow(unsafe_code)]
unsafe impl Send for Output {}
#[allow(unsafe_code)]
unsafe impl Sync for Output {}

/// One convolution as [`run`] checked it.
struct Job<'a> {
    reading: &'a Reading<'a>,
    packed: &'a Packed,
    bias: Option<&'a [f32]>,
    finish: Finish,
    out: Output,
    /// Whether the output is channel-blocked.
    blocked: bool,
    /// What the tiles add before the activation (see [`Residual`]), from its first value.
    residual: Option<Input>,
    plane: usize,
}

/// A residual's first value, read by the parts of a threaded run (each the values of the
/// outputs it writes, before it writes them).
#[derive(Clone, Copy)]
struct Input(*const f32);

// SAFETY: read only, each value by the one part that writes the output at its place.
#[allow(unsafe_code)]
unsafe impl Send for Input {}
#[allow(unsafe_code)]
unsafe impl Sync for Input {}

impl<'a> Job<'a> {
    /// The packing of the tile whose pixels lie in output rows `first..=last`: the variant
    /// of their kernel-row set where they share one that leaves rows out.
    fn variant(&self, first: usize, last: usize) -> Option<&'a Variant> {
        let rows = self.reading.rows.get(first..=last)?;
        let (&set, rest) = rows.split_first()?;
        if rest.iter().any(|&r| r != set) {
            return None;
        }
        self.packed.variants.iter().find(|v| v.rows == set)
    }

    /// Block `block`'s packed weights and taps for a tile whose pixels lie in output rows
    /// `[first, last]`: its [`Job::variant`]'s, else the full packing's (`full`).
    fn packing(&self, block: usize, full: *const f32, [first, last]: [usize; 2]) -> Packing<'a> {
        match self.variant(first, last) {
            // SAFETY: the variant's blocks are where `Packed::new` put them, in the values.
            #[allow(unsafe_code)]
            Some(variant) => unsafe {
                let at = variant.blocks.get(block).copied().unwrap_or(0);
                let values = self.packed.values.as_slice().as_ptr();
                (values.add(at), &variant.taps[..])
            },
            None => (full, self.reading.taps),
        }
    }

    /// With threads and work enough, each block's pixels split in whole tiles among them (a
    /// part computes its outputs with the same instructions as one thread would, so the
    /// results are the same); `None` where the work stays on this thread.
    #[cfg(feature = "threads")]
    fn split(&self, threads: usize, k: usize) -> Option<Vec<(usize, core::ops::Range<usize>)>> {
        let work = self
            .packed
            .channels
            .saturating_mul(self.plane)
            .saturating_mul(k);
        if threads < 2 || work < PARALLEL_WORK {
            return None;
        }
        let ranges = crate::base::parts::ranges(self.plane, threads, self.packed.isa.pixels());
        let blocks = 0..self.packed.blocks.len();
        let parts: Vec<_> = blocks
            .flat_map(|b| ranges.iter().map(move |r| (b, r.clone())))
            .collect();
        (parts.len() > 1).then_some(parts)
    }

    /// Block `block`'s outputs for the tiles of eight consecutive pixels from `pixels`.
    fn tiles(&self, block: usize, pixels: core::ops::Range<usize>) {
        let reading = self.reading;
        let [oh, ow] = reading.plane;
        let Some(&(first, v, at)) = self.packed.blocks.get(block) else {
            return;
        };
        let input = reading.input.as_ptr();
        let isa = self.packed.isa;
        let lanes = isa.lanes();
        // SAFETY (every pointer below): `run` checked that the furthest tap of the last pixel
        // is inside the input and that the output holds every channel's plane; the packed
        // values hold every block as `Packed::new` laid it out, from a 64-byte boundary.
        let channels = (self.packed.channels - first).min(lanes * v);
        // The block's biases, zero past its channels: a vector's lanes each.
        let mut bias = [0.0f32; 48];
        if let Some(b) = self.bias.and_then(|b| b.get(first..first + channels)) {
            bias.iter_mut().zip(b).for_each(|(slot, &b)| *slot = b);
        }
        let values = self.packed.values.as_slice().as_ptr();
        #[allow(unsafe_code)]
        let full = unsafe { values.add(at) };
        let mut block_at = Block {
            weights: full,
            taps: reading.taps,
            first,
            channels,
            plane: self.plane,
            bias,
            finish: self.finish,
            blocked: self.blocked,
            residual: core::ptr::null(),
        };
        let mut p0 = pixels.start;
        // The pixel tiles' bases, walked along the output rows.
        let (mut oy, mut ox) = (p0 / ow, p0 % ow);
        // AVX2 blocks of one vector into a blocked output at step 1 or 2 take row runs where
        // a row has twelve pixels left (see `tiles_avx2::row_run`).
        let runs = isa == Isa::Avx2 && v == 1 && self.blocked && matches!(reading.step, 1 | 2);
        while p0 < pixels.end {
            if runs && ox + tiles_avx2::RUN <= ow && p0 + tiles_avx2::RUN <= pixels.end {
                (block_at.weights, block_at.taps) = self.packing(block, full, [oy, oy]);
                // SAFETY: the run's pixels are `ox..ox + RUN` of row `oy`, inside the plane,
                // so every read is one `run` checked; the CPU has AVX2 and FMA (`Isa::here`).
                #[allow(unsafe_code)]
                unsafe {
                    let base = input.add(oy * reading.pitch + ox * reading.step);
                    if let Some(residual) = self.residual {
                        block_at.residual = residual.0.add(p0 * lanes);
                    }
                    let out_at = self.out.0.add(p0 * lanes);
                    match reading.step {
                        1 => tiles_avx2::row_run::<1>(&block_at, base, out_at),
                        _ => tiles_avx2::row_run::<2>(&block_at, base, out_at),
                    }
                }
                p0 += tiles_avx2::RUN;
                ox += tiles_avx2::RUN;
                if ox == ow {
                    (oy, ox) = (oy + 1, 0);
                }
                continue;
            }
            let count = (pixels.end - p0).min(isa.pixels());
            // Stores write eight pixels where the range has them (past a short tile, pixels
            // the next tile then writes), else the tile's.
            let stored = (pixels.end - p0).min(PIXELS);
            let mut bases = [input; PIXELS];
            let mut last = input;
            let first_row = oy;
            for base in bases.iter_mut().take(count) {
                #[allow(unsafe_code)]
                {
                    last = unsafe { input.add(oy * reading.pitch + ox * reading.step) };
                }
                ox += 1;
                if ox == ow {
                    (oy, ox) = (oy + 1, 0);
                }
                *base = last;
            }
            bases.iter_mut().skip(count).for_each(|b| *b = last);
            debug_assert!(oy <= oh);
            // The tile's rows: from the first pixel's to the last's (the walk is past it).
            let last_row = if ox == 0 { oy.saturating_sub(1) } else { oy };
            (block_at.weights, block_at.taps) = self.packing(block, full, [first_row, last_row]);
            #[allow(unsafe_code)]
            unsafe {
                // A blocked output's pixel p0 is a vector of lanes apart.
                let out_at = self.out.0.add(if self.blocked { p0 * lanes } else { p0 });
                if let Some(residual) = self.residual {
                    block_at.residual = residual.0.add(p0 * lanes);
                }
                // SAFETY: the instructions the packing is for are this CPU's (`Isa::here`).
                match (isa, v) {
                    (Isa::Avx512, 1) => {
                        tiles_avx512::tile::<1>(&block_at, &bases, out_at, [count, stored])
                    }
                    (Isa::Avx512, 2) => {
                        tiles_avx512::tile::<2>(&block_at, &bases, out_at, [count, stored])
                    }
                    (Isa::Avx512, _) => {
                        tiles_avx512::tile::<3>(&block_at, &bases, out_at, [count, stored])
                    }
                    (Isa::Avx2, 1) => {
                        tiles_avx2::tile::<1>(&block_at, &bases, out_at, [count, stored])
                    }
                    (Isa::Avx2, _) => {
                        tiles_avx2::tile::<2>(&block_at, &bases, out_at, [count, stored])
                    }
                }
            }
            p0 += count;
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::vec;

    /// A small deterministic generator (also `winograd`'s tests').
    pub(crate) struct Lcg(pub(crate) u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
        /// A number below `n`.
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        /// A value in −4..=4, in steps of 1/250.
        pub(crate) fn value(&mut self) -> f32 {
            (self.below(2001) as f32 - 1000.0) / 250.0
        }
    }

    /// Every instruction set of the channel-lane kernels this CPU has.
    pub(crate) fn available() -> Vec<Isa> {
        [Isa::Avx512, Isa::Avx2]
            .into_iter()
            .filter(|&isa| match isa {
                Isa::Avx512 => std::is_x86_feature_detected!("avx512f"),
                Isa::Avx2 => {
                    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
                }
            })
            .collect()
    }

    /// Every instruction set this CPU has, over random geometry (channels not a multiple of
    /// the lanes, planes not a multiple of the tiles, strided and padded readings, 1 to 70
    /// terms, with and without bias, each fused activation): bit for bit the scalar sum from
    /// zero over the terms, one FMA each, plus the bias, then the activation.
    #[test]
    fn tiles_give_the_scalar_sums_bit_for_bit() {
        let isas = available();
        let mut rng = Lcg(7);
        for case in 0..300 {
            // One case in three a whole number of vectors (a blocked output runs too), one
            // in six a single AVX2 vector; one in four rows long enough for row runs.
            let channels = match rng.below(6) {
                0 | 1 => 16 * (1 + rng.below(4)),
                2 => 8,
                _ => 1 + rng.below(70),
            };
            let k = 1 + rng.below(70);
            let ow = match rng.below(4) {
                0 => 12 + rng.below(30),
                _ => 1 + rng.below(13),
            };
            let oh = 1 + rng.below(9);
            let step = 1 + rng.below(2);
            let pitch = (ow - 1) * step + 1 + rng.below(4);
            let taps: Vec<usize> = (0..k).map(|_| rng.below(60)).collect();
            let len = (oh - 1) * pitch + (ow - 1) * step + 60;
            let input: Vec<f32> = (0..len).map(|_| rng.value()).collect();
            let weights: Vec<f32> = (0..channels * k).map(|_| rng.value()).collect();
            let bias: Option<Vec<f32>> =
                (rng.below(2) == 0).then(|| (0..channels).map(|_| rng.value()).collect());
            let activation = match rng.below(4) {
                0 => Activation::None,
                1 => Activation::Relu,
                2 => Activation::Clip {
                    min: -1.5,
                    max: 2.0,
                },
                _ => Activation::Clip {
                    min: f32::NAN,
                    max: 0.5,
                },
            };
            let reading = Reading {
                input: &input,
                taps: &taps,
                pitch,
                step,
                plane: [oh, ow],
                kernel: [1, 1],
                rows: &[],
            };
            let plane = oh * ow;
            let mut want = vec![0.0f32; channels * plane];
            for c in 0..channels {
                for p in 0..plane {
                    let base = p / ow * pitch + p % ow * step;
                    let sum = taps
                        .iter()
                        .zip(&weights[c * k..])
                        .fold(0.0f32, |acc, (&t, &w)| w.mul_add(input[base + t], acc));
                    let v = bias.as_ref().map_or(0.0, |b| b[c]) + sum;
                    want[c * plane + p] = match activation {
                        Activation::Relu => crate::base::math::max(v, 0.0),
                        Activation::Clip { min, max } => {
                            crate::base::math::min(crate::base::math::max(v, min), max)
                        }
                        _ => v,
                    };
                }
            }
            for &isa in &isas {
                let mut out = vec![f32::NAN; channels * plane + 3];
                let ran = compute(
                    StepContext::default(),
                    isa,
                    &reading,
                    (&weights, channels),
                    bias.as_deref(),
                    activation,
                    (&mut out, false, Residual::None),
                    false,
                );
                assert!(ran, "case {case} {isa:?}");
                let same = out[..channels * plane]
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "case {case} {isa:?}: {channels} channels, {k} terms, {oh}x{ow}"
                );
                assert!(
                    out[channels * plane..].iter().all(|v| v.is_nan()),
                    "case {case}: wrote past the output"
                );
                // The channel-blocked output: the same values, each pixel's channels a vector.
                let lanes = isa.lanes();
                let whole = channels.div_ceil(lanes) * lanes;
                let mut blocked = vec![f32::NAN; whole * plane + 3];
                let ran = compute(
                    StepContext::default(),
                    isa,
                    &reading,
                    (&weights[..whole.min(channels) * k], whole.min(channels)),
                    bias.as_deref(),
                    activation,
                    (&mut blocked, true, Residual::None),
                    false,
                );
                assert_eq!(ran, channels == whole, "case {case} {isa:?} blocked");
                if ran {
                    let same = (0..channels * plane).all(|i| {
                        let (c, p) = (i / plane, i % plane);
                        let at = (c / lanes * plane + p) * lanes + c % lanes;
                        blocked[at].to_bits() == want[i].to_bits()
                    });
                    assert!(same, "case {case} {isa:?} blocked: {channels} channels");
                    assert!(blocked[whole * plane..].iter().all(|v| v.is_nan()));
                }
            }
        }
    }

    /// Short operands and absurd geometry are declined, nothing written.
    #[test]
    fn short_operands_are_declined() {
        let Some(isa) = Isa::here() else { return };
        let input = [1.0f32; 20];
        let taps = [0usize, 5];
        let weights = [1.0f32; 32];
        for (plane, pitch, len) in [([2, 4], 4, 20), ([2, 2], usize::MAX, 20), ([4, 4], 4, 20)] {
            let reading = Reading {
                input: &input[..len],
                taps: &taps,
                pitch,
                step: 1,
                plane,
                kernel: [1, 1],
                rows: &[],
            };
            let mut out = vec![f32::NAN; 16 * plane[0] * plane[1]];
            let ran = compute(
                StepContext::default(),
                isa,
                &reading,
                (&weights, 16),
                None,
                Activation::None,
                (&mut out, false, Residual::None),
                false,
            );
            let fits = plane == [2, 4];
            assert_eq!(ran, fits);
            if !fits {
                assert!(out.iter().all(|v| v.is_nan()));
            }
        }
    }
}
