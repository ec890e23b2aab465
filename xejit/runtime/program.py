"""Building SPIR-V into device programs and getting their kernels.

Example:
    >>> from xejit.codegen import builtins as bi
    >>> m = bi.new_module("noop"); fn = bi.kernel(m, "noop", [])
    >>> _ = __import__("llvmlite").ir.IRBuilder(fn.append_basic_block()).ret_void()
    >>> from xejit.codegen.spirv import to_spirv
    >>> k = build_program(to_spirv(m)).kernel("noop", signature=())
    >>> k.launch((1,), (1,))
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import options
from ..codegen import spirv
from ..codegen.lower_generic import cpu_vector_registers
from ..errors import BuildError, LaunchError
from .cache import default_cache, key_of
from .device import Device, default_device
from .launch import Kernel
from .opencl_launch import DirectProgram
from .opencl_programs import OpenCLBuildError, interop_for

_programs: dict[tuple[str, str, str], "Program"] = {}
_building: dict[tuple, threading.Event] = {}   # keys of builds in flight (see build_program)
_lock = threading.Lock()


@dataclass
class BuildStats:
    """Driver builds in this process: ``from_spirv`` compiles SPIR-V (the costly one), and
    ``from_binary`` loads a driver binary kept in the disk cache by an earlier process."""

    from_spirv: int = 0
    from_binary: int = 0
    #: (wall seconds, CPU seconds of the building thread, SPIR-V bytes) of each ``from_spirv``
    #: build, in order (build-time tests and benchmarks read it; CPU time is the fair figure on a
    #: loaded machine)
    spirv_builds: list = field(default_factory=list)


build_stats = BuildStats()


def _count(what: str) -> None:
    with _lock:   # builds may run in several threads (the autotuner's)
        setattr(build_stats, what, getattr(build_stats, what) + 1)


class _Timer:
    """Wall and this thread's CPU time of a driver build."""

    def __enter__(self):
        self.t0, self.c0 = time.perf_counter(), time.thread_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.t0, time.thread_time() - self.c0


def _record_build(t: _Timer, spv: bytes) -> None:
    """Note a driver build from SPIR-V; ``XEJIT_BUILD_LOG=<file>`` also appends it there as a JSON
    line (seconds, SPIR-V bytes and kernel names: how the suite's build times are surveyed)."""
    with _lock:
        build_stats.spirv_builds.append((t.wall, t.cpu, len(spv)))
    path = options.current().build_log
    if path:
        line = json.dumps({"build_s": round(t.wall, 3), "cpu_s": round(t.cpu, 3), "spv_bytes": len(spv),
                           "kernels": spirv.entry_points(spv),
                           "test": os.environ.get("PYTEST_CURRENT_TEST", "")})
        with open(path, "a") as f:
            f.write(line + "\n")


@dataclass(eq=False)
class Program:
    """A program built for one device from one SPIR-V module."""

    device: Device
    sycl_program: object = field(repr=False)
    spv_sha: str
    _kernels: dict = field(default_factory=dict, repr=False)
    #: the ``cl_program`` for launches straight through OpenCL (runtime/opencl_launch.py), or None
    direct: object = field(default=None, repr=False)

    def kernel(self, name: str, signature: Sequence[str]) -> "Kernel":
        """The kernel ``name``; ``signature`` gives each argument's kind (see ``launch.ARG_KINDS``)."""
        key = (name, tuple(signature))
        if key not in self._kernels:
            if not self.sycl_program.has_sycl_kernel(name):
                raise LaunchError(f"the program has no kernel named {name!r}")
            self._kernels[key] = Kernel(name, self.sycl_program.get_sycl_kernel(name), tuple(signature), self.device,
                                        direct=self.direct)
        return self._kernels[key]


def _keep_for_repro(spv: bytes) -> str:
    fd, path = tempfile.mkstemp(suffix=".spv", prefix="xejit-build-")
    with os.fdopen(fd, "wb") as f:
        f.write(spv)
    return path


