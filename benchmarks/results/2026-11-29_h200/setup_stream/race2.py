"""Probe: the SP layer, 2 stream chunks, d = 4 against 1 chunk; fresh fusions
and one fusion reused; worst diff per run and per token half."""

import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(__file__), "..")
for p in ("tests/python", "examples", "tests/python/multidevice"):
    sys.path.insert(0, os.path.join(ROOT, p))
from test_transformer_layer import layer_inputs  # noqa: E402
from transformer_blocks import Attention, layer_forward  # noqa: E402

from mdfuser import DataType  # noqa: E402
from mdfuser.multidevice import Communicator, shard_tensor  # noqa: E402

comm = Communicator.instance()
d, rank = comm.size(), comm.rank()
cuda = torch.cuda.is_available()
device = (
    torch.device("cuda", comm.local_rank() % torch.cuda.device_count())
    if cuda
    else torch.device("cpu")
)
if cuda:
    torch.cuda.set_device(device)
dtype = torch.bfloat16 if cuda else torch.float32
dt = DataType.BFloat16 if cuda else DataType.Float
a = Attention(seq=4 * d, batch=2, e=16 * d, heads=2 * d)
full = layer_inputs(a, seed=13)
one = layer_forward(a, d, "sp", 1, dtype=dt)
args1 = [shard_tensor(full[k].to(dtype), tv).to(device) for k, tv in one.inputs.items()]
(ref,) = one.fd.execute(args1)
ref = ref.float().cpu()
reps = int(os.environ.get("REPS", "6"))
opts = {}
if os.environ.get("OPTS"):
    opts = {"_disable_options": os.environ["OPTS"].split(",")}


def worst(y):
    diff = (y.float().cpu() - ref).abs().nan_to_num(nan=1e9)
    rows = diff.amax(dim=(1, 2)).tolist() if diff.dim() == 3 else [diff.max().item()]
    batch = diff.amax(dim=(0, 2)).tolist() if diff.dim() == 3 else []
    return "s" + "/".join(f"{v:.3g}" for v in rows) + " b" + "/".join(f"{v:.3g}" for v in batch)


fresh = []
for _ in range(reps):
    two = layer_forward(a, d, "sp", 2, dtype=dt)
    args = [shard_tensor(full[k].to(dtype), tv).to(device) for k, tv in two.inputs.items()]
    (y,) = two.fd.execute(args, **opts)
    fresh.append(worst(y))
same = []
two = layer_forward(a, d, "sp", 2, dtype=dt)
args = [shard_tensor(full[k].to(dtype), tv).to(device) for k, tv in two.inputs.items()]
for _ in range(reps):
    (y,) = two.fd.execute(args, **opts)
    same.append(worst(y))
tag = os.environ.get("TAG", "")
print(f"[{tag}] rank {rank} shape {tuple(ref.shape)} fresh {fresh}", flush=True)
print(f"[{tag}] rank {rank} same  {same}", flush=True)
if rank == 0 and os.environ.get("OUT") and os.environ.get("DUMP"):
    open(os.path.join(os.environ["OUT"], f"hostir_{tag}.txt"), "w").write(two.fd.last_host_ir())
