"""Generic target: tile_mma operands that are not fused loads still take the k loops
(docs/compiler.md): an A tile loaded before a loop is read again from memory when nothing writes
memory in between, and a computed A (one or two column groups) is shuffled from lane k inside the loop.
Against float64 numpy on random non-zero inputs, outputs poisoned, aligned and unaligned shapes
(in-bounds and boundary versions)."""
from __future__ import annotations

import numpy as np
import pytest

import xejit
import xejit.language as xl
from tests.helpers import check, f64, poisoned, rand
from tests.matmul.backend import requires_device

pytestmark = requires_device


@xejit.kernel
def _a_before_loop(a, b, c, N, BM: xl.constexpr, BN: xl.constexpr, K: xl.constexpr, WRITE: xl.constexpr):
    """c = a_block @ (sum of b's column blocks), a's tile loaded once before the loop over the
    blocks; ``WRITE`` overwrites a's tile after the load (the mma must see the values loaded)."""
    m = xl.program_id(0) * BM
    ta = xl.init_tile(a, [m, 0], [BM, K])
    av = xl.load_tile(ta)
    if WRITE:
        xl.store_tile(ta, xl.full([BM, K], -7.0, xl.float32))
    tb = xl.init_tile(b, [0, 0], [K, BN])
    acc = xl.zeros([BM, BN], xl.float32)
    for n in range(0, N, BN):
        acc = xl.tile_mma(av, xl.load_tile(tb), acc)
        tb = xl.update_tile_offset(tb, 0, BN)
    xl.store_tile(xl.init_tile(c, [m, 0], [BM, BN]), acc)


@xejit.kernel
def _computed_a(x, b, c, M, BM: xl.constexpr, BN: xl.constexpr, K: xl.constexpr):
    """c = exp(x / 4) @ b with K = 16: A computed in registers (one column group)."""
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    p = xl.exp(xl.load_tile(xl.init_tile(x, [m, 0], [BM, K])) * 0.25)
    acc = xl.tile_mma(p, xl.load_tile(xl.init_tile(b, [0, n], [K, BN])))
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc)


# K=16 and K=32 take the same paths (WRITE: A kept as uniform scalars, every FMA unrolled in both
# versions; else A read again, unrolled below MAX_UNROLLED_FMAS). With WRITE the CPU driver's build
# grows with K: K=16 53 KB of SPIR-V, K=32 99 KB (4.0-5.0 s of CPU), K=64 211 KB (17.7 s)
@pytest.mark.parametrize("K", [16, pytest.param(32, marks=pytest.mark.slow)])
@pytest.mark.parametrize("M,N", [(32, 64), (37, 45)])
@pytest.mark.parametrize("write", [False, True])
def test_a_loaded_before_a_loop(M, N, write, K):
    rng = np.random.default_rng(M * 100 + N + write + K)
    BM, BN = 8, 16
    a, b = rand(rng, (M, K), "f32"), rand(rng, (K, N), "f32")
    nb = -(-N // BN)
    bsum = np.zeros((K, nb * BN))
    bsum[:, :N] = f64(b)
    want = f64(a) @ bsum.reshape(K, nb, BN).sum(1)   # blocks past N read the padding, 0
    c = poisoned((M, BN), "f32")
    args = (a.copy() if write else a, b, c, N)
    _a_before_loop[(-(-M // BM),)](*args, BM=BM, BN=BN, K=K, WRITE=write)
    check(c, want, "f32", scale_by_max=True)
    counts = _a_before_loop.compile(*args, BM=BM, BN=BN, K=K, WRITE=write, target="generic").instructions
    assert bool(counts["A operand read again from memory (unwritten)"]) == (not write)


# K=32: A in two column groups, picked by a select before the shuffle (lower_generic._shuffled_a)
@pytest.mark.parametrize("M,N,K", [(32, 64, 16), (37, 45, 16), (37, 45, 32)])
def test_computed_a_in_registers(M, N, K):
    rng = np.random.default_rng(M * 100 + N + K)
    BM, BN = 8, 64
    x, b = rand(rng, (M, K), "f32"), rand(rng, (K, N), "f32")
    want = np.exp(f64(x) * 0.25) @ f64(b)
    c = poisoned((M, N), "f32")
    _computed_a[(-(-M // BM), -(-N // BN))](x, b, c, M, BM=BM, BN=BN, K=K)
    check(c, want, "f32", scale_by_max=True)
    counts = _computed_a.compile(x, b, c, M, BM=BM, BN=BN, K=K, target="generic").instructions
    assert counts["GEMM in-bounds path: k loop per strip"] and counts["GEMM boundary path: k loop (masked loads)"]
