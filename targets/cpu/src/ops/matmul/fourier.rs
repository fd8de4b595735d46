//! Discrete Fourier transforms (ONNX DFT and STFT): an in-place radix-2 FFT for power-of-two
//! lengths, a direct transform for any other, both on a twiddle table computed at pack time
//! (no trigonometry at run time), one transform at a time in a `2·length` scratch. Real
//! forward transforms of a power-of-two length (an STFT of audio) take half the work
//! (`real_frames`).

use ferrite_hal::geometry::DftGeometry;
use ferrite_hal::op::Dft;

/// The operands of a transform (sizes checked by the verifier, and again here).
pub struct Operands<'a> {
    /// The signal, `[outer, signal, inner, complex_in]`.
    pub x: &'a [f32],
    /// `cos, −sin` of `2πk/length` for `k` in `0..length`.
    pub twiddles: &'a [f32],
    /// STFT: the window each frame is multiplied by.
    pub window: Option<&'a [f32]>,
}

/// Runs `op` (geometry `g`) into `y`, `[outer, frames, bins, inner, complex_out]`. Returns
/// `false`, writing nothing, when a slice is shorter than the geometry says (never, after the
/// verifier).
#[inline(always)]
pub fn dft(
    op: &Dft,
    g: &DftGeometry,
    v: &Operands<'_>,
    y: &mut [f32],
    scratch: &mut [f32],
) -> bool {
    let n = op.length;
    let input_len = g.outer * g.signal * g.inner * g.complex_in;
    let output_len = g.outer * g.frames * g.bins * g.inner * g.complex_out;
    let window_ok = v.window.is_none_or(|w| w.len() >= n);
    if v.x.len() < input_len
        || y.len() < output_len
        || !window_ok
        || g.frame_length > n
        || g.bins > n
    {
        return false;
    }
    // Past these checks every access is in bounds; each goes through `get` all the same (no
    // panic path), reading zero or writing nothing where one were not.
    if !op.inverse && g.complex_in == 1 && n.is_power_of_two() && n >= 8 {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        if crate::isa::level() >= crate::isa::Level::Avx2 {
            // SAFETY: the CPU has AVX2 and FMA (`simd::level`).
            #[allow(unsafe_code)]
            return unsafe { real_frames_avx2(op, g, v, y, scratch) };
        }
        return real_frames(op, g, v, y, scratch);
    }
    complex_frames(op, g, v, y, scratch)
}

/// [`real_frames`] built for AVX2 in a function of its own: inlined into the step dispatch, how
/// LLVM allocated its registers there changed with the other kernels beside it (an unrelated
/// change to the transposes made the KWS front end's STFT 42 → 47 µs).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
unsafe fn real_frames_avx2(
    op: &Dft,
    g: &DftGeometry,
    v: &Operands<'_>,
    y: &mut [f32],
    scratch: &mut [f32],
) -> bool {
    real_frames(op, g, v, y, scratch)
}

