#!/usr/bin/env python3
"""Counts the ONNX node tests of the ops issue 6 lists that pass on a device, per op.

    FERRITE_NODE_TESTS=.../onnx/backend/test/data/node python scripts/node_coverage.py [DEVICE]

A test passes unless tests/expectations/DEVICE-node.txt (default cpu) lists it. A test counts
for the op it exercises: its only op (Constant aside), or for expanded and multi-op tests the
op its name starts with. Tests whose inputs or outputs are strings, complex numbers, float8,
2- or 4-bit types, sequences or optionals are left out, as the issue says.
"""
import collections
import os
import sys

import onnx

LISTED = """LSTM GRU RNN LayerNormalization Gelu Erf InstanceNormalization GroupNormalization Resize Upsample
Where Equal Greater Less GreaterOrEqual LessOrEqual Not And Or Xor Expand Tile ArgMax ArgMin TopK
CumSum Einsum Range ConstantOfShape Shape Size Cast CastLike Exp Log Sqrt Reciprocal Pow Neg Abs
Sign Floor Ceil Round Sin Cos Min Max Mean Sum PRelu Elu Selu Celu Softplus Softsign Mish
ThresholdedRelu LogSoftmax Hardmax GlobalMaxPool LpPool LpNormalization DepthToSpace SpaceToDepth
ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSumExp ReduceSumSquare OneHot GatherElements
GatherND ScatterElements ScatterND Trilu MatMul Dropout Identity Mod Det BitShift IsNaN
IsInf""".split()

T = onnx.TensorProto
EXCLUDED = {T.STRING, T.COMPLEX64, T.COMPLEX128, T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2,
            T.FLOAT8E5M2FNUZ, T.UINT4, T.INT4, T.UINT2, T.INT2, T.FLOAT4E2M1, T.FLOAT8E8M0}


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    failing = {}
    with open(os.path.join(root, "tests", "expectations", f"{device}-node.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, kind, reason = line.split()[:3]
                failing[name] = f"{kind} {reason}"
    node_dir = os.environ["FERRITE_NODE_TESTS"]
    per_op = collections.defaultdict(lambda: [0, 0])
    for test in sorted(os.listdir(node_dir)):
        path = os.path.join(node_dir, test, "model.onnx")
        if not os.path.exists(path):
            continue
        model = onnx.load(path)
        ops = [n.op_type for n in model.graph.node if n.op_type != "Constant"]
        main_op = ops[0] if ops and len(set(ops)) == 1 else None
        if main_op is None:
            for op in set(ops):
                if test[len("test_"):].lower().startswith(op.lower()):
                    main_op = op
        if main_op not in LISTED:
            continue
        types = set()
        for v in list(model.graph.input) + list(model.graph.output):
            types.add(v.type.tensor_type.elem_type if v.type.HasField("tensor_type") else -1)
        if types & EXCLUDED or -1 in types:
            continue
        per_op[main_op][1] += 1
        if test not in failing:
            per_op[main_op][0] += 1
        else:
            print(f"  {test}: {failing[test]}")
    passed = sum(p for p, _ in per_op.values())
    total = sum(n for _, n in per_op.values())
    print(f"{device}: {passed} of {total} node tests of the listed ops pass ({100 * passed / total:.1f} %)")
    print("  ".join(f"{op} {per_op[op][0]}/{per_op[op][1]}" for op in LISTED if op in per_op))


if __name__ == "__main__":
    main()
