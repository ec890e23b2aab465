"""The decode GEMV for the CPU device: one row of ``a`` times a row-major ``b``, explicit SIMD.

``c[N] = a[K] @ b[K, N]`` is memory-bound: every element of ``b`` is used once. What decides its
speed on a CPU is how ``b`` streams through the caches. The generic lowering's skinny kernel
(kernels/gemm.py, ``gemv_kernel``) runs column tiles of work-items over K slices; this kernel is
written for the CPU's prefetchers instead: a work-item (work-group of one) takes a slice of K
and reads RB of its rows at a time from end to end, RB sequential streams through 4 KB pages
that the L2 stream prefetcher follows, multiplying them into a row of partial sums that stays in
L1 (8 KB at N = 2048), in blocks of NG x 16 columns held in ``<16 x float>`` registers. The last
work-item to finish (a counter) adds the slices' rows into ``c``, so the host adds nothing
(xejit/cpu_simd_gemm.py, :func:`gemv`).

Measured against the alternatives (kernel alone, 1x2048x2048 fp32, two Zen 4 cores, medians of 7
series, one process; numpy's own call 177-230 us in the same runs): RB = 8 rows, 4 x 16 columns,
4-8 slices 164-176 us; the generic skinny kernel 208; RB = 16 286 (more streams than the
prefetcher follows); a column panel of 16 x 16 columns per work-item over all of K, each row's
1 KB a separate stream (no host sum) 256; 2 slices 237 (two work-groups on two threads: one
often waits for the other).

Example:
    >>> m = gemv_module(False)
    >>> "gemv_rows_f32" in str(m)
    True
"""
from __future__ import annotations

from llvmlite import ir

from . import builtins as bi
from .cpu_bf16_dot import VF32, VI16, _loop, _min, _pointers, _round_bf16, _splat, _widen_bf16

I64 = bi.I64
#: rows of b a pass reads at a time (the streams the prefetcher follows; see the module docstring)
RB = 8
#: 16-column vectors a block of the row of partial sums holds in registers
NG = 4
#: the rows of a the kernels take at a time (one kernel each)
ROWS = (1, 2)


def gemv_name(bf16: bool, mr: int = 1) -> str:
    """The name of :func:`gemv_module`'s kernel for a dtype and rows of ``a``."""
    return f"gemv_rows_{'bf16' if bf16 else 'f32'}_{mr}"


def _widen(b: ir.IRBuilder, x: ir.Value, bf16: bool) -> ir.Value:
    """bf16 bits as fp32; fp32 as it is."""
    return _widen_bf16(b, x) if bf16 else x


