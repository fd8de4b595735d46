//! One direction of an ONNX RNN, GRU or LSTM over a whole sequence, in place in its outputs:
//! `Y_h` (and `Y_c`) hold the running state, each step's `H` is also written to `Y`.

use crate::base::context::StepContext;
use crate::micro::activation::activate;
use crate::CpuError;
use ferrite_hal::op::{Cell, Recurrent};
use ferrite_hal::Selection;

/// The operands of one recurrent layer direction (f32, shapes checked by the verifier).
pub struct Operands<'a> {
    /// `[seq, batch, input]`.
    pub x: &'a [f32],
    /// `[gates·hidden, input]`.
    pub w: &'a [f32],
    /// `[gates·hidden, hidden]`.
    pub r: &'a [f32],
    /// `[2·gates·hidden]`: W's biases, then R's.
    pub b: Option<&'a [f32]>,
    /// `[batch, hidden]`.
    pub initial_h: Option<&'a [f32]>,
    /// `[batch, hidden]` (LSTM).
    pub initial_c: Option<&'a [f32]>,
    /// `[3·hidden]`: peepholes i, o, f (LSTM).
    pub p: Option<&'a [f32]>,
    /// Whether `w` and `r` are the model's constants (not computed in the arena), so that a
    /// host may keep them packed between runs.
    pub constant_weights: bool,
}

/// The sizes of a recurrent layer.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    /// Time steps.
    pub seq: usize,
    /// Sequences in the batch.
    pub batch: usize,
    /// Features per input step.
    pub input: usize,
    /// Hidden units.
    pub hidden: usize,
}

/// `out[b, g] = Σ_k a[b, k] · m[g, k] (+ bias[g])` for `b < batch`, `g < rows`: four rows of
/// `m` at a time ([`dot4`]), so four independent sums are in flight, then one row at a time.
/// Out of line, as the layer: inlined into the SIMD step function (whose inlining budget is
/// spent by then) its iterators stayed calls and it ran 3× slower than this baseline build.
#[inline(never)]
fn times_transposed(
    a: &[f32],
    m: &[f32],
    bias: Option<&[f32]>,
    batch: usize,
    rows: usize,
    k: usize,
    out: &mut [f32],
) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if avx2::times_transposed(a, m, bias, [batch, rows, k], out) {
        return;
    }
    for b in 0..batch {
        let Some(row) = a.get(b * k..(b + 1) * k) else {
            return;
        };
        // Every row reads and writes through `get` (no panic path in a firmware; the layer
        // checked every length up front).
        let mut g = 0;
        while g + 4 <= rows {
            let weights = |r: usize| m.get((g + r) * k..(g + r + 1) * k).unwrap_or(&[]);
            let sums = dot4(row, [weights(0), weights(1), weights(2), weights(3)]);
            for (r, sum) in sums.into_iter().enumerate() {
                let bias = bias.and_then(|v| v.get(g + r)).copied().unwrap_or(0.0);
                if let Some(out) = out.get_mut(b * rows + g + r) {
                    *out = sum + bias;
                }
            }
            g += 4;
        }
        for g in g..rows {
            let (Some(weights), Some(out)) = (m.get(g * k..(g + 1) * k), out.get_mut(b * rows + g))
            else {
                return;
            };
            *out = dot(row, weights) + bias.and_then(|v| v.get(g)).copied().unwrap_or(0.0);
        }
    }
}

/// [`times_transposed`] in AVX2 registers: the eight partial sums of [`dot`] are a vector's
/// lanes, multiplied and added (never fused) in the same order, so every result equals the
/// portable one bit for bit; eight weight rows at a time keep eight chains of additions in
/// flight. (LLVM leaves the portable form scalar on x86-64: 4 × 8 partial sums spill.)
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[allow(unsafe_code)]
mod avx2 {
    use super::pairwise;
    use core::arch::x86_64::*;

    /// [`super::times_transposed`] when the CPU runs the AVX2 build and the operands hold what
    /// the sizes say (true: done).
    pub(super) fn times_transposed(
        a: &[f32],
        m: &[f32],
        bias: Option<&[f32]>,
        [batch, rows, k]: [usize; 3],
        out: &mut [f32],
    ) -> bool {
        let fits = a.len() >= batch * k
            && m.len() >= rows * k
            && out.len() >= batch * rows
            && bias.is_none_or(|v| v.len() >= rows);
        if !fits || crate::isa::level() < crate::isa::Level::Avx2 {
            return false;
        }
        // SAFETY: the CPU has AVX2 (`simd::level`); the lengths are checked above.
        unsafe { product(a, m, bias, batch, rows, k, out) };
        true
    }

