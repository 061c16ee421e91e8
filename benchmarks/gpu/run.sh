#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# One call on a bare GPU machine: build mdfuser for Hopper, run the C++
# tests, the GPU tests on one GPU and under torchrun on 2 and 4 GPUs,
# compute-sanitizer on a small case, then the row-parallel benchmark.
# Every step runs even when an earlier one fails; logs and results go to
# $OUT (see doc/gpu_machines.md for what the machine lacks and how the
# .carry folder supplies it).
#
#   benchmarks/gpu/run.sh [--skip-tests] [--skip-bench] [--sizes H,T]
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-out}
WORK=$OUT/work
mkdir -p "$WORK"
SKIP_TESTS=0
SKIP_BENCH=0
H=8192
T=8192
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-tests) SKIP_TESTS=1 ;;
    --skip-bench) SKIP_BENCH=1 ;;
    --sizes) IFS=, read -r H T <<<"$2"; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# Multicast (NVLS) stays off on the shared multi-GPU machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 MDFUSER_TIMEOUT_S=120
export PYTHONPATH=$ROOT/python:$ROOT/tests/python${PYTHONPATH:+:$PYTHONPATH}
PYTHON=$(command -v python3)
NGPU=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"

# step NAME TIMEOUT_S COMMAND...: runs a step with a time limit, logs it to
# $WORK/NAME.log and records its outcome in the summary.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS rc=0
  echo "=== $name: $*"
  timeout --kill-after=10 "$limit" "$@" >"$WORK/$name.log" 2>&1 || rc=$?
  local verdict=ok
  [ "$rc" -eq 0 ] || verdict="FAILED rc=$rc"
  [ "$rc" -ne 124 ] || verdict="TIMED OUT after ${limit}s"
  printf '%-28s %-22s %4ds\n' "$name" "$verdict" $((SECONDS - start)) | tee -a "$SUMMARY"
  tail -n 5 "$WORK/$name.log"
  return 0
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  nvidia-smi topo -m
  "$PYTHON" -c "import torch, sys; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
  cmake --version | head -1; ninja --version; nvcc --version | tail -1
  command -v mpirun || echo "no mpirun"
  command -v compute-sanitizer || echo "no compute-sanitizer"
  nproc; free -g | head -2
} >"$WORK/env.log" 2>&1
echo "GPUs: $NGPU" | tee -a "$SUMMARY"

# --- build -----------------------------------------------------------------
step configure 300 cmake -S "$ROOT" -B "$ROOT/build-gpu" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$PYTHON" \
  -DMDFUSER_GTEST_SOURCE_DIR="$ROOT/.carry/googletest" \
  -DMDFUSER_GLOO_INCLUDE_DIR="$ROOT/.carry/gloo-include" \
  -DTORCH_CUDA_ARCH_LIST=9.0a
step build 900 cmake --build "$ROOT/build-gpu" -j "$(nproc)"

# --- tests -----------------------------------------------------------------
if [ "$SKIP_TESTS" -eq 0 ]; then
  step ctest 300 ctest --test-dir "$ROOT/build-gpu" -j 8 --output-on-failure --timeout 120
  step pytest_1proc 600 "$PYTHON" -m pytest tests/python -q -p no:cacheprovider -x
  for n in 2 4; do
    [ "$NGPU" -ge "$n" ] || continue
    step "pytest_torchrun_$n" 600 torchrun --nproc-per-node "$n" --master-port $((29400 + n)) \
      -m pytest tests/python/multidevice -q -p no:cacheprovider
  done
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
      step "sanitizer_$tool" 300 compute-sanitizer --tool "$tool" --error-exitcode 99 \
        "$PYTHON" examples/row_parallel_linear.py --hidden 64 --tokens 96 --chunks 3
    done
  fi
fi

# --- benchmark -------------------------------------------------------------
if [ "$SKIP_BENCH" -eq 0 ]; then
  for n in 2 4; do
    [ "$NGPU" -ge "$n" ] || continue
    step "bench_d$n" 600 torchrun --nproc-per-node "$n" --master-port $((29500 + n)) \
      benchmarks/row_parallel_linear.py -H "$H" -t "$T" --chunks 1,2,4,8 \
      --json "$OUT/row_parallel_linear_d$n.json" --trace "$WORK/trace_d$n"
  done
fi

# At most a few files come back: the summary, the JSON results, and one
# archive of every log and trace.
tar -czf "$OUT/logs.tar.gz" -C "$OUT" work
rm -rf "$WORK"
cat "$SUMMARY"
