# SPDX-License-Identifier: MIT
"""FusionDefinition: the Python front end, named after nvFuser's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

import torch

from mdfuser import _C
from mdfuser._C import DataType, TensorView

Contiguity = Union[None, bool, Sequence[Optional[bool]]]


class _Ops:
    """The operations of a FusionDefinition, as ``fd.ops.<name>``."""

    def linear(
        self, input: TensorView, weight: TensorView, bias: TensorView | None = None
    ) -> TensorView:
        """``input @ weight.T + bias``, as torch.nn.functional.linear."""
        return _C.linear(input, weight, bias)

    def matmul(self, a: TensorView, b: TensorView) -> TensorView:
        """``a @ b`` for ``a: [..., M, K]`` and ``b: [K, N]``."""
        return _C.matmul(a, b)

    def set(self, input: TensorView) -> TensorView:
        """A copy of ``input``; a communication when its sharding differs."""
        return _C.set(input)


class FusionDefinition:
    """Defines a fusion with global shapes and runs it on local shards.

    Use it as a context manager::

        with FusionDefinition() as fd:
            inp = fd.define_tensor([-1, 1024], dtype=DataType.BFloat16)
            ...
            fd.add_output(out)
        (out,) = fd.execute([inp_shard, ...])
    """

    def __init__(self) -> None:
        self._fusion = _C.Fusion()
        self._cache: _C._FusionExecutorCache | None = None
        self.ops = _Ops()

    def __enter__(self) -> FusionDefinition:
        return self

    def __exit__(self, *exc_info) -> None:
        return None

    @property
    def fusion(self) -> _C.Fusion:
        """The fusion as defined: ``inputs()``, ``outputs()``, ``print``."""
        return self._fusion

    def define_tensor(
        self,
        shape: Sequence[int],
        contiguity: Contiguity = None,
        dtype: DataType = DataType.Float,
    ) -> TensorView:
        """A new input with global ``shape``; ``-1`` marks a size known only at run time."""
        if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
            raise TypeError(
                f"define_tensor: shape must be a sequence of ints, got {type(shape).__name__}"
            )
        for i, extent in enumerate(shape):
            if isinstance(extent, bool) or not isinstance(extent, int):
                raise TypeError(f"define_tensor: shape[{i}] must be an int, got {extent!r}")
        if not isinstance(dtype, DataType):
            raise TypeError(f"define_tensor: dtype must be an mdfuser.DataType, got {dtype!r}")
        if contiguity is None or isinstance(contiguity, bool):
            flags = [True if contiguity is None else contiguity] * len(shape)
        else:
            flags = list(contiguity)
        return self._fusion.define_tensor(list(shape), flags, dtype)

    def add_output(self, tensor: TensorView) -> None:
        """Marks ``tensor`` as an output of the fusion."""
        if not isinstance(tensor, TensorView):
            raise TypeError(f"add_output: expected a TensorView, got {type(tensor).__name__}")
        self._fusion.add_output(tensor)

    def execute(
        self,
        inputs: Sequence[torch.Tensor],
        *,
        _enable_options: Sequence[str] = (),
        _disable_options: Sequence[str] = (),
    ) -> list[torch.Tensor]:
        """Runs the fusion on this process's local input shards.

        Returns this process's local output shards. The first call for a
        new input signature (sizes, strides, dtypes, device) compiles the
        fusion; later calls reuse the program. Once executed, the fusion's
        schedule can no longer change.
        """
        if isinstance(inputs, torch.Tensor) or not isinstance(inputs, Sequence):
            raise TypeError(f"execute expects a list of torch.Tensor, got {type(inputs).__name__}")
        for i, t in enumerate(inputs):
            if not isinstance(t, torch.Tensor):
                raise TypeError(
                    f"execute: input {i} must be a torch.Tensor, got {type(t).__name__}"
                )
        for name, options in (
            ("_enable_options", _enable_options),
            ("_disable_options", _disable_options),
        ):
            if isinstance(options, str) or not all(isinstance(o, str) for o in options):
                raise TypeError(f"execute: {name} must be a list of option names")
        if self._cache is None:
            self._cache = _C._FusionExecutorCache(self._fusion)
        return self._cache.execute(list(inputs), list(_enable_options), list(_disable_options))

    def last_host_ir(self) -> str | None:
        """The printed host program of the most recent ``execute``."""
        return None if self._cache is None else self._cache.last_host_ir()

    def __repr__(self) -> str:
        return str(self._fusion)
