#!/usr/bin/env bash
# x2 call 5 (11-30): the tree before this session (e9f9faa), the reduce-scatter at 1024^3 only: a baseline on this machine.
cd "$(dirname "$0")/.."
cp -r probe/base/. .
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R
pack() { tar czf $OUT/probe.tgz -C $OUT probe tests.txt; }
for i in 1 2; do
echo "== base ref1024 rs $i $(date +%T)" >> $T
timeout 45 torchrun --nproc-per-node 2 --master-port $((29970+i)) benchmarks/ring_pairs.py -H 512 -t 1024 --k 1024 --dtype float16 --benchmarks linear_rs --chunks 1 --iters 10 --queued 16 --json $R/base_ref1024_$i.json > $R/base_ref1024_$i.txt 2>&1
echo "rc=$? $(grep -E '^(mdfuser |mdfuser_fused|mdfuser_graph |torch_fused|torch_no|gemm_only|comm_only)' $R/base_ref1024_$i.txt | awk '{print $1, $3}' | tr '\n' ' ')" >> $T; pack
done
cat $T
