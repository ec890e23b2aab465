"""Generic target: a tile_mma accumulator that enters a k loop as a constant (``acc = zeros``
before ``for k``) is made a run-time value (the same bits, or'ed with an opaque zero) -- with a
constant there, the OpenCL CPU driver's vectorizer predicated the whole loop (lane masks on every
FMA operand, fp32 1024^3 38.6 against 87.8 GFLOP per CPU-second). Results against float64 numpy
on random non-zero inputs, outputs poisoned: zero and non-zero starts, fp32 and int8."""
from __future__ import annotations

import re

import numpy as np
import pytest

import xejit
import xejit.language as xl
from tests.helpers import check, f64, poisoned, rand
from tests.matmul.backend import requires_device


@xejit.kernel
def _long_k(a, b, c, K, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr, START: xl.constexpr,
            ACC: xl.constexpr = xl.float32):
    """c = START + a @ b; BK = 128 makes the in-bounds tile_mma a k loop per register strip."""
    m = xl.program_id(0) * BM
    n = xl.program_id(1) * BN
    ta = xl.init_tile(a, [m, 0], [BM, BK])
    tb = xl.init_tile(b, [0, n], [BK, BN])
    acc = xl.full([BM, BN], START, ACC)
    for k in range(0, K, BK):
        acc = xl.tile_mma(xl.load_tile(ta), xl.load_tile(tb), acc)
        ta = xl.update_tile_offset(ta, 0, BK)
        tb = xl.update_tile_offset(tb, BK, 0)
    xl.store_tile(xl.init_tile(c, [m, n], [BM, BN]), acc)


def test_no_constant_accumulator_enters_the_k_loop():
    rng = np.random.default_rng(1)
    a, b, c = rand(rng, (12, 256), "f32"), rand(rng, (256, 32), "f32"), np.zeros((12, 32), np.float32)
    ck = _long_k.compile(a, b, c, 256, BM=6, BN=16, BK=128, START=0.0, target="generic")
    llir = ck.asm["llir"]
    assert "opaque_zero32" in llir
    assert not re.search(r"phi float \[ 0\.0+e\+00", llir), "a constant accumulator enters a loop"


@requires_device
@pytest.mark.parametrize("start", [0.0, 1.5])
@pytest.mark.parametrize("M,N,K", [(12, 32, 256), (13, 40, 300)])
def test_long_k_gemm_from_a_constant_start(M, N, K, start):
    rng = np.random.default_rng(M + N + K)
    a, b = rand(rng, (M, K), "f32"), rand(rng, (K, N), "f32")
    c = poisoned((M, N), "f32")
    _long_k[(-(-M // 6), -(-N // 16))](a, b, c, K, BM=6, BN=16, BK=128, START=start)
    check(c, start + f64(a) @ f64(b), "f32", scale_by_max=True)


@requires_device
def test_long_k_int8_gemm_from_zero():
    rng = np.random.default_rng(3)
    a, b = rand(rng, (12, 256), "i8"), rand(rng, (256, 32), "i8")
    c = np.full((12, 32), -12345, np.int32)
    _long_k[(2, 2)](a, b, c, 256, BM=6, BN=16, BK=128, START=0, ACC=xl.int32)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))