    /// The products of [`times_transposed`].
    ///
    /// # Safety
    /// The CPU has AVX2; `a` holds `batch·k` values, `m` `rows·k`, `out` `batch·rows` and
    /// `bias`, if any, `rows`.
    #[target_feature(enable = "avx2")]
    unsafe fn product(
        a: &[f32],
        m: &[f32],
        bias: Option<&[f32]>,
        batch: usize,
        rows: usize,
        k: usize,
        out: &mut [f32],
    ) {
        let rest = k % 8;
        // The last partial chunk's lanes: the values past `rest` read as +0, and adding
        // +0 · +0 leaves a partial sum as it is (no sum starting at +0 becomes −0).
        let mask = _mm256_cmpgt_epi32(
            _mm256_set1_epi32(rest as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        );
        for b in 0..batch {
            let mut g = 0;
            // SAFETY: row b of `a`, rows g.. of `m` and their outputs lie within them (the
            // caller's bounds).
            unsafe {
                while g + 8 <= rows {
                    block::<8>(a, m, bias, [b, g, rows, k], mask, out);
                    g += 8;
                }
                while g < rows {
                    block::<1>(a, m, bias, [b, g, rows, k], mask, out);
                    g += 1;
                }
            }
        }
    }

    /// [`pairwise`] of eight vectors' lanes at once, in one vector: `s_i + s_{i+4}`, then
    /// `(s0 + s4) + (s2 + s6)` and `(s1 + s5) + (s3 + s7)`, then their sum — each addition the
    /// scalar form's, with the same operands (IEEE addition commutes exactly).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn pairwise_eight(v: [__m256; 8]) -> __m256 {
        // Lanes i + (i + 4) of rows r and r + 1: [a(r), a(r + 1)], a_i = s_i + s_{i+4}.
        let halves = |r: usize| {
            let low = _mm256_permute2f128_ps::<0x20>(v[r], v[r + 1]);
            let high = _mm256_permute2f128_ps::<0x31>(v[r], v[r + 1]);
            _mm256_add_ps(low, high)
        };
        let [a01, a23, a45, a67] = [halves(0), halves(2), halves(4), halves(6)];
        // [a0 + a2, a1 + a3] of rows r, r + 2 (lane 0) and r + 1, r + 3 (lane 1).
        let pairs = |x: __m256, y: __m256| {
            let even = _mm256_shuffle_ps::<0b01_00_01_00>(x, y);
            let odd = _mm256_shuffle_ps::<0b11_10_11_10>(x, y);
            _mm256_add_ps(even, odd)
        };
        let (b0123, b4567) = (pairs(a01, a23), pairs(a45, a67));
        // b0 + b1 of rows [0, 2, 4, 6 | 1, 3, 5, 7], then in order.
        let first = _mm256_shuffle_ps::<0b10_00_10_00>(b0123, b4567);
        let second = _mm256_shuffle_ps::<0b11_01_11_01>(b0123, b4567);
        let sums = _mm256_add_ps(first, second);
        _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
    }

