#!/usr/bin/env bash
# The Python package as a user gets it: the abi3 wheel built with maturin (target/wheels), then
# `pip install .` from the repository in a fresh virtual environment, and the pytest suite
# (python/tests: against onnxruntime and the CLI, and on bad input) on both.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$FERRITE_ROOT"

"$FERRITE_ROOT/.venv/bin/maturin" build --release --quiet --out target/wheels
WHEEL="$(ls -t target/wheels/ferrite-*-abi3-*.whl | head -1)"
echo "built $WHEEL"

VENV="$FERRITE_ROOT/target/python-venv"
rm -rf "$VENV"
"$("$FERRITE_PYTHON" -c 'import sys; print(sys._base_executable)')" -m venv "$VENV"
# The test dependencies, at the versions the rest of CI uses.
grep -E '^(onnx|onnxruntime|numpy|pytest)==' scripts/requirements.txt > "$VENV/requirements.txt"
"$VENV/bin/python" -m pip install --quiet -r "$VENV/requirements.txt"
"$VENV/bin/python" -m pip install --quiet .

export FERRITE_TEST_MODELS="${FERRITE_TEST_MODELS:-$FERRITE_ROOT/target/test-models}"
if [ -x target/debug/ferrite ]; then
    export FERRITE_CLI="$FERRITE_ROOT/target/debug/ferrite"
fi
# Outside the repository, so `import ferrite` is the installed package, not python/ferrite.
(cd "$VENV" && "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$FERRITE_ROOT/python/tests")
echo "== the same suite on the abi3 wheel"
"$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps "$WHEEL"
(cd "$VENV" && "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$FERRITE_ROOT/python/tests")
