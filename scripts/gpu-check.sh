#!/usr/bin/env bash
# The GPU devices' checks that need a real GPU (issue 7, item 5), as one script:
#   1. the CUDA conformance suites on the GPU — the generated test models against onnxruntime's
#      outputs, the ONNX node tests against tests/expectations/cuda-node.txt (the host emulator's
#      results: a GPU must pass exactly those), bad gather indices, a timeout and the run after it
#      (tests/tests/cuda.rs with FERRITE_REQUIRE_CUDA=1, so a missing GPU fails);
#   2. a latency table of the test models, Ferrite's CUDA device against onnxruntime
#      (benches/side_by_side.py): against onnxruntime-gpu's CUDA execution provider where it can
#      be installed, else against onnxruntime's CPU provider on every core;
#   3. with --from: the Vulkan suites on the same GPU (tests/tests/vulkan.rs, the validation
#      layer included) and its latency table, and the CPU side by side (one thread each) on that
#      machine's processor — and, where it has AVX-512 and CPUID faulting, again as an AVX2-only
#      host (`side_by_side.py --avx2-host`, both sides' AVX-512 hidden: issue 21's two tables).
# Results go to $GPU_CHECK_OUT (default target/gpu-check).
#
# Usage:
#   bash scripts/gpu-check.sh               # a machine with the NVIDIA driver, Rust and a network
#   bash scripts/gpu-check.sh --bundle DIR  # here: build the test programs and the CLI, pack the
#                                           # test data beside them (~35 MB)
#   bash scripts/gpu-check.sh --from DIR    # a GPU machine with neither Rust nor a network (the
#                                           # device tool's): python3 with numpy and onnxruntime
# --from reads DIR and the repository it runs in (tests/expectations, benches); each section's
# time limit: GPU_CHECK_LIMIT_S (default 300); which sections: GPU_CHECK_ONLY (default
# "cuda cuda-latency vulkan vulkan-latency cpu-latency cpu-avx2-host").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE="${1:-}"
BUNDLE="${2:-}"

# Copies the built program of one integration test (`cargo test --no-run`) to $2.
copy_test_program() {
    local exe
    exe="$(cargo test --release -q -p ferrite-tests --test "$1" --no-run --message-format=json 2>/dev/null |
        "$FERRITE_PYTHON" -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("executable") and m.get("target", {}).get("kind") == ["test"]:
        print(m["executable"])')"
    cp "$exe" "$2" && strip "$2"
}

if [ "$MODE" = "--bundle" ]; then
    [ -n "$BUNDLE" ] || { echo "usage: $0 --bundle DIR" >&2; exit 2; }
    source "$ROOT/scripts/setup.sh"
    cd "$FERRITE_ROOT"
    mkdir -p "$BUNDLE/debs"
    BUNDLE="$(cd "$BUNDLE" && pwd)"
    "$FERRITE_PYTHON" tests/models/generate.py target/test-models >/dev/null
    copy_test_program cuda "$BUNDLE/cuda-tests"
    copy_test_program vulkan "$BUNDLE/vulkan-tests"
    cargo build --release -q -p ferrite-tools
    cp target/release/ferrite "$BUNDLE/ferrite" && strip "$BUNDLE/ferrite"
    # The AVX2-host shim, prebuilt: the GPU machine may have no compiler.
    gcc -O2 -shared -fPIC -o "$BUNDLE/avx2_host.so" benches/avx2_host.c
    NODE="$("$FERRITE_PYTHON" -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data"))')"
    tar czf "$BUNDLE/node.tar.gz" -C "$NODE" node
    tar czf "$BUNDLE/test-models.tar.gz" -C target test-models
    # The Vulkan loader, the validation layer and the GL vendor-neutral dispatch libraries with
    # their X11 dependencies (Debian's): NVIDIA's Vulkan driver is libGLX_nvidia, which needs them.
    # Unpacked into a temporary folder on the GPU machine, never into its /.
    (cd "$BUNDLE/debs" && apt-get download libvulkan1 vulkan-validationlayers libglvnd0 libegl1 \
        libgl1 libglx0 libgles2 libopengl0 libx11-6 libxext6 libxcb1 libxau6 libxdmcp6 libbsd0 \
        libmd0 >/dev/null 2>&1) ||
        echo "warning: apt-get download failed: the Vulkan checks need the GPU machine's own loader" >&2
    du -sh "$BUNDLE"
    exit 0
