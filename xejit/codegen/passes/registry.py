"""The passes by name, as ``python -m xejit opt`` and the text tests run them (like ``mlir-opt``).

Every entry takes a :class:`~xejit.ir.core.Function` and a :class:`PassOptions` and returns a new
function; :func:`run_passes` verifies the IR after each one, so a text test sees the same checks
as ``compile_kernel``.

Example:
    >>> from xejit.ir.parser import parse_function
    >>> fn = parse_function('''
    ... func.func @k(%x: memref<?x?xf32>) attributes {num_subgroups = 1} {
    ...   %0 = arith.constant 0 : index
    ...   %1 = arith.constant 0 : index
    ...   %t = xetile.init_tile %x, %0, %1 : memref<?x?xf32>, index, index -> !xetile.tile<8x16xf32>
    ...   func.return
    ... }''')
    >>> out = run_passes(fn, ["cse"], PassOptions())
    >>> sum(op.name == "arith.constant" for op in out.walk())
    1
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...errors import XejitValueError
from ...ir.core import Function
from ...ir.verifier import verify_function
from ..targets import Target, get_target
from . import blocking, lane_distribution, pipelining
from .cleanup import cleanup, cse, dce, hoist_loop_invariants
from .common import CompilerError
from .layout_propagation import propagate_layouts
from .wg_to_sg import distribute_to_subgroups

__all__ = ["PASSES", "PassOptions", "run_passes"]


@dataclass(frozen=True)
class PassOptions:
    """What target-dependent passes need: the target and the pipelining depth."""
    target: str = "pvc"
    num_stages: int = 3

    @property
    def target_info(self) -> Target:
        return get_target(self.target)


@dataclass(frozen=True)
class PassInfo:
    name: str
    run: Callable[[Function, PassOptions], Function]
    summary: str


PASSES: dict[str, PassInfo] = {p.name: p for p in (
    PassInfo("layout", lambda fn, o: propagate_layouts(fn),
             "xetile-wg: give every tile and vector a subgroup layout"),
    PassInfo("pipelining", lambda fn, o: pipelining.run(fn, o.num_stages, o.target_info),
             "xetile-wg: cooperative prefetch of k-loop tiles (targets with 2D block IO)"),
    PassInfo("wg-to-sg", lambda fn, o: distribute_to_subgroups(fn),
             "xetile-wg -> xetile-sg: one subgroup's part of every tile"),
    PassInfo("licm", lambda fn, o: hoist_loop_invariants(fn), "hoist loop-invariant pure ops"),
    PassInfo("cse", lambda fn, o: cse(fn), "merge identical pure ops"),
    PassInfo("dce", lambda fn, o: dce(fn), "drop unused pure ops"),
    PassInfo("cleanup", lambda fn, o: cleanup(fn), "licm, cse and dce"),
    PassInfo("blocking", lambda fn, o: blocking.run(fn, o.target_info),
             "xetile-sg -> xegpu: DPAS and 2D block sized ops for the target"),
    PassInfo("lane-distribution", lambda fn, o: lane_distribution.run(fn, o.target_info),
             "xegpu: the lane layout of every tensor descriptor"),
)}


def run_passes(fn: Function, names: list[str], options: PassOptions) -> Function:
    """Run the named passes in order, verifying after each (a ``CompilerError`` names the pass)."""
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise XejitValueError(f"unknown pass(es) {unknown}; known: {', '.join(PASSES)}")
    for name in names:
        fn = PASSES[name].run(fn, options)
        try:
            verify_function(fn)
        except Exception as e:
            raise CompilerError(f"after pass {name}: {e}") from e
    return fn