/// [`dft`] (past its checks) for complex or inverse transforms, and real ones of other
/// lengths: each frame's complex transform in the scratch. Inlined on a host (into each SIMD
/// build); out of line on a microcontroller, as [`real_frames`], so that the deepest stack is
/// either's, not both's.
#[cfg_attr(feature = "std", inline(always))]
#[cfg_attr(not(feature = "std"), inline(never))]
fn complex_frames(
    op: &Dft,
    g: &DftGeometry,
    v: &Operands<'_>,
    y: &mut [f32],
    scratch: &mut [f32],
) -> bool {
    let n = op.length;
    let (Some(buf), Some(twiddles)) = (scratch.get_mut(..2 * n), v.twiddles.get(..2 * n)) else {
        return false;
    };
    let scale = if op.inverse { 1.0 / n as f32 } else { 1.0 };
    let half_spectrum = op.inverse && op.onesided;
    for o in 0..g.outer {
        for f in 0..g.frames {
            for i in 0..g.inner {
                buf.fill(0.0);
                let slots = buf.chunks_exact_mut(2).take(g.frame_length);
                for (j, slot) in slots.enumerate() {
                    let at = ((o * g.signal + f * op.frame_step + j) * g.inner + i) * g.complex_in;
                    let w = v.window.map_or(1.0, |w| w.get(j).copied().unwrap_or(0.0));
                    slot[0] = v.x.get(at).copied().unwrap_or(0.0) * w;
                    if g.complex_in == 2 {
                        slot[1] = v.x.get(at + 1).copied().unwrap_or(0.0) * w;
                    }
                }
                if half_spectrum {
                    // The other half of a real signal's spectrum: X[n − k] = conj(X[k]), for
                    // k past n/2 (every n − k is below n/2 + 1).
                    let first = n / 2 + 1;
                    if let Some((low, high)) = buf.split_at_mut_checked(2 * first) {
                        for (m, slot) in high.chunks_exact_mut(2).enumerate() {
                            let mirror = n - (first + m);
                            if let Some(&[re, im]) = low.get(2 * mirror..2 * mirror + 2) {
                                slot[0] = re;
                                slot[1] = -im;
                            }
                        }
                    }
                }
                let base = ((o * g.frames + f) * g.bins * g.inner + i) * g.complex_out;
                let stride = g.inner * g.complex_out;
                let mut put = |b: usize, re: f32, im: f32| {
                    let at = base + b * stride;
                    if let Some(slot) = y.get_mut(at) {
                        *slot = re * scale;
                    }
                    if g.complex_out == 2 {
                        if let Some(slot) = y.get_mut(at + 1) {
                            *slot = im * scale;
                        }
                    }
                };
                if n.is_power_of_two() {
                    fft_in_place(buf, twiddles, op.inverse);
                    for (b, value) in buf.chunks_exact(2).take(g.bins).enumerate() {
                        put(b, value[0], value[1]);
                    }
                } else {
                    for b in 0..g.bins {
                        let (re, im) = direct_bin(buf, twiddles, b, op.inverse);
                        put(b, re, im);
                    }
                }
            }
        }
    }
    true
}

/// The forward transform of real frames whose length `n` is a power of two of at least 8, as
/// the `n/2`-point complex FFT of their even and odd samples (taken as real and imaginary
/// parts) and one step that splits that spectrum into the frame's: half the butterflies of a
/// complex transform. The FFT runs on split real and imaginary parts (`scratch`'s first `n`
/// values), packed in bit-reversed order so that its result comes out in order, its stages'
/// twiddles contiguous (the rest of `scratch`): each butterfly loop and the split step run in
/// vectors. Past [`dft`]'s checks; returns `false`, writing nothing, where the scratch or the
/// twiddle table is short. Inlined on a host (into each SIMD build); out of line on a
/// microcontroller, as [`complex_frames`].
#[cfg_attr(feature = "std", inline(always))]
#[cfg_attr(not(feature = "std"), inline(never))]
fn real_frames(
    op: &Dft,
    g: &DftGeometry,
    v: &Operands<'_>,
    y: &mut [f32],
    scratch: &mut [f32],
) -> bool {
    let (n, m) = (op.length, op.length / 2);
    let (Some(scratch), Some(table)) = (scratch.get_mut(..2 * n), v.twiddles.get(..2 * n)) else {
        return false;
    };
    let Some((data, twiddles)) = scratch.split_at_mut_checked(n) else {
        return false;
    };
    let (Some((re, im)), Some((twr, twi))) = (
        data.split_at_mut_checked(m),
        twiddles.split_at_mut_checked(m),
    ) else {
        return false;
    };
    // Stage `h` (butterflies `h` apart, `h` from 4 to m/2) twiddle `k`: e^(−2πik/2h), table
    // entry `k·n/2h`, kept at `h + k`.
    let (mut h, mut step) = (4, m / 4);
    while h < m {
        let stage = twr.iter_mut().zip(twi.iter_mut()).skip(h).take(h);
        for (k, (wr, wi)) in stage.enumerate() {
            (*wr, *wi) = twiddle(table, k * step, false);
        }
        (h, step) = (2 * h, step / 2);
    }
    let out = Spectrum {
        bins: g.bins,
        stride: g.inner * g.complex_out,
        two_sided: !op.onesided,
    };
    for o in 0..g.outer {
        for f in 0..g.frames {
            for i in 0..g.inner {
                let first = (o * g.signal + f * op.frame_step) * g.inner + i;
                let frame = Frame {
                    x: v.x.get(first..).unwrap_or(&[]),
                    stride: g.inner,
                    length: g.frame_length,
                    window: v.window,
                };
                frame.pack_reversed(re, im);
                butterflies(re, im, twr, twi);
                let base = ((o * g.frames + f) * g.bins * g.inner + i) * g.complex_out;
                let y = y.get_mut(base..).unwrap_or(&mut []);
                out.split(re, im, table, y);
            }
        }
    }
    true
}

