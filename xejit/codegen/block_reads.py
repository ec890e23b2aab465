"""Loads of targets without 2D block IO (dg2): subgroup block reads into registers, no private memory.

A block load whose rows are whole 32-bit words per lane (A, C and plain blocks: ``rows32``) or one
8/16-bit element per lane (the DPAS B operand, packed VNNI on registers: ``vnni``) is read with
``SubgroupBlockReadINTEL``: one read per row covering every array block of the load (a vector of
one unit per block and lane). The result is held as this lane's 32-bit words -- SSA values at
constant positions (:class:`Words`) -- and turned into DPAS operands by bitcasts, so nothing is
stored to an array indexed at run time (which is what IGC puts in private memory).

Where the block may leave the array (boundary tiles) the same words are gathered element by
element with bounds checks, unrolled with constant positions (:meth:`BlockReads.gather_words`).
A k-loop whose descriptors move by loop-invariant steps is *versioned* on one test made before it
(every block read of every iteration in bounds and 4-byte aligned: ``loop_reads_ok``): the fast
version has only block reads and DPAS, the cold one only the per-element code.

:class:`BlockReads` is a mixin of ``lower_xegpu.XeGPULowering`` (it uses the lowering's builder
``self.b``, ``self.sg``, ``self.module``, ``self.coords`` and ``self.load_elem``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from llvmlite import ir

from ..ir.core import ScalarType, VectorType
from . import builtins as bi
from .lowering_base import join_phis
from .passes.lane_distribution import per_lane_count

I32, I64 = bi.I32, bi.I64

#: SubgroupBlockReadINTEL by unit width: (mangling letter of the unit type, LLVM type)
_UNITS = {32: ("j", bi.I32), 16: ("t", bi.I16), 8: ("h", bi.I8)}
#: the largest vector of units one read returns (cl_intel_subgroups: uint8, ushort8, uchar16)
_MAX_VEC = {32: 8, 16: 8, 8: 16}


@dataclass
class Deferred:
    """A block load made where its DPAS takes it (``read()`` emits it there), not where the
    load is: only that block's words are live, not every array block's at once."""
    read: Callable[[], Any]
    #: read this many DPAS early (at a DPAS before the one that takes it): column-major B's lane
    #: rows, so that the next blocks' loads are in flight while this DPAS runs
    ahead: int = 0


@dataclass
class Words:
    """A block held as this lane's 32-bit words (SSA scalars at constant positions). Element e of
    the lane's fragment is in word ``e // epw`` at bits ``(e % epw) * elem_bits`` (VNNI-packed
    blocks: one word per element)."""
    words: list
    type: VectorType

    @property
    def per_word(self) -> int:
        return 1 if len(self.type.shape) == 3 else 32 // self.type.dtype.bitwidth


def words_count(t: VectorType, sg: int) -> int:
    """32-bit words per lane of a block type (None-safe only for types the reads produce)."""
    n = per_lane_count(t.shape, sg)
    return n if len(t.shape) == 3 else n * t.dtype.bitwidth // 32


def block_read_name(bits: int, n: int) -> str:
    """The mangled ``__spirv_SubgroupBlockReadINTEL`` returning ``n`` units of ``bits`` bits
    (a vector result is named by the template form, as the OpenCL headers spell it)."""
    c = _UNITS[bits][0]
    if n == 1:
        return f"_Z30__spirv_SubgroupBlockReadINTELPU3AS1K{c}"
    return f"_Z30__spirv_SubgroupBlockReadINTELIDv{n}_{c}ET_PU3AS1K{c}"


class BlockReads:
    """Subgroup block reads of whole rows into :class:`Words` (a mixin of the XeGPU lowering)."""

    def lane_here(self) -> ir.Value:
        """This lane's id for a per-lane address in a versioned k-loop, read where it is used.
        (Read once -- at the kernel's entry, or at the start of the version -- and live into
        the loop, it made the CPU device's per-lane addresses wrong on subgroups 4 and up when
        the kernel had both versions, while either version alone was right: garbage B words
        under ``XEJIT_EMULATE=dg2``, the old "two K-blocks with several 8-row groups" defect.
        Intel's compiler: fp16 256x64x32/64sg 76 -> 77 instructions a k-step, 32x16 tiles 78 -> 74.)"""
        return bi.sub_group_local_id(self.b)

    def block_read_kind(self, t, mode: str) -> Optional[str]:
        """'rows32' when a block row is exactly one 32-bit word per lane (A, C, plain loads),
        'vnni' when a row is one element per lane and rows are packed into words (B), 'lanerow'
        when lane l takes row l whole (a column-major B block loaded transposed as VNNI words:
        its K pairs are adjacent in memory, so the DPAS operand is the row's 8 words as read)."""
        h, w = t.shape
        eb = t.dtype.bitwidth // 8
        if mode == "plain" and w * eb == 4 * self.sg:
            return "rows32"
        if mode == "packed" and w == self.sg and eb in (1, 2):
            return "vnni"
        if mode == "tpacked" and h == self.sg and w * eb == 32 and eb in (1, 2):
            return "lanerow"
        return None

    def lane_row_read(self, td, t, count: int) -> list:
        """The words of each array block of a 'lanerow' load, all in bounds (the fast k-loop):
        lane l's row ``row + l``, 8 words, one per-lane vector load per array block (the
        uniform ``row * s0 + col`` and the lane's loop-invariant ``l * s0`` added apart)."""
        b = self.b
        w = t.shape[1]
        ety = ir.IntType(t.dtype.bitwidth)
        lane_off = b.mul(b.zext(self.lane_here(), I64), td.s0)
        out = []
        for a in range(count):
            off = b.add(b.add(b.mul(td.row, td.s0), b.add(td.col, I64(a * w))), lane_off)
            ptr = b.bitcast(b.gep(td.arr.ptr, [off], inbounds=True, source_etype=ety),
                            ir.PointerType(ir.VectorType(I32, 8), addrspace=1))
            v = b.load(ptr, typ=ir.VectorType(I32, 8))
            v.align = 4
            out.append([b.extract_element(v, I32(i)) for i in range(8)])
        return out

    def block_read_ok(self, td, t, count: int) -> ir.Value:
        """The whole block (all array blocks) lies in the view and every row starts 4-byte aligned."""
        b = self.b
        ok = self._in_view(td, t, count, td.row, td.col)
        eb = t.dtype.bitwidth // 8
        start = b.ptrtoint(b.gep(td.arr.ptr, [b.add(b.mul(td.row, td.s0), td.col)],
                                 source_etype=_elem_ty(t.dtype)), I64)
        aligned = b.icmp_signed("==", b.and_(b.or_(start, b.mul(td.s0, I64(eb))), I64(3)), I64(0))
        return b.and_(ok, aligned)

    def _in_view(self, td, t, count: int, row, col) -> ir.Value:
        b = self.b
        h, w = t.shape
        ok = b.and_(b.icmp_signed(">=", row, I64(0)), b.icmp_signed(">=", col, I64(0)))
        ok = b.and_(ok, b.icmp_signed("<=", b.add(row, I64(h)), td.H))
        return b.and_(ok, b.icmp_signed("<=", b.add(col, I64(w * count)), td.W))

    def loop_reads_ok(self, td, lb, ub, step, dr, dc) -> ir.Value:
        """Every position the descriptor takes in ``for i in range(lb, ub, step)`` (moved by
        (dr, dc) per iteration) allows the block read: the first and the last are in the view
        (the positions are on a line, the view is convex), the first is aligned and the step
        keeps the alignment."""
        b = self.b
        t = td.type
        eb = t.dtype.bitwidth // 8
        n = b.sdiv(b.add(b.sub(ub, lb), b.sub(step, I64(1))), step)
        last = b.sub(n, I64(1))
        ok = b.and_(b.icmp_signed(">", step, I64(0)), self.block_read_ok(td, t, t.array_length))
        ok = b.and_(ok, self._in_view(td, t, t.array_length, b.add(td.row, b.mul(last, dr)),
                                      b.add(td.col, b.mul(last, dc))))
        return b.and_(ok, b.icmp_signed("==", b.and_(b.mul(dc, I64(eb)), I64(3)), I64(0)))

    def _read(self, ptr: ir.Value, bits: int, n: int) -> list:
        """``n`` units of ``bits`` per lane from consecutive subgroup-wide chunks at ``ptr``
        (lane l gets unit ``j * sg + l`` as its j-th), in reads of at most ``_MAX_VEC`` units."""
        b = self.b
        _, ty = _UNITS[bits]
        pty = ir.PointerType(ty, addrspace=1)
        out = []
        j = 0
        while j < n:
            k = min(_MAX_VEC[bits], 1 << ((n - j).bit_length() - 1))
            ret = ty if k == 1 else ir.VectorType(ty, k)
            fn = bi.declare(self.module, block_read_name(bits, k), ret, [pty])
            p = b.bitcast(b.gep(ptr, [I64(j * self.sg)], source_etype=ty), pty) if j else b.bitcast(ptr, pty)
            v = bi.call(b, fn, [p])
            out.extend([v] if k == 1 else [b.extract_element(v, I32(i)) for i in range(k)])
            j += k
        return out

    def block_read_words(self, td, t, rtypes, mode: str, pad=None, gather: bool = False,
                         per_block: bool = False) -> list:
        """The :class:`Words` of each array block of a block-read load. With ``pad`` (a block
        that may leave the view) each row is read by one block read when it lies in the view
        and is 4-byte aligned, else element by element with bounds checks (``pad`` outside):
        a uniform branch per row, so boundary tiles still read their inner rows as blocks and
        only a row's elements are live in the per-element code. ``gather``: every row element
        by element (with ``pad``), no block read and no branch. ``per_block``: a read per row and
        array block (DPAS A operands: a read of a row's two blocks lands in two registers that
        Intel's compiler then moved one by one into the two operands, 16 moves a k-step)."""
        b = self.b
        h, w = t.shape
        count = len(rtypes)
        eb = t.dtype.bitwidth // 8
        kind = self.block_read_kind(t, mode)
        if kind == "lanerow":
            if pad is not None or gather:
                raise ValueError("internal: a lanerow load is read whole (the fast k-loop only)")
            return [Words(ws, rt) for ws, rt in zip(self.lane_row_read(td, t, count), rtypes)]
        bits = 32 if kind == "rows32" else 8 * eb
        # row r at (row*s0 + col) + r*s0: one product per load, r*s0 loop-invariant (a chain of
        # adds row to row measured 482 instead of 308 k-loop instructions, fp16 128x64x32/32sg)
        off0 = b.add(b.mul(td.row, td.s0), td.col)

        def row_ptr(r: int):
            off = b.add(off0, b.mul(I64(r), td.s0)) if r else off0
            return b.gep(td.arr.ptr, [off], inbounds=pad is None, source_etype=ir.IntType(8 * eb))

        def read_row(r: int) -> list:
            if gather:
                return self._gather_row(td, t, count, b.add(td.row, I64(r)), kind, pad)
            if pad is None and per_block and kind == "rows32":
                p = row_ptr(r)
                return [self._read(b.gep(p, [I64(a * w)], source_etype=ir.IntType(8 * eb)) if a else p, bits, 1)[0]
                        for a in range(count)]
            if pad is None:
                return self._read(row_ptr(r), bits, count)
            row, p = b.add(td.row, I64(r)), row_ptr(r)
            ok = b.and_(b.icmp_signed(">=", row, I64(0)), b.icmp_signed("<", row, td.H))
            ok = b.and_(ok, b.icmp_signed(">=", td.col, I64(0)))
            ok = b.and_(ok, b.icmp_signed("<=", b.add(td.col, I64(w * count)), td.W))
            ok = b.and_(ok, b.icmp_signed("==", b.and_(b.ptrtoint(p, I64), I64(3)), I64(0)))
            with b.if_else(ok) as (then, otherwise):
                with then:
                    fast, fast_bb = self._read(p, bits, count), b.block
                with otherwise:
                    slow, slow_bb = self._gather_row(td, t, count, row, kind, pad), b.block
            return join_phis(b, fast, fast_bb, slow, slow_bb)
        if kind == "rows32":       # row r: lane l gets word l of each block
            rows = [read_row(r) for r in range(h)]
            return [Words([rows[r][a] for r in range(h)], rt) for a, rt in enumerate(rtypes)]
        v = 32 // (8 * eb)         # vnni: rows i*v .. i*v+v-1 of column l packed in word i
        rows = [read_row(r) for r in range(h)]
        out = [[] for _ in rtypes]
        for i in range(h // v):    # interleave the v rows' units as one vector, bitcast to words
            units = [rows[i * v + k][a] for a in range(count) for k in range(v)]
            vec = ir.Constant(ir.VectorType(units[0].type, len(units)), ir.Undefined)
            for j, u in enumerate(units):
                vec = b.insert_element(vec, u, I32(j))
            ws = b.bitcast(vec, I32 if count == 1 else ir.VectorType(I32, count))
            for a in range(count):
                out[a].append(ws if count == 1 else b.extract_element(ws, I32(a)))
        return [Words(ws, rt) for ws, rt in zip(out, rtypes)]

    def gathered_words(self, td, t, rt: VectorType, mode: str, pad) -> Words:
        """The :class:`Words` of one array block (at ``td``'s position) gathered element by
        element with bounds checks (``pad`` outside): straight-line code, no block read."""
        return self.block_read_words(td, t, [rt], mode, pad, gather=True)[0]

    def _gather_row(self, td, t, count: int, row, kind: str, pad) -> list:
        """This lane's units of one row of every array block, element by element with bounds
        checks (what one block read of the row gives: a word of w/sg elements, or one element)."""
        b = self.b
        w = t.shape[1]
        bits = t.dtype.bitwidth
        ety, ity = _elem_ty(t.dtype), ir.IntType(bits)
        lane = b.zext(self.lane, I64)
        ept = w // self.sg if kind == "rows32" else 1
        out = []
        for a in range(count):
            xs = []
            for e in range(ept):
                col = b.add(b.add(td.col, I64(a * w + e)), b.mul(lane, I64(ept)) if ept > 1 else lane)
                x = self.load_elem(td, row, col, ety, pad)
                xs.append(x if x.type == ity else b.bitcast(x, ity))
            out.append(self.pack_word(xs) if kind == "rows32" else xs[0])
        return out

    def words_slice(self, x: Words, start: int, count: int, t: VectorType):
        """Elements [start, start + count) of this lane's fragment as a value of block type ``t``
        (a register vector, or :class:`Words` when longer than a SPIR-V vector)."""
        pw = x.per_word
        if start % pw or count % pw:
            raise ValueError(f"slice [{start}, {start + count}) splits a 32-bit word of {x.type}")
        return self.words_value(Words(x.words[start // pw:(start + count) // pw], t))

    def words_value(self, x: Words):
        """The block in its register type (``vec_ty``), or ``x`` itself when too long for one."""
        vt = self.vec_ty(x.type)
        if vt is None:
            return x
        return self.b.bitcast(self.words_vector(x.words), vt)

    def words_vector(self, words: list) -> ir.Value:
        """``<n x i32>`` of the words (one word: the i32 itself)."""
        if len(words) == 1:
            return words[0]
        v = ir.Constant(ir.VectorType(I32, len(words)), ir.Undefined)
        for i, w in enumerate(words):
            v = self.b.insert_element(v, w, I32(i))
        return v


def _elem_ty(t: ScalarType) -> ir.Type:
    return {"f32": bi.F32, "f16": bi.F16, "bf16": bi.I16, "i8": bi.I8, "u8": bi.I8, "i32": I32,
            "i64": I64, "index": I64}[t.name]
