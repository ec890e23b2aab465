"""Row-major int8 B without packing: decode tiles' DPAS split by byte (column) parity (dg2).

In the transposed product (``transposed_dpas.py``) the DPAS A operand is B^T, whose 32-bit words
must hold v = 32 / bits rows of K (VNNI); row-major B has them a pitch apart, so B^T is packed on
registers (int8: 5 instructions a word, 40 a DPAS, per DPAS since decode reads each B element
once). Here B is read as it lies: lane l loads 8 words of row k + l (32 int8 columns), which *is*
a DPAS A operand -- register j, lane l = columns 4j .. 4j + 3 of row k + l -- if the reduction
runs over (row, byte) pairs. The DPAS B operand then holds A^T spread with zeros: register l,
lane m = A[m][k + l] in byte p, 0 in the others, so the DPAS keeps only the columns of parity p:
D[j][m] = sum_l B[k + l][4j + p] A[m][k + l]. Four DPAS (p = 0 .. 3) take the one B load and
cover 32 columns and 8 rows of K -- the work of one packed DPAS -- for one load and no packing.

The DPAS still multiplies every field of B's word, the zeroed ones by zero: exact for integers,
and for float B (:func:`parity_mode` ``"staged-checked"``) exact while B is finite (0 x finite
adds a zero); a float B element's Inf or NaN turns its partner columns into NaN -- in every row,
NaN being sticky -- so a subgroup whose accumulators hold a NaN after the loop runs it again by
an exact path (the cold version, :func:`any_nan`). The spread is staged in SLM by the
workgroup (``decode_slm.py``): lane l reads row k + l and the spread's register l is element l
of the 8 rows of K: element e = field e % v of word e // v of A's row, moved to field p (an and,
a shift, or both: constant shifts and masks). On registers it would cost more than the packing,
but takes fewer registers: the cold (bounds-checked) version, which has no barriers, makes it on
registers (int8 8x64 tiles: packing B^T there spilled 5.6 KB), and for float B keeps only the
parity's fields of B's words (an and a register: no B element meets a zero, so it is exact, and
is what the NaN check runs again; fp16 8x64 tiles packed there spilled 20.7 KB, masked 4.2).

Where a tile has several column groups (8x64 tiles: two) their DPAS share each spread; where the
k-step's spreads do not stay live next to the accumulators (:func:`spreads_kept`) the groups on
one A slice are issued together, unit by unit, one spread load for all of them.

The loop carries the accumulators of a group of v 8-column blocks (vc .. vc + v - 1) as the
parity parts E_p (element j = column 8 v c + v j + p); they are permuted on the way in and out
of the loop. The lowering takes the IR's group of v DPAS (same A slice, B blocks vc ..
vc + v - 1 of one load) at the last of them; the DPAS run in K-block order (``slm_op_order``)
so the group is adjacent.

:class:`ParityDpas` is a mixin of ``lower_xegpu.XeGPULowering`` (with ``TransposedDpas``).
"""
from __future__ import annotations

from llvmlite import ir

from . import builtins as bi
from .passes.common import CompilerError
from .transposed_dpas import TSlice

I32, I64 = bi.I32, bi.I64

#: 8-column blocks of a B load below which B^T stays packed (fewer leave too few column blocks
#: to share the A^T spread's loads; 8-bit B: one group of 4)
MIN_BLOCKS = 4


def ways(bits: int) -> int:
    """Column parities of ``bits``-bit B: elements a 32-bit word (2 for 16-bit, 4 for 8-bit)."""
    return 32 // bits


