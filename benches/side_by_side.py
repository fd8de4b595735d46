#!/usr/bin/env python3
"""Ferrite vs onnxruntime, side by side in one run.

For each generated test model (and the int8 QDQ ones), alternates rounds of `ferrite bench --json`
and onnxruntime runs (so both see the same machine noise) and prints two tables, float and int8,
of each side's best round (its median over `--runs` runs) and their ratio ferrite / onnxruntime
(< 1: Ferrite faster), the median of the rounds' own ratios beside it, with each table's geometric
means, and which SIMD build each side ran. Speed is only ever measured here, never asserted in tests.
On an AVX-512 machine, `FERRITE_CPU_SIMD=avx2` measures Ferrite's AVX2 build against onnxruntime's
AVX-512/VNNI kernels; `--avx2-host` instead makes the whole run an AVX2-only host: it reruns itself
with benches/avx2_host.c preloaded, which hides the AVX-512, AVX-VNNI, AVX10 and AMX CPUID bits from
the process and its children (CPUID faulting), so onnxruntime's MLAS and Ferrite both dispatch
their AVX2 kernels and run them at native speed.

    python benches/side_by_side.py [--models target/test-models] [--rounds 5] [--runs 200]
    python benches/side_by_side.py --avx2-host    # both sides as on an AVX2-only x86-64 host
    python benches/side_by_side.py --device cuda --provider cuda   # a GPU: Ferrite's CUDA device
                                                                     # vs onnxruntime-gpu's CUDA EP

The CPU comparison pins onnxruntime to one thread (Ferrite's CPU device runs on one core); a GPU
comparison leaves onnxruntime's defaults and skips the int8 models (Ferrite's GPU devices run f32).
`--ort-threads N` overrides onnxruntime's thread count (0: its own default), e.g. to set a GPU
device against every core of the host where no onnxruntime-gpu is installed:

    python benches/side_by_side.py --device cuda --provider cpu --ort-threads 0
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort


def ort_median_us(session, feed, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def random_input(info, entry):
    """Deterministic data for an input without a reference file: its shape (symbolic dimensions as
    the manifest fixes them, else 1) and type."""
    fixed = entry.get("input_shapes", {}).get(info.name)
    shape = fixed or [d if isinstance(d, int) else 1 for d in info.shape]
    rng = np.random.default_rng(0)
    types = {"tensor(float)": np.float32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8}
    dtype = types.get(info.type, np.float32)
    if dtype == np.float32:
        return rng.standard_normal(shape).astype(np.float32)
    bounds = np.iinfo(dtype)
    return rng.integers(bounds.min, bounds.max + 1, size=shape).astype(dtype)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="target/test-models")
    parser.add_argument("--ferrite", default="target/release/ferrite")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--device", default="cpu", help="ferrite's device (cpu, vulkan, cuda:N, ...)")
    parser.add_argument("--provider", default="cpu", choices=["cpu", "cuda"],
                        help="onnxruntime's execution provider")
    parser.add_argument("--ort-threads", type=int, default=None,
                        help="onnxruntime's intra-op threads (default: 1 on the CPU provider, its own "
                             "default on CUDA; 0: its own default)")
    parser.add_argument("--only", default="", help="comma-separated model names (default: all)")
    parser.add_argument("--avx2-host", action="store_true",
                        help="hide AVX-512/VNNI from both sides (CPUID faulting; benches/avx2_host.c)")
    args = parser.parse_args()
    if args.avx2_host:
        enter_avx2_host()
    gpu = args.provider == "cuda"
    provider = "CUDAExecutionProvider" if gpu else "CPUExecutionProvider"
    if gpu and hasattr(ort, "preload_dlls"):
        ort.preload_dlls()  # the CUDA/cuDNN libraries of the nvidia-* wheels
    if provider not in ort.get_available_providers():
        sys.exit(f"error: onnxruntime {ort.__version__} has no {provider} "
                 f"(install onnxruntime-gpu for CUDA; available: {ort.get_available_providers()})")
    manifest = json.load(open(os.path.join(args.models, "manifest.json")))
    # The int8 models quantized by onnxruntime (QDQ form): onnxruntime runs them with its int8
    # kernels, Ferrite with its integer ops.
    quantized = json.load(open(os.path.join(args.models, "quantized.json")))
    if args.device == "cpu":  # Ferrite's GPU devices run f32
        manifest.update({name: entry for name, entry in quantized.items() if entry["form"] == "qdq"})
    os.makedirs("target/bench", exist_ok=True)
    ort_threads = args.ort_threads if args.ort_threads is not None else (0 if gpu else 1)
    threads = "default threads" if ort_threads == 0 else f"{ort_threads} thread{'s' * (ort_threads > 1)}"
    print(f"onnxruntime {ort.__version__} ({provider}, {threads}); ferrite device {args.device}; "
          f"best of {args.rounds} rounds' medians of {args.runs} runs; ratio < 1: Ferrite faster")
    simd = "?"
    only = set(filter(None, args.only.split(",")))
    models = []  # (name, frt, input path, session, feed)
    for name, entry in sorted(manifest.items()):
        if only and name not in only:
            continue
        onnx_path = os.path.join(args.models, f"{name}.onnx")
        frt = os.path.join("target/bench", f"{name}.frt")
        shape_args = []
        for input_name, dims in entry["input_shapes"].items():
            shape_args += ["--input-shape", f"{input_name}={'x'.join(map(str, dims))}"]
        subprocess.run([args.ferrite, "pack", onnx_path, "-o", frt, *shape_args], check=True, capture_output=True)
        options = ort.SessionOptions()
        if ort_threads:
            options.intra_op_num_threads = ort_threads
            options.inter_op_num_threads = 1
        session = ort.InferenceSession(onnx_path, options, providers=[provider])
        input_path = os.path.join(args.models, f"{name}.input_0.npy")
        if not os.path.exists(input_path) and entry.get("samples"):
            input_path = os.path.join(args.models, entry["samples"][0][0])  # the MLPerf Tiny models
        if not os.path.exists(input_path):
            # A model without reference data: deterministic random input.
            input_path = os.path.join("target/bench", f"{name}.input_0.npy")
            np.save(input_path, random_input(session.get_inputs()[0], entry))
        feed = {session.get_inputs()[0].name: np.load(input_path)}
        if args.device != "cpu":
            # A model the device refuses (an op it lacks) is a row saying so, not the end.
            probe = subprocess.run([args.ferrite, "bench", frt, "--runs", "1", "--json", "--device", args.device,
                                    "--input", input_path],
                                   capture_output=True, text=True)
            if probe.returncode != 0:
                print(f"  {name}: refused: {probe.stderr.strip()}", file=sys.stderr)
                continue
        models.append((name, frt, input_path, session, feed))
    # Rounds go over every model in turn, so that each model's rounds spread over the whole run
    # and meet the machine's quiet and busy phases alike; within a round, the two sides run back
    # to back.
    ferrite_rounds = {name: [] for name, *_ in models}
    ort_rounds = {name: [] for name, *_ in models}
    for _ in range(args.rounds):
        for name, frt, input_path, session, feed in models:
            out = subprocess.run([args.ferrite, "bench", frt, "--runs", str(args.runs), "--json",
                                  "--device", args.device,
                                  "--input", input_path],
                                 check=True, capture_output=True, text=True)
            report = json.loads(out.stdout)
            ferrite_rounds[name].append(report["median_us"])
            simd = report.get("simd") or simd
            # Warm up for at least 100 ms, as `ferrite bench` does.
            warm = time.perf_counter()
            while time.perf_counter() - warm < 0.1:
                session.run(None, feed)
            ort_rounds[name].append(ort_median_us(session, feed, args.runs))
    rows = []
    for name, *_ in models:
        pairs = list(zip(ferrite_rounds[name], ort_rounds[name]))
        # Each side's best round (the quietest moment of the machine it met), and the median of
        # the rounds' own ratios: a slow phase of a shared machine (another tenant on the
        # sibling core) slows both sides of a round.
        f, o = min(ferrite_rounds[name]), min(ort_rounds[name])
        ratio = float(np.median([a / b for a, b in pairs]))
        rows.append((name, f, o, ratio))
        print(f"  {name}: ferrite {f:.1f} us, onnxruntime {o:.1f} us; rounds: "
              + " ".join(f"{a:.0f}/{b:.0f}" for a, b in pairs), file=sys.stderr)
    if args.avx2_host:
        ort_isa = (f"AVX2 dispatch (this CPU: {cpu_isa()[8:]}; AVX-512, AVX-VNNI, AVX10 and AMX "
                   f"hidden from both sides by CPUID faulting)")
    else:
        ort_isa = f"its own dispatch on this CPU ({cpu_isa()}; it cannot be forced)"
    print(f"ferrite: {args.device} device, SIMD build {simd}; onnxruntime: {ort_isa}")
    int8 = {name for name, entry in quantized.items()}
    for title, members in (("float", [r for r in rows if r[0] not in int8]),
                           ("int8 (QDQ)", [r for r in rows if r[0] in int8])):
        if not members:
            continue
        print(f"\n{title}\n| model | ferrite us | onnxruntime us | ferrite / onnxruntime "
              f"| median of the rounds' ratios |")
        print("|---|---:|---:|---:|---:|")
        for name, f, o, ratio in members:
            print(f"| {name} | {f:.1f} | {o:.1f} | {f / o:.2f} | {ratio:.2f} |")
        best = float(np.exp(np.mean([np.log(f / o) for _, f, o, _ in members])))
        rounds = float(np.exp(np.mean([np.log(ratio) for *_, ratio in members])))
        print(f"| geometric mean | | | {best:.2f} | {rounds:.2f} |")
    sys.stdout.flush()


def enter_avx2_host():
    """Reruns this script with benches/avx2_host.c preloaded (built into target/bench with gcc), or,
    when already rerun, checks that the CPUID bits are hidden; exits with an error where the CPU
    or kernel lacks CPUID faulting."""
    import ctypes
    if os.environ.get("FERRITE_AVX2_HOST") == "1":
        try:
            active = ctypes.CDLL(None).avx2_host_active()
        except AttributeError:
            active = 0
        if not active:
            sys.exit("error: --avx2-host: CPUID faulting is unavailable on this CPU or kernel "
                     "(no cpuid_fault in /proc/cpuinfo); the AVX-512 features cannot be hidden")
        return
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "avx2_host.c")
    library = os.path.abspath(os.path.join("target/bench", "avx2_host.so"))
    os.makedirs(os.path.dirname(library), exist_ok=True)
    if not os.path.exists(library) or os.path.getmtime(library) < os.path.getmtime(source):
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", library, source], check=True)
    env = dict(os.environ, FERRITE_AVX2_HOST="1",
               LD_PRELOAD=" ".join(filter(None, [library, os.environ.get("LD_PRELOAD")])))
    env.pop("FERRITE_CPU_SIMD", None)  # Ferrite detects AVX2 itself, as on such a host
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def cpu_isa():
    """The x86 vector extensions this CPU reports (what onnxruntime's MLAS dispatches on)."""
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "CPU features unknown"
    names = ["avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512bw"]
    have = [n for n in names if n in flags]
    return "CPU has " + (", ".join(have) if have else "no AVX2")


if __name__ == "__main__":
    main()
