"""dg2's fast k-loop with B staged in shared local memory, VNNI-packed once per workgroup.

In the transposed product (``transposed_dpas.py``) the DPAS A operand is B^T: lane l's word r
packs rows v*l .. v*l+v-1 of a K-block of B at column r (v = 32 / element bits). Packed from
per-lane row loads, that cost every subgroup two instructions per 32-bit word of its B tile
(fp16 256x128x16/64sg: 32 of the k-loop's 80 instructions, read from Intel's compiler's ISA),
although the subgroups of a workgroup column share the tile. Here the workgroup's work items
split the B panel of the next k-step (``BK x BN``) between them: each loads ``q`` columns of v
rows, packs them into q words and stores them to SLM in the VNNI layout ``[BK / v][BN]`` words,
so a subgroup's B^T operand is one per-lane load of 8 consecutive words from SLM. Two buffers
alternate: step i reads buffer i % 2 while step i + 1 is written to the other, one barrier a step.
A panel deeper than 32 rows is loaded by several B descriptors (K-slices, :class:`SPart`), all
staged in the one panel; the step's DPAS then run in K-block order with each slice's operands
loaded next to its first DPAS (:meth:`SlmStaging.slm_op_order`), so the registers hold one slice.

The workgroup tile comes from the ``wg_tile`` attribute ``wg_to_sg`` and ``blocking`` leave on a
subgroup's descriptors. All work items must take the same k-loop version (the barrier), so the
versioning test is made on the workgroup's A and B panels (:meth:`SlmStaging.panel_reads_ok`).

:class:`SlmStaging` is a mixin of ``lower_xegpu.XeGPULowering``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from llvmlite import ir

from . import builtins as bi
from .passes.lane_distribution import per_lane_count

I32, I64 = bi.I32, bi.I64



@dataclass
class SPlan:
    """B staged in SLM: the B descriptor's iter_arg position, the panel (BK x BN, v rows a
    word), words per work item ``q``, and (set in the fast version) the buffer and positions."""
    b_pos: int
    bk: int
    bn: int
    v: int
    q: int
    buf: Optional[ir.Value] = None
    #: this subgroup's column in the panel (i64), the panel's column in the array (i64)
    n_off: Optional[ir.Value] = None
    col0: Optional[ir.Value] = None
    #: the word offset (i32) of the buffer the current k-step reads, and of this lane's B^T words
    cur: Optional[ir.Value] = None
    step_base: Optional[ir.Value] = None
    #: the B descriptor's row in the panel; this work item's first word (row pair, column)
    r_off: Optional[ir.Value] = None
    mine: Optional[tuple] = None
    #: this work item's element offsets of its v rows at the loop's first step (i64), the pitch (i32)
    base: Optional[list] = None
    s0_32: Optional[ir.Value] = None

    #: the step's loaded share and its buffer offset until stored; the step's DPAS so far, and
    #: after how many the share is stored (0: at the step's end)
    pending: Optional[tuple] = None
    dpas_done: int = 0
    store_after: int = 0
    #: {id(body argument of a staged B descriptor): its SPart}
    parts: dict = field(default_factory=dict)

    @property
    def buffer_words(self) -> int:
        return self.bk // self.v * self.bn


@dataclass
class SPart:
    """One staged B descriptor (a K-slice of the panel): ``TLoad.slm`` of its loads."""
    plan: Optional[SPlan]
    kb0: int    # its first K-block in the panel
    row: int    # its first row in the panel


class SlmStaging:
    """B panels VNNI-packed in SLM for dg2's transposed k-loop (module docstring)."""

    splan: Optional[SPlan] = None
    #: the k-loop version being lowered takes its DPAS in K-block order: ``slm_op_order``'s
    #: (sink, group), or None
    kb_order: tuple | None = None
    #: ``_lower_for``'s per-iteration hook (``slm_loop_hook``), taken by the next loop lowered
    loop_hook = None
    _slm_reads: dict = {}

    def wg_offsets(self, td) -> Optional[tuple]:
        """(row, col) of the descriptor in its workgroup tile (i64), from ``wg_tile``."""
        wg = getattr(td, "wg", None)
        if wg is None:
            return None
        S, L, D, fast, at = wg[0:2], wg[2:4], wg[4:6], wg[6], wg[7:9]
        b = self.b
        sgid = b.zext(bi.sub_group_id(b), I64)
        coord = [None, None]
        coord[fast] = b.urem(sgid, I64(L[fast]))
        coord[1 - fast] = b.udiv(sgid, I64(L[fast]))
        return tuple(I64(at[d]) if D[d] == S[d] else b.add(b.mul(coord[d], I64(D[d])), I64(at[d]))
                     for d in range(2))

    def slm_plan(self, op, reads: dict, plan) -> Optional[SPlan]:
        """The staging of the loop's B panel, when the workgroup shares it and it splits evenly.
        The panel may be loaded by several descriptors (K-slices of at most 32 rows: BK=64), all
        staged in one buffer pair with one barrier a k-step."""
        if plan is None or self.nsg < 2:
            return None
        body_args = op.regions[0].block.args
        bpos = sorted({i for i, (td, _, _) in reads.items() if any(
            plan.loads.get(id(u)) == "B" for u, _ in body_args[1 + i].uses)})
        if not bpos or any(getattr(td, "wg", None) is None for td, _, _ in reads.values()):
            return None
        wg = reads[bpos[0]][0].wg
        (bk, bn), (l0, _), (d0, d1) = wg[0:2], wg[2:4], wg[4:6]
        bits = reads[bpos[0]][0].type.dtype.bitwidth
        if bits not in (8, 16) or d0 != bk or l0 < 2 or bn % 8:
            return None         # whole K-blocks of B per subgroup, shared by several subgroup rows
        v = 32 // bits
        step = self.env[id(op.operands[2])]
        parts, rows = {}, 0
        for p in bpos:
            td, dr, dc = reads[p]
            h, w = td.type.shape
            if tuple(td.wg[0:7]) != tuple(wg[0:7]) or td.wg[8] != wg[8] or w != 8 or h % (8 * v):
                return None
            if not (isinstance(dc, ir.Constant) and dc.constant == 0 and isinstance(dr, ir.Constant)
                    and isinstance(step, ir.Constant) and dr.constant == step.constant):
                return None     # B moves down by the step: its panel's rows are ctr + step on
            parts[id(body_args[1 + p])] = SPart(None, td.wg[7] // (8 * v), td.wg[7])
            rows += h
        starts = sorted(x.row for x in parts.values())
        if rows != bk or starts[0] != 0 or len(set(starts)) != len(starts) or any(r % (8 * v) for r in starts):
            return None
        # accumulators of half the register file or more (32x16 fp32 subgroup tiles): Intel's
        # compiler spilled 128-160 B in the cold k-loop version with the staging (0 without)
        acc = sum(per_lane_count(op.operands[3 + p].type.shape, self.sg) for p in plan.acc_positions)
        rf = self.target.registers
        if rf is not None and 2 * acc * 4 * self.sg >= rf.count * rf.bytes_each:
            return None
        words, lanes = bk // v * bn, self.nsg * self.sg
        q = words // lanes
        if words % lanes or q not in (1, 2, 4, 8, 16) or bn % q:
            return None
        sp = SPlan(min(bpos, key=lambda p: reads[p][0].wg[7]), bk, bn, v, q)
        if v == 2 and len(parts) > 1:
            # 16-bit B: the share is stored once the first K-slice's DPAS are issued (its loads had
            # that long to arrive; fp16 256x64x128/64sg 167 -> 163 instructions a step). 8-bit B,
            # whose K-slice is one K-block, kept to the step's end (int8 BK=256: 180 -> 189 there)
            sp.store_after = len(plan.acc_positions) * reads[sp.b_pos][0].type.shape[0] // (8 * v)
        for x in parts.values():
            x.plan = sp
        sp.parts = parts
        return sp

    def slm_span_ok(self, sp: SPlan, reads: dict, lb, ub) -> ir.Value:
        """The staged loads' 32-bit row products stay below 2^31 (``slm_load_panel``)."""
        b = self.b
        s0 = reads[sp.b_pos][0].s0
        ok = b.icmp_signed("<", s0, I64(2**31 // 4))
        return b.and_(ok, b.icmp_signed("<", b.mul(b.add(b.sub(ub, lb), I64(2 * sp.bk)), s0), I64(2**31 - 1)))

    def panel_reads_ok(self, td, lb, ub, step, dr, dc) -> ir.Value:
        """``loop_reads_ok`` of the descriptor's whole workgroup tile (the same for every
        subgroup: the workgroup takes one version)."""
        wg = td.wg
        (r, c), (h, w) = self.wg_offsets(td), wg[0:2]
        b = self.b
        org = td.moved(b.sub(td.row, r), b.sub(td.col, c))
        eb = td.type.dtype.bitwidth // 8
        n = b.sdiv(b.add(b.sub(ub, lb), b.sub(step, I64(1))), step)
        last = b.sub(n, I64(1))

        def in_view(row, col):
            ok = b.and_(b.icmp_signed(">=", row, I64(0)), b.icmp_signed(">=", col, I64(0)))
            ok = b.and_(ok, b.icmp_signed("<=", b.add(row, I64(h)), td.H))
            return b.and_(ok, b.icmp_signed("<=", b.add(col, I64(w)), td.W))
        start = b.ptrtoint(b.gep(td.arr.ptr, [b.add(b.mul(org.row, td.s0), org.col)],
                                 source_etype=ir.IntType(8 * eb)), I64)
        ok = b.and_(b.icmp_signed(">", step, I64(0)), in_view(org.row, org.col))
        ok = b.and_(ok, b.icmp_signed("==", b.and_(b.or_(start, b.mul(td.s0, I64(eb))), I64(3)), I64(0)))
        ok = b.and_(ok, in_view(b.add(org.row, b.mul(last, dr)), b.add(org.col, b.mul(last, dc))))
        return b.and_(ok, b.icmp_signed("==", b.and_(b.mul(dc, I64(eb)), I64(3)), I64(0)))

    @staticmethod
    def slm_op_order(ops: list, sink: bool = True, group: int = 1) -> list:
        """The staged k-step's ops with its run of DPAS in K-block order (every chain's first
        DPAS, then every second, ...; with ``group`` > 1 every chain's first ``group``, in chain
        order, then the next ``group``...), with ``sink`` each load that only feeds DPAS moved to
        just before the first DPAS that takes it: a K-slice's operands are made, used and dead
        before the next slice's (fp16 BK=64: all 16 operands of a step at once spilled)."""
        idx = [i for i, o in enumerate(ops) if o.name == "xegpu.dpas"]
        if not idx or idx[-1] - idx[0] + 1 != len(idx):
            return ops
        run = [ops[i] for i in idx]
        depth: dict = {}
        for o in run:
            depth[id(o.result)] = depth.get(id(o.operands[2]), -1) + 1
        run.sort(key=lambda o: depth[id(o.result)] // group)
        pre, inside = ops[:idx[0]], {id(o) for o in run}
        if any(o.regions or any(k in o.name for k in ("store", "atomic", "barrier", "fence", "call")) for o in pre):
            return ops          # a load moved past these could read something else
        sunk: set = set()
        for o in reversed(pre if sink else ()):   # loads (and their slices) whose every use is a DPAS of the run
            uses = [u for r in o.results for u, _ in r.uses]
            if o.name in ("xegpu.load_nd", "vector.extract_strided_slice") and uses and \
                    all(id(u) in inside or id(u) in sunk for u in uses):
                sunk.add(id(o))
        out = [o for o in pre if id(o) not in sunk]
        done: set = set()

        def emit(o) -> None:
            for x in o.operands:
                p = getattr(x, "op", None)
                if p is not None and id(p) in sunk and id(p) not in done:
                    done.add(id(p))
                    emit(p)
            out.append(o)
        for o in run:
            emit(o)
        return out + ops[idx[-1] + 1:]

    # -- the fast version ---------------------------------------------------------------------

    def slm_begin(self, sp: SPlan, td) -> None:
        """Before the loop: the buffers, the positions, step 0 copied to buffer 0, a barrier."""
        b = self.b
        sp.buf = bi.slm_array(self.module, I32, 2 * sp.buffer_words)
        r, c = self.wg_offsets(td)
        sp.r_off, sp.n_off, sp.col0 = r, c, b.sub(td.col, c)
        sp.mine = self._my_words(sp)
        kp, n = sp.mine
        row0 = b.sub(td.row, r)
        # this work item's element offsets at the first step; a step down is a 32-bit product
        # (offsets from a uniform panel pointer in i32 measured 0.75-2.5 instructions per DPAS more)
        sp.base = [b.add(b.mul(b.add(row0, b.add(b.mul(kp, I64(sp.v)), I64(j))), td.s0), b.add(sp.col0, n))
                   for j in range(sp.v)]
        sp.s0_32 = b.trunc(td.s0, I32)
        self.slm_store(sp, self.slm_load_panel(sp, I32(0), td), I32(0))
        bi.barrier(b)
        self.instructions[f"SLM buffers 2x{sp.bk}x{sp.bn} (B VNNI-packed by the workgroup)"] += 1

    def _my_words(self, sp: SPlan):
        """(row pair index kp, column n) of this work item's first word in the panel (i64)."""
        b = self.b
        t = b.add(b.mul(b.zext(bi.sub_group_id(b), I64), I64(self.sg)), b.zext(self.lane, I64))
        d = b.mul(t, I64(sp.q))
        return b.udiv(d, I64(sp.bn)), b.urem(d, I64(sp.bn))

    def slm_load_panel(self, sp: SPlan, rows_down: ir.Value, td) -> list:
        """This work item's share of the panel ``rows_down`` (i32) rows below the loop's first:
        v row vectors of q elements (a uniform 32-bit product a step: the versioning test keeps
        the loop's span of rows times the pitch under 2^31)."""
        b = self.b
        bits = td.type.dtype.bitwidth
        ety = ir.IntType(bits)
        down = b.sext(b.mul(rows_down, sp.s0_32), I64)
        rows = []
        for j in range(sp.v):
            ptr = b.gep(td.arr.ptr, [b.add(sp.base[j], down)], inbounds=True, source_etype=ety)
            vt = ir.VectorType(ety, sp.q) if sp.q > 1 else ety
            ld = b.load(b.bitcast(ptr, ir.PointerType(vt, addrspace=1)), typ=vt)
            # the versioning test made the panel's rows 4-byte aligned and a share starts q
            # elements in: whole words then (one vector message; at 2-byte alignment Intel's
            # compiler split a 16-byte share into 4 loads)
            ld.align = 4 if sp.q * bits % 32 == 0 else bits // 8
            rows.append(ld)
        self.instructions["global load of a B panel share (per lane)"] += 1
        return rows

    def slm_store(self, sp: SPlan, rows: list, buf_off: ir.Value) -> None:
        """The rows' q words, VNNI-packed (row j in bits j*bits..), to the buffer at ``buf_off``."""
        b = self.b
        kp, n = sp.mine
        words = []
        if sp.v == 2 and sp.q % 2 == 0:
            # 16-bit rows as 32-bit words: column pairs (2j, 2j+1) of the two rows give words
            # 2j, 2j+1 by shifts and masks (Intel's compiler: a shift and a bfn a word; packing
            # 16-bit elements one by one cost a strided move, a shift and an or)
            h = sp.q // 2
            vt = ir.VectorType(I32, h) if h > 1 else I32
            w0, w1 = (b.bitcast(r, vt) for r in rows)

            def c(x: int) -> ir.Constant:
                return ir.Constant(vt, [x] * h) if h > 1 else I32(x)
            even = b.or_(b.and_(w0, c(0xFFFF)), b.shl(w1, c(16)))
            odd = b.or_(b.lshr(w0, c(16)), b.and_(w1, c(-65536)))
            inter = [x for j in range(h) for x in (j, h + j)]
            words = [b.shuffle_vector(even, odd, ir.Constant(ir.VectorType(I32, sp.q), inter))] if h > 1 else [even, odd]
        for w in range(sp.q if not words else 0):
            xs = [r if sp.q == 1 else b.extract_element(r, I32(w)) for r in rows]
            words.append(self.pack_word(xs))
        val = words[0] if len(words) == 1 else self.words_vector(words)
        idx = b.add(b.zext(buf_off, I64), b.add(b.mul(kp, I64(sp.bn)), n))
        ptr = b.gep(sp.buf, [idx], source_etype=I32)
        st = b.store(val, b.bitcast(ptr, ir.PointerType(val.type, addrspace=bi.LOCAL_AS)))
        st.align = 4
        self.instructions["SLM store of the packed B share (per lane)"] += 1

    def slm_b_operand(self, part: SPart, kb: int, a: int) -> ir.Value:
        """B^T as the DPAS A operand from SLM: lane l's words (8 kb + l, n_off + 8a + r), r < 8,
        kb counted from the descriptor's first K-block ``part.kb0``."""
        b, sp, kb = self.b, part.plan, kb + part.kb0
        # this step's (buffer + lane row + subgroup column) plus a constant: one add a load
        # (the buffer and the K-block added per load cost 1.5 instructions a load)
        if sp.step_base is None:
            lane_n = b.add(b.mul(self.lane, I32(sp.bn)), b.trunc(sp.n_off, I32))
            sp.step_base = b.add(sp.cur, lane_n)
        idx = b.zext(b.add(sp.step_base, I32(8 * kb * sp.bn + 8 * a)), I64)
        vt = ir.VectorType(I32, 8)
        ld = b.load(b.bitcast(b.gep(sp.buf, [idx], source_etype=I32), ir.PointerType(vt, addrspace=bi.LOCAL_AS)), typ=vt)
        ld.align = 4
        self.instructions["SLM load of B^T (per lane, 8 words)"] += 1
        return ld

    def slm_store_pending(self, sp: SPlan) -> None:
        """The step's loaded panel share packed and stored to the other buffer, once."""
        if sp.pending is not None:
            rows, off = sp.pending
            sp.pending = None
            self.slm_store(sp, rows, off)

    def slm_after_dpas(self) -> None:
        """After each DPAS of a staged fast k-step: the share stored after ``store_after``."""
        sp = self.splan
        if sp is not None and sp.pending is not None and sp.store_after:
            sp.dpas_done += 1
            if sp.dpas_done >= sp.store_after:
                self.slm_store_pending(sp)

    def slm_loop_hook(self, sp: SPlan, step: int, body_arg):
        """``_lower_for``'s hook of the fast version: at the top of each k-step the buffer it reads
        and the global loads of the next step's panel (the last step reloads its own); at the
        bottom the packed share stored to the other buffer and a barrier."""
        def enter(ctr: ir.Value, n32: ir.Value, parity: Optional[int] = None):
            b = self.b
            # the loop lowered in pairs of steps (``enter.pairs``) gives each copy its buffer
            cur = I32(parity * sp.buffer_words) if parity is not None else \
                b.mul(b.and_(b.udiv(ctr, I32(step)), I32(1)), I32(sp.buffer_words))
            sp.cur, sp.step_base = cur, None
            td = self.env[id(body_arg)]
            nxt = b.add(ctr, I32(step))
            rows = self.slm_load_panel(sp, b.select(b.icmp_signed("<", nxt, n32), nxt, ctr), td)
            sp.pending, sp.dpas_done = (rows, b.sub(I32(sp.buffer_words), cur)), 0

            def leave():
                self.slm_store_pending(sp)
                bi.barrier(self.b)
                self.instructions["workgroup barrier (one a k-step)"] += 1
            return leave
        # two steps an iteration, each reading a buffer of its own (a constant: fp16 256x64x128/64sg
        # 163 -> 156 instructions a step, int8 256x64x512/64sg 325 -> 316.5); not with two 16-bit
        # K-slices (fp16 256x64x64/64sg: Intel's compiler spilled 64 B)
        enter.pairs = not (sp.v == 2 and len(sp.parts) == 2)
        return enter
