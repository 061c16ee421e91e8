#!/usr/bin/env bash
# Two-GPU probe: build, the balanced row-parallel linear at s = 4, 8, 16
# (traced at s = 4 and 8, with mdfuser_cuda_pipeline_exchange), run twice,
# and the traces' timelines.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R/traces
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
echo "== balanced run 1 $(date +%T)" >> $T
timeout 200 torchrun --nproc-per-node 2 --master-port 29815 benchmarks/row_parallel_linear.py -H 1024 -t 65536 --chunks 4,8,16 --iters 30 --trace $R/traces --trace-chunks 4,8 --json $R/balanced_run1.json > $R/balanced_run1.txt 2>&1
echo "rc=$?" >> $T; pack
for f in $R/traces/trace_mdfuser_cuda_pipeline_exchange_s8_rank0.json $R/traces/trace_s4_rank0.json $R/traces/trace_s8_rank0.json; do
  [ -f $f ] && python3 benchmarks/trace_summary.py --timeline $f > $R/timeline_$(basename $f .json).txt 2>&1
done
ls $R/traces >> $T
pack
echo "== balanced run 2 $(date +%T)" >> $T
timeout 150 torchrun --nproc-per-node 2 --master-port 29816 benchmarks/row_parallel_linear.py -H 1024 -t 65536 --chunks 4,8,16 --iters 30 --json $R/balanced_run2.json > $R/balanced_run2.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
for f in $R/balanced_run1.txt $R/balanced_run2.txt; do sed -n '/^row_parallel_linear:/,$p' $f | grep -E "variant|mdfuser |graph_first|exchange|pipeline|_only|auto"; done
