#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# One call on a bare GPU machine: build mdfuser for Hopper, run the C++
# tests, the GPU tests on one GPU and under torchrun on 2 and 4 GPUs,
# compute-sanitizer on a small case, then the row-parallel benchmark and,
# with --blocks, the transformer block benchmark. Every step runs even when
# an earlier one fails. Results go to $OUT: the summary, one log of every
# step, the benchmark JSON in one archive (results.tar.gz, results/*.json)
# and every rank's profiler traces in another (traces.tar.gz), both
# repacked after every step, so that a call returns at most four files
# whatever it runs (the device tool returns eight) and what ran before a
# step that outlasts the call (see doc/gpu_machines.md for what the
# machine lacks and how the .carry folder supplies it).
#
#   benchmarks/gpu/run.sh [--skip-tests] [--skip-bench] [--high-priority] [--sweep]
#                         [--sanitizer] [--sizes H,T] [--blocks] [--rings] [--balanced]
#                         [--skip-1proc] [--skip-faults] [--world-sizes "2 4"] [--kernels]
#
# The tests and the benchmarks run at every world size of 2, 4 and 8 the
# machine has GPUs for; --high-priority repeats each row-parallel benchmark
# with NCCL on high-priority streams.
#
# --blocks runs benchmarks/transformer_blocks.py (MLP, attention, layer; TP
# and SP) at its default GPU sizes (at d = 1 on a machine of one GPU), one
# torchrun per block so that a failing
# block leaves the others' results, merged into one
# results/transformer_blocks_d<N>.json per world size.
#
# --rings runs benchmarks/ring_pairs.py (the allgather + column-parallel
# linear and the row-parallel linear + reduce-scatter; mdfuser's
# collectives, its NCCL rings and CUDA-backend rings, torch's fused async-TP
# ops, and on Hopper the fused allgather + GEMM kernel) at each world size
# of 2, 4 and 8 the machine has, at H,T (--sizes), again with the balanced
# --k 2048, and at the reference's fp16 M = N = K = 1024 (both pairs,
# --queued 16), one torchrun per shape. All its
# records go into one file, results/ring_pairs.json, merged after every run.
# On a machine of one GPU it runs benchmarks/gpu/ring_host_time.py instead:
# two processes sharing the GPU, the host time per call of the CUDA
# backend's rings with and without CUDA graphs. With --blocks it also adds
# the blocks' ring variants (transformer_blocks.py --rings: mdfuser_ring,
# mdfuser_cuda, mdfuser_cuda_graph).
#
# --skip-1proc runs, of the one-process pytest suite, only the GPU fault
# and CUDA-graph tests (about 3 minutes less).
#
# --skip-faults skips the one-process steps altogether.
#
# --world-sizes limits the torchrun steps (tests, benchmarks, blocks, rings)
# to the world sizes listed (default "2 4 8", each where the machine has
# the GPUs).
#
# --balanced adds, at d = 2, the row-parallel benchmark at h = 1024,
# t = 65536, where the GEMM and the allreduce alone take about as long.
#
# --kernels builds and runs benchmarks/kernels' gemm_tiles on GPU 0 (Hopper):
# the fused kernels' GEMM in each tile shape against cuBLAS on the same
# operands, and the reduce-scatter kernel, which pulls the partial sums,
# with its peers simulated on the GPU (results/gemm_tiles.json).
#
# --sweep replaces the benchmark runs with a sweep of NCCL settings at the
# largest world size (stream priority, number of channels).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-out}
WORK=$(mktemp -d)
mkdir -p "$OUT"
LOG=$OUT/log.txt
: >"$LOG"
# The benchmarks' JSON, packed into $OUT/results.tar.gz after every step.
RESULTS=$WORK/results
mkdir -p "$RESULTS"
SKIP_TESTS=0
SKIP_BENCH=0
SANITIZER=0
SWEEP=0
HIGH_PRIORITY=0
BLOCKS=0
RINGS=0
BALANCED=0
SKIP_1PROC=0
SKIP_FAULTS=0
KERNELS=0
WORLD_SIZES="2 4 8"
H=8192
T=8192
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-tests) SKIP_TESTS=1 ;;
    --skip-bench) SKIP_BENCH=1 ;;
    --sanitizer) SANITIZER=1 ;;
    --sweep) SWEEP=1 ;;
    --high-priority) HIGH_PRIORITY=1 ;;
    --blocks) BLOCKS=1 ;;
    --rings) RINGS=1 ;;
    --balanced) BALANCED=1 ;;
    --skip-1proc) SKIP_1PROC=1 ;;
    --skip-faults) SKIP_FAULTS=1 ;;
    --kernels) KERNELS=1 ;;
    --sizes) IFS=, read -r H T <<<"$2"; shift ;;
    --world-sizes) WORLD_SIZES=$2; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# Multicast (NVLS) stays off on the shared multi-GPU machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 MDFUSER_TIMEOUT_S=120
