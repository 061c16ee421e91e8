#!/usr/bin/env bash
# Four-GPU call 1: build; row-parallel h = t = 8192 (traced at s = 1),
# linear + RS k = 2048, the multidevice suite at np 4.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 4 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
P=(-q -p no:cacheprovider --tb=short --capture=sys)
R=$OUT/probe; mkdir -p $R/traces
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
echo "== row-parallel d4 $(date +%T)" >> $T
timeout 190 torchrun --nproc-per-node 4 --master-port 29814 benchmarks/row_parallel_linear.py -H 8192 -t 8192 --chunks 1,2,4 --iters 20 --trace $R/traces --trace-chunks 1 --json $R/row_parallel_d4.json > $R/row_parallel_d4.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== rings k2048 d4 $(date +%T)" >> $T
timeout 120 torchrun --nproc-per-node 4 --master-port 29812 benchmarks/ring_pairs.py -H 8192 -t 8192 --k 2048 --benchmarks linear_rs --chunks 1,2,4 --iters 20 --json $R/rings_k2048_d4.json > $R/rings_k2048_d4.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== suite np 4 $(date +%T)" >> $T
timeout 100 torchrun --nproc-per-node 4 --master-port 29841 -m pytest tests/python/multidevice --ignore-glob='*/test_transformer_*' "${P[@]}" -o timeout=45 > $R/suite_np4.txt 2>&1
echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $R/suite_np4.txt | tail -2 >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
grep -hE "^\[rank 0\] FAILED|^FAILED" $R/*.txt | head -20
