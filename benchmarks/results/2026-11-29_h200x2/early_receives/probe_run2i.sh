#!/usr/bin/env bash
# Two-GPU probe: build; the CUDA backend's and rings' tests at np 2 and,
# GPUs shared, np 4; the balanced row-parallel linear traced at s = 8 and
# run twice, linear + reduce-scatter at k = 2048, the h = t = 8192
# row-parallel linear.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
P=(-q -p no:cacheprovider --tb=short --capture=sys)
R=$OUT/probe; mkdir -p $R/traces
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
echo "== tests np 2 $(date +%T)" >> $T
timeout 120 torchrun --nproc-per-node 2 --master-port 29831 -m pytest tests/python/multidevice/test_cuda_backend.py tests/python/multidevice/test_ring_decomposition.py "${P[@]}" > $R/tests_np2.txt 2>&1
echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $R/tests_np2.txt | tail -2 >> $T; pack
echo "== balanced run 1 $(date +%T)" >> $T
timeout 100 torchrun --nproc-per-node 2 --master-port 29815 benchmarks/row_parallel_linear.py -H 1024 -t 65536 --chunks 4,8,16 --iters 30 --trace $R/traces --trace-chunks 8 --json $R/balanced_run1.json > $R/balanced_run1.txt 2>&1
echo "rc=$?" >> $T
for v in "" _mdfuser_cuda_no_exchange _mdfuser_cuda_pipeline_exchange; do
  for r in 0 1; do f=$R/traces/trace${v}_rank$r.json; [ -f $f ] && python3 benchmarks/trace_summary.py --timeline $f > $R/timeline${v}_rank$r.txt 2>&1; done
done
pack
echo "== linear_rs k=2048 $(date +%T)" >> $T
timeout 80 torchrun --nproc-per-node 2 --master-port 29816 benchmarks/ring_pairs.py -H 8192 -t 8192 --k 2048 --benchmarks linear_rs --chunks 1,2,4 --iters 30 --json $R/linear_rs_k2048.json > $R/linear_rs_k2048.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== 8192 $(date +%T)" >> $T
timeout 70 torchrun --nproc-per-node 2 --master-port 29817 benchmarks/row_parallel_linear.py -H 8192 -t 8192 --chunks 1,2 --iters 20 --json $R/row_parallel_d2.json > $R/row_parallel_d2.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== balanced run 2 $(date +%T)" >> $T
timeout 80 torchrun --nproc-per-node 2 --master-port 29818 benchmarks/row_parallel_linear.py -H 1024 -t 65536 --chunks 4,8,16 --iters 30 --json $R/balanced_run2.json > $R/balanced_run2.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== tests np 4 shared $(date +%T)" >> $T
MDFUSER_SHARE_DEVICES=1 timeout 100 torchrun --nproc-per-node 4 --master-port 29832 -m pytest tests/python/multidevice/test_cuda_backend.py "${P[@]}" > $R/tests_np4.txt 2>&1
echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $R/tests_np4.txt | tail -2 >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
for f in $R/balanced_run1.txt $R/balanced_run2.txt $R/row_parallel_d2.txt; do echo "## $f"; sed -n '/^row_parallel_linear:/,$p' $f | grep -E "^mdfuser |no_exchange|pipeline_exchange|graph_first|_only|auto"; done
echo "## linear_rs"; grep -E "^mdfuser |mdfuser_cuda_graph_first|torch_fused|gemm_only|reduce_scatter_only|auto" $R/linear_rs_k2048.txt | head -20
grep -E "^\[rank 0\] FAILED" $R/tests_np2.txt $R/tests_np4.txt | head -20
head -12 $R/timeline_rank0.txt
