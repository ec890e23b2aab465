"""Helpers shared by the passes: IR cloning, array roots (the error type is ``xejit.errors.CompilerError``)."""
from __future__ import annotations

from typing import Any

from ...errors import CompilerError  # noqa: F401  (re-exported: the passes raise it)
from ...ir.core import ArrayType, Block, Function, Operation, Region, Value


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


# Ops that write memory, by dialect: op name -> index of the operand that leads to the array.
WRITES = {"xetile.store_tile": 1, "xetile.atomic_rmw_tile": 1, "xetile.store_scatter": 2,
          "xegpu.store_nd": 1, "xegpu.store_scatter": 1, "xegpu.atomic_rmw": 0}


def array_root(v: Value) -> Value:
    """The kernel's array argument a tile/descriptor value was made from (through loop block
    arguments to their init operands, and through each producer's first operand)."""
    while not isinstance(v.type, ArrayType):
        if getattr(v, "op", None) is None:   # an scf.for block argument -> its init operand
            v = v.block.parent.parent.operands[2 + v.index]
        else:
            v = v.op.operands[0]
    return v


def written_arrays(fn: Function) -> set[int]:
    """ids of the array arguments ``fn`` writes (through any op of :data:`WRITES`)."""
    return {id(array_root(op.operands[WRITES[op.name]])) for op in fn.walk() if op.name in WRITES}
