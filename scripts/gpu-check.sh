#!/usr/bin/env bash
# The CUDA device's checks that need an NVIDIA GPU (issue 7, item 5), as one script:
#   1. the conformance suites on the GPU — the generated test models against onnxruntime's
#      outputs, the ONNX node tests against tests/expectations/cuda-node.txt (the host
#      emulator's results: a GPU must pass exactly those), bad gather indices, a timeout and the
#      run after it (tests/tests/cuda.rs with FERRITE_REQUIRE_CUDA=1, so a missing GPU fails);
#   2. a latency table of the test models, Ferrite's CUDA device against onnxruntime-gpu's CUDA
#      execution provider, interleaved in one run (benches/side_by_side.py).
# Results go to target/gpu-check/{conformance.log,latency.txt}.
# Usage: bash scripts/gpu-check.sh   (needs the NVIDIA driver; installs onnxruntime-gpu in .venv)
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$FERRITE_ROOT"
source scripts/cuda-tools.sh
OUT="$FERRITE_ROOT/target/gpu-check"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt" || true

echo "== test models and references"
"$FERRITE_PYTHON" tests/models/generate.py target/test-models >/dev/null
export FERRITE_TEST_MODELS="$FERRITE_ROOT/target/test-models"
FERRITE_NODE_TESTS="$("$FERRITE_PYTHON" -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node"))')"
export FERRITE_NODE_TESTS

echo "== 1. conformance on the GPU"
export FERRITE_REQUIRE_CUDA=1
cargo test --release -p ferrite-tests --test cuda -- --nocapture --test-threads 1 2>&1 | tee "$OUT/conformance.log"

echo "== 2. latency: ferrite cuda vs onnxruntime-gpu (CUDA EP)"
if ! "$FERRITE_PYTHON" -c 'import onnxruntime as o, sys; sys.exit("CUDAExecutionProvider" not in o.get_available_providers())' 2>/dev/null; then
    # onnxruntime-gpu replaces the CPU wheel (both are the module `onnxruntime`); its CUDA and
    # cuDNN libraries come as wheels too (the extras), loaded by onnxruntime.preload_dlls().
    "$FERRITE_PYTHON" -m pip uninstall --quiet -y onnxruntime
    "$FERRITE_PYTHON" -m pip install --quiet "onnxruntime-gpu[cuda,cudnn]"
fi
cargo build --release -q -p ferrite-tools
"$FERRITE_PYTHON" benches/side_by_side.py --device cuda --provider cuda | tee "$OUT/latency.txt"
