#!/usr/bin/env python3
"""The footprint gate: flash, stack, arena and instructions of each model's own firmware.

For every model below it packs the ONNX file, runs `ferrite bench MODEL.frt --device qemu-m4
--json` (which builds `boards/template` around the model and runs it on QEMU's Cortex-M4F next
to the every-kernel firmware), and compares with the checked-in figures in
`tests/expectations/footprint.txt`:

- a figure more than 3 % above its checked-in value fails the gate (exit 1), naming it;
- `panic_sites`, the calls into Rust's panic machinery left in the firmware's code (each a path
  by which data could panic the device: the `no_std` crates are meant to have none), may not
  grow at all: a model whose firmware links none keeps linking none;
- a figure below it passes and prints the line to check in;
- `--update` rewrites the file with the measured figures.

The figures depend on the Rust compiler; the file records which one measured them.

Usage: scripts/footprint_gate.py FERRITE_BINARY [--update]   (scripts/test.sh runs it in CI)
"""
import json
import pathlib
import re
import subprocess
import sys
import zlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "target/test-models"
WORK = ROOT / "target/footprint-gate"
EXPECTED = ROOT / "tests/expectations/footprint.txt"
TOLERANCE = 1.03
COLUMNS = ["runtime_flash", "inference_stack", "arena", "instructions", "panic_sites"]
# Columns that may not grow at all.
EXACT = {"panic_sites"}
# The panic machinery: a call into it from Ferrite's code is a path by which data could panic.
PANIC = ("core::panicking::", "core::slice::index::", "core::option::unwrap_failed",
         "core::result::unwrap_failed", "core::cell::panic_already")
# A call or branch (a tail call, a conditional one) to the start of a function.
CALL = re.compile(r"\sb[a-z]*(?:\.w|\.n)?\s+[0-9a-f]+ <([^>+]+)>")
FUNCTION = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")


def panic_sites(elf):
    """Calls into the panic machinery from outside it in `elf`'s code (0: the firmware links no
    panic path at all)."""
    listing = subprocess.run(["arm-none-eabi-objdump", "-d", "-C", "--no-show-raw-insn", str(elf)],
                             check=True, capture_output=True, text=True).stdout
    sites, inside = 0, False
    for line in listing.splitlines():
        function = FUNCTION.match(line)
        if function:
            inside = function.group(1).startswith(PANIC)
            continue
        call = CALL.search(line)
        if call and not inside and call.group(1).startswith(PANIC):
            sites += 1
    return sites


def models():
    """(name, onnx, input shapes) of every gated model: the digits demo, the float test models, three
    scikit-learn models and a k-NN pipeline, onnxruntime's int8 QDQ models (and the DS-CNN with int16
    activations, TFLite's 16 x 8 scheme) and the four MLPerf Tiny int8 reference models."""
    manifest = json.loads((MODELS / "manifest.json").read_text())
    quantized = json.loads((MODELS / "quantized.json").read_text())
    yield "digits", ROOT / "demo/digits.onnx", {}
    for name in ["mlp", "ds_cnn", "fc_autoencoder", "resnet8", "mobilenet_v1_025", "kws_frontend"]:
        yield name, MODELS / f"{name}.onnx", manifest[name]["input_shapes"]
    # scikit-learn pipelines (ai.onnx.ml), one row per inference.
    yield "sklearn_logistic_iris", MODELS / "sklearn_logistic_iris.onnx", {"X": [1, 4]}
    yield "sklearn_linear_diabetes", MODELS / "sklearn_linear_diabetes.onnx", {"X": [1, 10]}
    yield "sklearn_forest_cancer", MODELS / "sklearn_forest_cancer.onnx", {"X": [1, 30]}
    yield "sklearn_knn_iris", MODELS / "sklearn_knn_iris.onnx", {"X": [1, 4]}
    for name in ["mlp_qdq", "ds_cnn_qdq", "resnet8_qdq", "ds_cnn_qdq16", "mlperf_kws_ds_cnn",
                 "mlperf_ad_fc_ae", "mlperf_ic_resnet8", "mlperf_vww_mbv1"]:
        yield name, MODELS / f"{name}.onnx", quantized[name]["input_shapes"]


