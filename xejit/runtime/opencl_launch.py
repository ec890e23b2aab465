"""Prepared launches straight through OpenCL (``clEnqueueNDRangeKernel`` + ``clFinish``), without dpctl.

A dpctl ``submit_async(...).wait()`` of a kernel spends most of its time in Python and SYCL per
argument: ``gemv_kernel`` (20 arguments: 3 addresses, its shapes and strides) took 20.5 us a
launch on one core against 8.1 us through OpenCL with its arguments set once (1x256x256, kernel
included; a 2-argument kernel 7.0 against 6.1). A repeated launch (``xejit.launch_plan``) of a
kernel whose arrays all go by address (a device that reads host memory: the OpenCL CPU device)
therefore goes through a ``cl_kernel`` of its own per thread and plan, whose fixed arguments
(shapes, strides) are set when it is made and whose other arguments are set again only when they
change, on an in-order ``cl_command_queue`` of its own per thread, waited for by ``clFinish``.

Only plans launched on their device's own queue use it: xejit waits for every launch and copy it
makes there, so nothing is pending on that SYCL queue that a launch on another queue could
overtake. The ``cl_program`` is the one the SYCL program was made from (retained,
``runtime/program.py``, and released when its :class:`DirectProgram` goes).
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import threading
from typing import Any

from ..errors import LaunchError

_P = ctypes.c_void_p
_SIZE = ctypes.c_size_t


class _CL:
    """The OpenCL entry points this module calls, resolved once from the interop's library."""

    def __init__(self, cl):
        errp = ctypes.POINTER(ctypes.c_int)
        for name, res, args in (
                ("clCreateKernel", _P, [_P, ctypes.c_char_p, errp]),
                ("clReleaseKernel", ctypes.c_int, [_P]),
                ("clRetainProgram", ctypes.c_int, [_P]),
                ("clReleaseProgram", ctypes.c_int, [_P]),
                ("clSetKernelArg", ctypes.c_int, [_P, ctypes.c_uint, _SIZE, _P]),
                ("clCreateCommandQueueWithProperties", _P, [_P, _P, _P, errp]),
                ("clEnqueueNDRangeKernel", ctypes.c_int, [_P, _P, ctypes.c_uint, _P, _P, _P, ctypes.c_uint, _P, _P]),
                ("clFinish", ctypes.c_int, [_P]),
                ("clReleaseCommandQueue", ctypes.c_int, [_P])):
            fn = getattr(cl, name)
            fn.restype, fn.argtypes = res, args
            setattr(self, name, fn)


_cls: dict[int, _CL] = {}


def _entry_points(interop) -> _CL:
    got = _cls.get(id(interop._libs))
    if got is None:
        got = _cls[id(interop._libs)] = _CL(interop._libs.cl)
    return got


class DirectProgram:
    """A built ``cl_program`` (retained) and its context's per-thread in-order queues."""

    def __init__(self, interop, program: int):
        self.cl = _entry_points(interop)
        self.cl.clRetainProgram(program)
        self.program, self._context, self._device = program, interop._cl_context, interop._device[0]
        self._queues = _queues_of(interop)

    def __del__(self):
        # (kernels made from it keep the program itself until they are released: OpenCL 3.0
        # clReleaseProgram)
        with contextlib.suppress(Exception):   # (at interpreter shutdown ctypes may be gone)
            self.cl.clReleaseProgram(self.program)

    def queue(self) -> int:
        """This thread's in-order queue of the program's context."""
        q = getattr(self._queues, "q", None)
        if q is None:
            err = ctypes.c_int()
            handle = self.cl.clCreateCommandQueueWithProperties(self._context, self._device, None, ctypes.byref(err))
            if err.value != 0 or not handle:
                raise LaunchError(f"clCreateCommandQueueWithProperties failed (OpenCL error {err.value})")
            q = self._queues.q = _Queue(self.cl, handle)
        return q.handle


class _Queue:
    """A thread's queue, released when the thread ends (its ``threading.local`` goes)."""

    __slots__ = ("cl", "handle")

    def __init__(self, cl: _CL, handle: int):
        self.cl, self.handle = cl, handle

    def __del__(self):
        with contextlib.suppress(Exception):   # (at interpreter shutdown ctypes may be gone)
            self.cl.clReleaseCommandQueue(self.handle)


_thread_queues: dict[int, threading.local] = {}


def _queues_of(interop) -> threading.local:
    got = _thread_queues.get(id(interop))
    if got is None:
        got = _thread_queues[id(interop)] = threading.local()
    return got


class _ThreadKernel:
    """A ``cl_kernel`` of one plan for one thread, with the values its arguments were last set to."""

    __slots__ = ("cl", "kernel", "last", "queue")

    def __init__(self, prog: DirectProgram, name: str, template: list):
        err = ctypes.c_int()
        self.cl = prog.cl
        self.kernel = prog.cl.clCreateKernel(prog.program, name.encode(), ctypes.byref(err))
        if err.value != 0 or not self.kernel:
            raise LaunchError(f"{name}: clCreateKernel failed (OpenCL error {err.value})")
        self.queue = prog.queue()
        self.last: list[Any] = [None] * len(template)
        for slot, v in enumerate(template):
            if v is not None:
                self.set(slot, v, v)

    def set(self, slot: int, cvalue, key) -> None:
        code = self.cl.clSetKernelArg(self.kernel, slot, ctypes.sizeof(cvalue), ctypes.byref(cvalue))
        if code != 0:
            self.last[slot] = None
            raise LaunchError(f"clSetKernelArg of argument {slot} failed (OpenCL error {code})")
        self.last[slot] = key

    def __del__(self):
        with contextlib.suppress(Exception):   # (at interpreter shutdown ctypes may be gone)
            self.cl.clReleaseKernel(self.kernel)


class DirectLaunch:
    """What :class:`xejit.launch_plan.LaunchPlan` launches through: one plan's kernel, per thread."""

    #: False from interpreter exit on: launches of threads still running then (daemon threads)
    #: take dpctl's path, whose runtime teardown they do not race (a segfault at exit in 4 of 116
    #: runs of a daemon thread launching through this path, 0 of 97 through dpctl's)
    open = True

    def __init__(self, prog: DirectProgram, name: str, template: list):
        self.prog, self.name, self.template = prog, name, template
        self._tls = threading.local()

    def kernel(self) -> _ThreadKernel:
        k = getattr(self._tls, "k", None)
        if k is None:
            k = self._tls.k = _ThreadKernel(self.prog, self.name, self.template)
        return k

    def run(self, k: _ThreadKernel, ndim: int, global_size, local_size) -> None:
        """Enqueue ``k`` on its thread's queue and wait for it."""
        cl = self.prog.cl
        code = cl.clEnqueueNDRangeKernel(k.queue, k.kernel, ndim, None, global_size, local_size, 0, None, None)
        if code == 0:
            code = cl.clFinish(k.queue)
        if code != 0:
            raise LaunchError(f"{self.name}: launch of {list(global_size)} work-items in workgroups of "
                              f"{list(local_size)} failed (OpenCL error {code})")


def cl_ranges(ranges: tuple) -> tuple[int, Any, Any]:
    """(dimensions, global size, local size) in OpenCL's order from dpctl's (SYCL-ordered) ranges."""
    g, lo = ranges[0][::-1], ranges[1][::-1]
    return len(g), (_SIZE * len(g))(*g), (_SIZE * len(lo))(*lo)


@atexit.register
def _close() -> None:
    DirectLaunch.open = False
