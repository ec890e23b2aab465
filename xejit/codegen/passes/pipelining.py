"""Software pipelining of k-loops: prefetch the 2D blocks a loop loads ``num_stages`` steps ahead.

For every ``scf.for`` that loads through loop-carried 2D descriptors moved by
``update_nd_offset`` with loop-invariant deltas, and that holds no ``prefetch_nd`` written by the
user, the pass (XeTile RFC appendix, "cooperative prefetch", one subgroup):

* before the loop: a copy of each descriptor is prefetched ``num_stages`` times, advancing by the
  loop's delta after each (iterations 0 .. S-1);
* in the loop: the copy (a new loop-carried value) is prefetched and advanced, so iteration i
  prefetches the blocks of iteration i + S.

Prefetches have no effect on values, so the interpreter results before and after are identical.
Targets without 2D block IO (dg2) get no prefetches.
"""
from __future__ import annotations

from ...ir.core import Block, Builder, Function, Operation, Region, Value
from ...ir.xegpu import TensorDescType


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


def _candidates(loop: Operation) -> list[tuple[int, Operation]]:
    """(iter_arg index, update op) of each loaded descriptor advanced by invariant deltas."""
    body = loop.regions[0].block
    term = body.terminator
    out = []
    for k, arg in enumerate(body.args[1:]):
        if not isinstance(arg.type, TensorDescType) or arg.type.scattered:
            continue
        users = [u for u, _ in arg.uses]
        if not any(u.name == "xegpu.load_nd" for u in users):
            continue
        y = term.operands[k]
        upd = getattr(y, "op", None)
        if upd is None or upd.name != "xegpu.update_nd_offset" or upd.operands[0] is not arg:
            continue
        if all(_loop_invariant(d, loop) or _is_const(d) for d in upd.operands[1:]):
            out.append((k, upd))
    return out


def _pipeline(loop: Operation, stages: int) -> int:
    body = loop.regions[0].block
    if any(op.name == "xegpu.prefetch_nd" for op in body.ops):
        return 0   # the user prefetches: keep theirs
    cands = _candidates(loop)
    if not cands:
        return 0
    parent = loop.parent
    pre = Builder(parent, parent.ops.index(loop), verify=True)
    inits = loop.operands[3:]
    new_inits = []
    for k, upd in cands:
        d = inits[k]
        dr, dc = (x if _loop_invariant(x, loop) else
                  pre.create("arith.constant", [], [x.type], dict(x.op.attributes), loc=loop.loc).result
                  for x in upd.operands[1:])
        for _ in range(stages):
            pre.create("xegpu.prefetch_nd", [d], [], loc=loop.loc)
            d = pre.create("xegpu.update_nd_offset", [d, dr, dc], [d.type], loc=loop.loc).result
        new_inits.append(d)
    # rebuild the loop with the extra carried descriptors
    nb = Block([a.type for a in body.args] + [d.type for d in new_inits],
               [a.name_hint for a in body.args] + ["pf"] * len(new_inits))
    for a, na in zip(body.args, nb.args):
        a.replace_all_uses_with(na)
    term = body.terminator
    ops = list(body.ops)
    for op in ops:
        body.ops.remove(op)
        op.parent = None
        if op is not term:
            nb.append(op)
    extra_yield = []
    for (k, upd), a in zip(cands, nb.args[len(body.args):]):
        bb = Builder.before(upd)   # after the deltas, which may be defined in the loop
        bb.create("xegpu.prefetch_nd", [a], [], loc=loop.loc)
        extra_yield.append(bb.create("xegpu.update_nd_offset", [a, *upd.operands[1:]], [a.type],
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
    """Insert prefetches ``num_stages`` iterations ahead (in place); returns ``fn``."""
    if num_stages is None or num_stages < 1:
        return fn
    if target is not None and target.block_io is None:
        return fn
    loops = [op for op in fn.walk() if op.name == "scf.for"]
    for loop in loops:
        _pipeline(loop, int(num_stages))
    return fn


__all__ = ["run"]
