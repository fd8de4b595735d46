//! Single-precision matrix product, the workhorse of Conv, Gemm and MatMul.
//!
//! A register-blocked micro-kernel keeps an `MR × NR` block of C in locals across the whole K
//! loop and reads B's rows in place, so neither operand is packed; LLVM vectorises the `NR`-wide
//! accumulator rows for the target's SIMD. Edges fall back to a one-row kernel. With the `std`
//! feature on x86-64, AVX2+FMA or AVX-512 kernels are chosen at run time (the portable build
//! stays the baseline); on other targets the baseline is all there is.

use crate::base::context::StepContext;

/// Row-major matrix view: `data[row * stride + col]`.
#[derive(Clone, Copy)]
pub struct Mat<'a> {
    /// Elements.
    pub data: &'a [f32],
    /// Elements between consecutive rows.
    pub stride: usize,
}

/// The operands every block reads: `alpha · A[.., 0..k] · B[0..k, ..]`.
#[derive(Clone, Copy)]
struct Product<'a> {
    k: usize,
    alpha: f32,
    a: Mat<'a>,
    b: Mat<'a>,
    /// Where B's rows start in `b.data` when they are not `b.stride` apart (empty: strided): a
    /// convolution's taps, read in place from a padded input ([`sgemm_rows`]). The SIMD
    /// kernels only.
    #[cfg(feature = "std")]
    rows: &'a [usize],
    /// The largest of `rows` (bounds every read once per block).
    #[cfg(feature = "std")]
    rows_max: usize,
    /// C is written, not added to (`C = alpha · A · B`, C's old values never read): a
    /// convolution's grid, which would otherwise be zeroed first. With a row table only.
    #[cfg(feature = "std")]
    overwrite: bool,
}

impl<'a> Product<'a> {
    /// A plain product: B's rows `b.stride` apart.
    fn new(k: usize, alpha: f32, a: Mat<'a>, b: Mat<'a>) -> Self {
        Product {
            k,
            alpha,
            a,
            b,
            #[cfg(feature = "std")]
            rows: &[],
            #[cfg(feature = "std")]
            rows_max: 0,
            #[cfg(feature = "std")]
            overwrite: false,
        }
    }
}

/// `C[m×n] = alpha · A[m×k] · B[k×n] + (C if accumulate else 0)`.
///
/// Slices must hold the addressed elements (the caller derives sizes from verified shapes).
// On a microcontroller, compiled in the firmware's crate with its kernels (built for size,
// with the loops unrolled in source) rather than once in this crate.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(feature = "std"), inline)]
pub fn sgemm(
    ctx: StepContext<'_>,
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
            if let Some(row) = c.get_mut(row * ldc..row * ldc + n) {
                row.fill(0.0);
            }
        }
    }
    if k == 0 {
        return;
    }
    let p = Product::new(k, alpha, a, b);
    #[cfg(feature = "threads")]
    if sgemm_parts(ctx, &p, m, n, c, ldc) {
        return;
    }
    #[cfg(not(feature = "threads"))]
    let _ = ctx;
    kernel(&p, m, n, c, ldc)
}

/// [`sgemm`] compiled once, in this crate at its opt-level, and called rather than inlined
/// into a firmware's own code (built for size, where the four-row blocks' accumulators are not
/// unrolled into registers): for the batched MatMul, whose products are the big ones (mel
/// filterbanks, attention), where the unrolled blocks pay for their flash.
#[cfg(not(feature = "std"))]
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub fn sgemm_unrolled(
    ctx: StepContext<'_>,
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
    sgemm(ctx, m, n, k, alpha, a, b, c, ldc, accumulate)
}

/// `C[m×n] += A[m×k] · B` where B's row `q` is `b[rows[q]..][..n]`: a convolution's implicit
/// im2col (each row a tap of an input channel, read in place from a zero-padded input), with
/// the SIMD kernels; `overwrite`: `C = A · B` instead (C's old values neither read nor kept:
/// the same results as adding into a zeroed C, bit for bit, without the pass that zeroes it).
/// False, with C untouched, where this machine has no SIMD kernels (the caller unfolds the
/// input instead) or a slice is shorter than the offsets say.
#[cfg(feature = "std")]
#[allow(clippy::too_many_arguments)]
pub fn sgemm_rows(
    ctx: StepContext<'_>,
    m: usize,
    n: usize,
    a: Mat<'_>,
    b: &[f32],
    rows: &[usize],
    c: &mut [f32],
    ldc: usize,
    overwrite: bool,
) -> bool {
    let k = rows.len();
    let rows_max = rows.iter().copied().max().unwrap_or(0);
    let fits = m == 0
        || n == 0
        || (rows_max.checked_add(n).is_some_and(|end| end <= b.len())
            && (m - 1) * a.stride + k <= a.data.len()
            && (m - 1) * ldc + n <= c.len());
    if !fits || !simd_available() {
        return false;
    }
    if m == 0 || n == 0 {
        return true;
    }
    if k == 0 {
        if overwrite {
            for row in c.chunks_mut(ldc.max(1)).take(m) {
                row.iter_mut().take(n).for_each(|v| *v = 0.0);
            }
        }
        return true;
    }
    let p = Product {
        rows,
        rows_max,
        overwrite,
        ..Product::new(k, 1.0, a, Mat { data: b, stride: 0 })
    };
    #[cfg(feature = "threads")]
    if sgemm_parts(ctx, &p, m, n, c, ldc) {
        return true;
    }
    #[cfg(not(feature = "threads"))]
    let _ = ctx;
    kernel(&p, m, n, c, ldc);
    true
}

