//! QGemm's SIMD kernels on hosts: VNNI on blocked weights where the CPU has it, else AVX2.

#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
use super::{int8_avx2, int8_vnni};
use crate::base::quantized::QuantInt;
#[cfg(target_arch = "x86_64")]
use crate::isa::forced::{avx2_only, portable_only};
use ferrite_hal::op::Requantize;

/// [`crate::ops::matmul::int8::qgemm`] with VNNI, on a CPU that has it, for 8-bit activations on blocked
/// weights, else with AVX2 for 8-bit activations in either layout: true when done (16-bit
/// activations stay with the portable kernel).
#[allow(clippy::too_many_arguments)]
pub(crate) fn qgemm<X: QuantInt, Y: QuantInt>(
    q: &Requantize,
    dims: [usize; 3],
    layout: ferrite_hal::op::QGemmWeights,
    a: &[X],
    b: &[i8],
    bias: &[i32],
    requant: &[i32],
    y: &mut [Y],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if !X::WIDE
        && !Y::WIDE
        && int8_vnni::blocked(layout)
        && crate::isa::level() >= crate::isa::Level::Avx512
        && crate::isa::vnni()
        && !avx2_only()
        && !portable_only()
    {
        // SAFETY: the CPU has AVX2 (`simd::level`), AVX-512VL and VNNI (`vnni::available`).
        return unsafe { int8_vnni::qgemm_blocked(q, dims, a, b, bias, requant, y) };
    }
    #[cfg(target_arch = "x86_64")]
    if !X::WIDE && !Y::WIDE && crate::isa::level() >= crate::isa::Level::Avx2 && !portable_only() {
        // SAFETY: the CPU has AVX2 (`simd::level`).
        return unsafe { int8_avx2::qgemm(q, dims, layout, a, b, bias, requant, y) };
    }
    let _ = (q, dims, layout, a, b, bias, requant, y);
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::element_ids::Rng;
    use crate::isa::forced::{AVX2_ONLY, PORTABLE_ONLY};
    use std::vec::Vec;

    /// QGemm with VNNI (blocked weights) and with AVX2 (either layout) equals the portable
    /// kernel bit for bit, on random sizes (column counts past and short of the 32-column
    /// chunks, row lengths past and short of 16-value chunks, one to three rows), per-channel
    /// scales and both activation types.
    #[test]
    fn simd_qgemm_equals_the_portable_kernel() {
        use ferrite_hal::op::QGemmWeights::{Blocked, Rows};
        let mut rng = Rng(0x5851_f42d_4c95_7f2d);
        for case in 0..300 {
            let layout = if case % 2 == 0 { Blocked } else { Rows };
            let k = if layout == Blocked {
                8 * (1 + rng.below(20))
            } else {
                1 + rng.below(100)
            };
            let (m, n) = (1 + rng.below(3), 4 * (1 + rng.below(20)));
            let w: Vec<i8> = (0..n * k).map(|_| rng.next() as i8).collect();
            let bias: Vec<i32> = (0..n)
                .map(|_| (rng.next() % 40_000) as i32 - 20_000)
                .collect();
            let requant: Vec<i32> = (0..n)
                .flat_map(|_| {
                    [
                        (1 << 30) + (rng.next() % (1 << 30)) as i32,
                        -12 + rng.below(10) as i32,
                    ]
                })
                .collect();
            let zero = rng.below(256) as i32;
            let operands = GemmOperands {
                dims: [m, k, n],
                layout,
                w: &w,
                bias: &bias,
                requant: &requant,
            };
            let q = Requantize {
                input_zero: zero - 128,
                output_zero: 3,
                min: -128,
                max: 127,
            };
            let a: Vec<i8> = (0..m * k).map(|_| rng.next() as i8).collect();
            let [best, avx2, portable] =
                [Kernel::Best, Kernel::Avx2, Kernel::Portable].map(|how| operands.run(&q, &a, how));
            assert_eq!(best, portable, "int8 case {case} {layout:?}: {m}x{k}x{n}");
            assert_eq!(
                avx2, portable,
                "int8 case {case} {layout:?} AVX2: {m}x{k}x{n}"
            );
            let q = Requantize {
                input_zero: zero,
                output_zero: 100,
                min: 0,
                max: 255,
            };
            let a: Vec<u8> = (0..m * k).map(|_| rng.next() as u8).collect();
            let [best, avx2, portable] =
                [Kernel::Best, Kernel::Avx2, Kernel::Portable].map(|how| operands.run(&q, &a, how));
            assert_eq!(best, portable, "uint8 case {case} {layout:?}: {m}x{k}x{n}");
            assert_eq!(
                avx2, portable,
                "uint8 case {case} {layout:?} AVX2: {m}x{k}x{n}"
            );
        }
    }

    /// Which QGemm kernel [`GemmOperands::run`] asks for.
    #[derive(Clone, Copy)]
    enum Kernel {
        /// VNNI where the CPU has it (blocked weights), else AVX2.
        Best,
        /// AVX2 even where VNNI would run.
        Avx2,
        /// The portable kernel.
        Portable,
    }

    /// A QGemm's sizes and weights, for [`simd_qgemm_equals_the_portable_kernel`].
    struct GemmOperands<'a> {
        dims: [usize; 3],
        layout: ferrite_hal::op::QGemmWeights,
        w: &'a [i8],
        bias: &'a [i32],
        requant: &'a [i32],
    }

    impl GemmOperands<'_> {
        /// The outputs for activations `a` with the kernel `how` asks for.
        fn run<X: QuantInt>(&self, q: &Requantize, a: &[X], how: Kernel) -> Vec<i32> {
            let [m, _, n] = self.dims;
            let mut out = std::vec![X::narrow(0); m * n];
            AVX2_ONLY.set(matches!(how, Kernel::Avx2));
            PORTABLE_ONLY.set(matches!(how, Kernel::Portable));
            let (w, bias, rq) = (self.w, self.bias, self.requant);
            super::super::int8::qgemm(q, self.dims, self.layout, a, w, bias, rq, &mut out);
            AVX2_ONLY.set(false);
            PORTABLE_ONLY.set(false);
            out.iter().map(|v| v.widen()).collect()
        }
    }
}