def parity_mode(a_rows: int, b_blocks: int, bits: int, integer: bool, staged: bool,
                cold: bool = False) -> str | None:
    """How a transposed k-loop takes row-major B (``bits``-bit elements, ``integer``: an integer
    type) loaded as ``b_blocks`` 8-column blocks for ``a_rows`` rows of A: ``"staged"`` -- unpacked,
    its DPAS split by column parity, the A^T spread staged in SLM by the workgroup (``staged``:
    ``decode_slm.py`` can) --, ``"staged-checked"`` (float B) the same with the loop run again
    packed where it left a NaN (:func:`any_nan`), or None (B^T packed). ``cold``: the loop's
    cold (bounds-checked) version of a staged loop: ``"registers"`` (integer B) -- by column
    parity, the spread made on registers from A^T (no barrier there) -- or ``"registers-masked"``
    (float B): the same with B's other fields zeroed for each parity (an and a register), so
    that no B element meets a zero: exact, the path the NaN check runs again. The one rule of
    the lowering, the autotuner and ``block_read_costs.py``.

    * Float B checked: a DPAS A operand word holds all v fields of B's word and the spread zeroes
      only A^T's other fields, so a float B element's Inf or NaN times that zero puts NaN in its
      partner columns (fp16 8x256x16/8sg, b[3, 0] = inf: column 1 NaN); finite B adds zeros,
      integer products are exact.
    * One 8-row group of A (decode: the spread is shared by the tile's column groups), loads of a
      multiple of v = :func:`ways` 8-column blocks, at least :data:`MIN_BLOCKS`.
    * The spread staged: on registers 8-bit B's (about 26 instructions a word of A, 208 a K-block)
      costs more than the packing it saves (5 a word of B^T, 160 a K-block of 8x32 tiles) -- but
      not the registers: the cold version of int8 8x64 tiles (8x512x32/8sg) packed B^T next to
      64 accumulator registers and spilled 5.6 KB, by parity on registers 0."""
    ok = bits in (16, 8) and a_rows == 8 and b_blocks >= MIN_BLOCKS and b_blocks % ways(bits) == 0
    if not (ok and staged):
        return None
    if cold:
        return "registers" if integer else "registers-masked"
    return "staged" if integer else "staged-checked"


#: 8-register operands a staged k-step issues ahead of a parity's DPAS when a unit's column groups
#: take them together (:func:`spreads_kept` false): all v of a unit with one group (int8 8x32
#: tiles: one at a time, Intel's compiler put each in the same registers and waited, 240 -> 216
#: instructions for two k-steps), two with several (int8 8x64 tiles: all four spilled 64 B, one
#: 380 instructions for 64 DPAS, two 322, three 330). The cold version makes each at
#: its DPAS (on registers).
SPREADS_AHEAD_GROUPED = 2


def spreads_kept(acc_registers: int, v: int, k_blocks: int, budget: int) -> bool:
    """Whether a staged k-step keeps its v x v x ``k_blocks`` spread operands (8 registers each)
    live across the tile's column groups, each group's v x v DPAS issued on its own (the spread
    loaded once a k-step): when they fit the ``budget`` registers next to the
    ``acc_registers``. Else the groups' DPAS are issued together unit by unit, a spread loaded
    once and dead after its parity's DPAS. fp16 8x32 tiles at BK=32 (32 + 64 of 112) kept: 184
    instructions for 32 DPAS (grouped 190); int8 8x64 tiles (64 + 128) kept: 19 KB of spill,
    grouped 0. The lowering's rule and the autotuner's (``estimate_gemm``)."""
    return acc_registers + 8 * v * v * k_blocks <= budget


def live_operand_registers(groups: int, v: int, kept: bool) -> int:
    """Registers of B rows and A^T spreads a staged k-step holds at once by the order of
    :meth:`ParityDpas.parity_issue` (``groups`` column groups of v 8-column blocks on an A
    slice; ``kept``: :func:`spreads_kept`), 8 each: kept, a K-block's v x v spreads and one
    group's rows; else with no more groups than parities every group's rows and the spreads
    issued ahead, with more the unit's v spreads and one group's rows. (The cold version holds
    fewer: a spread and a group's rows at a time, float B's masked copy.) The autotuner's count
    (``estimate_gemm``)."""
    if kept:
        return 8 * (v * v + 1)
    if groups > v:
        return 8 * (v + 1)
    return 8 * (groups + (v if groups == 1 else SPREADS_AHEAD_GROUPED))


