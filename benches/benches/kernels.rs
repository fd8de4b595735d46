//! The hot kernels in isolation: the matrix product behind Conv/Gemm/MatMul and the
//! convolutions, at the shapes the test models use, next to this core's measured peak (`peak`:
//! independent FMA chains in registers, nothing loaded). Throughput is in floating-point
//! operations (a multiply-add counts two) for `peak` and `sgemm`, in multiply-adds for `conv`:
//! criterion's "elem/s" is FLOP/s for the first two and MAC/s (half the FLOP/s) for `conv`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrite_cpu::kernels::gemm::{sgemm, Mat};

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
    use ferrite_cpu::kernels::conv::{conv, ConvDims};
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
            |b| b.iter(|| conv(&p, d, &x, &w, None, &mut y, &mut scratch, false)),
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

criterion_group!(benches, peak, gemm, conv);
criterion_main!(benches);
