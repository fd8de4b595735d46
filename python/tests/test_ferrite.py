"""The Python package against onnxruntime and the `ferrite` CLI, and on bad input.

Needs the test models (`tests/models/generate.py DIR`, found through FERRITE_TEST_MODELS,
default target/test-models). With FERRITE_CLI (the `ferrite` binary; scripts/test.sh sets it)
the package's bytes and reports are also compared with the CLI's.
"""

import json
import os
import pathlib
import subprocess
import threading

import numpy as np
import onnx
import onnx.helper as oh
import onnxruntime as ort
import pytest

import ferrite

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = pathlib.Path(os.environ.get("FERRITE_TEST_MODELS", ROOT / "target" / "test-models"))
DIGITS = ROOT / "demo" / "digits.onnx"
CLI = os.environ.get("FERRITE_CLI")

# The Rust model suite's bounds (tests/src/models.rs, tests/src/quantized.rs).
FLOAT_TOLERANCE = 1e-4
WITHIN_ONE_STEP = 0.99
MAX_STEPS = 2.0
# 16 x 8 models (form qdq16): a 16-bit step is 1/256 of an 8-bit one, so onnxruntime's float32
# rounding carried through the layers moves some outputs by a step, and the tie brackets move the
# definition by up to 256 times more steps (tests/src/quantized.rs, WIDE_WITHIN_ONE_STEP).
WIDE_WITHIN_ONE_STEP = 0.75
WIDE_CONDITIONED_STEPS = 8.0
DYNAMIC_RELATIVE = 1e-5


def table(name):
    path = MODELS / name
    if not path.exists():
        raise RuntimeError(f"{path} is missing: run tests/models/generate.py {MODELS}")
    with open(path) as f:
        return json.load(f)


FLOAT_MODELS = table("manifest.json")
QUANTIZED_MODELS = table("quantized.json")


def relative_error(actual, expected):
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    return np.max(np.abs(actual - expected)) / max(np.max(np.abs(expected)), 1e-30)


def digits_input(session, seed=0):
    return np.random.default_rng(seed).random(session.inputs[0].shape, dtype=np.float32)


@pytest.fixture(scope="module")
def digits():
    frt, _ = ferrite.pack(DIGITS)
    return frt


# --- against onnxruntime -------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FLOAT_MODELS))
def test_float_models_match_onnxruntime(name):
    shapes = FLOAT_MODELS[name]["input_shapes"]
    x = np.load(MODELS / f"{name}.input_0.npy")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    reference = ort.InferenceSession(
        str(MODELS / f"{name}.onnx"), options, providers=["CPUExecutionProvider"]
    )
    expected = reference.run(None, {reference.get_inputs()[0].name: x})
    session = ferrite.Session(MODELS / f"{name}.onnx", input_shapes=shapes)
    actual = session.run(None, {session.inputs[0].name: x})
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        assert relative_error(a, e) <= FLOAT_TOLERANCE, name


def nearest_reference(actual, path):
    """The reference, element by element the nearest point of its tie brackets (see
    tests/src/quantized.rs): onnxruntime's float arithmetic breaks exact ties either way."""
    plain = np.load(path).astype(np.float64)
    lo, hi = plain.copy(), plain.copy()
    for tag in ("lo", "hi"):
        bracket = path.with_suffix(f".{tag}.npy")
        if bracket.exists():
            other = np.load(bracket).astype(np.float64)
            lo, hi = np.minimum(lo, other), np.maximum(hi, other)
    return np.clip(np.asarray(actual, np.float64), lo, hi), np.max(hi - lo)


@pytest.mark.parametrize("name", sorted(QUANTIZED_MODELS))
def test_quantized_models_within_one_step_of_onnxruntime(name):
    """The references are onnxruntime's definitional runs (ORT_DISABLE_ALL: dequantize, float
    op, quantize), written by generate.py."""
    entry = QUANTIZED_MODELS[name]
    session = ferrite.Session(MODELS / f"{name}.onnx", input_shapes=entry["input_shapes"])
    pairs = entry.get("samples") or [[f"{name}.input_0.npy", f"{name}.output_0.npy"]]
    step = entry.get("output_step")
    wide = entry.get("form") == "qdq16"
    conditioned = WIDE_CONDITIONED_STEPS if wide else MAX_STEPS
    actual_all, expected_all = [], []
    ill_conditioned = 0
    for input_file, output_file in pairs:
        x = np.load(MODELS / input_file)
        [actual] = session.run(None, {session.inputs[0].name: x})
        expected, spread = nearest_reference(actual, MODELS / output_file)
        if step is not None and spread > conditioned * step:
            ill_conditioned += 1
            continue
        actual_all.append(np.asarray(actual, np.float64).ravel())
        expected_all.append(expected.ravel())
    assert 2 * ill_conditioned <= len(pairs), f"{name}: too few well-conditioned samples"
    actual_all, expected_all = np.concatenate(actual_all), np.concatenate(expected_all)
    if step is None:
        assert relative_error(actual_all, expected_all) <= DYNAMIC_RELATIVE, name
        return
    steps = np.abs(actual_all - expected_all) / step
    assert np.mean(steps <= 1 + 1e-3) >= (WIDE_WITHIN_ONE_STEP if wide else WITHIN_ONE_STEP), name
    assert steps.max() <= MAX_STEPS + 1e-3, name


