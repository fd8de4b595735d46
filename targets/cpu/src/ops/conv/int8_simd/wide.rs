//! Pointwise integer convolutions, and regular ones on their unfolded windows, a block of
//! output positions at a time with each channel's requantization in registers: every block's
//! rows packed once, then a few output channels' sums over it, offset, requantized and
//! narrowed into their rows without leaving the vector registers. The geometry is here, shared;
//! each instruction set ([`Wide`]) packs the rows and computes a tile of channels — 512-bit
//! VNNI sixteen positions to a vector ([`super::vnni_wide`]), AVX2 sixteen positions in two
//! vectors ([`super::avx2_wide`]). The sums and the rounding are the portable kernel's, bit for
//! bit: wrapping int32 sums of exact products, then
//! [`crate::base::requantize::HighWordRequantizer`]'s rounding lane by lane.

use super::shared::{Channels, Isa, Operands, StepKey};
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
use ferrite_hal::op::QConv;
use std::vec::Vec;

/// What an instruction set supplies to the block geometry: its packed units and a tile of
/// channels' products, requantized and stored.
///
/// # Safety
/// Every method may only be called when the CPU has the instruction set's features.
pub(super) trait Wide: Isa + Sized {
    /// [`Isa::ROWS`] rows of [`Wide::WIDTH`] positions, packed for the products.
    type Unit: Copy + Send + Sync + 'static;

    /// Output positions per block.
    const WIDTH: usize;

    /// The most channels one [`Wide::channels`] call computes (8 or 4); fewer left over run
    /// four, then one, at a time.
    const TILE: usize;

    /// A unit of zeros (what the units vector grows with before it is packed).
    fn empty() -> Self::Unit;

    /// Positions `p0..p0 + WIDTH` of `k` rows (where `rows` says) packed `ROWS` rows to a unit
    /// (int8 inputs as the products want them); rows past `k` read as zeros.
    ///
    /// # Safety
    /// As the trait's; every row `i < k` has bytes `p0..p0 + WIDTH` from its offset within `x`.
    unsafe fn pack_block(
        x: &[u8],
        rows: RowsAt<'_>,
        at: [usize; 2],
        signed: bool,
        units: &mut [Self::Unit],
    );

    /// Channels `o..o + B`'s sums over the packed units, offset by their bases, requantized
    /// and narrowed into outputs `p0..p0 + WIDTH` of their rows (`plane` apart in `y`).
    ///
    /// # Safety
    /// As the trait's; channels below `o + B` have `units.len()` words, bases and
    /// requantizations; `y` holds their rows.
    unsafe fn channels<const B: usize, Y: QuantInt>(
        state: &WideState<Self>,
        o: usize,
        at: [usize; 2],
        y: &mut [Y],
    );
}

/// Where a block's rows lie in its input: row `i` at `i·plane` (a pointwise convolution's
/// input planes, or an unfolded matrix's rows), or at `taps[i]` (the taps of a stride-1
/// convolution's windows in its padded planes, read in place); a block's positions from there.
#[derive(Clone, Copy)]
pub(super) enum RowsAt<'a> {
    Planes(usize),
    Taps(&'a [usize]),
}

/// A product step's kept state: its channels' weight words, bases and requantizations, and
/// the block's packed rows.
pub(super) struct WideState<I: Wide> {
    pub(super) channels: Channels<I>,
    pub(super) units: Vec<I::Unit>,
}

impl<I: Wide> WideState<I> {
    /// The state of a product of `k` rows into `oc` channels, for inputs of the signedness.
    #[inline(always)]
    fn new(ops: &Operands<'_>, k: usize, oc: usize, signed: bool) -> WideState<I> {
        WideState {
            channels: Channels::<I>::new(ops, k, oc, signed),
            units: Vec::new(),
        }
    }

    /// Whether the state holds `oc` channels of `k` rows (their weight words, bases and
    /// requantizations) — what [`Wide::channels`] reads — and, if so, sizes the packed block
    /// for them.
    #[inline(always)]
    fn ready(&mut self, k: usize, oc: usize) -> bool {
        let ch = &self.channels;
        let units = ch.units;
        let holds = units == k.div_ceil(I::ROWS)
            && ch.words.len() >= oc * units
            && ch.bases.len() >= oc
            && ch.lanes.len() >= oc;
        if holds {
            self.units.resize(units, I::empty());
        }
        holds
    }
}

