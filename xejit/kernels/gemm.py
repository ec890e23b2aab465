"""The GEMM kernel written in the xejit DSL, and its configuration space per target.

``gemm_kernel`` computes ``c = act(a @ b + bias)`` for 2D ``a`` [M, K] and ``b`` [K, N] in any
row- or column-major layout (the kernel is specialized on each array's layout, so transposed
views need no copy). It accumulates in fp32 for float inputs and in int32 for int8 inputs.
The epilogue (bias row, ``relu`` or ``gelu_tanh``) is chosen by constexprs, so an unused
epilogue costs nothing.

``CONFIGS[target]`` lists the ``xejit.Config`` candidates the autotuner tries on that target
(``pvc``/``bmg``/``lnl`` share the Xe-HPC/Xe2 space; ``generic`` is for the CPU device).

Example:
    >>> import numpy as np, xejit
    >>> a = np.ones((8, 4), np.float32); b = np.ones((4, 8), np.float32); c = np.empty((8, 8), np.float32)
    >>> gemm_kernel[(1, 1)](a, b, a, c, 8, 8, 4, BM=8, BN=8, BK=4)   # doctest: +SKIP
"""
from __future__ import annotations

# The DSL by module, not through the package: ``xejit/__init__`` imports matmul, which imports this.
from xejit import language as xl
from xejit.autotuner import Config
from xejit.jit import kernel

ACTIVATIONS = (None, "relu", "gelu_tanh")


@kernel
def gemm_kernel(a, b, bias, c, M, N, K,
                BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr,
                ACC: xl.constexpr = xl.float32, HAS_BIAS: xl.constexpr = False,
                ACT: xl.constexpr = None, PRECISION: xl.constexpr = None):
    """c[M, N] = ACT(a[M, K] @ b[K, N] + bias[N]); one workgroup per BM x BN tile of c.
    ``PRECISION="tf32"`` lets fp32 operands go through DPAS as tf32 (``tile_mma``'s input_precision)."""
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.zeros([BM, BN], ACC)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc, input_precision=PRECISION)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    if HAS_BIAS:
        acc = acc + xl.load_tile(xl.init_tile(bias, [0, n], [1, BN])).to(ACC)
    if ACT == "relu":   # NaN stays NaN (torch.relu); maximum(NaN, 0) would give 0
        acc = xl.where(acc < 0, 0, acc)
    if ACT == "gelu_tanh":
        inner = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
        acc = 0.5 * acc * (1.0 + xl.tanh(inner))
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc.to(c.dtype))


