"""Helpers shared by the passes: the compiler's error type and IR cloning."""
from __future__ import annotations

from typing import Any

from ...ir.core import Block, Function, Operation, Region, Value
from ..errors import XejitError


class CompilerError(XejitError):
    """An op or case the compiler does not support (or a contradiction it found), with the
    op's name and the user's source line."""

    def __init__(self, message: str, op: Operation | None = None):
        self.op = op
        if op is not None:
            message = f"{op.loc}: {op.name}: {message}"
        super().__init__(message)


def clone_block_into(src: Block, dst: Block, vmap: dict[int, Value]) -> None:
    """Clone the ops of ``src`` to the end of ``dst``; ``vmap`` maps id(old value) -> new value."""
    for op in src.ops:
        dst.append(clone_op(op, vmap))


def clone_op(op: Operation, vmap: dict[int, Value]) -> Operation:
    regions = []
    for r in op.regions:
        nr = Region()
        for b in r.blocks:
            nb = Block([a.type for a in b.args], [a.name_hint for a in b.args])
            for a, na in zip(b.args, nb.args):
                vmap[id(a)] = na
            clone_block_into(b, nb, vmap)
            nr.add_block(nb)
        regions.append(nr)
    new = Operation(op.name, [vmap.get(id(v), v) for v in op.operands], [r.type for r in op.results],
                    dict(op.attributes), regions, op.loc)
    for r, nr in zip(op.results, new.results):
        nr.name_hint = r.name_hint
        vmap[id(r)] = nr
    return new


def clone_function(fn: Function) -> Function:
    """A deep copy of ``fn`` (new values; types and attributes shared, they are immutable)."""
    new = Function(fn.name, [a.type for a in fn.args], list(fn.arg_names), dict(fn.attributes), fn.loc)
    vmap: dict[int, Any] = {id(a): na for a, na in zip(fn.args, new.args)}
    clone_block_into(fn.entry, new.entry, vmap)
    return new
