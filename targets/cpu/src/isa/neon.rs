//! Which SIMD build runs on aarch64 (std): NEON is part of every aarch64 core, so the NEON
//! kernels run unless `FERRITE_CPU_SIMD=portable` asks for the portable ones (tests run both).

/// Whether the NEON kernels run.
pub fn neon() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| {
        std::arch::is_aarch64_feature_detected!("neon")
            && std::env::var("FERRITE_CPU_SIMD").as_deref() != Ok("portable")
    })
}