def test_int8_model_reports_its_quantization():
    name = "mlperf_kws_ds_cnn"
    session = ferrite.Session(
        MODELS / f"{name}.onnx", input_shapes=QUANTIZED_MODELS[name]["input_shapes"]
    )
    [x] = session.inputs
    [y] = session.outputs
    assert x.dtype == np.int8 and y.dtype == np.int8
    # The scale and zero point of the model's own QuantizeLinear on the input.
    model = onnx.load(MODELS / f"{name}.onnx")
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear" and node.output[0] == x.name:
            assert x.quantization.scale == pytest.approx(float(consts[node.input[1]]), rel=1e-6)
            assert x.quantization.zero_point == int(consts[node.input[2]])
            break
    else:
        assert x.quantization is not None and x.quantization.scale > 0
    assert y.quantization is not None and y.quantization.scale > 0
    assert "Quantization(scale=" in repr(x)


# --- the same as the CLI -------------------------------------------------------------------


def test_pack_takes_a_path_bytes_or_a_model_proto(tmp_path):
    from_path, report = ferrite.pack(DIGITS)
    from_str, _ = ferrite.pack(str(DIGITS))
    from_bytes, _ = ferrite.pack(DIGITS.read_bytes())
    from_proto, _ = ferrite.pack(onnx.load(DIGITS))
    assert from_path == from_str == from_bytes == from_proto
    assert report["file_bytes"] == len(from_path)
    assert report["ops"] == {"Gemm": 1, "Gemm+Relu": 2, "Softmax": 1}
    assert report["op_count"] == 4
    assert report["passes"]["activations_fused"] == 2
    assert report["quantization"] is None
    assert ferrite.Session(from_path).arena_bytes == report["arena_bytes"]
    if CLI:
        out = tmp_path / "digits.frt"
        subprocess.run([CLI, "pack", DIGITS, "-o", out], check=True, capture_output=True)
        assert out.read_bytes() == from_path


def test_session_takes_frt_or_onnx_from_any_source(tmp_path, digits):
    path = tmp_path / "digits.frt"
    path.write_bytes(digits)
    sessions = [
        ferrite.Session(digits),
        ferrite.Session(bytearray(digits)),
        ferrite.Session(memoryview(digits)),
        ferrite.Session(path),
        ferrite.Session(str(path)),
        ferrite.Session(DIGITS),
        ferrite.Session(onnx.load(DIGITS)),
    ]
    x = digits_input(sessions[0])
    outputs = [s.run({"image": x})["probabilities"] for s in sessions]
    for o in outputs[1:]:
        np.testing.assert_array_equal(o, outputs[0])
    assert sessions[0].frt() == digits


def test_bench_reports_what_the_cli_reports(tmp_path, digits):
    session = ferrite.Session(digits)
    report = session.bench(runs=5)
    assert report["runs"] == 5 and report["device"] == "cpu"
    assert 0 < report["min_us"] <= report["median_us"] <= report["p90_us"]
    assert report["arena_bytes"] == session.arena_bytes
    profiled = session.bench(runs=3, profile=True, feeds={"image": digits_input(session)})
    assert [op["op"] for op in profiled["ops"]] == ["Gemm+Relu", "Gemm+Relu", "Gemm", "Softmax"]
    if CLI:
        path = tmp_path / "digits.frt"
        path.write_bytes(digits)
        cli = json.loads(
            subprocess.run(
                [CLI, "bench", path, "--runs", "5", "--json"], check=True, capture_output=True
            ).stdout
        )
        assert set(cli) == set(report)
        assert {k: cli[k] for k in ("arena_bytes", "weights_bytes", "runs", "simd")} == {
            k: report[k] for k in ("arena_bytes", "weights_bytes", "runs", "simd")
        }


