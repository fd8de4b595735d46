//! Activations applied to a slice in place: the standalone activation ops, the activation a
//! convolution or matrix product carries fused, and a recurrent layer's gates. Only the
//! activations a selection names are compiled in.

use crate::base::math;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
use crate::isa::activation_lanes;
#[cfg(feature = "std")]
use crate::micro::vector_math;
use ferrite_hal::{selects_activation, Activation, Selection};

/// Applies a fused activation (one of [`Activation::is_fusable`]'s, as the verifier requires)
/// to every element of `xs` in place: the dispatch calls it once, after the kernel of any op
/// that carries one. Only the activations selected by `OPS` are compiled in (the core refuses
/// a model with any other at load).
#[inline(always)]
pub fn activate_fused<const OPS: Selection>(act: Activation, xs: &mut [f32]) {
    match act {
        a @ Activation::Relu if selected::<OPS>(&a) => {
            xs.iter_mut().for_each(|x| *x = math::max(*x, 0.0))
        }
        a @ Activation::LeakyRelu { alpha } if selected::<OPS>(&a) => xs
            .iter_mut()
            .for_each(|x| *x = if *x >= 0.0 { *x } else { *x * alpha }),
        // Not `clamp`: ONNX allows min > max (the result is then max), where clamp panics.
        #[allow(clippy::manual_clamp)]
        a @ Activation::Clip { min, max } if selected::<OPS>(&a) => xs
            .iter_mut()
            .for_each(|x| *x = math::min(math::max(*x, min), max)),
        // On the host, the vectorised forms (a few ulp, as libm); on a microcontroller, libm.
        #[cfg(all(feature = "std", not(feature = "fast-math")))]
        a @ Activation::Sigmoid if selected::<OPS>(&a) => vector_math::sigmoid_all_widest(xs),
        #[cfg(all(feature = "std", not(feature = "fast-math")))]
        a @ Activation::Tanh if selected::<OPS>(&a) => vector_math::tanh_all_widest(xs),
        a @ Activation::Sigmoid if selected::<OPS>(&a) => {
            xs.iter_mut().for_each(|x| *x = sigmoid(*x))
        }
        a @ Activation::Tanh if selected::<OPS>(&a) => {
            xs.iter_mut().for_each(|x| *x = math::tanh(*x))
        }
        a @ Activation::HardSigmoid { alpha, beta } if selected::<OPS>(&a) => xs
            .iter_mut()
            .for_each(|x| *x = (alpha * *x + beta).clamp(0.0, 1.0)),
        a @ Activation::HardSwish if selected::<OPS>(&a) => xs
            .iter_mut()
            .for_each(|x| *x *= (*x / 6.0 + 0.5).clamp(0.0, 1.0)),
        // Identity, and (never, after verification) an unfusable or unselected activation.
        _ => {}
    }
}

/// [`activate_fused`] built for AVX2, with Relu, LeakyRelu and Clip as explicit compares and
/// blends, bit for bit as [`activate_fused`]. Left to the compiler, a
/// read-modify-write that keeps some elements as they are becomes a masked store
/// (`vmaskmovps`), microcoded on AMD's cores: DS-CNN's fused Relus had been a quarter of its
/// time on Zen 4.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
pub unsafe fn activate_fused_avx2<const OPS: Selection>(act: Activation, xs: &mut [f32]) {
    // The blocks of eight here, the last few (and every other activation) as the portable code.
    let rest = match act {
        a @ Activation::Relu if selected::<OPS>(&a) => activation_lanes::relu(xs),
        a @ Activation::LeakyRelu { alpha } if selected::<OPS>(&a) => {
            activation_lanes::leaky_relu(xs, alpha)
        }
        a @ Activation::Clip { min, max } if selected::<OPS>(&a) => {
            activation_lanes::clip(xs, min, max)
        }
        _ => xs,
    };
    activate_fused::<OPS>(act, rest)
}