    /// Rows `g..g + B` of `m` times row `b` of `a`, each summed as [`super::dot`] sums it.
    ///
    /// # Safety
    /// The CPU has AVX2; the rows and their outputs lie within `a`, `m`, `bias` and `out`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn block<const B: usize>(
        a: &[f32],
        m: &[f32],
        bias: Option<&[f32]>,
        [b, g, rows, k]: [usize; 4],
        mask: __m256i,
        out: &mut [f32],
    ) {
        let (chunks, rest) = (k / 8, k % 8);
        // SAFETY: the caller's bounds.
        unsafe {
            let x = a.as_ptr().add(b * k);
            let weights: [*const f32; B] = core::array::from_fn(|r| m.as_ptr().add((g + r) * k));
            let mut acc = [_mm256_setzero_ps(); B];
            for c in 0..chunks {
                let xs = _mm256_loadu_ps(x.add(8 * c));
                for (acc, w) in acc.iter_mut().zip(weights) {
                    *acc = _mm256_add_ps(*acc, _mm256_mul_ps(xs, _mm256_loadu_ps(w.add(8 * c))));
                }
            }
            if rest > 0 {
                let xs = _mm256_maskload_ps(x.add(8 * chunks), mask);
                for (acc, w) in acc.iter_mut().zip(weights) {
                    let ys = _mm256_maskload_ps(w.add(8 * chunks), mask);
                    *acc = _mm256_add_ps(*acc, _mm256_mul_ps(xs, ys));
                }
            }
            if let (8, Ok(eight)) = (B, <[__m256; 8]>::try_from(&acc[..])) {
                let mut sums = pairwise_eight(eight);
                if let Some(bias) = bias {
                    sums = _mm256_add_ps(sums, _mm256_loadu_ps(bias.as_ptr().add(g)));
                }
                _mm256_storeu_ps(out.as_mut_ptr().add(b * rows + g), sums);
                return;
            }
            for (r, acc) in acc.iter().enumerate() {
                let mut sums = [0.0f32; 8];
                _mm256_storeu_ps(sums.as_mut_ptr(), *acc);
                let bias = bias.map_or(0.0, |v| *v.get_unchecked(g + r));
                *out.get_unchecked_mut(b * rows + g + r) = pairwise(sums) + bias;
            }
        }
    }
}

/// An LSTM's cells from its activated gates: `c = f ⊙ c + i ⊙ g` (with `f = 1 − i` where the
/// input and forget gates are coupled).
#[inline(always)]
fn new_cells(cells: &mut [f32], input: &[f32], forget: &[f32], candidate: &[f32], coupled: bool) {
    let gates = input.iter().zip(forget).zip(candidate);
    for (cell, ((&input, &forget), &candidate)) in cells.iter_mut().zip(gates) {
        let forget = if coupled { 1.0 - input } else { forget };
        *cell = forget * *cell + input * candidate;
    }
}

/// Copies `src` into `dst` as far as both go (equal lengths, after the layer's checks).
#[inline(always)]
fn copy(dst: &mut [f32], src: &[f32]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = s;
    }
}

/// The eight partial sums of a dot product, added pairwise: one fixed order on every build.
#[inline(always)]
fn pairwise(sums: [f32; 8]) -> f32 {
    let [s0, s1, s2, s3, s4, s5, s6, s7] = sums;
    ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))
}

/// `Σ a[i]·b[i]` in eight interleaved partial sums, added pairwise at the end: one fixed order
/// on every build (so the SIMD builds, which keep the eight sums in one vector register, give
/// the portable build's result), and eight independent additions in flight instead of one
/// chain of dependent ones.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let (a8, a_rest) = a.as_chunks::<8>();
    let (b8, b_rest) = b.as_chunks::<8>();
    let mut sums = [0.0f32; 8];
    for (x, y) in a8.iter().zip(b8) {
        for ((sum, &x), &y) in sums.iter_mut().zip(x).zip(y) {
            *sum += x * y;
        }
    }
    for ((sum, &x), &y) in sums.iter_mut().zip(a_rest).zip(b_rest) {
        *sum += x * y;
    }
    pairwise(sums)
}

/// [`dot`] of `a` with four rows at once, each summed exactly as [`dot`] sums it (so the result
/// is the same bit for bit); the four chains of additions overlap instead of waiting on one
/// another.
#[inline(always)]
fn dot4(a: &[f32], m: [&[f32]; 4]) -> [f32; 4] {
    let (a8, a_rest) = a.as_chunks::<8>();
    let [(m0, r0), (m1, r1), (m2, r2), (m3, r3)] = m.map(|row| row.as_chunks::<8>());
    let mut sums = [[0.0f32; 8]; 4];
    for ((((x, y0), y1), y2), y3) in a8.iter().zip(m0).zip(m1).zip(m2).zip(m3) {
        for (sums, y) in sums.iter_mut().zip([y0, y1, y2, y3]) {
            for ((sum, &x), &y) in sums.iter_mut().zip(x).zip(y) {
                *sum += x * y;
            }
        }
    }
    for (sums, rest) in sums.iter_mut().zip([r0, r1, r2, r3]) {
        for ((sum, &x), &y) in sums.iter_mut().zip(a_rest).zip(rest) {
            *sum += x * y;
        }
    }
    sums.map(pairwise)
}

