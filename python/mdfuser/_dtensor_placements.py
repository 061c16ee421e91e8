# SPDX-License-Identifier: MIT
"""The translation between DTensor meshes and placements and mdfuser's
parallel types and shardings, both ways, with the checks of what it supports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh as TorchDeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

from mdfuser._C import ParallelType, TensorView
from mdfuser.multidevice import DeviceMesh

_SUPPORTED = 'Shard(dim), Replicate() and Partial("sum")'


def parallel_types(mesh_ndim: int) -> list[ParallelType]:
    """The mdfuser parallel type of each dimension of a mesh of `mesh_ndim`
    dimensions: the last is mesh_x, the one before mesh_y, then mesh_z."""
    if not 1 <= mesh_ndim <= 3:
        raise ValueError(
            f"mdfuser runs on meshes of 1 to 3 dimensions (mesh_x, mesh_y, mesh_z), "
            f"got a mesh of {mesh_ndim}"
        )
    return [ParallelType.mesh_z, ParallelType.mesh_y, ParallelType.mesh_x][3 - mesh_ndim :]


def _placement_key(p) -> tuple:
    """A hashable, exact description of a supported placement."""
    if type(p) is Shard:
        return ("shard", p.dim)
    if type(p) is Replicate:
        return ("replicate",)
    if type(p) is Partial and p.reduce_op == "sum":
        return ("partial",)
    raise _NotSupported(p)


class _NotSupported(Exception):
    def __init__(self, placement) -> None:
        super().__init__(placement)
        self.placement = placement


def _describe(dt: DTensor) -> str:
    return (
        f"a DTensor of shape {tuple(dt.shape)} on mesh {dt.device_mesh.mesh.tolist()} "
        f"with placements {tuple(dt.placements)}"
    )


@dataclass(frozen=True)
class _InputSpec:
    """One input as the compiled fusion sees it."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    # Per mesh dimension: ("shard", dim), ("replicate",) or ("partial",).
    placements: tuple[tuple, ...]

    @property
    def partial_dims(self) -> list[int]:
        return [i for i, p in enumerate(self.placements) if p[0] == "partial"]

    def shards(self) -> dict[int, list[int]]:
        """Tensor dimension -> the mesh dimensions sharding it, in mesh
        order (outermost first, as DTensor splits them)."""
        result: dict[int, list[int]] = {}
        for i, p in enumerate(self.placements):
            if p[0] == "shard":
                result.setdefault(p[1], []).append(i)
        return result


def _mesh_key(mesh: TorchDeviceMesh) -> tuple:
    return (mesh.device_type, tuple(mesh.mesh.shape), tuple(mesh.mesh.flatten().tolist()))


def _input_spec(
    i: int, dt: Any, mesh: TorchDeviceMesh, caller: str = "FusionDefinitionWrapper"
) -> _InputSpec:
    """Checks input `i` and describes it; ValueError naming `caller` and the
    input otherwise."""
    if not isinstance(dt, DTensor):
        raise ValueError(
            f"{caller}: input {i} is a {type(dt).__name__}, not a DTensor; "
            "pass every input as a DTensor (torch.distributed.tensor.distribute_tensor or "
            "DTensor.from_local), replicated ones with placements [Replicate()]"
        )
    if _mesh_key(dt.device_mesh) != _mesh_key(mesh):
        raise ValueError(
            f"{caller}: input {i} is {_describe(dt)} ({dt.device_mesh.device_type}),"
            f" but input 0 is on mesh {mesh.mesh.tolist()} ({mesh.device_type}); every input "
            "must be on the same mesh"
        )
    ndim = dt.dim()
    keys = []
    for p in dt.placements:
        try:
            key = _placement_key(p)
        except _NotSupported:
            raise ValueError(
                f"{caller}: input {i} is {_describe(dt)}; placement {p} is not "
                f"supported (supported: {_SUPPORTED})"
            ) from None
        if key[0] == "shard":
            if not -ndim <= key[1] < ndim:
                raise ValueError(
                    f"{caller}: input {i} is {_describe(dt)}; {p} names a "
                    f"dimension a tensor of {ndim} dimensions does not have"
                )
            key = ("shard", key[1] % ndim)
        elif key[0] == "partial" and mesh.mesh.shape[len(keys)] == 1:
            key = ("replicate",)  # one contribution is the sum
        keys.append(key)
    spec = _InputSpec(tuple(dt.shape), dt.dtype, tuple(keys))
    _check_uniform(caller, f"input {i}", spec, mesh, dt.to_local().shape, _describe(dt))
    return spec