def build_program(spv: bytes, device: Device | None = None, *, validate: bool | None = None,
                  keep_failed: bool = True, options: str = "", cache: bool = True) -> Program:
    """Build ``spv`` for ``device`` (default: :func:`default_device`); built once per process.

    On an OpenCL device the driver's binary is kept in the compile cache (``XEJIT_CACHE_DIR``,
    keyed by the SPIR-V, ``options``, the device and its driver version), so a later process
    loads it instead of compiling again; ``cache=False`` always compiles (build-time benchmarks).

    ``validate`` runs spirv-val first, so a malformed module is reported by the validator with
    the failing instruction rather than by the driver (or not at all); by default only with
    ``XEJIT_VALIDATE=1`` (the test suite sets it). ``keep_failed`` keeps a
    module the driver rejects on disk for a rerun (probes that expect rejection turn it off).
    ``options`` are the driver's build options (``CompiledKernel.build_options`` gives the
    large-register-file option of ``grf_mode="256"`` in the device backend's spelling).
    """
    device = device or default_device()
    sha = hashlib.sha256(spv).hexdigest()
    key = (sha, device.filter_string, options, device.queue.sycl_context)   # programs belong to a context
    while True:   # one build per key: a thread that finds it in flight waits for it
        with _lock:
            prog = _programs.get(key)
            if prog is not None:
                return prog
            building = _building.get(key)
            if building is None:
                building = _building[key] = threading.Event()
                break
        building.wait()   # then the program, or (that build failed) our own attempt and its error
    try:
        return _build(spv, sha, key, device, validate, keep_failed, options, cache)
    finally:
        with _lock:
            del _building[key]
        building.set()


def _build(spv: bytes, sha: str, key: tuple, device: Device, validate: bool, keep_failed: bool, options: str,
           cache: bool) -> Program:
    import dpctl.program as dp

    if validate or (validate is None and spirv.validation_enabled()):
        spirv.validate(spv)
    try:
        interop = interop_for(device.queue)
        direct = None
        if interop is not None:
            sycl_program, direct = _build_opencl(interop, spv, sha, device, options, cache)
        else:
            with _Timer() as t:
                sycl_program = dp.create_program_from_spirv(device.queue, spv, options)
            _count("from_spirv")
            _record_build(t, spv)
    except Exception as e:  # SyclProgramCompilationError carries little; keep the module for a rerun
        reason = str(e).strip() or "the driver gave no build log"
        where = ""
        if keep_failed:
            path = _keep_for_repro(spv)
            where = f"\nmodule kept at {path} (inspect with: spirv-dis {path})"
        with_options = f" with options {options!r}" if options else ""
        raise BuildError(f"the {device.backend} driver could not build the program for {device.name}"
                         f"{with_options}: {reason}{where}") from None
    prog = Program(device, sycl_program, sha, direct=direct)
    with _lock:
        _programs[key] = prog
    return prog


def _binary_key(sha: str, device: Device, options: str) -> str:
    sd = device.sycl_device
    # The CPU runtime reads CL_CONFIG_* variables (vectorizer, target ISA, ...) when it compiles.
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("CL_CONFIG_"))
    # ... and compiles for the host's vector ISA (AVX2 or AVX-512 code under the same device
    # name "AMD EPYC"): a cache shared between such machines must not hand zmm code to an AVX2 one
    isa = cpu_vector_registers() if sd.is_cpu else None
    return key_of("driver-binary/1", sha, options, sd.name, sd.driver_version, sd.backend,
                  sd.sycl_platform.name, sd.sycl_platform.version, env, isa)


def _build_opencl(interop, spv: bytes, sha: str, device: Device, options: str, use_cache: bool):
    """The dpctl program of ``spv``, from the driver binary in the disk cache when there is one
    (a binary the driver refuses is discarded and rebuilt), else compiled and its binary stored;
    and its :class:`~xejit.runtime.opencl_launch.DirectProgram`."""
    cache = default_cache() if use_cache else None
    key = _binary_key(sha, device, options) if cache is not None else ""
    binary = cache.get(key) if cache is not None else None
    if binary is not None:
        try:
            program = interop.program_from_binary(binary, options)
        except OpenCLBuildError:
            cache.discard(key)
        else:
            _count("from_binary")
            return _programs_of(interop, program)
    with _Timer() as t:
        program = interop.program_from_il(spv, options)
    _count("from_spirv")
    _record_build(t, spv)
    if cache is not None:
        binary = interop.binary(program)
        if binary:
            cache.put(key, binary)
    return _programs_of(interop, program)


def _programs_of(interop, program: int) -> tuple:
    """(the dpctl program, the DirectProgram) of a built ``cl_program``; the direct one retains it
    first, as the dpctl program owns it from then on."""
    try:
        direct = DirectProgram(interop, program)
    except AttributeError:   # an OpenCL library without an entry point it calls: launches go through dpctl
        direct = None
    return interop.sycl_program(program), direct