/// Runs the layer: `y` `[seq, batch, hidden]`, `h` and `c` the final states, `scratch` at
/// least `2·batch·gates·hidden`. Operands shorter than `dims` say are an error (checked once,
/// so the loops index freely).
#[allow(clippy::too_many_arguments)]
pub fn recurrent<const OPS: Selection>(
    #[allow(unused_variables)] ctx: StepContext<'_>,
    op: &Recurrent,
    dims: Dims,
    o: &Operands<'_>,
    y: &mut [f32],
    h: &mut [f32],
    mut c: Option<&mut [f32]>,
    scratch: &mut [f32],
) -> Result<(), CpuError> {
    let Dims {
        seq,
        batch,
        input,
        hidden,
    } = dims;
    let rows = op.cell.gates() * hidden;
    let state = batch * hidden;
    let lstm = matches!(op.cell, Cell::Lstm { .. });
    let short = |v: Option<&[f32]>, n: usize| v.is_some_and(|v| v.len() < n);
    if o.x.len() < seq * batch * input
        || o.w.len() < rows * input
        || o.r.len() < rows * hidden
        || short(o.b, 2 * rows)
        || short(o.initial_h, state)
        || short(o.initial_c, state)
        || short(o.p, 3 * hidden)
        || y.len() < seq * state
        || h.len() != state
        || c.as_deref().is_some_and(|c| c.len() != state)
        || (lstm && c.is_none())
        || scratch.len() < 2 * batch * rows
    {
        return Err(CpuError::CorruptPlan);
    }
    // Every length was checked above; the accesses below go through `get` and `zip` all the
    // same (no panic path in a firmware), computing nothing where one fell short.
    let Some((from_x, rest)) = scratch.split_at_mut_checked(batch * rows) else {
        return Err(CpuError::CorruptPlan);
    };
    let Some(from_h) = rest.get_mut(..batch * rows) else {
        return Err(CpuError::CorruptPlan);
    };
    match o.initial_h {
        Some(v) => copy(h, v),
        None => h.fill(0.0),
    }
    if let Some(c) = c.as_deref_mut() {
        match o.initial_c {
            Some(v) => copy(c, v),
            None => c.fill(0.0),
        }
    }
    let (wb, rb) = match o.b {
        Some(b) => (b.get(..rows), b.get(rows..2 * rows)),
        None => (None, None),
    };
    let [f, g, hh] = op.activations;
    let clip = |v: &mut [f32]| {
        if op.clip > 0.0 {
            v.iter_mut().for_each(|x| *x = x.clamp(-op.clip, op.clip));
        }
    };
    let width = hidden.max(1);
    // On a host with FMA, constant weights are kept packed with the prepared step.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    let mut packed_weights = fma::packed(ctx, o, rows, input, hidden);
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if let Some(kept) = packed_weights.as_mut() {
        kept.state().project(o.x, wb, [seq * batch, rows, input]);
    }
    for step in 0..seq {
        let t = if op.reverse { seq - 1 - step } else { step };
        let Some(xt) = o.x.get(t * batch * input..(t + 1) * batch * input) else {
            return Err(CpuError::CorruptPlan);
        };
        // The input's part of the gates: computed for every step at once where the weights
        // are kept packed, else here.
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        let projected = match packed_weights.as_mut().map(|kept| kept.state()) {
            Some(state) => {
                state.recur(h, rb, [batch, rows, hidden], from_h, step % 2 == 1);
                state.projected(t * batch * rows, batch * rows)
            }
            None => None,
        };
        #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
        let projected = None;
        let gates_x = match projected {
            Some(projected) => projected,
            None => {
                times_transposed(xt, o.w, wb, batch, rows, input, from_x);
                times_transposed(h, o.r, rb, batch, rows, hidden, from_h);
                &mut *from_x
            }
        };
        for b in 0..batch {
            let (Some(gx), Some(gh), Some(hb)) = (
                gates_x.get_mut(b * rows..(b + 1) * rows),
                from_h.get_mut(b * rows..(b + 1) * rows),
                h.get_mut(b * hidden..(b + 1) * hidden),
            ) else {
                return Err(CpuError::CorruptPlan);
            };
            match op.cell {
                Cell::Rnn => {
                    for (a, &r) in gx.iter_mut().zip(gh.iter()) {
                        *a += r;
                    }
                    clip(gx);
                    activate::<OPS>(f, gx);
                    copy(hb, gx);
                }
                Cell::Gru {
                    linear_before_reset,
                } => {
                    // z and r from both parts; h's recurrent part needs r first.
                    let (Some((zr_x, hx)), Some((zr_h, hh_part))) = (
                        gx.split_at_mut_checked(2 * hidden),
                        gh.split_at_mut_checked(2 * hidden),
                    ) else {
                        return Err(CpuError::CorruptPlan);
                    };
                    for (a, &r) in zr_x.iter_mut().zip(zr_h.iter()) {
                        *a += r;
                    }
                    clip(zr_x);
                    activate::<OPS>(f, zr_x);
                    let (z, reset) = zr_x.split_at(hidden.min(zr_x.len()));
                    if linear_before_reset {
                        for ((x, &r), &part) in hx.iter_mut().zip(reset).zip(hh_part.iter()) {
                            *x += r * part;
                        }
                    } else {
                        // (r ⊙ H)·Rhᵀ + Rbh, recomputed for this batch row.
                        let rh = o.r.get(2 * hidden * hidden..3 * hidden * hidden);
                        let rows = rh.unwrap_or(&[]).chunks_exact(width);
                        for (j, (x, weights)) in hx.iter_mut().zip(rows).enumerate() {
                            let terms = reset.iter().zip(hb.iter()).zip(weights);
                            let dot: f32 = terms.map(|((&r, &h), &w)| r * h * w).sum();
                            let bias = rb.and_then(|v| v.get(2 * hidden + j)).copied();
                            *x += dot + bias.unwrap_or(0.0);
                        }
                    }
                    clip(hx);
                    activate::<OPS>(g, hx);
                    for ((h, &x), &z) in hb.iter_mut().zip(hx.iter()).zip(z) {
                        *h = (1.0 - z) * x + z * *h;
                    }
                }
                Cell::Lstm { input_forget } => {
                    for (a, &r) in gx.iter_mut().zip(gh.iter()) {
                        *a += r;
                    }
                    let Some(cb) = c
                        .as_deref_mut()
                        .and_then(|cells| cells.get_mut(b * hidden..(b + 1) * hidden))
                    else {
                        return Err(CpuError::CorruptPlan);
                    };
                    let Some((ifo, c_gate)) = gx.split_at_mut_checked(3 * hidden) else {
                        return Err(CpuError::CorruptPlan);
                    };
                    let peepholes = o.p.and_then(|p| p.get(..3 * hidden));
                    if peepholes.is_none() {
                        // Without peepholes the gates i, o, f are one activation.
                        clip(ifo);
                        clip(c_gate);
                        activate::<OPS>(f, ifo);
                        activate::<OPS>(g, c_gate);
                    }
                    let Some((i_gate, rest)) = ifo.split_at_mut_checked(hidden) else {
                        return Err(CpuError::CorruptPlan);
                    };
                    let Some((o_gate, f_gate)) = rest.split_at_mut_checked(hidden) else {
                        return Err(CpuError::CorruptPlan);
                    };
                    if let Some(p) = peepholes {
                        let Some((peep_i, rest)) = p.split_at_checked(hidden) else {
                            return Err(CpuError::CorruptPlan);
                        };
                        let Some((peep_o, peep_f)) = rest.split_at_checked(hidden) else {
                            return Err(CpuError::CorruptPlan);
                        };
                        let gates = i_gate.iter_mut().zip(f_gate.iter_mut()).zip(cb.iter());
                        for (((input, forget), &cell), (&pi, &pf)) in
                            gates.zip(peep_i.iter().zip(peep_f))
                        {
                            *input += pi * cell;
                            *forget += pf * cell;
                        }
                        clip(i_gate);
                        clip(f_gate);
                        clip(c_gate);
                        activate::<OPS>(f, i_gate);
                        activate::<OPS>(f, f_gate);
                        activate::<OPS>(g, c_gate);
                        new_cells(cb, i_gate, f_gate, c_gate, input_forget);
                        for ((output, &cell), &po) in o_gate.iter_mut().zip(cb.iter()).zip(peep_o) {
                            *output += po * cell;
                        }
                        clip(o_gate);
                        activate::<OPS>(f, o_gate);
                    } else {
                        new_cells(cb, i_gate, f_gate, c_gate, input_forget);
                    }
                    copy(hb, cb);
                    activate::<OPS>(hh, hb);
                    for (h, &output) in hb.iter_mut().zip(o_gate.iter()) {
                        *h *= output;
                    }
                }
            }
        }
        if let Some(y_t) = y.get_mut(t * state..(t + 1) * state) {
            copy(y_t, h);
        }
    }
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if let Some(kept) = packed_weights {
        ctx.keep(kept);
    }
    Ok(())
}