def gemv_module(bf16: bool, mr: int = 1) -> ir.Module:
    """``gemv_rows_f32_<mr>`` / ``gemv_rows_bf16_<mr>(a, b, p, c, done, N, K, lda, ldb, ldp, ldc,
    ks, slices)`` (a, b, p, c, done addresses): work-group s (of one work-item, ``slices`` of them)
    writes the mr rows p[s * mr + i, :N] (fp32, row pitch ldp) = a[i, k0:k1] @ b[k0:k1, :] for
    k0 = s * ks, k1 = min(k0 + ks, K): ``a`` mr rows of K contiguous elements (row pitch lda),
    ``b`` row-major (row pitch ldb), both fp32 or both bf16 bits, products summed in fp32 with
    FMAs. ``ks`` is a multiple of RB but for the last slice's rows; N any (blocks of NG x 16
    columns, then 16, then one at a time). Then it adds 1 to the 32-bit counter at ``done``
    (which the host zeroes before the launch); the work-group that finds ``slices - 1`` there
    is the last, and writes c[i, :N] (row pitch ldc, a's dtype: bf16 rounded nearest-even) = the
    sum of the slices' rows, in slice order."""
    name = gemv_name(bf16, mr)
    m = bi.new_module(name)
    fn = bi.kernel(m, name, [I64] * 13)
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    a, bm, p, c, done, N, K, lda, ldb, ldp, ldc, ks, slices = _pointers(b, fn.args, 5)
    elt, vload = (bi.I16, VI16) if bf16 else (bi.F32, VF32)
    s = bi.group_id(b, 0)
    k0 = b.mul(s, ks)
    k1 = _min(b, b.add(k0, ks), K)
    # this slice's rows of partial sums, and a's rows
    ys = [b.gep(p, [b.mul(b.add(b.mul(s, I64(mr)), I64(i)), ldp)], source_etype=bi.F32) for i in range(mr)]
    arows = [b.gep(a, [b.mul(I64(i), lda)], source_etype=elt) for i in range(mr)]
    n64, n16 = b.mul(b.udiv(N, I64(16 * NG)), I64(16 * NG)), b.mul(b.udiv(N, I64(16)), I64(16))
    vfma = ir.Function(m, ir.FunctionType(VF32, [VF32] * 3), "llvm.fma.v16f32")
    sfma = ir.Function(m, ir.FunctionType(bi.F32, [bi.F32] * 3), "llvm.fma.f32")
    zero = ir.Constant(VF32, [0.0] * 16)

    def store(b, ptr, v):
        b.store(v, ptr).align = 4

    def load(b, ptr, ty):
        x = b.load(ptr, typ=ty)
        x.align = 4 if ty in (VF32, bi.F32) else 2
        return x

    # zero the row of partial sums (every pass below adds into it)
    for i, y in enumerate(ys):
        _loop(b, fn, I64(0), b.udiv(N, I64(16)),
              lambda b, j: store(b, b.gep(y, [b.mul(j, I64(16))], source_etype=bi.F32), zero), f"zero{i}")
        _loop(b, fn, n16, N, lambda b, n: store(b, b.gep(y, [n], source_etype=bi.F32), bi.F32(0.0)), f"zero1_{i}")

    def rows_pass(b, k, rows: int) -> None:
        """y[i] += a[i, k:k+rows] @ b[k:k+rows, :] for each row i of a."""
        av = [[_widen(b, load(b, b.gep(ar, [b.add(k, I64(r))], source_etype=elt), elt), bf16) for r in range(rows)]
              for ar in arows]
        avv = [[_splat(b, x, VF32) for x in row] for row in av]
        rowp = [b.gep(bm, [b.mul(b.add(k, I64(r)), ldb)], source_etype=elt) for r in range(rows)]

        def block(width: int):
            def body(b, j):
                col = b.mul(j, I64(16 * width))
                yp = [[b.gep(y, [b.add(col, I64(16 * g))], source_etype=bi.F32) for g in range(width)] for y in ys]
                acc = [[load(b, q, VF32) for q in row] for row in yp]
                for r in range(rows):
                    for g in range(width):
                        x = _widen(b, load(b, b.gep(rowp[r], [b.add(col, I64(16 * g))], source_etype=elt), vload), bf16)
                        for i in range(mr):
                            acc[i][g] = b.call(vfma, [avv[i][r], x, acc[i][g]])
                for qs, vs in zip(yp, acc):
                    for q, v in zip(qs, vs):
                        store(b, q, v)
            return body

        _loop(b, fn, I64(0), b.udiv(N, I64(16 * NG)), block(NG), f"cols{rows}")
        _loop(b, fn, b.udiv(n64, I64(16)), b.udiv(N, I64(16)), block(1), f"cols16_{rows}")

        def one(b, n):
            qs = [b.gep(y, [n], source_etype=bi.F32) for y in ys]
            acc = [load(b, q, bi.F32) for q in qs]
            for r in range(rows):
                x = _widen(b, load(b, b.gep(rowp[r], [n], source_etype=elt), elt), bf16)
                acc = [b.call(sfma, [av[i][r], x, acc[i]]) for i in range(mr)]
            for q, v in zip(qs, acc):
                store(b, q, v)
        _loop(b, fn, n16, N, one, f"cols1_{rows}")

    nblk = b.sdiv(b.sub(k1, k0), I64(RB))
    _loop(b, fn, I64(0), nblk, lambda b, i: rows_pass(b, b.add(k0, b.mul(i, I64(RB))), RB), "rows")
    _loop(b, fn, b.add(k0, b.mul(nblk, I64(RB))), k1, lambda b, k: rows_pass(b, k, 1), "row")

    # the last work-group to finish adds the slices into c (seq_cst: its loads see every other
    # work-group's stores made before their add)
    old = b.atomic_rmw("add", done, bi.I32(1), "seq_cst")
    last, end = fn.append_basic_block("last"), fn.append_basic_block("end")
    b.cbranch(b.icmp_unsigned("==", b.zext(old, I64), b.sub(slices, I64(1))), last, end)
    b.position_at_end(last)
    for i in range(mr):
        crow = b.gep(c, [b.mul(I64(i), ldc)], source_etype=elt)
        for vec, lo, hi in ((True, I64(0), b.udiv(N, I64(16))), (False, n16, N)):
            def col(b, j, vec=vec, crow=crow, i=i):
                off = b.mul(j, I64(16)) if vec else j
                ty = VF32 if vec else bi.F32
                total = _sum_slices(b, fn, lambda b, t: load(b, b.gep(p, [b.add(b.mul(b.add(b.mul(t, I64(mr)), I64(i)), ldp), off)],
                                                                       source_etype=bi.F32), ty), slices, ty)
                out = b.gep(crow, [off], source_etype=elt)
                if bf16:
                    b.store(_round_bf16(b, total), out).align = 2
                else:
                    store(b, out, total)
            _loop(b, fn, lo, hi, col, f"sum{i}_{'v' if vec else 's'}")
    b.branch(end)
    b.position_at_end(end)
    b.ret_void()
    return m


def _sum_slices(b: ir.IRBuilder, fn: ir.Function, value, slices: ir.Value, ty: ir.Type) -> ir.Value:
    """``value(b, 0) + value(b, 1) + ... + value(b, slices - 1)`` in that order (slices >= 1)."""
    first = value(b, I64(0))
    pre = b.block
    head, exit_ = fn.append_basic_block("slice"), fn.append_basic_block("slice_end")
    b.cbranch(b.icmp_signed("<", I64(1), slices), head, exit_)
    b.position_at_end(head)
    t, acc = b.phi(I64), b.phi(ty)
    t.add_incoming(I64(1), pre)
    acc.add_incoming(first, pre)
    nxt = b.fadd(acc, value(b, t))
    t1 = b.add(t, I64(1))
    t.add_incoming(t1, head)
    acc.add_incoming(nxt, head)
    b.cbranch(b.icmp_signed("<", t1, slices), head, exit_)
    b.position_at_end(exit_)
    total = b.phi(ty)
    total.add_incoming(first, pre)
    total.add_incoming(nxt, head)
    return total
