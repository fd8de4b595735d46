#!/usr/bin/env python3
"""Generates Ferrite's seeded test models with onnx.helper + numpy, and their reference
outputs with onnxruntime.

    python tests/models/generate.py OUT_DIR

For each model NAME it writes NAME.onnx, NAME.input_0.npy and NAME.output_0.npy, and a
manifest.json with the input shapes to pack with. Weights are He-scaled normal draws from a fixed
seed, so activations stay in a realistic range and the files are identical run after run.

The suite covers the MLPerf Tiny shapes (MLP, DS-CNN, MobileNetV1-0.25, ResNet-8, FC
autoencoder), LSTM and GRU keyword spotters (49 frames of 10 MFCCs) and one transformer
encoder layer.

The MLP, DS-CNN and ResNet-8 are also quantized to int8 the way users do it with onnxruntime
(opset 13, `quant_pre_process`, then `quantize_static` with per-channel int8 weights and int8
activations, calibrated on 16 seeded inputs), in QDQ form (NAME_qdq.onnx) and QOperator form
(NAME_qop.onnx), with onnxruntime's outputs on the same input; quantized.json lists them with
the quantization step of each output. They are also quantized dynamically
(`quantize_dynamic`, int8 weights: DynamicQuantizeLinear, MatMulInteger, ConvInteger) as NAME_dyn.onnx.
Those 16 inputs are also written for every model as
calibration/NAME/samples.npy, for Ferrite's own quantizer (`ferrite pack --quantize int8`).
"""
import json
import os
import sys

import numpy as np
import onnx
import onnx.utils
import onnx.version_converter
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process


