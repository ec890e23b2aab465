"""A dialect-agnostic numpy interpreter: a registry op name -> numpy rule, and a host loop over
the grid that runs a function once per workgroup (program id).

A rule is ``rule(interp, op, args) -> sequence of results`` (or None for no results); a rule
for an op with regions runs them with :meth:`Interpreter.run_block`. Other dialects (XeGPU)
register their own rules with :func:`impl` and reuse the loop.

Example:
    >>> import numpy as np
    >>> from xejit.ir.core import Builder, Function, f32, VectorType
    >>> fn = Function("k", [], [])
    >>> b = Builder.at_end(fn.entry)
    >>> _ = b.create("arith.constant", [], [VectorType((2,), f32)], {"value": 1.5})
    >>> _ = b.create("func.return")
    >>> Interpreter().run_grid(fn, (2,), [])
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import InterpreterError, OutOfBoundsError  # a leaf module; see ir/core.py
from .core import (Block, Function, OP_DEFS, Operation, ScalarType, bf16, bf16_bits_to_f32,
                   f32_to_bf16_bits)

Rule = Callable[["Interpreter", Operation, list], "Sequence[Any] | None"]

#: Held by the rules of atomic read-modify-write ops: subgroups interpreted as threads
#: (``gpu.run_grid_subgroups``) must not interleave inside one.
ATOMIC_LOCK = threading.Lock()
IMPLS: dict[str, Rule] = {}


def impl(*names: str) -> Callable[[Rule], Rule]:
    """Register a numpy rule for one or more op names (``@impl("xetile.load_tile")``)."""
    def deco(fn: Rule) -> Rule:
        for n in names:
            IMPLS[n] = fn
        return fn
    return deco


@dataclass
class Buffer:
    """An array argument in the interpreter: a logical-shape view of its memory.

    ``data`` shares memory with the caller's array, so stores are visible to the caller.
    bf16 memory is held as uint16 bit patterns (numpy has no bf16).
    """
    data: np.ndarray
    dtype: ScalarType

    def read(self, index: Any) -> np.ndarray:
        raw = self.data[index]
        if self.dtype == bf16:
            return bf16_bits_to_f32(raw)
        return np.asarray(raw, dtype=self.dtype.np_dtype)

    def write(self, index: Any, values: np.ndarray) -> None:
        self.data[index] = to_storage(values, self.dtype)

    @property
    def shape2d(self) -> tuple[int, int]:
        return (1, self.data.shape[0]) if self.data.ndim == 1 else self.data.shape

    @property
    def view2d(self) -> np.ndarray:
        return self.data.reshape(1, -1) if self.data.ndim == 1 else self.data

    def inside(self, offsets: np.ndarray) -> np.ndarray:
        """Which element offsets name an element of the array (bool, the shape of ``offsets``)."""
        offs = np.asarray(offsets, dtype=np.int64)
        strides = [s // self.data.itemsize for s in self.data.strides]
        ok = np.ones(offs.shape, bool)
        rem = offs
        for d in sorted(range(self.data.ndim), key=lambda d: -strides[d]):
            q = rem // strides[d] if strides[d] else np.zeros_like(rem)
            rem = rem - q * strides[d]
            ok &= (q >= 0) & (q < self.data.shape[d])
        return ok & (rem == 0)

    def flat_to_index(self, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
        """Element offsets from the base (in elements, as a kernel computes them from strides)
        to numpy indices; raises on offsets outside the array."""
        offs = np.asarray(offsets, dtype=np.int64)
        strides = [s // self.data.itemsize for s in self.data.strides]
        shape = self.data.shape
        idx = []
        rem = offs
        for d in sorted(range(len(shape)), key=lambda d: -strides[d]):
            q = rem // strides[d] if strides[d] else np.zeros_like(rem)
            rem = rem - q * strides[d]
            idx.append((d, q))
        bad = (rem != 0) | np.zeros(offs.shape, bool)
        for d, q in idx:
            bad |= (q < 0) | (q >= shape[d])
        if bad.any():
            raise IndexError(f"gather/scatter offset {int(offs[bad].flat[0])} is outside the array "
                             f"of shape {list(shape)}")
        return tuple(q for _, q in sorted(idx))


def to_storage(values: Any, dtype: ScalarType) -> np.ndarray:
    """Interpreter value -> memory representation of ``dtype``."""
    if dtype == bf16:
        return f32_to_bf16_bits(np.asarray(values, dtype=np.float32))
    return np.asarray(values).astype(dtype.np_storage_dtype)


class Interpreter:
    """Runs functions op by op with numpy; ``program_id``/``grid`` are visible to rules."""

    def __init__(self, impls: dict[str, Rule] | None = None):
        self.impls = IMPLS if impls is None else impls
        self.program_id: tuple[int, int, int] = (0, 0, 0)
        self.grid: tuple[int, int, int] = (1, 1, 1)
        self.env: dict[int, Any] = {}

    def run_block(self, block: Block, args: Sequence[Any]) -> list[Any] | None:
        """Bind block arguments, run the ops; return the terminator's operand values."""
        env = self.env
        for a, v in zip(block.args, args):
            env[id(a)] = v
        for op in block.ops:
            vals = [env[id(v)] for v in op.operands]
            d = OP_DEFS.get(op.name)
            if d is not None and d.terminator:
                return vals
            rule = self.impls.get(op.name)
            if rule is None:
                raise InterpreterError(f"{op.loc}: no interpreter rule for '{op.name}'")
            try:
                with np.errstate(all="ignore"):
                    results = rule(self, op, vals)
            except (InterpreterError, OutOfBoundsError):
                raise
            except Exception as e:  # name the op and the user's line, keep the cause
                raise InterpreterError(f"{op.loc}: {op.name}: {e}") from e
            if results is not None:
                for r, v in zip(op.results, results):
                    env[id(r)] = v
        return None

    def run_function(self, fn: Function, args: Sequence[Any], program_id: Sequence[int] = (0, 0, 0),
                     grid: Sequence[int] = (1, 1, 1)) -> None:
        """Run one workgroup of ``fn``."""
        self.program_id = tuple(program_id) + (0,) * (3 - len(program_id))
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.env = {}
        self.run_block(fn.entry, args)

    def run_grid(self, fn: Function, grid: Sequence[int], args: Sequence[Any]) -> None:
        """Run ``fn`` once per program id of ``grid`` (1 to 3 axes), sequentially."""
        g = tuple(int(x) for x in grid) + (1,) * (3 - len(grid))
        if len(grid) == 0 or len(grid) > 3 or any(x < 0 for x in g):
            raise InterpreterError(f"grid must have 1 to 3 non-negative sizes, got {tuple(grid)}")
        for z, y, x in itertools.product(range(g[2]), range(g[1]), range(g[0])):
            self.run_function(fn, args, (x, y, z), g)
