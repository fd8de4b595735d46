//! Discrete Fourier transforms (ONNX DFT and STFT): an in-place radix-2 FFT for power-of-two
//! lengths, a direct transform for any other, both on a twiddle table computed at pack time
//! (no trigonometry at run time), one transform at a time in a `2·length` scratch.

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
    let (Some(buf), Some(twiddles)) = (scratch.get_mut(..2 * n), v.twiddles.get(..2 * n)) else {
        return false;
    };
    // Past the checks above every access is in bounds; each goes through `get` all the same
    // (no panic path), reading zero or writing nothing where one were not.
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