class Builder:
    """A tiny graph builder: adds nodes and initializers with unique names."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = 0

    def fresh(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, array, prefix="w"):
        name = self.fresh(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, n_out=1, **attrs):
        outs = [self.fresh(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.fresh(op), **attrs))
        return outs[0] if n_out == 1 else outs

    def weight(self, shape, fan_in):
        return self.const((self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32))

    def conv(self, x, cin, cout, k, stride=1, pads=None, group=1, bias=True):
        kh, kw = (k, k) if isinstance(k, int) else k
        w = self.weight((cout, cin // group, kh, kw), cin // group * kh * kw)
        inputs = [x, w]
        if bias:
            inputs.append(self.const((self.rng.standard_normal(cout) * 0.1).astype(np.float32), "b"))
        if pads is None:
            pads = [kh // 2, kw // 2, kh // 2, kw // 2]
        return self.node("Conv", inputs, kernel_shape=[kh, kw], strides=[stride, stride], pads=pads, group=group)

    def bn(self, x, c):
        scale = self.const((1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32), "gamma")
        bias = self.const((0.1 * self.rng.standard_normal(c)).astype(np.float32), "beta")
        mean = self.const((0.1 * self.rng.standard_normal(c)).astype(np.float32), "mean")
        var = self.const((0.5 + self.rng.random(c)).astype(np.float32), "var")
        return self.node("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-3)

    def relu6(self, x):
        return self.node("Clip", [x, self.const(np.float32(0.0), "min"), self.const(np.float32(6.0), "max")])

    def dense(self, x, n_in, n_out, trans_b=True):
        if trans_b:
            w = self.weight((n_out, n_in), n_in)
        else:
            w = self.weight((n_in, n_out), n_in)
        b = self.const((self.rng.standard_normal(n_out) * 0.1).astype(np.float32), "b")
        return self.node("Gemm", [x, w, b], transB=1 if trans_b else 0)

    def model(self, x_name, x_shape, y, y_shape, opset):
        graph = helper.make_graph(
            self.nodes,
            self.name,
            [helper.make_tensor_value_info(x_name, TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, y_shape)],
            self.inits,
        )
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="ferrite-tests")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def mlp():
    b = Builder("mlp", 1)
    h = b.node("Relu", [b.dense("input", 784, 128)])
    w = b.weight((128, 64), 128)
    h = b.node("Add", [b.node("MatMul", [h, w]), b.const((b.rng.standard_normal(64) * 0.1).astype(np.float32), "b")])
    h = b.node("Relu", [h])
    y = b.node("Softmax", [b.dense(h, 64, 10)], axis=1)
    return b.model("input", [1, 784], y, [1, 10], 11), {"input": [1, 784]}


def ds_cnn():
    b = Builder("ds_cnn", 2)
    h = b.node("Relu", [b.bn(b.conv("input", 1, 64, (10, 4), stride=2, pads=[4, 1, 5, 1], bias=False), 64)])
    for _ in range(4):
        h = b.node("Relu", [b.bn(b.conv(h, 64, 64, 3, group=64, bias=False), 64)])
        h = b.node("Relu", [b.bn(b.conv(h, 64, 64, 1, pads=[0, 0, 0, 0], bias=False), 64)])
    h = b.node("AveragePool", [h], kernel_shape=[25, 5])
    # PyTorch-style flatten: Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
    batch = b.node("Gather", [b.node("Shape", [h]), b.const(np.array(0, dtype=np.int64), "i")], axis=0)
    target = b.node("Concat", [b.node("Unsqueeze", [batch, b.const(np.array([0], dtype=np.int64), "axes")]),
                               b.const(np.array([-1], dtype=np.int64), "minus1")], axis=0)
    h = b.node("Reshape", [h, target])
    y = b.dense(h, 64, 12)
    return b.model("input", [1, 1, 49, 10], y, [1, 12], 13), {"input": [1, 1, 49, 10]}


def mobilenet_v1():
    b = Builder("mobilenet_v1_025", 3)
    h = b.relu6(b.bn(b.conv("input", 3, 8, 3, stride=2, pads=[0, 0, 1, 1], bias=False), 8))
    c = 8
    for out, stride in [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1), (128, 1),
                        (128, 1), (128, 1), (256, 2), (256, 1)]:
        pads = [1, 1, 1, 1] if stride == 1 else [0, 0, 1, 1]
        h = b.relu6(b.bn(b.conv(h, c, c, 3, stride=stride, pads=pads, group=c, bias=False), c))
        h = b.relu6(b.bn(b.conv(h, c, out, 1, pads=[0, 0, 0, 0], bias=False), out))
        c = out
    h = b.node("Flatten", [b.node("GlobalAveragePool", [h])])
    y = b.dense(h, 256, 2)
    return b.model("input", ["N", 3, 96, 96], y, ["N", 2], 13), {"input": [1, 3, 96, 96]}


def resnet8():
    b = Builder("resnet8", 4)
    h = b.node("Relu", [b.bn(b.conv("input", 3, 16, 3), 16)])
    c = 16
    for out, stride in [(16, 1), (32, 2), (64, 2)]:
        y = b.node("Relu", [b.bn(b.conv(h, c, out, 3, stride=stride, pads=[1, 1, 1, 1]), out)])
        y = b.bn(b.conv(y, out, out, 3), out)
        short = h if (stride == 1 and c == out) else b.conv(h, c, out, 1, stride=stride, pads=[0, 0, 0, 0])
        h = b.node("Relu", [b.node("Add", [y, short])])
        c = out
    h = b.node("Flatten", [b.node("AveragePool", [h], kernel_shape=[8, 8])])
    y = b.dense(h, 64, 10)
    return b.model("input", [1, 3, 32, 32], y, [1, 10], 17), {"input": [1, 3, 32, 32]}


def fc_autoencoder():
    b = Builder("fc_autoencoder", 5)
    h, n = "input", 640
    for width in [128, 128, 128, 128, 8, 128, 128, 128, 128]:
        h = b.node("Relu", [b.bn(b.dense(h, n, width), width)])
        n = width
    y = b.dense(h, n, 640)
    return b.model("input", [1, 640], y, [1, 640], 12), {"input": [1, 640]}


def kws_lstm():
    """A keyword spotter as PyTorch exports a batch-first LSTM: Transpose to sequence-first,
    LSTM (64 units) over 49 MFCC frames of 10 features, the final hidden state to 12 logits."""
    b = Builder("kws_lstm", 6)
    hidden = 64
    x = b.node("Transpose", ["input"], perm=[1, 0, 2])
    w = b.weight((1, 4 * hidden, 10), 10)
    r = b.weight((1, 4 * hidden, hidden), hidden)
    bias = b.const((0.1 * b.rng.standard_normal((1, 8 * hidden))).astype(np.float32), "b")
    _, h, _ = b.node("LSTM", [x, w, r, bias], n_out=3, hidden_size=hidden)
    h = b.node("Reshape", [h, b.const(np.array([1, hidden], dtype=np.int64), "shape")])
    y = b.dense(h, hidden, 12)
    return b.model("input", [1, 49, 10], y, [1, 12], 14), {"input": [1, 49, 10]}


def kws_gru():
    """A keyword spotter with a bidirectional GRU (PyTorch's linear_before_reset), averaged over
    time, to 12 logits. (onnxruntime has no batch-first layout=1; the node tests cover it.)"""
    b = Builder("kws_gru", 7)
    hidden = 32
    x = b.node("Transpose", ["input"], perm=[1, 0, 2])
    w = b.weight((2, 3 * hidden, 10), 10)
    r = b.weight((2, 3 * hidden, hidden), hidden)
    bias = b.const((0.1 * b.rng.standard_normal((2, 6 * hidden))).astype(np.float32), "b")
    y, _ = b.node("GRU", [x, w, r, bias], n_out=2, hidden_size=hidden, direction="bidirectional",
                  linear_before_reset=1)
    # Y is [seq, directions, batch, hidden]: average over time, then both directions' features.
    h = b.node("ReduceMean", [y], axes=[0], keepdims=0)
    h = b.node("Transpose", [h], perm=[1, 0, 2])
    h = b.node("Reshape", [h, b.const(np.array([1, 2 * hidden], dtype=np.int64), "shape")])
    y = b.dense(h, 2 * hidden, 12)
    return b.model("input", [1, 49, 10], y, [1, 12], 14), {"input": [1, 49, 10]}


def tiny_transformer():
    """One transformer encoder layer as PyTorch exports it (opset 17): pre-LayerNorm, two-head
    self-attention through MatMul/Softmax, Gelu (the Erf form) feed-forward, residuals."""
    b = Builder("tiny_transformer", 8)
    tokens, d, heads = 16, 32, 2
    hd = d // heads

    def linear(x, n_in, n_out):
        w = b.weight((n_in, n_out), n_in)
        bias = b.const((0.1 * b.rng.standard_normal(n_out)).astype(np.float32), "b")
        return b.node("Add", [b.node("MatMul", [x, w]), bias])

    def layer_norm(x):
        gamma = b.const((1.0 + 0.1 * b.rng.standard_normal(d)).astype(np.float32), "gamma")
        beta = b.const((0.1 * b.rng.standard_normal(d)).astype(np.float32), "beta")
        return b.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)

    def split_heads(x):
        x = b.node("Reshape", [x, b.const(np.array([1, tokens, heads, hd], dtype=np.int64), "shape")])
        return b.node("Transpose", [x], perm=[0, 2, 1, 3])

    h = layer_norm("input")
    q, k, v = (split_heads(linear(h, d, d)) for _ in range(3))
    scores = b.node("MatMul", [q, b.node("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = b.node("Div", [scores, b.const(np.float32(np.sqrt(hd)), "scale")])
    attn = b.node("MatMul", [b.node("Softmax", [scores], axis=-1), v])
    attn = b.node("Transpose", [attn], perm=[0, 2, 1, 3])
    attn = b.node("Reshape", [attn, b.const(np.array([1, tokens, d], dtype=np.int64), "shape")])
    x = b.node("Add", ["input", linear(attn, d, d)])
    h = linear(layer_norm(x), d, 2 * d)
    erf = b.node("Erf", [b.node("Div", [h, b.const(np.float32(np.sqrt(2.0)), "sqrt2")])])
    gelu = b.node("Mul", [b.node("Mul", [h, b.const(np.float32(0.5), "half")]),
                          b.node("Add", [erf, b.const(np.float32(1.0), "one")])])
    y = b.node("Add", [x, linear(gelu, 2 * d, d)])
    return b.model("input", [1, tokens, d], y, [1, tokens, d], 17), {"input": [1, tokens, d]}


def kws_frontend():
    """A keyword spotter's whole pipeline in one graph (opset 17): 1 s of 16 kHz audio ->
    STFT (512-point frames every 320 samples, Hann window) -> power -> 10 mel bins
    (MelWeightMatrix, 20 Hz - 4 kHz) -> log -> a small DS-CNN over the 49 x 10 features."""
    b = Builder("kws_frontend", 9)
    i64 = lambda v, prefix: b.const(np.array(v, dtype=np.int64), prefix)
    f32 = lambda v, prefix: b.const(np.array(v, dtype=np.float32), prefix)
    signal = b.node("Reshape", ["input", i64([1, 16000, 1], "shape")])
    window = b.node("HannWindow", [i64(512, "size")])
    spectrum = b.node("STFT", [signal, i64(320, "step"), window, i64(512, "length")])
    power = b.node("ReduceSum", [b.node("Mul", [spectrum, spectrum]), i64([3], "axes")], keepdims=0)
    mel = b.node("MelWeightMatrix", [i64(10, "mels"), i64(512, "dft"), i64(16000, "rate"), f32(20.0, "lo"), f32(4000.0, "hi")])
    features = b.node("Log", [b.node("Add", [b.node("MatMul", [power, mel]), f32(1e-6, "floor")])])
    h = b.node("Reshape", [features, i64([1, 1, 49, 10], "image")])
    h = b.node("Relu", [b.bn(b.conv(h, 1, 16, (10, 4), stride=2, pads=[4, 1, 5, 1], bias=False), 16)])
    h = b.node("Relu", [b.bn(b.conv(h, 16, 16, 3, group=16, bias=False), 16)])
    h = b.node("Relu", [b.bn(b.conv(h, 16, 16, 1, pads=[0, 0, 0, 0], bias=False), 16)])
    h = b.node("Flatten", [b.node("GlobalAveragePool", [h])])
    y = b.dense(h, 16, 12)
    return b.model("input", [1, 16000], y, [1, 12], 17), {"input": [1, 16000]}


MODELS = [mlp, ds_cnn, mobilenet_v1, resnet8, fc_autoencoder, kws_lstm, kws_gru, tiny_transformer, kws_frontend]
QUANTIZED = ["mlp", "ds_cnn", "resnet8"]


def calibration_samples(shape):
    """16 seeded standard-normal inputs, like the test input's distribution."""
    rng = np.random.default_rng(7)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(16)]


