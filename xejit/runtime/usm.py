"""numpy arrays that live in USM shared memory: a kernel uses them without any copy.

Example:
    >>> import numpy as np
    >>> a = empty((2, 3), np.float32); a[:] = 1
    >>> b = asarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    >>> int(b.sum())
    15
"""
from __future__ import annotations

import numpy as np

from .device import Device, default_device


def empty(shape, dtype, *, order: str = "C", device: Device | None = None) -> np.ndarray:
    """An uninitialised numpy array backed by USM shared memory of ``device``'s queue."""
    import dpctl.memory as dm

    device = device or default_device()
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    mem = dm.MemoryUSMShared(max(n * dtype.itemsize, 1), queue=device.queue)
    flat = np.frombuffer(mem, dtype=dtype, count=n)
    return flat.reshape(shape, order=order)


def asarray(x, *, order: str = "K", device: Device | None = None) -> np.ndarray:
    """A USM-backed copy of ``x`` (row-major, or column-major when ``x`` is and ``order="K"``)."""
    x = np.asarray(x)
    keep_f = order == "F" or (order == "K" and x.flags.f_contiguous and not x.flags.c_contiguous)
    out = empty(x.shape, x.dtype, order="F" if keep_f else "C", device=device)
    out[...] = x
    return out
