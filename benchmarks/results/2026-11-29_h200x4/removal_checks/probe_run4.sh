#!/usr/bin/env bash
# Four-GPU probe: build (run.sh), the multidevice suite at np 4, the ring
# pairs' reduce-scatter at k = 2048 and the reference's 1024^3, the
# row-parallel linear at d = 4, then the fused kernels' fault tests.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 4 > /dev/null 2>&1
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT/probe; mkdir -p $R
T=$OUT/tests.txt
echo "== suite np 4 $(date +%T)" >> $T
MDFUSER_TIMEOUT_S=20 timeout 200 torchrun --nproc-per-node 4 --master-port 29811 -m pytest tests/python/multidevice --ignore-glob='*/test_transformer_*' -q -p no:cacheprovider --tb=native --capture=sys -o timeout=60 > $R/suite_np4.txt 2>&1
echo "suite rc=$?" >> $T; grep -E 'passed|failed' $R/suite_np4.txt | tail -4 >> $T
echo "== rings k2048 d4 $(date +%T)" >> $T
timeout 120 torchrun --nproc-per-node 4 --master-port 29812 benchmarks/ring_pairs.py -H 8192 -t 8192 --k 2048 --benchmarks linear_rs,ag_linear --chunks 1,2,4 --iters 20 --json $R/rings_k2048_d4.json > $R/rings_k2048_d4.txt 2>&1
echo "rc=$?" >> $T
echo "== rings ref1024 d4 $(date +%T)" >> $T
timeout 90 torchrun --nproc-per-node 4 --master-port 29813 benchmarks/ring_pairs.py -H 1024 -t 1024 --k 1024 --dtype float16 --benchmarks ag_linear,linear_rs --chunks 1 --iters 10 --queued 16 --json $R/rings_ref1024_d4.json > $R/rings_ref1024_d4.txt 2>&1
echo "rc=$?" >> $T
echo "== row-parallel d4 $(date +%T)" >> $T
timeout 120 torchrun --nproc-per-node 4 --master-port 29814 benchmarks/row_parallel_linear.py -H 8192 -t 8192 --chunks 1,2,4,8 --json $R/row_parallel_linear_d4.json > $R/row_parallel_linear_d4.txt 2>&1
echo "rc=$?" >> $T
tar czf $OUT/probe.tgz -C $OUT probe && rm -rf $R
echo "== fused fault tests $(date +%T)" >> $T
timeout 120 $PY -m pytest tests/python/test_cuda_backend_faults.py -k fused_kernel -q -p no:cacheprovider --tb=native >> $T 2>&1
echo "== done $(date +%T)" >> $T
cat $T