/// Applies `act` to every element of `xs` in place: any activation selected by `OPS`
/// (standalone `Unary` ops, recurrent gates). Out of line: one copy serves every call.
#[inline(never)]
pub fn activate<const OPS: Selection>(act: Activation, xs: &mut [f32]) {
    match act {
        Activation::None
        | Activation::Relu
        | Activation::LeakyRelu { .. }
        | Activation::Clip { .. }
        | Activation::Sigmoid
        | Activation::Tanh
        | Activation::HardSigmoid { .. }
        | Activation::HardSwish => activate_fused::<OPS>(act, xs),
        a @ Activation::Exp if selected::<OPS>(&a) => map(xs, math::exp),
        a @ Activation::Log if selected::<OPS>(&a) => map(xs, math::ln),
        a @ Activation::Sqrt if selected::<OPS>(&a) => map(xs, math::sqrt),
        a @ Activation::Reciprocal if selected::<OPS>(&a) => map(xs, |x| 1.0 / x),
        a @ Activation::Neg if selected::<OPS>(&a) => map(xs, |x| -x),
        a @ Activation::Abs if selected::<OPS>(&a) => map(xs, f32::abs),
        a @ Activation::Sign if selected::<OPS>(&a) => map(xs, sign),
        a @ Activation::Floor if selected::<OPS>(&a) => map(xs, math::floor),
        a @ Activation::Ceil if selected::<OPS>(&a) => map(xs, math::ceil),
        a @ Activation::Round if selected::<OPS>(&a) => map(xs, math::round_half_even),
        a @ Activation::Sin if selected::<OPS>(&a) => map(xs, math::sin),
        a @ Activation::Cos if selected::<OPS>(&a) => map(xs, math::cos),
        // On a host, the vectorised erf (within 2 ulp; libm's is a call per element).
        #[cfg(feature = "std")]
        a @ Activation::Erf if selected::<OPS>(&a) => vector_math::erf_all_widest(xs),
        #[cfg(feature = "std")]
        a @ Activation::Gelu { tanh: false } if selected::<OPS>(&a) => {
            vector_math::gelu_all_widest(xs)
        }
        #[cfg(not(feature = "std"))]
        a @ Activation::Erf if selected::<OPS>(&a) => map(xs, math::erf),
        #[cfg(not(feature = "std"))]
        a @ Activation::Gelu { tanh: false } if selected::<OPS>(&a) => map(xs, |x| {
            0.5 * x * (1.0 + math::erf(x * core::f32::consts::FRAC_1_SQRT_2))
        }),
        a @ Activation::Gelu { tanh: true } if selected::<OPS>(&a) => map(xs, |x| {
            // sqrt(2 / pi)
            const K: f32 = 0.797_884_6;
            0.5 * x * (1.0 + math::tanh(K * (x + 0.044_715 * x * x * x)))
        }),
        a @ Activation::Elu { alpha } if selected::<OPS>(&a) => {
            map(xs, |x| if x >= 0.0 { x } else { alpha * math::exp_m1(x) })
        }
        a @ Activation::Selu { alpha, gamma } if selected::<OPS>(&a) => map(xs, |x| {
            gamma * if x > 0.0 { x } else { alpha * math::exp_m1(x) }
        }),
        a @ Activation::Celu { alpha } if selected::<OPS>(&a) => map(xs, |x| {
            x.max(0.0) + (alpha * math::exp_m1(x / alpha)).min(0.0)
        }),
        a @ Activation::Softplus if selected::<OPS>(&a) => map(xs, softplus),
        a @ Activation::Softsign if selected::<OPS>(&a) => map(xs, |x| x / (1.0 + x.abs())),
        a @ Activation::Mish if selected::<OPS>(&a) => map(xs, |x| x * math::tanh(softplus(x))),
        a @ Activation::ThresholdedRelu { alpha } if selected::<OPS>(&a) => {
            map(xs, |x| if x > alpha { x } else { 0.0 })
        }
        // Not selected: the core refused the model at load.
        _ => {}
    }
}

/// Whether `OPS` selects `act` (a constant in each arm where `act`'s variant is known).
#[inline(always)]
const fn selected<const OPS: Selection>(act: &Activation) -> bool {
    selects_activation(OPS, act)
}

/// `x ↦ f(x)` over `xs`, in place.
#[inline(always)]
fn map(xs: &mut [f32], f: impl Fn(f32) -> f32) {
    xs.iter_mut().for_each(|x| *x = f(*x));
}

/// −1, 0 or 1 by the sign of `x`; NaN stays NaN.
#[inline]
fn sign(x: f32) -> f32 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

