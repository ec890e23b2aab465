"""bf16 GEMM kernels for the CPU device that use the CPU's bf16 dot-product instruction.

On a CPU with AVX512_BF16 (Zen 4, Cooper Lake, Sapphire Rapids and later), ``vdpbf16ps`` adds the
products of 16 pairs of bf16 values into 16 fp32 sums: twice the multiply-adds of an fp32 FMA per
instruction. The generic lowering cannot reach it: it writes per-lane scalar code that the CPU
driver vectorizes across work-items, and the driver never makes ``vdpbf16ps`` of widened bf16
FMAs (bf16 GEMMs ran at the fp32 rate, 0.4-0.45x torch's bf16 GEMM). These kernels are explicit
SIMD instead: a work-group of one work-item computes an MR x NR block of C in ``<16 x float>``
registers, calling ``llvm.x86.avx512bf16.dpbf16ps.512``. The SPIR-V carries that call as an
imported function (:func:`~xejit.codegen.spirv.rename_imports` gives it the intrinsic's name,
which LLVM's SPIR-V backend would not emit); the CPU runtime's LLVM resolves the name to the
intrinsic when it builds the program. Whether the driver does is probed, not assumed
(:func:`available`).

Semantics: C = round_bf16(A @ B) with fp32 sums, as the generic lowering's bf16 GEMM, except
that the instruction treats denormal inputs and results as zero and adds each pair's products
(k+1, then k) before the sum: results differ from the fp32-FMA kernels by rounding only, within
the bf16 tolerance.

Layout: B is packed once per call into VNNI panels (:func:`pack_b_module`): panel p holds columns
p*NR .. p*NR+NR as [ceil(K/2), NR] 32-bit words, each the bf16 pair (B[2k, n], B[2k+1, n]),
zero-padded past K and N. A is read in place (its bf16 pairs are consecutive in a row).

Example:
    >>> m = gemm_module()
    >>> "dot_bf16_gemm" in str(m)
    True
"""
from __future__ import annotations

import os

from llvmlite import ir

from .. import options
from . import builtins as bi
from .lower_generic import cpu_flags
from .spirv import rename_imports, to_spirv as emit_spirv

#: the placeholder name of the imported dot-product function, renamed in the SPIR-V
_PLACEHOLDER = "xejit_x86_dpbf16ps_512"
#: the LLVM intrinsic the CPU runtime resolves it to (its pre-LLVM-17 signature, with <16 x i32>
#: operands: SPIR-V has no 32-element vectors, and the runtime's LLVM upgrades the call)
INTRINSIC = "llvm.x86.avx512bf16.dpbf16ps.512"
#: rows and 16-column groups of C per work-item: 6 x 64 is 24 accumulators, 4 B registers and a
#: broadcast of 32 zmm. Kernel alone, B panel in L1, two cores, GFLOP/s: 6x32 280, 8x32 355,
#: 14x32 325 (spills), 6x64 382 (torch's bf16 GEMM 370-427 in the benchmark).
MR, NG = 6, 4
NR = 16 * NG
#: dot_bf16_gemm_rows' rows and columns per work-item (16 accumulators: a batch of up to 8 rows)
ROWS_MR, ROWS_NR = 8, 32
#: pairs of k a pack_b work-item packs
PACK_PAIRS = 32

VF32 = ir.VectorType(bi.F32, 16)
VI32 = ir.VectorType(bi.I32, 16)
VI16 = ir.VectorType(bi.I16, 16)
I64 = bi.I64


def _dot_fn(m: ir.Module) -> ir.Function:
    fn = m.globals.get(_PLACEHOLDER)
    if fn is None:
        fn = ir.Function(m, ir.FunctionType(VF32, [VF32, VI32, VI32]), _PLACEHOLDER)
    return fn


def _pointers(b: ir.IRBuilder, args, n: int) -> list:
    """The kernel's arguments with the first ``n`` (addresses: the CPU device reads host memory,
    and the launch passes every argument by value) as global pointers."""
    return [b.inttoptr(x, bi.GLOBAL) for x in args[:n]] + list(args[n:])


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _splat(b: ir.IRBuilder, x: ir.Value, vt: ir.VectorType) -> ir.Value:
    v = b.insert_element(ir.Constant(vt, None), x, bi.I32(0))
    return b.shuffle_vector(v, ir.Constant(vt, None), ir.Constant(ir.VectorType(bi.I32, vt.count), [0] * vt.count))


