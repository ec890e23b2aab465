"""Kernel launch: argument marshalling and submission to a dpctl queue.

A kernel's signature lists one kind per argument:

- ``"ptr"``: an array the kernel may write; ``"ptr_in"``: an array it only reads.
  ``"addr"`` / ``"addr_in"`` (kernels compiled for a device with system USM allocations,
  codegen/abi.py): the same, passed as the 64-bit address of its first element, which lets numpy
  arrays and torch CPU tensors go to the kernel without a copy and be written in place.
  Accepted: numpy arrays, row- or column-major with a possibly padded outer stride (copied into
  USM shared memory with their strides and, for ``"ptr"``, back out),
  numpy arrays that already live in USM memory (see :func:`xejit.runtime.usm.empty`; zero-copy),
  any object with ``__sycl_usm_array_interface__`` (dpnp / dpctl arrays; zero-copy), objects
  exporting ``__dlpack__`` on a oneAPI device and torch XPU tensors (zero-copy, as
  :class:`~xejit.runtime.usm_array.UsmArray` views; see that module), and torch CPU tensors
  (through USM shared memory, like numpy arrays). A read-only array (numpy's
  ``writeable`` flag, also on USM views; the read-only flag of a SUAI object) passed as ``"ptr"``
  is refused with a ``ValueError`` before anything is staged or launched.
- a scalar kind (``"i32"``, ``"i64"``, ``"u32"``, ``"u64"``, ``"f32"``, ``"f64"``, ``"f16"``):
  a Python or numpy number, converted to exactly that type; an out-of-range value is an error.

Example:
    >>> import numpy as np
    >>> from xejit.runtime import usm
    >>> x = usm.empty(4, np.float32)      # zero-copy for a kernel, a numpy array for you
    >>> x.shape
    (4,)
"""
from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError, ArgumentValueError, LaunchError
from ..codegen.abi import ADDRESS_KINDS, ARRAY_KINDS, WRITTEN_KINDS
from . import cpu_threads
from .device import Device
from .usm_array import from_object

_SCALARS = {
    "i8": (ctypes.c_int8, np.int8), "i16": (ctypes.c_int16, np.int16),
    "i32": (ctypes.c_int32, np.int32), "i64": (ctypes.c_int64, np.int64),
    "u32": (ctypes.c_uint32, np.uint32), "u64": (ctypes.c_uint64, np.uint64),
    "f32": (ctypes.c_float, np.float32), "f64": (ctypes.c_double, np.float64),
    "f16": (ctypes.c_uint16, np.float16),  # passed as its bits: ctypes has no half type
}
ARG_KINDS = (*ARRAY_KINDS, *_SCALARS)
_INT_RANGE = {k: (int(np.iinfo(t).min), int(np.iinfo(t).max)) for k, (_, t) in _SCALARS.items() if k[0] in "iu"}


def _usm_owner(arr: np.ndarray):
    """The dpctl USM memory object a numpy array is a view of, or None."""
    import dpctl.memory as dm

    base = arr
    while base is not None:
        if isinstance(base, (dm.MemoryUSMShared, dm.MemoryUSMHost, dm.MemoryUSMDevice)):
            return base
        base = getattr(base, "base", None)
    return None


def _usm_info(mem, queue) -> tuple[bool, int]:
    """(is ``mem`` in ``queue``'s context, its base address); both are cheap dpctl attributes,
    read each time (a cache keyed by the object's id could outlive it)."""
    return mem.sycl_context == queue.sycl_context, mem._pointer


class _Interior:
    """A SUAI view of ``nbytes`` at ``ptr`` inside USM memory, so dpctl can pass interior pointers."""

    def __init__(self, ptr: int, nbytes: int, queue):
        self.__sycl_usm_array_interface__ = {
            "data": (ptr, False), "shape": (max(nbytes, 1),), "strides": None,
            "typestr": "|u1", "version": 1, "syclobj": queue}


def _as_numpy(value, name: str):
    """A numpy view of an array argument (sharing memory), or None for non-arrays."""
    if isinstance(value, np.ndarray):
        return value
    mod = type(value).__module__
    if mod.startswith("torch"):
        if value.device.type != "cpu":
            raise ArgumentError(
                f"{name}: a torch tensor on {value.device} is not SYCL USM memory; pass a CPU or XPU tensor")
        import torch

        t = value.detach()
        if t.dtype == torch.bfloat16:  # numpy has no bfloat16: move its bits as int16
            t = t.view(torch.int16)
        return t.numpy()
    return None


