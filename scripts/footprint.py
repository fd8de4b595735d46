#!/usr/bin/env python3
"""Regenerates docs/footprint.md: what each test model costs on a microcontroller.

For every generated test model (and the digits demo) it packs the ONNX file, runs it in Ferrite's
firmware on QEMU's Cortex-M4F (`ferrite bench --device qemu-m4 --json`) and records flash (the
firmware alone and with the model), RAM (arena + static + stack, by stack painting) and exact
instructions per inference; the digits model also runs on the Cortex-M0, M7 and M33 builds, the
MLPerf Tiny int8 models on the M7 and M33.

Usage: scripts/footprint.sh (builds what is needed, then runs this with the project's venv).
"""
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FERRITE = ROOT / "target/release/ferrite"
MODELS = ROOT / "target/test-models"
WORK = ROOT / "target/footprint"
ORDER = ["mlp", "ds_cnn", "fc_autoencoder", "resnet8", "mobilenet_v1_025"]
NAMES = {
    "mlp": "MLP 784-128-64-10",
    "ds_cnn": "KWS DS-CNN",
    "fc_autoencoder": "AD FC autoencoder",
    "resnet8": "IC ResNet-8",
    "mobilenet_v1_025": "VWW MobileNetV1-0.25",
    "digits": "digits demo MLP",
}
# TFLM flash without the model and peak stack, CMSIS-NN then reference kernels (shared/BENCHMARKS.md).
TFLM_FOOTPRINT = {
    "mlperf_kws_ds_cnn": ((84_544, 1_356), (41_688, 776)),
    "mlperf_vww_mbv1": ((84_544, 1_356), (41_688, 776)),
    "mlperf_ic_resnet8": ((79_404, 1_356), (46_100, 824)),
    "mlperf_ad_fc_ae": ((32_264, 868), (20_712, 512)),
}
MLPERF = {
    "mlperf_kws_ds_cnn": "KWS DS-CNN",
    "mlperf_vww_mbv1": "VWW MobileNetV1-0.25",
    "mlperf_ic_resnet8": "IC ResNet-8",
    "mlperf_ad_fc_ae": "AD FC autoencoder",
}
# TFLM + CMSIS-NN (int8) on the same emulated Cortex-M4F, from shared/BENCHMARKS.md.
TFLM = {
    "ds_cnn": (7_699_892, 43_042_471),
    "fc_autoencoder": (582_944, 1_952_292),
    "resnet8": (29_863_352, 107_404_887),
    "mobilenet_v1_025": (24_101_962, 100_250_553),
}
# Each MLPerf Tiny model's entry in TFLM.
MLPERF_TFLM = {
    "mlperf_kws_ds_cnn": "ds_cnn",
    "mlperf_vww_mbv1": "mobilenet_v1_025",
    "mlperf_ic_resnet8": "resnet8",
    "mlperf_ad_fc_ae": "fc_autoencoder",
}


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


# The Cortex-M4F firmware built with FERRITE_PORTABLE_KERNELS=1 (no DSP kernels), by footprint.sh.
PORTABLE_M4 = ROOT / "boards/target/portable/thumbv7em-none-eabihf/release/qemu-mps2-an386"


def bench(frt, device, firmware=None, profile=None):
    env = dict(os.environ)
    if firmware:
        env["FERRITE_FIRMWARE_QEMU_M4"] = str(firmware)
    if profile:
        env["FERRITE_MODEL_FIRMWARE_PROFILE"] = profile
    out = subprocess.run([str(FERRITE), "bench", str(frt), "--device", device, "--json"],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out)


def pack(onnx, shapes, frt, *extra):
    args = [str(FERRITE), "pack", str(onnx), "-o", str(frt), *extra]
    for name, dims in shapes.items():
        args += ["--input-shape", f"{name}=" + "x".join(str(d) for d in dims)]
    run(*args)


