#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Sets up mdfuser if needed, then runs every check:
#   1. lint: ruff (Python) and clang-format (C++);
#   2. the C++ tests (ctest), warnings as errors, including the
#      multi-process ones under mpirun -np 2;
#   3. the compiler stages again under AddressSanitizer and UBSan;
#   4. pytest in one process (tests/python, multidevice tests at d = 1);
#   5. the multi-process pytest: tests/python/multidevice under mpirun -np 8
#      (oversubscribed where the machine has fewer cores), -np 4, -np 3 (a
#      world that is no power of two, rings of odd length), -np 2, then
#      -np 1.
# On a machine without GPUs everything runs on CPU tensors with Gloo; the
# GPU-only tests skip.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export MDFUSER_CMAKE_ARGS="${MDFUSER_CMAKE_ARGS:-} -DMDFUSER_WARNINGS_AS_ERRORS=ON"
"$ROOT/scripts/setup.sh"
PYTHON=$(command -v "${PYTHON:-python3}")
BUILD_DIR=${MDFUSER_BUILD_DIR:-$ROOT/build}
JOBS=$(nproc)

step() { echo; echo "=== $* ==="; }

# pytest exits 5 when it collects nothing, which a filtered run may do.
run_pytest() {
  local rc=0
  "$@" || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
    return "$rc"
  fi
}

step "lint"
"$PYTHON" -m ruff check python tests/python examples benchmarks
"$PYTHON" -m ruff format --check python tests/python examples benchmarks
git ls-files -- 'csrc/*.cpp' 'csrc/*.h' 'python/csrc/*' 'tests/cpp/*.cpp' 'tests/cpp/*.h' \
  | xargs clang-format --dry-run --Werror

step "C++ tests"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 600

step "compiler stages under AddressSanitizer and UBSan"
ASAN_DIR="$ROOT/build-asan"
mkdir -p "$ASAN_DIR"
cmake -S "$ROOT" -B "$ASAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DMDFUSER_BUILD_RUNTIME=OFF -DMDFUSER_SANITIZE=address,undefined \
  -DMDFUSER_WARNINGS_AS_ERRORS=ON >"$ASAN_DIR/configure.log" 2>&1 \
  || { cat "$ASAN_DIR/configure.log"; exit 1; }
cmake --build "$ASAN_DIR"
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir "$ASAN_DIR" --output-on-failure -j "$JOBS" --timeout 600

step "pytest, one process"
run_pytest "$PYTHON" -m pytest tests/python -q -p no:cacheprovider

mpi_args=(--oversubscribe --timeout 900 -x MDFUSER_TIMEOUT_S=120)
[ "$(id -u)" -ne 0 ] || mpi_args+=(--allow-run-as-root)
for np in 8 4 3 2 1; do
  step "pytest tests/python/multidevice under mpirun -np $np"
  run_pytest mpirun "${mpi_args[@]}" -np "$np" -x MDFUSER_PORT=$((29700 + np)) \
    "$PYTHON" -m pytest tests/python/multidevice -q -p no:cacheprovider
done
step "all checks passed"