/// A frame of real samples: `length` of them, `stride` apart from the first of `x`, each times
/// its `window` value (the rest of a transform's length is zeros).
struct Frame<'a> {
    x: &'a [f32],
    stride: usize,
    length: usize,
    window: Option<&'a [f32]>,
}

/// `b`'s four bits reversed.
const REVERSED_NIBBLES: [u8; 16] = [0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15];

impl Frame<'_> {
    /// Packs the frame's samples as complex values (even sample real, odd imaginary) into `re`
    /// and `im` (`m`, a power of two of at least 4, each) in bit-reversed order: pair `p` at
    /// `reverse(p)`. A whole contiguous frame of 32 samples or more is read sixteen pairs at
    /// a time (`q = 16a + b` takes pair `reverse₄(b)·m/16 + reverse(a)`: one reversal per
    /// sixteen); any other frame pair by pair, zeros past its end (all zeros for a signal
    /// shorter than the geometry says, which the verifier rules out).
    #[inline(always)]
    fn pack_reversed(&self, re: &mut [f32], im: &mut [f32]) {
        let m = re.len();
        let bits = m.trailing_zeros();
        let whole = VECTORS && self.stride == 1 && self.length == 2 * m && m >= 16;
        if let (true, Some(x)) = (whole, self.x.get(..2 * m)) {
            let pairs = x.as_chunks::<2>().0;
            let weights = self
                .window
                .and_then(|w| w.get(..2 * m))
                .map(|w| w.as_chunks::<2>().0);
            let quarter = m / 16;
            let rows = re.as_chunks_mut::<16>().0.iter_mut();
            for (a, (r, i)) in rows.zip(im.as_chunks_mut::<16>().0).enumerate() {
                // `a`'s `bits − 4` bits reversed (none when `m` is 16).
                let low = a
                    .reverse_bits()
                    .checked_shr(usize::BITS + 4 - bits)
                    .unwrap_or(0);
                for b in 0..16 {
                    let p = REVERSED_NIBBLES[b] as usize * quarter + low;
                    let [x0, x1] = pairs.get(p).copied().unwrap_or([0.0; 2]);
                    let [w0, w1] = match weights {
                        Some(w) => w.get(p).copied().unwrap_or([0.0; 2]),
                        None => [1.0; 2],
                    };
                    (r[b], i[b]) = (x0 * w0, x1 * w1);
                }
            }
            return;
        }
        let sample = |j: usize| match j < self.length {
            true => {
                let w = self.window.map_or(Some(1.0), |w| w.get(j).copied());
                let x = self.x.get(j * self.stride).copied();
                x.zip(w).map_or(0.0, |(x, w)| x * w)
            }
            false => 0.0,
        };
        for (q, (r, i)) in re.iter_mut().zip(im.iter_mut()).enumerate() {
            let p = q.reverse_bits() >> (usize::BITS - bits);
            (*r, *i) = (sample(2 * p), sample(2 * p + 1));
        }
    }
}

/// The forward FFT of the bit-reversed complex values `re`, `im` (a power-of-two count of at
/// least 4) by decimation in time, in place, its result in order: the first two passes as one
/// radix-4 pass (twiddles ±1, −i), then a radix-2 pass per stage on the stage's contiguous
/// twiddles (`twr`, `twi` at `h..2h`).
#[inline(always)]
fn butterflies(re: &mut [f32], im: &mut [f32], twr: &[f32], twi: &[f32]) {
    let quads = re.as_chunks_mut::<4>().0.iter_mut();
    for ([r0, r1, r2, r3], [i0, i1, i2, i3]) in quads.zip(im.as_chunks_mut::<4>().0) {
        let (ar0, ai0, ar1, ai1) = (*r0 + *r1, *i0 + *i1, *r0 - *r1, *i0 - *i1);
        let (ar2, ai2, ar3, ai3) = (*r2 + *r3, *i2 + *i3, *r2 - *r3, *i2 - *i3);
        (*r0, *i0, *r2, *i2) = (ar0 + ar2, ai0 + ai2, ar0 - ar2, ai0 - ai2);
        // The second pair's odd term times −i.
        (*r1, *i1, *r3, *i3) = (ar1 + ai3, ai1 - ar3, ar1 - ai3, ai1 + ar3);
    }
    let m = re.len();
    let mut h = 4;
    while h < m {
        let (Some(wr), Some(wi), block @ 1..) = (twr.get(h..2 * h), twi.get(h..2 * h), 2 * h)
        else {
            return;
        };
        let mut start = 0;
        while let (Some(r), Some(i)) = (
            re.get_mut(start..start + block),
            im.get_mut(start..start + block),
        ) {
            start += block;
            let (Some((ar, br)), Some((ai, bi))) =
                (r.split_at_mut_checked(h), i.split_at_mut_checked(h))
            else {
                return;
            };
            match (VECTORS, h) {
                (false, _) => radix2::<1>([ar, ai, br, bi], [wr, wi]),
                (true, 4) => radix2::<4>([ar, ai, br, bi], [wr, wi]),
                (true, _) => radix2::<8>([ar, ai, br, bi], [wr, wi]),
            }
        }
        h *= 2;
    }
}