def _round_bf16(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float or <16 x float> -> its bf16 bits (i16 or <16 x i16>), nearest-even; NaN a quiet NaN
    (ir.core.f32_to_bf16_bits)."""
    vec = isinstance(x.type, ir.VectorType)
    ity, hty = (VI32, VI16) if vec else (bi.I32, bi.I16)
    k = (lambda v: ir.Constant(VI32, [v] * 16)) if vec else bi.I32   # noqa: E731
    bits = b.bitcast(x, ity)
    lsb = b.and_(b.lshr(bits, k(16)), k(1))
    r = b.lshr(b.add(b.add(bits, k(0x7FFF)), lsb), k(16))
    r = b.select(b.fcmp_unordered("uno", x, x), k(0x7FC0), r)
    return b.trunc(r, hty)


def _widen_bf16(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """bf16 bits (i16 or <16 x i16>) as fp32 (float or <16 x float>): the bits shifted up."""
    vec = isinstance(x.type, ir.VectorType)
    bits = b.shl(b.zext(x, VI32 if vec else bi.I32), ir.Constant(VI32, [16] * 16) if vec else bi.I32(16))
    return b.bitcast(bits, VF32 if vec else bi.F32)


def _phis(b: ir.IRBuilder, rows: int, cols: int, ty: ir.Type, incoming: list) -> list[list[ir.Instruction]]:
    """A rows x cols grid of phis of type ``ty``, each given ``incoming``: (value or grid of
    values, block) pairs (the accumulators at a loop head or a join)."""
    grid = [[b.phi(ty) for _ in range(cols)] for _ in range(rows)]
    for value, block in incoming:
        for r in range(rows):
            for t in range(cols):
                grid[r][t].add_incoming(value[r][t] if isinstance(value, list) else value, block)
    return grid


def _add_incoming(grid: list, values: list, block: ir.Block) -> None:
    """Give each phi of ``grid`` its value of ``values`` from ``block`` (a loop's back edge)."""
    for row, vals in zip(grid, values):
        for phi, v in zip(row, vals):
            phi.add_incoming(v, block)


def gemm_module(packed: bool = True) -> ir.Module:
    """``dot_bf16_gemm(a, bp, c, M, N, K, lda, ldc, ldb)`` (a, bp, c addresses): C[M, N] (bf16
    bits, row pitch ldc) = A[M, K] (bf16 bits, row pitch lda) @ B packed by ``dot_bf16_pack_b``.
    Work-group (i, p) of one work-item: rows i*MR .. i*MR+MR (rows past M read row M-1 and are
    not stored), panel p. ``packed=False`` gives ``dot_bf16_gemm_rows``: ``bp`` is B itself,
    row-major with row pitch ldb and N a multiple of ROWS_NR, MR x ROWS_NR blocks, each pair
    word made from two rows as the packing makes it (for few rows of A, where packing B would
    cost more than the GEMM)."""
    name = "dot_bf16_gemm" if packed else "dot_bf16_gemm_rows"
    mr, ng = (MR, NG) if packed else (ROWS_MR, ROWS_NR // 16)
    nr = 16 * ng
    m = bi.new_module(name)
    fn = bi.kernel(m, name, [I64] * 9)
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    a, bp, c, M, N, K, lda, ldc, ldb = _pointers(b, fn.args, 3)
    dot = _dot_fn(m)

    def words(b, kk, single=False):
        """B's pair words for pair ``kk`` of this panel, one vector per 16 columns (``single``:
        row 2kk only, the high halves zero: an odd K's last k)."""
        if packed:
            wb = b.add(panel, b.mul(kk, I64(nr)))
            out = [b.load(b.gep(bp, [b.add(wb, I64(16 * g))], source_etype=bi.I32), typ=VI32) for g in range(ng)]
            for inst in out:
                inst.align = 64
            return out
        r0 = b.add(b.mul(b.shl(kk, I64(1)), ldb), b.mul(p, I64(nr)))
        out = []
        for g in range(ng):
            rows_ = [r0] if single else [r0, b.add(r0, ldb)]
            v = [b.load(b.gep(bp, [b.add(r, I64(16 * g))], source_etype=bi.I16), typ=VI16) for r in rows_]
            for x in v:
                x.align = 2
            w = b.zext(v[0], VI32)
            if not single:
                w = b.or_(w, b.shl(b.zext(v[1], VI32), ir.Constant(VI32, [16] * 16)))
            out.append(w)
        return out
    i0 = b.mul(bi.group_id(b, 0), I64(mr))
    p = bi.group_id(b, 1)
    k2 = b.lshr(K, I64(1))                      # whole pairs
    kp2 = b.lshr(b.add(K, I64(1)), I64(1))      # packed pairs (an odd K's last is zero-padded)
    panel = b.mul(b.mul(p, kp2), I64(nr))       # i32 words before panel p
    last = b.sub(M, I64(1))
    rows = [b.mul(_min(b, b.add(i0, I64(r)), last), lda) for r in range(mr)]   # i16 offsets
    zero = ir.Constant(VF32, [0.0] * 16)

    loop, tail, tail_pair, done = (fn.append_basic_block(n) for n in ("loop", "tail", "tail_pair", "done"))
    has_pairs = b.icmp_signed(">", k2, I64(0))
    b.cbranch(has_pairs, loop, tail)

    b.position_at_end(loop)
    kk = b.phi(I64, "kk")
    kk.add_incoming(I64(0), entry)
    accs = _phis(b, mr, ng, VF32, [(zero, entry)])
    bv = words(b, kk)
    new = []
    for r in range(mr):
        pa = b.gep(a, [b.add(rows[r], b.shl(kk, I64(1)))], source_etype=bi.I16)
        av = b.load(pa, typ=bi.I32)
        av.align = 2
        asp = _splat(b, av, VI32)
        new.append([b.call(dot, [accs[r][g], asp, bv[g]]) for g in range(ng)])
    kk1 = b.add(kk, I64(1))
    kk.add_incoming(kk1, loop)
    _add_incoming(accs, new, loop)
    b.cbranch(b.icmp_signed("<", kk1, k2), loop, tail)

    # an odd K: the last k as a pair with a zero (the packed B's second half is zero there)
    b.position_at_end(tail)
    acc_t = _phis(b, mr, ng, VF32, [(zero, entry), (new, loop)])
    b.cbranch(b.icmp_signed("<", b.shl(k2, I64(1)), K), tail_pair, done)

    b.position_at_end(tail_pair)
    bv = words(b, k2, single=True)
    acc_o = []
    for r in range(mr):
        av = b.load(b.gep(a, [b.add(rows[r], b.sub(K, I64(1)))], source_etype=bi.I16), typ=bi.I16)
        asp = _splat(b, b.zext(av, bi.I32), VI32)
        acc_o.append([b.call(dot, [acc_t[r][g], asp, bv[g]]) for g in range(ng)])
    b.branch(done)

    b.position_at_end(done)
    fin = _phis(b, mr, ng, VF32, [(acc_t, tail), (acc_o, tail_pair)])
    n0 = b.mul(p, I64(nr))
    for r in range(mr):
        row = b.add(i0, I64(r))
        store_row = fn.append_basic_block(f"store{r}")
        after = fn.append_basic_block(f"after{r}")
        b.cbranch(b.icmp_signed("<", row, M), store_row, after)
        b.position_at_end(store_row)
        base = b.mul(row, ldc)
        for g in range(ng):
            col = b.add(n0, I64(16 * g))
            bits = _round_bf16(b, fin[r][g])
            full, part, nxt = (fn.append_basic_block(f"{s}{r}_{g}") for s in ("full", "part", "next"))
            b.cbranch(b.icmp_signed("<=", b.add(col, I64(16)), N), full, part)
            b.position_at_end(full)
            st = b.store(bits, b.gep(c, [b.add(base, col)], source_etype=bi.I16))
            st.align = 2
            b.branch(nxt)
            b.position_at_end(part)   # the last panel's columns past N are not stored
            for j in range(16):
                yes, no = fn.append_basic_block(f"e{r}_{g}_{j}"), fn.append_basic_block(f"n{r}_{g}_{j}")
                cj = b.add(col, I64(j))
                b.cbranch(b.icmp_signed("<", cj, N), yes, no)
                b.position_at_end(yes)
                b.store(b.extract_element(bits, bi.I32(j)), b.gep(c, [b.add(base, cj)], source_etype=bi.I16))
                b.branch(no)
                b.position_at_end(no)
            b.branch(nxt)
            b.position_at_end(nxt)
        b.branch(after)
        b.position_at_end(after)
    b.ret_void()
    return m


def _loop(b: ir.IRBuilder, fn: ir.Function, lo: ir.Value, hi: ir.Value, body, name: str) -> None:
    """``for i in range(lo, hi): body(b, i)`` (a uniform loop; ``b`` continues after it)."""
    pre = b.block
    head, exit_ = fn.append_basic_block(name), fn.append_basic_block(name + "_end")
    b.cbranch(b.icmp_signed("<", lo, hi), head, exit_)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(lo, pre)
    body(b, i)
    i1 = b.add(i, I64(1))
    i.add_incoming(i1, b.block)
    b.cbranch(b.icmp_signed("<", i1, hi), head, exit_)
    b.position_at_end(exit_)


def pack_b_module() -> ir.Module:
    """``dot_bf16_pack_b(b, bp, K, N, ldk, ldn)`` (b, bp addresses): B[K, N] (bf16 bits, element
    strides ldk, ldn) into VNNI panels (module docstring). Work-group (p, s) of one work-item:
    panel p, its pairs s*PACK_PAIRS .. (a panel's NR columns are 2 * NR contiguous bytes of a
    row-major B: a work-item per 16 columns read half cache lines, 20 GB/s at 2048^2)."""
    m = bi.new_module("dot_bf16_pack_b")
    fn = bi.kernel(m, "dot_bf16_pack_b", [I64] * 6)
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    src, bp, K, N, ldk, ldn = _pointers(b, fn.args, 2)
    p, s = bi.group_id(b, 0), bi.group_id(b, 1)
    kp2 = b.lshr(b.add(K, I64(1)), I64(1))
    col0 = b.mul(p, I64(NR))
    dst0 = b.mul(b.mul(p, kp2), I64(NR))
    k_lo = b.mul(s, I64(PACK_PAIRS))
    k_hi = _min(b, b.add(k_lo, I64(PACK_PAIRS)), kp2)
    # a whole panel of whole pairs by vectors (row-major B) or 32-bit words (column-major B: a
    # pair is two adjacent elements of a column); the rest element by element
    whole = b.icmp_signed("<=", b.add(col0, I64(NR)), N)
    rows = b.icmp_signed("==", ldn, I64(1))
    cols = b.icmp_signed("==", ldk, I64(1))
    k_fast = b.select(b.and_(whole, b.or_(rows, cols)), _min(b, k_hi, b.lshr(K, I64(1))), k_lo)

    def store(b, kk, g, words):
        st = b.store(words, b.gep(bp, [b.add(dst0, b.add(b.mul(kk, I64(NR)), I64(16 * g)))], source_etype=bi.I32))
        st.align = 64

    def by_rows(b, kk):
        r0 = b.add(b.mul(b.shl(kk, I64(1)), ldk), col0)
        for g in range(NG):
            v = [b.load(b.gep(src, [b.add(r, I64(16 * g))], source_etype=bi.I16), typ=VI16) for r in (r0, b.add(r0, ldk))]
            for x in v:
                x.align = 2
            # the pair word as zext(row 2k) | zext(row 2k+1) << 16: vpmovzxwd, vpslld, vpord (an
            # interleaving shufflevector became ~40 shuffles in the driver's code)
            lo, hi = (b.zext(x, VI32) for x in v)
            store(b, kk, g, b.or_(lo, b.shl(hi, ir.Constant(VI32, [16] * 16))))

    def by_cols(b, kk):
        for g in range(NG):
            words = ir.Constant(VI32, None)
            for j in range(16):
                off = b.add(b.mul(b.add(col0, I64(16 * g + j)), ldn), b.shl(kk, I64(1)))
                w = b.load(b.gep(src, [off], source_etype=bi.I16), typ=bi.I32)
                w.align = 2
                words = b.insert_element(words, w, bi.I32(j))
            store(b, kk, g, words)

    def by_elements(b, kk):   # reads outside B clamped to its last row / column, replaced by zeros
        lastk, lastn = b.sub(K, I64(1)), b.sub(N, I64(1))
        for g in range(NG):
            words = ir.Constant(VI32, None)
            for j in range(16):
                col = b.add(col0, I64(16 * g + j))
                halves = []
                for h in range(2):
                    k = b.add(b.shl(kk, I64(1)), I64(h))
                    ok = b.and_(b.icmp_signed("<", k, K), b.icmp_signed("<", col, N))
                    off = b.add(b.mul(_min(b, k, lastk), ldk), b.mul(_min(b, col, lastn), ldn))
                    v = b.load(b.gep(src, [off], source_etype=bi.I16), typ=bi.I16)
                    halves.append(b.zext(b.select(ok, v, bi.I16(0)), bi.I32))
                words = b.insert_element(words, b.or_(halves[0], b.shl(halves[1], bi.I32(16))), bi.I32(j))
            store(b, kk, g, words)

    row_path, col_path, rest = (fn.append_basic_block(n) for n in ("rows", "cols", "rest"))
    b.cbranch(rows, row_path, col_path)
    b.position_at_end(row_path)
    _loop(b, fn, k_lo, k_fast, by_rows, "by_rows")
    b.branch(rest)
    b.position_at_end(col_path)
    _loop(b, fn, k_lo, k_fast, by_cols, "by_cols")
    b.branch(rest)
    b.position_at_end(rest)
    _loop(b, fn, k_fast, k_hi, by_elements, "by_elements")
    b.ret_void()
    return m


#: gemm_bt_module's rows of A and rows of B^T (columns of C) per work-item: 16 accumulators;
#: for one row of A, BT_SKINNY (each B^T vector used by as many FMAs as there are rows: 4 x 4
#: at M = 1 ran 4x the FMAs, 1x2048x2048 fp32 489 -> 336 us a call, bf16 211 -> 152; at M = 2
#: two 1 x 8 blocks read B twice: bf16 223 -> 313)
BT_MR, BT_NT = 4, 4
BT_SKINNY = (1, 8)


def bt_name(bf16: bool, mr: int = BT_MR, nt: int = BT_NT) -> str:
    """The name of gemm_bt_module's kernel for a dtype and block."""
    return f"dot_bt_{'bf16' if bf16 else 'f32'}_{mr}x{nt}"


def _hsum(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """The sum of a <16 x float>'s lanes, as a tree of halves."""
    n = 16
    while n > 1:
        n //= 2
        lo = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(bi.I32, n), list(range(n))))
        hi = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(bi.I32, n), list(range(n, 2 * n))))
        v = b.fadd(lo, hi)
    return b.extract_element(v, bi.I32(0))


