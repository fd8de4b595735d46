//! One direction of an ONNX RNN, GRU or LSTM over a whole sequence, in place in its outputs:
//! `Y_h` (and `Y_c`) hold the running state, each step's `H` is also written to `Y`.

use super::operands::pairwise;
pub use super::operands::{Dims, Operands};
#[cfg(all(feature = "std", target_arch = "x86_64"))]
use super::{avx2, fma};
use crate::base::context::StepContext;
use crate::micro::activation::activate;
use crate::CpuError;
use ferrite_hal::op::{Cell, Recurrent};
use ferrite_hal::Selection;

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
    let outputs = (y.len(), h.len(), c.as_deref().map(<[f32]>::len));
    if !operands_fit(op, dims, o, outputs, scratch.len()) {
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
    initial_states(o, h, c.as_deref_mut());
    let (wb, rb) = biases(o.b, rows);
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

/// Whether the operands hold what `dims` say (and, for an LSTM, there is a cell state):
/// `outputs` are Y's, Y_h's and Y_c's lengths, `scratch` the scratch's.
#[inline(always)]
fn operands_fit(
    op: &Recurrent,
    dims: Dims,
    o: &Operands<'_>,
    (y, h, c): (usize, usize, Option<usize>),
    scratch: usize,
) -> bool {
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
    !(o.x.len() < seq * batch * input
        || o.w.len() < rows * input
        || o.r.len() < rows * hidden
        || short(o.b, 2 * rows)
        || short(o.initial_h, state)
        || short(o.initial_c, state)
        || short(o.p, 3 * hidden)
        || y < seq * state
        || h != state
        || c.is_some_and(|c| c != state)
        || (lstm && c.is_none())
        || scratch < 2 * batch * rows)
}

/// W's and R's biases, each `rows` long, from B (`[2·rows]`), if there is one.
#[inline(always)]
fn biases(b: Option<&[f32]>, rows: usize) -> (Option<&[f32]>, Option<&[f32]>) {
    match b {
        Some(b) => (b.get(..rows), b.get(rows..2 * rows)),
        None => (None, None),
    }
}

/// The hidden (and cell) state at the first step: the initial ones given, else zeros.
#[inline(always)]
fn initial_states(o: &Operands<'_>, h: &mut [f32], c: Option<&mut [f32]>) {
    match o.initial_h {
        Some(v) => copy(h, v),
        None => h.fill(0.0),
    }
    if let Some(c) = c {
        match o.initial_c {
            Some(v) => copy(c, v),
            None => c.fill(0.0),
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
