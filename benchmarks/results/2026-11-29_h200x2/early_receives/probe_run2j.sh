#!/usr/bin/env bash
# Two-GPU checks of the final tree: build; the multidevice suite at np 2;
# the CUDA backend's fault tests; the transformer blocks' tests at np 2.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
T=$OUT/tests.txt
P=(-q -p no:cacheprovider --tb=short --capture=sys)
R=$OUT/probe; mkdir -p $R
pack() { tar czf $OUT/probe.tgz -C $OUT probe; }
echo "== suite np 2 $(date +%T)" >> $T
timeout 170 torchrun --nproc-per-node 2 --master-port 29841 -m pytest tests/python/multidevice --ignore-glob='*/test_transformer_*' "${P[@]}" -o timeout=60 > $R/suite_np2.txt 2>&1
echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $R/suite_np2.txt | tail -2 >> $T; pack
echo "== faults $(date +%T)" >> $T
timeout 130 python3 -m pytest tests/python/test_cuda_backend_faults.py tests/python/test_gpu_rank_faults.py -q -p no:cacheprovider > $R/faults.txt 2>&1
echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $R/faults.txt | tail -2 >> $T; pack
echo "== blocks np 2 $(date +%T)" >> $T
timeout 100 torchrun --nproc-per-node 2 --master-port 29842 -m pytest tests/python/multidevice/test_transformer_*.py "${P[@]}" -o timeout=60 > $R/blocks_np2.txt 2>&1
echo "rc=$?" >> $T; grep -E '(passed|failed|error)' $R/blocks_np2.txt | tail -2 >> $T; pack
echo "== done $(date +%T)" >> $T
cat $T
grep -hE "^\[rank 0\] FAILED|^FAILED" $R/*.txt | head -20
