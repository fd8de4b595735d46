#!/usr/bin/env python3
"""Two builds of `ferrite` side by side: do they pack the same bytes, and is either faster?

For a change meant to move code without changing behaviour (or to speed a kernel without
changing its results), build `ferrite` before and after (`git worktree add /tmp/before REV`,
then `cargo build --release --bin ferrite` in each, the older one with its own
`CARGO_TARGET_DIR`) and run:

    python benches/compare_builds.py OLD_FERRITE NEW_FERRITE [--rounds 5] [--runs 100]

It packs every model of the real-model corpus (`../shared/models/real`, at the static shapes in
its `refs/*/meta.json`; single-input models also as `--quantize int8` calibrated on the corpus
samples) and every generated test model (`target/test-models`) with both builds and compares the
`.frt` bytes and, for a refused model, the error line. Then it runs `ferrite bench` on each
corpus `.frt` with both builds in alternating order for `--rounds` rounds and prints the best
round's median of each and their ratio (new / old; the machine is noisy, so look at the geometric
mean and at outliers twice). Exit 1 when any pack differs (`--bench-only` skips that part).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "models" / "real"
TEST_MODELS = ROOT / "target" / "test-models"


def pack_cases(work: Path) -> list[tuple[str, Path, list[str]]]:
    """(name, onnx, pack arguments) for every corpus and test model."""
    cases = []
    for onnx in sorted(CORPUS.glob("*.onnx")):
        meta = json.loads((CORPUS / "refs" / onnx.stem / "meta.json").read_text())
        args = []
        for spec in meta["inputs"]:
            if spec["shape"]:
                args += ["--input-shape", spec["name"] + "=" + "x".join(map(str, spec["shape"]))]
            else:  # the corpus's scalar inputs are sample rates
                args += ["--constant", f"{spec['name']}=16000"]
        cases.append((onnx.stem, onnx, args))
        if len(meta["inputs"]) == 1:
            calibration = work / f"calibration-{onnx.stem}"
            calibration.mkdir()
            for sample in sorted((CORPUS / "refs" / onnx.stem).glob("input_0_*.npy")):
                shutil.copy(sample, calibration / sample.name)
            cases.append((f"{onnx.stem}_int8", onnx,
                          args + ["--quantize", "int8", "--calibration", str(calibration)]))
    cases += [(f"test_{onnx.stem}", onnx, []) for onnx in sorted(TEST_MODELS.glob("*.onnx"))]
    return cases


def pack(binary: str, onnx: Path, args: list[str], out: Path) -> tuple[int, str, str]:
    """Exit code, error line and digest of the packed bytes (empty when refused)."""
    p = subprocess.run([binary, "pack", str(onnx), "-o", str(out)] + args,
                       capture_output=True, text=True, timeout=1800)
    digest = hashlib.sha256(out.read_bytes()).hexdigest() if out.exists() else ""
    return p.returncode, p.stderr.strip(), digest


def best_median(binary: str, frt: Path, runs: int) -> float:
    p = subprocess.run([binary, "bench", str(frt), "--runs", str(runs), "--json"],
                       capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        return math.nan
    return json.loads(p.stdout)["median_us"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="the ferrite binary before the change")
    parser.add_argument("new", help="the ferrite binary after it")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--bench-only", action="store_true", help="skip the byte comparison")
    args = parser.parse_args()
    if not CORPUS.is_dir():
        print(f"compare_builds.py: no corpus at {CORPUS}", file=sys.stderr)
        return 2
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        to_bench = []
        for name, onnx, pack_args in pack_cases(work):
            if args.bench_only and name.startswith("test_"):
                continue
            new_frt = work / f"{name}.new.frt"
            new = pack(args.new, onnx, pack_args, new_frt)
            if not args.bench_only:
                old = pack(args.old, onnx, pack_args, work / f"{name}.old.frt")
                if old != new:
                    differ += 1
                    print(f"{name}: DIFFERS\n  old: {old}\n  new: {new}")
                else:
                    print(f"{name}: {'same bytes' if new[0] == 0 else 'refused alike: ' + new[1][:100]}")
            if new[0] == 0 and not name.startswith("test_"):
                to_bench.append((name, new_frt))
        print(f"\npacks: {differ} differ\n")
        print("| model | old µs | new µs | new / old |\n|---|---:|---:|---:|")
        ratios = []
        for name, frt in to_bench:
            best = {"old": math.inf, "new": math.inf}
            builds = [("old", args.old), ("new", args.new)]
            for r in range(args.rounds):
                for tag, binary in builds if r % 2 == 0 else builds[::-1]:
                    best[tag] = min(best[tag], best_median(binary, frt, args.runs))
            old_us, new_us = best["old"], best["new"]
            ratio = new_us / old_us
            if math.isfinite(ratio):
                ratios.append(ratio)
            print(f"| {name} | {old_us:.1f} | {new_us:.1f} | {ratio:.3f} |", flush=True)
        if ratios:
            mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"\ngeometric mean new / old over {len(ratios)} models: {mean:.3f}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
