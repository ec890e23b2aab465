"""Row-major 16-bit B without packing: decode tiles' DPAS split by column parity (dg2).

In the transposed product (``transposed_dpas.py``) the DPAS A operand is B^T, whose 32-bit words
must pair two rows of K (VNNI); row-major B has them a pitch apart, so every B^T register was
packed on registers (a shift and a bfn a register: 16 instructions a DPAS, per DPAS since decode
reads each B element once). Here B is read as it lies: lane l loads 8 words of row k + l (16
columns), which *is* a DPAS A operand -- register j, lane l = columns 2j, 2j+1 of row k + l --
if the reduction runs over (row, half) pairs. The DPAS B operand then holds A^T spread with zeros:
register l, lane m = A[m][k + l] in half p, 0 in the other, so the DPAS keeps only the columns of
parity p: D[j][m] = sum_l B[k + l][2j + p] A[m][k + l]. Two DPAS (p = 0, 1) take the one B load
and cover 16 columns and 8 rows of K: twice the DPAS of the packed form for the same work, but no
packing, one load per 16 x 8 block, and the spread (one instruction a register) shared by every
column block of the subgroup's tile.

The loop carries the accumulators of a pair of 8-column blocks (2c, 2c+1) as the parity halves
E_p (element j = column 16c + 2j + p); they are permuted on the way in and out of the loop. The
lowering takes the IR's pair of DPAS (same A slice, B blocks 2c and 2c + 1 of one load) at the
second of them; the DPAS run in K-block order (``slm_op_order``) so the pair is adjacent.

:class:`ParityDpas` is a mixin of ``lower_xegpu.XeGPULowering`` (with ``TransposedDpas``).
"""
from __future__ import annotations

from llvmlite import ir

from . import builtins as bi
from .transposed_dpas import TSlice

I32, I64 = bi.I32, bi.I64

#: 8-column blocks of a B load below which the packed B^T stays (with 2 the spread of A^T costs
#: what the packing saves, and the DPAS are twice as many)
MIN_BLOCKS = 4


def column_parity(a_rows: int, b_blocks: int, bits: int) -> bool:
    """Whether a transposed k-loop takes row-major B unpacked by column parity: 16-bit B, one
    8-row group of A (decode: the spread is shared by the tile's N / 16 pairs), loads of an even
    number of 8-column blocks, at least :data:`MIN_BLOCKS` (also the autotuner's rule:
    ``block_read_costs.py``)."""
    return bits == 16 and a_rows == 8 and b_blocks >= MIN_BLOCKS and b_blocks % 2 == 0


