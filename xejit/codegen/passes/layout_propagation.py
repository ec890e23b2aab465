"""Layout propagation: give every workgroup-level tile and vector a subgroup layout.

Input: ``xetile-wg`` (user layouts optional). Output: ``xetile-wg`` where every tile type carries
a layout and every vector-producing op a ``layout`` attribute (see docs/compiler.md). Anchors:
user layouts first, then each ``tile_mma`` result without one, then a default per value.
"""
from __future__ import annotations

import math
from typing import Sequence

from ...ir.core import (BlockArgument, Function, Layout, OpResult, Operation, TileType, Value,
                        VectorType)
from .common import CompilerError, clone_function

_EQ_OPS_PREFIX = ("arith.", "math.")
_EQ_OPS = {"vector.splat", "xetile.load_tile", "xetile.store_tile", "xetile.update_tile_offset",
           "xetile.atomic_rmw_tile", "xetile.load_gather", "xetile.store_scatter",
           "xetile.prefetch_tile", "xetile.init_tile"}


def _shaped(v: Value) -> bool:
    return isinstance(v.type, (VectorType, TileType))


def normalize(lay: Layout, shape: Sequence[int]) -> Layout:
    """Fill in ``sg_data`` (shape / sg_layout) and drop a default ``order``."""
    if lay.sg_layout is None:
        lay = Layout(sg_layout=(1,) * len(shape), sg_data=tuple(shape), inst_data=lay.inst_data,
                     lane_layout=lay.lane_layout, lane_data=lay.lane_data, order=lay.order)
    sg_data = lay.sg_data or tuple(s // l for s, l in zip(shape, lay.sg_layout))
    order = None if lay.order in (None, (1, 0)) else lay.order
    return Layout(lay.sg_layout, tuple(sg_data), lay.inst_data, lay.lane_layout, lay.lane_data, order)


def _key(lay: Layout):
    return (lay.sg_layout, lay.sg_data, lay.order or (1, 0))


def default_layout(shape: Sequence[int], n: int, keep: int | None = None) -> Layout:
    """The layout of a value nothing constrains: rows split over subgroups when possible;
    dimension ``keep`` (one a reduction runs along) is never split."""
    r, c = shape
    for a, b in ((n, 1), (1, n)) + tuple((a, n // a) for a in range(2, n) if n % a == 0):
        if keep is not None and (a, b)[keep] > 1:
            continue
        if r % a == 0 and c % b == 0:
            return Layout((a, b), (r // a, c // b))
    return Layout((n, 1), (r, c)) if n > 1 else Layout((1, 1), (r, c))  # shared by all subgroups


def mma_layout(m: int, n_: int, n: int) -> Layout:
    """Anchor layout of a tile_mma result [m, n_] over n subgroups: sub-tiles as square as the
    shape allows, preferring a sub-tile width that is a multiple of 16 lanes."""
    best = None
    for a in range(1, n + 1):
        if n % a:
            continue
        b = n // a
        if m % a or n_ % b:
            continue
        dm, dn = m // a, n_ // b
        score = ((dn % 16) != 0, abs(math.log(dm) - math.log(dn)))
        if best is None or score < best[0]:
            best = (score, Layout((a, b), (dm, dn)))
    return best[1] if best else default_layout((m, n_), n)


def value_layout(v: Value) -> Layout | None:
    """The layout of a value after this pass (block arguments/loop results: the loop's init)."""
    if isinstance(v.type, TileType):
        return v.type.layout
    if isinstance(v, BlockArgument):
        loop = v.block.parent.parent if v.block.parent is not None else None
        if loop is not None and loop.name == "scf.for" and v.index > 0:
            return value_layout(loop.operands[2 + v.index])
        return None
    if isinstance(v, OpResult):
        if v.op.name == "scf.for":
            return value_layout(v.op.operands[3 + v.index])
        return v.op.attributes.get("layout")
    return None


class _Solver:
    def __init__(self, fn: Function):
        self.fn = fn
        self.lay: dict[int, Layout] = {}
        self.values: dict[int, Value] = {}
        self.where: dict[int, Operation] = {}
        self.rels: list[tuple] = []
        self.order: list[Value] = []
        self.n = fn.attributes.get("num_subgroups") or 1
        self.mmas: list[Operation] = []
        self.reduces: list[Operation] = []
        self._collect(fn.entry.ops)

    def _track(self, v: Value, op: Operation) -> None:
        if _shaped(v) and id(v) not in self.values:
            self.values[id(v)] = v
            self.where[id(v)] = op
            self.order.append(v)

    def _collect(self, ops: list[Operation]) -> None:
        for op in ops:
            for v in list(op.operands) + list(op.results):
                self._track(v, op)
            name = op.name
            shaped = [v for v in list(op.operands) + list(op.results) if _shaped(v)]
            if name == "scf.for":
                body = op.regions[0].block
                for a in body.args:
                    self._track(a, op)
                y = body.terminator
                for i, init in enumerate(op.operands[3:]):
                    if _shaped(init):
                        self.rels.append(("eq", op, [init, body.args[i + 1], y.operands[i], op.results[i]]))
                self._collect(body.ops)
            elif name == "xetile.tile_mma":
                self.mmas.append(op)
                self.rels.append(("mma", op, []))
            elif name in ("xetile.tile_reduce", "xetile.tile_broadcast", "xetile.tile_transpose"):
                if name == "xetile.tile_reduce":
                    self.reduces.append(op)
                self.rels.append((name.split(".")[1], op, []))
            elif name == "xetile.convert_layout":
                pass
            elif name in _EQ_OPS or name.startswith(_EQ_OPS_PREFIX) or name == "vector.step":
                if len(shaped) > 1:
                    self.rels.append(("eq", op, shaped))
            # user layouts are anchors
            lay = op.attributes.get("layout")
            if lay is not None and lay.sg_layout is not None and op.results and _shaped(op.result):
                self.set(op.result, lay, op)
            for r in op.results:
                if isinstance(r.type, TileType) and r.type.layout is not None:
                    self.set(r, r.type.layout, op)

    def set(self, v: Value, lay: Layout, op: Operation) -> bool:
        lay = normalize(lay, v.type.shape)
        have = self.lay.get(id(v))
        if have is None:
            self.lay[id(v)] = lay
            return True
        if _key(have) != _key(lay):
            raise CompilerError(f"conflicting layouts {have} and {lay} meet here; insert a "
                                f"convert_layout", op)
        return False

    def get(self, v: Value) -> Layout | None:
        return self.lay.get(id(v))

    def propagate(self) -> None:
        changed = True
        while changed:
            changed = False
            for kind, op, vals in self.rels:
                changed |= getattr(self, "_" + kind)(op, vals)

    def _eq(self, op, vals) -> bool:
        known = next((self.get(v) for v in vals if self.get(v) is not None), None)
        if known is None:
            return False
        ch = False
        for v in vals:
            ch |= self.set(v, Layout(known.sg_layout, _fit(known.sg_data, v.type.shape), order=known.order), op)
        return ch

    def _mma(self, op, vals) -> bool:
        a, b = op.operands[:2]
        r = op.result
        ch = False
        if len(op.operands) == 3 and self.get(op.operands[2]) is not None and self.get(r) is None:
            ch |= self.set(r, self.get(op.operands[2]), op)
        lay = self.get(r)
        if lay is None:
            return ch
        (_, k), (dm, dn) = a.type.shape, lay.sg_data
        ch |= self.set(a, Layout(lay.sg_layout, (dm, k), order=lay.order), op)
        ch |= self.set(b, Layout(lay.sg_layout, (k, dn), order=lay.order), op)
        if len(op.operands) == 3:
            ch |= self.set(op.operands[2], lay, op)
        return ch

    def _tile_reduce(self, op, vals) -> bool:
        src, r = op.operands[0], op.result
        d = op.attributes["dims"][0]
        ls, lr = self.get(src), self.get(r)
        if ls is not None and lr is None:
            data = tuple(1 if i == d else x for i, x in enumerate(ls.sg_data))
            return self.set(r, Layout(ls.sg_layout, data, order=ls.order), op)
        if lr is not None and ls is None:
            data = tuple(src.type.shape[i] if i == d else x for i, x in enumerate(lr.sg_data))
            return self.set(src, Layout(lr.sg_layout, data, order=lr.order), op)
        return False

    def _tile_broadcast(self, op, vals) -> bool:
        src, r = op.operands[0], op.result
        dims = op.attributes["dims"]
        ls, lr = self.get(src), self.get(r)
        if lr is not None and ls is None:
            data = tuple(1 if i in dims else x for i, x in enumerate(lr.sg_data))
            return self.set(src, Layout(lr.sg_layout, data, order=lr.order), op)
        if ls is not None and lr is None:
            data = tuple(r.type.shape[i] if i in dims else x for i, x in enumerate(ls.sg_data))
            return self.set(r, Layout(ls.sg_layout, data, order=ls.order), op)
        return False

    def _tile_transpose(self, op, vals) -> bool:
        src, r = op.operands[0], op.result
        ls, lr = self.get(src), self.get(r)
        if lr is not None and ls is None:
            return self.set(src, _transposed(lr), op)
        if ls is not None and lr is None:
            return self.set(r, _transposed(ls), op)
        return False

    def solve(self) -> None:
        self.propagate()
        for op in self.mmas:
            if self.get(op.result) is None:
                m, n_ = op.result.type.shape
                self.set(op.result, mma_layout(m, n_, self.n), op)
                self.propagate()
        for op in self.reduces:
            src = op.operands[0]
            if self.get(src) is None:
                d = op.attributes["dims"][0]
                self.set(src, default_layout(src.type.shape, self.n, keep=d), op)
                self.propagate()
        for v in self.order:
            if self.get(v) is None:
                self.set(v, default_layout(v.type.shape, self.n), self.where[id(v)])
                self.propagate()


def _fit(data, shape):
    return tuple(min(d, s) if s % d == 0 or d % s == 0 else d for d, s in zip(data, shape))


def _transposed(lay: Layout) -> Layout:
    order = lay.order or (1, 0)
    new_order = tuple(1 - o for o in order)
    return Layout(lay.sg_layout[::-1], lay.sg_data[::-1], order=None if new_order == (1, 0) else new_order)


def propagate_layouts(fn: Function) -> Function:
    """xetile-wg -> xetile-wg with a layout on every tile type and vector-producing op."""
    fn = clone_function(fn)
    s = _Solver(fn)
    s.solve()
    for v in s.order:
        lay = s.get(v)
        if isinstance(v.type, TileType):
            t = v.type
            v.type = TileType(t.shape, t.dtype, t.order, lay, t.scatter)
        elif isinstance(v, OpResult) and v.op.name != "scf.for":
            v.op.attributes["layout"] = lay
    # convert_layout: record its input layout for the distribution pass
    for op in fn.walk():
        if op.name == "xetile.convert_layout":
            op.attributes["input_layout"] = s.get(op.operands[0])
            op.attributes["layout"] = s.get(op.result)
    fn.attributes["level"] = "workgroup"
    return fn