def _check_uniform(
    caller: str, what: str, spec: _InputSpec, mesh: TorchDeviceMesh, local_shape, desc
) -> None:
    """Non-uniform (jagged) shards are refused: each sharded dimension must
    divide evenly, and the local shard must be that even part."""
    sizes = list(mesh.mesh.shape)
    for dim, mesh_dims in spec.shards().items():
        parts = 1
        for m in mesh_dims:
            parts *= sizes[m]
        extent = spec.shape[dim]
        if extent % parts != 0:
            raise ValueError(
                f"{caller}: {what} is {desc}; dimension {dim} of extent "
                f"{extent} does not split evenly into {parts} shards. mdfuser supports uniform "
                "sharding only: pad the dimension to a multiple of the devices sharding it"
            )
    if local_shape is None:
        return
    expected = list(spec.shape)
    for dim, mesh_dims in spec.shards().items():
        for m in mesh_dims:
            expected[dim] //= sizes[m]
    if list(local_shape) != expected:
        raise ValueError(
            f"{caller}: {what} is {desc}, but its local shard has shape "
            f"{tuple(local_shape)}; uniform sharding gives every device a shard of shape "
            f"{tuple(expected)}. mdfuser supports uniform sharding only"
        )


def _placements(what: str, role: str, tv: TensorView, mesh: TorchDeviceMesh) -> list:
    """The DTensor placements of `tv` (`role`: "output 0", "input 1") on
    `mesh`; ValueError where they cannot express its sharding."""
    pts = parallel_types(mesh.ndim)
    out_mesh = tv.device_mesh
    if out_mesh is not None and out_mesh != DeviceMesh(mesh.mesh):
        raise ValueError(
            f"{what}: {role} ({tv!r}) is on {out_mesh!r}, not on the DTensors' mesh "
            f"{mesh.mesh.tolist()}; every tensor must be on the DTensors' mesh"
        )
    axes = {} if out_mesh is None else {pt: rest for pt, *rest in tv._device_axes()}
    placements = []
    depth: dict[int, list[tuple[int, int]]] = {}
    for i, pt in enumerate(pts):
        if pt not in axes:
            placements.append(Replicate())
            continue
        axis, above, blocks = axes[pt]
        if not blocks:
            raise ValueError(
                f"{what}: {role} ({tv!r}) is sharded on {pt} along a "
                f"part of axis {axis} that is not its outermost part; DTensor placements "
                "cannot express that (see doc/dtensor.md): ask for output_placements or "
                "run the fusion with the raw API"
            )
        placements.append(Shard(axis))
        depth.setdefault(axis, []).append((above, i))
    for axis, levels in depth.items():
        mesh_dims = [i for _, i in sorted(levels)]
        if mesh_dims != sorted(mesh_dims):
            raise ValueError(
                f"{what}: {role} ({tv!r}) splits axis {axis} across "
                "inner mesh dimensions above outer ones; DTensor's Shard splits them in "
                "mesh order, so ask for output_placements"
            )
    return placements


def _output_dtensor(what: str, j: int, out: torch.Tensor, tv: TensorView, mesh: TorchDeviceMesh):
    """Output j, this rank's `out` of `tv`, as a DTensor on `mesh`."""
    placements = _placements(what, f"output {j}", tv, mesh)
    sizes = list(mesh.mesh.shape)
    shape = list(out.shape)
    for p, n in zip(placements, sizes):
        if isinstance(p, Shard):
            shape[p.dim] *= n
    stride = torch.empty(shape, device="meta").stride()
    return DTensor.from_local(
        out, mesh, placements, run_check=False, shape=torch.Size(shape), stride=stride
    )


def _shard(tv: TensorView, shards: dict[int, list[int]], sizes, pts, offset: int) -> None:
    """Splits each sharded dimension of `tv` outer by its mesh dimensions'
    sizes, in mesh order, and parallelizes the outer parts. Dimensions are
    handled last first, so that splitting one leaves the loop positions of
    the earlier ones as they are."""
    for dim in sorted(shards, reverse=True):
        axis = dim + offset
        for m in shards[dim]:
            tv.outer_split(axis, sizes[m])
            tv.axis(axis).parallelize(pts[m])
            axis += 1