/// Whether [`kernel`] runs SIMD kernels here (which [`sgemm_rows`] needs).
#[cfg(feature = "std")]
pub(crate) fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::isa::level() != crate::isa::Level::Portable;
    #[cfg(target_arch = "aarch64")]
    return crate::isa::neon();
    #[allow(unreachable_code)]
    false
}

/// Multiply-adds below which a product stays on one thread: handing parts to a pool costs a
/// few microseconds, about this much work on one core.
#[cfg(feature = "threads")]
const PARALLEL_WORK: usize = 1 << 18;

/// The widest column block of any kernel (the matrix-vector kernel's): one-row products split
/// their columns at multiples of it, so each column meets the same kernel as on one thread.
#[cfg(feature = "threads")]
const COLUMN_QUANTUM: usize = 64;

/// `C += alpha · A · B` split into parts for the step's threads (its context's):
/// rows of C, or for a single row, columns in multiples of [`COLUMN_QUANTUM`]. Every element of
/// C is computed by the same instructions as in one part, so the result is bit-identical. False
/// (nothing done) when the product is too small to split or one thread is all there is.
#[cfg(feature = "threads")]
fn sgemm_parts(
    ctx: StepContext<'_>,
    p: &Product<'_>,
    m: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
) -> bool {
    use crate::base::parts::ranges;
    use std::vec::Vec;
    let threads = ctx.threads();
    if threads < 2 || m.saturating_mul(n).saturating_mul(p.k) < PARALLEL_WORK {
        return false;
    }
    let (by_rows, total, quantum) = if m == 1 {
        (false, n, COLUMN_QUANTUM)
    } else {
        (true, m, 1)
    };
    let spans = ranges(total, threads, quantum);
    if spans.len() < 2 {
        return false;
    }
    // Parts are consecutive: each takes its rows (stride ldc) or columns of the one row from the
    // front of what is left of C; the last takes the rest.
    let count = spans.len();
    let mut parts = Vec::with_capacity(count);
    let mut rest = c;
    for (i, span) in spans.into_iter().enumerate() {
        let len = match (i + 1 == count, by_rows) {
            (true, _) => rest.len(),
            (false, true) => span.len() * ldc,
            (false, false) => span.len(),
        };
        let len = len.min(rest.len());
        let (part, tail) = core::mem::take(&mut rest).split_at_mut(len);
        parts.push((span, part));
        rest = tail;
    }
    ctx.for_each(parts, |(span, part)| {
        let (a, b) = if by_rows {
            let a = p.a.data.get(span.start * p.a.stride..).unwrap_or(&[]);
            (Mat { data: a, ..p.a }, p.b)
        } else {
            let b = p.b.data.get(span.start..).unwrap_or(&[]);
            (p.a, Mat { data: b, ..p.b })
        };
        let (rows, cols) = if by_rows {
            (span.len(), n)
        } else {
            (1, span.len())
        };
        kernel(&Product { a, b, ..*p }, rows, cols, part, ldc);
    });
    true
}

/// The product on this thread with the best kernels the CPU has (inlined: on a microcontroller
/// this is [`sgemm`]'s body, as before threads and row tables).
#[inline(always)]
fn kernel(p: &Product<'_>, m: usize, n: usize, c: &mut [f32], ldc: usize) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        use crate::isa::Level;
        match crate::isa::level() {
            Level::Avx512 => return avx512::sgemm(p, m, n, c, ldc),
            Level::Avx2 => return avx2::sgemm(p, m, n, c, ldc),
            Level::Portable => {}
        }
    }
    #[cfg(all(feature = "std", target_arch = "aarch64"))]
    if crate::isa::neon() {
        return neon::sgemm(p, m, n, c, ldc);
    }
    sgemm_generic::<4, 8, false>(p, m, n, c, ldc)
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

/// `C += alpha · A · B` with the portable kernel.
#[inline(always)]
fn sgemm_generic<const MR: usize, const NR: usize, const FMA: bool>(
    p: &Product<'_>,
    m: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
) {
    let mut i = 0;
    while i + MR <= m {
        row_block::<MR, NR, FMA>(p, i, n, c, ldc);
        i += MR;
    }
    for r in i..m {
        row_block::<1, NR, FMA>(p, r, n, c, ldc);
    }
}

