//! Which SIMD build runs (std, x86-64): chosen once per process from the CPU's features, or
//! forced with `FERRITE_CPU_SIMD=portable|avx2|avx512` (tests run every build this way).

/// A SIMD build of the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Baseline x86-64 (SSE2), as compiled.
    Portable,
    /// AVX2 + FMA.
    Avx2,
    /// AVX-512F (matrix products; everything else as AVX2).
    Avx512,
}

/// The build to use.
pub fn level() -> Level {
    static LEVEL: std::sync::OnceLock<Level> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| {
        let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        let avx512 = avx2 && std::is_x86_feature_detected!("avx512f");
        let best = match (avx512, avx2) {
            (true, _) => Level::Avx512,
            (false, true) => Level::Avx2,
            _ => Level::Portable,
        };
        match std::env::var("FERRITE_CPU_SIMD").as_deref() {
            Ok("portable") => Level::Portable,
            Ok("avx2") => best.min(Level::Avx2),
            _ => best,
        }
    })
}

/// Whether the CPU has AVX-512 VNNI and AVX-512VL (the integer products of `vpdpbusd`).
pub fn vnni() -> bool {
    std::is_x86_feature_detected!("avx512vnni") && std::is_x86_feature_detected!("avx512vl")
}
