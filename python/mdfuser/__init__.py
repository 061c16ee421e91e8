# SPDX-License-Identifier: MIT
"""mdfuser: multi-GPU programs from single-GPU fusion definitions.

Write a FusionDefinition with global shapes, shard its inputs across a
DeviceMesh and split loops across CUDA streams; ``execute`` runs the
compiled host program on each process's local shards, overlapping
communication with computation.
"""

import torch  # noqa: F401  (loads libtorch before the extension needs it)

from mdfuser import multidevice, nn, pytorch_utils
from mdfuser._C import (
    CommunicatorBackend,
    DataType,
    Fusion,
    IterDomain,
    MemoryType,
    ParallelType,
    Scalar,
    TensorView,
    Val,
)
from mdfuser.executor_cache import FusionExecutorCache
from mdfuser.fusion_definition import FusionDefinition
from mdfuser.lru_cache import LRUCache
from mdfuser.profiler import PythonProfiler

__all__ = [
    "CommunicatorBackend",
    "DataType",
    "Fusion",
    "FusionDefinition",
    "FusionDefinitionWrapper",
    "FusionExecutorCache",
    "IterDomain",
    "LRUCache",
    "MemoryType",
    "ParallelType",
    "PythonProfiler",
    "Scalar",
    "TensorView",
    "Val",
    "dtensor",
    "dtensor_execute",
    "execute_with_dtensors",
    "multidevice",
    "nn",
    "pytorch_utils",
]


def __getattr__(name: str):
    # The DTensor front end imports torch.distributed.tensor, which takes
    # seconds; it loads on first use.
    if name in ("FusionDefinitionWrapper", "dtensor", "dtensor_execute", "execute_with_dtensors"):
        import importlib

        dtensor = importlib.import_module("mdfuser.dtensor")
        return dtensor if name == "dtensor" else getattr(dtensor, name)
    raise AttributeError(f"module 'mdfuser' has no attribute {name!r}")
