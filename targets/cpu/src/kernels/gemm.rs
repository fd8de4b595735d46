//! Single-precision matrix product, the workhorse of Conv, Gemm and MatMul.
//!
//! A register-blocked micro-kernel keeps an `MR × NR` block of C in locals across the whole K
//! loop and reads B's rows in place, so neither operand is packed; LLVM vectorises the `NR`-wide
//! accumulator rows for the target's SIMD. Edges fall back to a one-row kernel. With the `std`
//! feature on x86-64, the same code is also compiled for AVX2+FMA and AVX-512 and chosen at run
//! time (the portable build stays the baseline); on other targets the baseline is all there is.

/// Row-major matrix view: `data[row * stride + col]`.
#[derive(Clone, Copy)]
pub struct Mat<'a> {
    /// Elements.
    pub data: &'a [f32],
    /// Elements between consecutive rows.
    pub stride: usize,
}

/// `C[m×n] = alpha · A[m×k] · B[k×n] + (C if accumulate else 0)`.
///
/// Slices must hold the addressed elements (the caller derives sizes from verified shapes).
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat<'_>,
    b: Mat<'_>,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        if let Some(kernel) = x86::best() {
            return kernel(m, n, k, alpha, a, b, c, ldc, accumulate);
        }
    }
    sgemm_generic::<4, 8, false>(m, n, k, alpha, a, b, c, ldc, accumulate)
}

/// `a * b + c`, fused when `FMA` (only instantiated with `FMA` where the target has it).
#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(feature = "std")]
    if FMA {
        return a.mul_add(b, c);
    }
    a * b + c
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn sgemm_generic<const MR: usize, const NR: usize, const FMA: bool>(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat<'_>,
    b: Mat<'_>,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if !accumulate {
        for row in 0..m {
            c[row * ldc..row * ldc + n].fill(0.0);
        }
    }
    if k == 0 {
        return;
    }
    let mut i = 0;
    while i + MR <= m {
        row_block::<MR, NR, FMA>(i, n, k, alpha, a, b, c, ldc);
        i += MR;
    }
    for r in i..m {
        row_block::<1, NR, FMA>(r, n, k, alpha, a, b, c, ldc);
    }
}

