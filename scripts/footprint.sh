#!/usr/bin/env bash
# Regenerates docs/footprint.md (flash, RAM and instructions per inference of every test model in
# the Cortex-M firmware on QEMU). Installs and builds what it needs, like the other scripts.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$FERRITE_ROOT"
"$FERRITE_PYTHON" tests/models/generate.py target/test-models >/dev/null
bash scripts/build-firmware.sh >/dev/null
# The Cortex-M4F firmware without the DSP kernels, to show what they gain.
(cd boards/qemu-mps2-an386 && FERRITE_PORTABLE_KERNELS=1 cargo build --release -q --target-dir ../target/portable)
cargo build --release -q -p ferrite-tools --bin ferrite
"$FERRITE_PYTHON" scripts/footprint.py
