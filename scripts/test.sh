#!/usr/bin/env bash
# Every test Ferrite has, as CI runs them: formatting, lints, the no_std builds, unit and
# integration tests, the model suite against onnxruntime and the ONNX node-test harness.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$FERRITE_ROOT"
# Each stage's name, with the seconds since the start (CI must stay under 40 minutes).
stage() { echo "== $1 [${SECONDS} s]"; }

stage "module graph: no new import cycle, layer break or long function (scripts/layers.py)"
"$FERRITE_PYTHON" scripts/layers.py --self-test
"$FERRITE_PYTHON" scripts/layers.py

stage "docs/status.md's generated tables match tests/expectations (scripts/status.py)"
"$FERRITE_PYTHON" scripts/status.py --check

stage "generate the test models and their onnxruntime references"
"$FERRITE_PYTHON" tests/models/generate.py target/test-models
export FERRITE_TEST_MODELS="$FERRITE_ROOT/target/test-models"
FERRITE_NODE_TESTS="$("$FERRITE_PYTHON" -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node"))')"
export FERRITE_NODE_TESTS

stage "NVRTC and ptxas for the CUDA kernel checks (PyPI wheels)"
source scripts/cuda-tools.sh
export FERRITE_REQUIRE_NVRTC="${FERRITE_REQUIRE_NVRTC:-1}"

stage "build the Cortex-M firmware, the QEMU instruction-count plugin and the real-board crate"
bash scripts/build-firmware.sh
(cd boards/nrf52840-dk && cargo build --release -q)
stage "link-time proof: no panic path in Model::load, nor in a run of the digits MLP's kernels"
bash scripts/panic-free.sh
stage "cargo fmt --check"
cargo fmt --all --check
(cd boards && cargo fmt --all --check)
stage "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -q -- -D warnings
for board in qemu-mps2-an386 qemu-mps2-an500 qemu-mps2-an505 qemu-microbit nrf52840-dk panic-free; do
    (cd "boards/$board" && cargo clippy --release -q -- -D warnings)
done
# The per-model template, around the digits model (what a user's `model/` folder holds).
cargo build -q -p ferrite-tools --bin ferrite
target/debug/ferrite pack demo/digits.onnx -o boards/template/model/model.frt --emit rust >/dev/null
(cd boards/template && cargo clippy --release -q -- -D warnings)
stage "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace -q
stage "no_std checks (core + cpu + cortex-m) for Cortex-M0, M4F/M7 and M33, each feature set"
# Type checks: the firmware above already compiled and linked these crates for each core.
for target in thumbv6m-none-eabi thumbv7em-none-eabihf thumbv8m.main-none-eabihf; do
    cargo check -q -p ferrite-core -p ferrite-cpu -p ferrite-cortex-m --target "$target"
done
# The optional features in one build (the nRF52840 firmware above links them all, with
# error-context). The M33 with its DSP extension (and the DSP kernels it selects) is the
# mps2-an505 firmware's target-cpu and the C library's below.
cargo check -q -p ferrite-core -p ferrite-cortex-m --features ferrite-core/defmt,ferrite-cortex-m/defmt,ferrite-cortex-m/dwt --target thumbv7em-none-eabihf
cargo check -q -p ferrite-cpu --features fast-math --target thumbv7em-none-eabihf
# Float-only builds (no integer kernels), as the micro:bit firmware links them.
cargo check -q -p ferrite-cpu -p ferrite-cortex-m --no-default-features --target thumbv6m-none-eabi
stage "the C static library (ferrite-c) for Cortex-M0, M4F/M7 and M33 with DSP (the host one: cargo test)"
for target in thumbv6m-none-eabi thumbv7em-none-eabihf; do
    cargo build -q --release -p ferrite-c --no-default-features --features cortex-m --target "$target"
done
RUSTFLAGS="-C target-cpu=cortex-m33" cargo build -q --release -p ferrite-c --no-default-features \
    --features cortex-m --target thumbv8m.main-none-eabihf --target-dir target/m33-c
cargo clippy -q -p ferrite-c --no-default-features --features cortex-m --target thumbv7em-none-eabihf -- -D warnings
stage "aarch64 (Jetson) cross-build of the host parts, run under qemu-user, and the CPU kernels' unit tests there (NEON and portable)"
bash scripts/cross-aarch64.sh
stage "the Python package: the abi3 wheel and its pytest suite against onnxruntime; pip install . in a fresh venv"
bash scripts/python-check.sh
stage "tests"
# Lavapipe and QEMU are installed by setup.sh: a missing device is a failure here, not a skip.
export FERRITE_REQUIRE_VULKAN="${FERRITE_REQUIRE_VULKAN:-1}"
export FERRITE_REQUIRE_QEMU_M4="${FERRITE_REQUIRE_QEMU_M4:-1}"
LOG="$(mktemp)"
{ cargo test --workspace && cargo test -p ferrite-cpu --features std,fast-math \
    && cargo test -p ferrite-cpu --no-default-features --lib \
    && cargo test -p ferrite-core --no-default-features --lib; } 2>&1 | tee "$LOG"
# Tests whose device is missing pass after printing `SKIPPED:`; they count as skipped, not passed.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) g += $i } }
     /SKIPPED: / { s += 1; print }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p - s, f, g + s }' "$LOG"
rm -f "$LOG"
stage "the AVX2-host benchmark shim hides AVX-512 from numpy and Ferrite (where the CPU has CPUID faulting)"
bash scripts/avx2-host-check.sh target/debug/ferrite
stage "footprint gate: each model's own firmware within 3 % of tests/expectations/footprint.txt"
"$FERRITE_PYTHON" scripts/footprint_gate.py target/debug/ferrite
stage "done"