/// Rows `i..i + MR` of C: `NR`-wide blocks, then 8-wide blocks, then a scalar tail.
#[inline(always)]
fn row_block<const MR: usize, const NR: usize, const FMA: bool>(
    p: &Product<'_>,
    i: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
) {
    let mut j = 0;
    while j + NR <= n {
        if MR == 1 {
            one_row_block::<NR, FMA>(p, i, j, c, ldc);
        } else {
            block::<MR, NR, FMA>(p, i, j, c, ldc);
        }
        j += NR;
    }
    while NR > 8 && j + 8 <= n {
        block::<MR, 8, FMA>(p, i, j, c, ldc);
        j += 8;
    }
    for r in i..i + MR {
        row_tail::<FMA>(p, r, j, n, c, ldc);
    }
}

/// [`block`] for one row of A (a Gemm on one sample, every row past the last `MR`), out of line:
/// its loop is such a product's time, and compiled on its own its code does not follow what
/// else the caller holds (inlined into a microcontroller's run loop it varied by an instruction
/// an iteration, 6 % of an MLP's inference). The `MR`-row blocks stay inlined, where they are
/// faster.
#[inline(never)]
fn one_row_block<const NR: usize, const FMA: bool>(
    p: &Product<'_>,
    i: usize,
    j: usize,
    c: &mut [f32],
    ldc: usize,
) {
    block::<1, NR, FMA>(p, i, j, c, ldc)
}