def gemm_bt_module(bf16: bool, mr: int = BT_MR, nt: int = BT_NT) -> ir.Module:
    """``dot_bt_bf16`` / ``dot_bt_f32(a, bt, c, M, N, K, lda, ldb, ldc)`` (a, bt, c addresses):
    C[M, N] = A[M, K] @ B where B is column-major, i.e. B^T = bt[N, K] row-major (row pitch
    ldb): each C element is the dot product of two contiguous rows, so B is read in place, row
    by row (``x @ w.T`` with a torch ``Linear`` weight ``w``). Work-group (i, j) of one
    work-item: rows i*BT_MR .. of A, rows j*BT_NT .. of bt (clamped to the last row past M or N,
    not stored), 16 lanes of k at a time in BT_MR x BT_NT accumulators -- fp32: FMAs over 16
    values of k; bf16: ``vdpbf16ps`` over 32 (a lane is a pair of k in both operands, which is
    how rows store them) -- then each accumulator's lanes summed, and the k past the last
    whole vector added one by one. C has A's dtype (bf16: rounded nearest-even). ``mr`` x
    ``nt`` other than BT_MR x BT_NT: BT_SKINNY for one row of A, no rows to clamp."""
    name = bt_name(bf16, mr, nt)
    m = bi.new_module(name)
    fn = bi.kernel(m, name, [I64] * 9)
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    a, bt, c, M, N, K, lda, ldb, ldc = _pointers(b, fn.args, 3)
    elt = bi.I16 if bf16 else bi.F32
    step = 32 if bf16 else 16                  # k per vector
    vload = VI32 if bf16 else VF32             # bf16: 16 words of two k each
    i0, j0 = b.mul(bi.group_id(b, 0), I64(mr)), b.mul(bi.group_id(b, 1), I64(nt))
    arow = [b.mul(_min(b, b.add(i0, I64(r)), b.sub(M, I64(1))), lda) for r in range(mr)]
    brow = [b.mul(_min(b, b.add(j0, I64(t)), b.sub(N, I64(1))), ldb) for t in range(nt)]
    kv = b.mul(b.udiv(K, I64(step)), I64(step))   # k in whole vectors
    zero = ir.Constant(VF32, [0.0] * 16)
    dot = _dot_fn(m) if bf16 else None
    fma = None if bf16 else ir.Function(m, ir.FunctionType(VF32, [VF32] * 3), "llvm.fma.v16f32")

    loop, after = fn.append_basic_block("loop"), fn.append_basic_block("after")
    b.cbranch(b.icmp_signed("<", I64(0), kv), loop, after)
    b.position_at_end(loop)
    k = b.phi(I64)
    k.add_incoming(I64(0), entry)
    acc = _phis(b, mr, nt, VF32, [(zero, entry)])

    def vec(base, off):
        x = b.load(b.gep(base, [b.add(off, k)], source_etype=elt), typ=vload)
        x.align = 2 if bf16 else 4
        return x
    av = [vec(a, o) for o in arow]
    bv = [vec(bt, o) for o in brow]
    new = [[(b.call(dot, [acc[r][t], av[r], bv[t]]) if bf16 else b.call(fma, [av[r], bv[t], acc[r][t]]))
            for t in range(nt)] for r in range(mr)]
    k1 = b.add(k, I64(step))
    k.add_incoming(k1, loop)
    _add_incoming(acc, new, loop)
    b.cbranch(b.icmp_signed("<", k1, kv), loop, after)

    b.position_at_end(after)
    fin = _phis(b, mr, nt, VF32, [(zero, entry), (new, loop)])
    sums = [[_hsum(b, fin[r][t]) for t in range(nt)] for r in range(mr)]

    # the k past the last whole vector, one at a time
    tail, store = fn.append_basic_block("tail"), fn.append_basic_block("store")
    pre = b.block
    b.cbranch(b.icmp_signed("<", kv, K), tail, store)
    b.position_at_end(tail)
    kt = b.phi(I64)
    kt.add_incoming(kv, pre)
    part = _phis(b, mr, nt, bi.F32, [(sums, pre)])

    def scalar(base, off):
        x = b.load(b.gep(base, [b.add(off, kt)], source_etype=elt), typ=elt)
        return _widen_bf16(b, x) if bf16 else x
    at = [scalar(a, o) for o in arow]
    btv = [scalar(bt, o) for o in brow]
    nxt = [[b.fadd(part[r][t], b.fmul(at[r], btv[t])) for t in range(nt)] for r in range(mr)]
    _add_incoming(part, nxt, tail)
    kt1 = b.add(kt, I64(1))
    kt.add_incoming(kt1, tail)
    b.cbranch(b.icmp_signed("<", kt1, K), tail, store)

    b.position_at_end(store)
    out = _phis(b, mr, nt, bi.F32, [(sums, pre), (nxt, tail)])
    for r in range(mr):
        row = b.add(i0, I64(r))
        for t in range(nt):
            col = b.add(j0, I64(t))
            yes, no = fn.append_basic_block(f"st{r}_{t}"), fn.append_basic_block(f"sk{r}_{t}")
            b.cbranch(b.and_(b.icmp_signed("<", row, M), b.icmp_signed("<", col, N)), yes, no)
            b.position_at_end(yes)
            v = out[r][t]
            if bf16:
                v = _round_bf16(b, v)
            b.store(v, b.gep(c, [b.add(b.mul(row, ldc), col)], source_etype=elt))
            b.branch(no)
            b.position_at_end(no)
    b.ret_void()
    return m


