//! The conformance suites on the AVX2 build of the CPU device (`FERRITE_CPU_SIMD=avx2`): on a
//! machine with AVX-512 the default run uses the AVX-512 matrix products, so this keeps the AVX2
//! ones under test too. On a CPU without AVX2 this is the portable build again.

use ferrite_tests::{models, node_tests, workspace_root, Cpu};

#[test]
fn avx2_kernels_pass_the_same_suites() {
    std::env::set_var("FERRITE_CPU_SIMD", "avx2");
    models::run_all::<Cpu>().unwrap_or_else(|e| panic!("{e}"));
    let expectations = workspace_root().join("tests/expectations/cpu-node.txt");
    node_tests::run_suite::<Cpu>(&expectations).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn avx2_kernels_run_every_random_geometry() {
    std::env::set_var("FERRITE_CPU_SIMD", "avx2");
    let budget = ferrite_tests::geometry::Budget::from_env();
    match ferrite_tests::geometry::run_all::<Cpu>(budget) {
        Ok(coverage) => println!("avx2: {coverage}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn avx2_channel_blocked_tensors_equal_planar_ones() {
    std::env::set_var("FERRITE_CPU_SIMD", "avx2");
    let budget = ferrite_tests::layout_chains::Budget::CHAINS;
    let blocked = ferrite_tests::layout_chains::run(budget).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "avx2: {blocked} of {} chains blocked a tensor",
        budget.cases
    );
}
