//! The host's products with the weights packed in panels of rows (`[k, 64]`, then narrower;
//! built once per prepared step): each output row's sum is a vector lane, `x[j]` broadcast
//! and multiplied into up to 64 rows' lanes by fused multiply-adds, so no sum is reduced
//! across lanes and a panel is one contiguous stream; the input's part of every step's gates
//! is one product before the first step. The sums run in another order than `reference::dot`'s (and
//! fused), so they differ from the portable build's in the last bits, as the other SIMD
//! builds' float products do; the conformance suites hold every build to the same
//! tolerances. The recurrent product streams `R` (64 KiB for 64 units) from the L2 cache at
//! every step, which bounds it. LSTM 64 units × 49 steps on Zen 4: 73.7 → 48.8 µs with the
//! cell's and the activations' changes (`docs/benchmarks.md`).

#![allow(unsafe_code)]

use super::operands::Operands;
use crate::base::aligned::Aligned;
use crate::base::context::{Kept, StepContext};
use crate::isa::lanes::Lanes;
use crate::isa::{level, Level};
use core::arch::x86_64::*;
use std::vec::Vec;

/// What the packed weights were built from: the operands' addresses and lengths and
/// the layer's sizes.
#[derive(PartialEq)]
pub(super) struct Key {
    w: (usize, usize),
    r: (usize, usize),
    sizes: [usize; 3],
}

/// `W` and `R` in panels ([`pack`]), and the input's part of every step's gates.
pub(super) struct Packed {
    /// `W`, packed.
    w: Aligned,
    /// `R`, packed.
    r: Aligned,
    /// The panels of the layer's rows ([`panels`]), and the same last to first.
    panels: Vec<(usize, usize)>,
    reversed: Vec<(usize, usize)>,
    /// `X·Wᵀ + Wb` for every step, `[seq, batch, rows]` ([`Packed::project`]).
    projected: Vec<f32>,
}

/// The layer's packed weights (kept with a prepared step), where the CPU runs the AVX2
/// build (AVX2 and FMA) and the weights are constants the layer's checks have sized.
pub(super) fn packed(
    ctx: StepContext<'_>,
    o: &Operands<'_>,
    rows: usize,
    input: usize,
    hidden: usize,
) -> Option<Kept<Key, Packed>> {
    if !o.constant_weights || level() < Level::Avx2 {
        return None;
    }
    let (w, r) = (o.w.get(..rows * input)?, o.r.get(..rows * hidden)?);
    let at = |m: &[f32]| (m.as_ptr() as usize, m.len());
    let key = Key {
        w: at(w),
        r: at(r),
        sizes: [rows, input, hidden],
    };
    Some(ctx.take(key, || {
        let panels: Vec<_> = panels(rows).collect();
        Packed {
            w: pack(w, rows, input),
            r: pack(r, rows, hidden),
            reversed: panels.iter().rev().copied().collect(),
            panels,
            projected: Vec::new(),
        }
    }))
}

impl Packed {
    /// The input's part of the gates of all `steps` rows of `x` (every time step and batch
    /// row) at once: `W` is read once a row, from the L1 cache, not streamed with `R`
    /// at every step.
    pub(super) fn project(
        &mut self,
        x: &[f32],
        bias: Option<&[f32]>,
        [steps, rows, input]: [usize; 3],
    ) {
        self.projected.resize(steps * rows, 0.0);
        product(
            x,
            self.w.as_slice(),
            &self.panels,
            bias,
            [steps, rows, input],
            &mut self.projected,
        );
    }

    /// The hidden state's part of a step's gates: `out = h·Rᵀ + Rb`; with `backwards`,
    /// the panels last to first. Alternate steps alternate the direction, so a step starts
    /// on the panels the one before ended on, still in the L1 cache (`R` of a 64-unit LSTM
    /// is 64 KiB, twice Zen 4's L1: streamed from L2 at every step, it had bound the
    /// products). Each output is the same sum either way.
    pub(super) fn recur(
        &self,
        h: &[f32],
        bias: Option<&[f32]>,
        sizes: [usize; 3],
        out: &mut [f32],
        backwards: bool,
    ) {
        let panels = match backwards {
            true => &self.reversed,
            false => &self.panels,
        };
        product(h, self.r.as_slice(), panels, bias, sizes, out);
    }

