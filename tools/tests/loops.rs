//! Loop and Scan unrolled at pack time (issue 20, item 5): each checked against its ONNX
//! definition written out in Rust, over many inputs — a Loop whose condition is computed at run
//! time (bounded by `M`), Scan inputs and outputs along other axes and in reverse, opset 8's
//! batched Scan, loops nested in loops — and every refusal names what to do.

mod common;

use common::models::{f32_array, f32_values, run_packed, values};
use ferrite_tools::compile::onnx::build::{attr_graph, attr_int, attr_ints, ModelBuilder, D};
use ferrite_tools::compile::onnx::proto::{data_type, GraphProto};
use ferrite_tools::compile::pack::{pack, PackOptions};
use ferrite_tools::host::npy::NpyArray;

fn run(onnx: &[u8], inputs: &[NpyArray]) -> Vec<NpyArray> {
    run_packed(onnx, &PackOptions::default(), inputs, "model")
}

fn refusal(onnx: &[u8]) -> String {
    pack(onnx, &PackOptions::default())
        .map(|_| ())
        .unwrap_err()
        .to_string()
}

/// A body graph: `inputs` (name, type, dims), then `nodes`, returning `outputs`.
fn body(
    inputs: &[(&str, i32, &[D])],
    nodes: impl FnOnce(ModelBuilder) -> ModelBuilder,
    outputs: &[&str],
) -> GraphProto {
    let mut b = ModelBuilder::new(17);
    for &(name, ty, dims) in inputs {
        b = b.input(name, ty, dims);
    }
    b = nodes(b);
    for o in outputs {
        b = b.output(o);
    }
    b.graph()
}

/// `while y < limit (at most M = 6 times): y = y + step`, the condition computed at run time
/// both on entry and by the body: unrolled to six iterations, each kept only while the
/// condition has held.
#[test]
fn loop_with_a_run_time_condition_stops_where_the_definition_does() {
    let g = body(
        &[
            ("i", data_type::INT64, &[]),
            ("c", data_type::BOOL, &[]),
            ("y_in", data_type::FLOAT, &[D::N(2)]),
        ],
        |b| {
            b.node("Add", "step", &["y_in", "step"], &["y_out"], vec![])
                .node(
                    "ReduceMax",
                    "peak",
                    &["y_out"],
                    &["peak"],
                    vec![attr_int("keepdims", 0)],
                )
                .node("Less", "below", &["peak", "limit"], &["c_out"], vec![])
        },
        &["c_out", "y_out"],
    );
    let onnx = ModelBuilder::new(17)
        .input("y", data_type::FLOAT, &[D::N(2)])
        .input("limit", data_type::FLOAT, &[])
        .init_i64("M", &[], &[6])
        .init_f32("step", &[2], &[1.0, 0.5])
        .node(
            "ReduceMax",
            "start_peak",
            &["y"],
            &["y_peak"],
            vec![attr_int("keepdims", 0)],
        )
        .node("Less", "start", &["y_peak", "limit"], &["go"], vec![])
        .node(
            "Loop",
            "loop",
            &["M", "go", "y"],
            &["y_final"],
            vec![attr_graph("body", g)],
        )
        .output("y_final")
        .encode();
    for seed in 1..40 {
        let y = values(seed, 2, 12.0);
        let limit = values(seed + 100, 1, 12.0)[0];
        let mut want = y.clone();
        for _ in 0..6 {
            if want.iter().cloned().fold(f32::NEG_INFINITY, f32::max) >= limit {
                break;
            }
            want[0] += 1.0;
            want[1] += 0.5;
        }
        let out = run(&onnx, &[f32_array(&[2], &y), f32_array(&[], &[limit])]);
        assert_eq!(
            f32_values(&out[0]),
            want,
            "seed {seed}: y {y:?} limit {limit}"
        );
    }
}

