#!/usr/bin/env python3
"""Ferrite vs onnxruntime (one thread), side by side in one run.

For each generated test model (and the int8 QDQ ones), alternates rounds of `ferrite bench --json` and onnxruntime runs
(so both see the same machine noise) and prints the medians and their ratio. Speed is only ever
measured here, never asserted in tests.

    python benches/side_by_side.py [--models target/test-models] [--rounds 5] [--runs 200]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort


def ort_median_us(session, feed, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="target/test-models")
    parser.add_argument("--ferrite", default="target/release/ferrite")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    manifest = json.load(open(os.path.join(args.models, "manifest.json")))
    # The int8 models quantized by onnxruntime (QDQ form): onnxruntime runs them with its int8
    # kernels, Ferrite with its integer ops.
    quantized = json.load(open(os.path.join(args.models, "quantized.json")))
    manifest.update({name: entry for name, entry in quantized.items() if entry["form"] == "qdq"})
    os.makedirs("target/bench", exist_ok=True)
    print(f"onnxruntime {ort.__version__}, 1 thread; ferrite CPU device; median of {args.rounds} rounds x {args.runs} runs")
    print(f"{'model':<18} {'ferrite us':>11} {'onnxruntime us':>15} {'ratio (ort/ferrite)':>20}")
    rows = []
    for name, entry in sorted(manifest.items()):
        onnx_path = os.path.join(args.models, f"{name}.onnx")
        frt = os.path.join("target/bench", f"{name}.frt")
        shape_args = []
        for input_name, dims in entry["input_shapes"].items():
            shape_args += ["--input-shape", f"{input_name}={'x'.join(map(str, dims))}"]
        subprocess.run([args.ferrite, "pack", onnx_path, "-o", frt, *shape_args], check=True, capture_output=True)
        x = np.load(os.path.join(args.models, f"{name}.input_0.npy"))
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
        feed = {session.get_inputs()[0].name: x}
        # Warm up for at least 100 ms, as `ferrite bench` does.
        warm = time.perf_counter()
        while time.perf_counter() - warm < 0.1:
            session.run(None, feed)
        ferrite_rounds, ort_rounds = [], []
        for _ in range(args.rounds):
            out = subprocess.run([args.ferrite, "bench", frt, "--runs", str(args.runs), "--json",
                                  "--input", os.path.join(args.models, f"{name}.input_0.npy")],
                                 check=True, capture_output=True, text=True)
            ferrite_rounds.append(json.loads(out.stdout)["median_us"])
            ort_rounds.append(ort_median_us(session, feed, args.runs))
        f, o = float(np.median(ferrite_rounds)), float(np.median(ort_rounds))
        rows.append((name, f, o))
        print(f"{name:<18} {f:>11.1f} {o:>15.1f} {o / f:>20.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
