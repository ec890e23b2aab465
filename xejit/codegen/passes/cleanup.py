"""Cleanups: common-subexpression elimination, dead-code elimination, loop-invariant hoisting.

Input and output: any level (``xetile-wg`` or ``xetile-sg``); values are unchanged. Only ops
without memory effects are merged or moved (loads are never hoisted: a loop may store).
"""
from __future__ import annotations

from ...ir.core import OP_DEFS, Block, Function, Operation
from .common import clone_function

_MOVABLE_PREFIX = ("arith.", "math.", "vector.", "gpu.")
_MOVABLE = {"xejit.program_id", "xejit.num_programs", "xejit.dim", "xejit.stride", "xetile.init_tile",
            "xetile.update_tile_offset", "xetile.tile_broadcast", "xetile.tile_transpose",
            "xetile.tile_reduce", "xetile.tile_mma", "xetile.convert_layout"}


def _movable(op: Operation) -> bool:
    d = OP_DEFS.get(op.name)
    if d is not None and not d.pure:   # gpu.barrier, SLM allocation/loads/stores
        return False
    return not op.regions and (op.name in _MOVABLE or op.name.startswith(_MOVABLE_PREFIX))


def _attr_key(op: Operation):
    return tuple(sorted((k, repr(v)) for k, v in op.attributes.items()))


def _cse_block(block: Block, seen: dict) -> None:
    seen = dict(seen)
    for op in list(block.ops):
        for r in op.regions:
            for b in r.blocks:
                _cse_block(b, seen)
        if not _movable(op) or not op.results:
            continue
        key = (op.name, tuple(id(v) for v in op.operands), _attr_key(op), tuple(r.type for r in op.results))
        prev = seen.get(key)
        if prev is None:
            seen[key] = op
            continue
        for r, pr in zip(op.results, prev.results):
            r.replace_all_uses_with(pr)
        op.erase()


def cse(fn: Function) -> Function:
    """Merge identical side-effect-free ops (same name, operands, attributes, types)."""
    fn = clone_function(fn)
    _cse_block(fn.entry, {})
    return fn


def _dce_block(block: Block) -> bool:
    changed = False
    for op in reversed(list(block.ops)):
        for r in op.regions:
            for b in r.blocks:
                changed |= _dce_block(b)
        d = OP_DEFS.get(op.name)
        if d is not None and d.pure and not d.terminator and not op.regions and op.results \
                and all(not r.uses for r in op.results):
            op.erase()
            changed = True
    return changed


def dce(fn: Function) -> Function:
    """Remove side-effect-free ops whose results are unused."""
    fn = clone_function(fn)
    while _dce_block(fn.entry):
        pass
    return fn


def _hoist_block(block: Block) -> None:
    for op in list(block.ops):
        if op.name != "scf.for":
            for r in op.regions:
                for b in r.blocks:
                    _hoist_block(b)
            continue
        body = op.regions[0].block
        _hoist_block(body)
        inside = {id(a) for a in body.args}
        for o in body.ops:
            for w in o.walk():
                inside |= {id(r) for r in w.results}
        moved = True
        while moved:
            moved = False
            for o in list(body.ops):
                if _movable(o) and all(id(v) not in inside for v in o.operands):
                    body.ops.remove(o)
                    block.insert(block.ops.index(op), o)
                    inside -= {id(r) for r in o.results}
                    moved = True


def hoist_loop_invariants(fn: Function) -> Function:
    """Move side-effect-free ops whose operands are defined outside a loop in front of it."""
    fn = clone_function(fn)
    _hoist_block(fn.entry)
    return fn


def cleanup(fn: Function) -> Function:
    """hoist_loop_invariants, then CSE, then DCE."""
    return dce(cse(hoist_loop_invariants(fn)))