def probe_module() -> ir.Module:
    """``dot_bf16_probe(c, a, b)``: c[0:16] += the dot products of a's and b's 16 bf16 pairs."""
    m = bi.new_module("dot_bf16_probe")
    fn = bi.kernel(m, "dot_bf16_probe", [I64] * 3)
    b = ir.IRBuilder(fn.append_basic_block())
    c, a, bb = _pointers(b, fn.args, 3)
    loads = [b.load(x, typ=t) for x, t in ((c, VF32), (a, VI32), (bb, VI32))]
    for x in loads:
        x.align = 4   # (host arrays: numpy aligns to 16 bytes at most)
    b.store(b.call(_dot_fn(m), loads), c).align = 4
    b.ret_void()
    return m


def to_spirv(module: ir.Module) -> bytes:
    """The module's SPIR-V with the dot-product import named as the intrinsic."""
    return rename_imports(emit_spirv(module), {_PLACEHOLDER: INTRINSIC})


def cpu_has_bf16_dot() -> bool:
    """Whether the CPU device's code may use ``vdpbf16ps``: the CPU has AVX512_BF16 (/proc/cpuinfo)
    and the runtime compiles for this CPU (``CL_CONFIG_CPU_TARGET_ARCH`` unset: code built for
    another CPU could not use it, or would not run here); ``XEJIT_CPU_BF16_DOT=0`` turns it off."""
    if not options.current().cpu_bf16_dot:
        return False
    if os.environ.get("CL_CONFIG_CPU_TARGET_ARCH", "").strip():
        return False
    return "avx512_bf16" in cpu_flags()
