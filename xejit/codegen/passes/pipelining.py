"""Software pipelining of k-loops: cooperative prefetch ``num_stages`` iterations ahead.

Input and output: ``xetile-wg`` with layouts (after :func:`propagate_layouts`), for targets with
2D block IO. For every ``scf.for`` that loads a loop-carried tile moved by ``update_tile_offset``
with loop-invariant (or constant) deltas, created by an ``init_tile`` outside the loop, and that
holds no ``prefetch_tile`` written by the user, the pass adds the XeTile RFC's cooperative
prefetch (appendix 2.1):

* a prefetch tile at the same position with its own layout, :func:`prefetch_layout`: the
  workgroup tile split over *all* subgroups in blocks 64 bytes wide, so every byte is prefetched
  once per workgroup (the load's layout usually has several subgroups sharing data: A is shared
  along N, B along M);
* before the loop, it is prefetched ``num_stages`` times, advancing by the loop's deltas after
  each (iterations 0 .. S-1); in the loop, it is a new loop-carried tile prefetched and advanced,
  so iteration i prefetches the tile of iteration i + S.

Prefetches have no effect on values: the interpreter results before and after are identical.

Example:
    >>> str(prefetch_layout((256, 32), 2, 32)), str(prefetch_layout((32, 256), 2, 32))
    ('#xetile.wg_map<sg_layout = [32, 1], sg_data = [8, 32]>', '#xetile.wg_map<sg_layout = [4, 8], sg_data = [8, 32]>')
"""
from __future__ import annotations

import math

from ...ir.core import Block, Builder, Function, Layout, Operation, Region, TileType, Value


#: Prefetch blocks of fewer rows cost a message each for a line or two (decode's A tile: the same
#: 8 rows for every workgroup, so cached after the first): not prefetched. Each prefetch in a
#: k-loop is a send, a coordinate and, on pvc, 3 no-op reads of its payload (IGC's insertPVCWA):
#: pvc 8x256x64/8sg fp16 33 -> 28 instructions for 8 DPAS (benchmarks/bench_device_code.py).
MIN_PREFETCH_ROWS = 4

#: IGC's no-op reads of a prefetch's payload before each rewrite of it on targets with
#: ``BlockIOLimits.payload_war_workaround`` (pvc: visa ``SWSB::insertPVCWA``), per message a k-step
PREFETCH_WAR_READS = 3