class Calibration(CalibrationDataReader):
    """onnxruntime's view of `calibration_samples`."""

    def __init__(self, shape):
        self.batches = iter([{"input": x} for x in calibration_samples(shape)])

    def get_next(self):
        return next(self.batches, None)


def session(path, definitional=False):
    """A one-thread onnxruntime session; `definitional`: no graph optimizations, so a QDQ model
    runs as its definition (DequantizeLinear, the float op, QuantizeLinear) and not through
    onnxruntime's fused int8 kernels, whose rounding differs from one CPU to another."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    if definitional:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def run(path, x, definitional=False):
    return session(path, definitional).run(None, {"input": x})[0]


def output_step(model):
    """The scale of the DequantizeLinear that produces (or feeds the op producing) the output."""
    producer = {o: n for n in model.graph.node for o in n.output}
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    node = producer[model.graph.output[0].name]
    while node.op_type != "DequantizeLinear":
        node = producer[node.input[0]]
    return float(inits[node.input[1]])


def quantize(out, name, shape):
    """Writes NAME_qdq.onnx and NAME_qop.onnx and their onnxruntime outputs; returns manifest rows."""
    source = onnx.load(os.path.join(out, f"{name}.onnx"))
    if source.opset_import[0].version < 13:
        source = onnx.version_converter.convert_version(source, 13)
    tmp = os.path.join(out, f"{name}.opset13.onnx")
    onnx.save(source, tmp)
    pre = os.path.join(out, f"{name}.pre.onnx")
    quant_pre_process(tmp, pre, skip_symbolic_shape=True)
    x = np.load(os.path.join(out, f"{name}.input_0.npy"))
    rows = {}
    for form, tag in [(QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qop")]:
        qname = f"{name}_{tag}"
        path = os.path.join(out, f"{qname}.onnx")
        quantize_static(pre, path, Calibration(shape), quant_format=form, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
        np.save(os.path.join(out, f"{qname}.input_0.npy"), x)
        # The reference of both forms is the QDQ model's definitional run: the QOperator nodes
        # (QLinearConv, ...) are defined as the QDQ nodes they stand for, with the same
        # quantization parameters (one calibration), and onnxruntime runs them with its own
        # CPU-dependent integer kernels.
        qdq = os.path.join(out, f"{name}_qdq.onnx")
        np.save(os.path.join(out, f"{qname}.output_0.npy"), run(qdq, x, definitional=True))
        bracket(onnx.load(qdq), {"input": x}, os.path.join(out, f"{qname}.output_0"))
        rows[qname] = {"input_shapes": {"input": shape}, "float_model": name, "form": tag,
                       "output_step": output_step(onnx.load(path))}
        print(f"{qname}: {os.path.getsize(path)} bytes")
    # 16-bit activations with int8 weights (TFLite's 16 x 8 scheme; onnxruntime's quantizer moves
    # the model to opset 21 for int16 QuantizeLinear), referenced by its own definitional run.
    qname = f"{name}_qdq16"
    path = os.path.join(out, f"{qname}.onnx")
    quantize_static(pre, path, Calibration(shape), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt16, weight_type=QuantType.QInt8)
    np.save(os.path.join(out, f"{qname}.input_0.npy"), x)
    np.save(os.path.join(out, f"{qname}.output_0.npy"), run(path, x, definitional=True))
    bracket(onnx.load(path), {"input": x}, os.path.join(out, f"{qname}.output_0"))
    rows[qname] = {"input_shapes": {"input": shape}, "float_model": name, "form": "qdq16",
                   "output_step": output_step(onnx.load(path))}
    print(f"{qname}: {os.path.getsize(path)} bytes")
    # Dynamic quantization: activations quantized at run time from their own range; the output
    # stays float (no output step: the bound is relative to the output's range).
    qname = f"{name}_dyn"
    path = os.path.join(out, f"{qname}.onnx")
    quantize_dynamic(pre, path, weight_type=QuantType.QInt8)
    np.save(os.path.join(out, f"{qname}.input_0.npy"), x)
    np.save(os.path.join(out, f"{qname}.output_0.npy"), run(path, x, definitional=True))
    rows[qname] = {"input_shapes": {"input": shape}, "float_model": name, "form": "dyn"}
    print(f"{qname}: {os.path.getsize(path)} bytes")
    for f in (tmp, pre):
        os.remove(f)
    return rows


# The relative change of every QuantizeLinear scale in the two bracketing runs (see `bracket`).
TIE_BRACKET = 2e-6


def with_quantize_scales(model, factor):
    """A copy of `model` whose QuantizeLinear nodes divide by their scale times `factor` (the
    DequantizeLinear nodes keep theirs)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    inits = {i.name: i for i in model.graph.initializer}
    for k, node in enumerate(model.graph.node):
        if node.op_type == "QuantizeLinear" and node.input[1] in inits:
            scale = numpy_helper.to_array(inits[node.input[1]]).astype(np.float64) * factor
            name = f"{node.input[1]}__bracket{k}"
            model.graph.initializer.append(numpy_helper.from_array(scale.astype(np.float32), name))
            node.input[1] = name
    return model