def test_quantize_from_arrays_equals_quantize_from_a_folder():
    folder = MODELS / "calibration" / "mlp"
    samples = np.load(folder / "samples.npy")
    shapes = {"input": FLOAT_MODELS["mlp"]["input_shapes"]["input"]}
    model = MODELS / "mlp.onnx"
    from_folder, report = ferrite.pack(
        model, input_shapes=shapes, quantize="int8", calibration=folder
    )
    from_batch, _ = ferrite.pack(model, input_shapes=shapes, quantize="int8", calibration=samples)
    from_list, _ = ferrite.pack(
        model, input_shapes=shapes, quantize="int8", calibration=list(samples)
    )
    from_dicts, _ = ferrite.pack(
        model, input_shapes=shapes, quantize="int8", calibration=[{"input": s} for s in samples]
    )
    assert from_folder == from_batch == from_list == from_dicts
    q = report["quantization"]
    assert q["type"] == "int8" and q["samples"] == len(samples) and q["weights"] > 0
    [output] = q["outputs"]
    assert output["sqnr_db"] > 20, output
    # The int8 model runs and stays close to the float one.
    x = samples[0]
    float_out = ferrite.Session(model, input_shapes=shapes).run(None, {"input": x})[0]
    int8_out = ferrite.Session(from_folder).run(None, {"input": x})[0]
    assert relative_error(int8_out, float_out) < 0.1


# --- run's forms and arrays ----------------------------------------------------------------


def test_run_forms(digits):
    session = ferrite.Session(digits)
    x = digits_input(session)
    as_dict = session.run({"image": x})
    assert list(as_dict) == ["probabilities"]
    [as_list] = session.run(None, {"image": x})
    [named] = session.run(["probabilities"], {"image": x})
    np.testing.assert_array_equal(as_dict["probabilities"], as_list)
    np.testing.assert_array_equal(named, as_list)
    assert as_list.flags.writeable and as_list.flags.c_contiguous
    assert [i.name for i in session.get_inputs()] == ["image"]
    assert [o.name for o in session.get_outputs()] == ["probabilities"]
    assert session.outputs[0].shape == (1, 10)
    assert session.outputs[0].quantization is None


def test_strided_and_big_endian_arrays_read_as_their_values(digits):
    session = ferrite.Session(digits)
    x = digits_input(session)
    expected = session.run({"image": x})["probabilities"]
    strided = np.ascontiguousarray(x[..., ::-1])[..., ::-1]
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(session.run({"image": strided})["probabilities"], expected)
    big = x.astype(">f4")
    np.testing.assert_array_equal(session.run({"image": big})["probabilities"], expected)


def test_threads_share_a_session(digits):
    session = ferrite.Session(digits)
    inputs = [digits_input(session, seed) for seed in range(4)]
    expected = [session.run({"image": x})["probabilities"] for x in inputs]
    failures = []

    def work(k):
        for _ in range(25):
            got = session.run({"image": inputs[k]})["probabilities"]
            if not np.array_equal(got, expected[k]):
                failures.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_kernel_threads_give_one_thread_results():
    name = "resnet8"
    x = np.load(MODELS / f"{name}.input_0.npy")
    shapes = FLOAT_MODELS[name]["input_shapes"]
    one = ferrite.Session(MODELS / f"{name}.onnx", input_shapes=shapes)
    three = ferrite.Session(MODELS / f"{name}.onnx", input_shapes=shapes, threads=3)
    assert (one.threads, three.threads) == (1, 3)
    feeds = {one.inputs[0].name: x}
    for a, b in zip(one.run(None, feeds), three.run(None, feeds)):
        assert np.array_equal(a, b)
    with pytest.raises(ferrite.InputError, match="--threads 0: expected 1 to 64"):
        ferrite.Session(MODELS / f"{name}.onnx", input_shapes=shapes, threads=0)
    with pytest.raises(ferrite.InputError, match="only the cpu device runs its kernels on threads"):
        ferrite.Session(MODELS / f"{name}.onnx", device="vulkan", input_shapes=shapes, threads=2)


# --- bad input: typed errors with the CLI's messages -----------------------------------------


