#!/usr/bin/env bash
# Cross-builds the host parts (the `ferrite` CLI, ferrite-cuda, the Jetson example) for
# aarch64-unknown-linux-gnu (Jetson: JetPack 6 is aarch64 Ubuntu) with Debian's
# gcc-aarch64-linux-gnu, then runs the cross-built Jetson example under qemu-user on the bundled
# digits model — no GPU there, so it must report CUDA missing in one line and fall back to the
# CPU — and checks its outputs against the host build's.
# Last, the CPU kernels' unit tests (NEON and portable) under qemu-user.
# Usage: bash scripts/cross-aarch64.sh   (scripts/setup.sh installs the cross compiler and QEMU)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${FERRITE_PYTHON:-$ROOT/.venv/bin/python}"
TARGET=aarch64-unknown-linux-gnu

cargo build -q --profile cross --target "$TARGET" -p ferrite-cuda -p ferrite-tools -p ferrite-jetson
file_info="$(od -An -tx1 -j18 -N2 "target/$TARGET/cross/ferrite-jetson" | tr -d ' ')"
[ "$file_info" = "b700" ] || { echo "error: ferrite-jetson is not an aarch64 ELF (e_machine $file_info)" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cargo build -q -p ferrite-tools --bin ferrite
cargo build -q -p ferrite-jetson
target/debug/ferrite pack demo/digits.onnx -o "$WORK/digits.frt" >/dev/null
"$PYTHON" - "$WORK" <<'PY'
import json, subprocess, sys, numpy as np
work = sys.argv[1]
info = json.loads(subprocess.check_output(["target/debug/ferrite", "inspect", f"{work}/digits.frt", "--json"]))
shape = info["inputs"][0]["shape"]
np.random.default_rng(7).random(shape).astype("<f4").tofile(f"{work}/x.bin")
PY
target/debug/ferrite-jetson "$WORK/digits.frt" --device cpu --input "$WORK/x.bin" --out-dir "$WORK/host" >/dev/null
qemu-aarch64 -L /usr/aarch64-linux-gnu "target/$TARGET/cross/ferrite-jetson" "$WORK/digits.frt" \
    --device cuda,cpu --input "$WORK/x.bin" --out-dir "$WORK/arm" 2>"$WORK/arm.err" | tee "$WORK/arm.out"
grep -q "^cuda: " "$WORK/arm.err" || { echo "error: no one-line CUDA fallback message" >&2; cat "$WORK/arm.err" >&2; exit 1; }
grep -q "ran on cpu" "$WORK/arm.out"
"$PYTHON" - "$WORK" <<'PY'
import sys, numpy as np
work = sys.argv[1]
host = np.fromfile(f"{work}/host/output_0.bin", "<f4")
arm = np.fromfile(f"{work}/arm/output_0.bin", "<f4")
err = np.abs(host - arm).max() / max(np.abs(host).max(), 1e-30)
print(f"aarch64 (qemu-user) vs x86-64 outputs: relative error {err:.2e}")
assert host.shape == arm.shape and err <= 1e-5, err
PY

# The CPU kernels' unit tests on aarch64 under qemu-user (unoptimised, as the cross-build): all of
# them with the NEON kernels and threads — the float GEMM against the naive product, taps read in
# place and threaded products bit-identical to the unfolded, one-thread ones, the int8 convolutions
# against the ONNX definition on 1,500 random geometries (bit-exact) — then the integer and GEMM
# ones on the portable kernels (FERRITE_CPU_SIMD=portable), which the NEON build bypasses. No Arm
# hardware times them here.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
cargo test -q --profile cross-test --target "$TARGET" -p ferrite-cpu --features std,threads --lib
FERRITE_CPU_SIMD=portable cargo test -q --profile cross-test --target "$TARGET" -p ferrite-cpu \
    --features std --lib -- integer:: gemm
echo "aarch64 (qemu-user): ferrite-cpu unit tests pass with the NEON kernels and the portable ones"
