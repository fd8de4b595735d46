//! The hot kernels in isolation: the matrix product behind Conv/Gemm/MatMul and the
//! convolutions, float and int8, at the shapes the test models use, next to this core's
//! measured peaks (`peak`: independent FMA chains in registers, nothing loaded; `peak_int8`: the
//! exact int8 multiply-add of each build — AVX2's `vpmaddwd` and its `vpaddd`, AVX-512 VNNI's
//! `vpdpbusd`). Throughput is in floating-point operations (a multiply-add counts two) for
//! `peak` and `sgemm`, in multiply-adds for `conv`, `peak_int8` and `qconv`: criterion's
//! "elem/s" is FLOP/s for the first two and MAC/s for the others.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrite_cpu::micro::sgemm::{sgemm, Mat};
use ferrite_cpu::StepContext;

fn gemm(c: &mut Criterion) {
    let mut group = c.benchmark_group("sgemm");
    // (M, N, K): DS-CNN pointwise, ResNet-8 3x3 via im2col, MLP layer, MobileNet's 256-channel
    // pointwise on a 3x3 plane (N = 9: the dot-product tail kernel).
    for (m, n, k) in [
        (64, 125, 64),
        (32, 256, 144),
        (64, 64, 576),
        (1, 128, 784),
        (256, 9, 256),
    ] {
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
        let mut out = vec![0.0f32; m * n];
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        group.bench_function(format!("{m}x{n}x{k}"), |bench| {
            bench.iter(|| {
                sgemm(
                    StepContext::default(),
                    m,
                    n,
                    k,
                    1.0,
                    Mat {
                        data: &a,
                        stride: k,
                    },
                    Mat {
                        data: &b,
                        stride: n,
                    },
                    &mut out,
                    n,
                    false,
                )
            })
        });
    }
    group.finish();
}

fn conv(c: &mut Criterion) {
    use ferrite_cpu::base::geometry::ConvDims;
    use ferrite_cpu::ops::conv::reference::conv;
    use ferrite_hal::op::{Conv, Window};
    use ferrite_hal::Activation;
    let mut group = c.benchmark_group("conv");
    // (channels in, channels out, size, kernel, stride, groups): ResNet-8 stage 1, DS-CNN depthwise
    // and pointwise, MobileNet's stride-2 depthwise and its last stage's depthwise on 6x6.
    for (ci, co, size, k, stride, g) in [
        (16, 16, 32, 3, 1, 1),
        (64, 64, 5, 3, 1, 64),
        (64, 64, 5, 1, 1, 1),
        (32, 32, 24, 3, 2, 32),
        (128, 128, 6, 3, 1, 128),
    ] {
        let pad = k / 2;
        let out = (size + 2 * pad - k) / stride + 1;
        let p = Conv {
            window: Window {
                kernel: [k, k],
                stride: [stride, stride],
                dilation: [1, 1],
                pads: [pad; 4],
            },
            group: g,
            activation: Activation::Relu,
        };
        let d = ConvDims {
            n: 1,
            c: ci,
            h: size,
            w: size,
            oc: co,
            oh: out,
            ow: out,
        };
        let x = vec![0.5f32; ci * size * size];
        let w = vec![0.1f32; co * ci / g * k * k];
        let mut y = vec![0.0f32; co * out * out];
        let scratch_len =
            ferrite_hal::geometry::conv_scratch_elements(&p, ci / g, out, out).unwrap_or(0);
        let mut scratch = vec![0.0f32; scratch_len];
        group.throughput(Throughput::Elements(
            (co * out * out * ci / g * k * k) as u64,
        ));
        group.bench_function(
            format!("{ci}to{co}_{size}x{size}_k{k}_s{stride}_g{g}"),
            |b| {
                b.iter(|| {
                    conv(
                        StepContext::default(),
                        &p,
                        d,
                        &x,
                        &w,
                        None,
                        &mut y,
                        &mut scratch,
                        false,
                    )
                })
            },
        );
    }
    group.finish();
}

/// The core's single-thread peak: `CHAINS` independent multiply-add chains on registers (more
/// than an FMA's latency times its issue rate, so the units never wait), nothing loaded.
#[cfg(target_arch = "x86_64")]
mod peak {
    use core::arch::x86_64::*;

    /// Independent accumulators.
    const CHAINS: usize = 12;
    /// Multiply-adds per chain per call.
    const STEPS: usize = 1024;

    /// Floating-point operations per call of a `lanes`-wide kernel.
    pub fn flops(lanes: usize) -> u64 {
        (2 * CHAINS * STEPS * lanes) as u64
    }

