# SPDX-License-Identifier: MIT
"""Conversions between torch and mdfuser types, named after nvFuser's."""

from __future__ import annotations

import torch

from mdfuser._C import DataType

_TORCH_TO_MDFUSER = {
    torch.float32: DataType.Float,
    torch.float64: DataType.Double,
    torch.float16: DataType.Half,
    torch.bfloat16: DataType.BFloat16,
    torch.int64: DataType.Int,
    torch.int32: DataType.Int32,
    torch.bool: DataType.Bool,
    torch.uint64: DataType.UInt64,
    float: DataType.Double,
    int: DataType.Int,
    bool: DataType.Bool,
}

_MDFUSER_TO_TORCH = {v: k for k, v in _TORCH_TO_MDFUSER.items() if isinstance(k, torch.dtype)}


def torch_dtype_to_nvfuser_dtype(dtype) -> DataType:
    """The DataType of a torch dtype (or of the Python types float, int,
    bool). KeyError for dtypes mdfuser does not have."""
    try:
        return _TORCH_TO_MDFUSER[dtype]
    except KeyError:
        raise KeyError(
            f"mdfuser has no DataType for {dtype!r}; supported: "
            + ", ".join(str(k) for k in _TORCH_TO_MDFUSER)
        ) from None


def nvfuser_dtype_to_torch_dtype(dtype: DataType) -> torch.dtype:
    """The torch dtype of a DataType."""
    return _MDFUSER_TO_TORCH[dtype]


def python_scalar_to_nvfuser_dtype(value) -> DataType:
    """The DataType of a Python number: Bool, Int or Double."""
    return _TORCH_TO_MDFUSER[type(value)]
