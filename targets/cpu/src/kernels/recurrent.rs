//! One direction of an ONNX RNN, GRU or LSTM over a whole sequence, in place in its outputs:
//! `Y_h` (and `Y_c`) hold the running state, each step's `H` is also written to `Y`.

use super::elementwise::activate;
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
        if !fits || super::super::simd::level() < super::super::simd::Level::Avx2 {
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
pub fn recurrent<const OPS: Selection>(
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
    for step in 0..seq {
        let t = if op.reverse { seq - 1 - step } else { step };
        let Some(xt) = o.x.get(t * batch * input..(t + 1) * batch * input) else {
            return Err(CpuError::CorruptPlan);
        };
        times_transposed(xt, o.w, wb, batch, rows, input, from_x);
        times_transposed(h, o.r, rb, batch, rows, hidden, from_h);
        for b in 0..batch {
            let (Some(gx), Some(gh), Some(hb)) = (
                from_x.get_mut(b * rows..(b + 1) * rows),
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
                    let peep = |k: usize| {
                        let p = o.p.and_then(|p| p.get(k * hidden..(k + 1) * hidden));
                        p.unwrap_or(&[])
                            .iter()
                            .copied()
                            .chain(core::iter::repeat(0.0))
                    };
                    let Some((i_gate, rest)) = gx.split_at_mut_checked(hidden) else {
                        return Err(CpuError::CorruptPlan);
                    };
                    let Some((o_gate, rest)) = rest.split_at_mut_checked(hidden) else {
                        return Err(CpuError::CorruptPlan);
                    };
                    let Some((f_gate, c_gate)) = rest.split_at_mut_checked(hidden) else {
                        return Err(CpuError::CorruptPlan);
                    };
                    let gates = i_gate.iter_mut().zip(f_gate.iter_mut()).zip(cb.iter());
                    for (((input, forget), &cell), (peep_i, peep_f)) in
                        gates.zip(peep(0).zip(peep(2)))
                    {
                        *input += peep_i * cell;
                        *forget += peep_f * cell;
                    }
                    clip(i_gate);
                    clip(f_gate);
                    clip(c_gate);
                    activate::<OPS>(f, i_gate);
                    activate::<OPS>(f, f_gate);
                    activate::<OPS>(g, c_gate);
                    let gates = i_gate.iter().zip(f_gate.iter()).zip(c_gate.iter());
                    let outs = cb.iter_mut().zip(o_gate.iter_mut()).zip(peep(1));
                    for (((&input, &forget), &candidate), ((cell, output), peep_o)) in
                        gates.zip(outs)
                    {
                        let forget = if input_forget { 1.0 - input } else { forget };
                        *cell = forget * *cell + input * candidate;
                        *output += peep_o * *cell;
                    }
                    clip(o_gate);
                    activate::<OPS>(f, o_gate);
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
    Ok(())
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
        if super::super::simd::level() < super::super::simd::Level::Avx2 {
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
        };
        let (mut y, mut h, mut c, mut s) = ([0.0; 2], [0.0], [0.0], [0.0; 8]);
        let op = layer(Cell::Lstm {
            input_forget: false,
        });
        recurrent::<{ ferrite_hal::ALL_OPS }>(&op, dims, &o, &mut y, &mut h, Some(&mut c), &mut s)
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
        };
        let mut op = layer(Cell::Rnn);
        op.activations[0] = Activation::None;
        op.reverse = true;
        let (mut y, mut h, mut s) = ([0.0; 2], [0.0], [0.0; 2]);
        recurrent::<{ ferrite_hal::ALL_OPS }>(&op, dims, &o, &mut y, &mut h, None, &mut s).unwrap();
        // t = 1 first: h = 2; then t = 0: h = 1 + 2 = 3.
        assert_eq!(y, [3.0, 2.0]);
        assert_eq!(h, [3.0]);
    }
}
