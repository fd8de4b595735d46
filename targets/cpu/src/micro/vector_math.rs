//! Branch-free single-precision `e^x`, sigmoid, tanh and erf for whole slices on the host (`std`):
//! written so that LLVM vectorises the loops (selects instead of branches, no library calls),
//! where libm's `expf` and `tanhf` are a call per element — most of a GRU's or LSTM's time. The
//! same algorithms as Cephes' `expf`/`tanhf` (a degree-7 polynomial of the reduced argument,
//! scaled by `2^n`; an odd polynomial below |x| = 0.625), each polynomial by Horner's rule in
//! fused multiply-adds (half the operations of a multiply and an add a degree: LSTM 57 → 52 µs,
//! a transformer's Erf 2.05 → 1.46 µs on Zen 3), within a few ulp of the exact result (the unit
//! tests measure it against f64). Microcontroller builds keep libm.

/// `$all(xs)` in the widest build this CPU runs: compiled with AVX2 (eight lanes) where
/// the CPU runs the AVX2 build, with AVX-512F (sixteen) where it runs that one (the same
/// operations lane by lane, so the same results bit for bit), else as compiled. A macro,
/// so that each function is inlined into its own wrappers: one wrapper taking `$all` as
/// `impl Fn` had called the larger ones (erf, GELU) out of line, built for the baseline
/// (SSE: a transformer's Erf 3.1 µs on 1,024 values).
macro_rules! widest {
    ($xs:ident, $all:ident) => {{
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        {
            use crate::isa::{level, Level};
            /// `$all` with AVX-512F.
            #[target_feature(enable = "avx512f")]
            #[allow(unsafe_code)]
            unsafe fn wide(xs: &mut [f32]) {
                $all(xs)
            }
            /// `$all` with AVX2 and FMA.
            #[target_feature(enable = "avx2,fma")]
            #[allow(unsafe_code)]
            unsafe fn narrow(xs: &mut [f32]) {
                $all(xs)
            }
            match level() {
                // SAFETY: the CPU has AVX-512F (`simd::level`).
                #[allow(unsafe_code)]
                Level::Avx512 => return unsafe { wide($xs) },
                // SAFETY: the CPU has AVX2 (`simd::level`).
                #[allow(unsafe_code)]
                Level::Avx2 => return unsafe { narrow($xs) },
                Level::Portable => {}
            }
        }
        $all($xs)
    }};
}

/// Beyond this `e^x` overflows to infinity.
const EXP_HI: f32 = 88.722_83;
/// Below this `e^x` is under the smallest normal float and is returned as 0.
const EXP_LO: f32 = -87.336_55;

/// `2^n` for integral `n` in `-126..=127`, from its exponent bits. The integer is read from
/// `n + 1.5·2^23`'s mantissa (whose bits are `0x4B40_0000 + n`) rather than by `as i32`,
/// whose saturation x86-64 vectorises only lane by lane.
#[inline(always)]
fn pow2(n: f32) -> f32 {
    let integer = (n + 12_582_912.0).to_bits().wrapping_sub(0x4B40_0000);
    f32::from_bits(integer.wrapping_add(127) << 23)
}

/// ln 2 in two parts, the first exact in a few bits, so n·ln2 subtracts exactly.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Adding and subtracting 1.5·2^23 rounds to the nearest integer (|v| < 2^22).
const ROUND: f32 = 12_582_912.0;

/// `(n, p)` with `e^c ≈ p·2^n`: `n` the nearest integer to `c·log2 e`, `p` a polynomial in
/// the remainder (`c` within `EXP_LO..=EXP_HI`).
#[inline(always)]
fn exp_parts(c: f32) -> (f32, f32) {
    let n = c.mul_add(core::f32::consts::LOG2_E, ROUND) - ROUND;
    let r = (-n).mul_add(LN2_HI, c);
    let r = (-n).mul_add(LN2_LO, r);
    let q = horner(
        r,
        [
            1.987_569_1e-4,
            1.398_199_9e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            0.5,
        ],
    );
    let p = q.mul_add(r * r, r) + 1.0;
    (n, p)
}