export PYTHONPATH=$ROOT/python:$ROOT/tests/python:$ROOT/examples${PYTHONPATH:+:$PYTHONPATH}
PYTHON=$(command -v python3)
# The image points CXX at /opt/gcc's g++, whose libstdc++ headers do not
# match the system libstdc++ that Python and torch load: code it compiles
# crashes in iostreams. Build with the system compiler, and make it nvcc's
# host compiler too (the image sets CUDAHOSTCXX to /opt/gcc's).
if [ -x /usr/bin/g++ ]; then
  export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
fi
rm -rf "$ROOT/build-gpu"
NGPU=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"

# step NAME TIMEOUT_S COMMAND...: runs a step with a time limit, appends its
# output to the log and records its outcome in the summary.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS rc=0
  echo "=== $name: $*" | tee -a "$LOG"
  timeout --kill-after=10 "$limit" "$@" >"$WORK/step.log" 2>&1 || rc=$?
  cat "$WORK/step.log" >>"$LOG"
  local verdict=ok
  [ "$rc" -eq 0 ] || verdict="FAILED rc=$rc"
  [ "$rc" -ne 124 ] || verdict="TIMED OUT after ${limit}s"
  printf '%-28s %-22s %4ds\n' "$name" "$verdict" $((SECONDS - start)) | tee -a "$SUMMARY"
  tail -n 4 "$WORK/step.log"
  pack
  return 0
}

# The JSON and the profiler traces written so far, each folder in one
# archive of $OUT.
pack() {
  if compgen -G "$RESULTS/*.json" >/dev/null; then
    tar -czf "$OUT/results.tar.gz" -C "$WORK" results 2>>"$LOG"
  fi
  if [ -d "$WORK/traces" ]; then
    tar -czf "$OUT/traces.tar.gz" -C "$WORK" traces 2>>"$LOG"
  fi
  return 0
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  nvidia-smi topo -m
  "$PYTHON" -c "import torch, sys; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
  cmake --version | head -1; ninja --version; nvcc --version | tail -1
  command -v mpirun || echo "no mpirun"
  echo "CXX: ${CXX:-unset} $("${CXX:-g++}" -dumpfullversion); libstdc++: $("${CXX:-g++}" -print-file-name=libstdc++.so.6)"
  "$PYTHON" -c "import torch; print([l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++' in l][:1])"
  command -v compute-sanitizer || echo "no compute-sanitizer"
  nproc; free -g | head -2
} >>"$LOG" 2>&1
echo "GPUs: $NGPU" | tee -a "$SUMMARY"

# --- build -----------------------------------------------------------------
# CUTLASS's headers for the fused matmul kernels, from the carried wheel.
if ! "$PYTHON" -c "import importlib.util as u, sys; sys.exit(u.find_spec('cutlass_library') is None)"; then
  step cutlass_wheel 60 "$PYTHON" -m pip install -q --no-index --no-deps \
    --find-links "$ROOT/.carry/wheels" -r "$ROOT/requirements-gpu.txt"
fi
step configure 300 cmake -S "$ROOT" -B "$ROOT/build-gpu" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$PYTHON" \
  -DMDFUSER_GTEST_SOURCE_DIR="$ROOT/.carry/googletest" \
  -DMDFUSER_GLOO_INCLUDE_DIR="$ROOT/.carry/gloo-include" \
  -DTORCH_CUDA_ARCH_LIST=9.0a -DMDFUSER_BUILD_KERNEL_BENCHMARKS="$KERNELS"
step build 400 cmake --build "$ROOT/build-gpu" -j "$(nproc)"
if [ "$KERNELS" -eq 1 ]; then
  step gemm_tiles 300 "$ROOT/build-gpu/benchmarks/kernels/gemm_tiles" \
    --json "$RESULTS/gemm_tiles.json"
fi
# pytest-benchmark, from the wheels prepare_carry.sh carries (the machine
# reaches no package index).
if ! "$PYTHON" -c "import pytest_benchmark" 2>/dev/null; then
  step pytest_benchmark_wheels 60 "$PYTHON" -m pip install -q --no-index \
    --find-links "$ROOT/.carry/wheels" pytest-benchmark