def bracket(model, feeds, prefix):
    """Writes PREFIX.lo.npy and PREFIX.hi.npy: the definitional run of `model` with every
    QuantizeLinear scale enlarged, then shrunk, by TIE_BRACKET. An exact tie (x / s = n + 1/2,
    frequent with power-of-two or equal scales) is broken by onnxruntime's float32 arithmetic
    either way, where Ferrite's integers round it to even; the two runs give both outcomes of
    every such tie, and the tests accept an element equal to either (or to the plain run)."""
    for factor, tag in [(1 + TIE_BRACKET, "lo"), (1 - TIE_BRACKET, "hi")]:
        perturbed = with_quantize_scales(model, factor)
        sess = ort.InferenceSession(perturbed.SerializeToString(), _definitional_options(),
                                    providers=["CPUExecutionProvider"])
        np.save(f"{prefix}.{tag}.npy", sess.run(None, feeds)[0])


MLPERF_TINY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlperf_tiny")


def fixed_batch(model):
    """`model` with its inputs' symbolic batch dimension set to 1 and shapes inferred."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].Clear()
            dims[0].dim_value = 1
    return onnx.shape_inference.infer_shapes(model)


def input_samples(value, count, seed):
    """`count` int8 inputs for an int8 model input: half uniform over the whole range, half
    smooth (a blurred random field at a realistic amplitude, as features and images are)."""
    shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)
    samples = []
    for k in range(count):
        if k % 2 == 0:
            x = rng.integers(-128, 128, size=shape)
        else:
            field = rng.standard_normal(shape)
            for axis in range(1, len(shape)):
                if shape[axis] > 2:
                    field = (np.roll(field, 1, axis) + 2 * field + np.roll(field, -1, axis)) / 4
            x = np.round(field / field.std() * 40 + rng.integers(-30, 30))
        samples.append(np.clip(x, -128, 127).astype(np.int8))
    return samples


def quantize_cuts(model):
    """For each QuantizeLinear Q of `model` (shapes fixed): the tensors the integer op ending in
    Q reads — the nearest QuantizeLinear outputs or graph inputs upstream — and Q's output."""
    producer = {o: n for n in model.graph.node for o in n.output}
    inits = {i.name for i in model.graph.initializer}
    graph_inputs = {i.name for i in model.graph.input}
    cuts = []
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] in graph_inputs:
            continue
        inputs, stack, seen = [], [node.input[0]], set()
        while stack:
            t = stack.pop()
            if t in seen or t in inits or not t:
                continue
            seen.add(t)
            if t in graph_inputs or producer[t].op_type == "QuantizeLinear":
                inputs.append(t)
            else:
                stack.extend(producer[t].input)
        cuts.append((sorted(inputs), node.output[0]))
    return cuts


