"""The kernel ABI: what the SPIR-V kernel of an IR function takes, and how the launcher fills it
(docs/compiler.md, "Kernel ABI"). Both lowerings emit it and the runtime reads it.

Example:
    >>> from xejit.ir.core import ArrayType, Function, f32, index
    >>> fn = Function("k", [ArrayType(f32, 2), index], ["x", "n"])
    >>> kernel_abi(fn, written=set())
    (['ptr_in', 'i64', 'i64', 'i64', 'i64', 'i64'], [(0, 'ptr_in', 'ptr'), (0, 'i64', 'shape0'), (0, 'i64', 'shape1'), (0, 'i64', 'stride0'), (0, 'i64', 'stride1'), (1, 'i64', 'value')])
"""
from __future__ import annotations

from ..errors import CompilerError
from ..ir.core import ArrayType, Function, ScalarType
from .passes.common import written_arrays

__all__ = ["kernel_abi", "POINTER_KINDS", "ADDRESS_KINDS", "ARRAY_KINDS", "WRITTEN_KINDS"]

#: the kinds of array arguments: passed as pointers, or as 64-bit addresses
POINTER_KINDS = ("ptr", "ptr_in")
ADDRESS_KINDS = ("addr", "addr_in")
ARRAY_KINDS = POINTER_KINDS + ADDRESS_KINDS
WRITTEN_KINDS = ("ptr", "addr")


def kernel_abi(fn: Function, written: set[int] | None = None,
               addresses: bool = False) -> tuple[list[str], list[tuple[int, str, str]]]:
    """Runtime argument kinds and the expansion plan ``(python_param_index, kind, what)``, what in
    ptr / shape<d> / stride<d> / value. Arrays the kernel writes (``written``, by default found
    in the IR) are "ptr", the others "ptr_in"; with ``addresses`` they are "addr" / "addr_in":
    a 64-bit integer address the kernel casts to a global pointer, so the launcher can pass any
    memory the device reaches (plain host memory on a device with system USM allocations), which
    dpctl refuses as a pointer argument."""
    written = written_arrays(fn) if written is None else written
    kinds: list[str] = []
    plan: list[tuple[int, str, str]] = []
    for i, a in enumerate(fn.args):
        t = a.type
        if isinstance(t, ArrayType):
            kind = ("addr" if addresses else "ptr") + ("" if id(a) in written else "_in")
            kinds.append(kind)
            plan.append((i, kind, "ptr"))
            for w in ("shape", "stride"):
                for d in range(t.rank):
                    kinds.append("i64")
                    plan.append((i, "i64", f"{w}{d}"))
        elif isinstance(t, ScalarType):
            k = "f32" if t.is_float else "i64"
            kinds.append(k)
            plan.append((i, k, "value"))
        else:
            raise CompilerError(f"kernel argument {fn.arg_names[i]} of type {t} is not supported")
    return kinds, plan
