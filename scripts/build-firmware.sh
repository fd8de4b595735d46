#!/usr/bin/env bash
# Builds what the `qemu-m0/m4/m7/m33` devices need: the firmware for QEMU's microbit (Cortex-M0),
# mps2-an386 (Cortex-M4F), mps2-an500 (Cortex-M7) and mps2-an505 (Cortex-M33), and the TCG plugin that counts instructions. Sourced by scripts/test.sh and scripts/demo.sh (after
# scripts/setup.sh installed qemu-system-arm and the Rust targets); safe to run again.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$ROOT/boards/target/qemu-plugin"
gcc -shared -fPIC -O2 -Wall -Wextra -Werror \
    -o "$ROOT/boards/target/qemu-plugin/libinsn_count.so" "$ROOT/boards/qemu-plugin/insn_count.c"
for board in qemu-mps2-an386 qemu-mps2-an500 qemu-mps2-an505 qemu-microbit; do
    (cd "$ROOT/boards/$board" && cargo build --release -q)
done
echo "firmware: boards/target/<target>/release/qemu-{mps2-an386,mps2-an500,mps2-an505,microbit}; plugin: boards/target/qemu-plugin/libinsn_count.so"
