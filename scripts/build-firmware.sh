#!/usr/bin/env bash
# Builds what the `qemu-m4` device needs: the firmware for QEMU's mps2-an386 (Cortex-M4F) and the
# TCG plugin that counts its instructions. Sourced by scripts/test.sh and scripts/demo.sh (after
# scripts/setup.sh installed qemu-system-arm and the Rust targets); safe to run again.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$ROOT/boards/target/qemu-plugin"
gcc -shared -fPIC -O2 -Wall -Wextra -Werror \
    -o "$ROOT/boards/target/qemu-plugin/libinsn_count.so" "$ROOT/boards/qemu-plugin/insn_count.c"
(cd "$ROOT/boards/qemu-mps2-an386" && cargo build --release -q)
echo "firmware: boards/target/thumbv7em-none-eabihf/release/qemu-mps2-an386, plugin: boards/target/qemu-plugin/libinsn_count.so"
