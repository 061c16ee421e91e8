# SPDX-License-Identifier: MIT
"""FusionExecutorCache: a fusion's compiled programs, as ``fd.fec``."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Sequence
from typing import Any

import torch

from mdfuser import _C
from mdfuser._C import CommunicatorBackend
from mdfuser.sharding import Sharding


def _is_number(value: Any) -> bool:
    """A Python number: a constant's value, or a scalar input's at execute."""
    return isinstance(value, (bool, int, float))


def _split_arguments(inputs) -> tuple[list[torch.Tensor], list]:
    """execute's arguments as the executor takes them: the tensors, and the
    scalar inputs' values, each in order."""
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    scalars = [v for v in inputs if not isinstance(v, torch.Tensor)]
    return tensors, scalars


# Whether this process is one of a job of several, once asked.
_several: bool | None = None


def _several_processes() -> bool:
    """Whether this process is one of a job of several (its communicator's
    size, fixed for the process's life)."""
    global _several
    if _several is None:
        _several = _C.Communicator.instance().size() > 1
    return _several


def _is_dtensor(t: torch.Tensor) -> bool:
    """Whether `t` is a DTensor; without importing torch.distributed.tensor,
    which a DTensor's creator has imported already."""
    for name in ("torch.distributed.tensor", "torch.distributed._tensor"):
        module = sys.modules.get(name)
        if module is not None and isinstance(t, getattr(module, "DTensor", ())):
            return True
    return False


# The outputs of executed fusions that the user left without a mesh, each
# with the executor cache that ran it and its index among the outputs:
# shard_tensor lays such an output out as the last program did, with the
# sharding mdfuser propagated to it (nvfuser_direct writes that sharding
# into the output's TensorView; mdfuser's definition stays as written).
_unplaced_outputs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def note_unplaced_outputs(fusion: _C.Fusion, fec: FusionExecutorCache) -> None:
    """Notes `fusion`'s outputs without a mesh as run by `fec`."""
    for index, tv in enumerate(fusion.outputs()):
        if tv.device_mesh is None:
            _unplaced_outputs[tv] = (fec, index)


def propagated_output(tv: _C.TensorView) -> _C.TensorView | None:
    """The last program's output for `tv`, an output the user left without
    a mesh of a fusion that ran; None for any other tensor."""
    entry = _unplaced_outputs.get(tv)
    if entry is None:
        return None
    fec, index = entry
    return fec.output_tensors()[index]


