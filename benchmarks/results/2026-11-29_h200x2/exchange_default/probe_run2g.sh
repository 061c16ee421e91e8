#!/usr/bin/env bash
# Two-GPU probe: build, the CUDA backend's and rings' tests at np 2 (the
# exchange by default among them), the balanced row-parallel linear twice
# and the h = t = 8192 one.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
P=(-q -p no:cacheprovider --tb=short --capture=sys)
R=$OUT/probe; mkdir -p $R
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
echo "== tests np 2 $(date +%T)" >> $T
timeout 150 torchrun --nproc-per-node 2 --master-port 29831 -m pytest tests/python/multidevice/test_cuda_backend.py tests/python/multidevice/test_ring_decomposition.py "${P[@]}" > $R/tests_np2.txt 2>&1
echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $R/tests_np2.txt | tail -3 >> $T; pack
echo "== balanced run 1 $(date +%T)" >> $T
timeout 150 torchrun --nproc-per-node 2 --master-port 29815 benchmarks/row_parallel_linear.py -H 1024 -t 65536 --chunks 2,4,8,16 --iters 30 --json $R/balanced_run1.json > $R/balanced_run1.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== 8192 $(date +%T)" >> $T
timeout 120 torchrun --nproc-per-node 2 --master-port 29816 benchmarks/row_parallel_linear.py -H 8192 -t 8192 --chunks 1,2,4 --iters 20 --json $R/row_parallel_d2.json > $R/row_parallel_d2.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== balanced run 2 $(date +%T)" >> $T
timeout 120 torchrun --nproc-per-node 2 --master-port 29817 benchmarks/row_parallel_linear.py -H 1024 -t 65536 --chunks 2,4,8,16 --iters 30 --json $R/balanced_run2.json > $R/balanced_run2.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
for f in $R/balanced_run1.txt $R/row_parallel_d2.txt $R/balanced_run2.txt; do echo "## $f"; sed -n '/^row_parallel_linear:/,$p' $f | grep -E "variant|mdfuser |graph_first|exchange|pipeline |_only|auto|mdfuser_cuda "; done
grep -E "FAILED|Error" $R/tests_np2.txt | head -20