    /// `len` values of the projected gates from `start` (`None` where
    /// [`Packed::project`] did not compute them).
    pub(super) fn projected(&mut self, start: usize, len: usize) -> Option<&mut [f32]> {
        self.projected.get_mut(start..start + len)
    }
}

/// The panels `rows` outputs are computed in (first row, width): 64 rows while 64 remain,
/// then 32 and 16 where that many remain, then eight (the last one padded with zero rows).
fn panels(rows: usize) -> impl Iterator<Item = (usize, usize)> {
    let mut g = 0;
    core::iter::from_fn(move || {
        let width = match rows.checked_sub(g)? {
            0 => return None,
            left if left >= 64 => 64,
            left if left >= 32 => 32,
            left if left >= 16 => 16,
            _ => 8,
        };
        g += width;
        Some((g - width, width))
    })
}

/// `m` (`[rows, k]`) in panels: each panel of `P` rows ([`panels`]) as `[k, P]`, one
/// after another, so a panel's products read one contiguous stream; from a 64-byte
/// boundary, so that no vector of a panel straddles two cache lines.
fn pack(m: &[f32], rows: usize, k: usize) -> Aligned {
    let mut packed = Aligned::zeroed(rows.next_multiple_of(8) * k);
    let mut slots = packed.as_mut_slice().iter_mut();
    for (g, width) in panels(rows) {
        for j in 0..k {
            for r in g..g + width {
                if let Some(slot) = slots.next() {
                    *slot = m
                        .get(r * k + j)
                        .copied()
                        .filter(|_| r < rows)
                        .unwrap_or(0.0);
                }
            }
        }
    }
    packed
}

/// `out[b, g] = Σ_j a[b, j] · m[g, j] (+ bias[g])` for `b < batch` from `m` packed in
/// `panels`; nothing where an operand is shorter than the sizes say (the layer checked
/// them).
fn product(
    a: &[f32],
    packed: &[f32],
    panels: &[(usize, usize)],
    bias: Option<&[f32]>,
    [batch, rows, k]: [usize; 3],
    out: &mut [f32],
) {
    let fits = a.len() >= batch * k
        && packed.len() == rows.next_multiple_of(8) * k
        && out.len() >= batch * rows
        && bias.is_none_or(|v| v.len() >= rows)
        && panels
            .iter()
            .all(|&(g, w)| g + w <= rows.next_multiple_of(8));
    if !fits {
        return;
    }
    // Sixteen-lane vectors where the CPU runs the AVX-512 build: half the instructions.
    let wide = level() == Level::Avx512;
    for b in 0..batch {
        let x = &a[b * k..(b + 1) * k];
        let y = &mut out[b * rows..(b + 1) * rows];
        for &(g, width) in panels {
            let weights = &packed[g * k..(g + width) * k];
            let y = &mut y[g..rows.min(g + width)];
            // SAFETY: `packed` checked that the CPU has AVX2 and FMA, and `wide` that it
            // has AVX-512F; the panel holds `k·width` values.
            unsafe {
                match (width, wide) {
                    (64, true) => panel_sums_avx512::<4, 2>(x, weights, bias, g, y),
                    (32, true) => panel_sums_avx512::<2, 4>(x, weights, bias, g, y),
                    (16, true) => panel_sums_avx512::<1, 8>(x, weights, bias, g, y),
                    (64, _) => panel_sums_avx2::<8, 1>(x, weights, bias, g, y),
                    (32, _) => panel_sums_avx2::<4, 2>(x, weights, bias, g, y),
                    (16, _) => panel_sums_avx2::<2, 4>(x, weights, bias, g, y),
                    _ => panel_sums_avx2::<1, 8>(x, weights, bias, g, y),
                }
            }
        }
    }
}

