"""Probe: the SP layer with 2 stream chunks at d = 4, several option sets,
each run 6 times on fresh shards, against the 1-chunk layer."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python", "multidevice"))
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
a = Attention(seq=4 * d, batch=2, e=16 * d, heads=2 * d)
full = layer_inputs(a, seed=13)
one = layer_forward(a, d, "sp", 1, dtype=DataType.BFloat16 if cuda else DataType.Float)
args1 = [shard_tensor(full[k].to(dtype), tv).to(device) for k, tv in one.inputs.items()]
(ref,) = one.fd.execute(args1)
ref = ref.float().cpu()
sets = {
    "default": {},
    "no_direct": {"_disable_options": ["direct_reduce_scatter"]},
    "no_first": {"_disable_options": ["ring_prologues_first"]},
    "no_layout_alias": {"_disable_options": ["alias_layout_ops"]},
}
for name, opts in sets.items():
    bad = []
    for _i in range(6):
        two = layer_forward(a, d, "sp", 2, dtype=DataType.BFloat16 if cuda else DataType.Float)
        args = [shard_tensor(full[k].to(dtype), tv).to(device) for k, tv in two.inputs.items()]
        if not cuda and opts:
            opts = {}
        (y,) = two.fd.execute(args, **opts)
        diff = (y.float().cpu() - ref).abs()
        worst = diff.nan_to_num(nan=1e9).max().item()
        bad.append(round(worst, 3))
    print(f"rank {rank} {name}: worst diff per run {bad}", flush=True)
    if cuda and name == "default" and rank == 0:
        print(
            two.fd.last_host_ir()[:200000],
            file=open(os.environ.get("OUT", "/tmp") + "/layer_sp2_rank0.txt", "w"),
        )
