//! The conformance suites on the CPU device's portable build: `FERRITE_CPU_BASELINE` turns off
//! the AVX2+FMA kernels for this test process, so the code every non-x86 target runs is held to
//! the same expectations.

use ferrite_tests::{models, node_tests, workspace_root, Cpu};

#[test]
fn portable_kernels_pass_the_same_suites() {
    // Set before any kernel runs: the choice is made once per process.
    std::env::set_var("FERRITE_CPU_BASELINE", "1");
    if let Err(e) = models::run_all::<Cpu>() {
        panic!("{e}");
    }
    let expectations = workspace_root().join("tests/expectations/cpu-node.txt");
    if let Err(e) = node_tests::run_suite::<Cpu>(&expectations) {
        panic!("{e}");
    }
}
