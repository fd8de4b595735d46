//! SIMD kernels for 8-bit integer convolutions on hosts (`std`): AVX2 on x86-64, NEON on
//! aarch64 (the Jetson's CPU fallback). They compute the sums of the portable kernels in
//! [`crate::ops::integer`] — exact in wrapping int32, so equal to theirs bit for bit — and the same
//! single rounding, vectorised. This module holds the geometry, shared by both instruction
//! sets; each implements [`Isa`]: the products of a block, the taps of a depthwise vector and
//! eight requantizations.
//!
//! Pointwise and regular convolutions are one block product ([`Isa::product`]): eight output
//! positions of `k` rows (input channels; taps read in place from a zero-point-padded copy of the
//! input for stride 1; eight unfolded windows otherwise) meeting the weights of four output
//! channels, the input zero point folded into the bias. Depthwise convolutions of stride 1 run
//! every tap as one contiguous pass over the padded plane (outputs computed on its full width,
//! the columns past the output's dropped); of stride 2, eight outputs of a row per vector.
//! Everything else (16-bit activations, other strides, planes of fewer than eight outputs)
//! stays with the portable kernels.

#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx2_depthwise;
#[cfg(target_arch = "x86_64")]
mod avx2_lanes;
#[cfg(target_arch = "x86_64")]
mod avx2_wide;
mod entry;
#[cfg(target_arch = "aarch64")]
mod neon;
mod shared;
#[cfg(target_arch = "x86_64")]
mod vnni;
#[cfg(target_arch = "x86_64")]
mod vnni_wide;
#[cfg(target_arch = "x86_64")]
mod wide;

use crate::base::context::StepContext;
use crate::base::geometry::ConvDims;
use crate::base::quantized::QuantInt;
#[cfg(target_arch = "x86_64")]
use crate::isa::forced::avx2_only;
use ferrite_hal::op::QConv;
use shared::Operands;

