"""``XEJIT_DEBUG=1``: gathers and scatters with an offset outside the array become an error.

Without debug mode an out-of-range lane of ``load_gather`` reads the padding and one of
``store_scatter`` is dropped (the span check of ``lower_generic.array_span``). In debug mode the
lowerings also report such a lane: the kernel gets one hidden last argument, a 2 x int64 buffer
(ABI plan step ``(-1, "ptr", "debug")``), and the first lane that finds its offset out of range
claims it -- an atomic compare-and-swap of word 0 from 0 to its *site* number + 1 -- and writes
its offset into word 1. Sites are the checked accesses, numbered in lowering order, each with the
op's source location; after the launch the host reads the buffer and raises
:class:`xejit.errors.OutOfBoundsError` naming the kernel, the source line, the access and the
offset (:func:`raise_if_reported`).

Example:
    >>> import numpy as np
    >>> buf = np.zeros(2, np.int64)
    >>> raise_if_reported(buf, [{"loc": "k.py:3:11", "kind": "load_gather", "array": "x"}], "k", {})
"""
from __future__ import annotations

import linecache
from typing import Any

import numpy as np
from llvmlite import ir

from .. import options
from ..errors import OutOfBoundsError
from ..ir.core import Operation

I32, I64 = ir.IntType(32), ir.IntType(64)
PLAN_STEP = (-1, "ptr", "debug")    # the hidden argument's step in a kernel's argument plan


def debug_enabled() -> bool:
    """``XEJIT_DEBUG`` is on (:mod:`xejit.options`)."""
    return options.current().debug


def site_record(op: Operation, kind: str, array: str) -> dict[str, str]:
    """The host-side description of one checked access (JSON-able, kept in the cache entry):
    ``loc`` (file:line:col of the op), ``kind`` (load_gather / store_scatter), ``array``."""
    loc = op.loc
    return {"loc": f"{loc.file}:{loc.line}:{loc.col}" if loc.line else "<unknown location>",
            "kind": kind, "array": array}


def emit_report(b: ir.IRBuilder, buf: ir.Value, site: int, bad: ir.Value, off: ir.Value) -> None:
    """Device code: when ``bad`` (i1), claim the buffer for ``site`` and record ``off`` (i64)."""
    with b.if_then(bad):
        pair = b.cmpxchg(b.gep(buf, [I64(0)], source_etype=I32), I32(0), I32(site + 1),
                         "monotonic", "monotonic")
        with b.if_then(b.extract_value(pair, 1)):
            b.store(off, b.gep(buf, [I64(1)], source_etype=I64))


def new_buffer() -> np.ndarray:
    """A fresh (zeroed) report buffer for one launch."""
    return np.zeros(2, np.int64)


def raise_if_reported(buf: np.ndarray, sites: list[dict[str, Any]], kernel: str,
                      arrays: dict[str, tuple[int, ...]]) -> None:
    """Raise :class:`OutOfBoundsError` when a lane reported an out-of-range access into ``buf``.
    ``arrays`` maps array argument names to their shapes (for the message)."""
    site = int(buf[0] & 0xFFFFFFFF) - 1
    if site < 0:
        return
    if site >= len(sites):   # cannot happen with a buffer written by this kernel
        raise OutOfBoundsError(f"{kernel}: a gather/scatter offset outside its array (unknown site {site})")
    s = sites[site]
    name = s["array"]
    shape = f" of shape {tuple(arrays[name])}" if name in arrays else ""
    prep = "from" if s["kind"] == "load_gather" else "into"
    text = f"{s['loc']}: kernel {kernel!r}: {s['kind']} {prep} {name!r} at element offset {int(buf[1])}, " \
           f"outside the array{shape} (XEJIT_DEBUG=1; without it the lane reads the padding / is not written)"
    file, _, rest = s["loc"].rpartition(":")[0].rpartition(":")
    line = linecache.getline(file, int(rest)).rstrip() if rest.isdigit() else ""
    raise OutOfBoundsError(text + (f"\n{line}" if line else ""))
