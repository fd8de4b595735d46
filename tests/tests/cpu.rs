//! The conformance suites instantiated for the portable CPU device.

use ferrite_tests::{models, node_tests, workspace_root, Cpu};

#[test]
fn models_match_onnxruntime_on_cpu() {
    match models::run_all::<Cpu>() {
        Ok(results) => assert!(!results.is_empty(), "no test models were found"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn onnx_node_tests_on_cpu() {
    let expectations = workspace_root().join("tests/expectations/cpu-node.txt");
    match node_tests::run_suite::<Cpu>(&expectations) {
        Ok(summary) => println!("{summary}"),
        Err(e) => panic!("{e}"),
    }
}

/// The onnx wheel's `pytorch-converted` and `pytorch-operator` models, like the node tests.
#[test]
fn onnx_pytorch_models_on_cpu() {
    let expectations = workspace_root().join("tests/expectations/cpu-pytorch.txt");
    let dirs = node_tests::pytorch_dirs().unwrap_or_else(|e| panic!("{e}"));
    match node_tests::run_suites::<Cpu>(&dirs, "pytorch models", &expectations) {
        Ok(summary) => println!("{summary}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn sklearn_models_match_onnxruntime_on_cpu() {
    match ferrite_tests::sklearn::run_all::<Cpu>() {
        Ok(n) => assert_eq!(
            n, 7,
            "two linear pipelines, a regressor, a forest, boosting, an RBF SVC, k-NN"
        ),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn int8_models_match_onnxruntime_on_cpu() {
    match ferrite_tests::quantized::run_all::<Cpu>() {
        Ok(results) => assert_eq!(
            results.len(),
            16,
            "three models as QDQ, QOperator, 16-bit QDQ and dynamic; the four MLPerf Tiny models"
        ),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn each_int8_layer_matches_the_definition_on_cpu() {
    match ferrite_tests::quantized::run_layers::<Cpu>() {
        Ok(results) => assert!(results.len() >= 90, "{} layer cuts", results.len()),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn quantized_by_ferrite_tracks_float_on_cpu() {
    use ferrite_tests::ptq::{run_all, FLOAT_MODELS};
    use ferrite_tools::compile::ptq::Method;
    match run_all::<Cpu>(&FLOAT_MODELS, Method::MinMax) {
        Ok(results) => assert_eq!(results.len(), FLOAT_MODELS.len()),
        Err(e) => panic!("{e}"),
    }
    // The histogram methods, on the two convolution networks.
    for method in [Method::Percentile(99.99), Method::Entropy] {
        if let Err(e) = run_all::<Cpu>(&["ds_cnn", "resnet8"], method) {
            panic!("{e}");
        }
    }
    // Bias correction, on every model (the same bounds, on the held-out input).
    let settings = ferrite_tools::compile::ptq::Settings {
        method: Method::MinMax,
        bias_correction: true,
    };
    if let Err(e) = run_all::<Cpu>(&FLOAT_MODELS, settings) {
        panic!("{e}");
    }
}

#[test]
fn every_random_geometry_runs_on_cpu() {
    // The host's best SIMD build (AVX-512 where the CPU has it).
    let budget = ferrite_tests::geometry::Budget::from_env();
    match ferrite_tests::geometry::run_all::<Cpu>(budget) {
        Ok(coverage) => println!("best build: {coverage}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn every_model_is_deterministic_on_cpu() {
    let checked = ferrite_tests::determinism::run_all::<Cpu>(ferrite_tests::determinism::RUNS)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(checked >= 21, "{checked} models");
}

#[test]
fn fused_normalizations_equal_their_steps_on_cpu() {
    // Every test model bit for bit with and without chains fused into one step (the
    // transformer's two LayerNormalizations), then random normalizations.
    let compared =
        ferrite_tests::determinism::identical::<ferrite_tests::Cpu, ferrite_tests::CpuUnfused>()
            .unwrap_or_else(|e| panic!("{e}"));
    assert!(compared >= 21, "{compared} models");
    ferrite_tests::normalization_chains::run(ferrite_tests::normalization_chains::CASES)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn channel_blocked_tensors_equal_planar_ones_on_cpu() {
    // Every test model bit for bit (the blocked run without Winograd's transform, which
    // rounds differently: the conformance suites hold it to the references), then random
    // chains of convolutions.
    let compared = ferrite_tests::determinism::identical::<
        ferrite_tests::CpuDirect,
        ferrite_tests::CpuPlanar,
    >()
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(compared >= 21, "{compared} models");
    let budget = ferrite_tests::layout_chains::Budget::CHAINS;
    let blocked = ferrite_tests::layout_chains::run(budget).unwrap_or_else(|e| panic!("{e}"));
    println!("{blocked} of {} chains blocked a tensor", budget.cases);
    if ferrite_cpu::CpuDevice::simd() != "portable" {
        assert!(
            blocked >= budget.cases / 4,
            "{blocked} chains blocked a tensor"
        );
    }
}