/// Whether the transform's loops run several values at a time in fixed-size arrays (hosts,
/// where they become vectors), not one at a time (microcontrollers: less code and stack).
const VECTORS: bool = cfg!(feature = "std");

/// One decimation-in-time radix-2 pass over a block: `a ± w·b` for the lower half `a` (real,
/// imaginary parts) and the upper half `b`, `L` butterflies at a time (the block's half is a
/// multiple of `L`), through fixed-size local arrays the compiler keeps in vectors.
#[inline(always)]
fn radix2<const L: usize>([ar, ai, br, bi]: [&mut [f32]; 4], [wr, wi]: [&[f32]; 2]) {
    let lower = ar
        .as_chunks_mut::<L>()
        .0
        .iter_mut()
        .zip(ai.as_chunks_mut::<L>().0);
    let upper = br
        .as_chunks_mut::<L>()
        .0
        .iter_mut()
        .zip(bi.as_chunks_mut::<L>().0);
    let weights = wr.as_chunks::<L>().0.iter().zip(wi.as_chunks::<L>().0);
    for (((ar, ai), (br, bi)), (wr, wi)) in lower.zip(upper).zip(weights) {
        let (xr, xi, yr, yi) = (*ar, *ai, *br, *bi);
        let (mut sr, mut si, mut dr, mut di) = ([0.0; L], [0.0; L], [0.0; L], [0.0; L]);
        for l in 0..L {
            let (tr, ti) = (yr[l] * wr[l] - yi[l] * wi[l], yr[l] * wi[l] + yi[l] * wr[l]);
            (sr[l], si[l], dr[l], di[l]) = (xr[l] + tr, xi[l] + ti, xr[l] - tr, xi[l] - ti);
        }
        (*ar, *ai, *br, *bi) = (sr, si, dr, di);
    }
}

/// Where a frame's spectrum goes: `bins` bins `stride` apart (each a real and an imaginary
/// part), the upper half's conjugates too where `two_sided`.
struct Spectrum {
    bins: usize,
    stride: usize,
    two_sided: bool,
}

/// Bins of the split step computed together.
const SPLIT_LANES: usize = 8;

