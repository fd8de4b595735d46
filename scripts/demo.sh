#!/usr/bin/env bash
# Ferrite's demo: pack the bundled digits classifier (trained on scikit-learn's digits, see
# demo/train_digits.py), classify every held-out image on the host CPU and on the first Vulkan
# device (lavapipe when there is no GPU), and compare accuracy and latency with onnxruntime.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$FERRITE_ROOT"
OUT=target/demo
mkdir -p "$OUT"
cargo build --release -q -p ferrite-tools --bin ferrite --example digits
echo "== ferrite pack"
target/release/ferrite pack demo/digits.onnx -o "$OUT/digits.frt"
echo "== classify the $("$FERRITE_PYTHON" -c 'import numpy; print(len(numpy.load("demo/digits_test_y.npy")))') held-out images"
"$FERRITE_PYTHON" demo/ort_reference.py demo/digits.onnx demo/digits_test_x.npy demo/digits_test_y.npy "$OUT/ort_predictions.npy"
target/release/examples/digits "$OUT/digits.frt" demo/digits_test_x.npy demo/digits_test_y.npy "$OUT/ort_predictions.npy"
echo "== the same .frt on the Vulkan device"
if target/release/ferrite devices | grep -q '^vulkan:0'; then
    target/release/examples/digits "$OUT/digits.frt" demo/digits_test_x.npy demo/digits_test_y.npy "$OUT/ort_predictions.npy" vulkan
else
    echo "SKIPPED: no Vulkan device ($(target/release/ferrite devices | grep '^vulkan'))"
fi
