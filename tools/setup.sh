#!/usr/bin/env bash
# tools/setup.sh - installs every Debian package Sinter needs to build, test and run.
#
# Idempotent: packages already present are skipped by apt. It runs `apt-get update` itself (only
# when something is missing), so it works on a fresh Debian 12 machine. Needs root or sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3 git
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools   # IR, passes, codegen, lit, FileCheck
  clang-14 libclang-rt-14-dev clang-format-14              # libFuzzer + sanitizers, format check
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools  # Vulkan + lavapipe
  spirv-tools spirv-headers                                 # SPIR-V validator and optimizer
  libabsl-dev libgtest-dev libgmock-dev googletest libbenchmark-dev      # support libraries
  graphviz                                                  # sinter-dump's .svg
)

# The Rust binding's test needs cargo; Debian's is enough (the crate has no dependencies). A cargo
# already on PATH or in ~/.cargo/bin (rustup) is used instead.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  packages+=(cargo)
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo); else
    echo "setup: not root and no sudo; install these packages yourself: ${packages[*]}" >&2
    exit 1
  fi
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
