#!/usr/bin/env bash
# Ferrite's demo: pack the bundled digits classifier (trained on scikit-learn's digits, see
# demo/train_digits.py), classify every held-out image on the host CPU, on the first Vulkan
# device (lavapipe when there is no GPU) and with the real Cortex-M4F firmware on QEMU, and
# compare accuracy and latency (instructions on the microcontroller) with onnxruntime.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$FERRITE_ROOT"
OUT=target/demo
mkdir -p "$OUT"
cargo build --release -q -p ferrite-tools --bin ferrite --example digits
bash scripts/build-firmware.sh >/dev/null
echo "== ferrite pack"
target/release/ferrite pack demo/digits.onnx -o "$OUT/digits.frt"
echo "== classify the $("$FERRITE_PYTHON" -c 'import numpy; print(len(numpy.load("demo/digits_test_y.npy")))') held-out images"
"$FERRITE_PYTHON" demo/ort_reference.py demo/digits.onnx demo/digits_test_x.npy demo/digits_test_y.npy "$OUT/ort_predictions.npy"
target/release/examples/digits "$OUT/digits.frt" demo/digits_test_x.npy demo/digits_test_y.npy "$OUT/ort_predictions.npy"
echo "== the same .frt on the Vulkan device"
if target/release/ferrite devices | grep '^vulkan:0' >/dev/null; then
    target/release/examples/digits "$OUT/digits.frt" demo/digits_test_x.npy demo/digits_test_y.npy "$OUT/ort_predictions.npy" vulkan
else
    echo "SKIPPED: no Vulkan device ($(target/release/ferrite devices | grep '^vulkan'))"
fi
echo "== the same .frt in the Cortex-M4F firmware on QEMU (mps2-an386)"
target/release/examples/digits "$OUT/digits.frt" demo/digits_test_x.npy demo/digits_test_y.npy "$OUT/ort_predictions.npy" qemu-m4
target/release/ferrite bench "$OUT/digits.frt" --device qemu-m4
