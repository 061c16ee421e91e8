# SPDX-License-Identifier: MIT
"""CUDA kernels of one run of the attention block (TP, d = 1, the default
GPU sizes of transformer_blocks.py) at s = 1 and s = 2 stream chunks, and
the host program at s = 2: what the chunked run spends that the unchunked
one does not.

    PYTHONPATH=python:tests/python:examples python3 benchmarks/gpu/attention_kernels.py
"""

import torch
from transformer_blocks import Attention, attention_forward


def main() -> None:
    a = Attention(seq=2048, batch=4, e=8192, heads=64)
    shapes = dict(
        x=(a.seq, a.batch, a.e), w_qkv=(3 * a.e, a.e), b_qkv=(3 * a.e,), w_o=(a.e, a.e), b_o=(a.e,)
    )
    for s in (1, 2):
        block = attention_forward(a, 1, "tp", s)
        g = torch.Generator().manual_seed(0)
        inputs = [torch.randn(*shapes[n], generator=g).div(8) for n in block.inputs]
        inputs = [t.to("cuda", torch.bfloat16) for t in inputs]
        for _ in range(3):
            block.fd.execute(inputs)
        torch.cuda.synchronize()
        activities = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            block.fd.execute(inputs)
            torch.cuda.synchronize()
        print(f"=== s={s}")
        table = prof.key_averages().table(
            sort_by="cuda_time_total", row_limit=12, max_name_column_width=70
        )
        print(table)
        if s == 2:
            print(block.fd.last_host_ir())


if __name__ == "__main__":
    main()
