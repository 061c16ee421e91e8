#!/usr/bin/env bash
# x2 call 4 (11-30): the final tree, the place chosen by the shapes; tests, faults, the reference pairs and k = 2048.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
R=$OUT/probe; mkdir -p $R
pack() { tar czf $OUT/probe.tgz -C $OUT probe tests.txt; }
echo "== fused tests np2 $(date +%T)" >> $T
timeout 100 torchrun --nproc-per-node 2 --master-port 29941 -m pytest tests/python/multidevice/test_fused_matmul.py -q -p no:cacheprovider -o timeout=60 > $R/fused_np2.txt 2>&1
echo "rc=$?" >> $T; tail -2 $R/fused_np2.txt >> $T; pack
echo "== fused + rings np3 shared $(date +%T)" >> $T
MDFUSER_SHARE_DEVICES=1 timeout 100 torchrun --nproc-per-node 3 --master-port 29947 -m pytest tests/python/multidevice/test_fused_matmul.py tests/python/multidevice/test_ring_decomposition.py -q -p no:cacheprovider -o timeout=60 > $R/np3_shared.txt 2>&1
echo "rc=$?" >> $T; tail -1 $R/np3_shared.txt >> $T; pack
echo "== ref1024 $(date +%T)" >> $T
timeout 60 torchrun --nproc-per-node 2 --master-port 29962 benchmarks/ring_pairs.py -H 512 -t 1024 --k 1024 --dtype float16 --benchmarks ag_linear,linear_rs --chunks 1 --iters 10 --queued 16 --json $R/ref1024.json > $R/ref1024.txt 2>&1
echo "rc=$? $(grep -E '^(ag_linear:|linear_rs:|mdfuser |mdfuser_fused|mdfuser_graph |torch_fused|torch_no|gemm_only|comm_only)' $R/ref1024.txt | awk '{print $1, $3}' | tr '\n' ' ')" >> $T; pack
echo "== k2048 $(date +%T)" >> $T
timeout 90 torchrun --nproc-per-node 2 --master-port 29963 benchmarks/ring_pairs.py --benchmarks linear_rs --k 2048 --chunks 1 --iters 20 --json $R/k2048.json > $R/k2048.txt 2>&1
echo "rc=$? $(grep -E '^(mdfuser |mdfuser_fused|mdfuser_graph |torch_fused|torch_no|gemm_only|comm_only)' $R/k2048.txt | awk '{print $1, $3}' | tr '\n' ' ')" >> $T; pack
echo "== faults fused $(date +%T)" >> $T
timeout 120 python -m pytest tests/python/test_cuda_backend_faults.py -k fused -q -p no:cacheprovider > $R/faults.txt 2>&1
echo "rc=$?" >> $T; tail -2 $R/faults.txt >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
