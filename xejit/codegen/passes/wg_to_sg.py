"""Workgroup-to-subgroup distribution (XeTile RFC ``wg_map`` rules).

Input: ``xetile-wg`` after :func:`propagate_layouts`. Output: ``xetile-sg`` (function attribute
``level = "subgroup"``): every tile/vector has its subgroup shape ``sg_data``; a value of which a
subgroup owns several round-robin sub-tiles becomes several values; per-subgroup offsets are
index arithmetic on ``gpu.subgroup_id``. Subgroups sharing data (wrap-around) compute it
redundantly. Data that moves between subgroups (``convert_layout`` to another distribution,
``tile_transpose``, a ``tile_reduce`` whose reduced dim is split over subgroups) goes through a
shared-local-memory buffer between barriers (``gpu.slm_alloc/slm_store/slm_load/barrier``).
See docs/compiler.md for the exact rules.
"""
from __future__ import annotations

import itertools
from typing import Any

from ...ir import gpu  # registers gpu.subgroup_id and the SLM ops
from ...ir.core import (Block, Builder, Function, Layout, Operation, Region, TileType,
                        Value, VectorType, index)
from .common import CompilerError
from .layout_propagation import _key, normalize, value_layout

_REDUCE_COMBINE = {
    ("add", True): "arith.addf", ("add", False): "arith.addi",
    ("mul", True): "arith.mulf", ("mul", False): "arith.muli",
    ("max", True): "arith.maxnumf", ("max", False): "arith.maxsi",
    ("min", True): "arith.minnumf", ("min", False): "arith.minsi",
    ("and", False): "arith.andi", ("or", False): "arith.ori", ("xor", False): "arith.xori",
}
_DROP = ("xejit.print", "xejit.breakpoint")


