//! Single-precision matrix product, the workhorse of Conv, Gemm and MatMul.
//!
//! A register-blocked micro-kernel (4 rows × 8 columns of C kept in locals across the whole K
//! loop) reads B's rows in place, so neither operand is packed; LLVM vectorises the 8-wide
//! accumulator rows for whatever SIMD the target has. Edges fall back to a 1-row kernel.

const MR: usize = 4;
const NR: usize = 8;

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
    let full_cols = n / NR * NR;
    let mut i = 0;
    while i + MR <= m {
        let mut j = 0;
        while j < full_cols {
            block_4x8(i, j, k, alpha, a, b, c, ldc);
            j += NR;
        }
        for r in i..i + MR {
            row_tail(r, full_cols, n, k, alpha, a, b, c, ldc);
        }
        i += MR;
    }
    for r in i..m {
        row_tail(r, 0, n, k, alpha, a, b, c, ldc);
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn block_4x8(
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
        let bv: &[f32; NR] = match b.data[start..start + NR].try_into() {
            Ok(v) => v,
            Err(_) => return,
        };
        for (acc_row, a_row) in acc.iter_mut().zip(&a_rows) {
            let av = a_row[p];
            for (acc, bv) in acc_row.iter_mut().zip(bv) {
                *acc += av * bv;
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        let row = &mut c[(i + r) * ldc + j..(i + r) * ldc + j + NR];
        for (c, v) in row.iter_mut().zip(acc) {
            *c += alpha * v;
        }
    }
}

#[inline]
#[allow(clippy::too_many_arguments)]
fn row_tail(
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
            *c += av * bv;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_naive_product() {
        for (m, n, k) in [
            (1, 1, 1),
            (5, 19, 7),
            (4, 8, 3),
            (9, 17, 33),
            (3, 0, 2),
            (2, 3, 0),
        ] {
            let a: [f32; 400] = core::array::from_fn(|i| ((i * 7 % 13) as f32 - 6.0) * 0.25);
            let b: [f32; 800] = core::array::from_fn(|i| ((i * 5 % 11) as f32 - 5.0) * 0.5);
            let mut c = [1.0f32; 400];
            sgemm(
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
                    assert!((c[i * n + j] - want).abs() < 1e-4, "{m}x{n}x{k} at {i},{j}");
                }
            }
        }
    }
}
