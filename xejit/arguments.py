"""What a kernel argument is: the facts of numpy, torch and USM arrays (dtype, shape, strides,
address, read-only flag), the compile-time part of them a kernel is specialized on
(:class:`ArraySpec`), and the value the numpy interpreter takes.

Example:
    >>> import numpy as np
    >>> specialize_arg(np.zeros((4, 8), np.float32).T)
    ArraySpec(dtype='f32', rank=2, order=(0, 1), aligned16=True)
    >>> specialize_arg(3), specialize_arg(2.5)
    ('int', 'float')
"""
from __future__ import annotations

import functools
import operator
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import ArgumentError, ArgumentValueError, XejitTypeError, XejitValueError
from .ir import Buffer
from .ir.core import SCALAR_TYPES, ArrayType, ScalarType, bf16, f32, scalar_type_from_numpy
from .runtime.usm_array import UsmArray

#: the launch options a kernel takes besides its arguments, and their defaults
LAUNCH_OPTIONS = {"num_subgroups": None, "num_stages": 3, "grf_mode": "default"}

__all__ = ["LAUNCH_OPTIONS", "launch_grid", "ArraySpec", "array_facts", "memory_order", "specialize_arg", "is_read_only",
           "to_interpreter_value", "is_torch"]


@dataclass(frozen=True)
class ArraySpec:
    """The compile-time facts of an array argument (its part of the specialization key)."""
    dtype: str
    rank: int
    order: tuple[int, ...]
    aligned16: bool

    def ir_type(self) -> ArrayType:
        return _array_ir_type(self)


@functools.lru_cache(maxsize=None)
def _array_ir_type(spec: ArraySpec) -> ArrayType:
    return ArrayType(SCALAR_TYPES[spec.dtype], spec.rank, spec.order, spec.aligned16)


#: type -> is it a torch tensor type (asked many times a call by xejit.matmul's checks)
_TORCH_TYPES: dict[type, bool] = {}


def is_torch(x: Any) -> bool:
    t = type(x)
    known = _TORCH_TYPES.get(t)
    if known is None:
        if len(_TORCH_TYPES) > 256:
            _TORCH_TYPES.clear()
        known = _TORCH_TYPES[t] = t.__module__.startswith("torch") and hasattr(t, "data_ptr")
    return known


@functools.lru_cache(maxsize=1)
def _torch_dtypes() -> dict:
    import torch
    return {torch.bfloat16: bf16, torch.float16: scalar_type_from_numpy(np.float16),
            torch.float32: f32, torch.int8: scalar_type_from_numpy(np.int8),
            torch.uint8: scalar_type_from_numpy(np.uint8), torch.int32: scalar_type_from_numpy(np.int32),
            torch.int64: scalar_type_from_numpy(np.int64), torch.bool: scalar_type_from_numpy(np.bool_)}


_USM_DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "int8": "i8", "uint8": "u8",
               "int32": "i32", "int64": "i64", "bool": "i1"}