def definitional_values(model, feeds, names):
    """The values of tensors `names` in onnxruntime's definitional run of `model`."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    typed = {v.name: v for v in list(model.graph.value_info) + list(model.graph.input)}
    known = {o.name for o in model.graph.output}
    for name in names:
        if name not in known:
            model.graph.output.append(typed[name])
    sess = ort.InferenceSession(model.SerializeToString(), _definitional_options(),
                                providers=["CPUExecutionProvider"])
    wanted = [o.name for o in sess.get_outputs()]
    values = dict(zip(wanted, sess.run(None, feeds)))
    return {n: values[n] for n in names}


def _definitional_options():
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3  # the bracketing copies leave unused scales behind
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


def write_layer_cuts(out, name, model, feeds, rows):
    """Cuts `model` (shapes fixed) after each QuantizeLinear: one small model per integer op,
    fed the exact int8 tensors the definitional run gives it, with that run's output."""
    cuts = quantize_cuts(model)
    names = sorted({t for ins, q in cuts for t in ins + [q]})
    values = definitional_values(model, feeds, names)
    values.update(feeds)
    folder = os.path.join(out, "layers")
    os.makedirs(folder, exist_ok=True)
    for k, (inputs, q) in enumerate(cuts):
        cut = f"{name}.cut{k:02d}"
        path = os.path.join(folder, f"{cut}.onnx")
        sub = onnx.utils.Extractor(model).extract_model(inputs, [q])
        onnx.save(sub, path)
        files = []
        for i, t in enumerate(inputs):
            np.save(os.path.join(folder, f"{cut}.input_{i}.npy"), values[t])
            files.append(f"layers/{cut}.input_{i}.npy")
        np.save(os.path.join(folder, f"{cut}.output_0.npy"), values[q])
        bracket(sub, {t: values[t] for t in inputs}, os.path.join(folder, f"{cut}.output_0"))
        ops = sorted({n.op_type for n in sub.graph.node} - {"QuantizeLinear", "DequantizeLinear"})
        rows.append({"model": name, "cut": cut, "onnx": f"layers/{cut}.onnx", "inputs": files,
                     "output": f"layers/{cut}.output_0.npy", "tensor": q, "ops": ops})
    print(f"{name}: {len(cuts)} layer cuts")


