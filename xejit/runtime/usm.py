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
from .launch import _remember_zero_copy, _StagingPool

#: USM buffers of arrays that died, for the next :func:`empty` of the same size class: a new USM
#: allocation, its first touch by a kernel and its free cost more than a small kernel (64x64
#: fp32 ``xejit.matmul``: ~75 us of a 150 us call). A buffer is here only once no array views it.
_recycled = _StagingPool()
_recycled.max_bytes = 128 << 20


class _Owner:
    """The base of an :func:`empty` array: numpy keeps it alive as long as any view of the array,
    and its ``__del__`` gives the USM buffer back to :data:`_recycled`. ``base`` is the dpctl
    memory (``xejit.runtime.launch`` finds USM arrays through their chain of bases)."""

    __slots__ = ("base", "queue", "size", "__array_interface__")

    def __init__(self, mem, queue, size: int, shape: tuple, dtype: np.dtype, strides):
        self.base, self.queue, self.size = mem, queue, size
        self.__array_interface__ = {"data": (mem._pointer, False), "shape": shape, "typestr": dtype.str,
                                    "strides": strides, "version": 3}
        if dtype.names is not None:   # (only a structured dtype needs descr; reading it costs ~1 us)
            self.__array_interface__["descr"] = dtype.descr

    def __del__(self):
        try:
            _recycled.give(self.queue, self.size, self.base)
        except Exception:  # noqa: BLE001  (interpreter shutdown: the pool may be gone)
            pass


def empty(shape, dtype, *, order: str = "C", device: Device | None = None) -> np.ndarray:
    """An uninitialised numpy array backed by USM shared memory of ``device``'s queue (a buffer of
    an array that died is reused: see :data:`_recycled`)."""
    device = device or default_device()
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    queue = device.queue
    size, mem = _recycled.take(max(n * dtype.itemsize, 1), queue)
    strides = None
    if order == "F" and len(shape) > 1:
        strides, step = [], dtype.itemsize
        for d in shape:
            strides.append(step)
            step *= d
        strides = tuple(strides)
    out = np.asarray(_Owner(mem, queue, size, shape, dtype, strides))
    if out.dtype != dtype:   # a dtype the array interface spells as raw bytes (ml_dtypes' bfloat16: "V2")
        out = out.view(dtype)
    # known to launches as zero-copy memory of this queue from the start (no owner search)
    _remember_zero_copy(out, queue, mem, mem._pointer)
    return out


def asarray(x, *, order: str = "K", device: Device | None = None) -> np.ndarray:
    """A USM-backed copy of ``x`` (row-major, or column-major when ``x`` is and ``order="K"``)."""
    x = np.asarray(x)
    keep_f = order == "F" or (order == "K" and x.flags.f_contiguous and not x.flags.c_contiguous)
    out = empty(x.shape, x.dtype, order="F" if keep_f else "C", device=device)
    out[...] = x
    return out