impl Spectrum {
    /// The spectrum `X` of a real frame of `n = 2m` samples from the `m`-point transform `Z`
    /// of its sample pairs (`re`, `im`) into `y`: with `E = (Z[k] + conj Z[m−k])/2`,
    /// `O = −i(Z[k] − conj Z[m−k])/2` and `w = e^(−2πik/n)`, `X[k] = E + wO` and
    /// `X[m−k] = conj(E − wO)`, for `k` in `0..=m/2` (`Z[m]` is `Z[0]`); `X[n − k]` is
    /// `conj X[k]`. Eight `k` at a time from 1, `Z[m−k]` read backwards.
    #[inline(always)]
    fn split(&self, re: &[f32], im: &[f32], table: &[f32], y: &mut [f32]) {
        const L: usize = SPLIT_LANES;
        let m = re.len();
        let mut k = 1;
        while VECTORS && k + L <= m / 2 {
            // `Z[m−k−l]` for `l` in `0..L`: the `L` values ending at `m − k`, reversed.
            let (Some(zr), Some(zi), Some(cr), Some(ci), Some(w)) = (
                re.get(k..k + L).and_then(|s| s.first_chunk::<L>()),
                im.get(k..k + L).and_then(|s| s.first_chunk::<L>()),
                re.get(m + 1 - k - L..m + 1 - k)
                    .and_then(|s| s.first_chunk::<L>()),
                im.get(m + 1 - k - L..m + 1 - k)
                    .and_then(|s| s.first_chunk::<L>()),
                table
                    .get(2 * k..2 * k + 2 * L)
                    .and_then(|s| s.first_chunk::<{ 2 * L }>()),
            ) else {
                return;
            };
            let (mut lr, mut li, mut hr, mut hi) = ([0.0; L], [0.0; L], [0.0; L], [0.0; L]);
            for l in 0..L {
                let (zr, zi, cr, ci) = (zr[l], zi[l], cr[L - 1 - l], -ci[L - 1 - l]);
                let (wr, wi) = (w[2 * l], w[2 * l + 1]);
                (lr[l], li[l], hr[l], hi[l]) = butterfly((zr, zi), (cr, ci), (wr, wi));
            }
            self.put_lanes(y, k, [lr, li], [hr, hi], m);
            k += L;
        }
        // The rest, then `k = 0` (`m/2 + 1` wrapped round).
        for k in k..=m / 2 + 1 {
            let k = if k > m / 2 { 0 } else { k };
            let at = |k: usize| {
                let k = if k == m { 0 } else { k };
                (
                    re.get(k).copied().unwrap_or(0.0),
                    im.get(k).copied().unwrap_or(0.0),
                )
            };
            let ((zr, zi), (cr, ci)) = (at(k), at(m - k));
            let (lr, li, hr, hi) = butterfly((zr, zi), (cr, -ci), twiddle(table, k, false));
            self.put(y, k, lr, li, m);
            if m - k != k {
                self.put(y, m - k, hr, hi, m);
            }
        }
    }

    /// Bin `b` (and, two-sided, its conjugate at `2m − b` for `0 < b < m`).
    #[inline(always)]
    fn put(&self, y: &mut [f32], b: usize, re: f32, im: f32, m: usize) {
        let mut one = |b: usize, re: f32, im: f32| {
            if b < self.bins {
                if let Some([r, i]) = y
                    .get_mut(b * self.stride..)
                    .and_then(|y| y.first_chunk_mut())
                {
                    (*r, *i) = (re, im);
                }
            }
        };
        one(b, re, im);
        if self.two_sided && b > 0 && b < m {
            one(2 * m - b, re, -im);
        }
    }

    /// Bins `k..k + L` (`low`) and `m − k − l` for `l` in `0..L` (`high`), with their
    /// conjugates where two-sided; a one-sided spectrum of interleaved bins stored in vectors.
    #[inline(always)]
    fn put_lanes(
        &self,
        y: &mut [f32],
        k: usize,
        [lr, li]: [[f32; SPLIT_LANES]; 2],
        [hr, hi]: [[f32; SPLIT_LANES]; 2],
        m: usize,
    ) {
        const L: usize = SPLIT_LANES;
        if self.stride == 2 && !self.two_sided && self.bins > m {
            let low = y
                .get_mut(2 * k..2 * (k + L))
                .and_then(|s| s.first_chunk_mut::<{ 2 * L }>());
            if let Some(low) = low {
                for l in 0..L {
                    (low[2 * l], low[2 * l + 1]) = (lr[l], li[l]);
                }
            }
            let high = y.get_mut(2 * (m + 1 - k - L)..2 * (m + 1 - k));
            if let Some(high) = high.and_then(|s| s.first_chunk_mut::<{ 2 * L }>()) {
                for l in 0..L {
                    let at = L - 1 - l;
                    (high[2 * at], high[2 * at + 1]) = (hr[l], hi[l]);
                }
            }
            return;
        }
        for l in 0..L {
            self.put(y, k + l, lr[l], li[l], m);
            self.put(y, m - k - l, hr[l], hi[l], m);
        }
    }
}

/// The split step's butterfly: from `z = Z[k]`, `c = conj Z[m−k]` and `w`, `E + wO` and
/// `conj(E − wO)` (real, imaginary parts).
#[inline(always)]
fn butterfly(
    (zr, zi): (f32, f32),
    (cr, ci): (f32, f32),
    (wr, wi): (f32, f32),
) -> (f32, f32, f32, f32) {
    let (er, ei) = ((zr + cr) * 0.5, (zi + ci) * 0.5);
    let (dr, di) = ((zr - cr) * 0.5, (zi - ci) * 0.5);
    let (or, oi) = (di, -dr);
    let (pr, pi) = (wr * or - wi * oi, wr * oi + wi * or);
    (er + pr, ei + pi, er - pr, pi - ei)
}

