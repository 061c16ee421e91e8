#!/usr/bin/env bash
# Two-GPU probe: build, the balanced row-parallel linear with
# mdfuser_cuda_pipeline_exchange beside the default.
cd "$(dirname "$0")/.."
bash benchmarks/gpu/run.sh --skip-tests --skip-bench --skip-faults --world-sizes 2 > $OUT/build.txt 2>&1
tail -3 $OUT/build.txt
export PYTHONPATH=$PWD/python:$PWD/tests/python:$PWD/examples NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:$PATH MDFUSER_TIMEOUT_S=20
timeout 100 torchrun --nproc-per-node 2 --master-port 29815 benchmarks/row_parallel_linear.py -H 1024 -t 65536 --chunks 2,4,8 --iters 30 --json $OUT/row_parallel_balanced_d2.json > $OUT/row_parallel_balanced_d2.txt 2>&1
echo "rc=$?"
sed -n '/^row_parallel_linear:/,$p' $OUT/row_parallel_balanced_d2.txt | grep -E "variant|mdfuser |mdfuser_cuda_graph_first|exchange|pipeline|_only|auto"
