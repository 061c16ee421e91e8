#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Sets up mdfuser if needed, then runs the row-parallel linear on 2
# processes (GPUs with NCCL where there are two, CPU tensors with Gloo
# otherwise), printing its host program and a check against torch.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$ROOT/scripts/setup.sh"
PYTHON=$(command -v "${PYTHON:-python3}")

mpi_args=(--oversubscribe --timeout 600)
[ "$(id -u)" -ne 0 ] || mpi_args+=(--allow-run-as-root)
exec mpirun "${mpi_args[@]}" -np 2 \
  -x MDFUSER_PORT="${MDFUSER_PORT:-29600}" -x MDFUSER_TIMEOUT_S="${MDFUSER_TIMEOUT_S:-120}" \
  -x NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}" \
  -x TORCH_SYMM_MEM_DISABLE_MULTICAST="${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}" \
  -x NVSHMEM_DISABLE_NVLS="${NVSHMEM_DISABLE_NVLS:-1}" \
  "$PYTHON" "$ROOT/examples/row_parallel_linear.py" "$@"
