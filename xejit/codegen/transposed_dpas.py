"""dg2's fast k-loop computes C^T = B^T A^T: operands from per-lane row loads, not row block reads.

Without 2D block IO every row of A and B was one subgroup block read (and one address) per k-step.
In the transposed product the DPAS B operand is A^T -- lane l holds row l of an 8-row A block,
32 contiguous bytes: one per-lane vector load (a single gather message) per DPAS operand -- and the
DPAS A operand is B^T -- lane l holds rows v*l .. v*l+v-1 of a K-block of B (v = 32 / element
bits), VNNI-packed on registers from v per-lane row loads. The accumulators hold C^T (lane = row
of C): they are transposed (8x8, subgroup shuffles) where the loop is entered and left.

It applies to a k-loop (in its version where every block read is in bounds: ``block_reads``)
whose DPAS all take A and B blocks loaded in the loop from the versioned descriptors and C from
the loop's accumulators or one another, with M = N = the subgroup size (8), and whose loads,
slices and accumulators feed nothing else (:meth:`TransposedDpas.transposed_plan`).

:class:`TransposedDpas` is a mixin of ``lower_xegpu.XeGPULowering``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir

from ..ir.core import Operation
from . import builtins as bi
from . import emulation as emu

I32, I64 = bi.I32, bi.I64

#: 8-column array blocks of B one per-lane row load of B^T covers (at most 16 elements, one SPIR-V
#: vector; also the autotuner's count of these loads: ``block_read_costs.py``)
B_ROW_BLOCKS = 2


@dataclass
class TLoad:
    """A load feeding transposed DPAS: ``role`` "A" (rows of A) or "B" (VNNI rows of B), array
    block ``a`` of the descriptor ``td``; operands are made (once) when a DPAS asks, in ``cache``
    (shared by the array blocks of one load: B^T's row loads cover all of them)."""
    role: str
    td: object
    a: int
    w: int
    count: int
    cache: dict = field(default_factory=dict)
    #: rows may leave the view (the cold k-loop version): bounds-checked loads
    checked: bool = False
    #: B VNNI-packed in SLM by the workgroup (``slm_staging.SPlan``): B^T read from there
    slm: object = None


@dataclass
class TSlice:
    load: TLoad
    group: int     # A: 8-row group; B: K-block


@dataclass
class TPlan:
    acc_positions: list      # iter_arg positions of the accumulators
    loads: dict              # id(load op) -> "A" / "B"
    #: DPAS K-blocks per k-step (A's array blocks), rows of the tallest A load
    k_blocks: int = 1
    a_rows: int = 8
    #: accumulator positions of B blocks vc .. vc + v - 1 of one load (a group of v = 32 / bits):
    #: row-major integer B read unpacked, its DPAS split by column parity (``parity_dpas.py``);
    #: empty: packed B^T
    pairs: list = field(default_factory=list)
    #: column-parity groups on one A slice issued each on its own, the k-step's spreads live
    #: across them (``parity_dpas.spreads_kept``); else together, unit by unit
    spreads_kept: bool = True


def row_elements(b: ir.IRBuilder, base: ir.Value, row: ir.Value, col: ir.Value, s0: ir.Value,
                 width: ir.Value, row_ok: ir.Value, bits: int, nw: int) -> ir.Value:
    """``<nw x i32>``: the 4 * nw bytes of row ``row`` (``s0`` elements apart) from column ``col``
    of ``bits``-bit elements at ``base``, one element at a time, each outside the row's view
    (``row_ok`` false, column outside [0, ``width``)) read as zero, packed low to high."""
    ety = ir.IntType(bits)
    xs = []
    for j in range(4 * nw * 8 // bits):
        c = b.add(col, I64(j))
        ok = b.and_(row_ok, b.and_(b.icmp_signed(">=", c, I64(0)), b.icmp_signed("<", c, width)))
        off = b.select(ok, b.add(b.mul(row, s0), c), I64(0))
        x = b.load(b.gep(base, [off], source_etype=ety), typ=ety)
        xs.append(b.select(ok, x, ir.Constant(ety, 0)))
    per = 32 // bits
    words = ir.Constant(ir.VectorType(I32, nw), None)
    for i in range(nw):
        words = b.insert_element(words, bi.pack_word(b, xs[i * per:(i + 1) * per]), I32(i))
    return words


class TransposedDpas:
    """C^T = B^T A^T in dg2's fast k-loop (a mixin of the XeGPU lowering; module docstring)."""

    tplan: TPlan | None = None

    def transposed_plan(self, op: Operation, reads: dict) -> TPlan | None:
        """The plan when the loop's body is a DPAS chain the transposed product can take."""
        body = op.regions[0].block
        args = body.args[1:]
        covered = {id(args[i]) for i in reads}
        dpas = [o for o in body.ops if o.name == "xegpu.dpas"]
        if not dpas or self.sg != 8 or self.target.dpas.n != 8:
            return None
        loads, accs, chain = {}, set(), {id(o.result) for o in dpas}
        k_blocks, a_rows = 1, 8
        root, block_pos, b_loads = {}, {}, {}

        def source(v, want: str):
            o = getattr(v, "op", None)
            if o is not None and o.name == "vector.extract_strided_slice":
                if any(u.name != "xegpu.dpas" for u, _ in o.result.uses) or o.attributes["offsets"][0] % 8:
                    return None
                o = getattr(o.operands[0], "op", None)
            if o is None or o.name != "xegpu.load_nd" or id(o.operands[0]) not in covered:
                return None
            kind = self.block_read_kind(o.operands[0].type, "packed" if want == "B" else "plain")
            if kind != ("vnni" if want == "B" else "rows32"):
                return None
            if o.attributes.get("transpose") is not None or bool(o.attributes.get("packed")) != (want == "B"):
                return None
            if o.attributes.get("padding", 0) != 0:
                return None
            if any(u.name not in ("vector.extract_strided_slice", "xegpu.dpas") for r in o.results for u, _ in r.uses):
                return None
            return o
        for d in dpas:
            if len(d.operands) != 3 or d.attributes.get("software"):
                return None
            va, vb, vc = d.operands
            if next(iter(va.type.shape)) != 8 or tuple(d.result.type.shape) != (8, 8):
                return None
            la, lb = source(va, "A"), source(vb, "B")
            if la is None or lb is None:
                return None
            t = la.operands[0].type
            if t.shape[1] * t.dtype.bitwidth != 256:     # one K-block per array block of A
                return None
            k_blocks, a_rows = max(k_blocks, len(la.results)), max(a_rows, t.shape[0])
            loads[id(la)], loads[id(lb)] = "A", "B"
            if getattr(vc, "block", None) is body:
                accs.add(args.index(vc))
                root[id(d.result)] = args.index(vc)
            elif id(vc) not in chain:
                return None
            else:
                root[id(d.result)] = root[id(vc)]
            vb_whole = vb.op.operands[0] if vb.op.name == "vector.extract_strided_slice" else vb
            blk = (id(lb), next(i for i, r in enumerate(lb.results) if r is vb_whole))
            b_loads[id(lb)] = lb
            if block_pos.setdefault(blk, root[id(d.result)]) != root[id(d.result)]:
                block_pos[blk] = None
            if any(u.name not in ("xegpu.dpas", "scf.yield") or (u.name == "xegpu.dpas" and i != 2)
                   for u, i in d.result.uses):
                return None
        for p in accs:
            if any(u.name != "xegpu.dpas" or i != 2 for u, i in args[p].uses):
                return None
            if not isinstance(self.env[id(op.operands[3 + p])], ir.Value):
                return None
        return TPlan(sorted(accs), loads, k_blocks, a_rows, self.parity_pairs(b_loads, block_pos, a_rows))

    # -- pieces -----------------------------------------------------------------------------------

    def transpose8(self, v: ir.Value) -> ir.Value:
        """An 8x8 block with lane = column, element = row turned to lane = row, element = column
        (its own inverse): element e of lane l becomes element l of lane e, by broadcasts from
        lane e and a select of the lane's own. (Three butterfly stages with shuffles by l ^ d
        made IGC spill twice as much.)"""
        if isinstance(v, ir.Constant) and isinstance(v.constant, list) and len({str(c) for c in v.constant}) == 1:
            return v       # a splat (or zeroinitializer) is its own transpose
        kind = "f32" if v.type.element == bi.F32 else "i32"

        def body(b: ir.IRBuilder, v: ir.Value, lane: ir.Value) -> ir.Value:
            elems = [b.extract_element(v, I32(k)) for k in range(8)]
            out = ir.Constant(v.type, ir.Undefined)
            for e in range(8):
                pick = None
                for k in range(8):                 # element k of lane e, kept on lane k
                    x = bi.shuffle(b, elems[k], I32(e), kind)
                    pick = x if pick is None else b.select(b.icmp_unsigned("==", lane, I32(k)), x, pick)
                out = b.insert_element(out, pick, I32(e))
            return out
        # (out of line under emulation: 64 shuffles each, twice per 8x8 block of C)
        name = f"__xejit_transpose8_{kind}_{v.type.count}x{v.type.element}"
        return emu.inline_or_outlined(self.b, name, v.type, [v, self.lane], body, self.emulate)

    def _lane_row_ptr(self, td, row: ir.Value, col: ir.Value, eb: int, inbounds: bool = True) -> ir.Value:
        b = self.b
        off = b.add(b.mul(row, td.s0), col)
        return b.gep(td.arr.ptr, [off], inbounds=inbounds, source_etype=ir.IntType(8 * eb))

    def lane_row_words(self, ld: TLoad, lane_row: ir.Value, col_extra: int, nw: int) -> ir.Value:
        """``<nw x i32>``: this lane's row ``row + lane_row`` of the descriptor from column
        ``col + col_extra``, 4 * nw bytes. Checked loads (the cold version): a row outside the
        view reads zeros (a clamped row, then a select), and when the columns leave the view or
        the rows are not 4-byte aligned (uniform test) every element is read on its own."""
        b, td = self.b, ld.td
        eb = td.type.dtype.bitwidth // 8
        row, col = b.add(td.row, lane_row), b.add(td.col, I64(col_extra))
        if not ld.checked:      # (row*s0 + col) uniform, lane_row*s0 per lane and loop-invariant
            off = b.add(b.add(b.mul(td.row, td.s0), col), b.mul(lane_row, td.s0))
            ptr = b.gep(td.arr.ptr, [off], inbounds=True, source_etype=ir.IntType(8 * eb))
            return self._load_vec(ptr, I32, nw)
        n = 4 * nw // eb
        row_ok = b.and_(b.icmp_signed(">=", row, I64(0)), b.icmp_signed("<", row, td.H))
        cols_ok = b.and_(b.icmp_signed(">=", col, I64(0)), b.icmp_signed("<=", b.add(col, I64(n)), td.W))
        start = b.ptrtoint(self._lane_row_ptr(td, I64(0), col, eb, False), I64)
        aligned = b.icmp_signed("==", b.and_(b.or_(start, b.mul(td.s0, I64(eb))), I64(3)), I64(0))
        cols_ok = b.and_(b.and_(cols_ok, aligned), b.icmp_signed(">", td.H, I64(0)))
        zero = ir.Constant(ir.VectorType(I32, nw), None)
        with b.if_else(cols_ok) as (then, otherwise):
            with then:
                safe = b.select(row_ok, row, I64(0))
                fast = b.select(row_ok, self._load_vec(self._lane_row_ptr(td, safe, col, eb), I32, nw), zero)
                fast_bb = b.block
            with otherwise:
                # (out of line under emulation: 32 int8 elements at each of a decode k-step's 32
                # B loads took 4.7 s of the CPU driver's 6 s build of the dg2 int8 8x512x128 pick)
                slow = emu.inline_or_outlined(
                    b, f"__xejit_row_elements_e{8 * eb}_w{nw}", zero.type, [td.arr.ptr, row, col, td.s0, td.W, row_ok],
                    lambda bb, *a: row_elements(bb, *a, 8 * eb, nw), self.emulate)
                slow_bb = b.block
        phi = b.phi(zero.type)
        phi.add_incoming(fast, fast_bb)
        phi.add_incoming(slow, slow_bb)
        return phi

    def _load_vec(self, ptr: ir.Value, el: ir.Type, n: int) -> ir.Value:
        vt = ir.VectorType(el, n)
        ld = self.b.load(self.b.bitcast(ptr, ir.PointerType(vt, addrspace=1)), typ=vt)
        ld.align = 4
        return ld

    def a_transposed(self, s: TSlice) -> ir.Value:
        """A^T as the DPAS B operand: lane l's row 8g + l of array block a, 32 bytes = 8 words."""
        ld = s.load
        key = ("A", ld.a, s.group)
        if key not in ld.cache:
            lane = self.b.zext(self.lane_here(), I64)
            ld.cache[key] = self.lane_row_words(ld, self.b.add(lane, I64(8 * s.group)), ld.a * ld.w, 8)
            self.instructions["per-lane row load (A^T, DPAS B operand)"] += 1
        return ld.cache[key]

    def b_transposed(self, s: TSlice) -> ir.Value:
        """B^T as the DPAS A operand: lane l, word r packs rows v*l .. v*l+v-1 of K-block kb at
        column 8a + r (lower row in lower bits), from v per-lane row loads of all array blocks."""
        ld = s.load
        if ld.slm is not None:
            key = ("slm", s.group, ld.a)
            if key not in ld.cache:
                ld.cache[key] = self.slm_b_operand(ld.slm, s.group, ld.a)
            return ld.cache[key]
        b = self.b
        bits = ld.td.type.dtype.bitwidth
        v = 32 // bits
        per = min(ld.count, B_ROW_BLOCKS)      # array blocks per row load
        chunk, a_in = divmod(ld.a, per)
        key = ("rows", s.group, chunk)
        if key not in ld.cache:
            lane = b.zext(self.lane_here(), I64)
            rows = []
            for t in range(v):
                r = b.add(b.mul(lane, I64(v)), I64(s.group * 8 * v + t))
                words = self.lane_row_words(ld, r, 8 * per * chunk, 8 * per * bits // 32)
                rows.append(b.bitcast(words, ir.VectorType(ir.IntType(bits), 8 * per)))
                self.instructions["per-lane row load (B^T, DPAS A operand)"] += 1
            ld.cache[key] = rows
        rows = ld.cache[key]

        # block a's 8 columns of each row first (a contiguous part: a register offset), then
        # interleaved: 16-bit data as 32-bit words with shifts and masks (IGC: a shift and a bfn
        # per packed register; a 16-bit shufflevector cost 3.5 moves, fp16 23.25 -> 18 instr/DPAS)
        part = ir.Constant(ir.VectorType(I32, 8), [8 * a_in + j for j in range(8)])
        cols = [r if per == 1 else b.shuffle_vector(r, r, part) for r in rows]
        if v == 2:      # on 32-bit words: column pairs (2j, 2j+1) of the two rows -> words 2j, 2j+1
            w0, w1 = (b.bitcast(c, ir.VectorType(I32, 4)) for c in cols[:2])
            v4 = ir.VectorType(I32, 4)
            lo16, hi16, sh = ir.Constant(v4, [0xFFFF] * 4), ir.Constant(v4, [-65536] * 4), ir.Constant(v4, [16] * 4)
            even = b.or_(b.and_(w0, lo16), b.shl(w1, sh))
            odd = b.or_(b.lshr(w0, sh), b.and_(w1, hi16))
            return b.shuffle_vector(even, odd, ir.Constant(ir.VectorType(I32, 8), [0, 4, 1, 5, 2, 6, 3, 7]))
        # 8-bit: word r = 4j + q takes byte q of word j of each of the four rows, row t to byte t:
        # a 4x4 byte transpose in two butterfly stages (bytes of row pairs, then 16-bit halves),
        # a shift and a bfn a register each (byte shufflevectors cost 143 moves for 8 packed
        # registers; four masked shifts per byte about 7.5 a register: int8 8x32 decode 66.25
        # instructions per DPAS)
        v2 = ir.VectorType(I32, 2)
        ws = [b.bitcast(c, v2) for c in cols]

        def c2(x: int) -> ir.Constant:
            return ir.Constant(v2, [x - (1 << 32) if x >= 1 << 31 else x] * 2)

        def merge(x, y, mask: int) -> ir.Value:        # x's bits under mask, y's elsewhere
            return b.or_(b.and_(x, c2(mask)), b.and_(y, c2(~mask & 0xFFFFFFFF)))
        # (lo, hi) of rows (t, t+1): bytes [t.b0, t+1.b0, t.b2, t+1.b2], [t.b1, t+1.b1, t.b3, t+1.b3]
        pairs = [(merge(ws[t], b.shl(ws[t + 1], c2(8)), 0x00FF00FF), merge(b.lshr(ws[t], c2(8)), ws[t + 1], 0x00FF00FF))
                 for t in (0, 2)]
        quads = []
        for q in range(4):          # byte q of the four rows: the low (q even) / high half of pairs
            x, y = pairs[0][q % 2], pairs[1][q % 2]
            quads.append(merge(x, b.shl(y, c2(16)), 0xFFFF) if q < 2 else merge(b.lshr(x, c2(16)), y, 0xFFFF))
        # quads[q] holds byte q of words j = 0, 1: word 4j + q
        s01 = b.shuffle_vector(quads[0], quads[1], ir.Constant(ir.VectorType(I32, 4), [0, 2, 1, 3]))
        s23 = b.shuffle_vector(quads[2], quads[3], ir.Constant(ir.VectorType(I32, 4), [0, 2, 1, 3]))
        return b.shuffle_vector(s01, s23, ir.Constant(ir.VectorType(I32, 8), [0, 1, 4, 5, 2, 3, 6, 7]))

    def transposed_slice(self, x) -> TSlice | None:
        """The operand as a :class:`TSlice` (a load used whole is its group 0), else None."""
        return TSlice(x, 0) if isinstance(x, TLoad) else x if isinstance(x, TSlice) else None
