#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo-fuzz (libFuzzer, nightly toolchain) — not part of CI, which
# replays the committed corpus on stable (tools/tests/fuzz_corpus.rs).
#
#   scripts/fuzz.sh TARGET SECONDS      # TARGET: frt | onnx | npy
#
# Seeds come from scripts/fuzz-seeds.py (the ONNX node-test models, those packed to .frt, their
# inputs as .npy) in fuzz/seeds/TARGET; the growing corpus is fuzz/work/TARGET; at the end its
# small inputs are merged (libFuzzer `-merge=1`) into fuzz/corpus/TARGET, which is committed.
# Built with debug assertions (`-a`): overflow checks on, as in the CI replay. A crash leaves its
# input in fuzz/artifacts/TARGET; once fixed, copy it to fuzz/regressions/TARGET.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$FERRITE_ROOT"
target="$1"
seconds="$2"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
if [ ! -d fuzz/seeds/onnx ]; then
    cargo build --release -q --bin ferrite
    "$FERRITE_PYTHON" scripts/fuzz-seeds.py target/release/ferrite
fi
case "$target" in
    onnx) max_len=16384 ;;
    frt) max_len=65536 ;;
    npy) max_len=4096 ;;
    *) echo "unknown target $target (frt, onnx, npy)" >&2; exit 2 ;;
esac
mkdir -p "fuzz/work/$target" "fuzz/corpus/$target"
cd fuzz
cargo +nightly fuzz run -O -a "$target" "work/$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 2>&1 | tee "work/$target.log" | grep -E "^#[0-9]+.*(INITED|DONE|pulse)|stat::|ERROR|SUMMARY" || true
# The committed corpus: the smallest inputs (at most $keep bytes each, so the repository stays
# small) that keep the coverage of everything found, chosen by libFuzzer's merge.
case "$target" in frt) keep=4096 ;; *) keep=2048 ;; esac
rm -rf "work/$target.small" "work/$target.min" && mkdir -p "work/$target.small" "work/$target.min"
find "work/$target" "corpus/$target" -type f -size -"$keep"c -exec cp {} "work/$target.small/" \;
"target/x86_64-unknown-linux-gnu/release/$target" -merge=1 -max_len="$max_len" \
    "work/$target.min" "work/$target.small" 2>&1 | grep "MERGE-OUTER: [0-9]* new" || true
rm -rf "corpus/$target" && mv "work/$target.min" "corpus/$target"
echo "fuzz/corpus/$target: $(ls "corpus/$target" | wc -l) inputs"