/// Two scan inputs, one scanned along axis 1 in reverse; two scan outputs, one stacked along
/// axis 1 and one in reverse order: the running sum and the running product of the elements.
#[test]
fn scan_axes_and_directions_match_the_definition() {
    let g = body(
        &[
            ("sum_in", data_type::FLOAT, &[D::N(3)]),
            ("a", data_type::FLOAT, &[D::N(3)]),
            ("b", data_type::FLOAT, &[D::N(3)]),
        ],
        |b| {
            b.node("Add", "sum", &["sum_in", "a"], &["sum_out"], vec![])
                .node("Mul", "product", &["sum_out", "b"], &["product"], vec![])
        },
        &["sum_out", "sum_out", "product"],
    );
    // The body returns sum_out twice: once as the state, once as a scan output.
    let onnx = ModelBuilder::new(11)
        .input("init", data_type::FLOAT, &[D::N(3)])
        .input("xa", data_type::FLOAT, &[D::N(4), D::N(3)])
        .input("xb", data_type::FLOAT, &[D::N(3), D::N(4)])
        .node(
            "Scan",
            "scan",
            &["init", "xa", "xb"],
            &["final", "sums", "products"],
            vec![
                attr_graph("body", g),
                attr_int("num_scan_inputs", 2),
                attr_ints("scan_input_axes", &[0, 1]),
                attr_ints("scan_input_directions", &[0, 1]),
                attr_ints("scan_output_axes", &[1, -2]),
                attr_ints("scan_output_directions", &[0, 1]),
            ],
        )
        .output("final")
        .output("sums")
        .output("products")
        .encode();
    for seed in 1..10 {
        let (init, xa, xb) = (
            values(seed, 3, 4.0),
            values(seed + 7, 12, 4.0),
            values(seed + 13, 12, 4.0),
        );
        let out = run(
            &onnx,
            &[
                f32_array(&[3], &init),
                f32_array(&[4, 3], &xa),
                f32_array(&[3, 4], &xb),
            ],
        );
        // The definition, element by element.
        let mut sum = init.clone();
        let mut sums = vec![0.0f32; 12]; // [3, 4]: iteration t at column t
        let mut products = vec![0.0f32; 12]; // [4, 3]: iteration t at row 3 - t
        for t in 0..4 {
            for c in 0..3 {
                sum[c] += xa[t * 3 + c];
                let b = xb[c * 4 + (3 - t)];
                sums[c * 4 + t] = sum[c];
                products[(3 - t) * 3 + c] = sum[c] * b;
            }
        }
        assert_eq!(out[0].shape, [3]);
        assert_eq!(out[1].shape, [3, 4]);
        assert_eq!(out[2].shape, [4, 3]);
        assert_eq!(f32_values(&out[0]), sum, "seed {seed}");
        assert_eq!(f32_values(&out[1]), sums, "seed {seed}");
        assert_eq!(f32_values(&out[2]), products, "seed {seed}");
    }
}

/// Opset 8's Scan: a batch axis first on every input and output, the body run per batch
/// element; a full-length `sequence_lens` is accepted, a shorter one refused.
#[test]
fn opset_8_scan_runs_each_batch_element() {
    let g = body(
        &[
            ("s_in", data_type::FLOAT, &[D::N(2)]),
            ("x", data_type::FLOAT, &[D::N(2)]),
        ],
        |b| b.node("Mul", "scale", &["s_in", "x"], &["s_out"], vec![]),
        &["s_out", "s_out"],
    );
    let model = |lens: &[i64]| {
        ModelBuilder::new(8)
            .input("init", data_type::FLOAT, &[D::N(2), D::N(2)])
            .input("x", data_type::FLOAT, &[D::N(2), D::N(3), D::N(2)])
            .init_i64("lens", &[2], lens)
            .node(
                "Scan",
                "scan",
                &["lens", "init", "x"],
                &["final", "all"],
                vec![
                    attr_graph("body", g.clone()),
                    attr_int("num_scan_inputs", 1),
                ],
            )
            .output("final")
            .output("all")
            .encode()
    };
    let (init, x) = (values(3, 4, 2.0), values(4, 12, 2.0));
    let out = run(
        &model(&[3, 3]),
        &[f32_array(&[2, 2], &init), f32_array(&[2, 3, 2], &x)],
    );
    let mut state = init.clone();
    let mut all = vec![0.0f32; 12];
    for b in 0..2 {
        for t in 0..3 {
            for c in 0..2 {
                state[b * 2 + c] *= x[b * 6 + t * 2 + c];
                all[b * 6 + t * 2 + c] = state[b * 2 + c];
            }
        }
    }
    assert_eq!(f32_values(&out[0]), state);
    assert_eq!(out[1].shape, [2, 3, 2]);
    assert_eq!(f32_values(&out[1]), all);
    let err = refusal(&model(&[3, 2]));
    assert!(err.contains("export without sequence_lens"), "{err}");
}