/// `e^x`: within 2 ulp for normal results, +∞ above 88.72, 0 below −87.34 (where the exact
/// result is subnormal), NaN for NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let (n, p) = exp_parts(x.clamp(EXP_LO, EXP_HI));
    // 2^n in two halves, each a normal float for every n in -126..=128.
    let half = (n * 0.5 + ROUND) - ROUND;
    let y = p * pow2(half) * pow2(n - half);
    // Two selects (not a chain of branches: each lane of a vector picks its own).
    let y = if x < EXP_LO { 0.0 } else { y };
    if x > EXP_HI {
        f32::INFINITY
    } else {
        y
    }
}

/// [`exp`] of an `x` within `EXP_LO..=88.0` (or NaN), bit for bit, in fewer operations:
/// no clamp or select, and `2^n` in one factor (normal for every such `n`: both forms
/// round once, and only where the result is subnormal). For [`sigmoid`] and [`tanh`],
/// whose arguments are in range (their vector loops are bound by their operation count).
#[inline(always)]
fn exp_in_range(x: f32) -> f32 {
    let (n, p) = exp_parts(x);
    p * pow2(n)
}

/// The logistic function `1 / (1 + e^−x)`, from `e^−|x|` (never overflowing).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let v = -x.abs();
    // As `exp(v)`: clamped below (NaN stays NaN), 0 below the clamp.
    let e = exp_in_range(if v < EXP_LO { EXP_LO } else { v });
    let e = if v < EXP_LO { 0.0 } else { e };
    let s = 1.0 / (1.0 + e);
    if x >= 0.0 {
        s
    } else {
        e * s
    }
}

/// Hyperbolic tangent: an odd polynomial below |x| = 0.625, else `1 − 2 / (e^{2|x|} + 1)`
/// with the sign of `x` (|x| capped at 9.1, where tanh rounds to 1).
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let q = horner(
        z,
        [
            -5.704_988_7e-3,
            2.063_909e-2,
            -5.373_971_6e-2,
            1.333_144_2e-1,
            -3.333_328e-1,
        ],
    );
    let small = (q * z).mul_add(x, x);
    let big = 1.0 - 2.0 / (exp_in_range(2.0 * a.min(9.1)) + 1.0);
    let big = f32::from_bits(big.to_bits() | (x.to_bits() & 0x8000_0000));
    // Below 2^-12, tanh(x) rounds to x (which also keeps −0 and NaN as they are). Selects,
    // not branches (`|`, not `||`), so that each lane of a vector picks its own.
    let keep = (a < 2.441_406_3e-4) | x.is_nan();
    let y = if a < 0.625 { small } else { big };
    if keep {
        x
    } else {
        y
    }
}

/// The polynomial with coefficients `c` (highest degree first) at `t`, by Horner's rule
/// in fused multiply-adds (one rounding a degree).
#[inline(always)]
fn horner<const N: usize>(t: f32, c: [f32; N]) -> f32 {
    let (first, rest) = c.split_first().map_or((0.0, &[][..]), |(f, r)| (*f, r));
    rest.iter().fold(first, |acc, &c| acc.mul_add(t, c))
}

/// The error function, within 2 ulp: `x + x·P(x²)` below |x| = 0.921875; above,
/// `1 − e^{−x²}·Q(1/|x|)` with the sign of `x` (Q approximating `erfc(x)·e^{x²}`, which
/// varies slowly); ±1 from |x| = 3.92, where erf rounds to ±1. P (degree 5) and Q (degree
/// 8) are Chebyshev fits of this project's, made and checked against f64 (`unit tests`).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    const SMALL: f32 = 0.921_875;
    const ONE: f32 = 3.92;
    let a = x.abs();
    let z = x * x;
    let p = horner(
        z,
        [
            -6.008_739_6e-4,
            4.997_014e-3,
            -2.676_95e-2,
            1.128_190_5e-1,
            -3.761_250_4e-1,
            1.283_791_5e-1,
        ],
    );
    let small = x.mul_add(p, x);
    let t = 1.0 / a;
    let q = horner(
        t,
        [
            -1.845_518_8e-3,
            -9.048_634e-3,
            1.029_929_3e-1,
            -3.346_943_6e-1,
            5.628_576e-1,
            -5.006_481_4e-1,
            4.971_569_4e-2,
            5.579_139e-1,
            3.400_557e-4,
        ],
    );
    let big = (-exp(-z)).mul_add(q, 1.0);
    // Selects, not branches, so that each lane of a vector picks its own; NaN takes the
    // last one's `big` (NaN).
    let y = if a >= ONE { 1.0 } else { big };
    let y = f32::from_bits(y.to_bits() | (x.to_bits() & 0x8000_0000));
    if a < SMALL {
        small
    } else {
        y
    }
}

