"""Probe (call 4): chrome traces of one steady-state call of a transformer
block at each s, the default program and compute_on_main_stream, and of
torch's computation alone, per rank. Run from the repository root with
TRACE_DIR set; takes transformer_blocks.py's arguments."""

import os
import sys

# The benchmark's module, not the example of the same name.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import transformer_blocks as tb  # noqa: E402
from blocks_reference import (  # noqa: E402
    Attention,
    Case,
    global_inputs,
    local_tokens,
    local_weights,
    reference,
    torch_no_overlap,
)

from mdfuser.multidevice import CommunicatorBackend  # noqa: E402

CUDA = CommunicatorBackend.cuda
VARIANTS = {
    "default": {},
    "pipeline": {"backend": CUDA, "_enable_options": ["compute_on_main_stream"]},
}
CUDA_ONLY = [torch.profiler.ProfilerActivity.CUDA]


def main():
    args = tb.parse_args()
    run = tb.Run(args)
    out = os.environ["TRACE_DIR"]
    os.makedirs(out, exist_ok=True)
    for block in args.blocks:
        for mode in args.modes:
            att = Attention(args.seq, args.batch, args.hidden, args.heads)
            case = Case(block, mode, args.hidden, args.tokens, None if block == "mlp" else att)
            full = global_inputs(case, run.device, run.torch_dtype, seed=1234)
            w = local_weights(full, run.d, run.rank)
            x_ref = local_tokens(full["x"], run.d, run.rank) if mode == "sp" else full["x"]
            compute = torch_no_overlap(reference(case, w, run.d, False), x_ref)
            runs = [("compute_only", compute)]
            for s in args.chunks:
                for name, kw in VARIANTS.items():
                    b = case.define(run.d, s, run.md_dtype)
                    inputs = run.shard_inputs(b, full)
                    call = lambda b=b, i=inputs, kw=kw: b.fd.execute(i, **kw)  # noqa: E731
                    runs.append((f"{name}_s{s}", call))
            for name, fn in runs:
                for _ in range(6):
                    fn()
                # One profile to warm the profiler, then the traced one.
                for _ in range(2):
                    torch.cuda.synchronize()
                    dist.barrier()
                    with torch.profiler.profile(activities=CUDA_ONLY) as prof:
                        fn()
                        torch.cuda.synchronize()
                prof.export_chrome_trace(f"{out}/trace_{block}_{mode}_{name}_rank{run.rank}.json")
                dist.barrier()
    dist.destroy_process_group()


main()
