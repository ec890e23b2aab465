"""OpenCL programs built by xejit itself and handed to dpctl, so a driver binary can be kept.

dpctl (0.22) builds programs only from SPIR-V or OpenCL C source, and a build of the GEMM takes
the OpenCL CPU driver ~1 s in every new process. Its OpenCL path is plain OpenCL plus SYCL
interop, so xejit does the same through ``ctypes``:

- the ``cl_context`` of a dpctl context (``sycl::get_native<opencl>``, exported by dpctl's
  interface library), its one ``cl_device``;
- ``clCreateProgramWithIL`` + ``clBuildProgram`` (the cold build, as dpctl does it), then
  ``clGetProgramInfo(CL_PROGRAM_BINARIES)``: the driver's binary (an ELF with native code on the
  CPU device), which :func:`xejit.runtime.program.build_program` stores in the disk cache;
- ``clCreateProgramWithBinary`` + ``clBuildProgram`` for a stored binary (~1 ms);
- ``sycl::make_kernel_bundle<opencl, executable>`` (libsycl's exported ``detail`` function; a
  ``kernel_bundle`` is one ``shared_ptr``) and dpctl's C-API ``SyclProgram_Make`` (a capsule in
  ``dpctl.program._program.__pyx_capi__``) turn the ``cl_program`` into the
  ``dpctl.program.SyclProgram`` the launch path already uses.

:func:`interop_for` returns None where this does not apply (a Level Zero device, a context of
several devices, a missing symbol); callers then build through dpctl as before.
"""
from __future__ import annotations

import ctypes
import os
import threading

_CL_CONTEXT_DEVICES = 0x1081
_CL_PROGRAM_BINARY_SIZES = 0x1165
_CL_PROGRAM_BINARIES = 0x1166
_CL_PROGRAM_BUILD_LOG = 0x1183
_SYCL_BACKEND_OPENCL = 1          # sycl::backend::opencl
_SYCL_BUNDLE_EXECUTABLE = 2       # sycl::bundle_state::executable
_P = ctypes.c_void_p
_SIZE = ctypes.c_size_t


class OpenCLBuildError(Exception):
    """The driver refused a program; ``log`` is its build log."""

    def __init__(self, what: str, code: int, log: str):
        super().__init__(f"{what} failed (OpenCL error {code})" + (f": {log.strip()}" if log.strip() else ""))
        self.code, self.log = code, log


class _Libraries:
    """The C entry points, resolved once; constructing raises OSError/AttributeError when absent."""

    def __init__(self):
        import dpctl
        import dpctl.program._program as dpp

        self.cl = cl = ctypes.CDLL("libOpenCL.so.1")
        dpi = ctypes.CDLL(os.path.join(os.path.dirname(dpctl.__file__), "libDPCTLSyclInterface.so"))
        sycl = ctypes.CDLL("libsycl.so.9")
        cxx = ctypes.CDLL("libstdc++.so.6")
        self.native_context = dpi._ZN4sycl3_V110get_nativeILNS0_7backendE1ENS0_7contextEEENS0_14backend_traitsIXT_EE11return_typeIT0_EERKS7_
        self.native_context.restype, self.native_context.argtypes = _P, [_P]
        # std::shared_ptr<kernel_bundle_impl> make_kernel_bundle(ur_native_handle_t, const context&,
        #     bool KeepOwnership, bundle_state, backend): the shared_ptr comes back through a hidden pointer
        self.make_bundle = sycl._ZN4sycl3_V16detail18make_kernel_bundleEmRKNS0_7contextEbNS0_12bundle_stateENS0_7backendE
        self.make_bundle.restype = _P
        self.make_bundle.argtypes = [_P, ctypes.c_uint64, _P, ctypes.c_bool, ctypes.c_int, ctypes.c_int]
        self.new = cxx._Znwm                         # operator new: DPCTLKernelBundle_Delete deletes it
        self.new.restype, self.new.argtypes = _P, [_SIZE]
        self.delete_bundle = dpi.DPCTLKernelBundle_Delete
        self.delete_bundle.restype, self.delete_bundle.argtypes = None, [_P]
        cap = dpp.__pyx_capi__["SyclProgram_Make"]
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
        get_ptr.restype, get_ptr.argtypes = _P, [ctypes.py_object, ctypes.c_char_p]
        # SyclProgram SyclProgram_Make(DPCTLSyclKernelBundleRef): copies the bundle; needs the GIL
        self.program_make = ctypes.PYFUNCTYPE(ctypes.py_object, _P)(get_ptr(cap, get_name(cap)))
        errp = ctypes.POINTER(ctypes.c_int)
        for name, res, args in (
                ("clGetContextInfo", ctypes.c_int, [_P, ctypes.c_uint, _SIZE, _P, ctypes.POINTER(_SIZE)]),
                ("clCreateProgramWithIL", _P, [_P, ctypes.c_char_p, _SIZE, errp]),
                ("clCreateProgramWithBinary", _P, [_P, ctypes.c_uint, _P, ctypes.POINTER(_SIZE),
                                                   ctypes.POINTER(ctypes.c_char_p), errp, errp]),
                ("clBuildProgram", ctypes.c_int, [_P, ctypes.c_uint, _P, ctypes.c_char_p, _P, _P]),
                ("clGetProgramInfo", ctypes.c_int, [_P, ctypes.c_uint, _SIZE, _P, ctypes.POINTER(_SIZE)]),
                ("clGetProgramBuildInfo", ctypes.c_int, [_P, _P, ctypes.c_uint, _SIZE, _P, ctypes.POINTER(_SIZE)]),
                ("clReleaseProgram", ctypes.c_int, [_P])):
            fn = getattr(cl, name)
            fn.restype, fn.argtypes = res, args