/// [`crate::ops::conv::int8::qconv`] with a SIMD kernel, when the build runs them and one fits the step:
/// 8-bit activations, and a pointwise, regular or grouped, or stride-1 or stride-2 depthwise
/// geometry. `None` leaves the step to the portable kernels; `Some(false)` is a scratch or
/// operand too small (which the verifier rules out).
#[allow(clippy::too_many_arguments)]
pub(super) fn qconv<X: QuantInt, Y: QuantInt>(
    ctx: StepContext<'_>,
    c: &QConv,
    d: ConvDims,
    x: &[X],
    w: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
    scratch: &mut [u8],
) -> Option<bool> {
    if X::WIDE || Y::WIDE {
        return None;
    }
    let ops = Operands {
        ctx,
        w,
        bias,
        requant,
        q: &c.requantize,
    };
    #[cfg(target_arch = "x86_64")]
    if crate::isa::level() >= crate::isa::Level::Avx512 && crate::isa::vnni() && !avx2_only() {
        // SAFETY: the CPU has AVX2 (`simd::level`), AVX-512VL and VNNI (`vnni::available`).
        return unsafe { entry::vnni(c, &d, &ops, x, y, scratch) };
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa::level() >= crate::isa::Level::Avx2 {
        // SAFETY: the CPU has AVX2 (`simd::level`).
        return unsafe { entry::avx2(c, &d, &ops, x, y, scratch) };
    }
    #[cfg(target_arch = "aarch64")]
    if crate::isa::neon() {
        // SAFETY: the CPU has NEON (`isa::neon`).
        return unsafe { entry::neon(c, &d, &ops, x, y, scratch) };
    }
    let _ = (ops, scratch);
    None
}

#[cfg(test)]
mod tests {
    use super::shared::*;
    use super::*;
    use crate::base::element_ids::Rng;
    use crate::isa::forced::AVX2_ONLY;
    use ferrite_hal::op::Requantize;

    /// The ONNX definition of an integer convolution, output by output: the bias plus
    /// `Σ (x − zx)·w` over the window (nothing from the padding) in wrapping int32, requantized
    /// per channel (what the portable kernels compute).
    fn definition<X: QuantInt>(c: &QConv, d: &ConvDims, x: &[X], ops: &Operands<'_>) -> Vec<i32> {
        let group = c.group.max(1);
        let (icg, ocg) = (d.c / group, d.oc / group);
        let [kh, kw] = c.window.kernel;
        let mut y = Vec::new();
        for b in 0..d.n {
            for o in 0..d.oc {
                let g = o / ocg;
                for oy in 0..d.oh {
                    for ox in 0..d.ow {
                        let mut acc = ops.bias[o];
                        for ci in 0..icg {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (oy * c.window.stride[0] + ky * c.window.dilation[0])
                                        .wrapping_sub(c.window.pads[0]);
                                    let ix = (ox * c.window.stride[1] + kx * c.window.dilation[1])
                                        .wrapping_sub(c.window.pads[1]);
                                    if iy < d.h && ix < d.w {
                                        let xi = ((b * d.c + g * icg + ci) * d.h + iy) * d.w + ix;
                                        let wi = ((o * icg + ci) * kh + ky) * kw + kx;
                                        let v = x[xi].widen() - c.requantize.input_zero;
                                        acc = acc.wrapping_add(v * ops.w[wi] as i32);
                                    }
                                }
                            }
                        }
                        y.push(ops.rescaler(o).apply(acc));
                    }
                }
            }
        }
        y
    }

    /// A case's geometry: drawn at random, or a pointwise one of the given sizes
    /// (`[c, oc, h, w]`), or a 3 × 3 depthwise one of the given channels and stride (padding
    /// and plane drawn at random).
    #[derive(Clone, Copy)]
    enum Shape {
        Random,
        Pointwise([usize; 4]),
        Depthwise { channels: usize, stride: usize },
    }

    /// One random case of the geometry `shape` picks, on both activation types; `pointwise`
    /// forces a pointwise one of `[c, oc, h, w]`.
    fn check_case(rng: &mut Rng, case: usize, shape: Shape) -> Option<usize> {
        let group_kind = rng.below(3); // 0: regular, 1: grouped, 2: depthwise
        let (kh, kw) = (1 + rng.below(4), 1 + rng.below(4));
        let stride = [1 + rng.below(2), 1 + rng.below(2)];
        let dilation = 1 + rng.below(2) * case.is_multiple_of(3) as usize;
        let pads = [rng.below(3), rng.below(3), rng.below(3), rng.below(3)];
        // One case in six pointwise: a 1×1 window, stride 1, no padding, one group.
        let (group_kind, kh, kw, stride, pads) = if case.is_multiple_of(6) {
            (0, 1, 1, [1, 1], [0; 4])
        } else {
            (group_kind, kh, kw, stride, pads)
        };
        // Up to 20 output channels (whole groups of eight at 0 and 8, then the rest) and
        // groups of up to 10 (groups of eight from a channel that is not a multiple of eight).
        let (group, icg, ocg) = match group_kind {
            0 => (1, 1 + rng.below(9), 1 + rng.below(20)),
            1 => (2 + rng.below(2), 1 + rng.below(4), 1 + rng.below(10)),
            _ => (1 + rng.below(12), 1, 1 + rng.below(2)),
        };
        let (h, w) = (1 + rng.below(14), 1 + rng.below(30));
        let (group_kind, kh, kw, stride, pads, group, icg, ocg, h, w) = match shape {
            Shape::Pointwise([c, oc, h, w]) => (0, 1, 1, [1, 1], [0; 4], 1, c, oc, h, w),
            Shape::Depthwise { channels, stride } => {
                let w = 1 + rng.below(16);
                (2, 3, 3, [stride; 2], pads, channels, 1, 1, h, w)
            }
            Shape::Random => (group_kind, kh, kw, stride, pads, group, icg, ocg, h, w),
        };
        let dilation = match shape {
            Shape::Random => dilation,
            _ => 1,
        };
        let span = |size: usize, k: usize, pad: usize, stride: usize| {
            (size + pad)
                .checked_sub((k - 1) * dilation + 1)
                .map(|s| s / stride + 1)
        };
        let (Some(oh), Some(ow)) = (
            span(h, kh, pads[0] + pads[2], stride[0]),
            span(w, kw, pads[1] + pads[3], stride[1]),
        ) else {
            return None;
        };
        let d = ConvDims {
            n: 1 + rng.below(2),
            c: group * icg,
            h,
            w,
            oc: group * ocg,
            oh,
            ow,
        };
        let zx = rng.below(256) as i32;
        let q = Requantize {
            input_zero: zx - 128,
            output_zero: rng.below(40) as i32 - 20,
            min: -128 + rng.below(100) as i32,
            max: 127,
        };
        let c = QConv {
            window: ferrite_hal::op::Window {
                kernel: [kh, kw],
                stride,
                dilation: [dilation; 2],
                pads,
            },
            group,
            requantize: q,
        };
        let k = icg * kh * kw;
        // Each output channel's weights: uniform; small (every 3-tap row a word of byte fours,
        // `QuadTaps`); large and of one sign (none); or the extremes of both signs.
        let mut w: Vec<i8> = Vec::with_capacity(d.oc * k);
        for _ in 0..d.oc {
            let kind = rng.below(4);
            let sign = if rng.below(2) == 0 { 1 } else { -1 };
            for _ in 0..k {
                let r = rng.next();
                w.push(match kind {
                    0 => r as i8,
                    1 => ((r % 129) as i32 - 64) as i8,
                    2 => sign * (100 + (r % 28) as i8),
                    _ => [127, -128, 0, 1][(r % 4) as usize],
                });
            }
        }
        let bias: Vec<i32> = (0..d.oc)
            .map(|_| (rng.next() % 20_000) as i32 - 10_000)
            .collect();
        let requant: Vec<i32> = (0..d.oc)
            .flat_map(|_| {
                let shift = if rng.below(8) == 0 {
                    0
                } else {
                    -12 + rng.below(8) as i32
                };
                // One channel in four with a multiplier of many low zero bits (a scale with
                // ties, such as a power of two's); the others have none.
                let low = if rng.below(4) == 0 {
                    0xfff0_0000
                } else {
                    u32::MAX
                };
                let multiplier = (1 << 30) + ((rng.next() % (1 << 30)) as u32 & low) as i32;
                [multiplier, shift]
            })
            .collect();
        let ops = Operands {
            ctx: StepContext::default(),
            w: &w,
            bias: &bias,
            requant: &requant,
            q: &q,
        };
        let elements = d.n * d.c * d.h * d.w;
        let mut scratch = std::vec![0u8; 4 * (ferrite_hal::geometry::qconv_scratch_elements(&c, icg, oh, ow).unwrap() + 4)];
        // Each input twice through a prepared step's kept state (built at the first run,
        // reused by the second: its padded planes keep their borders, nothing else).
        let mut memo = crate::base::context::StepMemo::default();
        let mut ran = None;
        for _ in 0..2 {
            let signed: Vec<i8> = (0..elements).map(|_| rng.next() as i8).collect();
            let mut y = std::vec![0i8; d.n * d.oc * oh * ow];
            let ctx = StepContext::default().with_memo(&mut memo);
            ran = qconv(
                ctx,
                &c,
                d,
                &signed,
                &w,
                &bias,
                &requant,
                &mut y,
                &mut scratch,
            );
            assert_ne!(
                ran,
                Some(false),
                "case {case}: the scratch the planner reserves suffices"
            );
            if ran == Some(true) {
                let want: Vec<i8> = definition(&c, &d, &signed, &ops)
                    .iter()
                    .map(|&v| v as i8)
                    .collect();
                assert_eq!(y, want, "int8 case {case}: {c:?} {d:?}");
            }
        }
        // The same geometry on uint8 (zero point in 0..=255).
        let q = Requantize {
            input_zero: zx,
            output_zero: 100,
            min: 0,
            max: 255,
        };
        let c = QConv { requantize: q, ..c };
        let ops = Operands { q: &q, ..ops };
        // The same memo: the int8 state's key differs (zero point, signedness), so it is
        // rebuilt, then reused.
        for _ in 0..2 {
            let unsigned: Vec<u8> = (0..elements).map(|_| rng.next() as u8).collect();
            let mut y = std::vec![0u8; d.n * d.oc * oh * ow];
            let ctx = StepContext::default().with_memo(&mut memo);
            let ran = qconv(
                ctx,
                &c,
                d,
                &unsigned,
                &w,
                &bias,
                &requant,
                &mut y,
                &mut scratch,
            );
            if ran == Some(true) {
                let want: Vec<u8> = definition(&c, &d, &unsigned, &ops)
                    .iter()
                    .map(|&v| v as u8)
                    .collect();
                assert_eq!(y, want, "uint8 case {case}: {c:?} {d:?}");
            }
        }
        // Which kernel ran: pointwise, regular/grouped stride 1, other strides, depthwise.
        let kind = match (c.is_pointwise(), group_kind == 2, stride) {
            (true, _, _) => 0,
            (false, false, [1, 1]) => 1,
            (false, false, _) => 2,
            (false, true, [1, 1]) => 3,
            (false, true, _) => 4,
        };
        ran.map(|_| kind)
    }

    /// A plane padded by the shuffles of an [`Expansion`] equals the row-by-row copy, on random
    /// planes, pads and padded widths (narrower than the input too, where there is no expansion).
    #[test]
    fn expanded_planes_equal_the_row_copies() {
        if !simd_runs() {
            return;
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut expanded = 0;
        for _ in 0..2000 {
            let (h, w) = (1 + rng.below(12), 1 + rng.below(31));
            let pads = [rng.below(4), rng.below(4), rng.below(4), rng.below(4)];
            let ph = (h + pads[0] + pads[2]).saturating_sub(rng.below(3)).max(1);
            let pw = (w + pads[1] + pads[3]).saturating_sub(rng.below(3)).max(1);
            let d = ConvDims {
                n: 1,
                c: 1,
                h,
                w,
                oc: 1,
                oh: 1,
                ow: 1,
            };
            let zero = rng.next() as u8;
            let plane: Vec<u8> = (0..h * w).map(|_| rng.next() as u8).collect();
            let mut want = std::vec![zero; ph * pw];
            copy_interior(&plane, &d, pads, &mut want, pw, 0);
            let Some(expansion) = Expansion::new(&d, pads, [ph, pw], zero) else {
                continue;
            };
            let mut got = std::vec![zero; ph * pw];
            dispatch_expand(&expansion, &plane, &mut got);
            assert_eq!(got, want, "{h}x{w} plane, pads {pads:?}, padded {ph}x{pw}");
            expanded += 1;
        }
        assert!(expanded > 500, "{expanded} planes expanded");
    }

    /// [`Isa::expand`] of this build's instruction set.
    fn dispatch_expand(expansion: &Expansion, plane: &[u8], padded: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `simd_runs`: the CPU has AVX2; `pad_interior` checks the lengths.
        unsafe {
            #[target_feature(enable = "avx2")]
            fn run(e: &Expansion, plane: &[u8], padded: &mut [u8]) {
                let d = ConvDims {
                    n: 1,
                    c: 1,
                    h: 0,
                    w: 0,
                    oc: 1,
                    oh: 1,
                    ow: 1,
                };
                pad_interior::<avx2::Avx2>(Some(e), plane, &d, [0; 4], padded, 1, 0);
            }
            run(expansion, plane, padded)
        }
        #[cfg(target_arch = "aarch64")]
        // SAFETY: `simd_runs`: the CPU has NEON; `pad_interior` checks the lengths.
        unsafe {
            #[target_feature(enable = "neon")]
            fn run(e: &Expansion, plane: &[u8], padded: &mut [u8]) {
                let d = ConvDims {
                    n: 1,
                    c: 1,
                    h: 0,
                    w: 0,
                    oc: 1,
                    oh: 1,
                    ow: 1,
                };
                pad_interior::<neon::Neon>(Some(e), plane, &d, [0; 4], padded, 1, 0);
            }
            run(expansion, plane, padded)
        }
    }

    /// Whether this build runs SIMD integer kernels (AVX2 on x86-64, NEON on aarch64).
    fn simd_runs() -> bool {
        #[cfg(target_arch = "x86_64")]
        return crate::isa::level() >= crate::isa::Level::Avx2;
        #[cfg(target_arch = "aarch64")]
        return crate::isa::neon();
        #[allow(unreachable_code)]
        false
    }

    /// Every SIMD convolution equals the definition (so the portable kernels) bit for bit, on
    /// random regular, grouped and depthwise geometries: kernels 1–4, strides 1–2, dilation,
    /// asymmetric padding, planes narrower and wider than a vector, per-channel scales with and
    /// without the high-word form, int8 and uint8.
    #[test]
    fn simd_convolutions_equal_the_definition() {
        if !simd_runs() {
            return;
        }
        // On a CPU with VNNI, both its kernels and AVX2's.
        for avx2_only in [false, true] {
            AVX2_ONLY.set(avx2_only);
            let mut rng = Rng(0x2545_f491_4f6c_dd1d);
            let mut ran = [0; 5];
            for case in 0..1500 {
                if let Some(kind) = check_case(&mut rng, case, Shape::Random) {
                    ran[kind] += 1;
                }
            }
            // Every kernel met enough cases (pointwise ones are rarest: a 1×1 window, stride
            // 1, no padding, one group).
            assert!(ran.iter().all(|&n| n >= 5), "cases per kernel: {ran:?}");
            std::println!(
                "cases per kernel (pointwise, stride 1, strided, depthwise 1, 2): {ran:?}"
            );
        }
        AVX2_ONLY.set(false);
    }

    /// The matrix of windows gathered run by run (rows of sixteen outputs and more, strides 1
    /// to 3, the stride-2 runs by SSE2 where their 32 bytes lie within the planes) or position
    /// by position (shorter rows) equals its definition, the zero point past the planes.
    #[test]
    fn gathered_windows_equal_their_definition() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..300 {
            let (oh, ow) = (1 + rng.below(6), 1 + rng.below(60));
            let (sh, sw) = (1 + rng.below(3), 1 + rng.below(3));
            let pw = (ow - 1) * sw + 1 + rng.below(4);
            let taps: Vec<usize> = (0..1 + rng.below(9)).map(|_| rng.below(3 * pw)).collect();
            // Planes sometimes cut short, so some windows pass their end.
            let len = (oh - 1) * sh * pw + 4 * pw - rng.below(2) * rng.below(2 * pw);
            let padded: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let windows = Windows::new([oh, ow], [sh, sw], pw);
            let mut matrix = std::vec![0u8; taps.len() * oh * ow];
            gather_matrix(&mut matrix, &padded, &taps, &windows, 7);
            for (t, &tap) in taps.iter().enumerate() {
                for p in 0..oh * ow {
                    let at = tap + (p / ow) * sh * pw + (p % ow) * sw;
                    let want = padded.get(at).copied().unwrap_or(7);
                    assert_eq!(matrix[t * oh * ow + p], want, "tap {t} position {p}");
                }
            }
        }
    }

    /// 3 × 3 depthwise convolutions of whole groups of eight channels (the AVX2 channel-lane
    /// kernel's domain, and past it: planes of one to 14 × 16, strides 1 and 2, random
    /// padding, one or two images, scales with and without ties or a high-word form) equal the
    /// definition bit for bit, on both instruction sets where the CPU has VNNI.
    #[test]
    fn simd_depthwise_convolutions_equal_the_definition() {
        if !simd_runs() {
            return;
        }
        for avx2_only in [false, true] {
            AVX2_ONLY.set(avx2_only);
            QUAD_CHANNELS.set(0);
            let mut rng = Rng(0x51ed_2701_a3c4_9b65);
            for case in 0..240 {
                let channels = [8, 16, 24, 64][case % 4];
                let stride = 1 + case / 4 % 2;
                check_case(&mut rng, 1 + case, Shape::Depthwise { channels, stride });
            }
            // The AVX2 build ran channels by byte fours (and the others by pairs: the weight
            // kinds above leave some channels without the words).
            #[cfg(target_arch = "x86_64")]
            if avx2_only || !crate::isa::vnni() {
                assert!(QUAD_CHANNELS.get() > 100, "{}", QUAD_CHANNELS.get());
            }
        }
        AVX2_ONLY.set(false);
    }

    /// A kernel row's word of byte fours sums what the row does, and neither of its pairs can
    /// leave int16 for any unsigned bytes (`vpmaddubsw` would saturate): on random rows and
    /// rows of the extremes; every row of small weights has one, three large weights of one
    /// sign none.
    #[test]
    fn quad_words_never_saturate() {
        let pair_fits = |p: i32, q: i32| {
            let high = 255 * (p.max(0) + q.max(0));
            let low = 255 * (p.min(0) + q.min(0));
            high <= i16::MAX as i32 && low >= i16::MIN as i32
        };
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut found = 0;
        for case in 0..200_000 {
            let row: [i8; 3] = match case % 3 {
                0 => [0; 3].map(|_: i8| rng.next() as i8),
                1 => [0; 3].map(|_: i8| ((rng.next() % 129) as i32 - 64) as i8),
                _ => [0; 3].map(|_: i8| [127, -128, -1, 0][(rng.next() % 4) as usize]),
            };
            let Some(word) = quad_word(row) else {
                assert_ne!(case % 3, 1, "{row:?} has a word");
                continue;
            };
            found += 1;
            let [a, w1, w2, rest] = word.to_le_bytes().map(|b| b as i8 as i32);
            assert_eq!(a + rest, row[0] as i32, "{row:?}");
            assert_eq!([w1, w2], [row[1] as i32, row[2] as i32], "{row:?}");
            assert!(
                pair_fits(a, w1) && pair_fits(w2, rest),
                "{row:?}: {a} {rest}"
            );
        }
        assert!(found > 150_000, "{found}");
        assert_eq!(quad_word([127, 127, 127]), None);
        assert_eq!(quad_word([-100, -90, -80]), None);
    }

    /// Pointwise convolutions of every width of output-channel run (the channel-lane kernel's
    /// six, four, two and one groups of eight; and channels not in whole groups), odd and even
    /// input channel counts and planes from one position to past a 16-position block equal the
    /// definition bit for bit, on both instruction sets where the CPU has VNNI.
    #[test]
    fn simd_pointwise_convolutions_equal_the_definition() {
        if !simd_runs() {
            return;
        }
        for avx2_only in [false, true] {
            AVX2_ONLY.set(avx2_only);
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            for (case, oc) in [8, 16, 24, 32, 40, 48, 56, 64, 72, 104, 128, 20, 3]
                .into_iter()
                .enumerate()
            {
                for _ in 0..6 {
                    let c = 1 + rng.below(40);
                    let (h, w) = (1 + rng.below(9), 1 + rng.below(9));
                    check_case(&mut rng, case, Shape::Pointwise([c, oc, h, w]));
                }
            }
        }
        AVX2_ONLY.set(false);
    }
}
