#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Sets up mdfuser on a Debian machine: system packages, Python packages, the
# CMake build in build/, and an editable install so that `import mdfuser`
# works from any directory. Idempotent: each step does nothing when its work
# is already done.
#
# Environment:
#   PYTHON              interpreter to use (default: python3)
#   MDFUSER_BUILD_DIR   build directory (default: <repo>/build)
#   MDFUSER_CMAKE_ARGS  extra CMake arguments
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${MDFUSER_BUILD_DIR:-$ROOT/build}
PYTHON=$(command -v "${PYTHON:-python3}")

log() { echo "[setup] $*"; }

# 1. System packages: compilers and build tools, Open MPI for mpirun,
#    GoogleTest, and Gloo's headers (the torch wheel does not ship them).
missing=()
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v mpirun >/dev/null || missing+=(openmpi-bin)
command -v clang-format >/dev/null || missing+=(clang-format)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
[ -f /usr/include/gloo/algorithm.h ] || missing+=(libgloo-dev)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# 2. Python packages (pip leaves satisfied requirements alone).
log "checking Python packages for $PYTHON"
"$PYTHON" -m pip install -q --disable-pip-version-check -r "$ROOT/requirements-dev.txt"
# CUTLASS's headers for the fused matmul kernels, where torch has CUDA (the
# package's Python dependencies are not needed: only its headers are used).
if "$PYTHON" -c "import sys, torch; sys.exit(torch.version.cuda is None)"; then
  "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps -r "$ROOT/requirements-gpu.txt"
fi

# 3. The build: compiler stages, runtime, Python module and C++ tests.
mkdir -p "$BUILD_DIR"
log "configuring $BUILD_DIR (log: $BUILD_DIR/configure.log)"
# shellcheck disable=SC2086
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$PYTHON" \
  ${MDFUSER_CMAKE_ARGS:-} >"$BUILD_DIR/configure.log" 2>&1 \
  || { cat "$BUILD_DIR/configure.log"; exit 1; }
log "building in $BUILD_DIR"
cmake --build "$BUILD_DIR"

# 4. Editable install of the Python package (the module is built in place).
installed=$(cd / && "$PYTHON" -c "import mdfuser, os; print(os.path.dirname(mdfuser.__file__))" 2>/dev/null || true)
if [ "$installed" != "$ROOT/python/mdfuser" ]; then
  log "installing the mdfuser Python package (editable)"
  "$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e "$ROOT/python"
fi
(cd / && "$PYTHON" -c "import mdfuser; print('[setup] mdfuser ready:', mdfuser.__file__)")
