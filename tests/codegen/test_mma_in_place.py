"""Generic target: ``store_tile(t, tile_mma(a, b, load_tile(t)))`` (the GEMV's partial sums) updates
the accumulator in place, register strip by register strip inside the mma's in-bounds test, and
tiles not wholly in bounds take a masked version; a computed A keeps the plain load and store.
Against float64 numpy on random non-zero inputs, outputs poisoned, aligned and ragged shapes."""
from __future__ import annotations

import numpy as np
import pytest

import xejit
import xejit.language as xl
from tests.helpers import check, f64, poisoned, rand
from tests.matmul.backend import requires_device

IN_PLACE = "tile_mma accumulator updated in place"


@xejit.kernel
def _accumulate(a, b, c0, p, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    """p = c0 + a @ b for program 0's BM rows: c0 copied into p, then k steps of BK rows, each
    adding into every BN-wide tile of p in place (gemv_kernel's loop nest)."""
    m = xl.program_id(0) * BM
    for n in range(0, N, BN):
        xl.store_tile(xl.init_tile(p, [m, n], [BM, BN]), xl.load_tile(xl.init_tile(c0, [m, n], [BM, BN])))
    for k in range(0, K, BK):
        for n in range(0, N, BN):
            tp = xl.init_tile(p, [m, n], [BM, BN])
            acc = xl.tile_mma(xl.load_tile(xl.init_tile(a, [m, k], [BM, BK])),
                              xl.load_tile(xl.init_tile(b, [k, n], [BK, BN])), xl.load_tile(tp))
            xl.store_tile(tp, acc)


@xejit.kernel
def _computed_a(x, b, p, BM: xl.constexpr, BN: xl.constexpr, K: xl.constexpr):
    """p += exp(x / 4) @ b (K = 16): A computed in registers, so the accumulator is loaded and
    stored as plain tiles."""
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    tp = xl.init_tile(p, [m, n], [BM, BN])
    e = xl.exp(xl.load_tile(xl.init_tile(x, [m, 0], [BM, K])) * 0.25)
    xl.store_tile(tp, xl.tile_mma(e, xl.load_tile(xl.init_tile(b, [0, n], [K, BN])), xl.load_tile(tp)))


#: in place: 1 x 64, 2 x 32, 6 x 16 (one register strip each); 8 x 16 and 8 x 32 take two or more
#: strips and keep the plain load and store
SHAPES = [(1, 300, 333, 1, 64, 8), (2, 77, 50, 2, 32, 16), (13, 100, 64, 6, 16, 16), (8, 300, 333, 8, 16, 32),
          (13, 64, 64, 8, 32, 16)]


def test_the_accumulator_is_updated_in_place(monkeypatch):
    from xejit.codegen import lower_generic
    monkeypatch.setattr(lower_generic, "VECTOR_REGS", 16)   # AVX2: 8 x 16 is two register strips
    monkeypatch.setattr(lower_generic, "VECTOR_BYTES", 32)
    rng = np.random.default_rng(5)
    a, b = rand(rng, (1, 64), "f32"), rand(rng, (64, 128), "f32")
    p = np.zeros((1, 128), np.float32)
    counts = _accumulate.compile(a, b, p, p, 128, 64, BM=1, BN=64, BK=8, target="generic").instructions
    assert counts.get(IN_PLACE) == 1
    a6, p6 = rand(rng, (6, 64), "f32"), np.zeros((6, 128), np.float32)
    counts = _accumulate.compile(a6, b, p6, p6, 128, 64, BM=6, BN=16, BK=8, target="generic").instructions
    assert counts.get(IN_PLACE) == 1
    a8, p8 = rand(rng, (8, 64), "f32"), np.zeros((8, 128), np.float32)
    counts = _accumulate.compile(a8, b, p8, p8, 128, 64, BM=8, BN=16, BK=8, target="generic").instructions
    assert not counts.get(IN_PLACE), "two register strips: a strip's stores would precede the next one's reads"
    x, p2 = rand(rng, (8, 16), "f32"), np.zeros((8, 16), np.float32)
    counts = _computed_a.compile(x, b[:16, :16], p2, BM=8, BN=16, K=16, target="generic").instructions
    assert not counts.get(IN_PLACE)


@requires_device
@pytest.mark.parametrize("M,N,K,BM,BN,BK", SHAPES)
def test_in_place_accumulation(M, N, K, BM, BN, BK):
    rng = np.random.default_rng(M * 1000 + N + K + BN)
    a, b, c0 = rand(rng, (M, K), "f32"), rand(rng, (K, N), "f32"), rand(rng, (M, N), "f32")
    p = poisoned((M, N), "f32")
    _accumulate[(-(-M // BM),)](a, b, c0, p, N, K, BM=BM, BN=BN, BK=BK)
    check(p, f64(c0) + f64(a) @ f64(b), "f32", scale_by_max=True)


@requires_device
def test_in_place_int8_accumulation():
    rng = np.random.default_rng(8)
    M, N, K = 3, 77, 50
    a, b, c0 = rand(rng, (M, K), "i8"), rand(rng, (K, N), "i8"), rand(rng, (M, N), "i32")
    p = poisoned((M, N), "i32")
    _accumulate[(1,)](a, b, c0, p, N, K, BM=4, BN=32, BK=16)
    np.testing.assert_array_equal(p, c0.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64))


@requires_device
@pytest.mark.parametrize("M,N", [(16, 32), (13, 40)])
def test_computed_a_accumulates_by_plain_load_and_store(M, N):
    rng = np.random.default_rng(M + N)
    x, b, p0 = rand(rng, (M, 16), "f32"), rand(rng, (16, N), "f32"), rand(rng, (M, N), "f32")
    p = p0.copy()
    _computed_a[(-(-M // 8), -(-N // 16))](x, b, p, BM=8, BN=16, K=16)
    check(p, f64(p0) + np.exp(f64(x) / 4) @ f64(b), "f32", scale_by_max=True)


@xejit.kernel
def _accumulate_onto(a, b, p, N, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr):
    """p += a @ b, k step by k step, each BN-wide tile of p updated in place (no first copy)."""
    for k in range(0, K, BK):
        for n in range(0, N, BN):
            tp = xl.init_tile(p, [0, n], [BM, BN])
            acc = xl.tile_mma(xl.load_tile(xl.init_tile(a, [0, k], [BM, BK])),
                              xl.load_tile(xl.init_tile(b, [k, n], [BK, BN])), xl.load_tile(tp))
            xl.store_tile(tp, acc)


@requires_device
def test_in_place_accumulator_over_its_own_b():
    """p is b's first 8 rows (two arguments, one memory): the 8x16 accumulator takes two register
    strips, and the second strip's B rows include what a first strip's stores would write, so it
    is not updated in place (the kernel's program order: each tile reads, then writes)."""
    rng = np.random.default_rng(11)
    M, N, K, BK = 8, 32, 16, 8
    a, mem = rand(rng, (M, K), "f32"), rand(rng, (K, N), "f32")
    want = f64(mem)
    for k in range(0, K, BK):
        for n in range(0, N, 16):
            want[:M, n:n + 16] = want[:M, n:n + 16] + f64(a)[:, k:k + BK] @ want[k:k + BK, n:n + 16]
    _accumulate_onto[(1,)](a, mem, mem[:M], N, K, BM=M, BN=16, BK=BK)
    check(mem, want, "f32", scale_by_max=True)
