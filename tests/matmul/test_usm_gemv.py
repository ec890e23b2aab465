"""Skinny GEMMs (M <= 8) with a device (USM) result take ``gemv_kernel`` over the whole K, storing
into the result directly (no host access to device memory); with an epilogue or a result not of
the accumulator's dtype they keep the tuned GEMM. Results against float64 references, outputs
poisoned."""
from __future__ import annotations

import numpy as np
import pytest

import xejit
from tests.matmul.backend import requires_device
from tests.matmul.helpers import spy_gemv_calls, check, rand, reference
from tests.runtime.dlpack_exporter import OneAPIArray, device_array
from xejit.runtime import default_device

pytestmark = requires_device

N, K = 301, 333      # K*N above the skinny threshold; N, K not multiples of the tiles or BK

@pytest.fixture
def q():
    return default_device().queue


@pytest.fixture
def direct_calls(monkeypatch):
    """The (M, N, K) of every call that stored gemv_kernel's sums straight into a device result."""
    return spy_gemv_calls(monkeypatch, "_gemv_direct")


def _poisoned(shape, dtype, q) -> OneAPIArray:
    return device_array(np.full(shape, -12345 if dtype == "int32" else np.nan, dtype), q)


@pytest.mark.parametrize("m,dtype", [(1, "float32"), (8, "float32"), (3, "int8"), (8, "int8")])
def test_device_result_takes_the_gemv_kernel(q, direct_calls, m, dtype):
    rng = np.random.default_rng(100 + m)
    av, bv = rand(rng, (m, K), dtype), rand(rng, (K, N), dtype)
    rdt = "int32" if dtype == "int8" else dtype
    out = _poisoned((m, N), rdt, q)
    assert xejit.matmul(device_array(av, q), device_array(bv, q), out=out) is out
    assert direct_calls == [(m, N, K)]
    check(out.read(), reference(av, bv), rdt)
    c = xejit.matmul(device_array(av, q), device_array(bv, q))   # a new result: same path
    assert direct_calls == [(m, N, K)] * 2
    check(c.read(), reference(av, bv), rdt)


def test_vector_result_and_host_b(q, direct_calls):
    """1-D a (a vector result) and b in USM shared memory viewed as numpy (host-accessible)."""
    from xejit.runtime import usm
    rng = np.random.default_rng(7)
    av, bv = rand(rng, (K,), "float32"), rand(rng, (K, N), "float32")
    c = xejit.matmul(device_array(av, q), usm.asarray(bv))
    assert direct_calls == [(1, N, K)]
    check(c.read(), reference(av, bv), "float32")


@pytest.mark.parametrize("dtype,act", [("float32", "relu"), ("float16", None)])
def test_epilogue_or_16_bit_result_keeps_the_tuned_gemm(q, direct_calls, dtype, act):
    rng = np.random.default_rng(8)
    av, bv, biasv = rand(rng, (4, K), dtype), rand(rng, (K, N), dtype), rand(rng, (N,), dtype)
    bias = device_array(biasv, q) if act else None
    out = _poisoned((4, N), dtype, q)
    xejit.matmul(device_array(av, q), device_array(bv, q), bias=bias, activation=act, out=out)
    assert direct_calls == []
    check(out.read(), reference(av, bv, biasv if act else None, act), dtype)


def test_result_aliasing_b(q, direct_calls):
    """out= over b's first rows: computed into a new array, then copied (the numpy path's rule)."""
    rng = np.random.default_rng(9)
    av, bv = rand(rng, (2, K), "float32"), rand(rng, (K, N), "float32")
    b = device_array(bv, q)
    out = OneAPIArray((2, N), np.float32, q, mem=b.mem)
    assert xejit.matmul(device_array(av, q), b, out=out) is out
    assert direct_calls == [(2, N, K)]   # into the new array
    check(out.read(), reference(av, bv), "float32")
    np.testing.assert_array_equal(b.read()[2:], bv[2:])
