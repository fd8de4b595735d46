//! The conformance suites on the CPU device's portable build: `FERRITE_CPU_SIMD=portable` turns
//! off the AVX2/AVX-512 kernels for this test process, so the code every non-x86 target runs is
//! held to the same expectations.

use ferrite_tests::{models, node_tests, workspace_root, Cpu};

#[test]
fn portable_kernels_pass_the_same_suites() {
    // Set before any kernel runs: the choice is made once per process.
    std::env::set_var("FERRITE_CPU_SIMD", "portable");
    models::run_all::<Cpu>().unwrap_or_else(|e| panic!("{e}"));
    let expectations = workspace_root().join("tests/expectations/cpu-node.txt");
    node_tests::run_suite::<Cpu>(&expectations).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn portable_kernels_run_every_random_geometry() {
    std::env::set_var("FERRITE_CPU_SIMD", "portable");
    let budget = ferrite_tests::geometry::Budget::from_env();
    match ferrite_tests::geometry::run_all::<Cpu>(budget) {
        Ok(coverage) => println!("portable: {coverage}"),
        Err(e) => panic!("{e}"),
    }
}
