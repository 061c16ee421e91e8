#!/usr/bin/env bash
# Two-GPU probe: build, the CUDA backend's and decompositions' tests at np 2,
# the row-parallel linear balanced (traced at s = 4) and at h = t = 8192
# with mdfuser_cuda_exchange, then the multidevice suite at np 2.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
P=(-q -p no:cacheprovider --tb=native --capture=sys)
R=$OUT/probe; mkdir -p $R/traces
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
echo "== tests np 2 $(date +%T)" >> $T
timeout 100 torchrun --nproc-per-node 2 --master-port 29831 -m pytest tests/python/multidevice/test_cuda_backend.py tests/python/multidevice/test_ring_decomposition.py "${P[@]}" > $R/tests_np2.txt 2>&1
echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $R/tests_np2.txt | tail -2 >> $T
echo "== row-parallel balanced $(date +%T)" >> $T
timeout 130 torchrun --nproc-per-node 2 --master-port 29815 benchmarks/row_parallel_linear.py -H 1024 -t 65536 --chunks 1,2,4,8 --iters 30 --trace $R/traces --trace-chunks 4 --json $R/row_parallel_balanced_d2.json > $R/row_parallel_balanced_d2.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== row-parallel 8192 $(date +%T)" >> $T
timeout 100 torchrun --nproc-per-node 2 --master-port 29816 benchmarks/row_parallel_linear.py -H 8192 -t 8192 --chunks 1,2,4 --iters 20 --json $R/row_parallel_d2.json > $R/row_parallel_d2.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== suite np 2 $(date +%T)" >> $T
timeout 150 torchrun --nproc-per-node 2 --master-port 29841 -m pytest tests/python/multidevice --ignore-glob='*/test_transformer_*' "${P[@]}" -o timeout=60 > $R/suite_np2.txt 2>&1
echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $R/suite_np2.txt | tail -2 >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