@xl.inline
def _gemv_step(a, b, p, r, pr, k, n, R: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    """p[pr+r : pr+r+R, n:n+BN] += a[r:r+R, k:k+BK] @ b[k:k+BK, n:n+BN], updated in place."""
    tp = xl.init_tile(p, [pr + r, n], [R, BN])
    acc = xl.tile_mma(xl.load_tile(xl.init_tile(a, [r, k], [R, BK])),
                      xl.load_tile(xl.init_tile(b, [k, n], [BK, BN])), xl.load_tile(tp))
    xl.store_tile(tp, acc)


@kernel
def gemv_kernel(a, b, p, N, K, KS, NP, N0, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr,
                RB: xl.constexpr, ACC: xl.constexpr = xl.float32, PEEL: xl.constexpr = False):
    """p[s*BM : s*BM+BM, cols] = a[:, ks] @ b[ks, cols] for program (s, j): K slice
    ks = s*KS .. s*KS+KS, column panel cols = N0 + j*NP .. N0 + j*NP+NP. The skinny-GEMM kernel
    (M = BM <= 8, decode GEMV): a program streams its slice of b's rows BK at a time through its
    panel, adding into p's BM x NP block (L1/L2-resident) tile by tile in place; the caller sums
    the K slices' blocks when there are several. A tile is RB (or BM - RB, BM <= 2 * RB) rows x
    BN columns, one register strip, which lower_generic updates in place inside the mma's bounds
    test (no accumulator live across a branch join); with two row tiles the b tile's second read
    comes from L1. ``N0`` (<= 0) is the first panel's start: the caller shifts the tiles so that
    b's rows are read in cache-line-aligned pieces when b is not (glibc's large allocations,
    numpy's, are 16 bytes past a line: every 64-byte row piece spanned two lines); the part of
    the first tile before column 0 is out of bounds (masked). ``PEEL`` (for N0 < 0) takes each
    row step's first tile before the column loop, whose tiles are then all in bounds but a ragged
    last one: lower_generic versions the loop on that (a partial first iteration made the whole
    loop take the per-tile test and masked code)."""
    k0 = xl.program_id(0) * KS
    n0 = N0 + xl.program_id(1) * NP
    pr = xl.program_id(0) * BM
    for n in range(n0, n0 + NP, BN):
        xl.store_tile(xl.init_tile(p, [pr, n], [BM, BN]), xl.zeros([BM, BN], ACC))
    for k in range(k0, k0 + KS, BK):
        if PEEL:
            _gemv_tile(a, b, p, pr, k, n0, BM, BN, BK, RB)
            for n in range(n0 + BN, n0 + NP, BN):
                _gemv_tile(a, b, p, pr, k, n, BM, BN, BK, RB)
        else:
            for n in range(n0, n0 + NP, BN):
                _gemv_tile(a, b, p, pr, k, n, BM, BN, BK, RB)


@xl.inline
def _gemv_tile(a, b, p, pr, k, n, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr, RB: xl.constexpr):
    """gemv_kernel's BM x BN tile at column n for the rows k .. k+BK: one or two row strips."""
    _gemv_step(a, b, p, 0, pr, k, n, RB if BM > RB else BM, BN, BK)
    if BM > RB:
        _gemv_step(a, b, p, RB, pr, k, n, BM - RB, BN, BK)


@kernel
def pack_b_kernel(b, bp, N, Kp, BKP: xl.constexpr, BN: xl.constexpr):
    """Copy b [K, N] (any layout) into BN-column panels: panel j is rows j*Kp .. j*Kp+Kp of the
    row-major ``bp`` [ceil(N/BN)*Kp, BN], zero beyond b's edges, converted to bp's dtype (fp32:
    16-bit inputs are widened once here, not per use in the microkernel). One program per BKP rows of b,
    walking them left to right (BKP sequential streams; a program per tile cost ~1-2 us each in
    the CPU runtime, and tile-sized column strips of a 2048-wide b a new page per row)."""
    kb = xl.program_id(0) * BKP
    for n in range(0, N, BN):
        t = xl.load_tile(xl.init_tile(b, [kb, n], [BKP, BN]))
        xl.store_tile(xl.init_tile(bp, [(n // BN) * Kp + kb, 0], [BKP, BN]), t.to(bp.dtype))


@kernel
def pack_a_kernel(a, ap, Kp, BM: xl.constexpr, BKP: xl.constexpr):
    """Copy a [M, K] (any layout) into the row-major ``ap`` [ceil(M/BM)*BM, Kp]: zero beyond a's
    edges, converted to ap's dtype, so that every microkernel of the GEMM is in bounds. One
    program per BM-row strip, walking it BKP columns at a time: contiguous loads and stores (a
    strip stored k-major, BM values of one k adjacent, was a per-lane scatter: 16-19% of a 2048x256x1024
    call, one runtime thread; 8-9% now: docs/autotune-and-matmul.md)."""
    i = xl.program_id(0)
    for kb in range(0, Kp, BKP):
        t = xl.load_tile(xl.init_tile(a, [i * BM, kb], [BM, BKP]))
        xl.store_tile(xl.init_tile(ap, [i * BM, kb], [BM, BKP]), t.to(ap.dtype))


@kernel
def convert_kernel(src, dst, N, BR: xl.constexpr, BC: xl.constexpr):
    """dst = src converted to dst's dtype (the packed GEMM's fp32 sums into a 16-bit result: numpy
    converts fp32 to fp16 in software, 13 ms at 1024^2). One program per BR rows."""
    r = xl.program_id(0) * BR
    for n in range(0, N, BC):
        t = xl.load_tile(xl.init_tile(src, [r, n], [BR, BC]))
        xl.store_tile(xl.init_tile(dst, [r, n], [BR, BC]), t.to(dst.dtype))


@xl.inline
def _packed_slice(a, bp, r, kc, prow, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr, KC):
    """The BM x BN microkernel over one KC-deep k slice, from zeros: a's rows r .. r+BM, columns
    kc .. kc+KC times bp's panel rows prow .. prow+KC (gemm_packed_kernel's one home of the k loop)."""
    ta = xl.init_tile(a, [r, kc], [BM, BK])
    tb = xl.init_tile(bp, [prow, 0], [BK, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for k in range(0, KC, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    return acc


@kernel
def gemm_packed_kernel(a, bp, c, M, N, K, Kp, MC, N0, NC, KC,
                       BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    """c[M, N] (fp32) = a @ b for ``a`` the padded copy of ``pack_a_kernel`` and ``bp`` the panels
    of ``pack_b_kernel`` (both zero beyond K up to ``Kp``, a multiple of KC); GotoBLAS-style
    blocking: a program owns an MC x NC block of c (MC a multiple of BM); for each KC-deep slice
    of k and each BN-wide panel of b (KC x BN contiguous: stays in L1) it runs the BM x BN
    register microkernel (``_packed_slice``) down the MC rows (a's MC x KC block stays in L2).
    MC, NC, KC are runtime values so the loops are not unrolled. The microkernel starts from
    zeros and adds c after its k loop: a tile of c loaded before the loop held every FMA of the
    slice behind the load (c is the operand furthest away), and the first slice stores without
    reading c (no zero fill; kernels have no run-time ``if``, hence its own loop nest)."""
    m0 = xl.program_id(0) * MC
    n0 = N0 + xl.program_id(1) * NC
    for jj in range(0, NC, BN):
        for mi in range(0, MC, BM):
            acc = _packed_slice(a, bp, m0 + mi, 0, ((n0 + jj) // BN) * Kp, BM, BN, BK, KC)
            xl.store_tile(xl.init_tile(c, [m0 + mi, n0 + jj], [BM, BN]), acc)
    for kc in range(KC, K, KC):
        for jj in range(0, NC, BN):
            for mi in range(0, MC, BM):
                acc = _packed_slice(a, bp, m0 + mi, kc, ((n0 + jj) // BN) * Kp + kc, BM, BN, BK, KC)
                tc = xl.init_tile(c, [m0 + mi, n0 + jj], [BM, BN])
                xl.store_tile(tc, acc + xl.load_tile(tc))


@kernel
def gemm_strip_kernel(a, bp, c, M, N, K, Kp, N0, NC, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    """c[M, N] (fp32) = a @ b for ``a`` the padded copy of ``pack_a_kernel`` and ``bp`` the panels
    of ``pack_b_kernel`` (both with ``Kp`` = K rounded up to BK, zero beyond K): one program per
    BM-row strip of c and NC columns; each BM x BN tile of c sums all of K in registers and is
    stored once (no zero fill, no reload per k slice). The strip (BM x K, BM row streams)
    stays in L1 across the NC / BN panels while each KC x BN panel of b streams past it; the
    caller keeps BM * K small enough for L1 (a strip read again from L2 per panel ran the
    microkernel at ~75% of its L1 speed)."""
    i = xl.program_id(0)
    n0 = N0 + xl.program_id(1) * NC
    for jj in range(0, NC, BN):
        ta = xl.init_tile(a, [i * BM, 0], [BM, BK])
        tb = xl.init_tile(bp, [((n0 + jj) // BN) * Kp, 0], [BK, BN])
        acc = xl.zeros([BM, BN], xl.float32)   # (a run-time zero in the k loop: lower_generic)
        for k in range(0, K, BK):
            acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
            ta = xl.update_tile_offset(ta, 0, BK)
            tb = xl.update_tile_offset(tb, BK, 0)
        xl.store_tile(xl.init_tile(c, [i * BM, n0 + jj], [BM, BN]), acc)


def _c(bm: int, bn: int, bk: int, sg: int, stages: int = 3, grf: str = "default") -> Config:
    return Config({"BM": bm, "BN": bn, "BK": bk}, num_subgroups=sg, num_stages=stages, grf_mode=grf)


# Xe-HPC / Xe2: large workgroup tiles over many subgroups; 256x256 needs the large register file.
_XE_CONFIGS = [
    # 64x32 subgroup tiles with a 64-deep k-step: 64 DPAS per step, 0 spill, 1.39 instructions per
    # DPAS on bmg, 1.48 on pvc (fp16/bf16; 1.64 before pvc's own surfaces and split prefetch,
    # docs/compiler.md "XeGPU lowering notes"); pvc's int8 pick (32 DPAS: 1.69, column-major B 1.81)
    _c(256, 256, 64, 32, 3, "256"),
    _c(256, 256, 32, 32, 3, "256"),
    _c(256, 128, 32, 32, 3, "256"),
    _c(256, 128, 32, 16, 3, "256"),
    _c(128, 256, 32, 16, 3, "256"),
    # 32x32 subgroup tiles with BK=32 fill the default register file and spill 2.2-2.4 KB (Intel's
    # compiler, benchmarks/bench_device_code.py): they take the large one, or BK=16. 128x128x32/16sg:
    # pvc 2.0 instructions per DPAS (16-row split prefetch; 2.19 with two prefetches), bmg 1.88.
    _c(128, 128, 32, 16, 3, "256"),
    _c(128, 128, 32, 8, 3, "256"),
    _c(64, 128, 32, 8, 3, "256"),
    # ... and a 64-deep k-step: 32 DPAS per step, 1.84 instructions per DPAS on pvc (BK=32: 2.31,
    # IGC's per-prefetch no-op reads and syncs weigh on 16 DPAS), 1.53 on bmg; tf32 is pruned here
    _c(128, 128, 64, 16, 3, "256"),
    _c(256, 128, 64, 32, 3, "256"),
    _c(64, 64, 16, 4, 3),
    _c(128, 128, 16, 16, 3),   # fits fp32 (tf32) operands in the default register file
    # tf32 column-major B: 64x32 subgroup tiles, 32 DPAS a k-step from 2 A + 4 transposed B loads
    # and one prefetch per subgroup (A's and B's 16-row blocks split over the subgroups): pvc 1.84
    # instructions per DPAS, bmg 1.66, 0 spill (256x128x64/32sg: 20 loads and two prefetches for 64,
    # pvc 2.17, bmg 1.72; 256x256x32 spills 14 KB)
    _c(256, 256, 16, 32, 3, "256"),
    # 8-bit operands: a 128-deep k-step (32 DPAS per step for a 32x32 subgroup tile, 1.62-2.22
    # instructions per DPAS, no spill). 16-bit operands: 64 DPAS per step, 0 spill, bmg 1.39
    # instructions per DPAS, pvc 1.88. pvc's int8 pick is 256x256x64/32sg (first above: row-major
    # B 1.69, column-major 1.81, 0 spill since the per-lane k-loop version gathers at the DPAS);
    # here 128x128x128/16sg 1.84 / 2.22, 256x128x128/32sg (two prefetches) 1.91 / 2.19; bmg keeps
    # 256x128x128/32sg (1.62 / 1.78; its 256x256x64/32sg spills 4.0-4.4 KB).
    _c(128, 128, 128, 16, 3, "256"),
    _c(256, 128, 128, 32, 3, "256"),
    # small M (decode-like shapes): a thin tile with a long k-step, 8x32 subgroup tiles (8 DPAS
    # per k-step: pvc 3.88, bmg 3.25 instructions per DPAS; 8x16 tiles, 4 DPAS per k-step, gave
    # pvc 6.5 / 8.75, bmg 5.5 / 7.75: two A loads, two B loads and a prefetch feed 4 DPAS there)
    _c(8, 512, 64, 16, 3),
    _c(8, 256, 64, 8, 3),
    # 8x64 subgroup tiles (16 fp16 / 8 int8 DPAS per k-step; one VNNI load of two blocks per 32
    # rows of B): pvc fp16 2.88, int8 3.5, bmg 2.62 / 2.88 instructions per DPAS; they spill
    # 3.8-6.4 KB in the default register file. BK=128 with 8x32 tiles: int8 pvc 4.62, bmg 4.0.
    _c(8, 512, 64, 8, 3, "256"),
    # tf32 column-major B's decode pick: 8x64 tiles with BK=32, a k-step of 128 bytes of K as
    # fp16's BK=64 (16 transposed B loads, 128 registers of B). 8x512x64/16sg (8x32 tiles, the
    # pick before) fills the default register file with its 16 B loads (bmg ~30 syncs) and
    # 8x512x64/8sg spills 3.2 KB on pvc: pvc 6.81 -> 4.81, bmg / lnl 4.56 -> 3.31 instructions per
    # DPAS, 0 spill. fp16 / int8 decode take 8x512x32/4sg / 8x512x64/4sg below.
    _c(8, 512, 32, 8, 3, "256"),
    # int8's decode pick: 8x128 tiles with BK=64, 8 KB of B a k-step as fp16's below
    # (autotuner.decode_b_kstep_limit prunes it for 16- and 32-bit operands): 16 DPAS a k-step,
    # pvc 2.75, column-major B 4.31; bmg 2.44 / 3.12 instructions per DPAS (8x512x64/8sg: pvc 3.5 /
    # 5.12, bmg 2.88 / 3.88; 8x64 tiles at BK=128, 8x512x128/8sg: pvc 2.88 / 4.56, bmg 2.5 / 3.44)
    _c(8, 512, 64, 4, 3, "256"),
    # fp16 / bf16's decode pick: 8x128 tiles with BK=32 (8 KB of B, 16 DPAS a k-step from one A
    # load; the 16 transposed B loads of column-major B share 2 coordinates, not 4): pvc 2.75,
    # column-major 4.31; bmg / lnl / ptl 2.5 / 3.12 (8x512x64/8sg: pvc 2.88 / 4.56, bmg 2.56 / 3.44)
    _c(8, 512, 32, 4, 3, "256"),
    # tf32 column-major B's decode pick: 8x128 tiles with BK=16 (8 KB of B, one A load): pvc 4.38,
    # bmg / lnl / ptl 3.06 (8x512x32/8sg 4.81 / 3.31); row-major tf32 keeps 8x512x32/8sg (here pvc
    # 3.75, bmg 3.06 against 2.88 / 2.62: 8 row-major B loads a k-step, 4 there)
    _c(8, 512, 16, 4, 3, "256"),
    _c(16, 256, 32, 16, 3),    # BK=64 here spilled 6.9 KB in the boundary-tile copy of the k-loop
    _c(32, 256, 32, 16, 3),
]

# Xe-HPG (Arc A / Flex): 4 KB of registers per thread (128 x 32 B), N=8 DPAS, no large-GRF mode,
# no 2D block IO (codegen/block_reads.py, codegen/transposed_dpas.py; B packed in SLM by the
# workgroup where subgroup rows share it: codegen/slm_staging.py). Measured with Intel's compiler
# for acm-g10 (benchmarks/bench_device_code.py, 4096^3, hot k-loop instructions per DPAS, 0 spill
# and 0 private memory): 16x16 subgroup tiles with B staged, several 32-row K-slices a barrier,
# two k-steps an iteration: fp16 512x32x256/64sg 4.15 (the autotuner's pick), 512x32x128 4.72,
# 256x64x128 4.88, BK=64 6.38
# (one step an iteration), BK=32 7.25-8.81, BK=16 10.62, 16x8 16.0; int8 512x32x512 4.44 (the pick),
# 256x64x512 4.95 (16 words a work item, 64 KB of SLM), BK=256 5.36, BK=128 6.19, BK=32-64 8.5-14.25, 16x8 26.5. Not
# staged: fp16/bf16 32x16 tiles with BK=16 9.25, decode 8x32 tiles 24.75 (B^T packed; by column
# parity 7.19 per DPAS issued, BK=32 5.75: below), 8x16 tiles 30.0, BK=32
# 26.5; int8 decode 66.25 (8x32) / 72.0 B^T packed (by byte parity 6.72 / 8x64 tiles 5.03: below) (configs with BK=16 are pruned for int8: K=32
# per DPAS). 32x16 tiles with BK=32 spill; fp16 BK=256 (16 words a work item) spills 128 B and
# is pruned, fp16 BK=512 (32 words: not staged) 33 KB. Column-major B (a Linear layer's [N, K]
# weights, no packing): decode 9.88 (8x32, BK=32), 11.5 (8x32, BK=16), 20.5 / 16.5 (8x16, BK=16 /
# 32), int8 11.25 (8x32) / 19.0; 16x16 tiles 14.25-14.88, int8 14.5; 32x16 tiles spill 4.9 KB
# (cold version).
_DG2_CONFIGS = [
    _c(128, 128, 16, 32, 2),    # fp16/bf16: 32x16 subgroup tiles
    _c(64, 128, 16, 16, 2),
    _c(256, 128, 16, 64, 2),
    _c(128, 64, 16, 32, 2),     # fp16/bf16: 16x16 subgroup tiles
    # 16x16 subgroup tiles, B shared by 32 subgroup rows (SLM): a panel's packing per DPAS is
    # 2 instructions a word x BN / (2 x 512 work items) words / (BK / 4) DPAS = BN / 128, so BN=32
    # halves BN=64's, and BK=256 halves the barrier and loop control a DPAS of BK=128
    _c(512, 32, 256, 64, 2),    # fp16: the pick, 8 K-slices a barrier, 8 words a work item (int8: pruned, spills 128 B)
    _c(512, 32, 512, 64, 2),    # int8: the pick, 16 K-blocks a barrier, 8 words a work item (fp16: spills 224 B)
    _c(256, 64, 128, 64, 2),    # 16x16 subgroup tiles, B shared by 16 subgroup rows (SLM), 4 K-slices a barrier
    _c(256, 64, 512, 64, 2),    # int8: 16 K-blocks a barrier, 16 words a work item (fp16: pruned)
    _c(256, 64, 256, 64, 2),    # int8: 8 K-blocks a barrier (fp16: 16 words a work item, pruned)
    _c(256, 64, 64, 64, 2),
    _c(256, 64, 32, 64, 2),
    _c(128, 64, 32, 32, 2),     # int8: 16x16 subgroup tiles
    _c(64, 64, 32, 16, 2),
    _c(32, 64, 32, 16, 2),      # int8: 16x8 subgroup tiles
    # small M (decode-like shapes). 8x32 subgroup tiles first (4 DPAS of work a k-step: fp16 /
    # bf16 BK=16 rowB 7.19 instructions per DPAS issued (8 DPAS by column parity, the A^T spread
    # staged in SLM, codegen/parity_dpas.py; 24.75 with B^T packed), colB 9.25 (A staged in SLM:
    # decode_slm.py); int8 BK=32 rowB 6.72 per DPAS issued (16 DPAS by byte parity; 26.9 per DPAS
    # of work), colB 9.0; fp16 / bf16 BK=32 rowB 5.62 per DPAS issued (11.25 per DPAS of work; B^T
    # packed spilled 736 B), colB 7.94), then 8x16 tiles
    # (fp16 30.0 / 15.0-16.75, BK=32 26.5 / 10.0; int8 55.0 / 14.0-15.5: B^T packed, too narrow
    # for parity). Column-major B takes 8x64 tiles (fp16 / bf16 8x512x64/8sg 5.67 / 5.64, int8
    # 8x512x128/8sg 5.56).
    _c(8, 256, 16, 8, 2),
    _c(8, 256, 32, 8, 2),
    # 8x64 subgroup tiles. Row-major int8 B by byte parity in both loop versions (the cold one
    # makes the A^T spread on registers), the two column groups' DPAS issued together, a spread
    # load for two DPAS (parity_dpas.spreads_kept): BK=32 5.03 instructions per DPAS issued (322
    # for 64; 20.1 per DPAS of work), 0 spill, the int8 rowB decode pick (before: 8.19 and 19 KB of
    # spill). Row-major fp16 / bf16 B likewise, the cold version's rows masked to each parity
    # (exact: the NaN rerun's path): BK=32 4.28 / 4.25 per DPAS issued (274 / 272 for 64; 8.6 per
    # DPAS of work), 0 spill, the fp16 / bf16 rowB decode picks. Row-major B at BK=64 spills in
    # its cold version (int8 2.1 KB, fp16 7.9 KB; pruned).
    # Column-major B: B's lane rows read one DPAS ahead of their own (two ahead in the fast
    # version, lower_xegpu.py LANE_ROWS_AHEAD), A staged in SLM. BK=32: fp16 / bf16 6.25, int8 7.5,
    # 0 spill (read at their DPAS: 6.72, int8 288 B of spill). BK=64, A staged from two
    # descriptors with one barrier for four K-blocks, the DPAS in K-block pairs (decode_slm.py):
    # fp16 5.67, bf16 5.64 (the picks), 0 spill (bf16's C stored from the block's corner:
    # lower_xegpu.corner_stores; 320 B of spill before), int8 6.09. int8 BK=128 (two
    # descriptors): 5.56, 0 spill (the int8 pick; its cold version by single K-blocks: 2.1 KB of
    # spill by pairs). Ranked for M <= 64 only (matmul.WIDE_DECODE_MAX_M): the per-DPAS model
    # would take them for 4096^3 column-major B too. Not listed: 8x512x16/8sg 7.75,
    # 8x1024x32/16sg fp16 6.59 / int8 8.06.
    _c(8, 512, 32, 8, 2),
    _c(8, 512, 64, 8, 2),
    _c(8, 512, 128, 8, 2),      # int8 (fp16: A not staged, 4.3 KB of spill; pruned)
    _c(8, 256, 16, 16, 2),      # fp16/bf16, then int8
    _c(8, 128, 16, 8, 2),
    _c(8, 256, 32, 16, 2),
    _c(8, 128, 32, 8, 2),
]

# The Intel OpenCL CPU device: a workgroup runs on one core, and a subgroup's accumulator must
# stay in the CPU's vector registers, so small tiles win (fp32 512^3 on 2 busy Zen 4 cores:
# 8x32x8/2 81 GFLOP/s, 4x32x16/1 70, 4x32x8/1 69, 8x32x8/1 62, 16x32x8/2 60, 16x64x8/4 60;
# 32x64x16/1 about 39); each builds in about a second, while 64x64 tiles took over a minute in
# the CPU driver. M=1 (decode) shapes want BM=1: 1x64x16/1 4.4 GFLOP/s, 4x32x8/1 1.9.
# Measured on the OpenCL CPU device (docs/compiler.md, "Generic target performance"): 6 rows x 16
# columns per subgroup keeps the accumulators in the 16 AVX2 registers; BK 8-16; larger tiles
# are correct but not faster and take longer to build in the driver.
_GENERIC_CONFIGS = [
    _c(6, 16, 8, 1, 1),
    _c(6, 16, 16, 1, 1),
    _c(12, 16, 16, 2, 1),
    _c(8, 32, 8, 1, 1),
    _c(1, 64, 16, 1, 1),      # decode-like shapes (M = 1)
    _c(1, 32, 8, 1, 1),
]

#: gemv_kernel on targets without DPAS (the CPU device), by M: (BN, RB) -- columns and rows of
#: a tile, each one register strip (lower_generic's rows per strip: 1 row of 64 columns, 2 of 32,
#: up to 6 of 16), so the accumulator is updated in place; M = 7 and 8 take two row tiles (4 + 3,
#: 4 + 4), reading the b tile twice, the second time from L1. Before, 8 x 16 was one tile of two
#: strips, loaded and stored as a plain tile (accumulators spilled around its branches), and tiles
#: had M rounded up to a power of two rows, so for M = 3, 5, 6, 7 every tile was partly out of
#: bounds and took the masked version (xejit.matmul 3 / 5 / 7 x 2048 x 2048, loaded VM, CPU ms per
#: call: 10.4 / 11.3 / 10.5 -> 2.7 / 2.8 / 3.4).
#: M = 1 takes 1 x 32 (1 x 64 before): the kernel's CPU time per call against OpenBLAS's sgemv in
#: the same process, both on one pinned core (perf samples of the JIT code / of sgemv_kernel_4x8,
#: 1x2048x2048, B 8 rows a step, loaded VM, 5-6 alternating runs each): 1.10-1.20x (mean 1.145)
#: with 64 columns, 1.01-1.12x (mean 1.09) with 32; 16 columns 1.14x; 4 or 16 rows a step
#: 1.19x / 1.42-1.50x; tiles shifted onto b's lines (numpy's b is 16 bytes past one) 1.67-1.82x.
GEMV_TILES = {1: (32, 1), 2: (32, 2), 3: (16, 3), 4: (16, 4), 5: (16, 5), 6: (16, 6), 7: (16, 4), 8: (16, 4)}
#: rows of b per step, by M: 8 row streams at b's pitch for M <= 2; 16 for the two-tile shapes
#: (fewer accumulator loads and stores per FMA; equal to 8 within the noise). gemv_kernel + host
#: sum, 8 K slices, one process, rounds interleaved, loaded VM (load 5-6; min / CPU ms per call):
#: 8x2048x2048 BK 8 1.38-1.57 / 3.09-3.73, 16 1.34-1.61 / 3.07-3.63, 32 1.46 / 3.91; the 8 x 16
#: two-strip tile at BK 32 (the old kernel) 1.53 / 3.87 when it does not run right after numpy
#: (numpy's spinning threads slow whatever follows them: 1.44-1.95 / 4.4-6.0 there).
GEMV_BK = {1: 8, 2: 8, 3: 16, 4: 16, 5: 16, 6: 16, 7: 16, 8: 16}
#: K slices and column panels (one program each): every program streams whole rows of b (8 KB
#: at N = 2048), and 8 of them balance the two cores when other processes take one; the caller
#: adds the slices. Column panels over the whole K (no host sum; GEMV_SLICES = 1, GEMV_PANELS = 2)
#: were slower on the loaded VM, every program reading only its part of each row (rotating
#: rounds, same process, min / CPU ms): 8x2048x2048 2 panels BK 16 1.62-1.80 / 3.27-4.15 against
#: the 8 slices' 1.34-1.47 / 3.07-3.63; 1x2048x2048 0.56-0.62 / 1.30-1.71 against 0.54-0.60 /
#: 1.19-1.58; more panels slower still (xejit.matmul, M=1, one slice: min 0.65 / 0.76 / 1.01 /
#: 1.59 ms with 2 / 4 / 8 / 16 panels).
GEMV_SLICES = 8
GEMV_PANELS = 1
#: the largest M that gemv_kernel takes
GEMV_MAX_M = 8

#: gemm_packed_kernel on targets without 2D block IO, fp32: the 6x16 microkernel over a packed
#: 6-row A strip and a packed 16-column b panel (KC x 16: 16 KB in L1), c blocks of MC x NC,
#: k slices of 256; BK = KC: one tile_mma per slice, so the in-bounds version is one tight loop
#: over k (12 FMAs, 2 B loads, 6 broadcasts per step, 24 instructions, no spill: the driver's
#: assembly, CL_CONFIG_DUMP_ASM) with one bounds test per slice (BK must divide KC).
#: Taken for K > STRIP_MAX_K. fp32 2048^3, kernel alone, GFLOP per CPU-second of the process,
#: interleaved rounds, loaded VM (load 8-11), numpy in the same runs:
#:   one runtime thread (CL_CONFIG_CPU_TBB_NUM_WORKERS=1, OPENBLAS_NUM_THREADS=1): MC,NC 48,256
#:   68.7, 48,64 62.3, 48,128 60.5, gemm_strip_kernel (NC 16) 40.2, numpy 70.8 (earlier runs:
#:   48,256 55.9-64.8 against the strip's 48.8-53.2);
#:   two threads: 48,64 51.4-57.1, 48,256 46.6-50.9, the strip 52.6-55.8, numpy 56.9-58.3.
#: NC 64 keeps four times as many programs (1376 at 2048^3) as NC 256, which the two threads of a
#: loaded machine balance better. Where the strip kernel lost at K = 2048: its 6 x K strip of a
#: (48 KB) does not fit the 32 KB L1 and is read from L3 for every 16-column panel (the strip
#: kernel with one strip shared by all programs: 66.7 -> 39.4 GFLOP per CPU-second with real
#: strips; with real panels only 61.1).
#: BKP_B rows of b per pack_b_kernel program, BKP_A columns of a per pack_a_kernel step. pack_b,
#: kernel alone, 2 runtime threads, loaded VM (load 9; median / min ms of 31 rounds): 1024^2 BKP_B
#: 16 2.01 / 1.40, 32 10.1 / 2.11 (8: 1.59 / 1.15, 64: 2.67 / 1.91 in a shorter run); 2048^2 24.2 /
#: 15.8 against 28.3 / 20.0: 32 programs of 32 rows at b's pitch left a core idle for long stretches.
#: Keyed by the CPU's vector register bytes (lower_generic.VECTOR_BYTES): the figures above are
#: AVX2's (32). With AVX-512 (64: 32 zmm, a 16-lane f32 value is one register) the microkernel
#: is 6 x 32: 12 accumulators, 2 B loads and 6 broadcasts per 12 FMAs (6 x 16 there: 6 FMAs
#: with a broadcast operand and a B load each). fp32 2048^3, kernel alone, one runtime thread,
#: loaded VM (Zen 4, load 4), GFLOP per CPU-second, medians of 5 interleaved rounds: 6x16 80.6,
#: 12x16 85.4, 6x32 88.4, 8x32 81.3, 14x32 73.1 (28 accumulators: spills), numpy 94.0. Its
#: KC x 32 panel of b is 32 KB, all of L1, so the MC x KC block of a is read from L2 once per
#: panel: NC 128 (4 panels a block) against 64, 6x32, same runs (load 11), one runtime thread:
#: MC,NC 48,64 83.8-84.4, 48,128 88.3-92.3, 48,256 93.5, 24,128 91.1, 72,128 88.9, numpy
#: 95.8-96.6; two threads: 48,64 90.0, 48,128 93.5, 48,256 87.5 (numpy 85.2 counts its spinning
#: threads). KC 128 (a 16 KB panel) was not faster: 48,128 90.4, 48,64 81.8.
#: BK 64 (four tile_mmas a slice, K padded to 64 instead of 256) on AVX-512: xejit.matmul, two
#: threads, GFLOP/s, 3 rounds: 1024^3 BK 256 / 64 / 32 / 16 204 / 204 / 186 / 176; 1024x1024x300
#: 116 / 182-189 / 169-172 / 172-179; 1024x1024x520 137 / 183-186 / 175 / 178 (numpy 190-194).
#: AVX2's 6 x 16 keeps BK 256 (not measured: this machine's runtime builds AVX-512 only).
PACKED_CONFIGS = {
    32: {"BM": 6, "BN": 16, "BK": 256, "MC": 48, "NC": 64, "KC": 256, "BKP_A": 32, "BKP_B": 16},
    64: {"BM": 6, "BN": 32, "BK": 64, "MC": 48, "NC": 128, "KC": 256, "BKP_A": 32, "BKP_B": 16},
}

#: gemm_strip_kernel (same packing, same microkernel, all of K in registers, c stored once) for K
#: up to STRIP_MAX_K (rounded up to BK), STRIP_NC columns per program: the 6-row strip of a (24 KB
#: at K = 1024) stays in L1 across the panels. fp32 1024^3, packing included (xejit.matmul), one
#: runtime thread, loaded VM, GFLOP per CPU-second: strip 53.8, gemm_packed_kernel 48x256 52.9,
#: 48x128 53.0, numpy 74.4; kernel alone: strip NC 256 56.0, NC 16 51.4, packed 48x256 55.1. What
#: it loses is the b panels streaming from L2/L3 (one strip and one panel shared by all
#: programs 65.5, real panels 57.3, real strips 66.8, both real 54.7; numpy 63.8 in the same run).
STRIP_MAX_K = 1024
STRIP_NC = 256

CONFIGS: dict[str, list[Config]] = {
    "pvc": _XE_CONFIGS,
    "bmg": _XE_CONFIGS,
    "lnl": _XE_CONFIGS,
    "ptl": _XE_CONFIGS,
    "dg2": _DG2_CONFIGS,
    "generic": _GENERIC_CONFIGS,
}


def configs_for(target: str) -> list[Config]:
    """The candidate configs of ``target`` (the generic space for unknown targets)."""
    return list(CONFIGS.get(target, _GENERIC_CONFIGS))
