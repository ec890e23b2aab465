"""Small GPU ops the compiler needs in subgroup-level IR, with their numpy semantics.

``gpu.subgroup_id`` reads the id of the subgroup being interpreted from ``interp.subgroup_id``
(an attribute this module sets); :func:`run_grid_subgroups` interprets a subgroup-level function
by running each subgroup of each workgroup in turn (valid while subgroups do not communicate).

Example:
    >>> from xejit.ir.core import Builder, Function, index
    >>> fn = Function("k", [], [])
    >>> b = Builder.at_end(fn.entry)
    >>> s = b.create("gpu.subgroup_id", [], [index]).result
    >>> _ = b.create("func.return")
    >>> run_grid_subgroups(fn, (1,), [], 2)
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from .core import OpDef, Operation, VerifyError, index, register_op
from .interpreter import Interpreter, InterpreterError, impl


def _verify_sg_id(op: Operation) -> None:
    if op.result.type != index:
        raise VerifyError("gpu.subgroup_id returns an index", op)


register_op(OpDef("gpu.subgroup_id", 0, 1, verify=_verify_sg_id,
                  summary="linear id of the subgroup within its workgroup (subgroup-level IR)"))
register_op(OpDef("gpu.num_subgroups", 0, 1, verify=_verify_sg_id,
                  summary="number of subgroups in the workgroup (subgroup-level IR)"))


@impl("gpu.subgroup_id")
def _subgroup_id(it: Interpreter, op: Operation, args):
    return [np.int64(getattr(it, "subgroup_id", 0))]


@impl("gpu.num_subgroups")
def _num_subgroups(it: Interpreter, op: Operation, args):
    return [np.int64(getattr(it, "num_subgroups", 1))]


def run_grid_subgroups(fn, grid: Sequence[int], args: Sequence[Any], num_subgroups: int) -> None:
    """Interpret a subgroup-level ``fn``: for each program id of ``grid``, run every subgroup."""
    g = tuple(int(x) for x in grid) + (1,) * (3 - len(grid))
    if not 1 <= len(grid) <= 3:
        raise InterpreterError(f"grid must have 1 to 3 sizes, got {tuple(grid)}")
    it = Interpreter()
    it.num_subgroups = num_subgroups
    for z, y, x in itertools.product(range(g[2]), range(g[1]), range(g[0])):
        for s in range(num_subgroups):
            it.subgroup_id = s
            it.run_function(fn, args, (x, y, z), g)
