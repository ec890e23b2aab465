"""Arrays in SYCL USM memory on any device, read from the protocols that describe them.

Three kinds of objects reach a kernel (and ``xejit.matmul``) without a copy:

- objects exporting ``__dlpack__`` whose ``__dlpack_device__()`` is ``(kDLOneAPI = 14, id)``
  (dpctl / dpnp arrays, torch XPU tensors, anything that follows the DLPack protocol for oneAPI):
  the ``DLTensor`` in the capsule gives the pointer, shape, strides and dtype; the device is
  ``dpctl.get_devices()[id]`` and the memory is bound to that device's platform default context
  (the oneAPI DLPack convention);
- objects with ``__sycl_usm_array_interface__`` (pointer, shape, strides, typestr, ``syclobj``:
  the queue or context the memory is bound to);
- torch tensors on the ``xpu`` device: their data pointer, sizes and strides, launched on the
  queue of torch's current ``xpu`` stream (:func:`torch_xpu_queue`, the only torch-specific code).

Each becomes a :class:`UsmArray`: a strided view (pointer, shape, strides, dtype) with the dpctl
queue to launch on and a reference that keeps the memory alive. ``UsmArray`` itself exports
``__dlpack__`` (oneAPI) and ``__sycl_usm_array_interface__``, so results of ``xejit.matmul``
go back to the caller's library with that library's ``from_dlpack`` (no copy).

Example:
    >>> import numpy as np
    >>> from xejit.runtime.device import default_device
    >>> x = UsmArray.empty((2, 3), "float32", default_device().queue)
    >>> x.copy_from_host(np.arange(6, dtype=np.float32).reshape(2, 3))
    >>> x.T.to_numpy().tolist()
    [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    >>> x.__dlpack_device__()[0]
    14
"""
from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

from ..errors import XejitTypeError, XejitValueError
from .device import default_device

__all__ = ["UsmArray", "from_object", "is_device_object", "torch_xpu_queue", "kDLCPU", "kDLOneAPI"]

kDLCPU, kDLOneAPI = 1, 14
_DL_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 10: "ROCm",
             13: "CUDA managed", 14: "oneAPI"}


# --- DLPack structures (dlpack.h, v1.x; the unversioned DLManagedTensor and the versioned one) ---

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_READ_ONLY_FLAG = 1

# Private prototypes of the capsule API (never the shared ``ctypes.pythonapi`` attributes, whose
# argtypes other code may set differently).
_api = ctypes.pythonapi
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
_capsule_get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _api))

# (code, bits) -> dtype name (torch's and numpy's spelling)
_DL_DTYPES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64", (1, 8): "uint8",
              (2, 16): "float16", (2, 32): "float32", (2, 64): "float64", (4, 16): "bfloat16", (6, 8): "bool"}