/// [`erf`] of every element, in place (inlined, as [`sigmoid_all`]).
#[inline(always)]
pub fn erf_all(xs: &mut [f32]) {
    // A loop, not `for_each` with a closure: that was left out of line for the larger
    // functions, built for the baseline instead of the caller's SIMD build.
    for x in xs.iter_mut() {
        *x = erf(*x);
    }
}

/// GELU, `x/2 · (1 + erf(x/√2))`, of every element, in place (inlined, as
/// [`sigmoid_all`]).
#[inline(always)]
pub fn gelu_all(xs: &mut [f32]) {
    for x in xs.iter_mut() {
        *x = 0.5 * *x * (1.0 + erf(*x * core::f32::consts::FRAC_1_SQRT_2));
    }
}

/// [`erf_all`] in the widest build this CPU runs, as [`sigmoid_all_widest`].
pub fn erf_all_widest(xs: &mut [f32]) {
    widest!(xs, erf_all)
}

/// [`gelu_all`] in the widest build this CPU runs, as [`sigmoid_all_widest`].
pub fn gelu_all_widest(xs: &mut [f32]) {
    widest!(xs, gelu_all)
}

/// [`sigmoid`] of every element, in place (inlined, so it takes the caller's SIMD build).
#[inline(always)]
pub fn sigmoid_all(xs: &mut [f32]) {
    for x in xs.iter_mut() {
        *x = sigmoid(*x);
    }
}

/// [`tanh`] of every element, in place (inlined, as [`sigmoid_all`]).
#[inline(always)]
pub fn tanh_all(xs: &mut [f32]) {
    for x in xs.iter_mut() {
        *x = tanh(*x);
    }
}

/// [`exp`] of every element, in place (inlined, as [`sigmoid_all`]).
#[inline(always)]
pub fn exp_all(xs: &mut [f32]) {
    for x in xs.iter_mut() {
        *x = exp(*x);
    }
}

/// [`exp_all`] in the widest build this CPU runs, as [`sigmoid_all_widest`].
pub fn exp_all_widest(xs: &mut [f32]) {
    widest!(xs, exp_all)
}

/// [`sigmoid_all`] in the widest build this CPU runs: eight lanes on an x86-64 with AVX2,
/// sixteen with AVX-512 (the same operations, so the same results bit for bit; tested),
/// else as compiled. For callers
/// compiled for the baseline (the recurrent layers' gates).
pub fn sigmoid_all_widest(xs: &mut [f32]) {
    widest!(xs, sigmoid_all)
}

