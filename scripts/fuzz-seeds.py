#!/usr/bin/env python3
"""Writes the seed inputs of Ferrite's fuzz targets into fuzz/seeds/{onnx,frt,npy}:

- onnx: the ONNX backend node-test models of onnx 1.22.0 (small, one op each, every op and
  attribute Ferrite reads) and the generated test models' smallest ones;
- frt: the same models packed by `ferrite pack` (those it packs);
- npy: the node tests' inputs as .npy (every dtype), plus Fortran-order, format 2.0 and
  zero-size arrays.

    python scripts/fuzz-seeds.py FERRITE_BINARY
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = os.path.join(ROOT, "fuzz", "seeds")
NODE = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def main():
    ferrite = sys.argv[1]
    for kind in ("onnx", "frt", "npy"):
        os.makedirs(os.path.join(SEEDS, kind), exist_ok=True)
    count = {"onnx": 0, "frt": 0, "npy": 0}
    for test in sorted(os.listdir(NODE)):
        model = os.path.join(NODE, test, "model.onnx")
        if not os.path.exists(model) or os.path.getsize(model) > 16384:
            continue
        data = open(model, "rb").read()
        open(os.path.join(SEEDS, "onnx", test), "wb").write(data)
        count["onnx"] += 1
        frt = os.path.join(SEEDS, "frt", test)
        result = subprocess.run([ferrite, "pack", model, "-o", frt], capture_output=True)
        if result.returncode == 0 and os.path.getsize(frt) <= 65536:
            count["frt"] += 1
        elif os.path.exists(frt):
            os.remove(frt)
        pb = os.path.join(NODE, test, "test_data_set_0", "input_0.pb")
        if os.path.exists(pb) and count["npy"] < 400:
            tensor = onnx.TensorProto()
            tensor.ParseFromString(open(pb, "rb").read())
            try:
                array = numpy_helper.to_array(tensor)
            except Exception:
                continue
            if array.dtype.kind in "fiub" and array.nbytes <= 4096:
                np.save(os.path.join(SEEDS, "npy", f"{test}.npy"), array)
                count["npy"] += 1
    extra = {
        "fortran.npy": np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4)),
        "empty.npy": np.zeros((0, 3), dtype=np.int64),
        "scalar.npy": np.float64(2.5),
        "half.npy": np.arange(5, dtype=np.float16),
    }
    for name, array in extra.items():
        np.save(os.path.join(SEEDS, "npy", name), array)
    with open(os.path.join(SEEDS, "npy", "format2.npy"), "wb") as f:
        np.lib.format.write_array(f, np.ones((2, 2), dtype=np.uint8), version=(2, 0))
    print(f"seeds: {count['onnx']} onnx, {count['frt']} frt, {count['npy'] + len(extra) + 1} npy")


if __name__ == "__main__":
    main()