def any_nan(b: ir.IRBuilder, accs: list, lane: ir.Value) -> ir.Value:
    """i1, the same in every lane of the subgroup: some element of the float vectors ``accs``
    is a NaN in some lane (an or of ``fcmp uno`` and three xor-shuffles; ``lane``: the
    subgroup-local id)."""
    bad = None
    for v in accs:
        u = b.fcmp_unordered("uno", v, v)
        bad = u if bad is None else b.or_(bad, u)
    flag = None
    for i in range(bad.type.count):
        x = b.extract_element(bad, I32(i))
        flag = x if flag is None else b.or_(flag, x)
    word = b.zext(flag, I32)
    for d in (1, 2, 4):
        word = b.or_(word, bi.shuffle(b, word, b.xor(lane, I32(d)), "i32"))
    return b.icmp_unsigned("!=", word, I32(0))


def _concat(b: ir.IRBuilder, vs: list) -> ir.Value:
    """The 8-element vectors ``vs`` (2 or 4) as one vector."""
    n = vs[0].type.count
    while len(vs) > 1:
        vs = [b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, 2 * n), list(range(2 * n))))
              for x, y in zip(vs[::2], vs[1::2])]
        n *= 2
    return vs[0]


def parity_split(b: ir.IRBuilder, blocks: list) -> list:
    """Accumulators of column blocks vc .. vc + v - 1 (C^T, element = column) as (E_0 .. E_v-1):
    E_p's element j is column v j + p of the group."""
    v, whole = len(blocks), _concat(b, list(blocks))
    return [b.shuffle_vector(whole, whole, ir.Constant(ir.VectorType(I32, 8),
                                                        [v * j + p for j in range(8)])) for p in range(v)]