def test_feeds_that_do_not_fit_are_input_errors(digits):
    session = ferrite.Session(digits)
    x = digits_input(session)
    cases = {
        "the model has no input 'nope' (inputs: image)": {"nope": x},
        "missing input(s): image (inputs: image)": {},
        "input 'image' is float32, the array is float64": {"image": x.astype(np.float64)},
        "input 'image' has shape [1, 1, 8, 8], the array has [1, 64]": {"image": x.reshape(1, 64)},
        "numpy type '<c8' has no Ferrite dtype": {"image": x.astype(np.complex64)},
        "numpy type '|O' has no Ferrite dtype": {"image": np.array([object()])},
    }
    for message, feeds in cases.items():
        with pytest.raises(ferrite.InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
            session.run(feeds)
    with pytest.raises(ferrite.InputError, match="has no output 'nope'"):
        session.run(["nope"], {"image": x})
    with pytest.raises(ferrite.InputError):
        session.run("image", None)
    assert issubclass(ferrite.InputError, ferrite.FerriteError)


def test_bad_models_are_typed_errors(tmp_path, digits):
    with pytest.raises(ferrite.ModelError, match="neither a packed model"):
        ferrite.Session(b"definitely not a model")
    with pytest.raises(ferrite.ModelError, match="truncated"):
        ferrite.Session(digits[:100])
    corrupt = bytearray(digits)
    corrupt[len(corrupt) // 2] ^= 0x55
    with pytest.raises(ferrite.ModelError):
        ferrite.Session(bytes(corrupt))
    with pytest.raises(FileNotFoundError):
        ferrite.Session(tmp_path / "missing.frt")
    with pytest.raises(ferrite.PackError, match="not int"):
        ferrite.Session(42)
    with pytest.raises(ferrite.DeviceError, match="unknown device 'tpu'"):
        ferrite.Session(digits, device="tpu")


def test_every_corruption_of_a_model_is_refused_or_runs(digits):
    """The class of corrupt files, not one: random byte flips and truncations are refused with
    a ModelError (the checksum and the header's length); bytes appended after the model (flash
    padding) are ignored, and the model runs."""
    rng = np.random.default_rng(7)
    refused = {0: 0, 1: 0, 2: 0}
    for trial in range(300):
        data = bytearray(digits)
        kind = trial % 3
        if kind == 0:
            for _ in range(rng.integers(1, 8)):
                at = rng.integers(len(data))
                data[at] ^= rng.integers(1, 256)
        elif kind == 1:
            data = data[: rng.integers(len(data))]
        else:
            data += bytes(rng.integers(0, 256, rng.integers(1, 64), dtype=np.uint8))
        try:
            session = ferrite.Session(bytes(data))
        except ferrite.ModelError:
            refused[kind] += 1
            continue
        x = np.zeros(session.inputs[0].shape, session.inputs[0].dtype)
        session.run({session.inputs[0].name: x})
    assert refused == {0: 100, 1: 100, 2: 0}


def test_pack_refusals_are_pack_errors(tmp_path, digits):
    with pytest.raises(ferrite.PackError, match="already packed"):
        ferrite.pack(digits)
    with pytest.raises(ferrite.PackError, match="cannot parse ONNX model"):
        ferrite.pack(b"\xff\xff\xff")
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])
    symbolic = oh.make_model(oh.make_graph([oh.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    frt, _ = ferrite.pack(symbolic, input_shapes={"x": (2, 4)})
    assert ferrite.Session(frt).inputs[0].shape == (2, 4)
    frt_text, _ = ferrite.pack(symbolic, input_shapes={"x": "2x4"})
    assert frt_text == frt
    frt_symbol, _ = ferrite.pack(symbolic, input_shapes={"batch": 2})
    assert frt_symbol == frt
    # A symbolic batch is taken as 1, with a note; strict_shapes refuses with the flag to pass.
    one, report = ferrite.pack(symbolic)
    assert ferrite.Session(one).inputs[0].shape == (1, 4)
    assert "taken as 1" in report["notes"][0]
    with pytest.raises(ferrite.PackError, match="pass --input-shape x=1x4"):
        ferrite.pack(symbolic, strict_shapes=True)
    with pytest.warns(UserWarning, match="taken as 1"):
        assert ferrite.Session(symbolic).inputs[0].shape == (1, 4)
    with pytest.raises(ferrite.PackError, match="no input or symbolic dimension 'z'"):
        ferrite.pack(symbolic, input_shapes={"z": (1, 4)})
    unsupported = oh.make_model(
        oh.make_graph(
            [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("NoSuchOp", ["r"], ["y"], domain="example.com")],
            "g",
            [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
            [y],
        ),
        opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("example.com", 1)],
    )
    with pytest.raises(ferrite.PackError, match="NoSuchOp"):
        ferrite.pack(unsupported)
    with pytest.raises(ferrite.PackError, match="needs calibration"):
        ferrite.pack(DIGITS, quantize="int8")
    with pytest.raises(ferrite.PackError, match="the only type is"):
        ferrite.pack(DIGITS, quantize="int4", calibration=np.zeros((1, 1, 8, 8), np.float32))
    with pytest.raises(ferrite.PackError, match="calibration needs"):
        ferrite.pack(DIGITS, calibration=np.zeros((1, 1, 8, 8), np.float32))
    with pytest.raises(ferrite.PackError, match="calibration: entry 0"):
        ferrite.pack(DIGITS, quantize="int8", calibration=np.zeros((3, 3), np.float32))
    with pytest.raises(ferrite.PackError, match="no input 'nope'"):
        ferrite.pack(DIGITS, quantize="int8", calibration={"nope": np.zeros((1, 1, 8, 8), np.float32)})


def test_constants_take_arrays_or_numbers():
    # y = x + ReduceSum(k): k frozen to an array, or (one element) to a Python number.
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])
    k = oh.make_tensor_value_info("k", onnx.TensorProto.INT64, [1])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])
    nodes = [
        oh.make_node("Cast", ["k"], ["kf"], to=onnx.TensorProto.FLOAT),
        oh.make_node("Add", ["x", "kf"], ["y"]),
    ]
    model = oh.make_model(oh.make_graph(nodes, "g", [x, k], [y]), opset_imports=[oh.make_opsetid("", 17)])
    feeds = {"x": np.array([0.0, 1.0, 2.0], np.float32)}
    by_array = ferrite.Session(model, constants={"k": np.array([5], np.int64)}).run(feeds)["y"]
    by_number = ferrite.Session(model, constants={"k": 5}).run(feeds)["y"]
    np.testing.assert_array_equal(by_array, [5.0, 6.0, 7.0])
    np.testing.assert_array_equal(by_number, by_array)
    assert [i.name for i in ferrite.Session(model, constants={"k": 5}).inputs] == ["x"]
    with pytest.raises(ferrite.PackError, match="input 'k' is int64, which cannot hold 5.5"):
        ferrite.pack(model, constants={"k": 5.5})
    with pytest.raises(ferrite.PackError, match="input 'k' is int64, the array is float32"):
        ferrite.pack(model, constants={"k": np.array([5], np.float32)})


