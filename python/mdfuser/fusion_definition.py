# SPDX-License-Identifier: MIT
"""FusionDefinition: the Python front end, named after nvFuser's."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Optional, Union

import torch

from mdfuser import _C
from mdfuser._C import CommunicatorBackend, DataType, TensorView, Val
from mdfuser.executor_cache import (
    FusionExecutorCache,
    _is_number,
    _split_arguments,
    note_unplaced_outputs,
)

__all__ = ["FusionDefinition", "_split_arguments"]

Contiguity = Union[None, bool, Sequence[Optional[bool]]]


def _dims(dims, dim, op: str):
    """The reduced axes from nvFuser's two spellings: `dims` or `dim`."""
    if dims is not None and dim is not None:
        raise TypeError(f"{op}: give dims or dim, not both")
    chosen = dim if dims is None else dims
    if chosen is None:
        return None
    if isinstance(chosen, bool):
        raise TypeError(f"{op}: dims must be ints, got {chosen!r}")
    return [chosen] if isinstance(chosen, int) else list(chosen)


def _keepdim(keepdim, keep_dim, op: str) -> bool:
    """keepdim from nvFuser's two spellings: `keepdim` or `keep_dim`."""
    value = keep_dim if keep_dim is not None else keepdim
    if not isinstance(value, bool):
        raise TypeError(f"{op}: keepdim must be a bool, got {value!r}")
    return value


def _correction(correction, op: str) -> int:
    # torch takes a float correction too; mdfuser counts elements in
    # integers, so a fractional one is refused rather than truncated.
    if isinstance(correction, bool) or not isinstance(correction, int):
        raise TypeError(f"{op}: correction must be an int, got {correction!r}")
    return correction


class _Ops:
    """The operations of a FusionDefinition, as ``fd.ops.<name>``.

    Pointwise operations take tensors, scalars (``fd.define_scalar``) and
    Python numbers, with torch's broadcasting and nvFuser's type promotion
    (arithmetic on Half and BFloat16 returns Float; doc/ops.md). Each
    family's header in csrc/ir/ops/ says what its operations take and how
    they shard; tests/python/test_ops_*.py show each against torch.
    """

    def __init__(self, fusion: _C.Fusion) -> None:
        self._fusion = fusion

    # Reductions accept nvFuser's spellings: sum(x, [1]), sum(x, dims=[1]),
    # sum(x, 1, keepdim=True), keep_dim=...
    def sum(self, arg, dims=None, keepdim=False, dtype=DataType.Null, *, dim=None, keep_dim=None):
        """Sum over `dims` (all when omitted); `dtype` as torch.sum's."""
        return _C.ops._sum(
            self._fusion, arg, _dims(dims, dim, "sum"), _keepdim(keepdim, keep_dim, "sum"), dtype
        )

    def max(self, arg, dims=None, keepdim=False, *, dim=None, keep_dim=None):
        """Maximum over `dims` (torch.amax)."""
        return _C.ops._max(
            self._fusion,
            arg,
            _dims(dims, dim, "max"),
            _keepdim(keepdim, keep_dim, "max"),
            DataType.Null,
        )

    def min(self, arg, dims=None, keepdim=False, *, dim=None, keep_dim=None):
        """Minimum over `dims` (torch.amin)."""
        return _C.ops._min(
            self._fusion,
            arg,
            _dims(dims, dim, "min"),
            _keepdim(keepdim, keep_dim, "min"),
            DataType.Null,
        )

    def mean(self, arg, dims=None, keepdim=False, *, dim=None, keep_dim=None):
        """Mean over `dims`: a sum divided by the global count."""
        return _C.ops._mean(
            self._fusion, arg, _dims(dims, dim, "mean"), _keepdim(keepdim, keep_dim, "mean")
        )

    def var_mean(self, arg, dims=None, correction=1, keepdim=False, *, dim=None, keep_dim=None):
        """(variance, mean) over `dims`, as torch.var_mean."""
        return _C.ops._var_mean(
            self._fusion,
            arg,
            _dims(dims, dim, "var_mean"),
            _correction(correction, "var_mean"),
            _keepdim(keepdim, keep_dim, "var_mean"),
        )

    def var(self, arg, dims=None, correction=1, keepdim=False, *, dim=None, keep_dim=None):
        """Variance over `dims`, as torch.var."""
        self._check(arg, "var")
        return self.var_mean(arg, dims, correction, keepdim, dim=dim, keep_dim=keep_dim)[0]

    def shape(self, arg: TensorView) -> list[Val]:
        """The global extents of `arg`, as Scalars."""
        self._check(arg, "shape")
        return arg.shape()

    def size(self, arg: TensorView, dim: int) -> Val:
        """The global extent of dimension `dim` of `arg`, a Scalar."""
        self._check(arg, "size")
        return arg.size(dim)

    def stride_order(self, arg: TensorView, stride_order: Sequence[int]) -> TensorView:
        """A copy of `arg`. mdfuser keeps buffers row-major, so the memory
        layout asked for is not applied; the values are the same."""
        self._check(arg, "stride_order")
        if sorted(stride_order) != list(range(arg.ndim)):
            raise ValueError(
                f"stride_order: {list(stride_order)} is not a permutation of 0..{arg.ndim - 1}"
            )
        return _C.ops.set(self._fusion, arg)

    def softmax(self, arg: TensorView, dim: int) -> TensorView:
        """torch.softmax along `dim`, from primitives (see mdfuser.nn)."""
        from mdfuser import nn

        return nn.softmax(self, arg, dim)

    def layer_norm(self, arg, normalized_ndim: int = 1, weight=None, bias=None, eps: float = 1e-5):
        """Layer normalization over the last `normalized_ndim` axes."""
        from mdfuser import nn

        return nn.layer_norm(self, arg, normalized_ndim, weight, bias, eps)

    def rms_norm(self, arg, normalized_ndim: int = 1, weight=None, eps: float = 1e-6):
        """RMS normalization over the last `normalized_ndim` axes."""
        from mdfuser import nn

        return nn.rms_norm(self, arg, normalized_ndim, weight, eps)

    def _check(self, tv, op: str, role: str = "operand 0") -> None:
        """TypeError unless `tv` is a TensorView; ValueError, worded as the
        operations' own (bind_ops.cpp), when it belongs to another
        FusionDefinition."""
        if not isinstance(tv, TensorView):
            raise TypeError(f"{op}: expected a TensorView, got {type(tv).__name__}")
        if not self._fusion.contains(tv):
            raise ValueError(
                f"{op}: {role} {tv!r} belongs to another FusionDefinition; use values of this one"
            )