/// `C[i..i+MR, j..j+NR] += alpha · A[i..i+MR, :] · B[:, j..j+NR]`, accumulating in locals.
#[inline(always)]
fn block<const MR: usize, const NR: usize, const FMA: bool>(
    p: &Product<'_>,
    i: usize,
    j: usize,
    c: &mut [f32],
    ldc: usize,
) {
    let (k, a, b) = (p.k, p.a, p.b);
    let mut acc = [[0.0f32; NR]; MR];
    // Each row exactly `k` long (the verifier guarantees it; a short one computes nothing).
    let mut a_rows: [&[f32]; MR] = [&[]; MR];
    for (r, row) in a_rows.iter_mut().enumerate() {
        let start = (i + r) * a.stride;
        match a.data.get(start..start + k) {
            Some(s) => *row = s,
            None => return,
        }
    }
    for q in 0..k {
        let start = q * b.stride + j;
        let Some(bv) = b.data.get(start..start + NR) else {
            return;
        };
        let Ok(bv): Result<&[f32; NR], _> = bv.try_into() else {
            return;
        };
        for (acc_row, a_row) in acc.iter_mut().zip(&a_rows) {
            let Some(&av) = a_row.get(q) else {
                return;
            };
            for (acc, bv) in acc_row.iter_mut().zip(bv) {
                *acc = madd::<FMA>(av, *bv, *acc);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        let start = (i + r) * ldc + j;
        let Some(row) = c.get_mut(start..start + NR) else {
            return;
        };
        for (c, v) in row.iter_mut().zip(acc) {
            *c = madd::<FMA>(p.alpha, *v, *c);
        }
    }
}

/// Row `r` of C from column `j0` to `n`, one row of B at a time.
#[inline(always)]
fn row_tail<const FMA: bool>(
    p: &Product<'_>,
    r: usize,
    j0: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
) {
    if j0 >= n {
        return;
    }
    let (k, a, b) = (p.k, p.a, p.b);
    let (Some(c_row), Some(a_row)) = (
        c.get_mut(r * ldc + j0..r * ldc + n),
        a.data.get(r * a.stride..r * a.stride + k),
    ) else {
        return;
    };
    for (q, &av) in a_row.iter().enumerate() {
        let av = p.alpha * av;
        let Some(b_row) = b.data.get(q * b.stride + j0..q * b.stride + n) else {
            return;
        };
        for (c, bv) in c_row.iter_mut().zip(b_row) {
            *c = madd::<FMA>(av, *bv, *c);
        }
    }
}

/// Defines a module of micro-kernels for one SIMD width (std only): a 6 × (2 vectors) block with
/// explicit vector registers, a 64-wide matrix-vector kernel, and packed column tails. The
/// portable kernel relies on LLVM keeping the accumulator block in registers, which it does for
/// SSE-sized blocks but not for these; bounds are checked once per block, before any pointer is
/// read. `$ops` names the module the vector operations come from (`core::arch::x86_64`, or the
/// NEON shims below).
macro_rules! simd_gemm {
    ($module:ident, $arch:literal, $ops:path, $feature:literal, $doc:literal, $vec:ty, $lanes:expr,
     $zero:ident, $load:ident, $store:ident, $set1:ident, $fmadd:ident, $hsum:path) => {
        #[doc = $doc]
        #[cfg(all(feature = "std", target_arch = $arch))]
        #[allow(unsafe_code)]
        mod $module {
            use super::{sgemm_generic, Mat, Product};
            use core::cell::RefCell;
            use std::vec::Vec;
            #[allow(unused_imports)]
            use $ops::*;

            const MR: usize = 6;
            const LANES: usize = $lanes;
            const NR: usize = 2 * LANES;
            /// Columns of the matrix-vector kernel.
            const WIDE: usize = 64;

            std::thread_local! {
                /// Reused buffer for packed column tails (grows to the largest K seen).
                static PANEL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
            }

            /// `C += alpha · A · B` with these kernels; only call when the CPU has the features.
            pub(super) fn sgemm(p: &Product<'_>, m: usize, n: usize, c: &mut [f32], ldc: usize) {
                // SAFETY: `super::kernel` calls this only after `simd::level()` reported the features.
                let ok = unsafe {
                    if p.rows.is_empty() {
                        sgemm_simd::<false>(p, m, n, c, ldc)
                    } else {
                        sgemm_simd::<true>(p, m, n, c, ldc)
                    }
                };
                // A product over a row table has been checked whole by `sgemm_rows`.
                if !ok && p.rows.is_empty() {
                    // A slice was shorter than the shapes say, which a verified plan rules out. Nothing
                    // was read out of bounds; hand over to the portable kernel, whose checked indexing
                    // treats the bug exactly as the baseline build would.
                    sgemm_generic::<4, 8, true>(p, m, n, c, ldc);
                }
            }

            /// Where a block of results goes: `c` with row stride `ldc`, at row `row`, column `col`.
            struct Target<'c> {
                c: &'c mut [f32],
                ldc: usize,
                row: usize,
                col: usize,
            }

            /// `target += alpha · A[i..i+R, :] · B[:, j..j+V·LANES]` (`V` vectors wide: 2, an
            /// NR-wide panel; 1, a narrow tail's); false (nothing done) if a slice is too short.
            /// `TABLE`: B's rows start at `p.rows` (else `b.stride` apart). Each element of C is
            /// the same sum in the same order at either width.
            #[target_feature(enable = $feature)]
            fn block<const R: usize, const TABLE: bool, const V: usize>(
                p: &Product<'_>,
                i: usize,
                j: usize,
                t: &mut Target<'_>,
            ) -> bool {
                let width = V * LANES;
                let (k, a, b) = (p.k, p.a, p.b);
                let a_ok = (0..R).all(|r| (i + r) * a.stride + k <= a.data.len());
                let b_ok = if TABLE {
                    p.rows.len() >= k && p.rows_max + j + width <= b.data.len()
                } else {
                    k == 0 || (k - 1) * b.stride + j + width <= b.data.len()
                };
                let c_ok = (t.row + R - 1) * t.ldc + t.col + width <= t.c.len();
                if !(a_ok && b_ok && c_ok) {
                    return false;
                }
                let mut acc = [[$zero(); V]; R];
                // A loop, not `array::from_fn`: its closure was left out of line, built for
                // the baseline (a call per block).
                let mut a_rows: [&[f32]; R] = [&[]; R];
                for (r, row) in a_rows.iter_mut().enumerate() {
                    *row = &a.data[(i + r) * a.stride..(i + r) * a.stride + k];
                }
                let b_ptr = b.data.as_ptr();
                for q in 0..k {
                    // SAFETY: q < k <= rows.len() when TABLE (checked above).
                    let start = if TABLE {
                        unsafe { *p.rows.get_unchecked(q) }
                    } else {
                        q * b.stride
                    };
                    let mut bv = [$zero(); V];
                    for (v, bv) in bv.iter_mut().enumerate() {
                        // SAFETY: `b_ok` bounds row q's V·LANES floats from column j.
                        *bv = unsafe { $load(b_ptr.add(start + j + v * LANES)) };
                    }
                    for (acc, row) in acc.iter_mut().zip(&a_rows) {
                        // SAFETY: every row of `a_rows` holds k > q elements.
                        let av = $set1(unsafe { *row.get_unchecked(q) });
                        for (acc, &bv) in acc.iter_mut().zip(&bv) {
                            *acc = $fmadd(av, bv, *acc);
                        }
                    }
                }
                let scale = $set1(p.alpha);
                for (r, acc) in acc.iter().enumerate() {
                    let start = (t.row + r) * t.ldc + t.col;
                    let row = &mut t.c[start..start + width];
                    for (v, &acc) in acc.iter().enumerate() {
                        // SAFETY: `row` holds exactly V·LANES floats.
                        unsafe {
                            let ptr = row.as_mut_ptr().add(v * LANES);
                            // Overwritten: as if C had been zeroed (alpha·acc + 0).
                            let old = if p.overwrite { $zero() } else { $load(ptr) };
                            $store(ptr, $fmadd(scale, acc, old));
                        }
                    }
                }
                true
            }

            /// One block of `rows` (1 to 6) rows, `V` vectors wide.
            #[target_feature(enable = $feature)]
            fn rows<const TABLE: bool, const V: usize>(
                count: usize,
                p: &Product<'_>,
                i: usize,
                j: usize,
                t: &mut Target<'_>,
            ) -> bool {
                match count {
                    6 => block::<6, TABLE, V>(p, i, j, t),
                    5 => block::<5, TABLE, V>(p, i, j, t),
                    4 => block::<4, TABLE, V>(p, i, j, t),
                    3 => block::<3, TABLE, V>(p, i, j, t),
                    2 => block::<2, TABLE, V>(p, i, j, t),
                    _ => block::<1, TABLE, V>(p, i, j, t),
                }
            }

            /// `C[0, j..j+64] += alpha · A[0, :] · B[:, j..j+64]` for a single row (matrix-vector
            /// products: batch-1 dense layers), with eight accumulators so loads, not FMA latency,
            /// bound it. False (nothing done) if a slice is too short.
            #[target_feature(enable = $feature)]
            fn row_wide(p: &Product<'_>, j: usize, c: &mut [f32]) -> bool {
                let (k, a, b) = (p.k, p.a, p.b);
                let Some(a_row) = a.data.get(..k) else {
                    return false;
                };
                if (k - 1) * b.stride + j + WIDE > b.data.len() {
                    return false;
                }
                let Some(c_row) = c.get_mut(j..j + WIDE) else {
                    return false;
                };
                let mut acc = [$zero(); WIDE / LANES];
                let b_ptr = b.data.as_ptr();
                for (q, &av) in a_row.iter().enumerate() {
                    let av = $set1(av);
                    // SAFETY: q < k and the check above bounds row q's 64 floats from column j.
                    let row = unsafe { b_ptr.add(q * b.stride + j) };
                    for (v, acc) in acc.iter_mut().enumerate() {
                        // SAFETY: (v + 1) × LANES <= 64.
                        let bv = unsafe { $load(row.add(v * LANES)) };
                        *acc = $fmadd(av, bv, *acc);
                    }
                }
                let scale = $set1(p.alpha);
                for (chunk, acc) in c_row.chunks_exact_mut(LANES).zip(&acc) {
                    // SAFETY: `chunk` holds exactly LANES floats.
                    unsafe {
                        let ptr = chunk.as_mut_ptr();
                        $store(ptr, $fmadd(scale, *acc, $load(ptr)));
                    }
                }
                true
            }

            /// The whole product; false if a slice is too short.
            #[target_feature(enable = $feature)]
            fn sgemm_simd<const TABLE: bool>(
                p: &Product<'_>,
                m: usize,
                n: usize,
                c: &mut [f32],
                ldc: usize,
            ) -> bool {
                let full = n / NR * NR;
                let mut j = 0;
                if m == 1 && !TABLE {
                    while j + WIDE <= full {
                        if !row_wide(p, j, c) {
                            return false;
                        }
                        j += WIDE;
                    }
                }
                // Column blocks outside, row blocks inside: an NR-wide panel of B stays in L1 while
                // every row block of A passes over it.
                while j < full {
                    let mut i = 0;
                    while i < m {
                        let count = (m - i).min(MR);
                        if !rows::<TABLE, 2>(
                            count,
                            p,
                            i,
                            j,
                            &mut Target {
                                c: &mut *c,
                                ldc,
                                row: i,
                                col: j,
                            },
                        ) {
                            return false;
                        }
                        i += count;
                    }
                    j += NR;
                }
                if n - full == LANES {
                    // One whole vector of columns (AVX-512's 16-wide attention products):
                    // multiplied in place, as a panel one vector wide, twelve rows at a time
                    // (twelve independent chains) — no packing, no dot products.
                    let mut i = 0;
                    while i < m {
                        let target = &mut Target {
                            c: &mut *c,
                            ldc,
                            row: i,
                            col: full,
                        };
                        let (count, done) = match m - i {
                            left if left >= 2 * MR => {
                                (2 * MR, block::<{ 2 * MR }, TABLE, 1>(p, i, full, target))
                            }
                            left => (
                                left.min(MR),
                                rows::<TABLE, 1>(left.min(MR), p, i, full, target),
                            ),
                        };
                        if !done {
                            return false;
                        }
                        i += count;
                    }
                    return true;
                }
                full == n
                    || if !TABLE && n - full <= DOT_COLUMNS && p.k >= LANES {
                        tail_dots::<TABLE>(p, m, n, c, ldc, full)
                    } else if n - full <= LANES {
                        // One vector wide: a convolution's grid of 78 columns (an 8 × 8 plane
                        // at the phase width 10) is 2 panels and 16 columns, not 3 panels.
                        tail::<TABLE, 1>(p, m, n, c, ldc, full)
                    } else {
                        tail::<TABLE, 2>(p, m, n, c, ldc, full)
                    }
            }

            /// Tails this narrow run as dot products ([`tail_dots`]): the panel kernel would
            /// multiply a whole NR-wide panel, mostly zeros (a pointwise convolution on a 3×3
            /// plane used 9 of its 32 columns). Products over a row table keep the panel
            /// kernel: every element of theirs is summed as in the plain panel product, which
            /// the in-place convolution's tests rely on.
            const DOT_COLUMNS: usize = NR / 2;

            /// Columns `j0..n` as dot products: B's columns packed contiguous (a row per column
            /// of C), each element of C the dot product of a row of A and a packed column,
            /// four rows by three columns at a time in vector partial sums. False if a slice is
            /// too short.
            #[target_feature(enable = $feature)]
            fn tail_dots<const TABLE: bool>(
                p: &Product<'_>,
                m: usize,
                n: usize,
                c: &mut [f32],
                ldc: usize,
                j0: usize,
            ) -> bool {
                let k = p.k;
                let width = n - j0;
                if m == 0 || width == 0 {
                    return true;
                }
                let a_ok = (m - 1) * p.a.stride + k <= p.a.data.len();
                let c_ok = (m - 1) * ldc + n <= c.len();
                if !(a_ok && c_ok) {
                    return false;
                }
                let mut packed = PANEL.take();
                packed.clear();
                packed.resize(k * width, 0.0);
                for q in 0..k {
                    let Some(src) = b_row::<TABLE>(p, q, j0, n) else {
                        PANEL.set(packed);
                        return false;
                    };
                    for (column, &v) in packed.chunks_exact_mut(k).zip(src) {
                        column[q] = v;
                    }
                }
                let mut i = 0;
                while i < m {
                    let rows = if m - i >= 4 { 4 } else { 1 };
                    let mut j = 0;
                    while j < width {
                        let columns = if width - j >= 3 { 3 } else { 1 };
                        let at = Dots {
                            columns: &packed[j * k..(j + columns) * k],
                            i,
                            col: j0 + j,
                        };
                        match (rows, columns) {
                            (4, 3) => dots::<4, 3>(p, &at, c, ldc),
                            (4, _) => dots::<4, 1>(p, &at, c, ldc),
                            (_, 3) => dots::<1, 3>(p, &at, c, ldc),
                            _ => dots::<1, 1>(p, &at, c, ldc),
                        }
                        j += columns;
                    }
                    i += rows;
                }
                PANEL.set(packed);
                true
            }

            /// Row `q` of B from column `j0` to `n` (through the row table when `TABLE`);
            /// `None` where the table or B is shorter than that.
            #[inline(always)]
            fn b_row<'p, const TABLE: bool>(
                p: &Product<'p>,
                q: usize,
                j0: usize,
                n: usize,
            ) -> Option<&'p [f32]> {
                let start = if TABLE {
                    *p.rows.get(q)?
                } else {
                    q * p.b.stride
                };
                p.b.data.get(start + j0..start + n)
            }

            /// Where a block of [`dots`] reads and writes: packed columns of B, the first row of
            /// A and column of C.
            struct Dots<'a> {
                columns: &'a [f32],
                i: usize,
                col: usize,
            }

            /// `C[i..i+R, col..col+J] += alpha · A[i..i+R, :] · columns`, each element a dot
            /// product over `k` in LANES partial sums, summed across, then the last `k mod
            /// LANES` terms. The caller checked A's rows and C's span; `columns` holds J·k
            /// floats.
            #[target_feature(enable = $feature)]
            #[inline]
            fn dots<const R: usize, const J: usize>(
                p: &Product<'_>,
                at: &Dots<'_>,
                c: &mut [f32],
                ldc: usize,
            ) {
                let k = p.k;
                if at.columns.len() < J * k {
                    return;
                }
                let mut a_rows: [&[f32]; R] = [&[]; R];
                for (r, row) in a_rows.iter_mut().enumerate() {
                    *row = &p.a.data[(at.i + r) * p.a.stride..][..k];
                }
                let mut columns: [&[f32]; J] = [&[]; J];
                for (s, column) in columns.iter_mut().enumerate() {
                    *column = &at.columns[s * k..][..k];
                }
                let mut acc = [[$zero(); J]; R];
                let full = k / LANES * LANES;
                let mut q = 0;
                while q < full {
                    let mut bv = [$zero(); J];
                    for (v, column) in bv.iter_mut().zip(&columns) {
                        // SAFETY: q + LANES <= full <= k, the column's length.
                        *v = unsafe { $load(column.as_ptr().add(q)) };
                    }
                    for (acc, row) in acc.iter_mut().zip(&a_rows) {
                        // SAFETY: q + LANES <= k, the row's length.
                        let av = unsafe { $load(row.as_ptr().add(q)) };
                        for (acc, &bv) in acc.iter_mut().zip(&bv) {
                            *acc = $fmadd(av, bv, *acc);
                        }
                    }
                    q += LANES;
                }
                // The lanes summed first, in a loop of constant trips that unrolls: with the
                // remainder loops below in the same loop, it stayed a loop, the accumulators
                // stayed an array in memory, and the loop above stored all twelve every step
                // (MobileNet's 3 × 3 pointwise layers 1.7× slower).
                let mut sums = [[0.0f32; J]; R];
                for (sums, acc) in sums.iter_mut().zip(&acc) {
                    for (sum, &acc) in sums.iter_mut().zip(acc) {
                        *sum = $hsum(acc);
                    }
                }
                for (r, (sums, row)) in sums.iter().zip(&a_rows).enumerate() {
                    for (s, (&sum, column)) in sums.iter().zip(&columns).enumerate() {
                        let mut sum = sum;
                        for (&x, &y) in row[full..].iter().zip(&column[full..]) {
                            sum += x * y;
                        }
                        let slot = &mut c[(at.i + r) * ldc + at.col + s];
                        *slot += p.alpha * sum;
                    }
                }
            }

            /// Columns `j0..n` (fewer than V·LANES): copied zero-padded into a V·LANES-wide
            /// panel, multiplied into a 6 × V·LANES tile with the same kernel, and added back.
            /// False if a slice is too short.
            #[target_feature(enable = $feature)]
            fn tail<const TABLE: bool, const V: usize>(
                p: &Product<'_>,
                m: usize,
                n: usize,
                c: &mut [f32],
                ldc: usize,
                j0: usize,
            ) -> bool {
                let k = p.k;
                let width = n - j0;
                let padded = V * LANES;
                PANEL.with(|cell| {
                    let mut packed = cell.borrow_mut();
                    if packed.len() < k * padded {
                        packed.resize(k * padded, 0.0);
                    }
                    for q in 0..k {
                        let Some(src) = b_row::<TABLE>(p, q, j0, n) else {
                            return false;
                        };
                        let dst = &mut packed[q * padded..(q + 1) * padded];
                        dst[..width].copy_from_slice(src);
                        dst[width..].fill(0.0);
                    }
                    let panel = Product::new(
                        k,
                        p.alpha,
                        p.a,
                        Mat {
                            data: &packed[..k * padded],
                            stride: padded,
                        },
                    );
                    let mut i = 0;
                    while i < m {
                        // One vector wide, 12 rows at a time: 12 independent FMA chains, as
                        // many as 6 rows of a 2-vector panel (the same tile, MR·NR floats).
                        let narrow = V == 1 && m - i >= 2 * MR;
                        let count = if narrow { 2 * MR } else { (m - i).min(MR) };
                        let mut tile = [0.0f32; MR * NR];
                        let mut target = Target {
                            c: &mut tile,
                            ldc: padded,
                            row: 0,
                            col: 0,
                        };
                        let done = if narrow {
                            block::<{ 2 * MR }, false, 1>(&panel, i, 0, &mut target)
                        } else {
                            rows::<false, V>(count, &panel, i, 0, &mut target)
                        };
                        if !done {
                            return false;
                        }
                        for r in 0..count {
                            let Some(dst) = c.get_mut((i + r) * ldc + j0..(i + r) * ldc + n) else {
                                return false;
                            };
                            if p.overwrite {
                                // As if C had been zeroed: 0 + t is t (t, a sum plus +0, is
                                // never -0).
                                for (d, &t) in dst.iter_mut().zip(&tile[r * padded..]) {
                                    *d = t;
                                }
                            } else {
                                for (d, t) in dst.iter_mut().zip(&tile[r * padded..]) {
                                    *d += t;
                                }
                            }
                        }
                        i += count;
                    }
                    true
                })
            }
        }
    };
}