def prefetch_layout(shape: tuple[int, int], elem_bytes: int, n: int) -> Layout | None:
    """Cooperative prefetch layout of a [R, C] tile over ``n`` subgroups: blocks 64 bytes wide (or
    the tile's width), the column blocks first, the rest of the subgroups over the rows. None when
    the tile does not split evenly into n such blocks, or into blocks of at least
    ``MIN_PREFETCH_ROWS`` rows."""
    R, C = shape
    w = min(C, max(1, 64 // elem_bytes))
    if C % w:
        return None
    l1 = math.gcd(n, C // w)
    l0 = n // l1
    if R % l0:
        return None
    d0 = R // l0
    if d0 < MIN_PREFETCH_ROWS or d0 < 8 and d0 & (d0 - 1) or d0 > 8 and d0 % 8:   # (blocking's register-block rule)
        return None
    return Layout((l0, l1), (d0, C // l1))


def split_prefetch(shapes: list[tuple[int, int]], elem_bytes: int, n: int) -> list[Layout] | None:
    """Layouts that prefetch all of ``shapes`` (row-major [R, C] tiles of one k-step) with one
    message per subgroup: tile i in blocks of h rows x 64 bytes, issued by a range of the ``n``
    subgroups of its own (``subgroups = [lo, hi]``; the layout repeats its blocks over the other
    subgroups, which skip it). h is the tallest of 32, 16, 8 rows whose blocks add up to exactly
    ``n``; None when none does. A k-step of the 256x256x64 fp16 GEMM over 32 subgroups: A's 16
    blocks of 32 rows by subgroups 0-15, B's by 16-31, instead of two 1 KB prefetches per
    subgroup; 128x128x32 over 16: 16-row blocks, A's 8 by subgroups 0-7, B's by 8-15."""
    w = max(1, 64 // elem_bytes)
    for h in (32, 16, 8):
        if h < MIN_PREFETCH_ROWS:
            break
        out, total = [], 0
        for R, C in shapes:
            if R % h or C % w or n % (C // w):
                break
            total += R // h * (C // w)
            out.append(Layout((n // (C // w), C // w), (h, w)))
        else:
            if total == n:
                return out
    return None


def covers(layout: Layout, shape: tuple[int, int], subgroups: list[int]) -> bool:
    """Whether the subgroups ``lo .. hi - 1`` of ``layout`` (subgroup s at block row s // L1,
    column s % L1, both repeating over the tile) issue each of ``shape``'s blocks exactly once."""
    (_, l1), (d0, d1) = layout.sg_layout, layout.sg_data
    got = sorted((s // l1 * d0 % shape[0], s % l1 * d1 % shape[1]) for s in range(*subgroups))
    return got == [(r, c) for r in range(0, shape[0], d0) for c in range(0, shape[1], d1)]


def plan(tiles: list[tuple[tuple[int, int], int, bool]], n: int,
         split: bool = False) -> list[tuple[Layout | None, list[int] | None]]:
    """The cooperative prefetch of a k-step's tiles, each ``(shape, element bytes, column-major)``,
    over ``n`` subgroups: per tile its layout (None: not prefetched) and the subgroup range that
    issues it (``split``: targets whose payload rewrites are expensive, :func:`split_prefetch`),
    or None for all. A column-major tile is split in its memory's blocks (h rows of N x 64 bytes
    of K), laid out with its N blocks fastest so that its range meets each block once."""
    lays = []
    for shape, eb, col in tiles:
        lay = prefetch_layout(shape[::-1] if col else shape, eb, n)
        lays.append(Layout(lay.sg_layout[::-1], lay.sg_data[::-1]) if col and lay is not None else lay)
    ranges: list[list[int] | None] = [None] * len(tiles)
    live = [i for i, lay in enumerate(lays) if lay is not None]
    if not (split and len(live) > 1 and len({tiles[i][1] for i in live}) == 1):
        return list(zip(lays, ranges))
    mem = [tiles[i][0][::-1] if tiles[i][2] else tiles[i][0] for i in live]
    split_lays = split_prefetch(mem, tiles[live[0]][1], n)
    if split_lays is None:
        return list(zip(lays, ranges))
    out, lo = {}, 0
    for i, lay, (rows, cols) in zip(live, split_lays, mem):
        h, w = lay.sg_data
        cnt = rows // h * (cols // w)
        if tiles[i][2]:
            if n % (rows // h):
                return list(zip(lays, ranges))
            lay = Layout((n // (rows // h), rows // h), (w, h))
        if not covers(lay, tiles[i][0], [lo, lo + cnt]):
            return list(zip(lays, ranges))
        out[i] = (lay, [lo, lo + cnt])
        lo += cnt
    for i, (lay, rng) in out.items():
        lays[i], ranges[i] = lay, rng
    return list(zip(lays, ranges))


def messages_per_subgroup(tiles: list[tuple[tuple[int, int], int, bool]], n: int, split: bool = False) -> int:
    """Prefetch messages a subgroup issues per k-step in the fast k-loop for :func:`plan`'s
    prefetches: a split pair is one (the XeGPU lowering gives it one payload, ``lower_xegpu``
    ``merged_prefetch``), any other tile its subgroup block's 32-row x 64-byte blocks."""
    out = 0
    planned = plan(tiles, n, split)
    ranged = sum(1 for lay, rng in planned if lay is not None and rng is not None)
    out += 1 if ranged == 2 else ranged
    for (shape, eb, col), (lay, rng) in zip(tiles, planned):
        if lay is not None and rng is None:
            rows, cols = lay.sg_data[::-1] if col else lay.sg_data
            out += -(-rows // 32) * -(-cols * eb // 64)
    return out


def _loop_invariant(v: Value, loop: Operation) -> bool:
    owner = getattr(v, "op", None)
    if owner is None:           # block argument
        return v.block is not loop.regions[0].block
    p = owner
    while p is not None:
        if p is loop:
            return False
        blk = p.parent
        p = blk.parent.parent if blk is not None and blk.parent is not None else None
    return True


def _is_const(v: Value) -> bool:
    owner = getattr(v, "op", None)
    return owner is not None and owner.name == "arith.constant" and not owner.operands


def _candidates(loop: Operation) -> list[tuple[int, Operation, Operation]]:
    """(iter_arg index, update op, init_tile op) of each loaded tile advanced by invariant deltas."""
    body = loop.regions[0].block
    term = body.terminator
    out = []
    for k, arg in enumerate(body.args[1:]):
        t = arg.type
        if not isinstance(t, TileType) or t.scatter or len(t.shape) != 2:
            continue
        if not any(u.name == "xetile.load_tile" for u, _ in arg.uses):
            continue
        y = term.operands[k]
        upd = getattr(y, "op", None)
        if upd is None or upd.name != "xetile.update_tile_offset" or upd.operands[0] is not arg:
            continue
        init = getattr(loop.operands[3 + k], "op", None)
        if init is None or init.name != "xetile.init_tile" or not _loop_invariant(init.result, loop):
            continue
        if all(_loop_invariant(d, loop) or _is_const(d) for d in upd.operands[1:]):
            out.append((k, upd, init))
    return out


def _pipeline(loop: Operation, stages: int, n: int, split: bool = False) -> int:
    body = loop.regions[0].block
    if any(op.name == "xetile.prefetch_tile" for op in body.ops):
        return 0   # the user prefetches: keep theirs
    found = _candidates(loop)
    tiles = [(init.result.type.shape, init.result.type.dtype.itemsize,
              getattr(init.operands[0].type, "rank", 0) == 2 and tuple(init.operands[0].type.order) == (0, 1))
             for _, _, init in found]
    cands, ranges = [], []
    for (k, upd, init), (lay, rng) in zip(found, plan(tiles, n, split)):
        t: TileType = init.result.type
        if lay is not None:
            cands.append((upd, init, TileType(t.shape, t.dtype, t.order, lay, False)))
            ranges.append(rng)
    if not cands:
        return 0
    parent = loop.parent
    pre = Builder(parent, parent.ops.index(loop))
    new_inits = []
    for (upd, init, pt), rng in zip(cands, ranges):
        attrs = {"subgroups": rng} if rng else {}
        # marked, so CSE does not merge it with the loaded tile where their subgroup tiles agree
        # (decode): merged, it took the load's blocks -- column-major B's one DPAS block per
        # transposed message: int8 8x512x64/8sg 8 prefetches a k-step, lnl/bmg 45 -> 31
        # instructions for 8 DPAS, pvc 54 -> 41; plain 64-byte blocks of its own now: 2
        p = pre.create("xetile.init_tile", list(init.operands), [pt],
                       {**{k: v for k, v in init.attributes.items() if k != "layout"}, "prefetch": True},
                       loc=init.loc).result
        p.name_hint = "pf"
        dr, dc = (x if _loop_invariant(x, loop) else
                  pre.create("arith.constant", [], [x.type], dict(x.op.attributes), loc=loop.loc).result
                  for x in upd.operands[1:])
        for _ in range(stages):
            pre.create("xetile.prefetch_tile", [p], [], dict(attrs), loc=loop.loc)
            p = pre.create("xetile.update_tile_offset", [p, dr, dc], [pt], loc=loop.loc).result
        new_inits.append(p)
    # rebuild the loop with the extra carried prefetch tiles
    nb = Block([a.type for a in body.args] + [d.type for d in new_inits],
               [a.name_hint for a in body.args] + ["pf"] * len(new_inits))
    for a, na in zip(body.args, nb.args):
        a.replace_all_uses_with(na)
    term = body.terminator
    for op in list(body.ops):
        body.ops.remove(op)
        op.parent = None
        if op is not term:
            nb.append(op)
    extra_yield = []
    for (upd, _, pt), rng, a in zip(cands, ranges, nb.args[len(body.args):]):
        bb = Builder.before(upd)   # after the deltas, which may be defined in the loop
        bb.create("xetile.prefetch_tile", [a], [], {"subgroups": rng} if rng else {}, loc=loop.loc)
        extra_yield.append(bb.create("xetile.update_tile_offset", [a, *upd.operands[1:]], [pt],
                                     loc=loop.loc).result)
    ys = list(term.operands)
    for i in range(len(term.operands)):
        term.operands[i].uses.remove((term, i))
    Builder.at_end(nb).create("scf.yield", ys + extra_yield, [], loc=term.loc)
    new = Operation("scf.for", list(loop.operands) + new_inits,
                    [r.type for r in loop.results] + [d.type for d in new_inits],
                    dict(loop.attributes), [Region([nb])], loop.loc)
    idx = parent.ops.index(loop)
    for r, nr in zip(loop.results, new.results):
        r.replace_all_uses_with(nr)
    loop.erase()
    parent.insert(idx, new)
    return len(cands)


def run(fn: Function, num_stages: int, target=None) -> Function:
    """xetile-wg (with layouts) -> xetile-wg with cooperative prefetches ``num_stages`` iterations
    ahead (in place; returns ``fn``). No-op for ``num_stages < 1`` and targets without 2D block IO."""
    if num_stages is None or num_stages < 1:
        return fn
    if target is not None and target.block_io is None:
        return fn
    n = fn.attributes.get("num_subgroups") or 1
    split = target is not None and target.block_io.payload_war_workaround
    for loop in [op for op in fn.walk() if op.name == "scf.for"]:
        _pipeline(loop, int(num_stages), n, split)
    return fn


__all__ = ["PREFETCH_WAR_READS", "covers", "messages_per_subgroup", "plan", "prefetch_layout", "run", "split_prefetch"]
