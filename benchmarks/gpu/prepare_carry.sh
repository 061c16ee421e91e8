#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Fills .carry/ (ignored by git) with what the GPU machines lack and
# benchmarks/gpu/run.sh needs: GoogleTest's sources and Gloo's headers, both
# from this machine's Debian packages, the wheels of pytest-benchmark and of nvidia-cutlass (CUTLASS's headers). Pass `.carry` in the device tool's
# carry list. It installs nothing: scripts/setup.sh installs the packages
# (running it from here would also point the machine's editable mdfuser
# install at this checkout, which other checkouts on the machine share).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
for dir in /usr/src/googletest /usr/include/gloo; do
  [ -d "$dir" ] || { echo "$dir is missing: run scripts/setup.sh first" >&2; exit 1; }
done
rm -rf "$ROOT/.carry"
mkdir -p "$ROOT/.carry/gloo-include"
cp -r /usr/src/googletest "$ROOT/.carry/googletest"
cp -r /usr/include/gloo "$ROOT/.carry/gloo-include/"
# pytest-benchmark and its dependencies, as wheels for the GPU machines.
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: \
  -d "$ROOT/.carry/wheels" pytest-benchmark
# CUTLASS's headers for the fused matmul kernels (installed without its
# Python dependencies).
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: \
  --no-deps -d "$ROOT/.carry/wheels" -r "$ROOT/requirements-gpu.txt"
du -sh "$ROOT/.carry"
