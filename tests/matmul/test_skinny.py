"""Skinny GEMMs (M <= 8, decode GEMV) on the CPU device take ``gemv_kernel`` (K split into
slices, partial sums added on the host): results against float64 references, outputs poisoned."""
from __future__ import annotations

import sys
import zlib

import numpy as np
import pytest

import xejit
from tests.matmul.backend import heavy_on_device, requires_device
from tests.matmul.helpers import check, poisoned, rand, reference

N, K = 300, 333      # K*N above the skinny threshold; not multiples of BN, BK or the K slice

xm = sys.modules["xejit.matmul"]   # (xejit.matmul is also the function)


@pytest.fixture
def gemv_calls(monkeypatch):
    """The (M, N, K) of every call that took the skinny kernel."""
    seen = []
    real = xm._gemv

    def spy(a, b, *rest):
        seen.append((a.shape[0], b.shape[1], a.shape[1]))
        return real(a, b, *rest)
    monkeypatch.setattr(xm, "_gemv", spy)
    return seen


def _result_dtype(dtype):
    return "int32" if dtype == "int8" else dtype


CASES = [heavy_on_device(m, d, lib, act, core=(m, d) in {(1, "float32"), (8, "float32"), (3, "int8")})
         for m, d, lib, act in [(1, "float32", "numpy", None), (8, "float32", "numpy", "gelu_tanh"),
                                (3, "int8", "numpy", "relu"), (2, "float16", "numpy", "relu"),
                                (5, "bfloat16", "torch", None), (1, "float32", "torch", "gelu_tanh")]]


@requires_device
@pytest.mark.parametrize("m,dtype,lib,activation", CASES)
def test_skinny_gemm_takes_the_gemv_kernel(m, dtype, lib, activation, gemv_calls):
    rng = np.random.default_rng(zlib.crc32(repr((m, dtype, lib, activation)).encode()))
    a, b = rand(rng, (m, K), dtype, lib), rand(rng, (K, N), dtype, lib)
    rdt = _result_dtype(dtype)
    bias = (rng.integers(-1000, 1000, N).astype(np.int32) if dtype == "int8" else rand(rng, (N,), dtype, lib))
    out = poisoned((m, N), rdt, lib)
    xejit.matmul(a, b, bias=bias, activation=activation, out=out)
    assert gemv_calls == [(m, N, K)]
    check(out, reference(a, b, bias, activation), rdt)


@requires_device
def test_vector_times_matrix_and_column_major_b(gemv_calls):
    """A 1-D ``a`` is a 1-row GEMM (skinny kernel); a column-major ``b`` keeps the tuned GEMM."""
    rng = np.random.default_rng(21)
    a, b = rand(rng, (K,), "float32"), rand(rng, (K, N), "float32")
    check(xejit.matmul(a, b), reference(a, b), "float32")
    assert gemv_calls == [(1, N, K)]
    bt = np.ascontiguousarray(b.T).T     # column-major
    check(xejit.matmul(a[None], bt), reference(a[None], bt), "float32")
    assert len(gemv_calls) == 1


@requires_device
def test_repeated_skinny_calls_stay_correct(gemv_calls):
    """The partial-sum scratch buffer is reused: a second call with new values is not stale."""
    rng = np.random.default_rng(22)
    b = rand(rng, (K, N), "float32")
    for _ in range(2):
        a = rand(rng, (4, K), "float32")
        check(xejit.matmul(a, b), reference(a, b), "float32")
    assert len(gemv_calls) == 2


@requires_device
@pytest.mark.parametrize("m,dtype", [(1, "float32"), (3, "float32"), (2, "int8")])
def test_repeated_skinny_calls_without_epilogue(m, dtype, gemv_calls):
    """No bias or activation: the K-slices' partial sums go straight into the result (poisoned
    out=), and a repeated call on numpy arrays takes the remembered skinny recipe (fresh result)."""
    rng = np.random.default_rng(m * 7 + len(dtype))
    a, b = rand(rng, (m, K), dtype), rand(rng, (K, N), dtype)
    rdt = _result_dtype(dtype)
    out = poisoned((m, N), rdt, "numpy")
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), rdt)
    first = xejit.matmul(a, b)
    again = xejit.matmul(a, b)
    assert again is not first
    check(first, reference(a, b), rdt)
    check(again, reference(a, b), rdt)
    assert gemv_calls == [(m, N, K)] * 3


@requires_device
@pytest.mark.parametrize("m,dtype,lib,offset", [(8, "float32", "numpy", 3), (5, "float32", "numpy", 13),
                                                (8, "int8", "numpy", 7), (6, "bfloat16", "torch", 5)])
def test_skinny_gemm_on_a_b_off_the_cache_lines(m, dtype, lib, offset, gemv_calls):
    """A b whose rows start ``offset`` elements past a 64-byte line (a view into a larger array):
    gemv_kernel's column tiles are shifted onto the lines, the first one partly before column 0
    (masked); results against float64, poisoned out=."""
    rng = np.random.default_rng(offset)
    a = rand(rng, (m, 1024), dtype, lib)
    big = rand(rng, (1024, 1024 + 64), dtype, lib)
    b = big[:, offset:offset + 1000]
    assert xm._aligning_shift(b, 8) != 0
    out = poisoned((m, 1000), _result_dtype(dtype), lib)
    xejit.matmul(a, b, out=out)
    assert gemv_calls == [(m, 1000, 1024)]
    check(out, reference(a, b), _result_dtype(dtype))
