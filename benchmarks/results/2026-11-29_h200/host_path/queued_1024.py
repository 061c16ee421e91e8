# SPDX-License-Identifier: MIT
"""Host time per call of execute with replays queued back to back: the
linear + reduce-scatter at M = N = K = 1024 (fp16), two processes sharing
one GPU, by default (the CUDA backend's statements replayed as CUDA graphs)
and with the pulled kernel. The script of the 2026-11-29 measurement
(README.md says how it ran).

    MDFUSER_SHARE_DEVICES=1 torchrun --nproc-per-node 2 queued_1024.py
"""

import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "examples"))
from ring_decomposition import linear_reduce_scatter  # noqa: E402

from mdfuser import CommunicatorBackend, DataType  # noqa: E402
from mdfuser.multidevice import Communicator, shard_tensor  # noqa: E402

comm = Communicator.instance()
d, rank = comm.size(), comm.rank()
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
g = torch.Generator().manual_seed(1)
k = 1024
x = torch.randn(1024, d * k, generator=g).half()
w = torch.randn(1024, d * k, generator=g).half()
variants = {
    "default": {},
    "pulled": {
        "backend": CommunicatorBackend.cuda,
        "_enable_options": ["fused_matmul_communication", "fused_reduce_scatter_pulls"],
    },
}
for name, opts in variants.items():
    fd = linear_reduce_scatter(d, 1, d * k, 1024, dtype=DataType.Half)
    inputs = [shard_tensor(t, tv).to(dev).contiguous() for t, tv in zip((x, w), fd.fusion.inputs())]
    for _ in range(20):
        fd.execute(inputs, **opts)
    for rep in range(3):
        torch.cuda.synchronize()
        comm.barrier()
        n = 300
        t = time.perf_counter()
        for _ in range(n):
            fd.execute(inputs, **opts)
        host = (time.perf_counter() - t) / n * 1e6
        torch.cuda.synchronize()
        comm.barrier()
        if rank == 0:
            print(
                f"{name} rep {rep}: host {host:.1f} us/call (300 calls queued), "
                f"stats {fd._cache.graph_stats}",
                flush=True,
            )
