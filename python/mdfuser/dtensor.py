# SPDX-License-Identifier: MIT
"""DTensor in, DTensor out: run a single-GPU fusion definition on DTensors.

``FusionDefinitionWrapper(define_fusion)`` takes a function that defines a
fusion with global shapes and no schedule. Called on a list of DTensors, it
derives each input's mesh and sharding from the DTensor's ``device_mesh``
and ``placements``, compiles the fusion once per (shapes, dtypes, mesh,
placements), runs it on the local shards and returns DTensors laid out the
way mdfuser computed them, or as ``output_placements`` asks.

A torch mesh of n dimensions maps to an mdfuser ``DeviceMesh`` of the same
shape and ranks: its last dimension is ``mesh_x``, the one before ``mesh_y``,
the one before that ``mesh_z``. ``Shard(d)`` on mesh dimension i splits
tensor dimension d outer by the size of mesh dimension i and puts the outer
part on that dimension's parallel type (several mesh dimensions on one
tensor dimension split it in mesh order, outermost first, as DTensor does);
``Replicate()`` adds nothing; ``Partial("sum")`` makes the input a sum
across that mesh dimension of per-device contributions (see
``_PartialInputs``). See doc/dtensor.md for what DTensor placements can and
cannot express. The translation between placements and mdfuser shardings
lives in ``_dtensor_placements``, the shared torch.distributed world in
``_dtensor_world``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import DeviceMesh as TorchDeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard

from mdfuser._C import CommunicatorBackend, TensorView
from mdfuser._dtensor_placements import (
    _describe,
    _input_spec,
    _InputSpec,
    _mesh_key,
    _output_dtensor,
    _placement_key,
    _placements,
    _shard,
    parallel_types,
)
from mdfuser._dtensor_world import _check_same_world, init_process_group
from mdfuser.fusion_definition import FusionDefinition, _is_number
from mdfuser.multidevice import Communicator, DeviceMesh
from mdfuser.pytorch_utils import nvfuser_dtype_to_torch_dtype

__all__ = ["FusionDefinitionWrapper", "init_process_group", "parallel_types"]


class _PartialInputs(FusionDefinition):
    """A FusionDefinition whose inputs marked partial are sums of per-device
    contributions.

    A tensor that is a partial sum across a mesh dimension is, in mdfuser's
    IR, the sum over an axis split across that dimension: input i with
    ``Partial("sum")`` on mesh dimensions M is defined with one leading axis
    per dimension in M (extent: that dimension's size, parallelized on its
    parallel type), and what ``define_fusion`` receives for it is the sum
    over those axes. Each device passes its contribution with those axes of
    extent 1, and mdfuser sums them (an allreduce, or a reduce-scatter when
    the sum is consumed sharded) where the definition first needs the
    value.
    """

    def __init__(self, specs: Sequence[_InputSpec], mesh_sizes: Sequence[int]) -> None:
        super().__init__()
        self._specs = list(specs)
        self._mesh_sizes = list(mesh_sizes)
        # The fusion inputs in definition order (the extended ones for
        # partial inputs), scalar inputs included.
        self.defined: list = []

    def define_scalar(self, value=None, dtype=None):
        scalar = super().define_scalar(value, dtype)
        if value is None:
            self.defined.append(scalar)
        return scalar

    def define_tensor(self, shape, contiguity=None, dtype=None, is_cpu=False, stride_order=None):
        from mdfuser._C import DataType

        dtype = DataType.Float if dtype is None else dtype
        i = len(self.defined)
        spec = self._specs[i] if i < len(self._specs) else None
        partial = [] if spec is None else spec.partial_dims
        if not partial:
            tv = super().define_tensor(shape, contiguity, dtype, is_cpu, stride_order)
            self.defined.append(tv)
            return tv
        if stride_order is not None:
            raise ValueError(
                f"FusionDefinitionWrapper: input {i} is a partial sum; define it without "
                "stride_order"
            )
        extra = [self._mesh_sizes[m] for m in partial]
        tv = super().define_tensor(extra + list(shape), None, dtype, is_cpu)
        self.defined.append(tv)
        return self.ops.sum(tv, list(range(len(extra))), dtype=dtype)


@dataclass
class _Compiled:
    fd: _PartialInputs
    specs: list[_InputSpec]


class FusionDefinitionWrapper:
    """Runs a single-GPU fusion definition on DTensors.

    ``define_fusion(fd)`` defines the fusion with global shapes (one
    ``fd.define_tensor`` per input, in the order of the DTensors; a
    ``fd.define_scalar(None, dtype)`` takes a number in its place) and
    ``fd.add_output``; it schedules nothing. ``wrapper(dtensors)`` returns
    one DTensor per output::

        def define_fusion(fd):
            x = fd.define_tensor([-1, h])
            w = fd.define_tensor([n, h])
            fd.add_output(fd.ops.linear(x, w))

        mlp = FusionDefinitionWrapper(define_fusion)
        (y,) = mlp([x_dtensor, w_dtensor])
    """

    def __init__(self, define_fusion: Callable[[FusionDefinition], None]) -> None:
        if not callable(define_fusion):
            raise TypeError(
                "FusionDefinitionWrapper: expected a function that defines the fusion, got "
                f"{type(define_fusion).__name__}"
            )
        self._define_fusion = define_fusion
        self._compiled: dict[tuple, _Compiled] = {}
        # The fusion of the most recent call.
        self._last: _Compiled | None = None

    @property
    def num_definitions(self) -> int:
        """How many times the fusion was defined and scheduled: once per
        distinct (shapes, dtypes, mesh, placements, output placements)."""
        return len(self._compiled)

    @property
    def num_programs(self) -> int:
        """How many host programs mdfuser compiled for this wrapper, over
        every definition (each compiles once per local input signature)."""
        return sum(c.fd._cache.num_programs for c in self._compiled.values() if c.fd._cache)

    def __call__(
        self,
        inputs: Sequence[DTensor],
        output_placements: Sequence[Sequence | None] | None = None,
        *,
        backend: CommunicatorBackend | None = None,
        _enable_options: Sequence[str] = (),
        _disable_options: Sequence[str] = (),
    ) -> list[DTensor]:
        """Runs the fusion on `inputs` (DTensors, all on one mesh).

        `output_placements`, when given, holds per output the placements to
        return it with (a sequence of Shard and Replicate, one per mesh
        dimension), or None to leave it as mdfuser computes it. `backend`
        and the options go to FusionDefinition.execute (doc/options.md).
        """
        execute = dict(
            backend=backend, _enable_options=_enable_options, _disable_options=_disable_options
        )
        try:
            compiled, local, mesh = self._prepare(inputs, output_placements)
        except (TypeError, ValueError) as e:
            # Perhaps on this rank only, while the others run the program
            # they ran last: the ranks that compare raise it too, those that
            # wait for this rank in a collective stop.
            if self._last is not None and self._last.fd._cache is not None:
                self._last.fd._cache.note_failed_run(
                    f"{type(e).__name__}: {e}", isinstance(e, TypeError)
                )
            raise
        self._last = compiled
        outs = compiled.fd.execute(local, **execute)
        return [
            self._to_dtensor(j, out, tv, mesh)
            for j, (out, tv) in enumerate(zip(outs, compiled.fd.output_tensors()))
        ]

    def _prepare(self, inputs, output_placements):
        """The compiled fusion for `inputs`, their local shards and their
        mesh."""
        if isinstance(inputs, (torch.Tensor, str)) or not isinstance(inputs, Sequence):
            raise TypeError(
                f"FusionDefinitionWrapper: expected a list of DTensors, got {type(inputs).__name__}"
            )
        first = next((dt for dt in inputs if isinstance(dt, DTensor)), None)
        if first is None:
            if inputs and not _is_number(inputs[0]):
                _input_spec(0, inputs[0], None)
            raise ValueError("FusionDefinitionWrapper: expected at least one DTensor input")
        mesh = first.device_mesh
        parallel_types(mesh.ndim)  # 1 to 3 dimensions
        rank = Communicator.instance().rank()
        if rank not in mesh.mesh.flatten().tolist():
            raise ValueError(
                f"FusionDefinitionWrapper: this rank ({rank}) is not in the DTensors' mesh "
                f"{mesh.mesh.tolist()}, so it holds no part of them; call the wrapper on the "
                "mesh's ranks only (with the raw API, ranks outside a fusion's mesh get empty "
                "outputs)"
            )
        # A number is the value of a scalar input (define_scalar(None)).
        specs = [
            None if _is_number(dt) else _input_spec(i, dt, mesh) for i, dt in enumerate(inputs)
        ]
        _check_same_world()
        self._check_mesh(mesh)
        wanted = self._output_placements(output_placements, mesh)

        key = (_mesh_key(mesh), tuple(specs), wanted)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._define(specs, mesh, wanted)
            self._compiled[key] = compiled

        local = []
        for spec, dt in zip(specs, inputs):
            if spec is None:
                local.append(dt)
                continue
            t = dt.to_local()
            for _ in spec.partial_dims:
                t = t.unsqueeze(0)
            local.append(t)
        return compiled, local, mesh

    def _check_mesh(self, mesh: TorchDeviceMesh) -> None:
        size = Communicator.instance().size()
        ranks = mesh.mesh.flatten().tolist()
        if len(set(ranks)) != len(ranks) or not all(0 <= r < size for r in ranks):
            raise ValueError(
                f"FusionDefinitionWrapper: the mesh {mesh.mesh.tolist()} must hold distinct "
                f"ranks of mdfuser's world of {size} processes"
            )

    @staticmethod
    def _output_placements(output_placements, mesh: TorchDeviceMesh):
        if output_placements is None:
            return None
        if isinstance(output_placements, (str, bytes)) or not isinstance(
            output_placements, Sequence
        ):
            raise TypeError(
                "FusionDefinitionWrapper: output_placements must be a list with, per output, "
                f"a list of placements or None; got {type(output_placements).__name__}"
            )
        result = []
        for j, placements in enumerate(output_placements):
            if placements is None:
                result.append(None)
                continue
            placements = tuple(placements)
            if len(placements) != mesh.ndim:
                raise ValueError(
                    f"FusionDefinitionWrapper: output_placements[{j}] = {placements} has "
                    f"{len(placements)} placements; the mesh has {mesh.ndim} dimensions"
                )
            keys = []
            for p in placements:
                if type(p) is Shard and p.dim >= 0:
                    keys.append(("shard", p.dim))
                elif type(p) is Replicate:
                    keys.append(("replicate",))
                else:
                    raise ValueError(
                        f"FusionDefinitionWrapper: output_placements[{j}] = {placements}: "
                        f"{p} is not supported for an output (supported: Shard(dim) with "
                        "dim >= 0 and Replicate(); mdfuser returns complete sums)"
                    )
            result.append(tuple(keys))
        return tuple(result)

    def _define(self, specs: list[_InputSpec], mesh: TorchDeviceMesh, wanted) -> _Compiled:
        sizes = list(mesh.mesh.shape)
        pts = parallel_types(mesh.ndim)
        md_mesh = DeviceMesh(mesh.mesh)
        fd = _PartialInputs(specs, sizes)
        with fd:
            self._define_fusion(fd)
        inputs = fd.defined
        if len(inputs) != len(specs) or len(fd.fusion.inputs()) != len(specs):
            raise ValueError(
                f"FusionDefinitionWrapper: define_fusion defined {len(fd.fusion.inputs())} "
                f"inputs but was called with {len(specs)}; pass one DTensor per "
                "fd.define_tensor and one number per fd.define_scalar(None), in order"
            )
        for i, (spec, tv) in enumerate(zip(specs, inputs)):
            if (spec is None) == tv.is_tensor():
                given = "a number" if spec is None else "a DTensor"
                defined = "a tensor" if tv.is_tensor() else "a scalar input"
                raise ValueError(
                    f"FusionDefinitionWrapper: input {i} is {given}, but define_fusion defined "
                    f"{defined} there ({tv!r}); pass one DTensor per fd.define_tensor and one "
                    "number per fd.define_scalar(None), in order"
                )
            if spec is None:
                continue
            if tv.device_mesh is not None:
                raise ValueError(
                    f"FusionDefinitionWrapper: define_fusion placed input {i} ({tv!r}) on a "
                    "mesh itself; with DTensor inputs the placements decide the inputs' "
                    "schedule, so define the fusion without set_device_mesh on inputs"
                )
            offset = len(spec.partial_dims)
            self._check_shape(i, spec, tv, offset)
            tv.set_device_mesh(md_mesh)
            for k, m in enumerate(spec.partial_dims):
                tv.axis(k).parallelize(pts[m])
            _shard(tv, spec.shards(), sizes, pts, offset)
        if wanted is not None:
            outputs = fd.fusion.outputs()
            if len(wanted) != len(outputs):
                raise ValueError(
                    f"FusionDefinitionWrapper: output_placements has {len(wanted)} entries but "
                    f"the fusion has {len(outputs)} outputs"
                )
            for j, (keys, tv) in enumerate(zip(wanted, outputs)):
                if keys is None:
                    continue
                spec = _InputSpec(tuple(-1 for _ in range(tv.ndim)), None, keys)
                for dim in spec.shards():
                    if dim >= tv.ndim:
                        raise ValueError(
                            f"FusionDefinitionWrapper: output_placements[{j}] shards dimension "
                            f"{dim}, but output {j} has {tv.ndim} dimensions"
                        )
                tv.set_device_mesh(md_mesh)
                _shard(tv, spec.shards(), sizes, pts, 0)
        return _Compiled(fd, specs)

    @staticmethod
    def _check_shape(i: int, spec: _InputSpec, tv: TensorView, offset: int) -> None:
        extents = [s.value for s in tv.shape()][offset:]
        dtype = nvfuser_dtype_to_torch_dtype(tv.dtype())
        mismatch = len(extents) != len(spec.shape) or any(
            e is not None and e != s for e, s in zip(extents, spec.shape)
        )
        if mismatch or dtype != spec.dtype:
            shown = [-1 if e is None else e for e in extents]
            raise ValueError(
                f"FusionDefinitionWrapper: input {i} has global shape {spec.shape} and dtype "
                f"{spec.dtype}, but define_fusion defines it with shape {shown} and dtype "
                f"{dtype}"
            )

    def _to_dtensor(self, j: int, out: torch.Tensor, tv: TensorView, mesh: TorchDeviceMesh):
        return _output_dtensor("FusionDefinitionWrapper", j, out, tv, mesh)


def execute_with_dtensors(fd: FusionDefinition, in_dtensors: Sequence[DTensor]) -> list[DTensor]:
    """Runs `fd`, whose inputs carry their meshes and shardings (the raw
    API), on DTensors, as nvfuser_direct's function of this name does: each
    input's placements must be those its TensorView declares, and the
    outputs come back as DTensors with the placements mdfuser chose.
    FusionDefinitionWrapper instead derives the shardings from the DTensors.
    """
    return _execute_with_dtensors("execute_with_dtensors", fd, in_dtensors)


def dtensor_execute(fd: FusionDefinition, in_dtensors: Sequence[DTensor]) -> list[DTensor]:
    """execute_with_dtensors under the name other versions of
    nvfuser_direct give it (their tests call nvfd.dtensor_execute)."""
    return _execute_with_dtensors("dtensor_execute", fd, in_dtensors)


def _execute_with_dtensors(
    what: str, fd: FusionDefinition, in_dtensors: Sequence[DTensor]
) -> list[DTensor]:
    if not isinstance(fd, FusionDefinition):
        raise TypeError(f"{what}: expected a FusionDefinition, got {type(fd).__name__}")
    if isinstance(in_dtensors, (torch.Tensor, str)) or not isinstance(in_dtensors, Sequence):
        raise TypeError(f"{what}: expected a list of DTensors, got {type(in_dtensors).__name__}")
    tvs = fd.fusion.inputs()
    if len(in_dtensors) != len(tvs):
        raise ValueError(
            f"{what}: the fusion has {len(tvs)} inputs, got {len(in_dtensors)} DTensors"
        )
    # Scalar inputs take their values as numbers, which fd.execute checks.
    tensors = [(i, dt, tv) for i, (dt, tv) in enumerate(zip(in_dtensors, tvs)) if tv.is_tensor()]
    if not tensors:
        raise ValueError(f"{what}: expected at least one DTensor input")
    first = tensors[0][1]
    mesh = first.device_mesh if isinstance(first, DTensor) else None
    for i, dt, tv in tensors:
        spec = _input_spec(i, dt, mesh, what)
        want = _placements(what, f"input {i}", tv, mesh)
        if list(spec.placements) != [_placement_key(p) for p in want]:
            raise ValueError(
                f"{what}: input {i} is {_describe(dt)}, but the fusion shards {tv!r} as "
                f"{tuple(want)}; redistribute it, or let FusionDefinitionWrapper derive the "
                "shardings from the DTensors"
            )
    _check_same_world()
    outs = fd.execute([dt.to_local() if tv.is_tensor() else dt for dt, tv in zip(in_dtensors, tvs)])
    return [
        _output_dtensor(what, j, out, tv, mesh)
        for j, (out, tv) in enumerate(zip(outs, fd.output_tensors()))
    ]
