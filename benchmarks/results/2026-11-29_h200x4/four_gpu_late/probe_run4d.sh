#!/usr/bin/env bash
# Four-GPU call 2: build; the transformer blocks at d = 4 with ring variants.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 4 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
port=29860
for b in attention mlp layer; do
  echo "== $b d4 $(date +%T)" >> $T
  port=$((port+1))
  timeout 150 torchrun --nproc-per-node 4 --master-port $port benchmarks/transformer_blocks.py --blocks $b --rings --host-iters 0 --iters 20 --json $R/blocks_${b}_d4.json > $R/blocks_${b}_d4.txt 2>&1
  echo "rc=$?" >> $T; pack
done
echo "== done $(date +%T)" >> $T
cat $T
