//! The hot kernels in isolation: the matrix product behind Conv/Gemm/MatMul, at the shapes the
//! test models use.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrite_cpu::kernels::gemm::{sgemm, Mat};

fn gemm(c: &mut Criterion) {
    let mut group = c.benchmark_group("sgemm");
    // (M, N, K): DS-CNN pointwise, ResNet-8 3x3 via im2col, MLP layer.
    for (m, n, k) in [(64, 125, 64), (32, 256, 144), (64, 64, 576), (1, 128, 784)] {
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
    // and pointwise, MobileNet's stride-2 depthwise.
    for (ci, co, size, k, stride, g) in [
        (16, 16, 32, 3, 1, 1),
        (64, 64, 5, 3, 1, 64),
        (64, 64, 5, 1, 1, 1),
        (32, 32, 24, 3, 2, 32),
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
            |b| b.iter(|| conv(&p, d, &x, &w, None, &mut y, &mut scratch)),
        );
    }
    group.finish();
}

criterion_group!(benches, gemm, conv);
criterion_main!(benches);