def mlperf_tiny(out, rows, layer_rows):
    """The four MLPerf Tiny int8 models (tf2onnx from TFLite, int8 in and out), each with six
    inputs and their definitional onnxruntime outputs, and cut after each QuantizeLinear."""
    for file in sorted(os.listdir(MLPERF_TINY)):
        if not file.endswith(".onnx"):
            continue
        name = file[: -len(".onnx")]
        model = fixed_batch(onnx.load(os.path.join(MLPERF_TINY, file)))
        onnx.save(model, os.path.join(out, file))
        (value,) = model.graph.input
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        sess = ort.InferenceSession(os.path.join(out, file), _definitional_options(),
                                    providers=["CPUExecutionProvider"])
        samples = []
        for k, x in enumerate(input_samples(value, 8, seed=hash_seed(name))):
            (y,) = sess.run(None, {value.name: x})
            np.save(os.path.join(out, f"{name}.sample{k}.input_0.npy"), x)
            np.save(os.path.join(out, f"{name}.sample{k}.output_0.npy"), y)
            bracket(model, {value.name: x}, os.path.join(out, f"{name}.sample{k}.output_0"))
            samples.append([f"{name}.sample{k}.input_0.npy", f"{name}.sample{k}.output_0.npy"])
        rows[name] = {"input_shapes": {value.name: shape}, "form": "qdq", "output_step": 1.0,
                      "samples": samples}
        write_layer_cuts(out, name, model, {value.name: input_samples(value, 2, 5)[1]}, layer_rows)
        print(f"{name}: {os.path.getsize(os.path.join(out, file))} bytes, {len(samples)} samples")


