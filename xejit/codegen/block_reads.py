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

from dataclasses import dataclass
from typing import Optional

from llvmlite import ir

from ..ir.core import ScalarType, VectorType
from . import builtins as bi
from .passes.lane_distribution import per_lane_count

I32, I64 = bi.I32, bi.I64

#: SubgroupBlockReadINTEL by unit width: (mangling letter of the unit type, LLVM type)
_UNITS = {32: ("j", bi.I32), 16: ("t", bi.I16), 8: ("h", bi.I8)}
#: the largest vector of units one read returns (cl_intel_subgroups: uint8, ushort8, uchar16)
_MAX_VEC = {32: 8, 16: 8, 8: 16}


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

    def block_read_kind(self, t, mode: str) -> Optional[str]:
        """'rows32' when a block row is exactly one 32-bit word per lane (A, C, plain loads),
        'vnni' when a row is one element per lane and rows are packed into words (B)."""
        h, w = t.shape
        eb = t.dtype.bitwidth // 8
        if mode == "plain" and w * eb == 4 * self.sg:
            return "rows32"
        if mode == "packed" and w == self.sg and eb in (1, 2):
            return "vnni"
        return None

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

    def block_read_words(self, td, t, rtypes, mode: str) -> list:
        """The :class:`Words` of each array block of a block-read load (no bounds checks)."""
        b = self.b
        h, w = t.shape
        count = len(rtypes)
        eb = t.dtype.bitwidth // 8
        kind = self.block_read_kind(t, mode)

        def row_ptr(r: int):
            off = b.add(b.mul(b.add(td.row, I64(r)), td.s0), td.col)
            return b.gep(td.arr.ptr, [off], source_etype=ir.IntType(8 * eb))
        if kind == "rows32":       # row r: lane l gets word l of each block
            rows = [self._read(row_ptr(r), 32, count) for r in range(h)]
            return [Words([rows[r][a] for r in range(h)], rt) for a, rt in enumerate(rtypes)]
        v = 32 // (8 * eb)         # vnni: rows i*v .. i*v+v-1 of column l packed in word i
        rows = [self._read(row_ptr(r), 8 * eb, count) for r in range(h)]
        return [Words([self.pack_word([rows[i * v + k][a] for k in range(v)]) for i in range(h // v)], rt)
                for a, rt in enumerate(rtypes)]

    def gather_words(self, td, rt: VectorType, r0, c0, mode: str, pad) -> Words:
        """This lane's words of a block read element by element with bounds checks (out-of-view
        elements are ``pad``), unrolled: constant positions keep them in registers."""
        b = self.b
        bits = rt.dtype.bitwidth
        ety = _elem_ty(rt.dtype)
        ity = ir.IntType(bits)

        def bits_of(x):
            return x if x.type == ity else b.bitcast(x, ity)
        n = per_lane_count(rt.shape, self.sg)
        if mode == "packed":
            v = rt.shape[2]
            words = []
            for e in range(n):
                r, c = self.coords(tuple(rt.shape[:2]), e)
                xs = [bits_of(self.load_elem(td, b.add(r0, b.add(b.mul(r, I64(v)), I64(k))), b.add(c0, c), ety, pad))
                      for k in range(v)]
                words.append(self.pack_word(xs))
            return Words(words, rt)
        elems = []
        for e in range(n):
            r, c = self.coords(tuple(rt.shape), e)
            elems.append(bits_of(self.load_elem(td, b.add(r0, r), b.add(c0, c), ety, pad)))
        epw = 32 // bits
        return Words([self.pack_word(elems[i:i + epw]) if epw > 1 else elems[i] for i in range(0, n, epw)], rt)

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
