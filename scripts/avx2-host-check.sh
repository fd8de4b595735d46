#!/usr/bin/env bash
# The AVX2-host benchmark shim (benches/avx2_host.c, `benches/side_by_side.py --avx2-host`): it
# builds warning-free; where the CPU and kernel offer CPUID faulting and the CPU has AVX-512, a
# process with the shim preloaded sees no AVX-512 or VNNI (numpy's and Ferrite's own dispatch pick
# AVX2), and a real segmentation fault still kills the process.
# Usage: scripts/avx2-host-check.sh FERRITE_CLI   (FERRITE_PYTHON: a Python with numpy)
set -euo pipefail
cd "$(dirname "$0")/.."
FERRITE_CLI="$1"
PYTHON="${FERRITE_PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
SHIM="$WORK/avx2_host.so"
gcc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$SHIM" benches/avx2_host.c
flags="$(grep -m1 '^flags' /proc/cpuinfo || true)"
if ! grep -qw cpuid_fault <<< "$flags" || ! grep -qw avx512f <<< "$flags"; then
    echo "avx2-host shim built; not exercised (this CPU lacks CPUID faulting or AVX-512)"
    exit 0
fi
LD_PRELOAD="$SHIM" "$PYTHON" - <<'PY'
import ctypes
from numpy._core._multiarray_umath import __cpu_features__ as features
assert ctypes.CDLL(None).avx2_host_active() == 1, "CPUID faulting did not turn on"
hidden = [name for name, present in features.items() if present and ("AVX512" in name or "VNNI" in name)]
assert features["AVX2"] and not hidden, f"still visible: {hidden}"
import signal, subprocess, sys
fault = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.string_at(0)"], capture_output=True)
assert fault.returncode == -signal.SIGSEGV, f"a null read ended with {fault.returncode}, not SIGSEGV"
PY
frt="$WORK/digits.frt"
"$FERRITE_CLI" pack demo/digits.onnx -o "$frt" > /dev/null
simd="$(LD_PRELOAD="$SHIM" "$FERRITE_CLI" bench "$frt" --runs 3 --json | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["simd"])')"
[ "$simd" = avx2 ] || { echo "error: Ferrite chose the $simd build with AVX-512 hidden" >&2; exit 1; }
echo "avx2-host shim: AVX-512 and VNNI hidden from numpy and Ferrite (SIMD build $simd); real faults still fault"