/// `ln(1 + e^x)` without overflow: `x + ln(1 + e^−x)` for positive `x`.
#[inline]
pub fn softplus(x: f32) -> f32 {
    if x > 0.0 {
        x + math::ln_1p(math::exp(-x))
    } else {
        math::ln_1p(math::exp(x))
    }
}

/// Numerically stable logistic function.
#[inline]
pub fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + math::exp(-x))
    } else {
        let e = math::exp(x);
        e / (1.0 + e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_hal::{with_activations, ALL_OPS};

    const XS: [f32; 7] = [-3.0, -1.0, -0.25, 0.0, 0.5, 2.0, 7.0];

    fn applied<const OPS: Selection>(act: Activation) -> [f32; 7] {
        let mut xs = XS;
        activate::<OPS>(act, &mut xs);
        xs
    }

    /// A build selecting one activation computes it exactly as the every-activation build,
    /// fused or standalone, and links no other (an unselected one leaves the data as it is;
    /// the core refuses such a model at load, so no step reaches it).
    #[test]
    fn a_selected_activation_computes_as_the_full_build() {
        macro_rules! check {
            ($($act:expr),*) => {$({
                const ONE: Selection = with_activations(0, &[$act]);
                assert_eq!(applied::<ONE>($act), applied::<ALL_OPS>($act), "{:?}", $act);
                assert_ne!(applied::<ALL_OPS>($act), XS, "{:?} changes the data", $act);
                let mut fused = XS;
                activate_fused::<ONE>($act, &mut fused);
                if $act.is_fusable() {
                    assert_eq!(fused, applied::<ALL_OPS>($act), "{:?} fused", $act);
                }
                const OTHER: Selection = with_activations(0, &[Activation::Softsign]);
                if $act.code() != Activation::Softsign.code() {
                    assert_eq!(applied::<OTHER>($act), XS, "{:?} is not linked", $act);
                }
            })*};
        }
        check!(
            Activation::Relu,
            Activation::LeakyRelu { alpha: 0.1 },
            Activation::Clip { min: 0.0, max: 6.0 },
            Activation::Sigmoid,
            Activation::Tanh,
            Activation::HardSwish,
            Activation::Exp,
            Activation::Gelu { tanh: true },
            Activation::Elu { alpha: 1.0 },
            Activation::Softsign
        );
    }

    /// The AVX2 activations equal the portable ones bit for bit, on every length (blocks of
    /// eight and the rest) and on the values that tell max, min and blends apart: signed zeros,
    /// NaN, infinities, equal bounds, bounds the wrong way round and NaN bounds.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[test]
    fn the_avx2_activations_equal_the_portable_ones_bit_for_bit() {
        use crate::isa::{level, Level};
        if level() < Level::Avx2 {
            return;
        }
        let values = [
            -0.0,
            0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -3.5,
            1e-40,
            -1e-40,
            2.0,
            6.0,
            7.25,
            -1.0,
        ];
        let acts = [
            Activation::Relu,
            Activation::LeakyRelu { alpha: 0.1 },
            Activation::LeakyRelu { alpha: -2.0 },
            Activation::Clip { min: 0.0, max: 6.0 },
            Activation::Clip {
                min: -0.0,
                max: 0.0,
            },
            Activation::Clip { min: 6.0, max: 0.0 },
            Activation::Clip {
                min: f32::NAN,
                max: 2.0,
            },
            Activation::Clip {
                min: -1.0,
                max: f32::NAN,
            },
            Activation::Clip {
                min: f32::NEG_INFINITY,
                max: f32::INFINITY,
            },
        ];
        for act in acts {
            for len in 0..=27 {
                let xs: Vec<f32> = (0..len)
                    .map(|i| values[(i * 5 + len) % values.len()])
                    .collect();
                let mut portable = xs.clone();
                activate_fused::<ALL_OPS>(act, &mut portable);
                let mut wide = xs.clone();
                // SAFETY: the CPU has AVX2 (checked above).
                #[allow(unsafe_code)]
                unsafe {
                    activate_fused_avx2::<ALL_OPS>(act, &mut wide)
                };
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&wide), bits(&portable), "{act:?} on {xs:?}");
            }
        }
    }
}