class _Dist:
    """How one workgroup value is spread: layout, subgroup shape, sub-tile counts."""
    __slots__ = ("layout", "data", "nb", "shape")

    def __init__(self, shape, layout: Layout):
        self.shape = tuple(shape)
        self.layout = normalize(layout, shape)
        self.data = self.layout.sg_data
        self.nb = tuple(max(1, s // (l * d)) for s, l, d in zip(shape, self.layout.sg_layout, self.data))

    def blocks(self):
        return list(itertools.product(range(self.nb[0]), range(self.nb[1])))

    def shared(self, d: int) -> bool:
        return self.layout.sg_layout[d] * self.data[d] > self.shape[d]


def _wg_tile(dist: _Dist) -> list | None:
    """What a lowering needs to find the workgroup tile from a subgroup's (``wg_tile`` attribute
    of a subgroup's ``init_tile``: [S0, S1, L0, L1, D0, D1, fast dim]): set when the subgroup owns
    one sub-tile and each dim is split exactly over its subgroups or shared whole by them (the
    subgroup's offset in dim d is ``coord_d * D_d``, 0 when shared; ``coord`` from
    ``gpu.subgroup_id`` as :meth:`_Distributor.coords` computes it)."""
    lay = dist.layout
    if dist.nb != (1, 1):
        return None
    if any(L * D != S and D != S for S, L, D in zip(dist.shape, lay.sg_layout, dist.data)):
        return None
    return [*dist.shape, *lay.sg_layout, *dist.data, (lay.order or (1, 0))[0]]


def _sg_type(t, data):
    if isinstance(t, VectorType):
        return VectorType(tuple(data), t.dtype)
    if isinstance(t, TileType):
        return TileType(tuple(data), t.dtype, t.order, None, t.scatter)
    return t


class _Distributor:
    def __init__(self, fn: Function):
        self.src = fn
        self.n = fn.attributes.get("num_subgroups") or 1
        attrs = dict(fn.attributes)
        attrs["level"] = "subgroup"
        self.fn = Function(fn.name, [a.type for a in fn.args], list(fn.arg_names), attrs, fn.loc)
        self.vmap: dict[int, list[Value]] = {id(a): [na] for a, na in zip(fn.args, self.fn.args)}
        self.dist: dict[int, _Dist] = {}
        self.b = Builder.at_end(self.fn.entry)
        self.b.verify = False
        self._sgid: Value | None = None
        self._coords: dict[Any, tuple[Value, Value]] = {}
        self._consts: dict[Any, Value] = {}

    # --- helpers --------------------------------------------------------------------------
    def d(self, v: Value) -> _Dist:
        got = self.dist.get(id(v))
        if got is None:
            lay = value_layout(v) or Layout((1,) * len(v.type.shape), tuple(v.type.shape))
            got = self.dist[id(v)] = _Dist(v.type.shape, lay)
        return got

    def _entry_builder(self) -> Builder:
        b = Builder(self.fn.entry, 0 if self._sgid is None else self.fn.entry.ops.index(self._sgid.op) + 1)
        b.verify = False
        return b

    def const(self, value: int) -> Value:
        c = self._consts.get(value)
        if c is None:
            b = self._entry_builder()
            c = b.create("arith.constant", [], [index], {"value": int(value)}).result
            self._consts[value] = c
        return c

    def coords(self, lay: Layout, b: Builder) -> tuple[Value, Value]:
        key = _key(lay)
        if key in self._coords:
            return self._coords[key]
        if self._sgid is None:
            eb = Builder(self.fn.entry, 0)
            eb.verify = False
            self._sgid = eb.create("gpu.subgroup_id", [], [index]).result
            self._sgid.name_hint = "sgid"
        order = lay.order or (1, 0)
        fast, slow = order
        eb = Builder(self.fn.entry, self.fn.entry.ops.index(self._sgid.op) + 1)
        eb.verify = False
        c_fast = eb.create("arith.remsi", [self._sgid, self._const_at(eb, lay.sg_layout[fast])], [index]).result
        c_slow = eb.create("arith.divsi", [self._sgid, self._const_at(eb, lay.sg_layout[fast])], [index]).result
        res = [None, None]
        res[fast], res[slow] = c_fast, c_slow
        self._coords[key] = tuple(res)
        return self._coords[key]

    def _const_at(self, b: Builder, value: int) -> Value:
        return b.create("arith.constant", [], [index], {"value": int(value)}).result

    def block_offsets(self, dist: _Dist, b: Builder, blk) -> list[Value | None]:
        """Offsets of sub-tile ``blk`` of this subgroup relative to the workgroup tile."""
        lay, out = dist.layout, []
        coords = None
        for d in range(2):
            L, D, S = lay.sg_layout[d], dist.data[d], dist.shape[d]
            static = blk[d] * L * D
            if L == 1 or D % S == 0:  # every subgroup starts at 0 in this dim
                out.append(self.const(static) if static else None)
                continue
            if coords is None:
                coords = self.coords(lay, b)
            v = b.create("arith.muli", [coords[d], self.const(D)], [index]).result
            if L * D > S:
                v = b.create("arith.remsi", [v, self.const(S)], [index]).result
            if static:
                v = b.create("arith.addi", [v, self.const(static)], [index]).result
            out.append(v)
        return out

    # --- the walk -------------------------------------------------------------------------
    def run(self) -> Function:
        self.walk(self.src.entry.ops, self.b)
        return self.fn

    def walk(self, ops, b: Builder) -> None:
        for op in ops:
            if op.name in _DROP:
                continue
            handler = getattr(self, "op_" + op.name.replace(".", "_"), None)
            if handler is not None:
                handler(op, b)
            elif any(isinstance(v.type, (VectorType, TileType)) for v in list(op.operands) + list(op.results)):
                self.blockwise(op, b)
            else:
                self.clone_scalar(op, b)

    def m(self, v: Value) -> list[Value]:
        return self.vmap[id(v)]

    def clone_scalar(self, op: Operation, b: Builder) -> None:
        if op.regions:
            raise CompilerError("op with regions is not supported by the distribution", op)
        new = b.create(op.name, [self.m(v)[0] for v in op.operands], [r.type for r in op.results],
                       dict(op.attributes), loc=op.loc)
        for r, nr in zip(op.results, new.results):
            nr.name_hint = r.name_hint
            self.vmap[id(r)] = [nr]

    def _attrs(self, op: Operation) -> dict:
        return {k: v for k, v in op.attributes.items() if k not in ("layout", "input_layout")}

    def blockwise(self, op: Operation, b: Builder) -> None:
        """An op applied sub-tile by sub-tile (all shaped operands share the result's blocks)."""
        shaped = [v for v in list(op.results) + list(op.operands) if isinstance(v.type, (VectorType, TileType))]
        ref = self.d(shaped[0])
        for v in shaped[1:]:
            if self.d(v).nb != ref.nb or self.d(v).data != ref.data:
                raise CompilerError(f"operands are distributed differently ({self.d(v).layout} vs "
                                    f"{ref.layout}); insert a convert_layout", op)
        if op.name == "xetile.atomic_rmw_tile" and (ref.shared(0) or ref.shared(1)):
            raise CompilerError(f"atomic_rmw_tile with a layout whose subgroups share data "
                                f"({ref.layout}) would apply the update several times; not supported", op)
        results = [[] for _ in op.results]
        for i, blk in enumerate(ref.blocks()):
            operands = [self.m(v)[i] if isinstance(v.type, (VectorType, TileType)) else self.m(v)[0]
                        for v in op.operands]
            new = b.create(op.name, operands, [_sg_type(r.type, ref.data) for r in op.results],
                           self._attrs(op), loc=op.loc)
            for k, (r, nr) in enumerate(zip(op.results, new.results)):
                nr.name_hint = r.name_hint
                results[k].append(nr)
        for r, vals in zip(op.results, results):
            self.vmap[id(r)] = vals

    # --- ops with their own rules ------------------------------------------------------------
    def op_xetile_init_tile(self, op: Operation, b: Builder) -> None:
        t = op.result.type
        if t.scatter:
            return self.blockwise(op, b)
        dist = self.d(op.result)
        arr, o0, o1 = op.operands
        vals = []
        for blk in dist.blocks():
            offs = []
            for base, extra in zip((o0, o1), self.block_offsets(dist, b, blk)):
                base = self.m(base)[0]
                offs.append(base if extra is None else b.create("arith.addi", [base, extra], [index]).result)
            attrs = self._attrs(op)
            wg = _wg_tile(dist)
            if wg is not None:
                attrs["wg_tile"] = wg
            new = b.create(op.name, [self.m(arr)[0], *offs], [_sg_type(t, dist.data)], attrs, loc=op.loc)
            new.result.name_hint = op.result.name_hint
            vals.append(new.result)
        self.vmap[id(op.result)] = vals

    def op_vector_step(self, op: Operation, b: Builder) -> None:
        dist = self.d(op.result)
        t = VectorType(dist.data, index)
        axis = 0 if op.result.type.shape[1] == 1 else 1
        vals = []
        for blk in dist.blocks():
            v = b.create("vector.step", [], [t], loc=op.loc).result
            off = self.block_offsets(dist, b, blk)[axis]
            if off is not None:
                s = b.create("vector.splat", [off], [t], loc=op.loc).result
                v = b.create("arith.addi", [v, s], [t], loc=op.loc).result
            vals.append(v)
        self.vmap[id(op.result)] = vals

    def op_scf_for(self, op: Operation, b: Builder) -> None:
        lb, ub, step, *inits = op.operands
        body = op.regions[0].block
        flat_inits, counts = [], []
        for v in inits:
            vs = self.m(v)
            flat_inits += vs
            counts.append(len(vs))
        nbody = Block([index] + [v.type for v in flat_inits],
                      [body.args[0].name_hint] + [a.name_hint for a, c in zip(body.args[1:], counts) for _ in range(c)])
        self.vmap[id(body.args[0])] = [nbody.args[0]]
        pos = 1
        for a, c in zip(body.args[1:], counts):
            self.vmap[id(a)] = nbody.args[pos:pos + c]
            if isinstance(a.type, (VectorType, TileType)):
                self.dist[id(a)] = self.d(inits[a.index - 1])
            pos += c
        new = b.create("scf.for", [self.m(lb)[0], self.m(ub)[0], self.m(step)[0], *flat_inits],
                       [v.type for v in flat_inits], dict(op.attributes), [Region([nbody])], loc=op.loc)
        bb = Builder.at_end(nbody)
        bb.verify = False
        self.walk(body.ops[:-1], bb)
        y = body.terminator
        flat_y = [x for v in y.operands for x in self.m(v)]
        if [v.type for v in flat_y] != [v.type for v in flat_inits]:
            raise CompilerError("loop-carried values change their distribution inside the loop", op)
        bb.create("scf.yield", flat_y, [], loc=y.loc)
        pos = 0
        for r, c, v in zip(op.results, counts, inits):
            self.vmap[id(r)] = new.results[pos:pos + c]
            for nr in new.results[pos:pos + c]:
                nr.name_hint = r.name_hint
            if isinstance(r.type, (VectorType, TileType)):
                self.dist[id(r)] = self.d(v)
            pos += c

    def op_xetile_tile_mma(self, op: Operation, b: Builder) -> None:
        a, bm = op.operands[:2]
        c = op.operands[2] if len(op.operands) == 3 else None
        dc, da, db = self.d(op.result), self.d(a), self.d(bm)
        if da.nb[0] != dc.nb[0] or db.nb[1] != dc.nb[1] or da.nb[1] != db.nb[0] or \
                da.data[0] != dc.data[0] or db.data[1] != dc.data[1] or da.data[1] != db.data[0]:
            raise CompilerError(f"tile_mma operand layouts do not match the result's ({da.layout}, "
                                f"{db.layout} -> {dc.layout})", op)
        if da.layout.sg_layout[1] > 1 and not da.shared(1) or db.layout.sg_layout[0] > 1 and not db.shared(0):
            raise CompilerError("tile_mma with K split across subgroups needs a cross-subgroup "
                                "reduction; not supported", op)
        rt = VectorType(dc.data, op.result.type.dtype)
        vals = []
        for i, j in dc.blocks():
            acc = self.m(c)[i * dc.nb[1] + j] if c is not None else None
            for k in range(da.nb[1]):
                ops = [self.m(a)[i * da.nb[1] + k], self.m(bm)[k * db.nb[1] + j]] + ([acc] if acc is not None else [])
                acc = b.create(op.name, ops, [rt], self._attrs(op), loc=op.loc).result
            acc.name_hint = op.result.name_hint
            vals.append(acc)
        self.vmap[id(op.result)] = vals

    def op_xetile_tile_reduce(self, op: Operation, b: Builder) -> None:
        src = op.operands[0]
        ds, dr = self.d(src), self.d(op.result)
        dim = op.attributes["dims"][0]
        o = 1 - dim
        attrs = self._attrs(op)
        cross = ds.layout.sg_layout[dim] > 1 and not ds.shared(dim)
        if cross and (_key(Layout(dr.layout.sg_layout, None, order=dr.layout.order)) !=
                      _key(Layout(ds.layout.sg_layout, None, order=ds.layout.order))
                      or dr.data[o] != ds.data[o] or dr.nb[o] != ds.nb[o]):
            raise CompilerError(f"tile_reduce over dim {dim} split across subgroups by {ds.layout} "
                                f"with result layout {dr.layout}: the result must keep the source's "
                                f"sg_layout and sg_data in dim {o}; insert a convert_layout", op)
        et = op.result.type.dtype
        comb = _REDUCE_COMBINE.get((op.attributes["kind"], et.is_float))
        st = VectorType(ds.data, et)
        rt = VectorType(dr.data, et)
        partials = []
        for blk in dr.blocks():
            parts = []
            for k in range(ds.nb[dim]):
                sb = list(blk)
                sb[dim] = k
                parts.append(self.m(src)[sb[0] * ds.nb[1] + sb[1]])
            acc = parts[0]
            for p in parts[1:]:
                acc = b.create(comb, [acc, p], [st], loc=op.loc).result
            r = b.create(op.name, [acc], [rt], dict(attrs), loc=op.loc).result
            r.name_hint = op.result.name_hint
            partials.append(r)
        if cross:
            partials = self._combine_partials(op, ds, dr, partials, b)
        self.vmap[id(op.result)] = partials

    def _combine_partials(self, op: Operation, ds: _Dist, dr: _Dist, partials: list[Value],
                          b: Builder) -> list[Value]:
        """The reduced dim is split over L subgroups: each subgroup's partial goes to SLM at its
        coordinate along that dim, then every subgroup reads the L partials of its blocks and
        reduces them in coordinate order (the same order everywhere: identical results)."""
        dim = op.attributes["dims"][0]
        L = ds.layout.sg_layout[dim]
        et = op.result.type.dtype
        shape = list(op.result.type.shape)
        shape[dim] = L
        buf = self.slm_buffer(tuple(shape), et, op)
        coord = self.coords(ds.layout, b)[dim]
        self.barrier(b, op)
        for blk, p in zip(dr.blocks(), partials):
            offs = self.offsets(dr, b, blk)
            offs[dim] = coord
            b.create("gpu.slm_store", [p, buf, *offs], [], loc=op.loc)
        self.barrier(b, op)
        whole = list(dr.data)
        whole[dim] = L
        out = []
        for blk in dr.blocks():
            offs = self.offsets(dr, b, blk)
            offs[dim] = self.const(0)
            v = b.create("gpu.slm_load", [buf, *offs], [VectorType(tuple(whole), et)], loc=op.loc).result
            r = b.create(op.name, [v], [VectorType(dr.data, et)],
                         {"kind": op.attributes["kind"], "dims": [dim]}, loc=op.loc).result
            r.name_hint = op.result.name_hint
            out.append(r)
        return out

    # --- data exchange through shared local memory --------------------------------------------
    def slm_buffer(self, shape, dtype, op: Operation) -> Value:
        if dtype.bitwidth == 1:
            raise CompilerError(f"{op.name} moves i1 values between subgroups; convert them to "
                                f"an integer type first", op)
        eb = Builder(self.fn.entry, 0)
        eb.verify = False
        return eb.create("gpu.slm_alloc", [], [gpu.SlmType(tuple(shape), dtype)], loc=op.loc).result

    def barrier(self, b: Builder, op: Operation) -> None:
        b.create("gpu.barrier", [], [], loc=op.loc)

    def offsets(self, dist: _Dist, b: Builder, blk) -> list[Value]:
        return [o if o is not None else self.const(0) for o in self.block_offsets(dist, b, blk)]

    def slm_put(self, v: Value, buf: Value, b: Builder, op: Operation) -> None:
        """Every subgroup writes its blocks of the workgroup value ``v`` into ``buf`` (subgroups
        sharing data write the same values), between barriers: the first keeps earlier readers
        of ``buf`` (a previous loop iteration) from seeing the new data, the second publishes."""
        dist = self.d(v)
        self.barrier(b, op)
        for blk, x in zip(dist.blocks(), self.m(v)):
            b.create("gpu.slm_store", [x, buf, *self.offsets(dist, b, blk)], [], loc=op.loc)
        self.barrier(b, op)

    def op_xetile_tile_broadcast(self, op: Operation, b: Builder) -> None:
        src = op.operands[0]
        ds, dr = self.d(src), self.d(op.result)
        dims = op.attributes["dims"]
        for d in range(2):
            if d not in dims and (ds.data[d] != dr.data[d] or ds.nb[d] != dr.nb[d]):
                raise CompilerError(f"tile_broadcast source layout {ds.layout} does not match the "
                                    f"result's {dr.layout}", op)
        rt = VectorType(dr.data, op.result.type.dtype)
        vals = []
        for i, j in dr.blocks():
            si, sj = (0 if 0 in dims else i), (0 if 1 in dims else j)
            r = b.create(op.name, [self.m(src)[si * ds.nb[1] + sj]], [rt], self._attrs(op), loc=op.loc).result
            vals.append(r)
        self.vmap[id(op.result)] = vals

    def op_xetile_tile_transpose(self, op: Operation, b: Builder) -> None:
        """Through SLM: the source blocks are written as they are, the result blocks read as
        transposed windows (result block (r0, c0) of [h, w] is buffer[c0:c0+w, r0:r0+h].T), so
        any pair of source and result layouts works, within or across subgroups."""
        src = op.operands[0]
        dr = self.d(op.result)
        buf = self.slm_buffer(src.type.shape, src.type.dtype, op)
        self.slm_put(src, buf, b, op)
        rt = VectorType(dr.data, op.result.type.dtype)
        vals = []
        for blk in dr.blocks():
            r0, c0 = self.offsets(dr, b, blk)
            v = b.create("gpu.slm_load", [buf, c0, r0], [rt], {"transpose": True}, loc=op.loc).result
            v.name_hint = op.result.name_hint
            vals.append(v)
        self.vmap[id(op.result)] = vals

    def op_xetile_convert_layout(self, op: Operation, b: Builder) -> None:
        src = op.operands[0]
        ds, dr = self.d(src), self.d(op.result)
        if ((ds.nb, ds.data) == (dr.nb, dr.data) and (_key(ds.layout) == _key(dr.layout) or self.n == 1)
                and not _feeds_mma_from_registers(op)):
            self.vmap[id(op.result)] = self.m(src)
            return
        buf = self.slm_buffer(src.type.shape, src.type.dtype, op)
        self.slm_put(src, buf, b, op)
        rt = VectorType(dr.data, op.result.type.dtype)
        vals = []
        for blk in dr.blocks():
            v = b.create("gpu.slm_load", [buf, *self.offsets(dr, b, blk)], [rt], loc=op.loc).result
            v.name_hint = op.result.name_hint
            vals.append(v)
        self.vmap[id(op.result)] = vals


def _feeds_mma_from_registers(op: Operation) -> bool:
    """A convert_layout of a computed value (not a load) whose result is a tile_mma A/B operand
    always goes through SLM, even to the same layout: on DPAS targets that read is what blocks
    and packs the operand for the DPAS (e.g. FlashAttention's probabilities P in P @ V)."""
    src = getattr(op.operands[0], "op", None)
    if src is not None and src.name in ("xetile.load_tile", "gpu.slm_load"):
        return False
    return any(user.name == "xetile.tile_mma" and i < 2 for user, i in op.result.uses)


def distribute_to_subgroups(fn: Function) -> Function:
    """xetile-wg (with layouts, see propagate_layouts) -> xetile-sg (level = "subgroup")."""
    return _Distributor(fn).run()