simd_gemm!(
    avx2,
    "x86_64",
    core::arch::x86_64,
    "avx2,fma",
    "AVX2 + FMA kernels (6×16 blocks of `__m256`).",
    __m256,
    8,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_fmadd_ps,
    super::x86_sums::avx2
);
simd_gemm!(
    avx512,
    "x86_64",
    core::arch::x86_64,
    "avx512f,avx2,fma",
    "AVX-512 kernels (6×32 blocks of `__m512`).",
    __m512,
    16,
    _mm512_setzero_ps,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_set1_ps,
    _mm512_fmadd_ps,
    super::x86_sums::avx512
);

/// Sums across a vector's lanes, for the x86-64 kernels' dot-product tails.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod x86_sums {
    use core::arch::x86_64::*;

    /// The sum of the eight lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn avx2(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }

    /// The sum of the sixteen lanes.
    #[inline]
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) fn avx512(v: __m512) -> f32 {
        _mm512_reduce_add_ps(v)
    }
}

/// The vector operations the NEON kernels are written with, in the x86 kernels' shape
/// (`fmadd(a, b, c) = a·b + c`, fused).
#[cfg(all(feature = "std", target_arch = "aarch64"))]
#[allow(unsafe_code)]
mod neon_ops {
    pub(super) use core::arch::aarch64::float32x4_t;
    use core::arch::aarch64::*;