def parity_join(b: ir.IRBuilder, es: list) -> list:
    """The inverse of :func:`parity_split`: block q's element n is column 8q + n."""
    v, whole = len(es), _concat(b, list(es))
    return [b.shuffle_vector(whole, whole, ir.Constant(ir.VectorType(I32, 8),
                                                        [8 * (c % v) + c // v for c in range(8 * q, 8 * q + 8)]))
            for q in range(v)]


def spread_fields(b: ir.IRBuilder, words: list, e0: int, n: int, p: int, bits: int) -> list:
    """Elements ``e0 .. e0 + n - 1`` of ``words`` (i32 values; element e = ``bits``-bit field
    e % v of word e // v) each alone in field p of a word: an and, a shift, or both."""
    v, fm = 32 // bits, (1 << bits) - 1
    mask = I32(fm << (bits * p) if p < v - 1 else -(1 << (bits * p)) if bits * p else fm)
    out = []
    for e in range(e0, e0 + n):
        w, f = words[e // v], e % v
        if f == p:
            out.append(b.and_(w, mask))
        elif f > p:
            x = b.lshr(w, I32(bits * (f - p)))
            out.append(x if f == v - 1 and p == 0 else b.and_(x, mask))
        else:
            x = b.shl(w, I32(bits * (p - f)))
            out.append(x if p == v - 1 and f == 0 else b.and_(x, mask))
    return out


def as_vector(b: ir.IRBuilder, xs: list) -> ir.Value:
    """i32 values as one ``<n x i32>`` (an i32 when n = 1)."""
    if len(xs) == 1:
        return xs[0]
    out = ir.Constant(ir.VectorType(I32, len(xs)), None)
    for i, x in enumerate(xs):
        out = b.insert_element(out, x, I32(i))
    return out


class ParityDpas:
    """The column-parity DPAS groups of the transposed decode loop (module docstring)."""

    #: the first DPAS of each group, waiting for the rest (reset per loop version)
    parity_pending: dict

    @staticmethod
    def parity_pairs(b_loads: dict, block_pos: dict, a_rows: int) -> list:
        """Accumulator positions of B blocks vc .. vc + v - 1 of each B load (v = :func:`ways`)
        when the loop can take the column-parity DPAS with its spread staged (:func:`parity_mode`;
        each block a chain of its own), else []; the lowering drops them where the spread is not
        staged (``parity_kept``)."""
        groups = []
        for lb in b_loads.values():
            n, dt = len(lb.results), lb.operands[0].type.dtype
            if parity_mode(a_rows, n, dt.bitwidth, dt.is_int, staged=True) is None:
                return []
            pos = [block_pos.get((id(lb), a)) for a in range(n)]
            if None in pos:
                return []
            v = ways(dt.bitwidth)
            groups += [tuple(pos[v * c:v * c + v]) for c in range(n // v)]
        flat = [p for g in groups for p in g]
        return groups if len(set(flat)) == len(flat) else []

    @staticmethod
    def parity_kept(b_loads: list, a_rows: int, staged: bool, cold: bool = False) -> bool:
        """Whether the k-loop version whose B loads are ``b_loads`` takes its column-parity groups
        (:func:`parity_mode`, ``staged``: the fast version stages the A^T spread; ``cold``: the
        cold version)."""
        return all(parity_mode(a_rows, len(lb.results), lb.operands[0].type.dtype.bitwidth,
                               lb.operands[0].type.dtype.is_int, staged, cold) is not None for lb in b_loads)

    @staticmethod
    def parity_checked(b_loads: list, a_rows: int) -> bool:
        """Whether the column-parity version of the k-loop whose B loads are ``b_loads`` is run
        again by the exact cold version where it leaves a NaN (float B: :func:`parity_mode`
        ``"staged-checked"``)."""
        return any(parity_mode(a_rows, len(lb.results), lb.operands[0].type.dtype.bitwidth,
                               lb.operands[0].type.dtype.is_int, True) == "staged-checked" for lb in b_loads)

    def parity_b_rows(self, s: TSlice, chunk: int, unit: int, again: int = 0) -> ir.Value:
        """``<8 x i32>``: lane l's row 8 v g + 8 unit + l of the B load (K-block g), columns
        8 v chunk .. 8 v chunk + 8 v - 1 of its array blocks: the DPAS A operand as it lies
        (``again``: read again, a load of its own)."""
        ld = s.load
        key = ("prows", s.group, chunk, unit, again)
        if key not in ld.cache:
            b = self.b
            v = ways(ld.td.type.dtype.bitwidth)
            row = b.add(b.zext(self.lane_here(), I64), I64(8 * v * s.group + 8 * unit))
            ld.cache[key] = self.lane_row_words(ld, row, v * ld.w * chunk, 8)
            self.instructions["per-lane row load (B as the DPAS A operand, column parity)"] += 1
        return ld.cache[key]

    def parity_a_spread(self, s: TSlice, unit: int, p: int) -> ir.Value:
        """``<8 x i32>``: register l, lane m = A[m][8 unit + l] of the K-block in field p, zero
        elsewhere (the DPAS B operand keeping columns of parity p): staged in SLM by the
        workgroup (``decode_slm.py``) in the fast version, made on registers from the lane's
        A^T row in the cold one (:func:`parity_mode` ``"registers"``)."""
        ld = s.load
        key = ("spread", ld.a, s.group, unit, p)
        if key not in ld.cache:
            if self.dplan is not None and self.dplan.spread:
                ld.cache[key] = self.decode_spread_operand(ld.a, unit, p)
            elif ld.checked:
                b, at = self.b, self.a_transposed(s)
                words = [b.extract_element(at, I32(i)) for i in range(8)]
                ld.cache[key] = as_vector(b, spread_fields(b, words, 8 * unit, 8, p, ld.td.type.dtype.bitwidth))
                self.instructions["A^T spread on registers (cold version, column parity)"] += 1
            else:
                raise CompilerError("a fast column-parity k-loop version without the staged A^T spread")
        return ld.cache[key]

    def parity_dpas(self, op, ta: TSlice, tb: TSlice, f: ir.Function) -> None:
        """One of the IR's group of DPAS on B blocks vc .. vc + v - 1: the first ones wait, the
        last issues the group's v x v DPAS (v units of 8 rows of K, v parities) -- or, where the
        k-step's spreads do not stay live across the groups (:func:`spreads_kept`), waits too
        until every group on the same A slice has come, and they issue together."""
        ld = tb.load
        v = ways(ld.td.type.dtype.bitwidth)
        chunk, side = divmod(ld.a, v)
        key = (id(ld.cache), tb.group, chunk, id(ta.load.cache), ta.load.a, ta.group)
        waiting = self.parity_pending.setdefault(key, {})
        if side in waiting:
            raise CompilerError("a column-parity DPAS group takes B blocks vc .. vc + v - 1, each once")
        waiting[side] = (op, self.env[id(op.operands[2])])
        if len(waiting) < v:
            return
        del self.parity_pending[key]
        if self.tplan.spreads_kept:
            self.parity_issue(ta, [(tb, chunk, waiting)], f)
            return
        akey = ("A slice", id(ta.load.cache), ta.load.a, ta.group)
        batch = self.parity_pending.setdefault(akey, [])
        batch.append((tb, chunk, waiting))
        on_a = sum(1 for o in op.parent.ops if o.name == "xegpu.dpas" and o.operands[0] is op.operands[0])
        if len(batch) * v < on_a:
            return
        del self.parity_pending[akey]
        self.parity_issue(ta, batch, f)

    def parity_issue(self, ta: TSlice, batch: list, f: ir.Function) -> None:
        """The v x v DPAS of the column groups of ``batch`` (``(tb, chunk, {side: (op, acc)})``,
        all on A slice ``ta``), unit by unit (8 rows of K): with no more groups than parities
        each group's B rows, then for each parity its spread (loaded once for all the groups)
        and the groups' DPAS -- the staged version issues the spreads ahead of their DPAS (all of
        a unit's with one group, else :data:`SPREADS_AHEAD_GROUPED`), the cold one at their
        DPAS; with more groups (16-bit B of 8x64 tiles: four groups, two parities) the unit's
        spreads, then each group's rows and its DPAS -- in the cold version a parity at a time,
        each group's rows read again for it (fp16 8x512x32/8sg: a unit's rows or spreads live
        beside 64 accumulator registers, 1.1 KB of spill there; 0). In the cold version float
        B's rows are masked to the parity's fields (:func:`parity_mode` ``"registers-masked"``)."""
        b = self.b
        at, bt, ct = f.function_type.args
        v = len(batch[0][2])
        staged = self.dplan is not None and self.dplan.spread
        masked = not staged and not batch[0][0].load.td.type.dtype.is_int
        bits = 32 // v
        es = [[b.bitcast(waiting[q][1], ct) for q in range(v)] for _, _, waiting in batch]

        def dpas(rows: ir.Value, spread: ir.Value, e: list, p: int) -> None:
            if masked:      # only field p of B's words: nothing meets the spread's zeros
                keep = ((1 << bits) - 1) << (bits * p)
                keep = keep - (1 << 32) if keep >= 1 << 31 else keep
                rows = b.and_(rows, ir.Constant(rows.type, [keep] * rows.type.count))
                self.instructions["B's fields of the parity kept (cold version, float B)"] += 1
            e[p] = bi.call(b, f, [b.bitcast(rows, at), spread, e[p]])
            self.instructions["dpas (column parity: 1 / v of the columns, 8 rows of K)"] += 1

        for unit in range(v):
            if len(batch) > v and staged:
                spreads = [b.bitcast(self.parity_a_spread(ta, unit, p), bt) for p in range(v)]
                for (tb, chunk, _), e in zip(batch, es):
                    rows = self.parity_b_rows(tb, chunk, unit)
                    for p in range(v):
                        dpas(rows, spreads[p], e, p)
                continue
            if len(batch) > v:      # the cold version: each group's rows read again a parity
                for p in range(v):
                    spread = b.bitcast(self.parity_a_spread(ta, unit, p), bt)
                    for (tb, chunk, _), e in zip(batch, es):
                        dpas(self.parity_b_rows(tb, chunk, unit, again=p), spread, e, p)
                continue
            ahead = (v if len(batch) == 1 else SPREADS_AHEAD_GROUPED) if staged else 1
            rows = [self.parity_b_rows(tb, chunk, unit) for tb, chunk, _ in batch]
            spreads = [b.bitcast(self.parity_a_spread(ta, unit, p), bt) for p in range(ahead)]
            for p in range(v):
                for e, r in zip(es, rows):
                    dpas(r, spreads[p], e, p)
                if p + ahead < v:
                    spreads.append(b.bitcast(self.parity_a_spread(ta, unit, p + ahead), bt))
        for (_, _, waiting), e in zip(batch, es):
            for q in range(v):
                op = waiting[q][0]
                self.env[id(op.result)] = b.bitcast(e[q], self.vec_ty(op.result.type))