fi
step libraries 30 bash -c "ldd $ROOT/python/mdfuser/_C*.so | grep -E 'stdc|gcc_s|torch_python'"

# --- tests -----------------------------------------------------------------
# Native tracebacks: pytest's own print the arguments of every frame, and
# printing a CUDA tensor waits for its stream, which a failed rank's peer
# may have left stuck; the report then hangs instead of naming the failure.
# Captured at the Python level only: what the library writes to the
# process's stderr (the watchdog's last words before it ends a process
# whose stream cannot go on) reaches the log even when the process aborts,
# which pytest's default capture of file descriptors would swallow.
MULTI_PYTEST=(-q -p no:cacheprovider --tb=native --capture=sys)
if [ "$SKIP_TESTS" -eq 0 ]; then
  step ctest 180 ctest --test-dir "$ROOT/build-gpu" -j 8 --output-on-failure --timeout 120
  if [ "$SKIP_FAULTS" -eq 1 ]; then
    : # neither the one-process suite nor its GPU fault tests
  elif [ "$SKIP_1PROC" -eq 0 ]; then
    step pytest_1proc 400 "$PYTHON" -m pytest tests/python -q -p no:cacheprovider
    step example_blocks_1proc 90 "$PYTHON" examples/transformer_blocks.py
  else
    # Of the one-process suite, only the GPU fault tests (child jobs) and
    # the CUDA graphs' (their cache bounded under changing scalars).
    step pytest_gpu_faults_graphs 360 "$PYTHON" -m pytest tests/python/test_gpu_rank_faults.py \
      tests/python/test_cuda_backend_faults.py tests/python/test_cuda_execute.py \
      tests/python/test_cuda_graphs.py -q -p no:cacheprovider
  fi
  # The CUDA backend with two processes sharing GPU 0: its rings, their
  # steady state and its bounds, on any machine (NCCL cannot share a GPU).
  step pytest_cuda_backend_shared_gpu 240 env MDFUSER_SHARE_DEVICES=1 \
    torchrun --nproc-per-node 2 --master-port 29398 \
    -m pytest tests/python/multidevice/test_cuda_backend.py "${MULTI_PYTEST[@]}"
  # World sizes above the GPU count, processes sharing the GPUs (NCCL
  # refuses that, so its tests skip, naming why): the multidevice suite at
  # 4 and at 3 (a world that is no power of two, rings of odd length).
  if [ "$NGPU" -lt 4 ]; then
    step pytest_shared_gpus_np4 300 env MDFUSER_SHARE_DEVICES=1 \
      torchrun --nproc-per-node 4 --master-port 29394 \
      -m pytest tests/python/multidevice "${MULTI_PYTEST[@]}" -o timeout=90
  fi
  if [ "$NGPU" -lt 3 ]; then
    step pytest_shared_gpus_np3 300 env MDFUSER_SHARE_DEVICES=1 \
      torchrun --nproc-per-node 3 --master-port 29393 \
      -m pytest tests/python/multidevice "${MULTI_PYTEST[@]}" -o timeout=90
  fi
  for n in $WORLD_SIZES; do
    [ "$NGPU" -ge "$n" ] || continue
    # About 1,100 tests a rank; the slowest named at the end.
    step "pytest_torchrun_$n" 480 torchrun --nproc-per-node "$n" --master-port $((29400 + n)) \
      -m pytest tests/python/multidevice "${MULTI_PYTEST[@]}" \
      --ignore-glob='*/test_transformer_*' -o timeout=60 --durations=25
    # The transformer blocks on their own, so that the summary tells them
    # apart; a stuck test fails after 60 s instead of holding the step.
    step "pytest_blocks_torchrun_$n" 240 torchrun --nproc-per-node "$n" \
      --master-port $((29410 + n)) -m pytest tests/python/multidevice/test_transformer_*.py \
      "${MULTI_PYTEST[@]}" -o timeout=60
    step "example_blocks_torchrun_$n" 90 torchrun --nproc-per-node "$n" \
      --master-port $((29420 + n)) examples/transformer_blocks.py
  done