    #[inline]
    #[target_feature(enable = "neon")]
    pub(super) fn zero() -> float32x4_t {
        vdupq_n_f32(0.0)
    }

    /// # Safety
    /// `p` points at four readable floats.
    #[inline]
    #[target_feature(enable = "neon")]
    pub(super) unsafe fn load(p: *const f32) -> float32x4_t {
        // SAFETY: the caller's.
        unsafe { vld1q_f32(p) }
    }

    /// # Safety
    /// `p` points at four writable floats.
    #[inline]
    #[target_feature(enable = "neon")]
    pub(super) unsafe fn store(p: *mut f32, v: float32x4_t) {
        // SAFETY: the caller's.
        unsafe { vst1q_f32(p, v) }
    }

    #[inline]
    #[target_feature(enable = "neon")]
    pub(super) fn set1(v: f32) -> float32x4_t {
        vdupq_n_f32(v)
    }

    #[inline]
    #[target_feature(enable = "neon")]
    pub(super) fn fmadd(a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        vfmaq_f32(c, a, b)
    }

    /// The sum of the four lanes.
    #[inline]
    #[target_feature(enable = "neon")]
    pub(super) fn hsum(v: float32x4_t) -> f32 {
        vaddvq_f32(v)
    }
}

simd_gemm!(
    neon,
    "aarch64",
    super::neon_ops,
    "neon",
    "NEON kernels (6×8 blocks of `float32x4_t`), for the Jetson's CPU fallback.",
    float32x4_t,
    4,
    zero,
    load,
    store,
    set1,
    fmadd,
    super::neon_ops::hsum
);

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
            // Narrow products (dot-product tails: a pointwise convolution on a small plane).
            (10, 9, 40),
            (6, 4, 64),
            // Short K with a tail one vector wide (12-row blocks, then the rest) or two.
            (14, 40, 5),
            (14, 56, 5),
            (25, 17, 3),
            // Panels and then exactly one vector of columns, multiplied in place (4, 8 or 16
            // lanes): attention's 16 × 16 products, 12-row blocks and the rest.
            (16, 16, 16),
            (13, 48, 20),
            (25, 24, 9),
            (3, 8, 17),
            (14, 12, 5),
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

    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[test]
    fn every_simd_build_matches_the_naive_product() {
        use crate::isa::Level;
        let level = crate::isa::level();
        if level >= Level::Avx2 {
            check(|m, n, k, alpha, a, b, c, ldc, _| {
                super::avx2::sgemm(&Product::new(k, alpha, a, b), m, n, c, ldc)
            });
        }
        if level >= Level::Avx512 {
            check(|m, n, k, alpha, a, b, c, ldc, _| {
                super::avx512::sgemm(&Product::new(k, alpha, a, b), m, n, c, ldc)
            });
        }
    }

    /// The NEON kernels (run under qemu-user in CI: `scripts/cross-aarch64.sh`).
    #[cfg(all(feature = "std", target_arch = "aarch64"))]
    #[test]
    fn neon_build_matches_the_naive_product() {
        check(|m, n, k, alpha, a, b, c, ldc, _| {
            super::neon::sgemm(&Product::new(k, alpha, a, b), m, n, c, ldc)
        });
    }

    /// Threads split C but never a sum: every thread count gives the one-thread result bit for
    /// bit, on random shapes on both sides of the split threshold (rows; columns of one row; ldc
    /// wider than n).
    #[cfg(feature = "threads")]
    #[test]
    fn threads_give_the_one_thread_result_bit_for_bit() {
        let mut seed = 0x2545_f491_u32;
        let mut next = move |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as usize % below
        };
        for case in 0..120 {
            let m = if case % 3 == 0 { 1 } else { 1 + next(70) };
            let n = 1 + next(700);
            let k = 1 + next(300);
            let ldc = n + next(3);
            let a: Vec<f32> = (0..m * k)
                .map(|_| next(2001) as f32 / 997.0 - 1.0)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|_| next(2001) as f32 / 991.0 - 1.0)
                .collect();
            let init: Vec<f32> = (0..m * ldc).map(|_| next(101) as f32 / 7.0).collect();
            let run = |threads: usize| {
                let mut c = init.clone();
                crate::program::parallel::run(threads, |team| {
                    sgemm(
                        StepContext::default().with_team(team),
                        m,
                        n,
                        k,
                        0.75,
                        Mat {
                            data: &a,
                            stride: k,
                        },
                        Mat {
                            data: &b,
                            stride: n,
                        },
                        &mut c,
                        ldc,
                        case % 2 == 0,
                    )
                });
                c
            };
            let one = run(1);
            // 3: no other test uses a team of three, so this one always gets it.
            for threads in [2, 3] {
                let many = run(threads);
                assert!(
                    one.iter()
                        .zip(&many)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{m}x{n}x{k} ldc {ldc} on {threads} threads"
                );
            }
        }
    }

    #[test]
    fn matches_naive_product() {
        check(|m, n, k, alpha, a, b, c, ldc, accumulate| {
            sgemm(
                StepContext::default(),
                m,
                n,
                k,
                alpha,
                a,
                b,
                c,
                ldc,
                accumulate,
            )
        });
        check(|m, n, k, alpha, a, b, c, ldc, _| {
            sgemm_generic::<4, 8, false>(&Product::new(k, alpha, a, b), m, n, c, ldc)
        });
    }
}
