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
#[allow(unsafe_code, clippy::too_many_arguments)]
mod x86 {
    use super::{sgemm_generic, Mat};
    use core::arch::x86_64::*;
    use core::cell::RefCell;
    use std::vec::Vec;

    type Kernel = fn(usize, usize, usize, f32, Mat<'_>, Mat<'_>, &mut [f32], usize, bool);

    const MR: usize = 6;
    const NR: usize = 16;

    std::thread_local! {
        /// Reused buffer for packed column tails (grows to the largest K seen).
        static PANEL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }

    /// `C[ci..ci+R, cj..cj+16] += alpha · A[i..i+R, :] · B[:, j..j+16]`; false (nothing done)
    /// if a slice is too short.
    #[target_feature(enable = "avx2,fma")]
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
        let a_rows: [&[f32]; R] =
            core::array::from_fn(|r| &a.data[(i + r) * a.stride..(i + r) * a.stride + k]);
        let b_ptr = b.data.as_ptr();
        for p in 0..k {
            // SAFETY: p < k, and `b_ok` bounds row p's 16 floats from column j.
            let (b0, b1) = unsafe {
                let row = b_ptr.add(p * b.stride + j);
                (_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8)))
            };
            for (acc, row) in acc.iter_mut().zip(&a_rows) {
                // SAFETY: every row of `a_rows` holds k > p elements.
                let av = _mm256_set1_ps(unsafe { *row.get_unchecked(p) });
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

    /// `C[i, j..j+64] += alpha · A[i, :] · B[:, j..j+64]` for a single row (matrix-vector
    /// products: batch-1 dense layers), with eight accumulators so loads, not FMA latency,
    /// bound it. False (nothing done) if a slice is too short.
    #[target_feature(enable = "avx2,fma")]
    fn row_wide(
        i: usize,
        j: usize,
        k: usize,
        alpha: f32,
        a: Mat<'_>,
        b: Mat<'_>,
        c: &mut [f32],
        ldc: usize,
    ) -> bool {
        const W: usize = 64;
        let Some(a_row) = a.data.get(i * a.stride..i * a.stride + k) else {
            return false;
        };
        if k > 0 && (k - 1) * b.stride + j + W > b.data.len() {
            return false;
        }
        let Some(c_row) = c.get_mut(i * ldc + j..i * ldc + j + W) else {
            return false;
        };
        let mut acc = [_mm256_setzero_ps(); W / 8];
        let b_ptr = b.data.as_ptr();
        for (p, &av) in a_row.iter().enumerate() {
            let av = _mm256_set1_ps(av);
            // SAFETY: p < k and the check above bounds row p's 64 floats from column j.
            let row = unsafe { b_ptr.add(p * b.stride + j) };
            for (v, acc) in acc.iter_mut().enumerate() {
                // SAFETY: v * 8 + 8 <= 64.
                let bv = unsafe { _mm256_loadu_ps(row.add(v * 8)) };
                *acc = _mm256_fmadd_ps(av, bv, *acc);
            }
        }
        let scale = _mm256_set1_ps(alpha);
        for (chunk, acc) in c_row.chunks_exact_mut(8).zip(&acc) {
            // SAFETY: `chunk` holds exactly 8 floats.
            unsafe {
                let p = chunk.as_mut_ptr();
                _mm256_storeu_ps(p, _mm256_fmadd_ps(scale, *acc, _mm256_loadu_ps(p)));
            }
        }
        true
    }

    /// One row block (up to 6 rows) against one 16-wide column block.
    #[target_feature(enable = "avx2,fma")]
    fn rows(
        rows: usize,
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
        match rows {
            6 => block::<6>(i, j, k, alpha, a, b, c, ldc, ci, cj),
            5 => block::<5>(i, j, k, alpha, a, b, c, ldc, ci, cj),
            4 => block::<4>(i, j, k, alpha, a, b, c, ldc, ci, cj),
            3 => block::<3>(i, j, k, alpha, a, b, c, ldc, ci, cj),
            2 => block::<2>(i, j, k, alpha, a, b, c, ldc, ci, cj),
            _ => block::<1>(i, j, k, alpha, a, b, c, ldc, ci, cj),
        }
    }

    #[target_feature(enable = "avx2,fma")]
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
        if !accumulate {
            for row in 0..m {
                c[row * ldc..row * ldc + n].fill(0.0);
            }
        }
        if k == 0 || m == 0 {
            return;
        }
        let full = n / NR * NR;
        let mut ok = true;
        let mut j = 0;
        if m == 1 {
            while j + 64 <= full && ok {
                ok = row_wide(0, j, k, alpha, a, b, c, ldc);
                j += 64;
            }
        }
        // Column blocks outside, row blocks inside: a 16-wide panel of B stays in L1 while
        // every row block of A passes over it.
        while j < full && ok {
            let mut i = 0;
            while i < m && ok {
                let r = (m - i).min(MR);
                ok = rows(r, i, j, k, alpha, a, b, c, ldc, i, j);
                i += r;
            }
            j += NR;
        }
        ok = ok && (full == n || tail(m, n, k, alpha, a, b, c, ldc, full));
        if !ok {
            // A slice was too short (a caller bug): recompute everything the safe way.
            for row in 0..m {
                if let Some(r) = c.get_mut(row * ldc..row * ldc + n) {
                    r.fill(0.0);
                }
            }
            sgemm_generic::<4, 8, true>(m, n, k, alpha, a, b, c, ldc, true);
        }
    }

    /// Columns `j0..n` (fewer than 16): copied zero-padded into a 16-wide panel, multiplied into
    /// a 6×16 tile with the same kernel, and added back. False if a slice is too short.
    #[target_feature(enable = "avx2,fma")]
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
        PANEL.with(|cell| {
            let mut packed = cell.borrow_mut();
            if packed.len() < k * NR {
                packed.resize(k * NR, 0.0);
            }
            for p in 0..k {
                let Some(src) = b.data.get(p * b.stride + j0..p * b.stride + n) else {
                    return false;
                };
                let dst = &mut packed[p * NR..(p + 1) * NR];
                dst[..width].copy_from_slice(src);
                dst[width..].fill(0.0);
            }
            let panel = Mat {
                data: &packed[..k * NR],
                stride: NR,
            };
            let mut i = 0;
            while i < m {
                let r = (m - i).min(MR);
                let mut tile = [0.0f32; MR * NR];
                if !rows(r, i, 0, k, alpha, a, panel, &mut tile, NR, 0, 0) {
                    return false;
                }
                for row in 0..r {
                    let Some(dst) = c.get_mut((i + row) * ldc + j0..(i + row) * ldc + n) else {
                        return false;
                    };
                    for (d, t) in dst.iter_mut().zip(&tile[row * NR..]) {
                        *d += t;
                    }
                }
                i += r;
            }
            true
        })
    }

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
            (1, 150, 33),
            (1, 64, 9),
            (13, 200, 20),
        ] {
            let a: [f32; 400] = core::array::from_fn(|i| ((i * 7 % 13) as f32 - 6.0) * 0.25);
            let b: [f32; 6000] = core::array::from_fn(|i| ((i * 5 % 11) as f32 - 5.0) * 0.5);
            let mut c = [1.0f32; 4000];
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
