#!/usr/bin/env bash
# Four-GPU call 5: SM carve-out for the GEMMs beside the direct allreduce; RS k=2048 again.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 4 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
port=29900
for co in 8 16 24; do
  port=$((port+1))
  echo "== row-parallel carveout=$co $(date +%T)" >> $T
  timeout 100 torchrun --nproc-per-node 4 --master-port $port benchmarks/row_parallel_linear.py -H 8192 -t 8192 --chunks 1,2,4 --iters 20 --sm-carveout $co --json $R/rp_co$co.json > $R/rp_co$co.txt 2>&1
  echo "rc=$?" >> $T; pack
done
echo "== rings k2048 d4 again $(date +%T)" >> $T
timeout 100 torchrun --nproc-per-node 4 --master-port 29912 benchmarks/ring_pairs.py -H 8192 -t 8192 --k 2048 --benchmarks linear_rs --chunks 1,2,4 --iters 30 --json $R/rings_k2048_d4_b.json > $R/rings_k2048_d4_b.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
