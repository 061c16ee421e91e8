# SPDX-License-Identifier: MIT
"""Normalizations written with fusion primitives.

They shard like any other composition: over an axis split across devices,
the sums they take become local sums and an allreduce. As the primitives
they are written from, they compute Half and BFloat16 inputs in Float and
return Float; `ops.cast` gives the input's dtype back (a cast that FoldCasts
and FuseLayerNorms fold into the kernel before it).
"""

from __future__ import annotations

from mdfuser import _C
from mdfuser._C import DataType, TensorView

_FLOATING = (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16)


def _compute_dtype(dtype: DataType) -> DataType:
    return DataType.Float if dtype in (DataType.BFloat16, DataType.Half) else dtype


def _check_operand(ops, x, op: str, role: str = "input") -> None:
    """TypeError unless `x` is a floating-point TensorView (torch refuses
    integer normalizations too); ValueError when it belongs to another
    FusionDefinition than `ops`', before any operation is added."""
    if not isinstance(x, TensorView):
        raise TypeError(f"{op}: {role} must be a TensorView, got {type(x).__name__}")
    ops._check(x, op, role)
    if x.dtype() not in _FLOATING:
        raise TypeError(
            f"{op} takes floating-point tensors, got {x.dtype().name} for {role} {x!r}; "
            "cast it first"
        )


def softmax(ops, x: TensorView, dim: int) -> TensorView:
    """torch.softmax(x, dim): exp(x - max) / sum(exp(x - max)); Float for
    Half and BFloat16 inputs."""
    _check_operand(ops, x, "softmax")
    if isinstance(dim, bool) or not isinstance(dim, int) or not -x.ndim <= dim < x.ndim:
        raise ValueError(
            f"softmax: dim={dim!r} is out of range for a {x.ndim}-dimensional tensor "
            f"(valid: {-x.ndim} to {x.ndim - 1})"
        )
    io_dtype = x.dtype()
    xf = ops.cast(x, _compute_dtype(io_dtype)) if _compute_dtype(io_dtype) != io_dtype else x
    # The shift for a stable exp; over an empty axis it is -inf, which no
    # value reads (torch's softmax of an empty axis is empty).
    shift = _C.ops._max(ops._fusion, xf, [dim], True, DataType.Null, True)
    shifted = ops.sub(xf, shift)
    e = ops.exp(shifted)
    return ops.div(e, ops.sum(e, [dim], keepdim=True))


def _normalized_dims(x: TensorView, normalized_ndim: int, op: str) -> list[int]:
    if isinstance(normalized_ndim, bool) or not isinstance(normalized_ndim, int):
        raise TypeError(f"{op}: normalized_ndim must be an int, got {normalized_ndim!r}")
    if not 1 <= normalized_ndim <= x.ndim:
        raise ValueError(
            f"{op}: normalized_ndim={normalized_ndim} must be in 1..{x.ndim} for a "
            f"{x.ndim}-dimensional input"
        )
    return list(range(x.ndim - normalized_ndim, x.ndim))


def layer_norm(
    ops,
    x: TensorView,
    normalized_ndim: int = 1,
    weight: TensorView | None = None,
    bias: TensorView | None = None,
    eps: float = 1e-5,
) -> TensorView:
    """torch.nn.functional.layer_norm over the last `normalized_ndim` axes,
    with optional elementwise weight and bias; Float for Half and BFloat16
    inputs."""
    _check_operand(ops, x, "layer_norm")
    for role, param in (("weight", weight), ("bias", bias)):
        if param is not None:
            _check_operand(ops, param, "layer_norm", role)
    io_dtype = x.dtype()
    compute = _compute_dtype(io_dtype)
    dims = _normalized_dims(x, normalized_ndim, "layer_norm")
    xf = ops.cast(x, compute) if compute != io_dtype else x
    # The variance from the centred values the result needs anyway
    # (var_mean would compute x - mean a second time).
    centred = ops.sub(xf, ops.mean(xf, dims, keepdim=True))
    var = ops.mean(ops.mul(centred, centred), dims, keepdim=True)
    y = ops.mul(centred, ops.rsqrt(ops.add(var, eps)))
    if weight is not None:
        y = ops.mul(y, ops.cast(weight, compute) if weight.dtype() != compute else weight)
    if bias is not None:
        y = ops.add(y, ops.cast(bias, compute) if bias.dtype() != compute else bias)
    return y


def rms_norm(
    ops,
    x: TensorView,
    normalized_ndim: int = 1,
    weight: TensorView | None = None,
    eps: float = 1e-6,
) -> TensorView:
    """torch.nn.functional.rms_norm over the last `normalized_ndim` axes:
    x / sqrt(mean(x^2) + eps) * weight; Float for Half and BFloat16 inputs."""
    _check_operand(ops, x, "rms_norm")
    if weight is not None:
        _check_operand(ops, weight, "rms_norm", "weight")
    io_dtype = x.dtype()
    compute = _compute_dtype(io_dtype)
    dims = _normalized_dims(x, normalized_ndim, "rms_norm")
    xf = ops.cast(x, compute) if compute != io_dtype else x
    ms = ops.mean(ops.mul(xf, xf), dims, keepdim=True)
    y = ops.mul(xf, ops.rsqrt(ops.add(ms, eps)))
    if weight is not None:
        y = ops.mul(y, ops.cast(weight, compute) if weight.dtype() != compute else weight)
    return y
