#!/usr/bin/env bash
# Four-GPU call 4: stream priorities for the communication path.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 4 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R/blk
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
port=29880
for prio in none comm all; do
  port=$((port+1))
  echo "== row-parallel prio=$prio $(date +%T)" >> $T
  MDFUSER_PROBE_PRIORITY=$prio timeout 100 torchrun --nproc-per-node 4 --master-port $port benchmarks/row_parallel_linear.py -H 8192 -t 8192 --chunks 1,2,4 --iters 20 --json $R/rp_$prio.json > $R/rp_$prio.txt 2>&1
  echo "rc=$?" >> $T; pack
done
for prio in none comm all; do
  port=$((port+1))
  echo "== attention,layer tp prio=$prio $(date +%T)" >> $T
  MDFUSER_PROBE_PRIORITY=$prio timeout 120 torchrun --nproc-per-node 4 --master-port $port benchmarks/transformer_blocks.py --blocks attention,layer --modes tp --rings --host-iters 0 --iters 20 --json $R/blk_$prio.json > $R/blk_$prio.txt 2>&1
  echo "rc=$?" >> $T; pack
done
echo "== traces prio=all $(date +%T)" >> $T
MDFUSER_PROBE_PRIORITY=all TRACE_DIR=$R/blk timeout 100 torchrun --nproc-per-node 4 --master-port 29899 probe/trace_blocks.py --blocks attention --modes tp --chunks 1,4 > $R/trace_blocks.txt 2>&1
echo "rc=$?" >> $T; rm -f $R/blk/*rank2.json $R/blk/*rank3.json; pack
echo "== done $(date +%T)" >> $T
cat $T; tail -3 $R/trace_blocks.txt
