#!/usr/bin/env bash
# Link-time proof that Ferrite has no reachable panic (boards/panic-free): for Cortex-M4F, with
# fat LTO, a panic handler that calls a symbol defined nowhere.
#   proof 1 (`load`): Model::load — parsing and verifying an untrusted .frt;
#   proof 2 (`run`):  Model::load, Session::new, set_input, run, output with the digits MLP's
#                     kernels (its OPS mask) on the CPU device;
#   proof 3 (`c_api`): every function of the C API (ferrite-c with the Cortex-M device, built
#                     with FERRITE_OPS = the digits model's selection, as its firmware would be),
#                     called with arbitrary pointers, lengths and indices. It links ferrite-c's
#                     own panic handler, so the proof is that the binary holds no panic symbol.
# Each binary links only if the optimiser removed every path to the panic handler. A failure
# names `ferrite_panic_path_reached`; `--find` links with the symbol defined and lists the source
# lines that still reach a panic (needs binutils-arm-none-eabi), for those two and for `all`
# (every CPU kernel, not panic-free yet).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT/boards/panic-free"
ELF_DIR="$ROOT/boards/target/thumbv7em-none-eabihf/release"
if [ "${1:-}" = "--find" ]; then
    cargo build --release -q --features find --bins
    for bin in load run all; do
        sites=$(arm-none-eabi-objdump -d "$ELF_DIR/$bin" \
            | { grep -E "bl.*<.*(panicking|slice_index_fail|_fail>)" || true; } | awk '{print $1}' | tr -d ':' \
            | while read -r a; do arm-none-eabi-addr2line -e "$ELF_DIR/$bin" -i "0x$a" \
                | { grep -v "/rustc/" || true; } | head -1; done | sed "s|$ROOT/||" | sort | uniq -c | sort -rn) || true
        count=$(printf '%s' "$sites" | awk '{s += $1} END {print s + 0}')
        echo "$bin: $count call(s) into the panic handler"
        [ "$count" = 0 ] || printf '%s\n' "$sites" | head -20
    done
    exit 0
fi
for bin in load run; do
    if ! out=$(cargo build --release -q --bin "$bin" 2>&1); then
        printf '%s\n' "$out" | grep -E "undefined symbol|referenced by|>>>" | head -20 >&2
        echo "error: boards/panic-free '$bin' has a reachable panic (scripts/panic-free.sh --find lists where)" >&2
        exit 1
    fi
    echo "panic-free: '$bin' links with no panic path"
done
# Proof 3: the digits model's selection, as `ferrite pack --emit c` writes it.
(cd "$ROOT" && cargo build -q -p ferrite-tools --bin ferrite)
EMIT="$(mktemp -d)"
"$ROOT/target/debug/ferrite" pack "$ROOT/demo/digits.onnx" -o "$EMIT/digits.frt" --emit c >/dev/null
OPS="$(sed -n 's/^#define DIGITS_OPS "\(0x[0-9a-f]*\)"$/\1/p' "$EMIT/digits.h")"
rm -rf "$EMIT"
[ -n "$OPS" ] || { echo "error: no DIGITS_OPS in the emitted header" >&2; exit 1; }
FERRITE_OPS="$OPS" cargo build --release -q --bin c_api
panics="$(arm-none-eabi-nm "$ELF_DIR/c_api" | grep -i -E "panic|unwind|_fail" || true)"
if [ -n "$panics" ]; then
    printf '%s\n' "$panics" | head -10 >&2
    echo "error: the C API (boards/panic-free 'c_api') has a reachable panic: the symbols above are linked" >&2
    exit 1
fi
echo "panic-free: 'c_api' (ferrite-c, FERRITE_OPS=$OPS) links no panic machinery ($(arm-none-eabi-size "$ELF_DIR/c_api" | awk 'NR == 2 {print $1}') B of text)"
