#!/usr/bin/env bash
# x2 call 2 (11-30): owner place, the epilogue adding the one peer's partial sums (no summing CTAs at d = 2).
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R
pack() { tar czf $OUT/probe.tgz -C $OUT probe tests.txt; }
echo "== fused tests np2, owner place $(date +%T)" >> $T
MDFUSER_PROBE_PLACE=owner timeout 120 torchrun --nproc-per-node 2 --master-port 29941 -m pytest tests/python/multidevice/test_fused_matmul.py -q -p no:cacheprovider -o timeout=60 > $R/fused_np2.txt 2>&1
echo "rc=$?" >> $T; tail -3 $R/fused_np2.txt >> $T; pack
echo "== fused tests np3 shared, owner place $(date +%T)" >> $T
MDFUSER_PROBE_PLACE=owner MDFUSER_SHARE_DEVICES=1 timeout 120 torchrun --nproc-per-node 3 --master-port 29947 -m pytest tests/python/multidevice/test_fused_matmul.py -q -p no:cacheprovider -o timeout=60 > $R/fused_np3.txt 2>&1
echo "rc=$?" >> $T; tail -3 $R/fused_np3.txt >> $T; pack
i=0
for round in 1 2; do
for place in owner sender; do
for shape in "ref1024:-H 512 -t 1024 --k 1024 --dtype float16 --queued 16 --iters 10" "k2048:--k 2048 --iters 20"; do
i=$((i+1)); name=${shape%%:*}_${place}_$round
echo "== $name $(date +%T)" >> $T
MDFUSER_PROBE_PLACE=$place timeout 90 torchrun --nproc-per-node 2 --master-port $((29950+i)) benchmarks/ring_pairs.py --benchmarks linear_rs ${shape#*:} --chunks 1 --json $R/$name.json > $R/$name.txt 2>&1
echo "rc=$? $(grep -E '^(mdfuser |mdfuser_fused|mdfuser_graph |torch_fused|torch_no|gemm_only|comm_only)' $R/$name.txt | awk '{print $1, $3}' | tr '\n' ' ')" >> $T; pack
done
done
done
echo "== faults RS, owner $(date +%T)" >> $T
MDFUSER_PROBE_PLACE=owner timeout 100 python -m pytest tests/python/test_cuda_backend_faults.py -k "fused and reduce_scatter" -q -p no:cacheprovider > $R/faults.txt 2>&1
echo "rc=$?" >> $T; tail -2 $R/faults.txt >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