/// [`panel_sums`] with eight-lane vectors.
///
/// # Safety
/// The CPU has AVX2 and FMA; as [`panel_sums`].
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn panel_sums_avx2<const T: usize, const U: usize>(
    x: &[f32],
    panel: &[f32],
    bias: Option<&[f32]>,
    g: usize,
    y: &mut [f32],
) {
    panel_sums::<__m256, T, U>(x, panel, bias, g, y)
}

/// [`panel_sums`] with sixteen-lane vectors.
///
/// # Safety
/// The CPU has AVX-512F; as [`panel_sums`].
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn panel_sums_avx512<const T: usize, const U: usize>(
    x: &[f32],
    panel: &[f32],
    bias: Option<&[f32]>,
    g: usize,
    y: &mut [f32],
) {
    panel_sums::<__m512, T, U>(x, panel, bias, g, y)
}

/// The sums of one panel of `L·T` rows (`[k, L·T]`, `L` the vector's lanes) into `y` (the
/// first `y.len()` ≤ L·T of them: the last panel's rows past the layer's are padding),
/// biases from row `g` on: eight vectors of sums in flight, `U` interleaved partial sums
/// of each of the `T` where the panel is narrower than eight vectors (one chain of fused
/// multiply-adds would wait on itself).
///
/// # Safety
/// The instruction set of `V`; `panel` holds `k·L·T` ≤ `64·k` values; `T·U` is 8.
#[inline(always)]
unsafe fn panel_sums<V: Lanes, const T: usize, const U: usize>(
    x: &[f32],
    panel: &[f32],
    bias: Option<&[f32]>,
    g: usize,
    y: &mut [f32],
) {
    let lanes_of = V::WIDTH;
    let width = lanes_of * T;
    let mut acc = [[V::zero(); T]; U];
    let mut lanes = [0.0f32; 64];
    match bias.and_then(|v| v.get(g..g + width)) {
        Some(v) => {
            for (t, acc) in acc[0].iter_mut().enumerate() {
                // SAFETY: `v` holds L·T values.
                *acc = unsafe { V::load(v.as_ptr().add(lanes_of * t)) };
            }
        }
        None => {
            // No bias, or the last panel's, short of L·T rows: lane by lane.
            for (l, lane) in lanes.iter_mut().enumerate().take(width) {
                *lane = bias.and_then(|v| v.get(g + l)).copied().unwrap_or(0.0);
            }
            for (t, acc) in acc[0].iter_mut().enumerate() {
                // SAFETY: `lanes` holds 64 ≥ L·T values.
                *acc = unsafe { V::load(lanes.as_ptr().add(lanes_of * t)) };
            }
        }
    }
    let m = panel.as_ptr();
    let (groups, rest) = x.as_chunks::<U>();
    for (group, &xs) in groups.iter().enumerate() {
        for (u, (acc, &xj)) in acc.iter_mut().zip(xs.iter()).enumerate() {
            let xv = V::splat(xj);
            // SAFETY: row `U·group + u` of the panel holds L·T values (the caller's bound).
            let row = unsafe { m.add((U * group + u) * width) };
            for (t, acc) in acc.iter_mut().enumerate() {
                *acc = V::fused(*acc, xv, unsafe { V::load(row.add(lanes_of * t)) });
            }
        }
    }
    for (j, &xj) in rest.iter().enumerate() {
        let xv = V::splat(xj);
        // SAFETY: as above, for the rows after the last full group.
        let row = unsafe { m.add((U * groups.len() + j) * width) };
        for (t, acc) in acc[0].iter_mut().enumerate() {
            *acc = V::fused(*acc, xv, unsafe { V::load(row.add(lanes_of * t)) });
        }
    }
    let whole = y.len() == width;
    for t in 0..T {
        let mut sum = acc[0][t];
        for partial in &acc[1..] {
            sum = V::add(sum, partial[t]);
        }
        // SAFETY: `y` holds L·T values where it is whole; `lanes` 64 ≥ L·T.
        unsafe {
            match whole {
                true => V::store(y.as_mut_ptr().add(lanes_of * t), sum),
                false => V::store(lanes.as_mut_ptr().add(lanes_of * t), sum),
            }
        }
    }
    if !whole {
        y.iter_mut().zip(lanes).for_each(|(y, sum)| *y = sum);
    }
}
