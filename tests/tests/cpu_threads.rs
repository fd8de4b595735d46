//! The CPU device with its big kernels on several threads (`CpuDevice::with_threads`): every test
//! model bit-identical to one thread (which the `cpu` suite checks against onnxruntime), and the
//! random geometries against their references (on the host's best SIMD build).

use ferrite_tests::{determinism, Cpu, CpuThreads};

#[test]
fn every_model_on_threads_equals_one_thread_bit_for_bit() {
    let compared = determinism::identical::<Cpu, CpuThreads>().unwrap_or_else(|e| panic!("{e}"));
    assert!(compared >= 21, "{compared} models");
}

#[test]
fn every_random_geometry_runs_on_threads() {
    let budget = ferrite_tests::geometry::Budget::from_env();
    match ferrite_tests::geometry::run_all::<CpuThreads>(budget) {
        Ok(coverage) => println!("{} threads: {coverage}", CpuThreads::THREADS),
        Err(e) => panic!("{e}"),
    }
}
