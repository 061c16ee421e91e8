#!/usr/bin/env bash
# Four-GPU call 6: concurrent moves with a fan-out sharing one lane (MDFUSER_PROBE_FANOUT).
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 4 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
export MDFUSER_PROBE_FANOUT=1
echo "== row-parallel fanout $(date +%T)" >> $T
timeout 90 torchrun --nproc-per-node 4 --master-port 29921 benchmarks/row_parallel_linear.py -H 8192 -t 8192 --chunks 1,2,4 --iters 20 --json $R/rp_fanout.json > $R/rp_fanout.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== blocks sp fanout $(date +%T)" >> $T
timeout 150 torchrun --nproc-per-node 4 --master-port 29922 benchmarks/transformer_blocks.py --blocks mlp,attention,layer --modes sp --rings --host-iters 0 --iters 20 --json $R/blk_sp_fanout.json > $R/blk_sp_fanout.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== rings k2048 + 8192 fanout $(date +%T)" >> $T
timeout 90 torchrun --nproc-per-node 4 --master-port 29923 benchmarks/ring_pairs.py -H 8192 -t 8192 --k 2048 --chunks 1,2,4 --iters 20 --json $R/rings_k2048_fanout.json > $R/rings_k2048_fanout.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
