#!/usr/bin/env bash
# Four-GPU call 3: build; traces of row-parallel at s = 2, 4 and attention TP at s = 1, 4.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 4 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples:$PWD/benchmarks NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R/rp $R/blk
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
echo "== attention tp traces $(date +%T)" >> $T
TRACE_DIR=$R/blk timeout 150 torchrun --nproc-per-node 4 --master-port 29871 probe/trace_blocks.py --blocks attention,layer --modes tp --chunks 1,4 > $R/trace_blocks.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== row-parallel traces s 2,4 $(date +%T)" >> $T
timeout 150 torchrun --nproc-per-node 4 --master-port 29872 benchmarks/row_parallel_linear.py -H 8192 -t 8192 --chunks 2,4 --iters 10 --trace $R/rp --trace-chunks 2,4 > $R/rp.txt 2>&1
echo "rc=$?" >> $T; rm -f $R/rp/*rank2.json $R/rp/*rank3.json; pack
echo "== done $(date +%T)" >> $T
cat $T; tail -5 $R/trace_blocks.txt
