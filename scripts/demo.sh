#!/usr/bin/env bash
# Ferrite's demo: pack the bundled digits classifier (trained on scikit-learn's digits, see
# demo/train_digits.py), classify every held-out image on the host CPU, on the first Vulkan
# device (lavapipe when there is no GPU) and with the real Cortex-M4F firmware on QEMU, and
# compare accuracy and latency (instructions on the microcontroller) with onnxruntime; then
# quantize it to int8 with `ferrite pack --quantize int8` and show both side by side.
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
echo "== ferrite pack --quantize int8, calibrated on 200 training images (none of the held-out ones)"
"$FERRITE_PYTHON" demo/calibration_set.py "$OUT/calibration" 200
target/release/ferrite pack demo/digits.onnx -o "$OUT/digits_int8.frt" --quantize int8 --calibration "$OUT/calibration"
echo "== the int8 model on the CPU and in the Cortex-M4F firmware (float model above)"
target/release/examples/digits "$OUT/digits_int8.frt" demo/digits_test_x.npy demo/digits_test_y.npy "$OUT/ort_predictions.npy"
target/release/examples/digits "$OUT/digits_int8.frt" demo/digits_test_x.npy demo/digits_test_y.npy "$OUT/ort_predictions.npy" qemu-m4
target/release/ferrite bench "$OUT/digits_int8.frt" --device qemu-m4