    /// 256-bit FMAs.
    #[target_feature(enable = "avx2,fma")]
    pub fn avx2(seed: f32) -> f32 {
        let (a, b) = (_mm256_set1_ps(seed), _mm256_set1_ps(0.999));
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..STEPS {
            for c in acc.iter_mut() {
                *c = _mm256_fmadd_ps(*c, b, a);
            }
        }
        let sum = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, c| _mm256_add_ps(s, *c));
        _mm256_cvtss_f32(sum)
    }

    /// 512-bit FMAs.
    #[target_feature(enable = "avx512f")]
    pub fn avx512(seed: f32) -> f32 {
        let (a, b) = (_mm512_set1_ps(seed), _mm512_set1_ps(0.999));
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..STEPS {
            for c in acc.iter_mut() {
                *c = _mm512_fmadd_ps(*c, b, a);
            }
        }
        let sum = acc
            .iter()
            .fold(_mm512_setzero_ps(), |s, c| _mm512_add_ps(s, *c));
        _mm512_reduce_add_ps(sum)
    }
}

#[cfg(target_arch = "x86_64")]
fn peak(c: &mut Criterion) {
    use std::hint::black_box;
    let mut group = c.benchmark_group("peak");
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        group.throughput(Throughput::Elements(peak::flops(8)));
        // SAFETY: the CPU has AVX2 and FMA (checked above).
        group.bench_function("avx2_fma", |b| {
            b.iter(|| unsafe { peak::avx2(black_box(0.5)) })
        });
    }
    if is_x86_feature_detected!("avx512f") {
        group.throughput(Throughput::Elements(peak::flops(16)));
        // SAFETY: the CPU has AVX-512F (checked above).
        group.bench_function("avx512f", |b| {
            b.iter(|| unsafe { peak::avx512(black_box(0.5)) })
        });
    }
    group.finish();
}

#[cfg(not(target_arch = "x86_64"))]
fn peak(_: &mut Criterion) {}

/// The int8 convolutions (`QConv`, int8 activations, per-channel scales) at the test models'
/// shapes, each run as a prepared program runs it: its kept state (packed weights, gathers,
/// requantization lanes) built at the first call ([`StepContext::with_memo`]). The 3 × 3
/// depthwise layer twice: with weights whose rows AVX2 sums as byte fours (small, as trained
/// ones mostly are) and with weights it cannot (three large ones of one sign a row).
fn qconv(c: &mut Criterion) {
    use ferrite_cpu::base::geometry::ConvDims;
    use ferrite_cpu::ops::conv::int8::qconv;
    use ferrite_hal::op::{QConv, Requantize, Window};
    let mut group = c.benchmark_group("qconv");
    let small: fn(usize) -> i8 = |i| ((i * 37) % 97) as i8 - 48;
    let large: fn(usize) -> i8 = |_| 100;
    // (name, [channels in, out], [height, width], kernel, [stride, padding, groups], weights)
    let layers = [
        (
            "dscnn_first_1to64_49x10_k10x4_s2",
            [1, 64],
            [49, 10],
            [10, 4],
            [2, 1, 1],
            small,
        ),
        (
            "dscnn_pointwise_64to64_25x5",
            [64, 64],
            [25, 5],
            [1, 1],
            [1, 0, 1],
            small,
        ),
        (
            "dscnn_depthwise_64_25x5_quads",
            [64, 64],
            [25, 5],
            [3, 3],
            [1, 1, 64],
            small,
        ),
        (
            "dscnn_depthwise_64_25x5_pairs",
            [64, 64],
            [25, 5],
            [3, 3],
            [1, 1, 64],
            large,
        ),
        (
            "vww_pointwise_8to16_48x48",
            [8, 16],
            [48, 48],
            [1, 1],
            [1, 0, 1],
            small,
        ),
        (
            "resnet8_16to16_32x32_k3",
            [16, 16],
            [32, 32],
            [3, 3],
            [1, 1, 1],
            small,
        ),
    ];
    for (name, [ci, co], [h, w], [kh, kw], [stride, pad, g], weight) in layers {
        let out = |size: usize, k: usize| {
            ferrite_hal::geometry::conv_out(size, k, stride, 1, pad, pad).unwrap_or(1)
        };
        let (oh, ow) = (out(h, kh), out(w, kw));
        let q = Requantize {
            input_zero: -3,
            output_zero: 5,
            min: -128,
            max: 127,
        };
        let p = QConv {
            window: Window {
                kernel: [kh, kw],
                stride: [stride; 2],
                dilation: [1, 1],
                pads: [pad; 4],
            },
            group: g,
            requantize: q,
        };
        let d = ConvDims {
            n: 1,
            c: ci,
            h,
            w,
            oc: co,
            oh,
            ow,
        };
        let k = ci / g * kh * kw;
        let x: Vec<i8> = (0..ci * h * w).map(|i| ((i * 13) % 255) as i8).collect();
        let weights: Vec<i8> = (0..co * k).map(weight).collect();
        let bias: Vec<i32> = (0..co).map(|o| o as i32 * 17 - 300).collect();
        let requant: Vec<i32> = (0..co)
            .flat_map(|o| [(1 << 30) + (o as i32) * 12_345, -9])
            .collect();
        let mut y = vec![0i8; co * oh * ow];
        let scratch_len =
            ferrite_hal::geometry::qconv_scratch_elements(&p, ci / g, oh, ow).unwrap_or(0);
        let mut scratch = vec![0u8; 4 * (scratch_len + 4)];
        let mut memo = ferrite_cpu::StepMemo::default();
        group.throughput(Throughput::Elements((co * oh * ow * k) as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let ctx = StepContext::default().with_memo(&mut memo);
                qconv(
                    ctx,
                    &p,
                    d,
                    &x,
                    &weights,
                    &bias,
                    &requant,
                    &mut y,
                    &mut scratch,
                )
            })
        });
    }
    group.finish();
}

