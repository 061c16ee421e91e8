#!/usr/bin/env bash
# One-GPU probe: build, then the in-order schedule's tests with 2, 3 and 4
# processes sharing the GPU (CUDA backend).
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_SHARE_DEVICES=1 MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
P=(-q -p no:cacheprovider --tb=native --capture=sys)
for n in 2 3 4; do
  echo "== np $n shared $(date +%T)" >> $T
  timeout 150 torchrun --nproc-per-node $n --master-port $((29820 + n)) -m pytest tests/python/multidevice/test_cuda_backend.py tests/python/multidevice/test_ring_decomposition.py tests/python/multidevice/test_row_parallel_linear.py "${P[@]}" > $OUT/tests_np$n.txt 2>&1
  echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $OUT/tests_np$n.txt | tail -$n >> $T
done
echo "== done $(date +%T)" >> $T
cat $T