_DTYPE_DL = {v: k for k, v in _DL_DTYPES.items()}
_ITEMSIZE = {name: bits // 8 for (_, bits), name in _DL_DTYPES.items()}


def _np_storage(dtype: str) -> np.dtype:
    """The numpy dtype holding this dtype's bytes (bfloat16 as uint16 bit patterns)."""
    return np.dtype(np.uint16) if dtype == "bfloat16" else np.dtype(dtype)


class _Consumed:
    """Owns a consumed DLPack capsule: calls the producer's deleter when the last view dies."""

    def __init__(self, capsule, managed_ptr: int, versioned: bool):
        self._capsule, self._ptr, self._versioned = capsule, managed_ptr, versioned

    def __del__(self):
        cls = _DLManagedTensorVersioned if self._versioned else _DLManagedTensor
        try:
            m = cls.from_address(self._ptr)
            if m.deleter:
                m.deleter(self._ptr)
        except Exception:   # never raise from a finaliser
            pass


class UsmArray:
    """A strided view of SYCL USM memory: ``ptr`` is the address of element ``[0, ..., 0]``,
    ``strides`` are in bytes (numpy's convention), ``queue`` the dpctl queue the memory is used
    on, ``owner`` whatever keeps the memory alive (a consumed capsule, a torch tensor, a dpctl
    memory object). ``source`` is the kind of the caller's object (``"dlpack"``, ``"suai"``,
    ``"torch"``, ``"xejit"``) and ``origin`` the object itself (for the result's kind)."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "queue", "owner", "read_only", "source", "origin",
                 "usm_memory", "__weakref__")

    def __init__(self, ptr: int, shape, strides, dtype: str, queue, *, owner: Any = None,
                 read_only: bool = False, source: str = "xejit", origin: Any = None):
        if dtype not in _ITEMSIZE:
            raise XejitTypeError(f"unsupported array dtype {dtype}")
        self.ptr, self.shape, self.strides = int(ptr), tuple(int(s) for s in shape), tuple(int(s) for s in strides)
        self.dtype, self.queue, self.owner, self.read_only = dtype, queue, owner, bool(read_only)
        self.source, self.origin = source, origin
        self.usm_memory = None   # (context, dpctl memory of the view's extent) once checked by a launch

    # --- numpy-like metadata ------------------------------------------------------------------
    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self.dtype]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def device(self):
        """The dpctl ``SyclDevice`` the memory is used on."""
        return self.queue.sycl_device

    def __repr__(self) -> str:
        return (f"UsmArray({self.dtype} {list(self.shape)}, strides={list(self.strides)}, "
                f"device={self.queue.sycl_device.filter_string!r}, from {self.source})")

    def extent(self) -> tuple[int, int]:
        """[lowest byte, highest byte + 1) of the memory the view spans ((ptr, ptr) when empty)."""
        if self.size == 0:
            return self.ptr, self.ptr
        offs = [(n - 1) * st for n, st in zip(self.shape, self.strides)]
        return self.ptr + sum(min(o, 0) for o in offs), self.ptr + sum(max(o, 0) for o in offs) + self.itemsize

    # --- views (metadata only: computed on a numpy "shadow" that is never read) ----------------
    def _shadow(self) -> np.ndarray:
        base = np.zeros(1, dtype=f"V{self.itemsize}")
        return np.lib.stride_tricks.as_strided(base, self.shape, self.strides)

    def _from_shadow(self, shadow: np.ndarray, view: np.ndarray) -> "UsmArray":
        off = view.__array_interface__["data"][0] - shadow.__array_interface__["data"][0]
        return UsmArray(self.ptr + off, view.shape, view.strides, self.dtype, self.queue, owner=self,
                        read_only=self.read_only, source=self.source, origin=self.origin)

    def _view(self, fn) -> "UsmArray":
        s = self._shadow()
        return self._from_shadow(s, fn(s))

    def __getitem__(self, idx) -> "UsmArray":
        return self._view(lambda s: s[idx])

    def reshape(self, *shape) -> "UsmArray":
        """A view with another shape; a shape that needs a copy is an error (use ``copy()`` first)."""
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape

        def re(s):
            v = s.view()
            try:
                v.shape = shape
            except AttributeError:
                raise XejitValueError(f"a UsmArray of shape {list(self.shape)} and strides {list(self.strides)} "
                                      f"cannot be viewed as shape {list(shape)}") from None
            return v
        return self._view(re)

    def transpose(self, *axes) -> "UsmArray":
        return self._view(lambda s: s.transpose(*axes))

    @property
    def T(self) -> "UsmArray":
        return self.transpose()

    def broadcast_to(self, shape) -> "UsmArray":
        return self._view(lambda s: np.broadcast_to(s, tuple(shape)))

    def as_strided(self, shape, strides) -> "UsmArray":
        """A view with ``shape`` and ``strides`` (bytes) from the same first element."""
        return UsmArray(self.ptr, shape, strides, self.dtype, self.queue, owner=self, read_only=self.read_only,
                        source=self.source, origin=self.origin)

    @property
    def is_c_contiguous(self) -> bool:
        expect = self.itemsize
        for n, st in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and st != expect:
                return False
            expect *= n
        return True

    # --- memory -------------------------------------------------------------------------------
    @classmethod
    def empty(cls, shape, dtype: str, queue, *, usm_type: str = "device") -> "UsmArray":
        """A new C-contiguous array in USM ``usm_type`` memory of ``queue`` (device memory, as an XPU
        tensor's)."""
        import dpctl.memory as dm
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        it = _ITEMSIZE[dtype]
        n = int(np.prod(shape, dtype=np.int64))
        alloc = {"device": dm.MemoryUSMDevice, "shared": dm.MemoryUSMShared, "host": dm.MemoryUSMHost}[usm_type]
        mem = alloc(max(n * it, 1), queue=queue)
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * it for i in range(len(shape)))
        return cls(mem._pointer, shape, strides, dtype, queue, owner=mem)

    def _host_view(self, host: np.ndarray, lo: int) -> np.ndarray:
        return np.ndarray(self.shape, _np_storage(self.dtype), buffer=host, offset=self.ptr - lo,
                          strides=self.strides)

    def to_numpy(self) -> np.ndarray:
        """A host copy (numpy; bfloat16 as its uint16 bit patterns), through ``queue.memcpy``."""
        lo, hi = self.extent()
        if hi <= lo:
            return np.empty(self.shape, _np_storage(self.dtype))
        host = np.empty(hi - lo, np.uint8)
        self.queue.memcpy(host, _RawUsm(lo, hi - lo, self.queue).mem(), hi - lo)
        return np.array(self._host_view(host, lo), copy=True)

    def copy_from_host(self, values: np.ndarray) -> None:
        """Write ``values`` (broadcast to the view's shape; bfloat16 as bit patterns) into the view,
        through the host: the view's extent is read, updated and written back, so only the view's
        elements change."""
        lo, hi = self.extent()
        if hi <= lo:
            return
        host = np.empty(hi - lo, np.uint8)
        raw = _RawUsm(lo, hi - lo, self.queue).mem()
        self.queue.memcpy(host, raw, hi - lo)
        self._host_view(host, lo)[...] = values
        self.queue.memcpy(raw, host, hi - lo)

    def copy(self) -> "UsmArray":
        """A C-contiguous copy on the same queue (through the host when the view is strided)."""
        out = UsmArray.empty(self.shape, self.dtype, self.queue)
        if self.size:
            if self.is_c_contiguous:
                self.queue.memcpy(_RawUsm(out.ptr, self.size * self.itemsize, self.queue).mem(),
                                  _RawUsm(self.ptr, self.size * self.itemsize, self.queue).mem(),
                                  self.size * self.itemsize)
            else:
                out.copy_from_host(self.to_numpy())
        out.source, out.origin = self.source, self.origin
        return out

    # --- protocols ----------------------------------------------------------------------------
    @property
    def __sycl_usm_array_interface__(self) -> dict:
        st = _np_storage(self.dtype)
        return {"data": (self.ptr, self.read_only), "shape": self.shape,
                "strides": tuple(s // self.itemsize for s in self.strides), "typestr": st.str,
                "version": 1, "syclobj": self.queue}

    def __dlpack_device__(self) -> tuple[int, int]:
        return kDLOneAPI, _dl_device_id(self.queue.sycl_device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"xejit: cannot export a UsmArray to device {dl_device}")
        if copy:
            raise BufferError("xejit: UsmArray exports without copies only")
        return export_capsule(self.ptr, self.shape, tuple(s // self.itemsize for s in self.strides), self.dtype,
                              self.__dlpack_device__(), keep=self)


class _RawUsm:
    """``nbytes`` at ``ptr`` as a dpctl USM memory object (dpctl checks the pointer is USM in the
    queue's context)."""

    def __init__(self, ptr: int, nbytes: int, queue):
        self.__sycl_usm_array_interface__ = {"data": (ptr, False), "shape": (max(nbytes, 1),), "strides": None,
                                             "typestr": "|u1", "version": 1, "syclobj": queue}

    def mem(self):
        import dpctl.memory as dm
        return dm.as_usm_memory(self)


# --- DLPack export (used by UsmArray.__dlpack__; tests use it with kDLCPU against numpy/torch) ---

def export_capsule(ptr: int, shape, strides_elems, dtype: str, device: tuple[int, int], keep: Any):
    """An unversioned ``dltensor`` capsule describing memory at ``ptr`` on ``device``; ``keep`` stays
    alive until the consumer calls the deleter (or the capsule dies unconsumed).

    The capsule is numpy's: a numpy array over the address (built without touching the memory)
    is exported and the device (and the bfloat16 type code) patched in its ``DLTensor``. numpy's C
    destructor and deleter then manage the lifetime; a destructor written with ctypes could not run
    safely while an exception is pending (an unconsumed capsule freed during unwinding)."""
    st = _np_storage(dtype)
    it = st.itemsize
    offs = [(n - 1) * s * it for n, s in zip(shape, strides_elems)] if 0 not in tuple(shape) else []
    lo = ptr + sum(min(o, 0) for o in offs)
    span = sum(max(o, 0) for o in offs) + it - (lo - ptr) if offs else 0
    buf = (ctypes.c_uint8 * max(span, 1)).from_address(lo or ptr or 1)
    buf._xejit_keep = keep   # the array's base: freed when numpy's deleter drops the array
    arr = np.ndarray(tuple(shape), st, buffer=buf, offset=ptr - lo, strides=tuple(s * it for s in strides_elems))
    capsule = arr.__dlpack__()
    m = _DLManagedTensor.from_address(_capsule_get(capsule, b"dltensor"))
    m.dl_tensor.device = _DLDevice(*device)
    if dtype == "bfloat16":
        m.dl_tensor.dtype.code = 4
    return capsule


def _dl_device_id(sycl_device) -> int:
    """The oneAPI DLPack device id: the (root) device's index in ``dpctl.get_devices()``."""
    root = sycl_device
    try:
        root = sycl_device.get_unpartitioned_parent_device() or sycl_device
    except Exception:
        pass
    return int(root.get_device_id())


@functools.lru_cache(maxsize=None)
def _queue_for_dl_device(device_id: int):
    """A queue on the DLPack oneAPI device ``device_id`` in its platform's default context (where
    oneAPI DLPack memory is bound); xejit's default queue when that is the same device and context."""
    import dpctl

    devs = dpctl.get_devices()
    if not 0 <= device_id < len(devs):
        raise XejitValueError(f"DLPack oneAPI device id {device_id} names no SYCL device "
                              f"({len(devs)} devices seen)")
    dev = devs[device_id]
    ctx = dev.sycl_platform.default_context
    try:
        dq = default_device().queue
        if dq.sycl_device == dev and dq.sycl_context == ctx:
            return dq
    except Exception:
        pass
    return dpctl.SyclQueue(ctx, dev)


# --- consumers ---------------------------------------------------------------------------------

def _parse_capsule(capsule, name: str):
    """(pointer, shape, strides in bytes, dtype, device (type, id), read-only, owner) of a capsule."""
    cname = _capsule_name(capsule)
    if cname not in (b"dltensor", b"dltensor_versioned"):
        raise XejitTypeError(f"{name}: __dlpack__() returned a capsule named {cname!r}, not a DLPack tensor")
    versioned = cname == b"dltensor_versioned"
    addr = _capsule_get(capsule, cname)
    if versioned:
        m = _DLManagedTensorVersioned.from_address(addr)
        read_only = bool(m.flags & _READ_ONLY_FLAG)
    else:
        m = _DLManagedTensor.from_address(addr)
        read_only = False
    t = m.dl_tensor
    key = (t.dtype.code, t.dtype.bits)
    if t.dtype.lanes != 1 or key not in _DL_DTYPES:
        raise XejitTypeError(f"{name}: unsupported DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits, "
                             f"{t.dtype.lanes} lanes)")
    dtype = _DL_DTYPES[key]
    it = _ITEMSIZE[dtype]
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        strides = tuple(t.strides[i] * it for i in range(t.ndim))
    else:   # NULL strides: C-contiguous
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * it for i in range(t.ndim))
    ptr = (t.data or 0) + t.byte_offset
    device = (t.device.device_type, t.device.device_id)
    _capsule_set_name(capsule, b"used_dltensor_versioned" if versioned else b"used_dltensor")
    return ptr, shape, strides, dtype, device, read_only, _Consumed(capsule, addr, versioned)


def _from_dlpack(x: Any, name: str) -> UsmArray:
    dev_type, dev_id = x.__dlpack_device__()
    queue = _queue_for_dl_device(int(dev_id))
    try:
        try:   # a versioned capsule carries the read-only flag; older producers take no max_version
            capsule = x.__dlpack__(max_version=(1, 0))
        except TypeError:
            capsule = x.__dlpack__()
    except Exception as e:
        raise XejitValueError(f"{name}: its __dlpack__() failed: {e}") from None
    ptr, shape, strides, dtype, device, read_only, owner = _parse_capsule(capsule, name)
    if device != (kDLOneAPI, int(dev_id)):
        raise XejitValueError(f"{name}: __dlpack_device__() says {(dev_type, dev_id)} but the capsule "
                              f"describes device {device}")
    return UsmArray(ptr, shape, strides, dtype, queue, owner=owner, read_only=read_only, source="dlpack",
                    origin=x)


_SUAI_TYPESTR = {np.dtype(n).str: n for n in ("int8", "int16", "int32", "int64", "uint8", "float16", "float32",
                                               "float64", "bool")}


def _from_suai(x: Any, name: str) -> UsmArray:
    import dpctl

    iface = x.__sycl_usm_array_interface__
    try:
        ptr, read_only = iface["data"]
        shape = tuple(int(s) for s in iface["shape"])
        typestr = iface["typestr"]
        syclobj = iface.get("syclobj")
    except Exception:
        raise XejitTypeError(f"{name}: malformed __sycl_usm_array_interface__") from None
    dtype = _SUAI_TYPESTR.get(np.dtype(typestr).str)
    if dtype is None:
        raise XejitTypeError(f"{name}: unsupported dtype {typestr!r} in __sycl_usm_array_interface__")
    it = _ITEMSIZE[dtype]
    strides = iface.get("strides")
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
    ptr = int(ptr) + int(iface.get("offset", 0) or 0) * it
    if isinstance(syclobj, dpctl.SyclQueue):
        queue = syclobj
    else:   # a context (or a filter string): the device comes from the pointer
        import dpctl.memory as dm
        try:
            queue = dm.as_usm_memory(x).sycl_queue
        except Exception as e:
            raise XejitValueError(f"{name}: its memory is not SYCL USM memory of {syclobj!r}: {e}") from None
    return UsmArray(ptr, shape, tuple(s * it for s in strides), dtype, queue, owner=x,
                    read_only=bool(read_only), source="suai", origin=x)


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


# --- the torch-specific lines (checked only on a real XPU: see docs/xpu.md) -------------------------

def torch_xpu_queue(device):
    """torch's current ``xpu`` stream of ``device`` as a dpctl queue: ``Stream.sycl_queue`` is the
    address of the ``sycl::queue``; dpctl takes it in a capsule named ``SyclQueueRef`` (and keeps its
    own copy, which shares the underlying queue). Kernels submitted to it are ordered with torch's
    work on that stream."""
    import dpctl
    import torch

    addr = torch.xpu.current_stream(device).sycl_queue
    return dpctl.SyclQueue(_capsule_new(addr, b"SyclQueueRef", None))


def _from_torch_xpu(t: Any) -> UsmArray:
    it = t.element_size()
    return UsmArray(t.data_ptr(), tuple(t.shape), tuple(s * it for s in t.stride()),
                    str(t.dtype).replace("torch.", ""), torch_xpu_queue(t.device), owner=t, source="torch",
                    origin=t)

# --- end of the torch-specific lines -------------------------------------------------------------


def is_device_object(x: Any) -> bool:
    """Whether ``x`` is memory of a SYCL device described by a protocol (a UsmArray, a torch XPU
    tensor, a oneAPI DLPack exporter, a SUAI object) rather than a host array."""
    if isinstance(x, UsmArray):
        return True
    if isinstance(x, np.ndarray):
        return False
    if _is_torch(x):
        return x.device.type != "cpu"
    if hasattr(x, "__sycl_usm_array_interface__"):
        return True
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None and hasattr(x, "__dlpack__"):
        try:
            return int(dev()[0]) != kDLCPU
        except Exception:
            return False
    return False


def from_object(x: Any, name: str) -> UsmArray | None:
    """``x`` as a :class:`UsmArray` when it is SYCL USM memory described by a protocol; None for host
    arrays (numpy, torch CPU tensors, kDLCPU exporters), which take the host path. Memory on a
    non-SYCL device (a CUDA tensor, a DLPack CUDA export) is a ``ValueError`` naming ``name``."""
    if isinstance(x, UsmArray):
        return x
    if isinstance(x, np.ndarray):
        return None
    if _is_torch(x):
        kind = x.device.type
        if kind == "cpu":
            return None
        if kind == "xpu":
            return _from_torch_xpu(x.detach())
        raise XejitValueError(f"{name}: a torch tensor on {x.device} is not SYCL USM memory; xejit takes "
                              f"CPU and XPU tensors")
    if hasattr(x, "__sycl_usm_array_interface__") and not type(x).__module__.startswith("dpctl.memory"):
        return _from_suai(x, name)
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None and hasattr(x, "__dlpack__"):
        dev_type, _ = dev()
        if int(dev_type) == kDLCPU:
            return None
        if int(dev_type) != kDLOneAPI:
            raise XejitValueError(f"{name}: DLPack memory on a {_DL_NAMES.get(int(dev_type), int(dev_type))} device "
                                  f"(device type {int(dev_type)}) is not SYCL USM memory; xejit takes oneAPI "
                                  f"(kDLOneAPI = 14) and host arrays")
        return _from_dlpack(x, name)
    return None
