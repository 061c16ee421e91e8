# SPDX-License-Identifier: MIT
"""CUDA kernels of one run of the attention block (TP, d = 1, the default
GPU sizes of transformer_blocks.py) at s = 1, 2 and 4 stream chunks, beside
those of the benchmark's torch reference on the same s streams
(torch_streams), and the host program at s = 2: what a chunked run spends
that torch's chunked run does not.

    PYTHONPATH=python:tests/python:examples python3 benchmarks/gpu/attention_kernels.py
"""

import importlib.util
import os
import sys

import torch
from transformer_blocks import Attention, attention_forward

HERE = os.path.dirname(os.path.abspath(__file__))


def benchmark_module():
    """benchmarks/transformer_blocks.py, whose name the example's takes."""
    sys.path.insert(0, os.path.dirname(HERE))
    path = os.path.join(os.path.dirname(HERE), "transformer_blocks.py")
    spec = importlib.util.spec_from_file_location("blocks_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def profile(name: str, run) -> None:
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    print(f"=== {name}")
    print(
        prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70)
    )


def main() -> None:
    bench = benchmark_module()
    a = Attention(seq=2048, batch=4, e=8192, heads=64)
    case = bench.Case("attention", "tp", a.e, 0, a)
    full = bench.global_inputs(case, "cuda", torch.bfloat16, seed=0)
    fn = bench.reference(case, bench.local_weights(full, 1, 0), 1, communicate=False)
    streams = [torch.cuda.Stream() for _ in range(4)]
    for s in (1, 2, 4):
        block = attention_forward(a, 1, "tp", s)
        inputs = [full[name] for name in block.inputs]
        profile(f"mdfuser s={s}", lambda fd=block.fd, inputs=inputs: fd.execute(inputs))
        profile(
            f"torch_streams s={s}",
            bench.torch_streams(fn, full["x"], bench.chunk_axis(case), s, streams),
        )
        if s == 2:
            print(block.fd.last_host_ir())


if __name__ == "__main__":
    main()