/// A Loop in a Loop, each reading its own iteration number: `y += 10·i + j` for i < 3, j < 2,
/// with the inner loop's scan output stacked per outer iteration.
#[test]
fn nested_loops_unroll_with_their_own_iteration_numbers() {
    let inner = body(
        &[
            ("j", data_type::INT64, &[]),
            ("c_in", data_type::BOOL, &[]),
            ("acc_in", data_type::FLOAT, &[]),
        ],
        |b| {
            b.node("Cast", "j_float", &["j"], &["jf"], vec![attr_int("to", 1)])
                .node("Add", "add_j", &["acc_in", "jf"], &["acc_out"], vec![])
                .node("Identity", "keep", &["c_in"], &["c_out"], vec![])
        },
        &["c_out", "acc_out", "acc_out"],
    );
    let outer = body(
        &[
            ("i", data_type::INT64, &[]),
            ("c_in", data_type::BOOL, &[]),
            ("y_in", data_type::FLOAT, &[]),
        ],
        |b| {
            b.node("Cast", "i_float", &["i"], &["if"], vec![attr_int("to", 1)])
                .node("Mul", "tens", &["if", "ten"], &["ti"], vec![])
                .node("Add", "add_i", &["y_in", "ti"], &["y_i"], vec![])
                .node(
                    "Loop",
                    "inner",
                    &["two", "", "y_i"],
                    &["y_out", "steps"],
                    vec![attr_graph("body", inner)],
                )
                .node("Identity", "keep", &["c_in"], &["c_out"], vec![])
        },
        &["c_out", "y_out", "steps"],
    );
    let onnx = ModelBuilder::new(13)
        .input("y", data_type::FLOAT, &[])
        .init_i64("three", &[], &[3])
        .init_i64("two", &[], &[2])
        .init_f32("ten", &[], &[10.0])
        .node(
            "Loop",
            "outer",
            &["three", "", "y"],
            &["y_final", "trace"],
            vec![attr_graph("body", outer)],
        )
        .output("y_final")
        .output("trace")
        .encode();
    let out = run(&onnx, &[f32_array(&[], &[0.5])]);
    let (mut y, mut trace) = (0.5f32, Vec::new());
    for i in 0..3 {
        y += 10.0 * i as f32;
        for j in 0..2 {
            y += j as f32;
            trace.push(y);
        }
    }
    assert_eq!(f32_values(&out[0]), [y]);
    assert_eq!(out[1].shape, [3, 2]);
    assert_eq!(f32_values(&out[1]), trace);
}

/// A one-value Loop body: `y_out = y_in + 1`, passing the condition through, and a scan output
/// when `scan` is set.
fn counting_loop(trips: &str, cond: &str, scan: bool) -> ModelBuilder {
    let outputs: &[&str] = if scan {
        &["c_out", "y_out", "y_out"]
    } else {
        &["c_out", "y_out"]
    };
    let g = body(
        &[
            ("i", data_type::INT64, &[]),
            ("c_in", data_type::BOOL, &[]),
            ("y_in", data_type::FLOAT, &[]),
        ],
        |b| {
            b.node("Add", "inc", &["y_in", "one"], &["y_out"], vec![])
                .node("Identity", "keep", &["c_in"], &["c_out"], vec![])
        },
        outputs,
    );
    let loop_outputs: &[&str] = if scan {
        &["y_final", "ys"]
    } else {
        &["y_final"]
    };
    ModelBuilder::new(13)
        .input("y", data_type::FLOAT, &[])
        .init_f32("one", &[], &[1.0])
        .node(
            "Loop",
            "count",
            &[trips, cond, "y"],
            loop_outputs,
            vec![attr_graph("body", g)],
        )
        .output("y_final")
}

