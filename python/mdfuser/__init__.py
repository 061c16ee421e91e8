# SPDX-License-Identifier: MIT
"""mdfuser: multi-GPU programs from single-GPU fusion definitions.

Write a FusionDefinition with global shapes, shard its inputs across a
DeviceMesh and split loops across CUDA streams; ``execute`` runs the
compiled host program on each process's local shards, overlapping
communication with computation.
"""

import torch  # noqa: F401  (loads libtorch before the extension needs it)

from mdfuser import multidevice
from mdfuser._C import DataType, Fusion, IterDomain, ParallelType, TensorView
from mdfuser.fusion_definition import FusionDefinition

__all__ = [
    "DataType",
    "Fusion",
    "FusionDefinition",
    "IterDomain",
    "ParallelType",
    "TensorView",
    "multidevice",
]