def _forward(name: str):
    function = getattr(_C.ops, name)

    @functools.wraps(function)
    def method(self, *args, **kwargs):
        return function(self._fusion, *args, **kwargs)

    return method


for _name in dir(_C.ops):
    if not _name.startswith("_") and not hasattr(_Ops, _name):
        setattr(_Ops, _name, _forward(_name))


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
        self._fec: FusionExecutorCache | None = None
        # The executor cache whose outputs shard_tensor knows of.
        self._noted_fec: FusionExecutorCache | None = None
        self.ops = _Ops(self._fusion)

    def __enter__(self) -> FusionDefinition:
        return self

    def __exit__(self, *exc_info) -> None:
        return None

    @property
    def fusion(self) -> _C.Fusion:
        """The fusion as defined: ``inputs()``, ``outputs()``, ``print``;
        once the definition's own is dropped (``del fd._fusion`` after
        ``fd.fec = cache.cache_compile(fd.fusion)``), the executor cache's."""
        if "_fusion" in self.__dict__:
            return self._fusion
        if self._fec is None:
            raise AttributeError("fusion: the definition has neither a fusion nor a fec")
        return self._fec.fusion()

    def define_tensor(
        self,
        shape: Sequence[int],
        contiguity: Contiguity = None,
        dtype: DataType = DataType.Float,
        is_cpu: bool = False,
        stride_order: Sequence[int] | None = None,
    ) -> TensorView:
        """A new input with global ``shape``.

        An extent of -1 is known only at run time; 1 makes a broadcast axis.
        ``stride_order`` and ``contiguity`` describe the inputs' layout;
        mdfuser reads inputs of any layout. ``is_cpu`` keeps a
        0-dimensional input on the CPU next to CUDA inputs.
        """
        if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
            raise TypeError(
                f"define_tensor: shape must be a sequence of ints, got {type(shape).__name__}"
            )
        for i, extent in enumerate(shape):
            if isinstance(extent, bool) or not isinstance(extent, int):
                raise TypeError(f"define_tensor: shape[{i}] must be an int, got {extent!r}")
        if not isinstance(dtype, DataType):
            raise TypeError(f"define_tensor: dtype must be an mdfuser.DataType, got {dtype!r}")
        if dtype == DataType.Null:
            raise TypeError("define_tensor: dtype must not be DataType.Null")
        if contiguity is None or isinstance(contiguity, bool):
            flags = [True if contiguity is None else contiguity] * len(shape)
        else:
            flags = list(contiguity)
        order = [] if stride_order is None else [int(s) for s in stride_order]
        return self._fusion.define_tensor(list(shape), flags, dtype, order, bool(is_cpu))

    def from_pytorch(self, tensor: torch.Tensor, static_sizes: bool = False) -> TensorView:
        """An input shaped like `tensor`: its sizes when `static_sizes`, else
        symbolic ones (1 stays a broadcast axis)."""
        from mdfuser.pytorch_utils import torch_dtype_to_nvfuser_dtype

        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"from_pytorch: expected a torch.Tensor, got {type(tensor).__name__}")
        shape = [s if static_sizes or s == 1 else -1 for s in tensor.shape]
        return self.define_tensor(
            shape,
            dtype=torch_dtype_to_nvfuser_dtype(tensor.dtype),
            is_cpu=tensor.dim() == 0 and tensor.is_cpu,
        )

    def define_scalar(self, value: Any = None, dtype: DataType | None = None) -> Val:
        """A constant operand: ``define_scalar(0.5)``, ``define_scalar(2, DataType.Int)``;
        with ``None``, a scalar input whose value each ``execute`` gives, in
        its place among the inputs: ``define_scalar(None, DataType.Double)``.

        Its dtype defaults to Double for floats (and for inputs), Int for
        ints and Bool for bools; like a Python number, it promotes a
        tensor's dtype only through its kind (a Float tensor times 0.5
        stays Float, an Int tensor times 0.5 is Double).
        """
        if dtype is not None and not isinstance(dtype, DataType):
            raise TypeError(f"define_scalar: dtype must be an mdfuser.DataType, got {dtype!r}")
        if value is None:
            return self._fusion.define_scalar_input(DataType.Double if dtype is None else dtype)
        if not _is_number(value):
            raise TypeError(
                f"define_scalar: value must be a bool, int or float, got {type(value).__name__}"
            )
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not (-(2**63) <= value < 2**63)
        ):
            raise ValueError(f"define_scalar: {value} does not fit a 64-bit integer")
        return self._fusion.define_scalar(value, DataType.Null if dtype is None else dtype)

    def add_output(self, tensor: TensorView) -> None:
        """Marks ``tensor`` as an output of the fusion (an input is returned as is)."""
        if not isinstance(tensor, TensorView):
            raise TypeError(f"add_output: expected a TensorView, got {type(tensor).__name__}")
        self._fusion.add_output(tensor)

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
        """Runs the fusion on this process's local input shards.

        Returns this process's local output shards (an empty tensor for an
        output whose mesh does not hold this process). The first call for a
        new input signature (sizes, strides, dtypes, device) compiles the
        fusion; later calls reuse the program. Once executed, the fusion's
        schedule can no longer change. ``backend`` picks the library that
        carries communications (default: for CUDA tensors the CUDA backend's
        copy engines where every rank is on this host and the GPUs map each
        other's memory, NCCL otherwise; Gloo for CPU tensors); ``device`` is
        accepted for compatibility and must match the inputs' device when
        given. mdfuser schedules every fusion:
        ``auto_schedule=False`` (manual scheduling) is refused.
        """
        if self._fec is None:
            self._fec = FusionExecutorCache(self._fusion)
        outputs = self._fec.execute(
            inputs,
            device=device,
            auto_schedule=auto_schedule,
            backend=backend,
            _enable_options=_enable_options,
            _disable_options=_disable_options,
        )
        if self._noted_fec is not self._fec:
            # Once per executor cache (fd.fec may be replaced): the outputs
            # left without a mesh, for shard_tensor.
            note_unplaced_outputs(self.fusion, self._fec)
            self._noted_fec = self._fec
        return outputs

    @property
    def fec(self) -> FusionExecutorCache:
        """The fusion's executor cache, once ``execute`` has run (before, like
        nvfuser_direct's ``fd.fec``, there is none: AttributeError). It may
        be set, as nvfuser_direct's tests set it to an LRUCache's::

            fd.fec = cache.cache_compile(fd.fusion)

        and ``execute`` then runs through it."""
        if self._fec is None:
            raise AttributeError("fec: the fusion has no executor cache until it is executed")
        return self._fec

    @fec.setter
    def fec(self, cache: FusionExecutorCache) -> None:
        if not isinstance(cache, FusionExecutorCache):
            raise TypeError(
                "fec: expected a FusionExecutorCache (from LRUCache.cache_compile), got "
                f"{type(cache).__name__}"
            )
        self._fec = cache

    @property
    def _cache(self) -> _C._FusionExecutorCache | None:
        """The compiled programs (num_programs, graph_stats), once executed."""
        return None if self._fec is None else self._fec._cache

    def output_tensors(self) -> list[TensorView]:
        """The outputs of the most recently run program, with the shardings
        mdfuser chose for them (pass one to multidevice.shard_tensor to take
        a global tensor's part the way ``execute`` returns it)."""
        if self._fec is None:
            raise ValueError("output_tensors: execute the fusion first")
        return self._fec.output_tensors()

    def get_output_shardings(self) -> list:
        """Per output, its mesh and sharded axis: ``.mesh`` and
        ``.axis_sharded_on(parallel_type)`` (-1 when replicated)."""
        self.output_tensors()  # ValueError before the first execute
        return self._fec.get_output_shardings()

    def last_host_ir(self) -> str | None:
        """The printed host program of the most recent ``execute``."""
        return None if self._fec is None else self._fec.last_host_ir()

    def __repr__(self) -> str:
        return str(self.fusion)