/// The exact int8 multiply-add's single-thread peak: `CHAINS` independent chains on registers.
#[cfg(target_arch = "x86_64")]
mod peak_int8 {
    use core::arch::x86_64::*;

    /// Independent accumulators.
    const CHAINS: usize = 12;
    /// Multiply-adds (instructions) per chain per call.
    const STEPS: usize = 1024;

    /// Multiply-adds per call of a kernel whose instruction does `per` of them.
    pub fn macs(per: usize) -> u64 {
        (CHAINS * STEPS * per) as u64
    }

    /// AVX2: `vpmaddwd` (sixteen int16 products summed in pairs) and the `vpaddd` that
    /// accumulates it, each chain's next product taken of its own sum (so neither is hoisted).
    #[target_feature(enable = "avx2")]
    pub fn avx2(seed: i32) -> i32 {
        let w = _mm256_set1_epi32(0x0003_0005);
        let mut acc = [_mm256_set1_epi32(seed); CHAINS];
        for _ in 0..STEPS {
            for c in acc.iter_mut() {
                *c = _mm256_add_epi32(*c, _mm256_madd_epi16(*c, w));
            }
        }
        let sum = acc
            .iter()
            .fold(_mm256_setzero_si256(), |s, c| _mm256_add_epi32(s, *c));
        _mm256_extract_epi32::<0>(sum)
    }

    /// AVX-512 VNNI: `vpdpbusd` on 512-bit vectors (64 byte products summed in fours, added).
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub fn vnni(seed: i32) -> i32 {
        let (a, b) = (_mm512_set1_epi32(seed), _mm512_set1_epi32(0x0102_0304));
        let mut acc = [_mm512_setzero_si512(); CHAINS];
        for _ in 0..STEPS {
            for c in acc.iter_mut() {
                *c = _mm512_dpbusd_epi32(*c, a, b);
            }
        }
        let sum = acc
            .iter()
            .fold(_mm512_setzero_si512(), |s, c| _mm512_add_epi32(s, *c));
        _mm512_reduce_add_epi32(sum)
    }
}

#[cfg(target_arch = "x86_64")]
fn peak_int8(c: &mut Criterion) {
    use std::hint::black_box;
    let mut group = c.benchmark_group("peak_int8");
    if is_x86_feature_detected!("avx2") {
        group.throughput(Throughput::Elements(peak_int8::macs(16)));
        // SAFETY: the CPU has AVX2 (checked above).
        group.bench_function("avx2_vpmaddwd_vpaddd", |b| {
            b.iter(|| unsafe { peak_int8::avx2(black_box(5)) })
        });
    }
    if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni") {
        group.throughput(Throughput::Elements(peak_int8::macs(64)));
        // SAFETY: the CPU has AVX-512F and VNNI (checked above).
        group.bench_function("avx512_vpdpbusd", |b| {
            b.iter(|| unsafe { peak_int8::vnni(black_box(5)) })
        });
    }
    group.finish();
}

#[cfg(not(target_arch = "x86_64"))]
fn peak_int8(_: &mut Criterion) {}

criterion_group!(benches, peak, peak_int8, gemm, conv, qconv);
criterion_main!(benches);
