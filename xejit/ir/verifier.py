"""Whole-function verification: structure (dominance, terminators) plus every op's own rules.

Example:
    >>> from xejit.ir.core import Builder, Function
    >>> fn = Function("k", [], [])
    >>> _ = Builder.at_end(fn.entry).create("func.return")
    >>> verify_function(fn)
"""
from __future__ import annotations

from typing import Callable

from .core import Block, Function, Module, OP_DEFS, Operation, Value, VerifyError, verify_op_signature
from . import xetile
from .printer import print_around

# Dialects append function-level checks here (e.g. XeTile's subgroup-count rule).
FUNCTION_CHECKS: list[Callable[[Function], None]] = []


class IRVerificationError(VerifyError):
    """A VerifyError with the IR around the offending op in its message."""


def _verify_block(block: Block, visible: set[int], fn: Function) -> None:
    visible = set(visible) | {id(a) for a in block.args}
    for i, op in enumerate(block.ops):
        for v in op.operands:
            if id(v) not in visible:
                raise VerifyError(f"'{op.name}' uses a value that is not defined before it "
                                  f"({v!r})", op)
        d = OP_DEFS.get(op.name)
        if d is not None and d.terminator and i != len(block.ops) - 1:
            raise VerifyError(f"terminator '{op.name}' is not at the end of its block", op)
        verify_op_signature(op)
        for r in op.regions:
            for b in r.blocks:
                _verify_block(b, visible, fn)
        visible |= {id(r) for r in op.results}
    last = block.terminator
    if last is None or not OP_DEFS.get(last.name, None) or not OP_DEFS[last.name].terminator:
        raise VerifyError("block does not end with a terminator", last)


def verify_function(fn: Function, with_context: bool = True) -> None:
    """Raise :class:`IRVerificationError` (with the surrounding IR) on the first broken rule."""
    try:
        _verify_block(fn.entry, set(), fn)
        for check in xetile.FUNCTION_CHECKS + FUNCTION_CHECKS:
            check(fn)
    except IRVerificationError:
        raise
    except VerifyError as e:
        msg = str(e)
        if with_context and e.op is not None:
            msg += f"\n  at {e.op.loc}\n" + print_around(fn, e.op)
        raise IRVerificationError(msg, e.op) from None


def verify_module(mod: Module) -> None:
    for fn in mod.functions:
        verify_function(fn)


def uses_are_consistent(v: Value) -> bool:
    """Debug helper: every recorded use really points at ``v``."""
    return all(op.operands[i] is v for op, i in v.uses)


__all__ = ["verify_function", "verify_module", "IRVerificationError", "FUNCTION_CHECKS"]
_ = Operation
