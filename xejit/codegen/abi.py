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

__all__ = ["kernel_abi"]


def kernel_abi(fn: Function, written: set[int] | None = None) -> tuple[list[str], list[tuple[int, str, str]]]:
    """Runtime argument kinds and the expansion plan ``(python_param_index, kind, what)``, what in
    ptr / shape<d> / stride<d> / value. Arrays the kernel writes (``written``, by default found
    in the IR) are "ptr", the others "ptr_in"."""
    written = written_arrays(fn) if written is None else written
    kinds: list[str] = []
    plan: list[tuple[int, str, str]] = []
    for i, a in enumerate(fn.args):
        t = a.type
        if isinstance(t, ArrayType):
            kind = "ptr" if id(a) in written else "ptr_in"
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