@pytest.mark.parametrize(
    "mels,dft,rate,low,high",
    [(40, 512, 16000, 20.0, 4000.0), (10, 640, 16000, 0.0, 8000.0), (64, 1024, 22050, 125.0, 7500.0), (8, 256, 8000, 300.0, 3400.0)],
)
def test_mel_weight_matrix_matches_onnxruntime(mels, dft, rate, low, high):
    # The audio front end's filter bank, computed at pack time: equal to onnxruntime's.
    i64 = lambda name, v: oh.make_tensor(name, onnx.TensorProto.INT64, [], [v])
    f32 = lambda name, v: oh.make_tensor(name, onnx.TensorProto.FLOAT, [], [v])
    inits = [i64("m", mels), i64("d", dft), i64("r", rate), f32("lo", low), f32("hi", high)]
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [dft // 2 + 1, mels])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [dft // 2 + 1, mels])
    nodes = [oh.make_node("MelWeightMatrix", ["m", "d", "r", "lo", "hi"], ["w"]), oh.make_node("Add", ["x", "w"], ["y"])]
    model = oh.make_model(oh.make_graph(nodes, "g", [x], [y], inits), opset_imports=[oh.make_opsetid("", 17)])
    feeds = {"x": np.zeros((dft // 2 + 1, mels), np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = ferrite.Session(model).run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("size,periodic", [(1, 1), (2, 0), (400, 1), (512, 0), (640, 1)])
def test_windows_match_onnxruntime(op, size, periodic):
    n = oh.make_tensor("n", onnx.TensorProto.INT64, [], [size])
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [size])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [size])
    nodes = [oh.make_node(op, ["n"], ["w"], periodic=periodic), oh.make_node("Add", ["x", "w"], ["y"])]
    model = oh.make_model(oh.make_graph(nodes, "g", [x], [y], [n]), opset_imports=[oh.make_opsetid("", 17)])
    feeds = {"x": np.zeros(size, np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = ferrite.Session(model).run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_usage_page_example_runs(capsys):
    text = (ROOT / "docs" / "usage.md").read_text()
    section = text[text.index("## From Python") :]
    block = section[section.index("```python\n") + len("```python\n") :]
    block = block[: block.index("```")]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(block, "docs/usage.md", "exec"), {})
    finally:
        os.chdir(cwd)
    arena, label, median = capsys.readouterr().out.split()
    assert int(arena) == 512 and 0 <= int(label) < 10 and float(median) > 0
