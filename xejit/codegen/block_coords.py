"""2D block coordinates: the i32 (x, y) of a block message, from xejit's i64 tile coordinates.

A 2D block message takes its block's (x, y) as signed 32-bit values, the surfaces it accepts are
narrower than ``2**24`` (``targets.BlockIO.max_surface``), and it reads zeros / drops writes out
of bounds. A tile coordinate that does not fit in 32 bits therefore must not be truncated (row
``2**32 + r`` would become row ``r``): :func:`clamp` maps every coordinate outside
``(-FAR, FAR)`` to ``-FAR`` or ``FAR`` -- out of bounds of every surface, and still out of bounds
after moves that add up to less than ``FAR - 2**24`` in either direction (also after the shift
by <= 2 that converts x to a block's unit). The clamp is done where a coordinate enters i32:
when a descriptor is created and on moves by anything but a small constant; moves by small
constants are plain 32-bit adds. In a k-loop the moves add up: the lowering's fast loop version
runs only when the loop's span keeps the total under :data:`LOOP_DRIFT` (checked once, before
the loop, with the surface checks it is versioned on).

:func:`loop_steps` finds the descriptors a loop moves by a constant multiple of its step each
iteration, so their coordinates can be computed from the loop's own counter (one add per
block message, where IGC writes the payload's field) instead of being carried and moved.

:func:`own_surface` gives such a descriptor a surface of its own, based at its first block: IGC
(its ``Decompose2DBlockFuncsWithHoisting`` pass) puts the 2D block loads of one surface whose
coordinates differ by constants -- the K-slices of a k-step, the row blocks of a tile -- on one
address payload with immediate offsets, which pvc's block messages lack: each such load then
copies the payload and adds the offset (two instructions), and rewriting the shared payload
while an earlier load may still read it costs pvc four more (IGC's ``insertPVCWA``).

Example:
    >>> from llvmlite import ir
    >>> b = ir.IRBuilder(ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []), "f").append_basic_block())
    >>> str(clamp(b, ir.Constant(ir.IntType(64), 2**32 + 3)).type)
    'i32'
"""
from __future__ import annotations

from llvmlite import ir

from ..ir.core import BlockArgument, Operation, OpResult, Value

__all__ = ["FAR", "LOOP_DRIFT", "SMALL_STEP", "clamp", "loop_steps", "own_surface", "split_small_add"]

I32, I64 = ir.IntType(32), ir.IntType(64)
#: where a coordinate that does not fit is put: out of bounds of any surface (< 2**24), with
#: room for a drift of FAR - 2**24 and a shift left by 2 (x in 8-bit units of 32-bit data)
FAR = 2**28
#: the total move a loop's fast version allows a descriptor (its span times the move per step)
LOOP_DRIFT = 2**27
#: constant moves up to this size are 32-bit adds (a far coordinate stays far for 2**8 of them
#: even outside the loops whose drift is checked)
SMALL_STEP = 2**19