/// Pointwise convolution (`Y[o, p] = base[o] + Σ_i W[o, i]·X[i, p]`) a block of positions at a
/// time ([`product_rows`]). `None` (the block-of-eight kernels run) for 16-bit activations or a
/// plane smaller than a block; `Some(false)` when an operand is shorter than the sizes say.
/// Inlined into each instruction set's entry point.
#[inline(always)]
pub(super) fn pointwise<I: Wide, X: QuantInt, Y: QuantInt>(
    key: StepKey,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
) -> Option<bool> {
    let (c, oc, plane) = (d.c, d.oc, d.h * d.w);
    if X::WIDE || Y::WIDE || plane < I::WIDTH || c == 0 {
        return None;
    }
    let bytes: &[u8] = bytemuck::cast_slice(x);
    if !super::shared::operands_fit(ops, d, c, [bytes.len(), y.len()]) {
        return Some(false);
    }
    let signed = X::MIN < 0;
    let mut kept = ops
        .ctx
        .take(key, || WideState::<I>::new(ops, c, oc, signed));
    let mut done = true;
    for b in 0..d.n {
        let xb = &bytes[b * c * plane..(b + 1) * c * plane];
        let yb = &mut y[b * oc * plane..(b + 1) * oc * plane];
        done &= product_rows(kept.state(), xb, [c, plane, oc], signed, yb);
    }
    ops.ctx.keep(kept);
    Some(done)
}

/// Regular convolution (one group) on its windows unfolded: each input channel padded with its
/// zero point once ([`super::shared::pad_interior`]), then row `(ci·kh + ky)·kw + kx` of a `[k,
/// positions]` matrix gathered from it by a table of each position's first tap, and the
/// product of [`pointwise`] over that matrix. For the convolutions whose taps the
/// block-of-eight kernels cannot read in place (strides, rows narrower than a vector), whose
/// matrix is small and that have at least `min_channels` output channels (few share too
/// little of the gathering: VWW's first layer, eight channels, took 20 µs by the
/// block-of-eight kernels, 30 µs so with VNNI); `None` for the others. Inlined into each
/// instruction set's entry point.
#[inline(always)]
pub(super) fn unfolded<I: Wide, X: QuantInt, Y: QuantInt>(
    key: StepKey,
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
    min_channels: usize,
) -> Option<bool> {
    let [kh, kw] = c.window.kernel;
    let [sh, sw] = c.window.stride;
    let (k, positions) = (d.c * kh * kw, d.oh * d.ow);
    if X::WIDE || Y::WIDE || c.group > 1 || positions < I::WIDTH || k == 0 || d.h * d.w == 0 {
        return None;
    }
    // Stride 1 on rows of eight or more: the block-of-eight kernels read those taps in place.
    let [ph, pw] = super::shared::padded_extent(c, d, d.c)?;
    let in_place = [sh, sw] == [1, 1] && (d.oh - 1) * pw + d.ow >= 8 && d.ow >= 8;
    if in_place && d.ow >= I::WIDTH && d.oc >= min_channels {
        return in_place_product::<I, X, Y>(key, c, ops, d, x, y, [ph, pw]);
    }
    // Where the block-of-eight kernels would gather the matrix too, or strided rows whose
    // matrix is within the bound (gathered a row run at a time, [`super::shared::gather_matrix`]).
    let reading = super::shared::reading_of(in_place, [k, positions, d.ow], 0);
    let matrix = reading == super::shared::Reading::Matrix
        || (!in_place && d.ow >= 16 && k * positions <= super::shared::MAX_UNFOLDED);
    if !matrix || d.oc < min_channels {
        return None;
    }
    let bytes: &[u8] = bytemuck::cast_slice(x);
    if !super::shared::operands_fit(ops, d, k, [bytes.len(), y.len()]) {
        return Some(false);
    }
    let signed = X::MIN < 0;
    let zero = c.requantize.input_zero as u8;
    let build = || Unfolded {
        input: PaddedInput::<I>::new(c, ops, d, [ph, pw], signed),
        windows: super::shared::Windows::new([d.oh, d.ow], [sh, sw], pw),
        matrix: std::vec![0u8; k * positions],
    };
    let mut kept = ops.ctx.take(key, build);
    let state = kept.state();
    let mut done = true;
    for b in 0..d.n {
        let input = &mut state.input;
        input.pad(c, d, bytes, b);
        let (taps, windows) = (&input.taps, &state.windows);
        super::shared::gather_matrix(&mut state.matrix, &input.padded, taps, windows, zero);
        let yb = &mut y[b * d.oc * positions..(b + 1) * d.oc * positions];
        let rows = [k, positions, d.oc];
        done &= product_rows(&mut input.wide, &state.matrix, rows, signed, yb);
    }
    ops.ctx.keep(kept);
    Some(done)
}

