#!/usr/bin/env bash
# x2 call 2: the pushing kernel with blocks side by side; knobs swept at 1024^3 and k = 2048.
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
echo "rc=$?" >> $T; tail -3 $R/fused_np2.txt >> $T; pack
i=0
for setting in "FORCE=0" "X=1" "BLOCKS=1" "BLOCKS=1 CTAS=32" "CTAS=32" "BLOCKS=8 CTAS=32" "BLOCKS=2 CTAS=8"; do
  i=$((i+1)); envs=(); for kv in $setting; do envs+=("MDFUSER_PROBE_PUSH_$kv"); done
  echo "== ref1024 $setting $(date +%T)" >> $T
  env "${envs[@]}" timeout 60 torchrun --nproc-per-node 2 --master-port $((29950+i)) benchmarks/ring_pairs.py -H 512 -t 1024 --k 1024 --dtype float16 --benchmarks ag_linear --chunks 1 --iters 10 --queued 16 --json $R/ref1024_$i.json > $R/ref1024_$i.txt 2>&1
  echo "rc=$? $(grep -E '^(mdfuser |mdfuser_fused|mdfuser_graph |torch_fused|gemm_only|torch_no)' $R/ref1024_$i.txt | awk '{print $1, $3}' | tr '\n' ' ')" >> $T; pack
done
for setting in "FORCE=0" "FORCE=1" "FORCE=1 CTAS=32" "FORCE=1 CTAS=8"; do
  i=$((i+1)); envs=(); for kv in $setting; do envs+=("MDFUSER_PROBE_PUSH_$kv"); done
  echo "== k2048 $setting $(date +%T)" >> $T
  env "${envs[@]}" timeout 90 torchrun --nproc-per-node 2 --master-port $((29950+i)) benchmarks/ring_pairs.py --benchmarks ag_linear --k 2048 --chunks 1 --iters 20 --json $R/k2048_$i.json > $R/k2048_$i.txt 2>&1
  echo "rc=$? $(grep -E '^(mdfuser |mdfuser_fused|mdfuser_cuda_graph |torch_fused|gemm_only)' $R/k2048_$i.txt | awk '{print $1, $3}' | tr '\n' ' ')" >> $T; pack
done
echo "== done $(date +%T)" >> $T
cat $T