fi
if [ "$SANITIZER" -eq 1 ]; then
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
      step "sanitizer_$tool" 150 compute-sanitizer --tool "$tool" --error-exitcode 99 \
        "$PYTHON" examples/row_parallel_linear.py --hidden 64 --tokens 96 --chunks 3
      # The CUDA backend's rings: two processes on two GPUs where the
      # machine has them, on GPU 0 otherwise.
      share=1
      [ "$NGPU" -lt 2 ] || share=0
      step "sanitizer_${tool}_cuda_backend" 150 env MDFUSER_SHARE_DEVICES=$share \
        torchrun --nproc-per-node 2 --master-port 29397 --no-python \
        compute-sanitizer --tool "$tool" --error-exitcode 99 \
        "$PYTHON" examples/row_parallel_linear.py --hidden 64 --tokens 96 --chunks 3 --backend cuda
      step "sanitizer_${tool}_cuda_graph" 150 env MDFUSER_SHARE_DEVICES=$share \
        torchrun --nproc-per-node 2 --master-port 29398 --no-python \
        compute-sanitizer --tool "$tool" --error-exitcode 99 \
        "$PYTHON" examples/row_parallel_linear.py --hidden 64 --tokens 96 --chunks 3 --backend cuda \
        --cuda-graph
      # The fused matmul kernels on their smallest exact cases (Hopper, one
      # GPU a rank). Without API errors: torch's symmetric memory probes
      # for fabric handles with a cuMemCreate that the machines refuse
      # (CUDA_ERROR_NOT_PERMITTED, handled by torch), which memcheck would
      # count as the run's one error.
      if [ "$NGPU" -ge 2 ] && "$PYTHON" -c \
        'import sys, torch; sys.exit(torch.cuda.get_device_capability() != (9, 0))'; then
        step "sanitizer_${tool}_fused" 300 torchrun --nproc-per-node 2 --master-port 29399 \
          --no-python compute-sanitizer --tool "$tool" --error-exitcode 99 \
          --report-api-errors no "$PYTHON" -m pytest tests/python/multidevice/test_fused_matmul.py \
          -k "exact and tile_rows" "${MULTI_PYTEST[@]}"
      fi
    done
  fi
fi

# --- benchmark -------------------------------------------------------------
# Every rank's profiler traces, packed by step() into $OUT/traces.tar.gz.
TRACES=$WORK/traces
bench() { # bench NAME NPROC ARGS...
  local name=$1 n=$2
  shift 2
  step "$name" 300 torchrun --nproc-per-node "$n" --master-port $((29500 + RANDOM % 400)) \
    benchmarks/row_parallel_linear.py -H "$H" -t "$T" --chunks 1,2,4,8 --iters 60 \
    --json "$RESULTS/$name.json" "$@"
}
if [ "$SWEEP" -eq 1 ]; then
  n=$NGPU
  [ "$n" -le 8 ] || n=8
  bench "sweep_d${n}_hp" "$n" --nccl-high-priority
  (export NCCL_MAX_NCHANNELS=8; bench "sweep_d${n}_hp_8channels" "$n" --nccl-high-priority)
  (export NCCL_MAX_NCHANNELS=16; bench "sweep_d${n}_hp_16channels" "$n" --nccl-high-priority)
  (export NCCL_MAX_NCHANNELS=8; bench "sweep_d${n}_8channels" "$n")
  SKIP_BENCH=1
fi
if [ "$SKIP_BENCH" -eq 0 ]; then
  largest=0
  for n in $WORLD_SIZES; do
    [ "$NGPU" -lt "$n" ] || largest=$n
  done
  for n in $WORLD_SIZES; do
    [ "$NGPU" -ge "$n" ] || continue
    # Profiler traces of the largest world size only, at the chunk counts
    # the default runs best at, and their summaries in the log (which comes
    # back even where the traces are too large to).
    trace=()
    [ "$n" -ne "$largest" ] || trace=(--trace "$TRACES/d$n" --trace-chunks 1,2,4)
    step "bench_d$n" 360 torchrun --nproc-per-node "$n" --master-port $((29500 + n)) \
      benchmarks/row_parallel_linear.py -H "$H" -t "$T" --chunks 1,2,4,8 \
      --json "$RESULTS/row_parallel_linear_d$n.json" "${trace[@]}"
    if [ "$n" -eq "$largest" ]; then
      step "trace_summary_d$n" 60 bash -c \
        "$PYTHON benchmarks/trace_summary.py $TRACES/d$n/*rank0.json"
    fi
    # The overlap benchmarks as pytest-benchmark tests, launched as
    # nvFuser's multidevice tests are (--only-mpi); their JSON in results/.
    step "pytest_benchmarks_torchrun_$n" 300 torchrun --nproc-per-node "$n" \
      --master-port $((29430 + n)) -m pytest tests/python/multidevice/test_overlap_benchmarks.py \
      --only-mpi -k benchmark "${MULTI_PYTEST[@]}" --benchmark-json "$RESULTS/pytest_benchmarks_d$n.json"
    # The balanced shape of d = 2, where the GEMM and the allreduce alone
    # take about as long (doc/benchmarks.md).
    if [ "$n" -eq 2 ] && [ "$BALANCED" -eq 1 ]; then
      step "bench_d2_balanced" 300 torchrun --nproc-per-node 2 --master-port 29530 \
        benchmarks/row_parallel_linear.py -H 1024 -t 65536 --chunks 1,2,4,8 \
        --json "$RESULTS/row_parallel_linear_d2_balanced.json" --trace "$TRACES/d2_balanced"
      fi
    if [ "$HIGH_PRIORITY" -eq 1 ]; then
      step "bench_d${n}_high_priority" 300 torchrun --nproc-per-node "$n" --master-port $((29510 + n)) \
        benchmarks/row_parallel_linear.py -H "$H" -t "$T" --chunks 1,2,4,8 --nccl-high-priority \
        --json "$RESULTS/row_parallel_linear_d${n}_hp.json"
    fi
  done
