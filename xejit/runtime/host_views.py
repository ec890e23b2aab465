"""Torch CPU tensors as numpy views of their memory (no copy), kept per tensor.

numpy arrays are what the fast paths know: a repeated launch (``xejit.launch_plan``) finds an
array's address and its prepared plan by the array object's identity, and ``xejit.matmul``
remembers its choices for numpy operands. A torch CPU tensor of a dtype numpy has (bfloat16 as
ml_dtypes' numpy bfloat16) is therefore given to them as its numpy view, the same view object for as long
as the tensor lives with the same memory and layout (``set_`` or ``resize_`` give it new memory:
a new view). Writes through the view are the tensor's.

Example:
    >>> import torch
    >>> from xejit.runtime.host_views import numpy_view
    >>> t = torch.ones(2, 3)
    >>> numpy_view(t) is numpy_view(t), numpy_view(t).shape
    (True, (2, 3))
"""
from __future__ import annotations

import ctypes
import sys
import weakref
from typing import Any

import numpy as np

from ..ir.core import numpy_dtype

#: torch dtypes (by name) that have a numpy view here
VIEWABLE = ("float32", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool")

#: id(tensor) -> (weak reference to it, its numpy view, data_ptr, strides)
_views: dict[int, tuple] = {}
#: the most views kept (a view keeps its tensor's memory alive until the tensor dies or is seen
#: again with other memory)
MAX_VIEWS = 256

_BFLOAT16 = numpy_dtype("bfloat16")


#: the tensor types viewed, by module and name (this module does not import torch)
_PLAIN_TENSOR_TYPES = (("torch", "Tensor"), ("torch.nn.parameter", "Parameter"))


def is_plain_tensor(x: Any) -> bool:
    """``x`` is a torch.Tensor or torch.nn.Parameter, not a subclass (FakeTensor, a user's)."""
    t = type(x)
    return (t.__module__, t.__name__) in _PLAIN_TENSOR_TYPES


def as_tensor(view: Any) -> Any:
    """A numpy array (of a dtype torch has, bfloat16 included) as a torch tensor on its memory."""
    import torch
    if view.dtype == _BFLOAT16:   # (not .name: a Python-level property in numpy 2, ~2 us)
        return torch.from_numpy(view.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(view)


def _forget(ref: weakref.ref, key: int) -> None:
    hit = _views.get(key)
    if hit is not None and hit[0] is ref:
        del _views[key]


def numpy_view(x: Any) -> Any:
    """``x`` as a numpy view when it is a torch CPU tensor (no subclass) of a dtype numpy has,
    else ``x`` itself; the same view object for the same tensor, memory and layout."""
    if not is_plain_tensor(x) or x.device.type != "cpu":
        return x
    ptr, strides = x.data_ptr(), x.stride()
    hit = _views.get(id(x))
    if hit is not None and hit[0]() is x and hit[2] == ptr and hit[3] == strides and hit[1].shape == x.shape:
        return hit[1]
    if str(x.dtype)[6:] not in VIEWABLE:   # ("torch.float32")
        return x
    try:
        torch = sys.modules["torch"]   # (x is a tensor: torch is imported)
        if x.dtype is torch.bfloat16:   # torch has no numpy bfloat16: its bits, as ml_dtypes' bfloat16
            view = x.detach().view(torch.int16).numpy().view(_BFLOAT16)
        else:
            view = x.detach().numpy()
    except (RuntimeError, TypeError):   # a conjugate or negative view: numpy cannot take it
        return x
    if len(_views) >= MAX_VIEWS:
        _views.clear()
    key = id(x)
    _views[key] = (weakref.ref(x, lambda r, k=key: _forget(r, k)), view, ptr, strides)
    return view


def host_address(x: np.ndarray) -> int:
    """The address of a numpy array's first element: through the buffer protocol where the array
    gives a writable contiguous buffer (0.5 us), else its array interface (``ctypes.data`` and
    ``__array_interface__`` build an object or a dict: 1.8-2.2 us, three times a GEMV call).

    >>> x = np.arange(4.0)
    >>> host_address(x) == x.__array_interface__["data"][0]
    True
    """
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(x))
    except (TypeError, ValueError, BufferError):   # read-only, not contiguous, empty
        return x.__array_interface__["data"][0]