def _suai_read_only(value) -> bool:
    """The read-only flag of an array's ``__sycl_usm_array_interface__``. dpctl's raw memory
    objects (``dpctl.memory.MemoryUSM*``) set it on every allocation, so for them it means nothing."""
    if type(value).__module__.startswith("dpctl.memory"):
        return False
    data = getattr(value, "__sycl_usm_array_interface__", {}).get("data", ())
    return len(data) > 1 and bool(data[1])


def _check_layout(arr: np.ndarray, name: str) -> None:
    """Row- or column-major, the outer stride possibly padded (a view ``x[:, :n]`` of a wider
    array): one dimension contiguous, non-negative strides, at most 2 dimensions."""
    if arr.flags.c_contiguous or arr.flags.f_contiguous:
        return
    it = arr.itemsize
    ok = arr.ndim == 2 and min(arr.strides) >= 0 and any(
        st == it or n == 1 for n, st in zip(arr.shape, arr.strides))
    if not ok:
        raise ArgumentError(
            f"{name}: unsupported array layout (strides {arr.strides} for shape {arr.shape}); "
            "kernels take row- or column-major arrays (the outer stride may be padded): "
            "pass np.ascontiguousarray(x)")


def _span(arr: np.ndarray) -> int:
    """Bytes from an array's first element to the end of its last (its extent in memory)."""
    if arr.size == 0:
        return 0
    return sum((n - 1) * st for n, st in zip(arr.shape, arr.strides)) + arr.itemsize


@dataclass
class _Marshalled:
    args: list
    copy_back: list = field(default_factory=list)  # (usm numpy view, user array)
    staging: list = field(default_factory=list)    # (queue, size, USM memory) to give back to _staging


