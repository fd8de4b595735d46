#!/usr/bin/env bash
# Installs everything Ferrite's demo and tests need, idempotently: Rust components and targets,
# the Vulkan loader with Mesa's lavapipe (a CPU Vulkan driver) and the validation layer, QEMU and
# gcc (apt, when run as root), g++ (the CUDA kernels' host emulator), the aarch64 cross compiler
# and qemu-user (the Jetson cross-build check), and a Python virtual environment (.venv) with
# onnx, onnxruntime, numpy and scikit-learn.
# Usage: source scripts/setup.sh   (exports FERRITE_PYTHON)
set -euo pipefail
FERRITE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export FERRITE_ROOT

if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo not found; install Rust with rustup (https://rustup.rs)" >&2
    exit 1
fi
if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy >/dev/null 2>&1 || true
    for target in thumbv7em-none-eabihf thumbv6m-none-eabi thumbv8m.main-none-eabihf aarch64-unknown-linux-gnu; do
        rustup target list --installed | grep -qx "$target" || rustup target add "$target"
    done
fi

# Vulkan: the loader, lavapipe, the Khronos validation layer and spirv-val; QEMU for the Cortex-M
# firmware and gcc for its instruction-count plugin; g++ for the CUDA kernels' host emulator; the
# aarch64 cross compiler and qemu-user for the Jetson cross-build; arm-none-eabi GCC for the C
# firmware (boards/c-firmware) (Debian package names).
SYSTEM_PACKAGES="libvulkan1 mesa-vulkan-drivers vulkan-validationlayers spirv-tools qemu-system-arm gcc g++ gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user gcc-arm-none-eabi libnewlib-arm-none-eabi make"
missing=""
for package in $SYSTEM_PACKAGES; do
    dpkg -s "$package" >/dev/null 2>&1 || missing="$missing $package"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing$missing (apt)..."
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    else
        echo "warning: not installed:$missing — the Vulkan/QEMU tests will report themselves skipped" >&2
    fi
fi

VENV="$FERRITE_ROOT/.venv"
REQS="$FERRITE_ROOT/scripts/requirements.txt"
STAMP="$VENV/.requirements"
if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$REQS" "$STAMP"; then
    echo "setting up the Python environment in .venv (onnx, onnxruntime, numpy, scikit-learn)..."
    PYTHON="$(command -v python3 || command -v python)"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -r "$REQS"
    cp "$REQS" "$STAMP"
fi
export FERRITE_PYTHON="$VENV/bin/python"
