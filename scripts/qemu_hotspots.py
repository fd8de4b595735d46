#!/usr/bin/env python3
"""Where a firmware's instructions go: functions and source lines by instructions executed.

Run a model on QEMU with the instruction-count plugin's histogram on, then read it here:

    mkdir -p /tmp/hot && FERRITE_QEMU_HISTOGRAM=/tmp/hot ferrite bench MODEL.frt --device qemu-m4
    scripts/qemu_hotspots.py /tmp/hot/firmware-release.elf.blocks \
        boards/target/model-firmware/<crc>-<len>/firmware-release.elf [--top 25]

Each firmware a command runs writes `<folder>/<its file name>.blocks`: `ferrite bench` runs the
every-kernel firmware (`qemu-mps2-an386.blocks`, ELF `boards/target/thumbv7em-none-eabihf/
release/qemu-mps2-an386`) and the model's own (`firmware-release.elf.blocks`, ELF under
`boards/target/model-firmware/`). Read each with its own ELF. The histogram covers the whole
run (load, verification and the stack painting too; the inference's functions are the kernels').
Source lines are the innermost inlined ones (llvm-symbolizer).
"""
import argparse
import bisect
import collections
import re
import subprocess


def instruction_addresses(elf):
    out = subprocess.run(["llvm-objdump", "-d", "--no-show-raw-insn", elf],
                         capture_output=True, text=True, check=True).stdout
    return sorted(int(m.group(1), 16) for m in re.finditer(r"^\s+([0-9a-f]+):\s", out, re.M))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("histogram")
    ap.add_argument("elf")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    addrs = instruction_addresses(args.elf)
    weight = collections.Counter()
    for line in open(args.histogram):
        vaddr, insns, runs = line.split()
        start = bisect.bisect_left(addrs, int(vaddr, 16))
        for a in addrs[start:start + int(insns)]:
            weight[a] += int(runs)
    total = sum(weight.values())
    query = "\n".join(hex(a) for a in weight)
    sym = subprocess.run(["llvm-symbolizer", "--demangle", "--functions=short", "-e", args.elf],
                         input=query, capture_output=True, text=True, check=True).stdout
    by_function, by_line = collections.Counter(), collections.Counter()
    for a, block in zip(weight, sym.strip("\n").split("\n\n")):
        lines = block.split("\n")
        function = re.sub(r"::h[0-9a-f]{16}$", "", lines[0])
        where = lines[1].rsplit("/", 2)[-2:] if len(lines) > 1 else ["?"]
        by_function[function] += weight[a]
        by_line["/".join(where) + "  " + function[:60]] += weight[a]
    print(f"{total} instructions executed")
    for title, counter in (("function (innermost inlined)", by_function),
                           ("source line", by_line)):
        print(f"\n{'instructions':>14} {'share':>6}  {title}")
        for k, v in counter.most_common(args.top):
            print(f"{v:>14} {100 * v / total:>5.1f}%  {k}")


if __name__ == "__main__":
    main()