def strip_models(manifest, quantized):
    """The models whose `--strip-names` saving the page states: every test model and the
    MLPerf Tiny ones (names from tf2onnx are long)."""
    yield "digits", ROOT / "demo/digits.onnx", {}
    for name in ORDER:
        yield name, MODELS / f"{name}.onnx", manifest[name]["input_shapes"]
    for name in ["mlp_qdq", "ds_cnn_qdq", "resnet8_qdq", *MLPERF]:
        yield name, MODELS / f"{name}.onnx", quantized[name]["input_shapes"]


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((MODELS / "manifest.json").read_text())
    rows = []
    for name in ORDER:
        frt = WORK / f"{name}.frt"
        pack(MODELS / f"{name}.onnx", manifest[name]["input_shapes"], frt)
        rows.append((name, bench(frt, "qemu-m4")))
        print(f"{name}: {rows[-1][1]['instructions_per_inference']} instructions", file=sys.stderr)
    quantized = json.loads((MODELS / "quantized.json").read_text())
    # int8 by onnxruntime's quantizer (QDQ) and by Ferrite's (`--quantize int8`, on the same 16
    # calibration samples), each with the DSP kernels and with the portable ones.
    int8_rows = []
    for name in ["mlp_qdq", "ds_cnn_qdq", "resnet8_qdq"]:
        frt = WORK / f"{name}.frt"
        pack(MODELS / f"{name}.onnx", quantized[name]["input_shapes"], frt)
        int8_rows.append((name[: -len("_qdq")], bench(frt, "qemu-m4"), bench(frt, "qemu-m4", PORTABLE_M4)))
        print(f"{name}: {int8_rows[-1][1]['instructions_per_inference']} instructions", file=sys.stderr)
    # int16 activations with int8 weights (TFLite's 16 x 8 scheme), portable kernels only.
    wide_rows = []
    for name in ["mlp_qdq16", "ds_cnn_qdq16", "resnet8_qdq16"]:
        frt = WORK / f"{name}.frt"
        pack(MODELS / f"{name}.onnx", quantized[name]["input_shapes"], frt)
        wide_rows.append((name[: -len("_qdq16")], bench(frt, "qemu-m4")))
        print(f"{name}: {wide_rows[-1][1]['instructions_per_inference']} instructions", file=sys.stderr)
    ptq_rows = []
    for name in ORDER:
        frt = WORK / f"{name}_int8.frt"
        calibration = MODELS / "calibration" / name
        pack(MODELS / f"{name}.onnx", manifest[name]["input_shapes"], frt,
             "--quantize", "int8", "--calibration", str(calibration))
        ptq_rows.append((name, bench(frt, "qemu-m4"), bench(frt, "qemu-m4", PORTABLE_M4)))
        print(f"{name} --quantize int8: {ptq_rows[-1][1]['instructions_per_inference']} instructions", file=sys.stderr)
    # The MLPerf Tiny reference int8 models (what TFLM runs), each in its own firmware, built
    # for speed (`release`) and for size (`size`).
    own_rows = []
    for name in MLPERF:
        frt = WORK / f"{name}.frt"
        pack(MODELS / f"{name}.onnx", quantized[name]["input_shapes"], frt)
        own_rows.append((name, bench(frt, "qemu-m4"), bench(frt, "qemu-m4", profile="size")))
        print(f"{name}: own firmware {own_rows[-1][1]['model_firmware']['runtime_flash_bytes']} B", file=sys.stderr)
    digits = WORK / "digits.frt"
    pack(ROOT / "demo/digits.onnx", {}, digits)
    digits_size = bench(digits, "qemu-m4", profile="size")
    cores = {device: bench(digits, device) for device in ["qemu-m0", "qemu-m4", "qemu-m7", "qemu-m33"]}
    # The int8 DSP kernels on the three cores that have them.
    dsp_cores = ["qemu-m4", "qemu-m7", "qemu-m33"]
    dsp_rows = [(name, {device: bench(WORK / f"{name}.frt", device) for device in dsp_cores}) for name in MLPERF]
    rows.append(("digits", cores["qemu-m4"]))

    out = [
        "# Footprint on a microcontroller",
        "",
        "Generated by `scripts/footprint.sh` — do not edit; rerun it. Every model runs in Ferrite's",
        "real firmware (`boards/qemu-mps2-an386`: `ferrite-core` + `ferrite-cortex-m`, f32 portable",
        "kernels on the FPU, no heap) on QEMU's Cortex-M4F, started by",
        "`ferrite bench MODEL.frt --device qemu-m4 --json`.",
        "",
        "- **instructions / inference**: executed guest instructions between the firmware's markers",
        "  around `Session::run` (input copy excluded), counted exactly by a QEMU TCG plugin",
        "  (`boards/qemu-plugin`); identical on every run. QEMU is not cycle-accurate: instructions,",
        "  not time.",
        "- **flash**: the firmware's vector table, `.text`, `.rodata` and `.data` (it links every",
        "  kernel of every element type and the semihosting code of the test protocol), then with the packed",
        "  model (`.frt`, weights included) as it would sit in flash (`ferrite pack --emit rust`).",
        "- **RAM**: the arena (planned by `ferrite pack`, exact) + static RAM + the deepest stack",
        "  `Session::run` reached (stack painting around the inferences; the firmware's own",
        "  file I/O reaches deeper, shown separately).",
        "",
        "- **own firmware**: the same model in a firmware of its own (`boards/template`, built by",
        "  `ferrite bench` around the module `ferrite pack --emit rust` writes), which links only the",
        "  model's op kinds and element types: its flash without the model's bytes, its inference stack",
        "  and its instructions (within a few percent of the every-kernel firmware's: each build inlines differently).",
        "",
        "| model | instructions / inference | flash: firmware | flash: + model | arena | static | stack (inference) | RAM total | stack (whole firmware) | own firmware: flash | own: stack | own: instructions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        ram = r["arena_bytes"] + r["static_ram_bytes"] + r["inference_stack_bytes"]
        own = r["model_firmware"]
        out.append(
            f"| {NAMES[name]} | {r['instructions_per_inference']:,} | {r['firmware_flash_bytes']:,} | "
            f"{r['flash_bytes']:,} | {r['arena_bytes']:,} | {r['static_ram_bytes']:,} | "
            f"{r['inference_stack_bytes']:,} | {ram:,} | {r['stack_bytes']:,} | "
            f"{own['runtime_flash_bytes']:,} | {own['inference_stack_bytes']:,} | "
            f"{own['instructions_per_inference']:,} |"
        )
    out += [
        "",
        "## Each model's own firmware, against TFLM",
        "",
        "The MLPerf Tiny reference int8 models, each in a firmware of its own (only its op kinds and",
        "element types linked; the DSP kernels), next to TFLM's figures from `shared/BENCHMARKS.md`",
        "(each TFLM build registers its model's kernels with its op resolver). **speed**: the",
        "boards' `release` profile, as everywhere else on this page (the firmware's own crates,",
        "where the model's decoding, checks and dispatch are instantiated, at opt-level \"s\", the",
        "kernels' crates at 3, fat LTO; `boards/Cargo.toml`); **size**: the `size` profile",
        "(`cargo build --profile size` in `boards/template`: the firmware's own crates at \"z\"). Flash",
        "without the model's bytes; stack of one inference (Ferrite) and peak stack (TFLM).",
        "",
        "| model | own firmware: flash, speed | flash, size | TFLM + CMSIS-NN flash | TFLM reference flash | own: stack | TFLM + CMSIS-NN stack | instructions, speed | instructions, size | TFLM + CMSIS-NN instructions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r, small in own_rows:
        (cmsis_flash, cmsis_stack), (ref_flash, _) = TFLM_FOOTPRINT[name]
        own, own_small = r["model_firmware"], small["model_firmware"]
        cmsis_instr = TFLM[MLPERF_TFLM[name]][0]
        out.append(
            f"| {MLPERF[name]} | {own['runtime_flash_bytes']:,} | {own_small['runtime_flash_bytes']:,} | "
            f"{cmsis_flash:,} | {ref_flash:,} | {own['inference_stack_bytes']:,} | {cmsis_stack:,} | "
            f"{own['instructions_per_inference']:,} | {own_small['instructions_per_inference']:,} | "
            f"{cmsis_instr:,} |"
        )
    d, ds = cores["qemu-m4"]["model_firmware"], digits_size["model_firmware"]
    out += [
        "",
        f"The digits demo MLP (f32) in its own firmware: {d['runtime_flash_bytes']:,} B of flash besides",
        f"the model, {d['inference_stack_bytes']:,} B of inference stack, {d['instructions_per_inference']:,}",
        f"instructions (speed); {ds['runtime_flash_bytes']:,} B and {ds['instructions_per_inference']:,}",
        "instructions (size). The every-kernel firmware links every kernel of every element type for",
        "models sent by the host; the gate in CI (`scripts/footprint_gate.py`,",
        "`tests/expectations/footprint.txt`) holds the speed figures to within 3 %.",
        "",
        "## Names out of flash",
        "",
        "A `.frt` keeps every tensor's and op's name for `inspect` and error messages; on a",
        "microcontroller they are dead weight. `ferrite pack --strip-names` leaves them out (they go to",
        "`MODEL.names.json`, which `inspect` reads) and the model runs identically:",
        "",
        "| model | .frt | with `--strip-names` | saved |",
        "|---|---:|---:|---:|",
    ]
    for name, onnx, shapes in strip_models(manifest, quantized):
        named, bare = WORK / f"{name}.named.frt", WORK / f"{name}.bare.frt"
        pack(onnx, shapes, named)
        pack(onnx, shapes, bare, "--strip-names")
        a, b = named.stat().st_size, bare.stat().st_size
        out.append(f"| {name} | {a:,} | {b:,} | {a - b:,} ({100 * (a - b) / a:.1f} %) |")
    f32 = dict(rows)
    out += [
        "",
        "## int8",
        "",
        "Two sources: the MLP, DS-CNN and ResNet-8 quantized by onnxruntime's `quantize_static`",
        "(QDQ form, per-channel int8 weights, int8 activations; `tests/models/generate.py`), and every",
        "test model quantized by Ferrite itself (`ferrite pack --quantize int8`, min/max calibration on",
        "the same 16 samples). `ferrite pack` turns both into integer ops (QConv, QGemm, QAdd,",
        "QGlobalAveragePool; see `docs/quantization.md`); what has no integer kernel yet runs in float",
        "between QuantizeLinear and DequantizeLinear. **DSP**: the firmware as built for the M4F, with",
        "the `SXTB16`/`SMLAD` kernels; **portable**: the same firmware built with",
        "`FERRITE_PORTABLE_KERNELS=1` (bit-exact outputs, checked by `tests/tests/qemu.rs`).",
        "",
        "| model | quantized by | instructions, DSP | instructions, portable | DSP vs f32 | flash: model | vs f32 | arena | vs f32 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for source, table in [("onnxruntime", int8_rows), ("Ferrite", ptq_rows)]:
        for name, r, portable in table:
            f = f32[name]
            out.append(
                f"| {NAMES[name]} | {source} | {r['instructions_per_inference']:,} | "
                f"{portable['instructions_per_inference']:,} | "
                f"{r['instructions_per_inference'] / f['instructions_per_inference']:.2f}x | "
                f"{r['model_bytes']:,} | {r['model_bytes'] / f['model_bytes']:.2f}x | "
                f"{r['arena_bytes']:,} | {r['arena_bytes'] / f['arena_bytes']:.2f}x |"
            )
    out += [
        "",
        "## 16 x 8: int16 activations, int8 weights",
        "",
        "The same three models quantized by onnxruntime with `QInt16` activations (TFLite's 16 x 8",
        "scheme; `docs/quantization.md`): QConv, QGemm, QAdd and QGlobalAveragePool on int16 tensors",
        "with 64-bit sums, in the portable kernels (no DSP form yet). Each model's own firmware.",
        "",
        "| model | instructions | vs int8 (DSP) | vs f32 | own firmware: runtime flash | inference stack | arena | vs int8 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    int8 = {name: r for name, r, _ in int8_rows}
    for name, r in wide_rows:
        f, q, own = f32[name], int8[name], r["model_firmware"]
        out.append(
            f"| {NAMES[name]} | {own['instructions_per_inference']:,} | "
            f"{own['instructions_per_inference'] / q['model_firmware']['instructions_per_inference']:.2f}x | "
            f"{own['instructions_per_inference'] / f['instructions_per_inference']:.2f}x | "
            f"{own['runtime_flash_bytes']:,} | {own['inference_stack_bytes']:,} | "
            f"{r['arena_bytes']:,} | {r['arena_bytes'] / q['arena_bytes']:.2f}x |"
        )
    out += [
        "",
        "## The same digits model on four cores",
        "",
        "| core (QEMU machine) | instructions / inference | flash: firmware (+ model) |",
        "|---|---:|---:|",
    ]
    for device, r in cores.items():
        embedded = " (model embedded)" if device == "qemu-m0" else f" ({r['flash_bytes']:,})"
        out.append(
            f"| {r['core']} | {r['instructions_per_inference']:,} | {r['firmware_flash_bytes']:,}{embedded} |"
        )
    out += [
        "",
        "The Cortex-M0 has no FPU: every f32 operation is a software routine. Its firmware embeds the",
        "digits model and links only the kernels that model uses (`CortexMDevice::<_, { digits::OPS }>`,",
        "from `ferrite pack --emit rust`); the M4/M7/M33 firmware runs models sent by the host, so it",
        "links every kernel.",
        "",
        "## The int8 DSP kernels on the M4, M7 and M33",
        "",
        "The MLPerf Tiny models in the every-kernel firmwares of the three cores with the DSP",
        "extension (the M33 build: ARMv8-M Mainline, `-C target-cpu=cortex-m33`), bit-exact with each",
        "other and with the portable kernels (`tests/tests/qemu.rs`):",
        "",
        "| model | Cortex-M4F | Cortex-M7 | Cortex-M33 | TFLM + CMSIS-NN (M4) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in dsp_rows:
        counts = " | ".join(f"{r[d]['instructions_per_inference']:,}" for d in dsp_cores)
        out.append(f"| {MLPERF[name]} | {counts} | {TFLM[MLPERF_TFLM[name]][0]:,} |")
    out += [
        "",
        "## Against TFLM + CMSIS-NN (int8) on the same emulated core",
        "",
        "From `shared/BENCHMARKS.md` (same QEMU machine and plugin method). Ferrite's numbers here are",
        "**f32**; TFLM's are int8, so this compares an f32 model with an int8 one of the same network.",
        "",
        "| model | Ferrite f32 | TFLM int8, CMSIS-NN | TFLM int8, reference kernels | Ferrite f32 / CMSIS-NN int8 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        if name in TFLM:
            cmsis, ref = TFLM[name]
            ours = r["instructions_per_inference"]
            out.append(f"| {NAMES[name]} | {ours:,} | {cmsis:,} | {ref:,} | {ours / cmsis:.2f} |")
    out += [
        "",
        "And int8 against int8: Ferrite's own quantization (`--quantize int8`) with the DSP kernels",
        "against TFLM's, on the same core:",
        "",
        "| model | Ferrite int8 (DSP) | TFLM int8, CMSIS-NN | Ferrite / CMSIS-NN | Ferrite int8 (portable) | TFLM int8, reference kernels | Ferrite / reference |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r, portable in ptq_rows:
        if name in TFLM:
            cmsis, ref = TFLM[name]
            ours, plain = r["instructions_per_inference"], portable["instructions_per_inference"]
            out.append(
                f"| {NAMES[name]} | {ours:,} | {cmsis:,} | {ours / cmsis:.2f} | {plain:,} | {ref:,} | {plain / ref:.2f} |"
            )
    (ROOT / "docs/footprint.md").write_text("\n".join(out) + "\n")
    print("wrote docs/footprint.md", file=sys.stderr)


if __name__ == "__main__":
    main()