/// Rows `i..i + MR` of C: `NR`-wide blocks, then 8-wide blocks, then a scalar tail.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn row_block<const MR: usize, const NR: usize, const FMA: bool>(
    i: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat<'_>,
    b: Mat<'_>,
    c: &mut [f32],
    ldc: usize,
) {
    let mut j = 0;
    while j + NR <= n {
        block::<MR, NR, FMA>(i, j, k, alpha, a, b, c, ldc);
        j += NR;
    }
    while NR > 8 && j + 8 <= n {
        block::<MR, 8, FMA>(i, j, k, alpha, a, b, c, ldc);
        j += 8;
    }
    for r in i..i + MR {
        row_tail::<FMA>(r, j, n, k, alpha, a, b, c, ldc);
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn block<const MR: usize, const NR: usize, const FMA: bool>(
    i: usize,
    j: usize,
    k: usize,
    alpha: f32,
    a: Mat<'_>,
    b: Mat<'_>,
    c: &mut [f32],
    ldc: usize,
) {
    let mut acc = [[0.0f32; NR]; MR];
    let a_rows: [&[f32]; MR] =
        core::array::from_fn(|r| &a.data[(i + r) * a.stride..(i + r) * a.stride + k]);
    for p in 0..k {
        let start = p * b.stride + j;
        let Some(bv) = b.data.get(start..start + NR) else {
            return;
        };
        let Ok(bv): Result<&[f32; NR], _> = bv.try_into() else {
            return;
        };
        for (acc_row, a_row) in acc.iter_mut().zip(&a_rows) {
            let av = a_row[p];
            for (acc, bv) in acc_row.iter_mut().zip(bv) {
                *acc = madd::<FMA>(av, *bv, *acc);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        let row = &mut c[(i + r) * ldc + j..(i + r) * ldc + j + NR];
        for (c, v) in row.iter_mut().zip(acc) {
            *c = madd::<FMA>(alpha, *v, *c);
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn row_tail<const FMA: bool>(
    r: usize,
    j0: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat<'_>,
    b: Mat<'_>,
    c: &mut [f32],
    ldc: usize,
) {
    if j0 >= n {
        return;
    }
    let c_row = &mut c[r * ldc + j0..r * ldc + n];
    let a_row = &a.data[r * a.stride..r * a.stride + k];
    for (p, &av) in a_row.iter().enumerate() {
        let av = alpha * av;
        let b_row = &b.data[p * b.stride + j0..p * b.stride + n];
        for (c, bv) in c_row.iter_mut().zip(b_row) {
            *c = madd::<FMA>(av, *bv, *c);
        }
    }
}

/// AVX2 + FMA micro-kernels for x86-64, selected at run time (std only).
///
/// The portable kernel relies on LLVM keeping the accumulator block in registers, which it does
/// for SSE-sized blocks but not for the 6×16 block AVX2 needs; here the block is written with
/// explicit `__m256` registers. Bounds are checked once per block, before any pointer is read.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[allow(unsafe_code)]
mod x86 {
    use super::{sgemm_generic, Mat};
    use core::arch::x86_64::*;

    type Kernel = fn(usize, usize, usize, f32, Mat<'_>, Mat<'_>, &mut [f32], usize, bool);

    const MR: usize = 6;
    const NR: usize = 16;

    /// `C[i..i+R, j..j+16] += alpha · A[i..i+R, :] · B[:, j..j+16]`; false (nothing done) if a
    /// slice is too short.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    fn block<const R: usize>(
        i: usize,
        j: usize,
        k: usize,
        alpha: f32,
        a: Mat<'_>,
        b: Mat<'_>,
        c: &mut [f32],
        ldc: usize,
        ci: usize,
        cj: usize,
    ) -> bool {
        let a_ok = (0..R).all(|r| (i + r) * a.stride + k <= a.data.len());
        let b_ok = k == 0 || (k - 1) * b.stride + j + NR <= b.data.len();
        let c_ok = (ci + R - 1) * ldc + cj + NR <= c.len();
        if !(a_ok && b_ok && c_ok) {
            return false;
        }
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        let a_ptr = a.data.as_ptr();
        let b_ptr = b.data.as_ptr();
        for p in 0..k {
            // SAFETY: p < k and the checks above bound every address read here.
            let (b0, b1) = unsafe {
                let row = b_ptr.add(p * b.stride + j);
                (_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8)))
            };
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: (i + r) * stride + p < (i + r) * stride + k <= len.
                let av = _mm256_set1_ps(unsafe { *a_ptr.add((i + r) * a.stride + p) });
                acc[0] = _mm256_fmadd_ps(av, b0, acc[0]);
                acc[1] = _mm256_fmadd_ps(av, b1, acc[1]);
            }
        }
        let scale = _mm256_set1_ps(alpha);
        for (r, acc) in acc.iter().enumerate() {
            let row = &mut c[(ci + r) * ldc + cj..(ci + r) * ldc + cj + NR];
            // SAFETY: `row` holds exactly 16 floats.
            unsafe {
                let p = row.as_mut_ptr();
                _mm256_storeu_ps(p, _mm256_fmadd_ps(scale, acc[0], _mm256_loadu_ps(p)));
                _mm256_storeu_ps(
                    p.add(8),
                    _mm256_fmadd_ps(scale, acc[1], _mm256_loadu_ps(p.add(8))),
                );
            }
        }
        true
    }

    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    fn avx2(
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        a: Mat<'_>,
        b: Mat<'_>,
        c: &mut [f32],
        ldc: usize,
        accumulate: bool,
    ) {
        let full = n / NR * NR;
        if !accumulate {
            for row in 0..m {
                c[row * ldc..row * ldc + n].fill(0.0);
            }
        }
        let mut done_cols = 0;
        if k > 0 && full > 0 {
            let mut i = 0;
            let mut ok = true;
            while i < m && ok {
                let rows = (m - i).min(MR);
                let mut j = 0;
                while j < full && ok {
                    ok = match rows {
                        6 => block::<6>(i, j, k, alpha, a, b, c, ldc, i, j),
                        5 => block::<5>(i, j, k, alpha, a, b, c, ldc, i, j),
                        4 => block::<4>(i, j, k, alpha, a, b, c, ldc, i, j),
                        3 => block::<3>(i, j, k, alpha, a, b, c, ldc, i, j),
                        2 => block::<2>(i, j, k, alpha, a, b, c, ldc, i, j),
                        _ => block::<1>(i, j, k, alpha, a, b, c, ldc, i, j),
                    };
                    j += NR;
                }
                i += rows;
            }
            if ok {
                done_cols = full;
            } else {
                // A slice was too short (a caller bug): recompute everything the safe way.
                for row in 0..m {
                    c[row * ldc..row * ldc + n].fill(0.0);
                }
                return sgemm_generic::<4, 8, true>(m, n, k, alpha, a, b, c, ldc, true);
            }
        }
        if done_cols < n && !(k > 0 && k <= TAIL_K && tail(m, n, k, alpha, a, b, c, ldc, full)) {
            let rest_b = Mat {
                data: b.data.get(done_cols..).unwrap_or(&[]),
                stride: b.stride,
            };
            let rest_c = c.get_mut(done_cols..).unwrap_or(&mut []);
            sgemm_generic::<4, 8, true>(m, n - done_cols, k, alpha, a, rest_b, rest_c, ldc, true);
        }
    }

    /// Largest K whose column tail is packed on the stack (64 KiB).
    const TAIL_K: usize = 1024;

    /// Columns `j0..n` (fewer than 16): copied zero-padded to 16 wide, multiplied with the
    /// 6×16 kernel into a small tile, and added back. False if a slice is too short.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    fn tail(
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        a: Mat<'_>,
        b: Mat<'_>,
        c: &mut [f32],
        ldc: usize,
        j0: usize,
    ) -> bool {
        let width = n - j0;
        let mut packed = [0.0f32; NR * TAIL_K];
        for p in 0..k {
            let Some(src) = b.data.get(p * b.stride + j0..p * b.stride + n) else {
                return false;
            };
            packed[p * NR..p * NR + width].copy_from_slice(src);
        }
        let panel = Mat {
            data: &packed[..k * NR],
            stride: NR,
        };
        let mut i = 0;
        while i < m {
            let rows = (m - i).min(MR);
            let mut tile = [0.0f32; MR * NR];
            let ok = match rows {
                6 => block::<6>(i, 0, k, alpha, a, panel, &mut tile, NR, 0, 0),
                5 => block::<5>(i, 0, k, alpha, a, panel, &mut tile, NR, 0, 0),
                4 => block::<4>(i, 0, k, alpha, a, panel, &mut tile, NR, 0, 0),
                3 => block::<3>(i, 0, k, alpha, a, panel, &mut tile, NR, 0, 0),
                2 => block::<2>(i, 0, k, alpha, a, panel, &mut tile, NR, 0, 0),
                _ => block::<1>(i, 0, k, alpha, a, panel, &mut tile, NR, 0, 0),
            };
            if !ok {
                return false;
            }
            for r in 0..rows {
                let Some(dst) = c.get_mut((i + r) * ldc + j0..(i + r) * ldc + n) else {
                    return false;
                };
                for (d, t) in dst.iter_mut().zip(&tile[r * NR..]) {
                    *d += t;
                }
            }
            i += rows;
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn call_avx2(
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        a: Mat<'_>,
        b: Mat<'_>,
        c: &mut [f32],
        ldc: usize,
        acc: bool,
    ) {
        // SAFETY: only returned by `best` after the CPU reported AVX2 and FMA.
        unsafe { avx2(m, n, k, alpha, a, b, c, ldc, acc) }
    }

    /// The widest kernel this CPU runs, or `None` for the baseline.
    pub(super) fn best() -> Option<Kernel> {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            Some(call_avx2)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(kernel: impl Fn(usize, usize, usize, f32, Mat<'_>, Mat<'_>, &mut [f32], usize, bool)) {
        for (m, n, k) in [
            (1, 1, 1),
            (5, 19, 7),
            (4, 8, 3),
            (9, 47, 33),
            (3, 0, 2),
            (2, 3, 0),
            (7, 70, 5),
        ] {
            let a: [f32; 400] = core::array::from_fn(|i| ((i * 7 % 13) as f32 - 6.0) * 0.25);
            let b: [f32; 4000] = core::array::from_fn(|i| ((i * 5 % 11) as f32 - 5.0) * 0.5);
            let mut c = [1.0f32; 800];
            kernel(
                m,
                n,
                k,
                0.5,
                Mat {
                    data: &a,
                    stride: k,
                },
                Mat {
                    data: &b,
                    stride: n,
                },
                &mut c,
                n,
                true,
            );
            for i in 0..m {
                for j in 0..n {
                    let mut want = 1.0;
                    for p in 0..k {
                        want += 0.5 * a[i * k + p] * b[p * n + j];
                    }
                    assert!((c[i * n + j] - want).abs() < 1e-3, "{m}x{n}x{k} at {i},{j}");
                }
            }
        }
    }

    #[test]
    fn matches_naive_product() {
        check(sgemm);
        check(sgemm_generic::<4, 8, false>);
    }
}