def array_facts(x: Any) -> tuple[ScalarType, tuple[int, ...], tuple[int, ...], int]:
    """(dtype, shape, strides in elements, base address) of a numpy/torch/USM array."""
    if isinstance(x, UsmArray):   # DLPack / SUAI / torch XPU memory (xejit.runtime.usm_array)
        if x.dtype not in _USM_DTYPES:
            raise XejitTypeError(f"unsupported array dtype {x.dtype} (kernels take bfloat16, float16, float32, "
                                 f"int8, uint8, int32, int64 arrays)")
        return SCALAR_TYPES[_USM_DTYPES[x.dtype]], x.shape, tuple(s // x.itemsize for s in x.strides), x.ptr
    if is_torch(x):
        tmap = _torch_dtypes()
        if x.dtype not in tmap:
            raise XejitTypeError(f"unsupported torch dtype {x.dtype}")
        return tmap[x.dtype], tuple(x.shape), tuple(x.stride()), x.data_ptr()
    arr = x if isinstance(x, np.ndarray) else np.asarray(x)
    try:
        dt = scalar_type_from_numpy(arr.dtype)
    except KeyError:
        raise XejitTypeError(f"unsupported array dtype {arr.dtype} (kernels take bfloat16, float16, float32, "
                         f"int8, uint8, int32, int64 arrays)") from None
    return (dt, arr.shape, tuple(s // arr.itemsize for s in arr.strides),
            arr.__array_interface__["data"][0])


def memory_order(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """(1, 0) for row-major, (0, 1) for column-major 2D arrays (inner dim contiguous)."""
    if len(shape) == 1:
        return (0,)
    if len(shape) == 2:
        if strides[1] == 1 or shape[1] <= 1 or shape[0] == 0:   # an empty array reads nothing
            return (1, 0)
        if strides[0] == 1 or shape[0] == 1:
            return (0, 1)
        raise XejitValueError(f"array with strides {list(strides)} has no contiguous dimension; "
                         f"pass a row- or column-major array (e.g. .contiguous())")
    return tuple(range(len(shape) - 1, -1, -1))


def specialize_arg(x: Any) -> ArraySpec | str:
    if isinstance(x, bool) or isinstance(x, (int, np.integer)):
        return "int"
    if isinstance(x, (float, np.floating)):
        return "float"
    ma = sys.modules.get("numpy.ma")   # (np.ma would import numpy.ma, ~50 ms, on first use)
    if ma is not None and isinstance(x, ma.MaskedArray):
        raise XejitTypeError("masked arrays are not supported (a kernel would ignore the mask); pass "
                             "x.filled(value) or x.data")
    if isinstance(x, (np.ndarray, UsmArray)) or is_torch(x) or hasattr(x, "__array_interface__"):
        dt, shape, strides, ptr = array_facts(x)
        order = memory_order(shape, strides)
        pitch = strides[order.index(max(order))] if len(shape) == 2 else 0  # outer stride
        aligned = ptr % 16 == 0 and (pitch * dt.itemsize) % 16 == 0
        return ArraySpec(dt.name, len(shape), order, aligned)
    raise XejitTypeError(f"unsupported kernel argument of type {type(x).__name__}; pass arrays, "
                     f"ints, floats or constexpr values")


def is_read_only(x: Any) -> bool:
    """Whether an array argument is marked read-only (numpy's ``writeable`` flag, the read-only
    flag of ``__sycl_usm_array_interface__`` / ``__array_interface__``). Torch tensors have none."""
    if type(x) is np.ndarray:
        return not x.flags.writeable
    if isinstance(x, UsmArray):
        return x.read_only
    if type(x).__module__.startswith("dpctl.memory"):   # raw allocations flag themselves read-only
        return False
    for attr in ("__sycl_usm_array_interface__", "__array_interface__"):
        iface = getattr(x, attr, None)
        if isinstance(iface, dict):
            data = iface.get("data")
            return isinstance(data, tuple) and len(data) > 1 and bool(data[1])
    if isinstance(x, np.ndarray):
        return not x.flags.writeable
    return False


def to_interpreter_value(x: Any, spec: Any) -> Any:
    """A launch argument as the numpy interpreter holds it (arrays share memory)."""
    if spec == "int":
        return np.int64(x)
    if spec == "float":
        return np.float32(x)
    dt = spec.ir_type().dtype
    if isinstance(x, UsmArray):
        raise XejitValueError("the interpreter runs on the host: pass host arrays (numpy, CPU tensors), not "
                              "device (USM / DLPack oneAPI / XPU) arrays")
    if is_torch(x):
        if x.device.type != "cpu":
            raise XejitValueError("the interpreter runs on the host: pass CPU tensors")
        t = x.detach()
        if dt == bf16:
            return Buffer(t.view(__import__("torch").int16).numpy().view(np.uint16), dt)
        return Buffer(t.numpy(), dt)
    arr = np.asarray(x)
    if dt == bf16 and arr.dtype.kind == "V":   # ml_dtypes' bfloat16: the interpreter holds the bits
        arr = arr.view(np.uint16)
    return Buffer(arr, dt)


def launch_grid(grid: Any, name: str) -> tuple[int, ...]:
    """``grid`` (an int or a tuple/list of 1 to 3 ints) as a tuple of Python ints.

    Sizes must be integers (Python or numpy; a float such as ``24 / 16`` is a TypeError, never
    truncated) and non-negative (ValueError); a zero size launches nothing."""
    if type(grid) is tuple and 1 <= len(grid) <= 3 and all(type(g) is int and g >= 0 for g in grid):
        return grid   # the common case, checked without conversions

    sizes = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    if not 1 <= len(sizes) <= 3:
        raise ArgumentValueError(f"{name}: the grid must have 1 to 3 sizes, got {grid!r}")
    out = []
    for g in sizes:
        try:
            if isinstance(g, (bool, np.bool_)):
                raise TypeError
            g = operator.index(g)   # ints, numpy integers, anything integral with __index__
        except TypeError:
            raise ArgumentError(f"{name}: grid sizes must be integers, got {g!r} ({type(g).__name__}) "
                                f"in grid {grid!r}; use xejit.cdiv(n, block) or // for a rounded size") from None
        if g < 0:
            raise ArgumentValueError(f"{name}: grid sizes must be non-negative, got {g} in grid {grid!r}")
        out.append(g)
    return tuple(out)
