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
import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..codegen import spirv
from ..errors import BuildError, LaunchError
from .device import Device, default_device
from .launch import Kernel

_programs: dict[tuple[str, str, str], "Program"] = {}
_lock = threading.Lock()


@dataclass(eq=False)
class Program:
    """A program built for one device from one SPIR-V module."""

    device: Device
    sycl_program: object = field(repr=False)
    spv_sha: str
    _kernels: dict = field(default_factory=dict, repr=False)

    def kernel(self, name: str, signature: Sequence[str]) -> "Kernel":
        """The kernel ``name``; ``signature`` gives each argument's kind (see ``launch.ARG_KINDS``)."""
        key = (name, tuple(signature))
        if key not in self._kernels:
            if not self.sycl_program.has_sycl_kernel(name):
                raise LaunchError(f"the program has no kernel named {name!r}")
            self._kernels[key] = Kernel(name, self.sycl_program.get_sycl_kernel(name), tuple(signature), self.device)
        return self._kernels[key]


def _keep_for_repro(spv: bytes) -> str:
    fd, path = tempfile.mkstemp(suffix=".spv", prefix="xejit-build-")
    with os.fdopen(fd, "wb") as f:
        f.write(spv)
    return path


def build_program(spv: bytes, device: Device | None = None, *, validate: bool = True,
                  keep_failed: bool = True, options: str = "") -> Program:
    """Build ``spv`` for ``device`` (default: :func:`default_device`); built once per process.

    ``validate`` runs spirv-val first, so a malformed module is reported by the validator with
    the failing instruction rather than by the driver (or not at all). ``keep_failed`` keeps a
    module the driver rejects on disk for a rerun (probes that expect rejection turn it off).
    ``options`` are the driver's build options (``CompiledKernel.build_options`` gives the
    large-register-file option of ``grf_mode="256"`` in the device backend's spelling).
    """
    import dpctl.program as dp

    device = device or default_device()
    sha = hashlib.sha256(spv).hexdigest()
    key = (sha, device.filter_string, options, device.queue.sycl_context)   # programs belong to a context
    with _lock:
        prog = _programs.get(key)
    if prog is not None:
        return prog
    if validate:
        spirv.validate(spv)
    try:
        sycl_program = dp.create_program_from_spirv(device.queue, spv, options)
    except Exception as e:  # SyclProgramCompilationError carries little; keep the module for a rerun
        reason = str(e).strip() or "the driver gave no build log"
        where = ""
        if keep_failed:
            path = _keep_for_repro(spv)
            where = f"\nmodule kept at {path} (inspect with: spirv-dis {path})"
        with_options = f" with options {options!r}" if options else ""
        raise BuildError(f"the {device.backend} driver could not build the program for {device.name}"
                         f"{with_options}: {reason}{where}") from None
    prog = Program(device, sycl_program, sha)
    with _lock:
        _programs[key] = prog
    return prog