class _StagingPool:
    """USM shared buffers that stage host arrays (numpy, torch CPU tensors) for a launch, kept for
    later launches on the same queue: a new USM allocation and its first touch cost far more than
    the copy itself on the CPU device (16 MB: ~10 ms against ~2 ms).

    Reuse is safe because a staging buffer never leaves the runtime: only the kernel sees it, the
    results are copied back into the caller's array, and :meth:`Kernel.launch` gives the buffer
    back only after the kernel finished and the copy-back is done. At most :attr:`max_bytes` are
    kept (:func:`release_staging_buffers` frees them)."""

    max_bytes = 256 << 20

    def __init__(self):
        self._free: dict[tuple[int, int], tuple[object, list]] = {}
        self._bytes = 0
        self.taken = 0   # staging buffers handed out so far: one per host array copied for a launch
        self._lock = threading.Lock()

    @staticmethod
    def size_for(nbytes: int) -> int:
        grain = 4096 if nbytes < (1 << 20) else (1 << 20)
        return max(grain, -(-nbytes // grain) * grain)

    def take(self, nbytes: int, queue) -> tuple[int, object]:
        """(size, a USM shared buffer of at least ``nbytes`` on ``queue``), reused when one is free."""
        size = self.size_for(nbytes)
        with self._lock:
            self.taken += 1
            hit = self._free.get((id(queue), size))
            if hit is not None and hit[1]:
                self._bytes -= size
                return size, hit[1].pop()
        import dpctl.memory as dm   # (only on a miss: a reused buffer is the per-call path)

        return size, dm.MemoryUSMShared(size, queue=queue)

    def give(self, queue, size: int, mem) -> None:
        with self._lock:
            if self._bytes + size > self.max_bytes:
                return   # dropped: freed when the last reference goes
            self._free.setdefault((id(queue), size), (queue, []))[1].append(mem)
            self._bytes += size

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
            self._bytes = 0


_staging = _StagingPool()


def release_staging_buffers() -> None:
    """Free the USM buffers kept for staging host arrays (see :class:`_StagingPool`)."""
    _staging.clear()


#: id(numpy array) -> (weak reference to it, queue, the USM argument dpctl takes (None for host
#: memory passed by address), its address % 16, its address as the "addr" kinds take it): an
#: array's memory never moves (numpy cannot rebind ``data``), so a relaunch with the same array
#: skips the owner search
_zero_copy: dict[int, tuple] = {}


def known_zero_copy(arr: np.ndarray) -> tuple | None:
    """``arr``'s live zero-copy entry (see ``_zero_copy``), or None: a dict lookup, no owner search."""
    hit = _zero_copy.get(id(arr))
    return hit if hit is not None and hit[0]() is arr else None


def known_address(arr: np.ndarray) -> int | None:
    """The address of an array launched before (its zero-copy entry), else None: cheaper than
    ``ctypes.data``, which builds an object (2-3 us)."""
    hit = known_zero_copy(arr)
    return None if hit is None else hit[4].value


def _forget(ref, key: int) -> None:
    hit = _zero_copy.get(key)
    if hit is not None and hit[0] is ref:   # the entry (and the USM reference it holds) dies with the array
        del _zero_copy[key]


def _remember_zero_copy(arr: np.ndarray, queue, arg, ptr: int) -> tuple | None:
    try:
        ref = weakref.ref(arr, lambda r, k=id(arr): _forget(r, k))
    except TypeError:
        return None
    if len(_zero_copy) > 1024:
        _zero_copy.clear()
    entry = _zero_copy[id(arr)] = (ref, queue, arg, ptr % 16, ctypes.c_uint64(ptr))
    return entry


def zero_copy_entry(arr: np.ndarray, queue, ptr: int, by_address: bool = False) -> tuple | None:
    """The remembered zero-copy entry (see ``_zero_copy``) of a numpy array at address ``ptr`` in
    USM memory of ``queue``'s context, made now; None when it is not such an array (it would be
    staged). ``by_address`` (a kernel taking only "addr" kinds): any host array is. The caller
    has checked its layout (``xejit.launch_plan``: same strides as a launch that passed the checks)."""
    import dpctl.memory as dm

    if by_address:
        return _remember_zero_copy(arr, queue, None, ptr)
    owner = _usm_owner(arr)
    if owner is None:
        return None
    same_context, base = _usm_info(owner, queue)
    if not same_context or min(arr.strides, default=0) < 0:
        return None
    arg = owner if ptr == base else dm.as_usm_memory(_Interior(ptr, _span(arr), queue))
    return _remember_zero_copy(arr, queue, arg, ptr)


def usm_memory(value, queue, name: str):
    """The dpctl USM memory object for a :class:`~xejit.runtime.usm_array.UsmArray`'s extent (no
    copy): dpctl checks that the pointer is USM memory of ``queue``'s context (remembered on the
    view, so a launch checks it once)."""
    import dpctl.memory as dm

    ctx = queue.sycl_context
    hit = value.usm_memory
    if hit is not None and hit[0] == ctx:
        return hit[1]
    lo, hi = value.extent()
    if lo < value.ptr:
        raise ArgumentError(f"{name}: unsupported array layout (negative strides {value.strides})")
    try:
        mem = dm.as_usm_memory(_Interior(value.ptr, hi - value.ptr, queue))
    except Exception:
        raise ArgumentValueError(
            f"{name}: its memory (address {value.ptr:#x}, described by {value.source}) is not SYCL USM memory "
            f"of the launch queue's context on {queue.sycl_device.filter_string}") from None
    value.usm_memory = (ctx, mem)
    return mem


def _marshal_usm_array(value, queue, kind: str, name: str):
    """The dpctl USM argument for a :class:`~xejit.runtime.usm_array.UsmArray` (no copy): its
    memory must be USM of ``queue``'s device and context."""
    if value.queue is not queue:
        if value.queue.sycl_device != queue.sycl_device:
            raise ArgumentValueError(f"{name} is on device {value.queue.sycl_device.filter_string} but the launch "
                                     f"queue is on {queue.sycl_device.filter_string}")
        if value.queue.sycl_context != queue.sycl_context:
            raise ArgumentValueError(f"{name} is USM memory of another SYCL context than the launch queue's")
    if kind == "ptr" and value.read_only:
        raise ArgumentValueError(f"{name}: the kernel writes this array but it is read-only")
    return usm_memory(value, queue, name)


def _marshal(kernel: "Kernel", values: Sequence, queue=None) -> _Marshalled:
    import dpctl.memory as dm

    queue = queue if queue is not None else kernel.device.queue
    out = _Marshalled([])
    for i, (kind, value) in enumerate(zip(kernel.signature, values)):
        if kind in ARRAY_KINDS and type(value) is np.ndarray:
            hit = _zero_copy.get(id(value))
            if hit is not None and hit[0]() is value and hit[1] is queue and (
                    kind not in WRITTEN_KINDS or value.flags.writeable):
                if kind in ADDRESS_KINDS:
                    out.args.append(hit[4])
                    continue
                if hit[2] is not None:   # (None: host memory an "addr" kernel was given)
                    out.args.append(hit[2])
                    continue
        name = f"{kernel.name}: argument {i}"
        if kind in ARRAY_KINDS:
            by_address = kind in ADDRESS_KINDS
            usm = None if isinstance(value, np.ndarray) else from_object(value, name)
            if usm is not None:   # torch XPU tensors, DLPack oneAPI and SUAI arrays: no copy
                mem = _marshal_usm_array(usm, queue, kind, name)
                out.args.append(ctypes.c_uint64(usm.ptr) if by_address else mem)
                continue
            if not isinstance(value, np.ndarray) and hasattr(value, "__sycl_usm_array_interface__"):
                if kind in WRITTEN_KINDS and _suai_read_only(value):
                    raise ArgumentValueError(f"{name}: the kernel writes this array but it is read-only")
                try:
                    mem = dm.as_usm_memory(value)
                except Exception as e:
                    raise ArgumentError(f"{name}: cannot use this USM array: {e}") from None
                out.args.append(ctypes.c_uint64(mem._pointer) if by_address else mem)
                continue
            arr = _as_numpy(value, name)
            if arr is None:
                raise ArgumentError(f"{name} must be an array (numpy, torch, dpctl/dpnp), got {type(value).__name__}")
            _check_layout(arr, name)
            if kind in WRITTEN_KINDS and not arr.flags.writeable:   # before anything is staged or launched
                raise ArgumentValueError(f"{name}: the kernel writes this array but it is read-only")
            if by_address:   # the device reads host memory: the array itself, written in place
                ptr = arr.__array_interface__["data"][0]
                entry = _remember_zero_copy(arr, queue, None, ptr) if arr is value else None
                out.args.append(entry[4] if entry is not None else ctypes.c_uint64(ptr))
                continue
            owner = _usm_owner(arr)
            same_context, base = _usm_info(owner, queue) if owner is not None else (False, 0)
            if same_context:
                ptr = arr.__array_interface__["data"][0]
                if ptr == base:
                    out.args.append(owner)  # the common case: the whole allocation, no new object
                else:
                    out.args.append(dm.as_usm_memory(_Interior(ptr, _span(arr), queue)))
                if arr is value:
                    _remember_zero_copy(arr, queue, out.args[-1], ptr)
                continue
            # Staged with the array's own strides (column-major, padded pitch): the kernel gets
            # the strides of the caller's array.
            size, mem = _staging.take(max(_span(arr), 1), queue)
            out.staging.append((queue, size, mem))
            if arr.flags.c_contiguous or arr.flags.f_contiguous:
                staged = np.frombuffer(mem, dtype=np.uint8, count=arr.nbytes)
                staged[:] = arr.reshape(-1, order="A").view(np.uint8) if arr.size else staged[:0]
            else:
                staged = np.ndarray(arr.shape, arr.dtype, buffer=mem, strides=arr.strides)
                staged[...] = arr
            out.args.append(mem)
            if kind == "ptr":
                out.copy_back.append((staged, arr))
        elif kind in _SCALARS:
            ctype, npt = _SCALARS[kind]
            t = type(value)
            if t is int and kind in _INT_RANGE:   # the common cases first: a Python int or float
                lo, hi = _INT_RANGE[kind]
                if lo <= value <= hi:
                    out.args.append(ctype(value))
                    continue
            elif t is float and (kind == "f32" or kind == "f64"):
                out.args.append(ctype(value))
                continue
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
                raise ArgumentError(f"{name} must be a number of type {kind}, got {type(value).__name__}")
            if kind[0] in "iu":
                if not float(value).is_integer():
                    raise ArgumentError(f"{name} must be an integer ({kind}), got {value!r}")
                lo, hi = _INT_RANGE[kind]
                if not lo <= int(value) <= hi:
                    raise ArgumentError(f"{name}: {value} does not fit in {kind}")
                out.args.append(ctype(int(value)))
            elif kind == "f16":
                out.args.append(ctype(int(np.float16(value).view(np.uint16))))
            else:
                out.args.append(ctype(float(value)))
        else:
            raise LaunchError(f"{kernel.name}: unknown argument kind {kind!r} in the signature")
    return out


def _all_ints(grid: tuple, block: tuple) -> bool:
    for v in grid:
        if type(v) is not int:
            return False
    for v in block:
        if type(v) is not int:
            return False
    return True


#: work-items a launch dimension can count (OpenCL's size_t)
_MAX_WORK_ITEMS = 1 << 64


def _check_range(grid: Sequence[int], block: Sequence[int], kernel_name: str) -> tuple[list, list]:
    grid, block = tuple(grid), tuple(block)
    if not 1 <= len(grid) <= 3 or len(grid) != len(block):
        raise LaunchError(f"{kernel_name}: the grid {grid} and workgroup size {block} need the same rank, 1 to 3")
    for g, b in zip(grid, block):
        if not (isinstance(g, (int, np.integer)) and isinstance(b, (int, np.integer)) and g >= 1 and b >= 1):
            raise LaunchError(f"{kernel_name}: grid {grid} and workgroup size {block} must be positive integers")
        if int(g) * int(b) >= _MAX_WORK_ITEMS:   # a size_t: ctypes would wrap it, dpctl refuses it
            raise LaunchError(f"{kernel_name}: grid {grid} in workgroups of {block} is {int(g) * int(b)} work-items "
                              f"in one dimension, more than a launch takes (2^64 - 1)")
    # OpenCL's dimension 0 (get_global_id(0), the fastest) is SYCL's *last* range dimension, and
    # dpctl takes SYCL ranges: reverse, so grid[0] is the kernel's dimension 0.
    return [int(g) * int(b) for g, b in zip(grid, block)][::-1], [int(b) for b in block][::-1]


@dataclass(eq=False)
class Kernel:
    """A kernel of a built program, with the argument kinds it takes."""

    name: str
    sycl_kernel: object = field(repr=False)
    signature: tuple[str, ...]
    device: Device

    _ranges: dict = field(default_factory=dict, repr=False)   # (grid, block) -> dpctl's ranges
    #: the program's DirectProgram (runtime/opencl_launch.py: prepared launches through OpenCL), or None
    direct: object = field(default=None, repr=False)

    def __post_init__(self):
        bad = [k for k in self.signature if k not in ARG_KINDS]
        if bad:
            raise LaunchError(f"{self.name}: unknown argument kinds {bad}; known: {ARG_KINDS}")
        if self.sycl_kernel.num_args != len(self.signature):
            raise LaunchError(
                f"{self.name}: the signature lists {len(self.signature)} arguments, the kernel takes "
                f"{self.sycl_kernel.num_args}")

    def launch(self, grid: Sequence[int], block: Sequence[int], *args, queue=None) -> None:
        """Run on ``grid`` workgroups of ``block`` work-items each, and wait for completion.

        ``queue`` (default: the device's) is any dpctl queue of the program's device and context,
        e.g. torch's current XPU stream wrapped by :func:`xejit.runtime.usm_array.torch_xpu_queue`.
        Dimensions are in OpenCL order: ``grid[0]`` and ``block[0]`` are the kernel's dimension 0
        (``get_group_id(0)``, ``get_local_id(0)``; dimension 0 varies fastest within a subgroup)."""
        if len(args) != len(self.signature):
            raise ArgumentError(
                f"{self.name} takes {len(self.signature)} arguments ({', '.join(self.signature)}), got {len(args)}")
        # dpctl's ranges of a (grid, block) of Python ints seen before; (2.0,) equals (2,) as a
        # key, so a hit is used only when every size is an int (else _check_range refuses it)
        ranges = self._ranges.get((grid, block)) if type(grid) is tuple and type(block) is tuple else None
        if ranges is not None and not _all_ints(grid, block):
            ranges = None
        if ranges is None:
            ranges = _check_range(grid, block, self.name)
            if type(grid) is tuple and type(block) is tuple and _all_ints(grid, block):
                if len(self._ranges) > 64:
                    self._ranges.clear()
                self._ranges[(grid, block)] = ranges
        global_range, local_range = ranges
        if queue is None:
            queue = self.device.queue
        elif queue is not self.device.queue and (queue.sycl_context != self.device.queue.sycl_context
                                                 or queue.sycl_device != self.device.sycl_device):
            raise LaunchError(f"{self.name}: the queue is not on the program's device and context")
        m = _marshal(self, args, queue)
        if cpu_threads._on_cpu:
            cpu_threads.before_launch()
        try:
            try:
                # (dpctl's submit() waits itself; the event's wait() would be a second one)
                queue.submit_async(self.sycl_kernel, m.args, global_range, local_range).wait()
            except Exception as e:  # dpctl's submit errors become one xejit error type
                raise LaunchError(f"{self.name}: launch of grid {tuple(grid)} x workgroup {tuple(block)} "
                                  f"failed: {e}") from None
            if cpu_threads._countdown:
                cpu_threads.after_launch()
            for staged, arr in m.copy_back:
                if not arr.size:
                    continue
                if staged.shape == arr.shape:        # a strided staging area
                    arr[...] = staged
                else:
                    arr.reshape(-1, order="A").view(np.uint8)[:] = staged
        finally:   # the kernel has finished (or never started): its staging buffers are free again
            m.copy_back.clear()
            for q, size, mem in m.staging:
                _staging.give(q, size, mem)
