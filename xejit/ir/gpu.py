"""Small GPU ops the compiler needs in subgroup-level IR, with their numpy semantics.

``gpu.subgroup_id`` reads the id of the subgroup being interpreted from ``interp.subgroup_id``
(an attribute this module sets). Subgroups exchange data through shared local memory (SLM):
``gpu.slm_alloc`` names a workgroup buffer [H, W], ``gpu.slm_store`` writes a subgroup vector
into it at (row, col), ``gpu.slm_load`` reads one back (``transpose = true``: reads the
transposed window), and ``gpu.barrier`` orders the two across the workgroup.
:func:`run_grid_subgroups` interprets a subgroup-level function one workgroup at a time; when the
function has barriers, the subgroups of a workgroup run as threads that meet at each barrier,
so the exchange is interpreted exactly as the device runs it.

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
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .core import (OpDef, Operation, ScalarType, Type, VectorType, VerifyError, _shape_str, index,
                   register_op)
from .interpreter import Interpreter, InterpreterError, impl
from .xegpu import vnni_pack


@dataclass(frozen=True)
class SlmType(Type):
    """A workgroup buffer in shared local memory: shape [H, W] and element type."""
    shape: tuple[int, ...]
    dtype: ScalarType

    def __str__(self) -> str:
        return f"memref<{_shape_str(self.shape)}x{self.dtype}, slm>"


def _verify_sg_id(op: Operation) -> None:
    if op.result.type != index:
        raise VerifyError("gpu.subgroup_id returns an index", op)


register_op(OpDef("gpu.subgroup_id", 0, 1, verify=_verify_sg_id,
                  summary="linear id of the subgroup within its workgroup (subgroup-level IR)"))
register_op(OpDef("gpu.num_subgroups", 0, 1, verify=_verify_sg_id,
                  summary="number of subgroups in the workgroup (subgroup-level IR)"))


def _verify_slm_alloc(op: Operation) -> None:
    t = op.result.type
    if not isinstance(t, SlmType) or len(t.shape) != 2 or min(t.shape) < 1:
        raise VerifyError("gpu.slm_alloc returns a 2D SLM buffer", op)
    if t.dtype.bitwidth == 1:
        raise VerifyError("SLM buffers of i1 are not supported", op)


def _slm_window(op: Operation, vec: VectorType, buf: Type) -> None:
    packed = bool(op.attributes.get("packed"))
    if not isinstance(buf, SlmType) or not isinstance(vec, VectorType) or len(vec.shape) != 2 + packed:
        raise VerifyError(f"'{op.name}' moves a 2D vector (3D VNNI-packed for a packed load) to or "
                          f"from an SLM buffer", op)
    if vec.dtype != buf.dtype:
        raise VerifyError(f"'{op.name}': vector of {vec.dtype}, buffer of {buf.dtype}", op)
    shape = (vec.shape[0] * vec.shape[2], vec.shape[1]) if packed else vec.shape
    shape = shape[::-1] if op.attributes.get("transpose") else shape
    if any(s > b for s, b in zip(shape, buf.shape)):
        raise VerifyError(f"'{op.name}': a {vec} window does not fit {buf}", op)
    if any(v.type != index for v in op.operands if not isinstance(v.type, (VectorType, SlmType))):
        raise VerifyError(f"'{op.name}' offsets are index values", op)


register_op(OpDef("gpu.slm_alloc", 0, 1, pure=False, verify=_verify_slm_alloc,
                  summary="a workgroup buffer in shared local memory"))
register_op(OpDef("gpu.slm_store", 4, 0, pure=False,
                  verify=lambda op: _slm_window(op, op.operands[0].type, op.operands[1].type),
                  summary="buf[r:r+h, c:c+w] = vector (operands: vector, buf, r, c)"))
register_op(OpDef("gpu.slm_load", 3, 1, pure=False, attrs=("transpose", "packed", "layout"),
                  verify=lambda op: _slm_window(op, op.result.type, op.operands[0].type),
                  summary="buf[r:r+h, c:c+w] (transpose: buf[r:r+w, c:c+h].T; packed: VNNI, "
                          "XeGPU level)"))
register_op(OpDef("gpu.barrier", 0, 0, pure=False,
                  summary="workgroup barrier with SLM fence"))


@impl("gpu.slm_alloc")
def _slm_alloc(it: Interpreter, op: Operation, args):
    t = op.result.type
    bufs = getattr(it, "slm", None)
    if bufs is None:
        bufs = it.slm = {}
    with getattr(it, "slm_lock", threading.Lock()):
        if id(op) not in bufs:   # one buffer per workgroup, shared by its subgroups
            # poisoned: a read of an element no subgroup wrote shows up as NaN / a sentinel
            fill = np.nan if t.dtype.is_float else -0x5A5A5A5A
            bufs[id(op)] = np.full(t.shape, fill, dtype=np.float64 if t.dtype.is_float else np.int64)
    return [bufs[id(op)]]


def _window(buf: np.ndarray, r, c, shape) -> tuple[slice, slice]:
    r, c = int(r), int(c)
    h, w = shape
    if r < 0 or c < 0 or r + h > buf.shape[0] or c + w > buf.shape[1]:
        raise InterpreterError(f"SLM window [{r}:{r + h}, {c}:{c + w}] is outside the buffer "
                               f"{list(buf.shape)}")
    return slice(r, r + h), slice(c, c + w)


@impl("gpu.slm_store")
def _slm_store(it: Interpreter, op: Operation, args):
    vec, buf, r, c = args
    buf[_window(buf, r, c, vec.shape)] = vec
    return None


@impl("gpu.slm_load")
def _slm_load(it: Interpreter, op: Operation, args):
    buf, r, c = args
    shape = op.result.type.shape
    packed = bool(op.attributes.get("packed"))
    if packed:
        shape = (shape[0] * shape[2], shape[1])
    if op.attributes.get("transpose"):
        out = buf[_window(buf, r, c, shape[::-1])].T
    else:
        out = buf[_window(buf, r, c, shape)]
    out = np.ascontiguousarray(out).astype(op.result.type.dtype.np_dtype)
    if packed:   # [K, N] -> [K/v, N, v], as a VNNI (packed) 2D block load returns it
        out = vnni_pack(out, op.result.type.shape[2])
    return [out]


#: A safety net only: a failing subgroup aborts the barrier at once. (Subgroups share the GIL,
#: so the last one may arrive long after the first on a big workgroup.)
_BARRIER_TIMEOUT_S = 900


@impl("gpu.barrier")
def _barrier(it: Interpreter, op: Operation, args):
    bar = getattr(it, "barrier", None)
    if bar is not None:
        try:
            bar.wait(timeout=_BARRIER_TIMEOUT_S)
        except threading.BrokenBarrierError:
            raise InterpreterError(f"{op.loc}: barrier broken: another subgroup of the workgroup "
                                   "failed or did not reach this barrier") from None
    return None


@impl("gpu.subgroup_id")
def _subgroup_id(it: Interpreter, op: Operation, args):
    return [np.int64(getattr(it, "subgroup_id", 0))]


@impl("gpu.num_subgroups")
def _num_subgroups(it: Interpreter, op: Operation, args):
    return [np.int64(getattr(it, "num_subgroups", 1))]


def run_grid_subgroups(fn, grid: Sequence[int], args: Sequence[Any], num_subgroups: int) -> None:
    """Interpret a subgroup-level ``fn``: for each program id of ``grid``, run every subgroup
    (as threads meeting at ``gpu.barrier`` when the function has barriers)."""
    g = tuple(int(x) for x in grid) + (1,) * (3 - len(grid))
    if not 1 <= len(grid) <= 3:
        raise InterpreterError(f"grid must have 1 to 3 sizes, got {tuple(grid)}")
    threaded = num_subgroups > 1 and any(op.name == "gpu.barrier" for op in fn.walk())
    for z, y, x in itertools.product(range(g[2]), range(g[1]), range(g[0])):
        slm: dict = {}
        lock = threading.Lock()
        bar = threading.Barrier(num_subgroups) if threaded else None
        its = []
        for s in range(num_subgroups):
            it = Interpreter()
            it.num_subgroups, it.subgroup_id = num_subgroups, s
            it.slm, it.slm_lock, it.barrier = slm, lock, bar
            its.append(it)
        if not threaded:
            for it in its:
                it.run_function(fn, args, (x, y, z), g)
            continue
        errors: list[BaseException] = []

        def body(it: Interpreter) -> None:
            try:
                it.run_function(fn, args, (x, y, z), g)
            except BaseException as e:  # noqa: BLE001 -- re-raised below, in the caller
                errors.append(e)
                bar.abort()             # the other subgroups stop at their next barrier

        threads = [threading.Thread(target=body, args=(it,), daemon=True) for it in its]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            first = next((e for e in errors if "barrier broken" not in str(e)), errors[0])
            raise first