def measure(ferrite, name, onnx, shapes):
    frt = WORK / f"{name}.frt"
    args = [ferrite, "pack", str(onnx), "-o", str(frt)]
    for input_name, dims in shapes.items():
        args += ["--input-shape", f"{input_name}=" + "x".join(str(d) for d in dims)]
    subprocess.run(args, check=True, capture_output=True)
    out = subprocess.run([ferrite, "bench", str(frt), "--device", "qemu-m4", "--runs", "1",
                          "--json"], check=True, capture_output=True, text=True).stdout
    doc = json.loads(out)
    own = doc["model_firmware"]
    if "error" in own:
        sys.exit(f"footprint gate: {name}: {own['error']}")
    # The firmware `ferrite bench` built: named after the model file's CRC-32 and length.
    data = frt.read_bytes()
    elf = (ROOT / "boards/target/model-firmware" / f"{zlib.crc32(data):08x}-{len(data)}"
           / "firmware-release.elf")
    figures = {
        "runtime_flash": own["runtime_flash_bytes"],
        "inference_stack": own["inference_stack_bytes"],
        "arena": doc["arena_bytes"],
        "instructions": own["instructions_per_inference"],
        "panic_sites": panic_sites(elf),
    }
    every = {"flash": doc["firmware_flash_bytes"], "stack": doc["inference_stack_bytes"]}
    return figures, every


def read_expected():
    expected, rustc = {}, None
    for line in EXPECTED.read_text().splitlines():
        if line.startswith("# rustc:"):
            rustc = line.split(":", 1)[1].strip()
        if not line.strip() or line.startswith("#"):
            continue
        name, *values = line.split()
        # A file from before a column existed: the missing figures are unchecked.
        expected[name] = {c: int(v) for c, v in zip(COLUMNS, values)}
        for column in COLUMNS[len(values):]:
            expected[name][column] = sys.maxsize
    return expected, rustc


def line_of(name, figures):
    return f"{name:<26}" + "".join(f"{figures[c]:>16}" for c in COLUMNS)


def main():
    ferrite = sys.argv[1]
    update = "--update" in sys.argv[2:]
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    WORK.mkdir(parents=True, exist_ok=True)
    measured = {}
    every = {"flash": 0, "stack": 0}
    for name, onnx, shapes in models():
        measured[name], e = measure(ferrite, name, onnx, shapes)
        every = {k: max(every[k], e[k]) for k in every}
        print(line_of(name, measured[name]), file=sys.stderr)
    # The every-kernel firmware (one build for all models): its flash and deepest inference stack.
    every_elf = ROOT / "boards/target/thumbv7em-none-eabihf/release/qemu-mps2-an386"
    measured["every_kernel"] = {"runtime_flash": every["flash"], "inference_stack": every["stack"],
                                "arena": 0, "instructions": 0, "panic_sites": panic_sites(every_elf)}
    if update:
        lines = [
            "# Footprint gate (scripts/footprint_gate.py): each model's own firmware on QEMU's",
            "# Cortex-M4F (boards/template, built by `ferrite bench --device qemu-m4`). CI fails when a",
            "# figure grows by more than 3 % (panic_sites: by any); rerun with --update to check in",
            "# smaller ones.",
            f"# rustc: {rustc}",
            f"# {'model':<24}" + "".join(f"{c:>16}" for c in COLUMNS),
        ] + [line_of(name, figures) for name, figures in measured.items()]
        EXPECTED.write_text("\n".join(lines) + "\n")
        print(f"wrote {EXPECTED.relative_to(ROOT)}", file=sys.stderr)
        return
    expected, recorded_rustc = read_expected()
    grew, shrank = [], []
    for name, figures in measured.items():
        if name not in expected:
            grew.append(f"{name} has no checked-in figures; add: {line_of(name, figures)}")
            continue
        for column in COLUMNS:
            old, new = expected[name][column], figures[column]
            if new > (old if column in EXACT else old * TOLERANCE):
                grew.append(f"{name} {column}: {new} > {old} + 3 %")
            elif new < old:
                shrank.append(name)
    for name in sorted(set(shrank)):
        print(f"footprint gate: {name} shrank; check in: {line_of(name, measured[name])}")
    if grew:
        for g in grew:
            print(f"footprint gate: {g}", file=sys.stderr)
        if recorded_rustc and recorded_rustc != rustc:
            print(f"footprint gate: the figures were recorded with {recorded_rustc}, this is {rustc}"
                  " (rerun with --update if the change is the compiler's)", file=sys.stderr)
        sys.exit(1)
    print(f"footprint gate: {len(measured)} firmwares within 3 % of {EXPECTED.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