fi

if [ "$MODE" != "--from" ]; then
    # Build and check on this machine.
    source "$ROOT/scripts/setup.sh"
    cd "$FERRITE_ROOT"
    source scripts/cuda-tools.sh
    OUT="${GPU_CHECK_OUT:-$FERRITE_ROOT/target/gpu-check}"
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
    exit 0
fi

# --from DIR: a bare GPU machine. Every section runs (a failure is logged, not the end) under a
# time limit; the exit status says whether all passed.
[ -d "$BUNDLE" ] || { echo "usage: $0 --from DIR (made by --bundle)" >&2; exit 2; }
BUNDLE="$(cd "$BUNDLE" && pwd)"
chmod +x "$BUNDLE/cuda-tests" "$BUNDLE/vulkan-tests" "$BUNDLE/ferrite" 2>/dev/null || true
cd "$ROOT"
export FERRITE_ROOT="$ROOT"
OUT="${GPU_CHECK_OUT:-$ROOT/target/gpu-check}"
LIMIT="${GPU_CHECK_LIMIT_S:-300}"
PYTHON="${FERRITE_PYTHON:-python3}"
ONLY=" ${GPU_CHECK_ONLY:-cuda cuda-latency vulkan vulkan-latency cpu-latency cpu-avx2-host} "
mkdir -p "$OUT"
failed=""
section() { echo; echo "== $1 ($(date +%T))"; }
run_logged() { # name, log file, command...
    local name="$1" log="$2"
    shift 2
    case "$ONLY" in *" $name "*) ;; *) echo "(not selected: $name)"; return 0 ;; esac
    if ! timeout "$LIMIT" "$@" > >(tee "$log") 2>&1; then
        failed="$failed $name"
        echo "!! $name failed (or ran past ${LIMIT}s)"
    fi
}

section "machine"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader || true
    grep -m1 "model name" /proc/cpuinfo || true
    echo "cores: $(nproc); $(grep -m1 -o -w 'avx512f' /proc/cpuinfo || echo 'no avx512f'); $(ldd --version | head -1)"
    "$PYTHON" -c 'import numpy, onnxruntime as o; print("numpy", numpy.__version__, "onnxruntime", o.__version__, o.get_available_providers())' || true
} 2>&1 | tee "$OUT/machine.txt"

section "test data"
DATA="$(mktemp -d)"
tar xzf "$BUNDLE/node.tar.gz" -C "$DATA"
tar xzf "$BUNDLE/test-models.tar.gz" -C "$DATA"
export FERRITE_TEST_MODELS="$DATA/test-models" FERRITE_NODE_TESTS="$DATA/node"
echo "unpacked into $DATA"

# NVRTC: the CUDA device opens libnvrtc by the names cudarc knows (unversioned, .12 and older).
# A newer toolkit's (libnvrtc.so.13, say) is linked under the unversioned name; its folder joins
# the library path (a toolkit's stubs/ folder never: its libcuda stub would shadow the driver).
section "NVRTC"
LIBS="$(mktemp -d)"
if ! ldconfig -p | grep 'libnvrtc\.so ' >/dev/null; then
    nvrtc="$(find /usr/local /opt /usr/lib -name 'libnvrtc.so*' -not -name '*alt*' -not -path '*/stubs/*' 2>/dev/null | sort -V | tail -1 || true)"
    if [ -n "$nvrtc" ]; then
        ln -s "$nvrtc" "$LIBS/libnvrtc.so"
        export LD_LIBRARY_PATH="$LIBS:$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    echo "libnvrtc: ${nvrtc:-none found}"
fi
"$BUNDLE/ferrite" devices 2>&1 || true

section "1. CUDA conformance on the GPU"
export FERRITE_REQUIRE_CUDA=1
run_logged cuda "$OUT/cuda-conformance.log" "$BUNDLE/cuda-tests" --nocapture --test-threads 1 \
    --skip emulator --skip emulated --skip fake_driver

