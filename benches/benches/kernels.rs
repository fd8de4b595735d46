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

criterion_group!(benches, gemm);
criterion_main!(benches);