_EVENS = [2 * j for j in range(8)]
_ODDS = [2 * j + 1 for j in range(8)]
#: the inverse: concat(E_0, E_1) -> the even block's, the odd block's 8 columns
_BACK = ([n // 2 + 8 * (n % 2) for n in range(8)], [4 + n // 2 + 8 * (n % 2) for n in range(8)])


def parity_split(b: ir.IRBuilder, even: ir.Value, odd: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Accumulators of column blocks 2c, 2c+1 (C^T, element = column) as (E_0, E_1)."""
    return (b.shuffle_vector(even, odd, ir.Constant(ir.VectorType(I32, 8), _EVENS)),
            b.shuffle_vector(even, odd, ir.Constant(ir.VectorType(I32, 8), _ODDS)))


def parity_join(b: ir.IRBuilder, e0: ir.Value, e1: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The inverse of :func:`parity_split`."""
    return tuple(b.shuffle_vector(e0, e1, ir.Constant(ir.VectorType(I32, 8), m)) for m in _BACK)


def spread_words(b: ir.IRBuilder, w: ir.Value, shift: ir.Value) -> ir.Value:
    """``<8 x i32>`` of ``w`` (``<4 x i32>``, 16-bit pairs) spread for parity p (``shift`` = 16 p,
    i32): word j's half p to register j (low halves for p = 0, high for 1), its other half to
    register j + 4, each in bits 16 p .. 16 p + 15 and zero elsewhere: one instruction a register
    when ``shift`` is a constant (and / shr / shl / and)."""
    v4 = ir.VectorType(I32, 4)
    s = b.insert_element(ir.Constant(v4, None), shift, I32(0))
    s = b.shuffle_vector(s, ir.Constant(v4, None), ir.Constant(v4, [0] * 4))
    mask = b.shl(ir.Constant(v4, [0xFFFF] * 4), s)
    even = b.and_(b.shl(w, s), mask)
    odd = b.and_(b.lshr(w, b.sub(ir.Constant(v4, [16] * 4), s)), mask)
    return b.shuffle_vector(even, odd, ir.Constant(ir.VectorType(I32, 8), list(range(8))))


class ParityDpas:
    """The column-parity DPAS pairs of the transposed decode loop (module docstring)."""

    #: the first DPAS of each pair, waiting for its second (reset per loop version)
    parity_pending: dict

    @staticmethod
    def parity_pairs(b_loads: dict, block_pos: dict, a_rows: int) -> list:
        """(even, odd) accumulator positions of B blocks 2c, 2c + 1 of each B load when the loop
        takes the column-parity DPAS (:func:`column_parity`, each block a chain of its own), else []."""
        pairs = []
        for lb in b_loads.values():
            n = len(lb.results)
            if not column_parity(a_rows, n, lb.operands[0].type.dtype.bitwidth):
                return []
            pos = [block_pos.get((id(lb), a)) for a in range(n)]
            if None in pos:
                return []
            pairs += [(pos[2 * c], pos[2 * c + 1]) for c in range(n // 2)]
        flat = [p for pr in pairs for p in pr]
        return pairs if len(set(flat)) == len(flat) else []

    def parity_b_rows(self, s: TSlice, chunk: int, half: int) -> ir.Value:
        """``<8 x i32>``: lane l's row 16 g + 8 half + 2 (l % 4) + l // 4 of the B load (K-block g), columns
        16 chunk .. 16 chunk + 15 of its array blocks: the DPAS A operand as it lies."""
        ld = s.load
        key = ("prows", s.group, chunk, half)
        if key not in ld.cache:
            b = self.b
            lane = b.zext(self.lane_here(), I64)
            # lane l reads row 2 (l % 4) + l // 4 of the 8: the spread's registers 0-3 are then the
            # low halves of A^T's words, 4-7 the high ones (contiguous, no interleave)
            perm = b.add(b.shl(b.and_(lane, I64(3)), I64(1)), b.lshr(lane, I64(2)))
            row = b.add(perm, I64(16 * s.group + 8 * half))
            ld.cache[key] = self.lane_row_words(ld, row, 2 * ld.w * chunk, 8)
            self.instructions["per-lane row load (B as the DPAS A operand, column parity)"] += 1
        return ld.cache[key]

    def parity_a_spread(self, s: TSlice, half: int, p: int) -> ir.Value:
        """``<8 x i32>``: register l, lane m = A[m][8 half + r] of the K-block in 16-bit half p,
        zero in the other (the DPAS B operand keeping columns of parity p), r = 2 l for l < 4,
        2 (l - 4) + 1 above (the rows ``parity_b_rows`` gives lane l)."""
        ld = s.load
        key = ("spread", ld.a, s.group, half, p)
        if key not in ld.cache:
            b = self.b
            if self.dplan is not None and self.dplan.spread and not ld.checked:
                # staged in SLM by the workgroup (decode_slm.py)
                ld.cache[key] = self.decode_spread_operand(ld.a, half, p)
                return ld.cache[key]
            w = b.shuffle_vector(self.a_transposed(s), ir.Constant(ir.VectorType(I32, 8), None),
                                 ir.Constant(ir.VectorType(I32, 4), [4 * half + i for i in range(4)]))
            ld.cache[key] = spread_words(b, w, I32(16 * p))
            self.instructions["A^T spread by column parity (DPAS B operand)"] += 1
        return ld.cache[key]

    def parity_dpas(self, op, ta: TSlice, tb: TSlice, f: ir.Function) -> None:
        """One of the IR's pair of DPAS on B blocks 2c, 2c + 1: the first waits, the second
        issues the four DPAS (two halves of K, two parities) for both accumulators."""
        b = self.b
        ld = tb.load
        chunk, side = divmod(ld.a, 2)
        key = (id(ld.cache), tb.group, chunk, id(ta.load.cache), ta.load.a, ta.group)
        acc = self.env[id(op.operands[2])]
        other = self.parity_pending.pop(key, None)
        if other is None:
            self.parity_pending[key] = (side, op, acc)
            return
        o_side, o_op, o_acc = other
        assert o_side != side, "a column-parity DPAS pair takes blocks 2c and 2c + 1"
        at, bt, ct = f.function_type.args
        e = [o_acc, acc] if o_side == 0 else [acc, o_acc]
        e = [b.bitcast(x, ct) for x in e]
        for half in (0, 1):
            rows = b.bitcast(self.parity_b_rows(tb, chunk, half), at)
            for p in (0, 1):
                e[p] = bi.call(b, f, [rows, b.bitcast(self.parity_a_spread(ta, half, p), bt), e[p]])
                self.instructions["dpas (column parity: half the columns, 8 rows of K)"] += 1
        rt = self.vec_ty(op.result.type)
        self.env[id(o_op.result)] = b.bitcast(e[o_side], rt)
        self.env[id(op.result)] = b.bitcast(e[side], rt)