/// [`tanh_all`] in the widest build this CPU runs, as [`sigmoid_all_widest`].
pub fn tanh_all_widest(xs: &mut [f32]) {
    widest!(xs, tanh_all)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    /// Units in the last place between `got` and the f64 reference, at the reference's
    /// magnitude.
    fn ulps(got: f32, want: f64) -> f64 {
        let want32 = want as f32;
        let ulp = (f32::from_bits(want32.abs().to_bits() + 1) - want32.abs()) as f64;
        ((got as f64) - want).abs() / ulp
    }

    /// Every 331st float between −100 and 100 (about 7 million), and the edges.
    fn sweep(mut check: impl FnMut(f32)) {
        for x in [
            0.0, -0.0, 1e-30, -1e-30, 88.7, -87.3, 9.1, -9.1, 0.625, -0.625,
        ] {
            check(x);
        }
        let mut bits = 0u32;
        while bits < 0x42c8_0000 {
            let x = f32::from_bits(bits);
            check(x);
            check(-x);
            bits += 331;
        }
    }

    #[test]
    fn exp_is_within_two_ulp() {
        let mut worst = 0.0f64;
        sweep(|x| {
            let want = (x as f64).exp();
            if (EXP_LO..=EXP_HI).contains(&x) {
                worst = worst.max(ulps(exp(x), want));
            }
        });
        std::println!("exp: worst {worst:.2} ulp");
        assert!(worst <= 2.0, "{worst} ulp");
        assert_eq!(exp(100.0), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn erf_is_within_two_ulp() {
        let mut worst = 0.0f64;
        sweep(|x| {
            let want = libm::erf(x as f64);
            // Below the smallest normal the ulp is the subnormal spacing; skip those.
            if want.abs() > 1e-37 {
                worst = worst.max(ulps(erf(x), want));
            }
        });
        std::println!("erf: worst {worst:.2} ulp");
        assert!(worst <= 2.0, "{worst} ulp");
        for (x, want) in [
            (f32::INFINITY, 1.0),
            (f32::NEG_INFINITY, -1.0),
            (3.92, 1.0),
            (-100.0, -1.0),
            (0.0, 0.0),
        ] {
            assert_eq!(erf(x), want, "{x}");
        }
        assert!(erf(f32::NAN).is_nan());
        assert_eq!(erf(-0.0).to_bits(), (-0.0f32).to_bits());
        let mut xs = [0.5f32, -2.0, 7.0];
        gelu_all(&mut xs);
        for (got, x) in xs.iter().zip([0.5f64, -2.0, 7.0]) {
            let want = 0.5 * x * (1.0 + libm::erf(x / core::f64::consts::SQRT_2));
            assert!(
                (*got as f64 - want).abs() <= 1e-6 * want.abs().max(1.0),
                "{x}"
            );
        }
    }

    /// The in-range exponential that sigmoid and tanh use equals [`exp`] bit for bit over
    /// the whole range they call it on (and NaN for NaN).
    #[test]
    fn exp_in_range_is_exp() {
        let mut checked = 0;
        sweep(|x| {
            if (EXP_LO..=88.0).contains(&x) {
                assert_eq!(exp_in_range(x).to_bits(), exp(x).to_bits(), "e^{x:e}");
                checked += 1;
            }
        });
        assert!(checked > 1_000_000);
        assert!(exp_in_range(f32::NAN).is_nan());
    }

    /// The widest build (AVX2 or AVX-512, whichever this CPU runs) computes each function
    /// exactly as the scalar code does, bit for bit, over a sweep of every magnitude, both
    /// signs, the overflow edges and NaN, in slices whose lengths leave vector tails.
    #[test]
    fn the_widest_builds_equal_the_scalar_functions_bit_for_bit() {
        let mut xs = std::vec::Vec::new();
        sweep(|x| xs.push(x));
        xs.extend([
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            0.0,
            -0.0,
            88.73,
            -87.34,
            9.1,
        ]);
        /// A slice function and the scalar function it applies.
        type Pair = (fn(&mut [f32]), fn(f32) -> f32);
        let checks: [Pair; 5] = [
            (sigmoid_all_widest, sigmoid),
            (tanh_all_widest, tanh),
            (exp_all_widest, exp),
            (erf_all_widest, erf),
            (gelu_all_widest, |x| {
                let mut v = [x];
                gelu_all(&mut v);
                v[0]
            }),
        ];
        for (widest, scalar) in checks {
            for chunk in xs.chunks(37) {
                let mut got = chunk.to_vec();
                widest(&mut got);
                for (&x, got) in chunk.iter().zip(got) {
                    let want = scalar(x);
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "f({x:e}): {got:e} vs {want:e}"
                    );
                }
            }
        }
    }

    #[test]
    fn sigmoid_and_tanh_are_within_a_few_ulp() {
        let (mut worst_s, mut worst_t) = (0.0f64, 0.0f64);
        sweep(|x| {
            let xd = x as f64;
            let s = 1.0 / (1.0 + (-xd).exp());
            // Results under the smallest normal are flushed by `exp`; skip them.
            if s > 1e-37 {
                worst_s = worst_s.max(ulps(sigmoid(x), s));
            }
            worst_t = worst_t.max(ulps(tanh(x), xd.tanh()));
        });
        std::println!("sigmoid: worst {worst_s:.2} ulp, tanh: worst {worst_t:.2} ulp");
        assert!(worst_s <= 3.0, "sigmoid: {worst_s} ulp");
        assert!(worst_t <= 3.0, "tanh: {worst_t} ulp");
        for (x, s, t) in [
            (f32::INFINITY, 1.0, 1.0),
            (f32::NEG_INFINITY, 0.0, -1.0),
            (0.0, 0.5, 0.0),
        ] {
            assert_eq!((sigmoid(x), tanh(x)), (s, t), "{x}");
        }
        assert!(sigmoid(f32::NAN).is_nan() && tanh(f32::NAN).is_nan());
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
    }
}