class FusionExecutorCache:
    """The programs compiled from one fusion, one per input signature and
    set of options: nvfuser_direct's FusionExecutorCache. A
    FusionDefinition makes its own at the first ``execute`` (``fd.fec``);
    ``LRUCache.cache_compile`` shares one among equal fusions.
    """

    def __init__(self, fusion: _C.Fusion) -> None:
        if not isinstance(fusion, _C.Fusion):
            raise TypeError(
                f"FusionExecutorCache: expected an mdfuser Fusion (fd.fusion), got "
                f"{type(fusion).__name__}"
            )
        self._fusion = fusion
        self._cache = _C._FusionExecutorCache(fusion)
        # What every execute reads of the fusion, read once: its inputs,
        # each with whether it is a tensor (fixed once defined), and
        # whether it lets mdfuser choose the stream chunk count (fixed once
        # a program is compiled, which freezes the schedule).
        self._inputs: list[tuple[Any, bool]] | None = None
        self._chooses_stream_chunks: bool | None = None

    def fusion(self) -> _C.Fusion:
        """The fusion it compiles."""
        return self._fusion

    def execute(
        self,
        inputs: Sequence[torch.Tensor],
        *,
        device: Any = None,
        auto_schedule: bool = True,
        backend: CommunicatorBackend | None = None,
        _enable_options: Sequence[str] = (),
        _disable_options: Sequence[str] = (),
    ) -> list[torch.Tensor]:
        """Runs the fusion on this process's local shards
        (FusionDefinition.execute says what each argument does)."""
        try:
            self._check_arguments(
                inputs, device, auto_schedule, backend, _enable_options, _disable_options
            )
        except (TypeError, ValueError) as e:
            # Perhaps on this rank only: the ranks that compare raise it
            # too, those that wait for this rank in a collective stop.
            self._cache.note_failed_run(f"{type(e).__name__}: {e}", isinstance(e, TypeError))
            raise
        tensors, scalars = _split_arguments(inputs)
        cuda = next((t.device for t in tensors if t.is_cuda), None)
        chooses = self._chooses_stream_chunks
        if chooses is None:
            chooses = self._fusion.chooses_stream_chunks
        if chooses or (cuda is not None and _several_processes()):
            # The machine's model chooses the stream chunk count, and on
            # GPUs whether the rings' first GEMMs go first.
            from mdfuser.calibration import ensure_machine_model

            ensure_machine_model(cuda if cuda is not None else torch.device("cpu"))
        outputs = self._cache.execute(
            tensors, scalars, list(_enable_options), list(_disable_options), backend
        )
        self._chooses_stream_chunks = chooses
        return outputs

    def get_output_shardings(self) -> list:
        """Per output of the most recently run program, its mesh and
        sharded axis (FusionDefinition.get_output_shardings)."""
        return [Sharding(tv) for tv in self.output_tensors()]

    def output_tensors(self) -> list:
        """The outputs of the most recently run program, with the shardings
        mdfuser chose for them."""
        return self._cache.compiled_outputs()

    def last_host_ir(self) -> str | None:
        """The printed host program of the most recent run."""
        return self._cache.last_host_ir()

    def _check_arguments(
        self, inputs, device, auto_schedule, backend, _enable_options, _disable_options
    ) -> None:
        if not auto_schedule:
            raise ValueError(
                "execute: auto_schedule=False asks for manual scheduling, which mdfuser does "
                "not have; it schedules every fusion itself"
            )
        if type(inputs) not in (list, tuple) and (
            isinstance(inputs, torch.Tensor) or not isinstance(inputs, Sequence)
        ):
            raise TypeError(f"execute expects a list of torch.Tensor, got {type(inputs).__name__}")
        if self._inputs is None:
            self._inputs = [(v, v.is_tensor()) for v in self._fusion.inputs()]
        defined = self._inputs
        if len(inputs) != len(defined):
            raise ValueError(
                f"execute expected {len(defined)} inputs (one per define_tensor and "
                f"define_scalar(None), in their order), got {len(inputs)}"
            )
        for i, (t, (v, is_tensor)) in enumerate(zip(inputs, defined)):
            if not is_tensor:
                # A scalar input: execute checks its kind against the dtype.
                if not _is_number(t):
                    raise TypeError(
                        f"execute: input {i} is the scalar input {v} ({v.dtype().name}): "
                        f"expected a Python bool, int or float, got {type(t).__name__}"
                    )
                continue
            if not isinstance(t, torch.Tensor):
                raise TypeError(
                    f"execute: input {i} must be a torch.Tensor, got {type(t).__name__}"
                )
            if type(t) is not torch.Tensor and _is_dtensor(t):
                raise TypeError(
                    f"execute: input {i} is a DTensor, but execute takes this rank's local "
                    "shards as plain tensors; pass DTensors to "
                    "mdfuser.dtensor.FusionDefinitionWrapper, or pass t.to_local() here"
                )
        for name, options in (
            ("_enable_options", _enable_options),
            ("_disable_options", _disable_options),
        ):
            if isinstance(options, str) or (
                options and not all(isinstance(o, str) for o in options)
            ):
                raise TypeError(f"execute: {name} must be a list of option names")
        if backend is not None and not isinstance(backend, CommunicatorBackend):
            raise TypeError(
                f"execute: backend must be an mdfuser.CommunicatorBackend, got {backend!r}"
            )
        if device is not None:
            wanted = torch.device(f"cuda:{device}" if isinstance(device, int) else device)
            for i, t in enumerate(inputs):
                if not isinstance(t, torch.Tensor):
                    continue
                if t.device.type != wanted.type or (
                    wanted.index is not None and t.device.index != wanted.index
                ):
                    raise ValueError(f"execute: input {i} is on {t.device}, not on device={device}")
