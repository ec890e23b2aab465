"""numpy arrays that live in USM shared memory: a kernel uses them without any copy.

Example:
    >>> import numpy as np
    >>> a = empty((2, 3), np.float32); a[:] = 1
    >>> b = asarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    >>> int(b.sum())
    15
"""
from __future__ import annotations

import math

import numpy as np

from .device import Device, default_device
from .launch import _remember_zero_copy


def empty(shape, dtype, *, order: str = "C", device: Device | None = None) -> np.ndarray:
    """An uninitialised numpy array backed by USM shared memory of ``device``'s queue."""
    import dpctl.memory as dm

    device = device or default_device()
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    dtype = np.dtype(dtype)
    n = math.prod(int(s) for s in shape)
    mem = dm.MemoryUSMShared(max(n * dtype.itemsize, 1), queue=device.queue)
    flat = np.frombuffer(mem, dtype=dtype, count=n)
    out = flat.reshape(shape, order=order)
    # known to launches as zero-copy memory of this queue from the start (no owner search)
    _remember_zero_copy(out, device.queue, mem, mem._pointer)
    return out


def asarray(x, *, order: str = "K", device: Device | None = None) -> np.ndarray:
    """A USM-backed copy of ``x`` (row-major, or column-major when ``x`` is and ``order="K"``)."""
    x = np.asarray(x)
    keep_f = order == "F" or (order == "K" and x.flags.f_contiguous and not x.flags.c_contiguous)
    out = empty(x.shape, x.dtype, order="F" if keep_f else "C", device=device)
    out[...] = x
    return out