/// A stride-1 regular convolution whose output rows hold a block or more, its taps read in
/// place: each input channel padded with its zero point once, then for each block of an
/// output row (the last overlapping the one before where the row is not a multiple of the
/// block), row `(ci·kh + ky)·kw + kx` of the block packed straight from the padded planes at
/// that tap's offset ([`RowsAt::Taps`]), and every channel's outputs from it as [`pointwise`]'s.
/// No unfolded matrix (ResNet-8's 32 × 32 layers would need 147 KB); the block-of-eight kernels
/// read these taps in place too, but their sums go through memory before requantization.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn in_place_product<I: Wide, X: QuantInt, Y: QuantInt>(
    key: StepKey,
    c: &QConv,
    ops: &Operands<'_>,
    d: &ConvDims,
    x: &[X],
    y: &mut [Y],
    [ph, pw]: [usize; 2],
) -> Option<bool> {
    let [kh, kw] = c.window.kernel;
    let (k, positions) = (d.c * kh * kw, d.oh * d.ow);
    let bytes: &[u8] = bytemuck::cast_slice(x);
    if !super::shared::operands_fit(ops, d, k, [bytes.len(), y.len()]) {
        return Some(false);
    }
    let signed = X::MIN < 0;
    let build = || PaddedInput::<I>::new(c, ops, d, [ph, pw], signed);
    let mut kept = ops.ctx.take(key, build);
    let state = kept.state();
    // Every block's farthest byte: the last tap's offset, the last row's last block, a block.
    let reach = state.taps.last().copied().unwrap_or(0) + (d.oh - 1) * pw + d.ow;
    let complete =
        state.taps.len() == k && reach <= state.padded.len() && state.wide.ready(k, d.oc);
    if !complete {
        ops.ctx.keep(kept);
        return Some(false);
    }
    for b in 0..d.n {
        state.pad(c, d, bytes, b);
        let yb = &mut y[b * d.oc * positions..(b + 1) * d.oc * positions];
        for oy in 0..d.oh {
            for start in 0..d.ow.div_ceil(I::WIDTH) {
                let ox = (I::WIDTH * start).min(d.ow - I::WIDTH);
                let rows = RowsAt::Taps(&state.taps);
                // SAFETY: every tap's block from `oy·pw + ox` ends within `reach` (checked);
                // only reached from an instruction set's entry point.
                unsafe {
                    I::pack_block(
                        &state.padded,
                        rows,
                        [k, oy * pw + ox],
                        signed,
                        &mut state.wide.units,
                    )
                };
                // SAFETY: `complete`; the channels' rows of `positions` outputs are within `yb`.
                unsafe { channel_tiles(&state.wide, d.oc, [positions, oy * d.ow + ox], yb) };
            }
        }
    }
    ops.ctx.keep(kept);
    Some(true)
}

/// A regular convolution's kept state for [`in_place_product`] (all of it) and [`unfolded`]:
/// the product's, the padded input planes (their borders the zero point, written once) and
/// padding shuffles, and each tap's offset in them.
struct PaddedInput<I: Wide> {
    wide: WideState<I>,
    /// `[ph, pw]`: a padded plane's rows and row length.
    extent: [usize; 2],
    padded: Vec<u8>,
    expansion: Option<super::shared::Expansion>,
    taps: Vec<usize>,
}

