"""A minimal oneAPI DLPack producer for the tests (dpctl 0.22.1 has no ``dpctl.tensor``).

``OneAPIArray`` owns dpctl USM memory (device memory by default, as an XPU tensor's) and exports it
with ``__dlpack_device__() == (kDLOneAPI = 14, device index)`` and ``__dlpack__()`` (an unversioned
``dltensor`` capsule: pointer, shape, strides in elements, dtype). The capsule is built by
``xejit.runtime.usm_array.export_capsule``, whose structure layout the tests check against numpy's
and torch's own DLPack consumers and producers (``test_usm_protocols.py``). ``xp`` is a tiny array
namespace (``__array_namespace__``) whose ``from_dlpack`` makes an ``OneAPIArray`` view of another
oneAPI exporter's memory without a copy: results of ``xejit.matmul`` come back through it.
"""
from __future__ import annotations

import types

import numpy as np

from xejit.runtime.usm_array import export_capsule


class OneAPIArray:
    def __init__(self, shape, dtype, queue, *, usm="device", mem=None, offset=0, strides=None, keep=None,
                 dl_dtype=None):
        import dpctl.memory as dm
        self.shape, self.dtype, self.queue = tuple(shape), np.dtype(dtype), queue
        self.dl_dtype = dl_dtype or self.dtype.name    # "bfloat16" over uint16 bit patterns
        n = int(np.prod(self.shape, dtype=np.int64))
        if mem is None:
            alloc = {"device": dm.MemoryUSMDevice, "shared": dm.MemoryUSMShared, "host": dm.MemoryUSMHost}[usm]
            mem = alloc(max(n * self.dtype.itemsize, 1), queue=queue)
        self.mem, self.offset, self.keep = mem, offset, keep     # offset in bytes
        self.strides = tuple(strides) if strides is not None else \
            tuple(int(np.prod(self.shape[i + 1:], dtype=np.int64)) for i in range(len(self.shape)))
        self.exports = 0

    @property
    def ptr(self) -> int:
        return self.mem._pointer + self.offset

    def __dlpack_device__(self):
        return 14, self.queue.sycl_device.get_device_id()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.exports += 1
        return export_capsule(self.ptr, self.shape, self.strides, self.dl_dtype, self.__dlpack_device__(), keep=self)

    def __array_namespace__(self, api_version=None):
        return xp

    def _span(self) -> int:
        return sum((n - 1) * s for n, s in zip(self.shape, self.strides)) * self.dtype.itemsize + self.dtype.itemsize

    def write(self, values) -> "OneAPIArray":
        """Write host values (C-contiguous arrays only)."""
        assert self.strides == OneAPIArray(self.shape, self.dtype, self.queue, mem=self.mem).strides
        v = np.ascontiguousarray(values, self.dtype)
        self.queue.memcpy(_at(self.ptr, v.nbytes, self.queue), v, v.nbytes)
        return self

    def read(self) -> np.ndarray:
        """A host copy of the (strided) view."""
        span = self._span()
        host = np.empty(span, np.uint8)
        self.queue.memcpy(host, _at(self.ptr, span, self.queue), span)
        return np.array(np.ndarray(self.shape, self.dtype, buffer=host,
                                   strides=tuple(s * self.dtype.itemsize for s in self.strides)))

    @property
    def T(self) -> "OneAPIArray":
        return OneAPIArray(self.shape[::-1], self.dtype, self.queue, mem=self.mem, offset=self.offset,
                           strides=self.strides[::-1], keep=self, dl_dtype=self.dl_dtype)


def _at(ptr, nbytes, queue):
    import dpctl.memory as dm

    class _S:
        __sycl_usm_array_interface__ = {"data": (ptr, False), "shape": (nbytes,), "strides": None,
                                        "typestr": "|u1", "version": 1, "syclobj": queue}
    return dm.as_usm_memory(_S())


def _from_dlpack(x):
    """A view of another oneAPI exporter's memory (through xejit's DLPack consumer)."""
    from xejit.runtime.usm_array import from_object
    u = from_object(x, "from_dlpack")

    class _Mem:   # the pointer as a stand-in for dpctl memory; ``keep`` holds the real owner
        _pointer = u.ptr
    dt = np.uint16 if u.dtype == "bfloat16" else np.dtype(u.dtype)
    return OneAPIArray(u.shape, dt, u.queue, mem=_Mem(), strides=[s // u.itemsize for s in u.strides],
                       keep=u, dl_dtype=u.dtype)


xp = types.SimpleNamespace(from_dlpack=_from_dlpack)


def device_array(values, queue, **kw) -> OneAPIArray:
    values = np.asarray(values)
    return OneAPIArray(values.shape, values.dtype, queue, **kw).write(values)
