#!/usr/bin/env bash
# x2 call 5: the shared waiting scheduler; fused tests np2 and np3 shared, the GPU fault tests in full.
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
MDFUSER_SHARE_DEVICES=1 timeout 100 torchrun --nproc-per-node 3 --master-port 29947 -m pytest tests/python/multidevice/test_fused_matmul.py tests/python/multidevice/test_ring_decomposition.py -q -p no:cacheprovider --tb=native --capture=sys -o timeout=60 > $R/np3_shared.txt 2>&1
echo "rc=$?" >> $T; tail -3 $R/np3_shared.txt >> $T; pack
echo "== GPU fault tests $(date +%T)" >> $T
timeout 290 python -m pytest tests/python/test_gpu_rank_faults.py tests/python/test_cuda_backend_faults.py -q -p no:cacheprovider > $R/gpu_faults.txt 2>&1
echo "rc=$?" >> $T; tail -4 $R/gpu_faults.txt >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