def sklearn_models(out):
    """scikit-learn models as skl2onnx writes them (ai.onnx.ml), on the bundled data sets, each
    with its input rows and onnxruntime's outputs (labels and probabilities in label order, or
    the regression values): NAME.onnx, NAME.input_0.npy, NAME.output_{0,1}.npy, sklearn.json."""
    from skl2onnx import to_onnx
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Normalizer, StandardScaler
    from sklearn.svm import SVC

    made = {}
    specs = [
        ("sklearn_logistic_iris", make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)), load_iris),
        ("sklearn_logistic_wine", make_pipeline(Normalizer("l2"), StandardScaler(), LogisticRegression(max_iter=1000)), load_wine),
        ("sklearn_linear_diabetes", make_pipeline(StandardScaler(), LinearRegression()), load_diabetes),
        ("sklearn_forest_cancer", RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0), load_breast_cancer),
        ("sklearn_boosting_diabetes", GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0), load_diabetes),
        ("sklearn_svc_rbf_iris", make_pipeline(StandardScaler(), SVC(kernel="rbf")), load_iris),
        # skl2onnx computes the distances in a Scan over the 150 training rows.
        ("sklearn_knn_iris", make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=5)), load_iris),
    ]
    for name, model, loader in specs:
        x, y = loader(return_X_y=True)
        x = x.astype(np.float32)
        model.fit(x, y)
        onnx_model = to_onnx(model, x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
        path = os.path.join(out, f"{name}.onnx")
        onnx.save(onnx_model, path)
        rows = x[:32]
        outputs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"X": rows})
        np.save(os.path.join(out, f"{name}.input_0.npy"), rows)
        for i, value in enumerate(outputs):
            if isinstance(value, list):  # ZipMap: a list of {label: probability}
                value = np.array([[row[c] for c in model.classes_] for row in value], np.float32)
            np.save(os.path.join(out, f"{name}.output_{i}.npy"), np.asarray(value))
        made[name] = {"input_shapes": {"X": list(rows.shape)}, "outputs": len(outputs)}
        print(f"{name}: {os.path.getsize(path)} bytes, {len(outputs)} output(s)")
    with open(os.path.join(out, "sklearn.json"), "w") as f:
        json.dump(made, f, indent=1)


def hash_seed(name):
    """A seed from a name, stable across runs (Python's hash() is not)."""
    return sum((i + 1) * ord(c) for i, c in enumerate(name))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "target/test-models"
    os.makedirs(out, exist_ok=True)
    manifest = {}
    for make in MODELS:
        model, shapes = make()
        name = model.graph.name
        path = os.path.join(out, f"{name}.onnx")
        onnx.save(model, path)
        rng = np.random.default_rng(100)
        x = rng.standard_normal(shapes["input"]).astype(np.float32)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        (y,) = session.run(None, {"input": x})
        np.save(os.path.join(out, f"{name}.input_0.npy"), x)
        np.save(os.path.join(out, f"{name}.output_0.npy"), y)
        manifest[name] = {"input_shapes": {k: v for k, v in shapes.items()}}
        # The same samples as onnxruntime's quantizer sees, for `ferrite pack --quantize int8`.
        calibration = os.path.join(out, "calibration", name)
        os.makedirs(calibration, exist_ok=True)
        np.save(os.path.join(calibration, "samples.npy"), np.stack(calibration_samples(shapes["input"])))
        print(f"{name}: {os.path.getsize(path)} bytes, output {list(y.shape)}")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    quantized = {}
    layers = []
    for name in QUANTIZED:
        quantized.update(quantize(out, name, manifest[name]["input_shapes"]["input"]))
        x = np.load(os.path.join(out, f"{name}.input_0.npy"))
        for form in ["qdq", "qdq16"]:
            qdq = fixed_batch(onnx.load(os.path.join(out, f"{name}_{form}.onnx")))
            write_layer_cuts(out, f"{name}_{form}", qdq, {"input": x}, layers)
    mlperf_tiny(out, quantized, layers)
    sklearn_models(out)
    with open(os.path.join(out, "quantized.json"), "w") as f:
        json.dump(quantized, f, indent=1)
    with open(os.path.join(out, "layers.json"), "w") as f:
        json.dump(layers, f, indent=1)


if __name__ == "__main__":
    main()
