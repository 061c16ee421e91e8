#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Native backtraces of a crashing run on a GPU machine, which has cuda-gdb
# but no gdb: builds with debug information, then runs COMMAND under
# cuda-gdb (under `mpirun -np NP` when NP > 1, one debugger per rank).
#
#   benchmarks/gpu/backtrace.sh NP COMMAND...
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
np=$1
shift
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$ROOT/python:$ROOT/tests/python${PYTHONPATH:+:$PYTHONPATH}
PYTHON=$(command -v python3)
# The image points CXX at /opt/gcc's g++, whose libstdc++ headers do not
# match the system libstdc++ that Python and torch load: code it compiles
# crashes in iostreams. Build with the system compiler, and make it nvcc's
# host compiler too (the image sets CUDAHOSTCXX to /opt/gcc's).
if [ -x /usr/bin/g++ ]; then
  export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
fi
rm -rf "$ROOT/build-gpu"
cmake -S "$ROOT" -B "$ROOT/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPython_EXECUTABLE="$PYTHON" -DMDFUSER_BUILD_TESTS=OFF \
  -DMDFUSER_GLOO_INCLUDE_DIR="$ROOT/.carry/gloo-include" >/dev/null || exit 1
cmake --build "$ROOT/build-gpu" -j "$(nproc)" >/dev/null || exit 1
debug=(cuda-gdb -batch -ex "set pagination off" -ex "set cuda api_failures ignore"
  -ex run -ex bt -ex "info threads" --args)
if [ "$np" -gt 1 ]; then
  exec mpirun --allow-run-as-root -np "$np" -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST \
    -x NVSHMEM_DISABLE_NVLS -x PYTHONPATH -x MDFUSER_TIMEOUT_S=60 "${debug[@]}" "$@"
fi
exec "${debug[@]}" "$@"
