#!/usr/bin/env bash
# One-GPU probe: build, then with 2, 3 and 4 processes sharing the GPU the
# CUDA backend's tests (concurrent moves among them), and the fused
# kernels' tests at 2.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_SHARE_DEVICES=1 MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
P=(-q -p no:cacheprovider --tb=native --capture=sys)
echo "== fused np 2 shared $(date +%T)" >> $T
timeout 150 torchrun --nproc-per-node 2 --master-port 29811 -m pytest tests/python/multidevice/test_fused_matmul.py "${P[@]}" > $OUT/fused_np2.txt 2>&1
echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $OUT/fused_np2.txt | tail -2 >> $T
for n in 3 4 2; do
  echo "== np $n shared $(date +%T)" >> $T
  timeout 150 torchrun --nproc-per-node $n --master-port $((29820 + n)) -m pytest tests/python/multidevice/test_cuda_backend.py tests/python/multidevice/test_ring_decomposition.py "${P[@]}" > $OUT/tests_np$n.txt 2>&1
  echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $OUT/tests_np$n.txt | tail -$n >> $T
done
echo "== done $(date +%T)" >> $T
cat $T