def clamp(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """``v`` (i64) as i32, a value outside (-FAR, FAR) replaced by -FAR / FAR."""
    if isinstance(v, ir.Constant) and isinstance(v.constant, int):
        return I32(max(-FAR, min(FAR, v.constant)))
    v = b.select(b.icmp_signed("<", v, I64(FAR)), v, I64(FAR))
    v = b.select(b.icmp_signed(">", v, I64(-FAR)), v, I64(-FAR))
    return b.trunc(v, I32)


def _int_const(v: Value, env: dict) -> int | None:
    low = env.get(id(v))
    if isinstance(low, ir.Constant) and isinstance(low.constant, int):
        return low.constant
    if isinstance(v, OpResult) and v.op.name == "arith.constant" and isinstance(v.op.attributes.get("value"), int):
        return v.op.attributes["value"]
    return None


def loop_steps(op: Operation, step: int, env: dict) -> dict[int, tuple[int, int]]:
    """For the ``scf.for`` ``op`` with the constant ``step``: {index of an iter_arg: (rows,
    cols) it moves per unit of the loop's counter} for the descriptors the body yields moved
    from themselves by constants (a chain of ``xegpu.update_nd_offset``) that are multiples of
    ``step``. ``env`` maps values lowered already (the constants defined before the loop)."""
    body = op.regions[0].block
    yld = body.ops[-1]
    out: dict[int, tuple[int, int]] = {}
    if yld.name != "scf.yield":
        return out
    for j, v in enumerate(yld.operands):
        dr = dc = 0
        while isinstance(v, OpResult) and v.op.name == "xegpu.update_nd_offset":
            r, c = (_int_const(x, env) for x in v.op.operands[1:3])
            if r is None or c is None:
                break
            dr, dc, v = dr + r, dc + c, v.op.operands[0]
        if (isinstance(v, BlockArgument) and v.block is body and v.index == j + 1
                and dr % step == 0 and dc % step == 0):
            out[j] = (dr // step, dc // step)
    return out


def own_surface(b: ir.IRBuilder, surf: tuple, x0: ir.Value, y0: ir.Value, moves: tuple[int, int],
                elem_bytes: int, min_width: int) -> tuple[tuple, ir.Value, ir.Value, tuple]:
    """The surface ``surf`` = (64-byte aligned base, width bytes, height, pitch bytes (i32), ...)
    moved to the block at (``x0`` elements, ``y0`` rows) that a loop then moves by ``moves`` =
    (rows, cols) >= 0 per step: (that surface, x0 and y0 on it, the shift (elements, rows)).

    The base moves right by the whole 64-byte units left of ``x0`` and down by ``y0`` rows when
    that keeps it 64-byte aligned; the width and height shrink by as much. The block reads and
    writes the same elements on both surfaces as long as it never moves left or up of where it
    starts; a shift that would break a rule (a coordinate left of / above the surface or far out,
    a width under ``min_width``, an unaligned row offset, a move left or up) is 0 at run time."""
    base, width, height, pitch = surf[:4]
    zero = I32(0)
    sxb = zero
    if moves[1] >= 0 and elem_bytes <= 4:
        # whole 64-byte units left of x0 (x0 < FAR = 2**28: the byte offset fits in i32)
        cand = b.and_(b.mul(x0, I32(elem_bytes)), I32(~63))
        ok = b.and_(b.icmp_signed(">=", x0, zero), b.icmp_signed(">=", b.sub(width, cand), I32(min_width)))
        sxb = b.select(ok, cand, zero)
    sy = zero
    if moves[0] >= 0:
        rowb = b.mul(b.zext(y0, I64), b.zext(pitch, I64))
        ok = b.and_(b.and_(b.icmp_signed(">=", y0, zero), b.icmp_signed("<", y0, height)),
                    b.icmp_unsigned("==", b.and_(rowb, I64(63)), I64(0)))
        sy = b.select(ok, y0, zero)
    off = b.add(b.zext(sxb, I64), b.mul(b.zext(sy, I64), b.zext(pitch, I64)))
    sx = b.lshr(sxb, I32(elem_bytes.bit_length() - 1)) if elem_bytes > 1 else sxb
    new = (b.gep(base, [off], source_etype=ir.IntType(8)), b.sub(width, sxb), b.sub(height, sy)) + tuple(surf[3:])
    return new, b.sub(x0, sx), b.sub(y0, sy), (sx, sy)


def split_small_add(v: ir.Value) -> tuple[ir.Value, int]:
    """(base, d) with ``v`` = base + d for an LLVM ``add`` of a constant ``d`` of at most
    ``SMALL_STEP``, else (v, 0): a block's offset from its neighbours' common coordinate, which a
    block message with immediate offsets takes in its descriptor instead of a payload write."""
    total = 0
    while isinstance(v, ir.Instruction) and v.opname == "add" and len(v.operands) == 2:
        x, d = v.operands
        if not (isinstance(d, ir.Constant) and isinstance(d.constant, int)
                and abs(total + d.constant) <= SMALL_STEP):
            break
        v, total = x, total + d.constant
    return v, total
