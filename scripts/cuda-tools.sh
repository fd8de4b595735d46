#!/usr/bin/env bash
# NVRTC and ptxas from the PyPI wheels (no CUDA toolkit needed): installs them into .venv and
# exports LD_LIBRARY_PATH (libnvrtc, which the CUDA device opens at run time) and FERRITE_PTXAS.
# Usage: source scripts/cuda-tools.sh   (after scripts/setup.sh)
CUDA_REQS="$FERRITE_ROOT/scripts/requirements-cuda.txt"
if ! cmp -s "$CUDA_REQS" "$FERRITE_ROOT/.venv/.requirements-cuda"; then
    "$FERRITE_PYTHON" -m pip install --quiet -r "$CUDA_REQS"
    cp "$CUDA_REQS" "$FERRITE_ROOT/.venv/.requirements-cuda"
fi
NVIDIA="$("$FERRITE_PYTHON" -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0] + "/x"))')"
export LD_LIBRARY_PATH="$NVIDIA/cuda_nvrtc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FERRITE_PTXAS="$NVIDIA/cuda_nvcc/bin/ptxas"
