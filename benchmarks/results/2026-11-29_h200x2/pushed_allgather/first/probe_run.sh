#!/usr/bin/env bash
# x2 call 1: the pushing allgather + GEMM kernel: tests, then the pairs at 1024^3 and k = 2048.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R
pack() { tar czf $OUT/probe.tgz -C $OUT probe tests.txt; }
echo "== fused tests np2 $(date +%T)" >> $T
timeout 150 torchrun --nproc-per-node 2 --master-port 29941 -m pytest tests/python/multidevice/test_fused_matmul.py -q -x -p no:cacheprovider -o timeout=60 > $R/fused_np2.txt 2>&1
echo "rc=$?" >> $T; tail -5 $R/fused_np2.txt >> $T; pack
echo "== ref1024 $(date +%T)" >> $T
timeout 120 torchrun --nproc-per-node 2 --master-port 29942 benchmarks/ring_pairs.py -H 512 -t 1024 --k 1024 --dtype float16 --benchmarks ag_linear,linear_rs --chunks 1 --iters 10 --queued 16 --json $R/ref1024.json > $R/ref1024.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== k2048 ag $(date +%T)" >> $T
timeout 120 torchrun --nproc-per-node 2 --master-port 29943 benchmarks/ring_pairs.py --benchmarks ag_linear --k 2048 --chunks 1,2 --iters 20 --json $R/k2048.json > $R/k2048.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
