#!/usr/bin/env python3
"""Trains Ferrite's demo model: a small MLP classifier on scikit-learn's bundled digits data set
(8x8 grey images, offline), exported to ONNX by hand with onnx.helper, the way PyTorch would write
it (Flatten, Gemm with transposed weights, Relu, Softmax).

    python demo/train_digits.py            # rewrites demo/digits.onnx and the held-out split

Outputs (committed): demo/digits.onnx, demo/digits_test_x.npy (float32, N x 1 x 8 x 8, scaled to
[0, 1]) and demo/digits_test_y.npy (int64 labels). The split is seeded, so reruns are identical.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    clf = MLPClassifier(hidden_layer_sizes=(64, 32), max_iter=600, random_state=0)
    clf.fit(x_train, y_train)
    print(f"scikit-learn accuracy on the held-out split: {clf.score(x_test, y_test):.4f}")

    nodes = [helper.make_node("Flatten", ["image"], ["flat"], name="flatten", axis=1)]
    inits = []
    h = "flat"
    for i, (w, b) in enumerate(zip(clf.coefs_, clf.intercepts_)):
        inits.append(numpy_helper.from_array(w.T.astype(np.float32), f"fc{i}.weight"))
        inits.append(numpy_helper.from_array(b.astype(np.float32), f"fc{i}.bias"))
        out = f"fc{i}"
        nodes.append(helper.make_node("Gemm", [h, f"fc{i}.weight", f"fc{i}.bias"], [out], name=f"fc{i}", transB=1))
        h = out
        if i < len(clf.coefs_) - 1:
            nodes.append(helper.make_node("Relu", [h], [f"relu{i}"], name=f"relu{i}"))
            h = f"relu{i}"
    nodes.append(helper.make_node("Softmax", [h], ["probabilities"], name="softmax", axis=-1))
    graph = helper.make_graph(
        nodes,
        "digits_mlp",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="ferrite-demo")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, "digits.onnx"))
    np.save(os.path.join(HERE, "digits_test_x.npy"), x_test.reshape(-1, 1, 8, 8))
    np.save(os.path.join(HERE, "digits_test_y.npy"), y_test)
    print(f"wrote digits.onnx and a held-out split of {len(y_test)} images")


if __name__ == "__main__":
    main()