/// Twiddle `k` (`e^(∓2πik/n)`): conjugated for the inverse transform (zero past the table,
/// which the callers never reach).
#[inline(always)]
fn twiddle(t: &[f32], k: usize, inverse: bool) -> (f32, f32) {
    let (c, s) = match t.get(2 * k..2 * k + 2) {
        Some(&[c, s]) => (c, s),
        _ => (0.0, 0.0),
    };
    if inverse {
        (c, -s)
    } else {
        (c, s)
    }
}

/// Bin `b` of the transform of `buf` (interleaved complex, `n` values): `Σ_j x_j · w^(b·j)`,
/// the exponent reduced modulo `n` as it goes.
fn direct_bin(buf: &[f32], t: &[f32], b: usize, inverse: bool) -> (f32, f32) {
    let n = buf.len() / 2;
    let (mut re, mut im, mut k) = (0.0f32, 0.0f32, 0usize);
    for x in buf.chunks_exact(2) {
        let (c, s) = twiddle(t, k, inverse);
        re += x[0] * c - x[1] * s;
        im += x[0] * s + x[1] * c;
        k += b;
        if k >= n {
            k -= n;
        }
    }
    (re, im)
}

/// The iterative decimation-in-time radix-2 FFT of `buf` (interleaved complex, a power-of-two
/// `n` values), in place: each pass walks blocks of `2·half` values, pairing the lower half's
/// value `k` with the upper half's through twiddle `k·n/len` (no index to check).
fn fft_in_place(buf: &mut [f32], t: &[f32], inverse: bool) {
    let n = buf.len() / 2;
    let bits = n.trailing_zeros();
    if bits == 0 {
        return;
    }
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if j > i {
            if let Some((low, high)) = buf.split_at_mut_checked(2 * j) {
                if let (Some(a), Some(b)) = (low.get_mut(2 * i..2 * i + 2), high.get_mut(..2)) {
                    a.swap_with_slice(b);
                }
            }
        }
    }
    let mut len = 2;
    while len <= n {
        let step = (n / len).max(1);
        for block in buf.chunks_exact_mut(2 * len) {
            let Some((low, high)) = block.split_at_mut_checked(len) else {
                continue;
            };
            let pairs = low.chunks_exact_mut(2).zip(high.chunks_exact_mut(2));
            for ((a, b), w) in pairs.zip(t.chunks_exact(2).step_by(step)) {
                let (c, s) = if inverse { (w[0], -w[1]) } else { (w[0], w[1]) };
                let (br, bi) = (b[0], b[1]);
                let (wr, wi) = (br * c - bi * s, br * s + bi * c);
                let (ar, ai) = (a[0], a[1]);
                a[0] = ar + wr;
                a[1] = ai + wi;
                b[0] = ar - wr;
                b[1] = ai - wi;
            }
        }
        len *= 2;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use ferrite_hal::Shape;
    use std::vec;
    use std::vec::Vec;

    fn twiddles(n: usize) -> Vec<f32> {
        (0..n)
            .flat_map(|k| {
                let a = 2.0 * core::f64::consts::PI * k as f64 / n as f64;
                [a.cos() as f32, -a.sin() as f32]
            })
            .collect()
    }

    /// The direct transform and the FFT agree, and an inverse after a forward gives the signal.
    #[test]
    fn fft_matches_the_direct_transform_and_inverts() {
        for n in [1usize, 2, 4, 8, 64, 512] {
            let t = twiddles(n);
            let x: Vec<f32> = (0..2 * n)
                .map(|i| ((i * 7919) % 23) as f32 - 11.0)
                .collect();
            let mut fast = x.clone();
            fft_in_place(&mut fast, &t, false);
            for b in 0..n {
                let (re, im) = direct_bin(&x, &t, b, false);
                let tol = 1e-3 * (n as f32).sqrt() * 12.0;
                assert!((fast[2 * b] - re).abs() < tol && (fast[2 * b + 1] - im).abs() < tol);
            }
            fft_in_place(&mut fast, &t, true);
            for (a, b) in fast.iter().zip(&x) {
                assert!((a / n as f32 - b).abs() < 1e-3, "n {n}");
            }
        }
    }

    /// Real forward transforms (the split path) equal the direct transform of the same
    /// windowed frames, for power-of-two lengths, one- and two-sided, framed (STFT) or not,
    /// with axes after the signal's.
    #[test]
    fn real_transforms_equal_the_direct_transform() {
        let mut seed = 0x2545_f491u32;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed % 2001) as f32 / 1000.0 - 1.0
        };
        for n in [8usize, 16, 32, 64, 256, 512, 1024] {
            for (onesided, frame_step, inner) in
                [(true, 0, 1), (false, 0, 1), (false, 0, 3), (true, n / 3, 1)]
            {
                let signal = if frame_step > 0 { 2 * n + 5 } else { n - 3 };
                let op = Dft {
                    axis: 1,
                    length: n,
                    frame_step,
                    inverse: false,
                    onesided,
                };
                let dims = match frame_step {
                    0 => vec![2, signal, inner, 1],
                    _ => vec![2, signal, 1],
                };
                let g = DftGeometry::new(&op, &Shape::new(&dims).unwrap()).unwrap();
                let x: Vec<f32> = (0..2 * signal * inner).map(|_| random()).collect();
                let window: Vec<f32> = (0..n).map(|_| random()).collect();
                let window = (frame_step > 0).then_some(&window[..]);
                let t = twiddles(n);
                let v = Operands {
                    x: &x,
                    twiddles: &t,
                    window,
                };
                let mut y = vec![f32::NAN; g.outer * g.frames * g.bins * g.inner * 2];
                let mut s = vec![0.0; 2 * n];
                // A short output, window or scratch: refused, nothing written.
                let mut short = vec![f32::NAN; y.len() - 1];
                assert!(!dft(&op, &g, &v, &mut short, &mut s));
                assert!(short.iter().all(|v| v.is_nan()));
                let cut = window.map(|w| &w[..n - 1]);
                let clipped = Operands { window: cut, ..v };
                assert!(window.is_none() || !dft(&op, &g, &clipped, &mut y, &mut s));
                assert!(!dft(&op, &g, &v, &mut y, &mut s[..2 * n - 1]));
                assert!(y.iter().all(|v| v.is_nan()));
                assert!(dft(&op, &g, &v, &mut y, &mut s));
                for o in 0..g.outer {
                    for f in 0..g.frames {
                        for i in 0..g.inner {
                            let mut frame = vec![0.0; 2 * n];
                            for j in 0..g.frame_length {
                                let at = (o * signal + f * frame_step + j) * inner + i;
                                frame[2 * j] = x[at] * window.map_or(1.0, |w| w[j]);
                            }
                            for b in 0..g.bins {
                                let (re, im) = direct_bin(&frame, &t, b, false);
                                let at = (((o * g.frames + f) * g.bins + b) * inner + i) * 2;
                                let tol = 2e-5 * n as f32;
                                assert!(
                                    (y[at] - re).abs() < tol && (y[at + 1] - im).abs() < tol,
                                    "n {n} onesided {onesided} step {frame_step} inner {inner} \
                                     bin {b}: {:?} against {:?}",
                                    (y[at], y[at + 1]),
                                    (re, im)
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// A real cosine at bin 3 of a 12-point (not a power of two) one-sided transform.
    #[test]
    fn a_cosine_lands_in_its_bin() {
        let n = 12;
        let op = Dft {
            axis: 1,
            length: n,
            frame_step: 0,
            inverse: false,
            onesided: true,
        };
        let g = DftGeometry::new(&op, &Shape::new(&[1, n, 1]).unwrap()).unwrap();
        assert_eq!(g.out_shape.dims(), [1, 7, 2]);
        let x: Vec<f32> = (0..n)
            .map(|j| (2.0 * core::f32::consts::PI * 3.0 * j as f32 / n as f32).cos())
            .collect();
        let t = twiddles(n);
        let (mut y, mut s) = (vec![0.0; 14], vec![0.0; 2 * n]);
        let v = Operands {
            x: &x,
            twiddles: &t,
            window: None,
        };
        assert!(dft(&op, &g, &v, &mut y, &mut s));
        for b in 0..7 {
            let want = if b == 3 { 6.0 } else { 0.0 };
            assert!(
                (y[2 * b] - want).abs() < 1e-4 && y[2 * b + 1].abs() < 1e-4,
                "bin {b}: {y:?}"
            );
        }
    }
}
