#!/usr/bin/env python3
"""onnxruntime's side of the digits demo: classifies every held-out image one at a time (one
thread, like Ferrite's run), saves the predicted labels, and prints accuracy and median latency.

    python demo/ort_reference.py MODEL.onnx TEST_X.npy TEST_Y.npy OUT_PREDICTIONS.npy
"""
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    model, x_path, y_path, out = sys.argv[1:5]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    x = np.load(x_path)
    y = np.load(y_path)
    predictions = []
    times = []
    for image in x:
        feed = {name: image[None]}
        start = time.perf_counter()
        (probabilities,) = session.run(None, feed)
        times.append(time.perf_counter() - start)
        predictions.append(int(np.argmax(probabilities)))
    predictions = np.array(predictions, dtype=np.int64)
    np.save(out, predictions)
    accuracy = float(np.mean(predictions == y))
    print(f"onnxruntime {ort.__version__}: accuracy {accuracy:.4f} ({int(np.sum(predictions == y))}/{len(y)}), "
          f"median {np.median(times) * 1e6:.1f} us per image")


if __name__ == "__main__":
    main()