/// The host's products with the weights packed in panels of rows (`[k, 64]`, then narrower;
/// built once per prepared step): each output row's sum is a vector lane, `x[j]` broadcast
/// and multiplied into up to 64 rows' lanes by fused multiply-adds, so no sum is reduced
/// across lanes and a panel is one contiguous stream; the input's part of every step's gates
/// is one product before the first step. The sums run in another order than [`dot`]'s (and
/// fused), so they differ from the portable build's in the last bits, as the other SIMD
/// builds' float products do; the conformance suites hold every build to the same
/// tolerances. The recurrent product streams `R` (64 KiB for 64 units) from the L2 cache at
/// every step, which bounds it. LSTM 64 units × 49 steps on Zen 4: 73.7 → 48.8 µs with the
/// cell's and the activations' changes (`docs/benchmarks.md`).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[allow(unsafe_code)]
mod fma {
    use super::Operands;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 products equal the portable ones (one [`dot`] per row) bit for bit, on random
    /// sizes — rows past and short of the eight-row blocks, lengths around the eight lanes —
    /// and values of mixed magnitudes and signs, with and without a bias.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[test]
    fn avx2_products_equal_the_portable_ones_bit_for_bit() {
        extern crate std;
        use std::vec::Vec;
        if crate::isa::level() < crate::isa::Level::Avx2 {
            return;
        }
        let mut state = 0x853c_49e6_748f_ea9bu64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for case in 0..300 {
            let (batch, rows, k) = (
                1 + (next() % 3) as usize,
                1 + (next() % 40) as usize,
                (next() % 70) as usize,
            );
            let mut value = || {
                let scale = [1e-3f32, 1.0, 37.0, 1e4][(next() % 4) as usize];
                ((next() % 20_001) as f32 - 10_000.0) / 10_000.0 * scale
            };
            let a: Vec<f32> = (0..batch * k).map(|_| value()).collect();
            let m: Vec<f32> = (0..rows * k).map(|_| value()).collect();
            let bias: Vec<f32> = (0..rows).map(|_| value()).collect();
            let bias = (case % 2 == 0).then_some(&bias[..]);
            let mut got = std::vec![0.0f32; batch * rows];
            assert!(avx2::times_transposed(
                &a,
                &m,
                bias,
                [batch, rows, k],
                &mut got
            ));
            for b in 0..batch {
                for g in 0..rows {
                    let want = dot(&a[b * k..][..k], &m[g * k..][..k]) + bias.map_or(0.0, |v| v[g]);
                    let got = got[b * rows + g];
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "case {case}: {batch}x{rows}x{k}, [{b}, {g}]"
                    );
                }
            }
        }
    }

    /// A test stream of values in ±1 scaled by one of several magnitudes.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    fn values(seed: u64) -> impl FnMut() -> f32 {
        let mut state = seed;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let scale = [1e-3f32, 1.0, 37.0][(state % 3) as usize];
            ((state >> 8) % 20_001) as f32 / 10_000.0 * scale - scale
        }
    }

    /// The host's packed products (fused multiply-adds over `[k, rows]` panels) agree with the
    /// portable ones (one [`dot`] per row, the bias added) to within the rounding of a sum of
    /// `k` products, on random sizes: rows around every panel width (64, 32, 16, 8 and a padded
    /// last panel), lengths around the unrolled groups, several batch rows, with and without a
    /// bias; `W` (projected for all rows) and `R` (one step) of different lengths, so that
    /// neither can stand in for the other.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[test]
    fn packed_products_match_the_portable_ones() {
        extern crate std;
        use std::vec::Vec;
        if crate::isa::level() < crate::isa::Level::Avx2 {
            return;
        }
        let mut value = values(0x853c_49e6_748f_ea9b);
        let mut size = values(0x2545_f491_4f6c_dd1d);
        let mut pick = |n: usize| ((size().abs() * 1e4) as usize) % n;
        for case in 0..300 {
            let (batch, rows, input, hidden) = (1 + pick(3), 1 + pick(300), pick(40), 1 + pick(70));
            let x: Vec<f32> = (0..batch * input).map(|_| value()).collect();
            let h: Vec<f32> = (0..batch * hidden).map(|_| value()).collect();
            let w: Vec<f32> = (0..rows * input).map(|_| value()).collect();
            let r: Vec<f32> = (0..rows * hidden).map(|_| value()).collect();
            let bias: Vec<f32> = (0..rows).map(|_| value()).collect();
            let bias = (case % 2 == 0).then_some(&bias[..]);
            let o = Operands {
                x: &x,
                w: &w,
                r: &r,
                b: None,
                initial_h: None,
                initial_c: None,
                p: None,
                constant_weights: true,
            };
            let mut kept = fma::packed(StepContext::default(), &o, rows, input, hidden).unwrap();
            let state = kept.state();
            state.project(&x, bias, [batch, rows, input]);
            let mut recurred = std::vec![0.0f32; batch * rows];
            state.recur(&h, bias, [batch, rows, hidden], &mut recurred, false);
            let projected = state.projected(0, batch * rows).unwrap().to_vec();
            for (got, a, m, k) in [(&projected, &x, &w, input), (&recurred, &h, &r, hidden)] {
                for b in 0..batch {
                    for g in 0..rows {
                        let (a, m) = (&a[b * k..][..k], &m[g * k..][..k]);
                        let offset = bias.map_or(0.0, |v| v[g]);
                        let want = dot(a, m) + offset;
                        let size: f32 =
                            a.iter().zip(m).map(|(x, y)| (x * y).abs()).sum::<f32>() + offset.abs();
                        let bound = (k as f32 + 2.0) * f32::EPSILON * size;
                        let got = got[b * rows + g];
                        assert!(
                            (got - want).abs() <= bound,
                            "case {case}: {batch}x{rows}x{k}, [{b}, {g}]: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    /// Whole layers agree between the host's packed path (constant weights) and the portable
    /// products, for every cell (LSTM with and without peepholes, both GRU forms, RNN), both
    /// directions and two batch rows, over hidden sizes that leave a padded last panel.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[test]
    fn packed_layers_match_the_portable_ones() {
        extern crate std;
        use std::vec::Vec;
        let cells = [
            (
                Cell::Lstm {
                    input_forget: false,
                },
                false,
            ),
            (
                Cell::Lstm {
                    input_forget: false,
                },
                true,
            ),
            (Cell::Lstm { input_forget: true }, false),
            (
                Cell::Gru {
                    linear_before_reset: true,
                },
                false,
            ),
            (
                Cell::Gru {
                    linear_before_reset: false,
                },
                false,
            ),
            (Cell::Rnn, false),
        ];
        let mut value = values(0x9e37_79b9_7f4a_7c15);
        for (cell, peepholes) in cells {
            for (reverse, hidden) in [(false, 20), (true, 37), (false, 64)] {
                let (seq, batch, input) = (5, 2, 7);
                let dims = Dims {
                    seq,
                    batch,
                    input,
                    hidden,
                };
                let rows = cell.gates() * hidden;
                let mut take =
                    |n: usize| -> Vec<f32> { (0..n).map(|_| 0.5 * value().sin()).collect() };
                let (x, w, r, b) = (
                    take(seq * batch * input),
                    take(rows * input),
                    take(rows * hidden),
                    take(2 * rows),
                );
                let (h0, c0, p) = (take(batch * hidden), take(batch * hidden), take(3 * hidden));
                let mut op = layer(cell);
                op.reverse = reverse;
                let lstm = matches!(cell, Cell::Lstm { .. });
                let run = |constant_weights: bool| {
                    let o = Operands {
                        x: &x,
                        w: &w,
                        r: &r,
                        b: Some(&b),
                        initial_h: Some(&h0),
                        initial_c: lstm.then_some(&c0[..]),
                        p: (lstm && peepholes).then_some(&p[..]),
                        constant_weights,
                    };
                    let mut y = std::vec![0.0f32; seq * batch * hidden];
                    let (mut h, mut c) = (
                        std::vec![0.0f32; batch * hidden],
                        std::vec![0.0f32; batch * hidden],
                    );
                    let mut s = std::vec![0.0f32; 2 * batch * rows];
                    let c_out = lstm.then_some(&mut c[..]);
                    recurrent::<{ ferrite_hal::ALL_OPS }>(
                        StepContext::default(),
                        &op,
                        dims,
                        &o,
                        &mut y,
                        &mut h,
                        c_out,
                        &mut s,
                    )
                    .unwrap();
                    (y, h, c)
                };
                let (portable, packed) = (run(false), run(true));
                for (want, got) in [
                    (&portable.0, &packed.0),
                    (&portable.1, &packed.1),
                    (&portable.2, &packed.2),
                ] {
                    for (i, (&want, &got)) in want.iter().zip(got.iter()).enumerate() {
                        assert!(
                            (want - got).abs() <= 1e-5 * (1.0 + want.abs()),
                            "{cell:?} peepholes {peepholes} reverse {reverse} hidden {hidden} [{i}]: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    /// Four rows at once sum exactly as one row at a time, for every length around the eight
    /// lanes.
    #[test]
    fn dot4_is_dot_bit_for_bit() {
        let value = |i: usize| ((i * 37 % 101) as f32 - 50.0) / 7.0;
        for k in 0..40 {
            let a: [f32; 40] = core::array::from_fn(|i| value(i + 3));
            let m: [[f32; 40]; 4] =
                core::array::from_fn(|r| core::array::from_fn(|i| value(i * (r + 2))));
            let rows = [&m[0][..k], &m[1][..k], &m[2][..k], &m[3][..k]];
            let four = dot4(&a[..k], rows);
            for (r, row) in rows.iter().enumerate() {
                assert_eq!(
                    four[r].to_bits(),
                    dot(&a[..k], row).to_bits(),
                    "k {k}, row {r}"
                );
            }
        }
    }
    use ferrite_hal::Activation;

    fn layer(cell: Cell) -> Recurrent {
        Recurrent {
            cell,
            reverse: false,
            clip: 0.0,
            activations: [Activation::Sigmoid, Activation::Tanh, Activation::Tanh],
        }
    }

    #[test]
    fn a_one_unit_lstm_matches_its_equations() {
        // hidden 1, input 1, batch 1, two steps; every weight 0.5, no bias.
        let dims = Dims {
            seq: 2,
            batch: 1,
            input: 1,
            hidden: 1,
        };
        let o = Operands {
            x: &[1.0, -1.0],
            w: &[0.5; 4],
            r: &[0.5; 4],
            b: None,
            initial_h: None,
            initial_c: None,
            p: None,
            constant_weights: false,
        };
        let (mut y, mut h, mut c, mut s) = ([0.0; 2], [0.0], [0.0], [0.0; 8]);
        let op = layer(Cell::Lstm {
            input_forget: false,
        });
        recurrent::<{ ferrite_hal::ALL_OPS }>(
            StepContext::default(),
            &op,
            dims,
            &o,
            &mut y,
            &mut h,
            Some(&mut c),
            &mut s,
        )
        .unwrap();
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let (mut hh, mut cc) = (0.0f64, 0.0f64);
        for x in [1.0f64, -1.0] {
            let a = 0.5 * x + 0.5 * hh;
            cc = sig(a) * cc + sig(a) * a.tanh();
            hh = sig(a) * cc.tanh();
        }
        // micromath's exp/tanh (feature fast-math) are off by up to a few percent.
        let tolerance = if cfg!(feature = "fast-math") {
            5e-2
        } else {
            1e-6
        };
        assert!((h[0] as f64 - hh).abs() < tolerance, "{} vs {hh}", h[0]);
        assert!((c[0] as f64 - cc).abs() < tolerance, "{} vs {cc}", c[0]);
        assert_eq!(y[1], h[0]);
    }

    #[test]
    fn a_reversed_rnn_reads_the_sequence_backwards() {
        let dims = Dims {
            seq: 2,
            batch: 1,
            input: 1,
            hidden: 1,
        };
        let o = Operands {
            x: &[1.0, 2.0],
            w: &[1.0],
            r: &[1.0],
            b: None,
            initial_h: None,
            initial_c: None,
            p: None,
            constant_weights: false,
        };
        let mut op = layer(Cell::Rnn);
        op.activations[0] = Activation::None;
        op.reverse = true;
        let (mut y, mut h, mut s) = ([0.0; 2], [0.0], [0.0; 2]);
        recurrent::<{ ferrite_hal::ALL_OPS }>(
            StepContext::default(),
            &op,
            dims,
            &o,
            &mut y,
            &mut h,
            None,
            &mut s,
        )
        .unwrap();
        // t = 1 first: h = 2; then t = 0: h = 1 + 2 = 3.
        assert_eq!(y, [3.0, 2.0]);
        assert_eq!(h, [3.0]);
    }
}
