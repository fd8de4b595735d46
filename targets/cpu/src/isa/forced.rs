//! Narrower kernels forced on one thread, for tests: a test on a CPU with VNNI still checks the
//! AVX2 kernels, and one with SIMD the portable kernel, each against the definition. Outside
//! tests every switch reads false.

#[cfg(test)]
std::thread_local! {
    /// Tests set this to run the AVX2 kernels on a CPU that has VNNI (on this thread).
    pub(crate) static AVX2_ONLY: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    /// Tests set this to run QGemm's portable kernel on a CPU with SIMD ones (on this thread).
    pub(crate) static PORTABLE_ONLY: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Whether this thread's tests asked for QGemm's portable kernel.
#[cfg(target_arch = "x86_64")]
pub(crate) fn portable_only() -> bool {
    #[cfg(test)]
    return PORTABLE_ONLY.get();
    #[cfg(not(test))]
    false
}

/// Whether this thread's tests asked for the AVX2 kernels where VNNI would run.
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2_only() -> bool {
    #[cfg(test)]
    return AVX2_ONLY.get();
    #[cfg(not(test))]
    false
}
