"""dg2 decode with column-major B: A's rows staged in SLM once per workgroup.

With column-major B (``a @ w.T``, ``block_reads.py``: ``lanerow``) a DPAS A operand is 8 rows of
A, one 32-byte K-block each, and dg2's subgroup block reads land one register per send with an
address of its own: 16 instructions a K-block, although every subgroup of a decode workgroup
(8 rows of A, the subgroups side by side along N) reads the same 8 rows. Here the workgroup's work
items split the k-step's A panel (8 x BK): each loads ``q`` consecutive words of one row (one
vector load) and stores them to SLM transposed, ``[K-block][word][row]``, so the subgroup's A
operand of a K-block is one per-lane load of 8 consecutive words (lane w: word w of rows 0-7).
Two buffers alternate with one barrier a k-step (step i stores to buffer i % 2, waits at the
barrier and reads it: step i + 2's store to the same buffer comes after every work item passed
step i + 1's barrier, hence after step i's reads). The fast loop takes two steps an iteration
(``_lower_for``'s ``enter.pairs``), so each copy's buffer and every SLM address is loop-invariant.

All work items must take the same k-loop version (the barrier): the versioning test is made on
the workgroup's panels (:meth:`DecodeSlm.decode_reads_ok`).

:class:`DecodeSlm` is a mixin of ``lower_xegpu.XeGPULowering``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from llvmlite import ir

from . import builtins as bi
from .block_reads import Deferred, Words
from .parity_dpas import as_vector, spread_fields, ways

I32, I64 = bi.I32, bi.I64
#: SubgroupBlockWriteINTEL of one 32-bit word a lane to shared local memory
SLM_BLOCK_WRITE_U32 = "_Z31__spirv_SubgroupBlockWriteINTELPU3AS3jj"


def a_share_words(rows: int, row_words: int, work_items: int) -> Optional[int]:
    """Words of the A panel (``rows`` x ``row_words``) a work item stages, or None when the panel
    does not split evenly into whole shares of one row (also the autotuner's rule:
    ``block_read_costs.py``). Fewer words than work items: one word each, the rest idle."""
    words = rows * row_words
    if words % work_items == 0:
        q = words // work_items
        return q if q in (1, 2, 4, 8) and row_words % q == 0 else None
    return 1 if work_items % words == 0 else None


def decode_a_staged(BM: int, sm: int, BK: int, a_bits: int, nsg: int, sg: int) -> Optional[int]:
    """Words a work item stages when a column-major-B k-loop stages A (the lowering's
    :meth:`DecodeSlm.decode_a_plan`, and the autotuner's rule): every subgroup takes the
    workgroup's whole A tile (one subgroup row, ``sm == BM``), one row a lane, at most two A
    descriptors a k-step (64 bytes of a row each, side by side: 128 bytes), and the panel splits
    (``a_share_words``). None when A is not staged."""
    if nsg < 2 or sm != BM or BM != sg or BK * a_bits > 1024 or BK * a_bits % 32:
        return None
    return a_share_words(BM, BK * a_bits // 32, nsg * sg)


def decode_spread_staged(BM: int, sm: int, BK: int, k: int, nsg: int, sg: int, bits: int) -> Optional[int]:
    """Words of A's row a work item stages a k-step when a column-parity k-loop (row-major
    integer B, ``parity_dpas.py``) stages A^T's spread (:meth:`DecodeSlm._spread_plan`, and the
    autotuner's rule): every subgroup takes the workgroup's 8 rows of A (lane m: row m), the
    k-step's 8 words a K-block of a row split evenly between the subgroups or fewer than them,
    each share within one unit of 8 rows of K (8 / v words). None when not."""
    row_words = 8 * (BK // k)
    if nsg < 2 or sm != BM or BM != sg or BK % k or (row_words % nsg and nsg % row_words):
        return None
    q = max(1, row_words // nsg)
    return q if (8 // ways(bits)) % q == 0 else None


#: 32-bit words of one staged A^T spread operand (8 lanes x 8 words)
SPREAD_OPERAND_WORDS = 64


def staged_slm_bytes(BM: int, BK: int, k: int, a_bits: int, b_bits: int, col_b: bool) -> int:
    """SLM bytes of decode's two staging buffers (``DPlan.words`` each): column-major B's A panel
    (BM x BK), or by column parity the A^T spread (v x v operands a K-block, v = 32 / b_bits)."""
    v = 32 // b_bits
    words = BM * BK * a_bits // 32 if col_b else SPREAD_OPERAND_WORDS * v * v * (BK // k)
    return 2 * 4 * words


@dataclass
class DPlan:
    """A staged in SLM: the A descriptor's body argument, the panel (8 rows x ``row_words``
    32-bit words), words per work item ``q``, and (in the fast version) the buffers."""
    pos: int                     # the A descriptor's iter_arg position
    arg: object
    rows: int
    row_words: int
    q: int
    writers: int                 # subgroups that stage a share (the first ones)
    #: row-major B by column parity (parity_dpas.py): the A^T spread staged, not A's rows;
    #: spread operands a k-step (K-blocks x v units of 8 rows of K x v parities), v
    spread: bool = False
    combos: int = 0
    ways: int = 2
    buf: Optional[ir.Value] = None
    cur: Optional[ir.Value] = None     # word offset (i32) of the buffer this k-step uses
    #: (before the loop) this subgroup's first word of a row (i32), the lane's share's element
    #: offset from the panel's corner (i64), lane * 8 (i32)
    share_off: Optional[ir.Value] = None
    c0: Optional[ir.Value] = None
    lane8: Optional[ir.Value] = None
    lane_ptr: ir.Value | None = None
    #: the A descriptors that cover the panel side by side along K (id of the body argument ->
    #: its first K-block in the panel), their iter_arg positions; whether this k-step's share
    #: is staged yet (by its first A load lowered)
    parts: dict = field(default_factory=dict)
    positions: set = field(default_factory=set)
    staged: bool = False

    @property
    def words(self) -> int:
        """32-bit words of a buffer: the panel, or the spread operands (8 x 8 words each)."""
        return SPREAD_OPERAND_WORDS * self.combos if self.spread else self.rows * self.row_words


class DecodeSlm:
    """A's decode panel staged in SLM for dg2's column-major-B k-loop (module docstring)."""

    dplan: Optional[DPlan] = None

    def decode_a_plan(self, op, reads: dict, plan) -> Optional[DPlan]:
        """The staging of the loop's A panel when every subgroup of the workgroup reads the same
        A tile (a workgroup one subgroup tall) through block reads of whole rows, else None."""
        if self.nsg < 2 or (plan is not None and not plan.pairs):
            return None
        body_args = op.regions[0].block.args
        if plan is not None:
            return self._spread_plan(reads, plan, body_args)
        found = []
        for i, (td, dr, dc) in reads.items():
            arg = body_args[1 + i]
            loads = [u for u, _ in arg.uses if u.name == "xegpu.load_nd"]
            if not loads or any(self.block_read_kind(td.type, "plain") != "rows32" or u.attributes.get("packed")
                                or u.attributes.get("transpose") is not None for u in loads):
                continue
            if not all(x.name == "xegpu.dpas" and k == 0 for u in loads for r in u.results for x, k in r.uses):
                continue
            wg = td.wg
            h, w = td.type.shape
            count = td.type.array_length
            if tuple(wg[0:2]) != tuple(wg[4:6]) or h != wg[0] or h != self.sg or wg[7] != 0:
                continue       # not a part of one tile shared by the whole workgroup
            found.append((wg[8], i, arg, w * count, td.type.dtype.bitwidth, wg[1]))
        # the parts (one descriptor: at most 64 bytes of a row) must cover the tile's K side by side
        found.sort(key=lambda f: f[0])
        if not found or any(f[0] != sum(g[3] for g in found[:j]) or f[4:] != found[0][4:]
                            for j, f in enumerate(found)) or sum(f[3] for f in found) != found[0][5]:
            return None
        h, bits = self.sg, found[0][4]
        row_words = found[0][5] * bits // 32
        q = decode_a_staged(h, h, found[0][5], bits, self.nsg, self.sg)      # (the autotuner's rule)
        if q is None:
            return None
        _, pos, arg, *_ = found[0]
        # each part's first K-block (8 words) in the panel
        parts = {id(f[2]): f[0] * bits // 256 for f in found}
        return DPlan(pos, arg, h, row_words, q, row_words // q, parts=parts, positions={f[1] for f in found})

    def _spread_plan(self, reads: dict, plan, body_args) -> Optional[DPlan]:
        """Row-major B by column parity: the A^T spread staged when every subgroup takes the
        workgroup's A tile (8 rows, one row a lane). Lane m of subgroup s stages words s q ..
        s q + q - 1 of row m (``decode_spread_staged``): all v parities of their elements."""
        found = None
        for i, (td, _, _) in reads.items():
            if not any(plan.loads.get(id(u)) == "A" for u, _ in body_args[1 + i].uses):
                continue
            wg, (h, w), count = td.wg, td.type.shape, td.type.array_length
            if found is not None or wg is None or tuple(wg[0:2]) != tuple(wg[4:6]) or \
                    (h, w * count) != tuple(wg[0:2]) or h != self.sg or w * td.type.dtype.bitwidth != 256:
                return None
            found = (i, body_args[1 + i], count)
        if found is None:
            return None
        pos, arg, count = found
        bs = {lb.operands[0].type.dtype.bitwidth for lb in self._b_loads(plan, body_args)}
        if len(bs) != 1:
            return None
        bits = bs.pop()
        q = decode_spread_staged(self.sg, self.sg, count, 1, self.nsg, self.sg, bits)
        if q is None:
            return None
        v = ways(bits)
        return DPlan(pos, arg, self.sg, 8 * count, q, min(self.nsg, 8 * count // q), spread=True,
                     combos=v * v * count, ways=v)

    @staticmethod
    def _b_loads(plan, body_args) -> list:
        """The B loads of a transposed plan's k-loop body."""
        return [u for arg in body_args for u, _ in arg.uses if plan.loads.get(id(u)) == "B"]

    def decode_spread_stage(self, td) -> None:
        """The fast k-step's A^T spread by the workgroup: lane m loads q words of row m, makes
        each of their elements' v parities and stores them (q v words a parity) to the step's
        buffer, operand (unit, p), lane m's words from its element; then the barrier
        (``decode_spread_operand`` reads them)."""
        b, dp = self.b, self.dplan
        bits = 32 // dp.ways

        def stage() -> None:
            off = b.add(b.add(b.mul(td.row, td.s0), td.col), dp.share_off)
            vt = ir.VectorType(I32, dp.q) if dp.q > 1 else I32
            ptr = b.gep(td.arr.ptr, [off], inbounds=True, source_etype=ir.IntType(td.type.dtype.bitwidth))
            w = b.load(b.bitcast(ptr, ir.PointerType(vt, addrspace=1)), typ=vt)
            w.align = 4        # the versioning test made the panel's rows 4-byte aligned
            words = [b.extract_element(w, I32(i)) for i in range(dp.q)] if dp.q > 1 else [w]
            n = dp.q * dp.ways
            for p in range(dp.ways):
                x = as_vector(b, spread_fields(b, words, 0, n, p, bits))
                idx = b.add(dp.cur, b.add(dp.c0, I32(64 * p)))
                st = b.store(x, b.bitcast(b.gep(dp.buf, [b.zext(idx, I64)], source_etype=I32),
                                          ir.PointerType(x.type, addrspace=bi.LOCAL_AS)))
                st.align = 4
        if dp.writers < self.nsg:
            with b.if_then(b.icmp_unsigned("<", bi.sub_group_id(b), I32(dp.writers))):
                stage()
        else:
            stage()
        self.instructions["A^T spread staged by the workgroup (per lane: its words' v parities)"] += 1
        bi.barrier(b)
        self.instructions["workgroup barrier (A staged, one a k-step)"] += 1

    def decode_spread_operand(self, a: int, unit: int, p: int) -> ir.Value:
        """The staged spread of K-block a, unit ``unit`` (8 rows of K), parity p: one per-lane
        SLM load."""
        b, dp = self.b, self.dplan
        idx = b.add(dp.lane8, b.add(dp.cur, I32(64 * ((dp.ways * a + unit) * dp.ways + p))))
        vt = ir.VectorType(I32, 8)
        ld = b.load(b.bitcast(b.gep(dp.buf, [b.zext(idx, I64)], source_etype=I32),
                              ir.PointerType(vt, addrspace=bi.LOCAL_AS)), typ=vt)
        ld.align = 4
        self.instructions["SLM load of the A^T spread (per lane, 8 words)"] += 1
        return ld

    def decode_reads_ok(self, dp: DPlan, reads: dict, lb, ub, step) -> Optional[ir.Value]:
        """``loop_reads_ok`` of the workgroup's panels, the same value in every subgroup (a
        staged version's barrier needs them all in it): A's tile is the workgroup's; each other
        descriptor is tested at the first and the last subgroup's place along N (the axis it
        does not move on; subgroup j's tile lies j x its width along N). None when a descriptor
        moves along both axes or neither. (A vote of the subgroups' own tests in SLM, between
        barriers before the loop, made Intel's compiler spill 160-352 B, fp16 8x256x32/8sg.)"""
        b = self.b
        spans, ok = [], None
        for i, (td, dr, dc) in reads.items():
            if i == dp.pos or i in dp.positions:
                continue
            still = [isinstance(d, ir.Constant) and d.constant == 0 for d in (dr, dc)]
            if still.count(True) != 1:
                return None
            if still[0]:
                spans.append((i, 0, td.row, I64(td.type.shape[0])))
            else:
                spans.append((i, 1, td.col, I64(td.type.shape[1] * td.type.array_length)))
        if len({axis for _, axis, _, _ in spans}) > 1:
            return None
        if spans:
            lo, hi = spans[0][2], b.add(spans[0][2], spans[0][3])
            for _, _, x, n in spans[1:]:
                lo = b.select(b.icmp_signed("<", x, lo), x, lo)
                end = b.add(x, n)
                hi = b.select(b.icmp_signed(">", end, hi), end, hi)
            width = b.sub(hi, lo)
            sgid = b.zext(bi.sub_group_id(b), I64)
            shifts = (b.sub(I64(0), b.mul(sgid, width)), b.mul(b.sub(I64(self.nsg - 1), sgid), width))
        for i, (td, dr, dc) in reads.items():
            if i == dp.pos or i in dp.positions:
                places = [td]
            else:
                axis = next(ax for j, ax, _, _ in spans if j == i)
                places = [td.moved(b.add(td.row, d), td.col) if axis == 0 else td.moved(td.row, b.add(td.col, d))
                          for d in shifts]
            for x in places:
                c = self.loop_reads_ok(x, lb, ub, step, dr, dc)
                ok = c if ok is None else b.and_(ok, c)
        return ok

    def decode_a_hook(self, dp: DPlan, step: int, td):
        """Before the fast loop: the buffers and this work item's loop-invariant offsets (its
        share's row and words, its SLM words; computed here, not in the loop, where Intel's
        compiler recomputed them from the lane id every step); then ``_lower_for``'s hook, which
        gives each k-step its buffer (a constant in each of the two copies of an iteration)."""
        b = self.b
        dp.buf = bi.slm_array(self.module, I32, 2 * dp.words)
        dp.lane8 = b.mul(self.lane, I32(8))
        if dp.spread:
            # lane m of subgroup s: words c = s q .. of row m, in unit u = c // (8 / v) from its
            # word j = c % (8 / v); their parity-p words go to operand (u, p), lane m, elements
            # v j .. (word offsets of the buffer: operand (u, p) at 64 (u v + p))
            c = b.mul(bi.sub_group_id(b), I32(dp.q))
            wpu = 8 // dp.ways
            epw = 32 // td.type.dtype.bitwidth
            dp.share_off = b.add(b.mul(b.zext(self.lane, I64), td.s0), b.zext(b.mul(c, I32(epw)), I64))
            unit, j = b.udiv(c, I32(wpu)), b.urem(c, I32(wpu))
            dp.c0 = b.add(b.add(b.mul(unit, I32(64 * dp.ways)), dp.lane8), b.mul(j, I32(dp.ways)))
            return self._buffer_hook(dp, step)
        # lane l of subgroup s stages words s q .. s q + q - 1 of row l (with fewer words than
        # work items the first ``active`` take one each): its SLM words [c // 8][c % 8][l] are
        # lane l's of a subgroup block write at a uniform address (per-lane stores took Intel's
        # compiler about 6 instructions of address each, remade from the lane id every step)
        dp.c0 = b.mul(bi.sub_group_id(b), I32(dp.q))
        # the lane's SLM words of an A operand, from the buffers' start: each k-step's loads add a
        # constant (its buffer's and K-block's words), not the lane's offset again
        dp.lane_ptr = b.gep(dp.buf, [b.zext(dp.lane8, I64)], source_etype=I32)
        epw = 32 // td.type.dtype.bitwidth
        dp.share_off = b.add(b.mul(b.zext(self.lane, I64), td.s0), b.zext(b.mul(dp.c0, I32(epw)), I64))
        return self._buffer_hook(dp, step)

    def _buffer_hook(self, dp: DPlan, step: int):
        def enter(ctr: ir.Value, n32: ir.Value, parity: Optional[int] = None):
            dp.staged = False
            dp.cur = I32(parity * dp.words) if parity is not None else \
                self.b.mul(self.b.and_(self.b.udiv(ctr, I32(step)), I32(1)), I32(dp.words))
            return None
        enter.pairs = True
        return enter

    def decode_a_load(self, op, td, rtypes) -> None:
        """The A load of a staged fast k-step: this work item's share from global memory to the
        step's buffer, the barrier, then each array block (K-block) one per-lane SLM load."""
        b, dp = self.b, self.dplan
        kb0 = dp.parts.get(id(op.operands[0]), 0)
        if not dp.staged:     # the k-step's first A load stages the whole panel
            # (the k-step's parts are lowered in order, part 0 first: slm_op_order)
            assert kb0 == 0, "decode's staged A: a k-step's first A load lowered is not its part 0"
            panel = td
            if dp.writers < self.nsg:     # (uniform in a subgroup: its block write takes every lane)
                with b.if_then(b.icmp_unsigned("<", bi.sub_group_id(b), I32(dp.writers))):
                    self._stage_share(panel)
            else:
                self._stage_share(panel)
            bi.barrier(b)
            self.instructions["workgroup barrier (A staged, one a k-step)"] += 1
            dp.staged = True
        vt = ir.VectorType(I32, 8)
        for a, (res, rt) in enumerate(zip(op.results, rtypes), start=kb0):
            def read(a=a, rt=rt):
                ptr = b.gep(dp.lane_ptr, [b.zext(b.add(dp.cur, I32(64 * a)), I64)], source_etype=I32)
                ld = b.load(b.bitcast(ptr, ir.PointerType(vt, addrspace=bi.LOCAL_AS)), typ=vt)
                ld.align = 4
                vt_r = self.vec_ty(rt)
                # (a block longer than a SPIR-V vector, int8's 32 bytes a lane, stays as its words)
                return b.bitcast(ld, vt_r) if vt_r is not None else \
                    Words([b.extract_element(ld, I32(i)) for i in range(8)], rt)
            # several descriptors (a k-step of 4+ K-blocks, taken in K-block order): each read
            # at its first DPAS (read here, all four of fp16 8x512x64/8sg spilled 7.9 KB)
            self.env[id(res)] = Deferred(read) if len(dp.parts) > 1 else read()
        self.instructions["SLM load of an A operand (per lane, 8 words)"] += 1

    def _stage_share(self, td) -> None:
        """This work item's q words of the panel: one global load, q SLM stores (8 words apart)."""
        b, dp = self.b, self.dplan
        eb = td.type.dtype.bitwidth // 8
        off = b.add(b.add(b.mul(td.row, td.s0), td.col), dp.share_off)
        vt = ir.VectorType(I32, dp.q) if dp.q > 1 else I32
        ptr = b.gep(td.arr.ptr, [off], inbounds=True, source_etype=ir.IntType(8 * eb))
        share = b.load(b.bitcast(ptr, ir.PointerType(vt, addrspace=1)), typ=vt)
        share.align = 4        # the versioning test made the panel's rows 4-byte aligned
        self.instructions["global load of an A panel share (per lane)"] += 1
        # one block write of the q words (lane l's word j to j x 8 + l: [c0 + j][l])
        vt = ir.VectorType(I32, dp.q) if dp.q > 1 else I32
        name = SLM_BLOCK_WRITE_U32 if dp.q == 1 else f"_Z31__spirv_SubgroupBlockWriteINTELPU3AS3jDv{dp.q}_j"
        write = bi.declare(self.module, name, bi.VOID, [bi.LOCAL, vt])
        idx = b.add(b.mul(dp.c0, I32(8)), dp.cur)
        ptr = b.gep(dp.buf, [b.zext(idx, I64)], source_etype=I32)
        bi.call(b, write, [b.bitcast(ptr, bi.LOCAL), share])
        self.instructions["SLM block write of the A share (transposed)"] += 1
