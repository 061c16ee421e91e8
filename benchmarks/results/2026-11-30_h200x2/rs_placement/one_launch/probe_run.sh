#!/usr/bin/env bash
# x2 call 3 (11-30): one launch a call for the reduce-scatter kernel; both places tested, profiled, timed; kernel bench.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 --kernels > $OUT/build.txt 2>&1
tail -4 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R
pack() { tar czf $OUT/probe.tgz -C $OUT probe tests.txt; }
for place in owner sender; do
echo "== fused tests np2, $place place $(date +%T)" >> $T
MDFUSER_PROBE_PLACE=$place timeout 100 torchrun --nproc-per-node 2 --master-port 29941 -m pytest tests/python/multidevice/test_fused_matmul.py -q -p no:cacheprovider -o timeout=60 > $R/fused_np2_$place.txt 2>&1
echo "rc=$?" >> $T; tail -2 $R/fused_np2_$place.txt >> $T; pack
done
echo "== fused tests np3 shared, owner place $(date +%T)" >> $T
MDFUSER_PROBE_PLACE=owner MDFUSER_SHARE_DEVICES=1 timeout 100 torchrun --nproc-per-node 3 --master-port 29947 -m pytest tests/python/multidevice/test_fused_matmul.py -q -p no:cacheprovider -o timeout=60 > $R/fused_np3.txt 2>&1
echo "rc=$?" >> $T; tail -1 $R/fused_np3.txt >> $T; pack
echo "== gemm_tiles $(date +%T)" >> $T
timeout 120 build-gpu/benchmarks/kernels/gemm_tiles --shapes 1024x1024x1024 --json $R/gemm_tiles.json > $R/gemm_tiles.txt 2>&1
echo "rc=$?" >> $T; grep -E "x1024 (pull|direct)|x2048 (pull|direct)" $R/gemm_tiles.txt >> $T; pack
i=0
for place in owner sender; do
for shape in "ref1024:-H 512 -t 1024 --k 1024 --dtype float16 --queued 16 --iters 10" "k2048:--k 2048 --iters 20"; do
i=$((i+1)); name=${shape%%:*}_${place}
echo "== $name $(date +%T)" >> $T
MDFUSER_PROBE_PLACE=$place timeout 90 torchrun --nproc-per-node 2 --master-port $((29950+i)) benchmarks/ring_pairs.py --benchmarks linear_rs ${shape#*:} --chunks 1 --json $R/$name.json > $R/$name.txt 2>&1
echo "rc=$? $(grep -E '^(mdfuser |mdfuser_fused|mdfuser_graph |torch_fused|torch_no|gemm_only|comm_only)' $R/$name.txt | awk '{print $1, $3}' | tr '\n' ' ')" >> $T; pack
done
done
echo "== profile ref1024 owner $(date +%T)" >> $T
MDFUSER_PROBE_PLACE=owner timeout 90 torchrun --nproc-per-node 2 --master-port 29961 benchmarks/ring_pairs.py -H 512 -t 1024 --k 1024 --dtype float16 --queued 16 --iters 5 --chunks 1 --profile > $R/profile1024.txt 2>&1
echo "rc=$?" >> $T; pack
echo "== faults fused, owner $(date +%T)" >> $T
MDFUSER_PROBE_PLACE=owner timeout 120 python -m pytest tests/python/test_cuda_backend_faults.py -k fused -q -p no:cacheprovider > $R/faults.txt 2>&1
echo "rc=$?" >> $T; tail -2 $R/faults.txt >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
