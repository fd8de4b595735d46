#!/usr/bin/env python3
"""Writes the generated tables of docs/status.md from the files the tests check against.

Each table sits between `<!-- generated: NAME -->` and `<!-- end: NAME -->` in the page; the
text around them is written by hand. The sources are the checked-in expectation lists, so a
figure here is the one CI enforces:

- `node`: ONNX backend node tests passing per device (`tests/expectations/*-node.txt` list the
  ones that do not; the total is the onnx wheel's test count);
- `firmware`: each gated model's own Cortex-M4F firmware (`tests/expectations/footprint.txt`);
- `layers`: the module graph (`tests/expectations/layers.txt`).

`python3 scripts/status.py` rewrites the tables; `--check` fails when the page is out of date
(CI runs it). The node-test total comes from the onnx package of the Python that runs this.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "status.md"
EXPECTATIONS = ROOT / "tests" / "expectations"
DEVICES = [
    ("cpu", "the CPU device (portable, AVX2 and AVX-512 builds)"),
    ("qemu-m4", "Cortex-M4F firmware on QEMU"),
    ("vulkan", "Vulkan (Mesa's lavapipe in CI)"),
    ("cuda", "CUDA (the kernels' host emulator in CI)"),
]
MODEL_NAMES = {
    "digits": "digits MLP (demo)",
    "mlp": "MLP 784-128-64-10",
    "ds_cnn": "DS-CNN keyword spotter",
    "fc_autoencoder": "FC autoencoder",
    "resnet8": "ResNet-8",
    "mobilenet_v1_025": "MobileNetV1-0.25",
    "kws_frontend": "KWS with its STFT/mel front end",
}


def listed(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def node_total() -> int | None:
    try:
        import onnx  # noqa: PLC0415 (only where the venv has it)
    except ImportError:
        return None
    data = Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"
    return sum(1 for entry in data.iterdir() if entry.is_dir())


def node_table() -> str:
    total = node_total()
    if total is None:
        raise SystemExit("status.py: needs the onnx package (run it with the .venv's python)")
    rows = ["| device | pass | expected failures | skipped (op, attribute or type not supported) |",
            "|---|---:|---:|---:|"]
    for device, label in DEVICES:
        lines = listed(EXPECTATIONS / f"{device}-node.txt")
        skipped = sum(1 for line in lines if line.split()[1:2] == ["skip"])
        failing = len(lines) - skipped
        rows.append(f"| {label} | {total - len(lines)} | {failing} | {skipped} |")
    rows.append("")
    rows.append(f"Of the {total} node tests in onnx 1.22.0's wheel; a device's failures are listed in "
                "`tests/expectations/<device>-node.txt` (a test that starts passing or failing turns CI red).")
    return "\n".join(rows)


def firmware_table() -> str:
    lines = listed(EXPECTATIONS / "footprint.txt")
    rows = ["| model | runtime flash (B) | inference stack (B) | arena (B) | instructions / inference |",
            "|---|---:|---:|---:|---:|"]
    for line in lines:
        name, flash, stack, arena, instructions, _panic = line.split()
        label = MODEL_NAMES.get(name, name.replace("_", " "))
        rows.append(f"| {label} | {int(flash):,} | {int(stack):,} | {int(arena):,} | {int(instructions):,} |")
    rows.append("")
    rows.append("Each model's own firmware (`boards/template`, built by `ferrite bench MODEL --device qemu-m4`), "
                "flash besides the model; CI fails when a figure grows by more than 3 % or a panic path appears "
                "(`tests/expectations/footprint.txt`, `scripts/footprint_gate.py`; `docs/footprint.md` explains each column).")
    return "\n".join(rows)


def layers_table() -> str:
    lines = listed(EXPECTATIONS / "layers.txt")
    cycles: dict[str, int] = {}
    long_fns = 0
    for line in lines:
        kind, crate = line.split()[:2]
        if kind == "cycle":
            cycles[crate] = cycles.get(crate, 0) + 1
        elif kind == "long-fn":
            long_fns += 1
    layer_breaks = sum(1 for line in lines if line.startswith("layer "))
    if cycles:
        rows = ["| crate | modules in import cycles |", "|---|---:|"]
        rows += [f"| `{crate}` | {count} |" for crate, count in sorted(cycles.items())]
        rows.append("")
    else:
        rows = ["Modules in import cycles: 0 in every crate.", ""]
    rows.append(f"Imports against `targets/cpu`'s layers: {layer_breaks}. Functions over 200 lines "
                f"outside the GPU encoders: {long_fns}. Checked by `scripts/layers.py` in CI against "
                "`tests/expectations/layers.txt`, which may only shrink.")
    return "\n".join(rows)


TABLES = {"node": node_table, "firmware": firmware_table, "layers": layers_table}


def render(page: str) -> str:
    for name, make in TABLES.items():
        pattern = re.compile(rf"(<!-- generated: {name} -->\n).*?(<!-- end: {name} -->)", re.S)
        if not pattern.search(page):
            raise SystemExit(f"status.py: {PAGE.relative_to(ROOT)} has no '<!-- generated: {name} -->' block")
        page = pattern.sub(lambda m: m.group(1) + make() + "\n" + m.group(2), page)
    return page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/status.md is out of date")
    args = parser.parse_args()
    page = PAGE.read_text()
    fresh = render(page)
    if args.check:
        if fresh != page:
            print("status.py: docs/status.md is out of date with tests/expectations; run "
                  "`.venv/bin/python scripts/status.py` and commit it", file=sys.stderr)
            return 1
        print("status.py: docs/status.md matches tests/expectations")
        return 0
    PAGE.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