/// What cannot be unrolled is refused in one line that says why and what to do.
#[test]
fn loops_that_cannot_be_unrolled_are_refused_with_the_way_out() {
    // A trip count given at run time: freeze it.
    let err = refusal(
        &counting_loop("n", "", false)
            .input("n", data_type::INT64, &[])
            .encode(),
    );
    assert!(
        err.contains("trip count M must be a constant")
            && err.contains("--constant n=NUMBER")
            && !err.contains("--constant y="),
        "{err}"
    );
    // More iterations than Ferrite unrolls.
    let err = refusal(
        &counting_loop("n", "", false)
            .init_i64("n", &[], &[1_000_000_000])
            .encode(),
    );
    assert!(err.contains("more than the 4096 iterations"), "{err}");
    // No trip count and a condition that never folds to false.
    let err = refusal(&counting_loop("", "", false).encode());
    assert!(err.contains("still holds after 4096 iterations"), "{err}");
    // A run-time condition with scan outputs: their length would depend on the data.
    let err = refusal(
        &counting_loop("n", "go", true)
            .init_i64("n", &[], &[4])
            .input("go", data_type::BOOL, &[])
            .output("ys")
            .encode(),
    );
    assert!(err.contains("data-dependent shape"), "{err}");
    // The constant-count form of the same loop packs, and counts.
    let onnx = counting_loop("n", "", true)
        .init_i64("n", &[], &[4])
        .output("ys")
        .encode();
    let out = run(&onnx, &[f32_array(&[], &[2.0])]);
    assert_eq!(f32_values(&out[0]), [6.0]);
    assert_eq!(f32_values(&out[1]), [3.0, 4.0, 5.0, 6.0]);
}

/// A loop-carried value whose shape changes from one iteration to the next is refused by name.
#[test]
fn a_loop_carried_value_must_keep_its_shape() {
    let g = body(
        &[
            ("i", data_type::INT64, &[]),
            ("c_in", data_type::BOOL, &[]),
            ("y_in", data_type::FLOAT, &[D::N(2)]),
        ],
        |b| {
            b.node(
                "Concat",
                "grow",
                &["y_in", "y_in"],
                &["y_out"],
                vec![attr_int("axis", 0)],
            )
            .node("Identity", "keep", &["c_in"], &["c_out"], vec![])
        },
        &["c_out", "y_out"],
    );
    let onnx = ModelBuilder::new(13)
        .input("y", data_type::FLOAT, &[D::N(2)])
        .init_i64("n", &[], &[3])
        .node(
            "Loop",
            "grow",
            &["n", "", "y"],
            &["y_final"],
            vec![attr_graph("body", g)],
        )
        .output("y_final")
        .encode();
    let err = refusal(&onnx);
    assert!(
        err.contains("loop-carried value 0 changes from [2] float32 to [4] float32"),
        "{err}"
    );
}

/// Three Loops nested, 4096 iterations each, whose bodies fold to constants: no step is added,
/// so the unrolled work itself is bounded (without it, packing would lower 2^36 nodes).
#[test]
fn nested_loops_that_fold_away_are_bounded_too() {
    let count = |inner: Option<GraphProto>| {
        body(
            &[
                ("i", data_type::INT64, &[]),
                ("c_in", data_type::BOOL, &[]),
                ("v_in", data_type::INT64, &[]),
            ],
            |b| {
                let b = b.node("Add", "next", &["v_in", "i"], &["v_next"], vec![]);
                let b = match inner {
                    Some(g) => b.node(
                        "Loop",
                        "inner",
                        &["n", "", "v_next"],
                        &["v_out"],
                        vec![attr_graph("body", g)],
                    ),
                    None => b.node("Identity", "same", &["v_next"], &["v_out"], vec![]),
                };
                b.node("Identity", "keep", &["c_in"], &["c_out"], vec![])
            },
            &["c_out", "v_out"],
        )
    };
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1)])
        .init_i64("n", &[], &[4096])
        .init_i64("zero", &[], &[0])
        .node(
            "Loop",
            "outer",
            &["n", "", "zero"],
            &["total"],
            vec![attr_graph("body", count(Some(count(Some(count(None))))))],
        )
        .node(
            "Cast",
            "as_float",
            &["total"],
            &["t"],
            vec![attr_int("to", 1)],
        )
        .node("Add", "y", &["x", "t"], &["y"], vec![])
        .output("y")
        .encode();
    let err = refusal(&onnx);
    assert!(err.contains("more than 262144 body nodes"), "{err}");
}
