#!/usr/bin/env bash
# The Python package as a user gets it: the abi3 wheel built with maturin (target/wheels) and
# its pytest suite (python/tests: against onnxruntime and the CLI, and on bad input) on it; and
# `pip install .` from the repository in a fresh virtual environment, which must import and run.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$FERRITE_ROOT"

"$FERRITE_ROOT/.venv/bin/maturin" build --release --quiet --out target/wheels
WHEEL="$(ls -t target/wheels/ferrite-*-abi3-*.whl | head -1)"
echo "built $WHEEL"

export FERRITE_TEST_MODELS="${FERRITE_TEST_MODELS:-$FERRITE_ROOT/target/test-models}"
if [ -x target/debug/ferrite ]; then
    export FERRITE_CLI="$FERRITE_ROOT/target/debug/ferrite"
fi
# The suite, on the wheel, in the project's environment (onnx and onnxruntime are there);
# run outside the repository, so `import ferrite` is the installed package, not python/ferrite.
"$FERRITE_PYTHON" -m pip install --quiet --force-reinstall --no-deps "$WHEEL"
(cd "$FERRITE_ROOT/target" && "$FERRITE_PYTHON" -m pytest -q -p no:cacheprovider "$FERRITE_ROOT/python/tests")

echo "== pip install . in a fresh virtual environment"
VENV="$FERRITE_ROOT/target/python-venv"
rm -rf "$VENV"
"$("$FERRITE_PYTHON" -c 'import sys; print(sys._base_executable)')" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet .
(cd "$VENV" && "$VENV/bin/python" - <<'PY'
import numpy as np
import ferrite

frt, report = ferrite.pack("../../demo/digits.onnx")
session = ferrite.Session(frt)
[scores] = session.run(None, {"image": np.zeros(session.inputs[0].shape, np.float32)})
assert scores.shape == (1, 10) and abs(float(scores.sum()) - 1.0) < 1e-5, scores
print(f"fresh venv: ferrite {ferrite.__version__} packs and runs the digits model (arena {report['arena_bytes']} B)")
PY
)