fi

if [ "$BLOCKS" -eq 1 ]; then
  # On a machine of one GPU the blocks run at d = 1: no communication, but
  # the compute path and the host overhead against torch's.
  sizes=$WORLD_SIZES
  [ "$NGPU" -ge 2 ] || sizes=1
  # With --rings the blocks also time their ring decompositions (NCCL and
  # the CUDA backend).
  block_rings=()
  [ "$RINGS" -eq 0 ] || block_rings=(--rings)
  for n in $sizes; do
    [ "$NGPU" -ge "$n" ] || continue
    i=0
    for block in mlp attention layer; do
      i=$((i + 1))
      step "blocks_${block}_d$n" 300 torchrun --nproc-per-node "$n" \
        --master-port $((29600 + 10 * i + n)) benchmarks/transformer_blocks.py \
        --blocks "$block" --chunks 1,2,4 --iters 30 --profile "${block_rings[@]}" \
        --json "$WORK/blocks_${block}_d$n.json"
      # Merged after every block: what ran is in $OUT even if a later block
      # outlasts the call.
      "$PYTHON" -c 'import json, sys; json.dump([r for p in sys.argv[2:] for r in json.load(open(p))], open(sys.argv[1], "w"), indent=1)' \
        "$RESULTS/transformer_blocks_d$n.json" "$WORK"/blocks_*_d"$n".json 2>>"$LOG"
      pack
    done
  done
fi

if [ "$RINGS" -eq 1 ]; then
  if [ "$NGPU" -lt 2 ]; then
    # Two processes share the GPU: the host time per call of the CUDA
    # backend's rings, with and without CUDA graphs (GPU times mean little).
    step ring_host_time 300 env MDFUSER_SHARE_DEVICES=1 torchrun --nproc-per-node 2 \
      --master-port 29790 benchmarks/gpu/ring_host_time.py --breakdown --json "$RESULTS/ring_host_time.json"
  fi
  for n in $WORLD_SIZES; do
    [ "$NGPU" -ge "$n" ] || continue
    i=0
    for shape in default k2048 ref1024; do
      i=$((i + 1))
      sizes=(-H "$H" -t "$T" --chunks 1,2,4 --iters 30 --profile)
      case $shape in
        k2048) sizes+=(--k 2048) ;;
        # The reference's shape, M = N = K = 1024 in fp16 (h = 256 d), for
        # both pairs, timed in batches run back to back from a held stream.
        ref1024) sizes=(-H $((256 * n)) -t 1024 --k 1024 --dtype float16 \
          --benchmarks ag_linear,linear_rs --chunks 1 --iters 10 --queued 16) ;;
      esac
      step "rings_${shape}_d$n" 300 torchrun --nproc-per-node "$n" \
        --master-port $((29700 + 10 * i + n)) benchmarks/ring_pairs.py \
        "${sizes[@]}" --json "$WORK/rings_${shape}_d$n.json"
      # Merged after every run: what ran is in $OUT even if a later run
      # outlasts the call.
      "$PYTHON" -c 'import json, sys; json.dump([r for p in sys.argv[2:] for r in json.load(open(p))], open(sys.argv[1], "w"), indent=1)' \
        "$RESULTS/ring_pairs.json" "$WORK"/rings_*.json 2>>"$LOG"
      pack
    done
  done
fi

rm -rf "$WORK"
cat "$SUMMARY"