impl<I: Wide> PaddedInput<I> {
    /// The state of a regular convolution on `[ph, pw]` padded planes (its operands checked).
    #[inline(always)]
    fn new(
        c: &QConv,
        ops: &Operands<'_>,
        d: &ConvDims,
        [ph, pw]: [usize; 2],
        signed: bool,
    ) -> PaddedInput<I> {
        let [kh, kw] = c.window.kernel;
        let zero = c.requantize.input_zero as u8;
        PaddedInput {
            wide: WideState::<I>::new(ops, d.c * kh * kw, d.oc, signed),
            extent: [ph, pw],
            padded: std::vec![zero; d.c * ph * pw],
            expansion: super::shared::Expansion::new(d, c.window.pads, [ph, pw], zero),
            taps: super::shared::window_taps(d.c, [kh, kw], c.window.dilation, [ph, pw]),
        }
    }

    /// Batch `b`'s input planes (of `x`, every batch's) into the padded planes' interiors.
    #[inline(always)]
    fn pad(&mut self, c: &QConv, d: &ConvDims, x: &[u8], b: usize) {
        let plane = d.h * d.w;
        let [ph, pw] = self.extent;
        let xb = x.get(b * d.c * plane..(b + 1) * d.c * plane).unwrap_or(&[]);
        let planes = xb
            .chunks_exact(plane.max(1))
            .zip(self.padded.chunks_exact_mut((ph * pw).max(1)));
        for (input, padded) in planes {
            let expansion = self.expansion.as_ref();
            super::shared::pad_interior::<I>(expansion, input, d, c.window.pads, padded, pw, 0);
        }
    }
}

/// A regular convolution's kept state for [`unfolded`]: the padded input's, where the windows
/// lie in it, and the unfolded matrix.
struct Unfolded<I: Wide> {
    input: PaddedInput<I>,
    windows: super::shared::Windows,
    matrix: Vec<u8>,
}

/// `Y[o, p] = base[o] + Σ_i W[o, i]·X[i, p]` for `x` of `k` rows of `plane ≥ WIDTH` positions:
/// each block of positions packed once ([`Wide::pack_block`]), then [`Wide::TILE`] channels at a
/// time, four, then one; the last block overlaps the one before when the plane is not a
/// multiple of the block (those outputs computed twice, identically). False (nothing written)
/// when the state does not hold `oc` channels of `k` rows or an operand is short.
#[inline(always)]
fn product_rows<I: Wide, Y: QuantInt>(
    state: &mut WideState<I>,
    x: &[u8],
    [k, plane, oc]: [usize; 3],
    signed: bool,
    y: &mut [Y],
) -> bool {
    let complete =
        plane >= I::WIDTH && x.len() >= k * plane && y.len() >= oc * plane && state.ready(k, oc);
    if !complete {
        return false;
    }
    for start in 0..plane.div_ceil(I::WIDTH) {
        let p0 = (I::WIDTH * start).min(plane - I::WIDTH);
        // SAFETY: `k` rows of `plane` bytes, `p0 + WIDTH ≤ plane`; only reached from an
        // instruction set's entry point.
        unsafe { I::pack_block(x, RowsAt::Planes(plane), [k, p0], signed, &mut state.units) };
        // SAFETY: channels below `oc` have `units` words each (`complete`), and their rows
        // `plane` long are within `y`.
        unsafe { channel_tiles(state, oc, [plane, p0], y) };
    }
    true
}

/// Every channel's outputs `p0..p0 + WIDTH` (rows `plane` apart in `y`) from the packed block:
/// [`Wide::TILE`] channels at a time, then four, then one.
///
/// # Safety
/// As [`Wide::channels`]' for every channel below `oc`.
#[inline(always)]
unsafe fn channel_tiles<I: Wide, Y: QuantInt>(
    state: &WideState<I>,
    oc: usize,
    at: [usize; 2],
    y: &mut [Y],
) {
    let mut o = 0;
    while o < oc {
        let step = match oc - o {
            left if left >= I::TILE => I::TILE,
            4.. => 4,
            _ => 1,
        };
        // SAFETY: the caller's.
        unsafe {
            match step {
                8 => I::channels::<8, Y>(state, o, at, y),
                4 => I::channels::<4, Y>(state, o, at, y),
                _ => I::channels::<1, Y>(state, o, at, y),
            }
        }
        o += step;
    }
}