_libs: _Libraries | None = None
_libs_failed = False
_interops: dict = {}
_lock = threading.Lock()


def _libraries() -> _Libraries | None:
    global _libs, _libs_failed
    if _libs is None and not _libs_failed:
        try:
            _libs = _Libraries()
        except (OSError, AttributeError, KeyError, ImportError):
            _libs_failed = True
    return _libs


class OpenCLInterop:
    """Builds of programs for the one OpenCL device of a dpctl context."""

    def __init__(self, libs: _Libraries, sycl_context, cl_context: int, cl_device: int):
        self._libs, self._sycl_context = libs, sycl_context
        self._cl_context, self._device = cl_context, (_P * 1)(cl_device)

    def _build(self, program: int, options: str, what: str) -> int:
        code = self._libs.cl.clBuildProgram(program, 1, self._device, options.encode(), None, None)
        if code != 0:
            log = self._build_log(program)
            self._libs.cl.clReleaseProgram(program)
            raise OpenCLBuildError(what, code, log)
        return program

    def _build_log(self, program: int) -> str:
        cl, n = self._libs.cl, _SIZE()
        if cl.clGetProgramBuildInfo(program, self._device[0], _CL_PROGRAM_BUILD_LOG, 0, None, ctypes.byref(n)) != 0:
            return ""
        buf = ctypes.create_string_buffer(n.value)
        cl.clGetProgramBuildInfo(program, self._device[0], _CL_PROGRAM_BUILD_LOG, n.value, buf, None)
        return buf.value.decode(errors="replace")

    def program_from_il(self, spv: bytes, options: str) -> int:
        """A built ``cl_program`` from SPIR-V (the driver's full build)."""
        err = ctypes.c_int()
        prog = self._libs.cl.clCreateProgramWithIL(self._cl_context, spv, len(spv), ctypes.byref(err))
        if err.value != 0 or not prog:
            raise OpenCLBuildError("clCreateProgramWithIL", err.value, "")
        return self._build(prog, options, "clBuildProgram")

    def program_from_binary(self, binary: bytes, options: str) -> int:
        """A built ``cl_program`` from a driver binary of :meth:`binary` (no compilation)."""
        err, status = ctypes.c_int(), ctypes.c_int()
        lens, bins = (_SIZE * 1)(len(binary)), (ctypes.c_char_p * 1)(binary)
        prog = self._libs.cl.clCreateProgramWithBinary(self._cl_context, 1, self._device, lens, bins,
                                                       ctypes.byref(status), ctypes.byref(err))
        if err.value != 0 or status.value != 0 or not prog:
            raise OpenCLBuildError("clCreateProgramWithBinary", err.value or status.value, "")
        return self._build(prog, options, "clBuildProgram of a stored binary")

    def binary(self, program: int) -> bytes:
        """The driver's binary of a built program (empty if it gives none)."""
        cl, sizes = self._libs.cl, (_SIZE * 1)()
        if cl.clGetProgramInfo(program, _CL_PROGRAM_BINARY_SIZES, ctypes.sizeof(sizes), sizes, None) != 0 \
                or not sizes[0]:
            return b""
        buf = ctypes.create_string_buffer(sizes[0])
        ptrs = (_P * 1)(ctypes.addressof(buf))
        if cl.clGetProgramInfo(program, _CL_PROGRAM_BINARIES, ctypes.sizeof(ptrs), ptrs, None) != 0:
            return b""
        return buf.raw

    def release(self, program: int) -> None:
        self._libs.cl.clReleaseProgram(program)

    def sycl_program(self, program: int):
        """The ``dpctl.program.SyclProgram`` of a built ``cl_program`` (which it then owns)."""
        libs = self._libs
        bundle = libs.new(16)       # sizeof(kernel_bundle<executable>): one shared_ptr
        libs.make_bundle(bundle, program, self._sycl_context.addressof_ref(), False,
                         _SYCL_BUNDLE_EXECUTABLE, _SYCL_BACKEND_OPENCL)
        try:
            return libs.program_make(bundle)
        finally:
            libs.delete_bundle(bundle)      # SyclProgram_Make kept its own copy


def interop_for(queue) -> OpenCLInterop | None:
    """The :class:`OpenCLInterop` of ``queue``'s context, or None when its device is not an
    OpenCL device alone in its context or an entry point is missing."""
    ctx = queue.sycl_context
    with _lock:
        if ctx in _interops:
            return _interops[ctx]
    got = None
    libs = _libraries() if "opencl" in str(queue.sycl_device.backend) else None
    if libs is not None:
        cl_ctx = libs.native_context(ctx.addressof_ref())   # retained: kept for the process
        n = _SIZE()
        if cl_ctx and libs.cl.clGetContextInfo(cl_ctx, _CL_CONTEXT_DEVICES, 0, None, ctypes.byref(n)) == 0 \
                and n.value == ctypes.sizeof(_P):
            dev = (_P * 1)()
            if libs.cl.clGetContextInfo(cl_ctx, _CL_CONTEXT_DEVICES, n.value, dev, None) == 0:
                got = OpenCLInterop(libs, ctx, cl_ctx, dev[0])
    with _lock:
        _interops[ctx] = got
    return got