section "2. latency: Ferrite's CUDA device vs onnxruntime"
if "$PYTHON" -c 'import onnxruntime as o, sys; sys.exit("CUDAExecutionProvider" not in o.get_available_providers())' 2>/dev/null; then
    against=(--provider cuda)
else
    against=(--provider cpu --ort-threads 0) # no onnxruntime-gpu: every core of the host
fi
run_logged cuda-latency "$OUT/cuda-latency.txt" "$PYTHON" benches/side_by_side.py --ferrite "$BUNDLE/ferrite" \
    --models "$FERRITE_TEST_MODELS" --device cuda "${against[@]}" --rounds 3 --runs 100

section "3. Vulkan conformance on the GPU"
# The bundle's libraries after the machine's own (which win where both exist), its loader first
# where the machine has none.
VK="$(mktemp -d)"
for deb in "$BUNDLE"/debs/*.deb; do dpkg -x "$deb" "$VK"; done
VK_LIBS="$VK/usr/lib/x86_64-linux-gnu"
if ! ldconfig -p | grep 'libvulkan\.so\.1' >/dev/null; then
    mkdir -p "$VK/loader" && cp -P "$VK_LIBS"/libvulkan.so* "$VK/loader/"
    export LD_LIBRARY_PATH="$VK/loader${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$VK_LIBS"
export VK_LAYER_PATH="$VK/usr/share/vulkan/explicit_layer.d"
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
    /etc/vulkan/icd.d/nvidia_icd.json; do
    if [ -f "$icd" ]; then
        export VK_DRIVER_FILES="$icd"
        library="$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["ICD"]["library_path"])' "$icd" 2>/dev/null || true)"
        echo "ICD: $icd -> ${library:-?}"
        # A driver library the loader cannot open shows here as "not found".
        resolved="$(ldconfig -p | awk -v l="$library" '$1 == l { print $NF; exit }')"
        [ -n "$resolved" ] && ldd "$resolved" | grep "not found" || true
        break
    fi
done
export FERRITE_REQUIRE_VULKAN=1
run_logged vulkan "$OUT/vulkan-conformance.log" "$BUNDLE/vulkan-tests" --nocapture --test-threads 1
run_logged vulkan-latency "$OUT/vulkan-latency.txt" "$PYTHON" benches/side_by_side.py --ferrite "$BUNDLE/ferrite" \
    --models "$FERRITE_TEST_MODELS" --device vulkan --provider cpu --ort-threads 0 --rounds 3 --runs 100

section "4. CPU side by side on this machine (one thread each)"
run_logged cpu-latency "$OUT/cpu-latency.txt" "$PYTHON" benches/side_by_side.py --ferrite "$BUNDLE/ferrite" \
    --models "$FERRITE_TEST_MODELS" --rounds 7 --runs 100

# The same machine as an AVX2-only host: AVX-512 and VNNI hidden from both sides by CPUID
# faulting (the bundle's prebuilt shim in the place side_by_side.py looks for it).
section "5. CPU side by side as an AVX2-only host (--avx2-host)"
if grep -qw avx512f /proc/cpuinfo && grep -qw cpuid_fault /proc/cpuinfo && [ -f "$BUNDLE/avx2_host.so" ]; then
    mkdir -p target/bench && cp "$BUNDLE/avx2_host.so" target/bench/avx2_host.so
    touch target/bench/avx2_host.so # newer than benches/avx2_host.c: not rebuilt
    run_logged cpu-avx2-host "$OUT/cpu-avx2-host.txt" "$PYTHON" benches/side_by_side.py \
        --ferrite "$BUNDLE/ferrite" --models "$FERRITE_TEST_MODELS" --rounds 7 --runs 100 --avx2-host
else
    echo "(skipped: the CPU has no AVX-512, no CPUID faulting, or the bundle no avx2_host.so)"
fi

section "done"
if [ -n "$failed" ]; then
    echo "failed:$failed"
    exit 1
fi
echo "all sections passed"
