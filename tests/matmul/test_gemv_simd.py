"""Decode steps (1-2 rows, fp32 or bf16, row-major b) on the CPU device take the explicit-SIMD GEMV
(codegen/cpu_gemv.py, xejit.cpu_simd_gemm.gemv): results against float64 references with
outputs poisoned, through xejit.matmul and the kernel's host function directly; the routing, the
repeated call's recipe, and the errors of bad arguments."""
from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import xejit
from tests.matmul.backend import requires_device
from tests.matmul.helpers import check, poisoned, rand, reference, spy_gemv_calls
from xejit import cpu_simd_gemm
from xejit.codegen import cpu_gemv

xm = sys.modules["xejit.matmul"]   # (xejit.matmul is also the function)


@pytest.fixture
def calls(monkeypatch):
    """(simd GEMV calls, gemv_kernel calls) of xejit.matmul, each an (M, N, K)."""
    monkeypatch.setattr(xm, "_RECIPES", {})   # (no earlier test's calls of these shapes)
    simd, depth = [], []
    real = cpu_simd_gemm.gemv

    def spy(a, b, c, slot=None):   # (the outermost call: a strided c is computed by a call into a new array)
        depth.append(1)
        try:
            real(a, b, c, slot)
        finally:
            depth.pop()
        if not depth:
            simd.append((a.shape[0], b.shape[1], a.shape[1]))
    monkeypatch.setattr(cpu_simd_gemm, "gemv", spy)
    return simd, spy_gemv_calls(monkeypatch, "_gemv", "_gemv_replay")


@requires_device
@pytest.mark.parametrize("M,N,K,dtype,lib", [(1, 300, 333, "float32", "numpy"), (2, 257, 300, "float32", "torch"),
                                             (1, 300, 333, "bfloat16", "torch"), (2, 64, 1030, "bfloat16", "numpy"),
                                             (1, 2048, 2048, "float32", "numpy")])
def test_a_decode_step_takes_the_simd_gemv(M, N, K, dtype, lib, calls):
    simd, kernel = calls
    rng = np.random.default_rng(M * N + K)
    a, b = rand(rng, (M, K), dtype, lib), rand(rng, (K, N), dtype, lib)
    check(xejit.matmul(a, b), reference(a, b), dtype)
    out = poisoned((M, N), dtype, lib)
    xejit.matmul(a, b, out=out)
    check(out, reference(a, b), dtype)
    assert len(simd) == 2 and not kernel, (simd, kernel)


@requires_device
def test_operands_inside_wider_arrays(calls):
    """a's row and b's rows with pitches longer than K and N, b starting mid-row, out= a strided
    view: the kernel reads them in place, the host writes the view."""
    simd, _ = calls
    rng = np.random.default_rng(3)
    wa, wb = rand(rng, (4, 700), "float32"), rand(rng, (640, 333), "float32")
    a, b = wa[1:3, 5:605], wb[20:620, 7:290]
    out = poisoned((4, 2 * 283), "float32", "numpy")
    view = out[::2, ::2]
    xejit.matmul(a, b, out=view)
    check(view, reference(a, b), "float32")
    assert np.isnan(out[1::2]).all() and np.isnan(out[::2, 1::2]).all()   # nothing else written
    assert len(simd) == 1


@requires_device
def test_what_keeps_the_skinny_kernel(calls):
    """An epilogue, other dtypes, three rows and a column-major b do not take it."""
    simd, kernel = calls
    rng = np.random.default_rng(5)
    a, b = rand(rng, (1, 300), "float32"), rand(rng, (300, 256), "float32")
    check(xejit.matmul(a, b, activation="relu"), np.maximum(reference(a, b), 0), "float32")
    a16, b16 = rand(rng, (1, 300), "float16"), rand(rng, (300, 256), "float16")
    check(xejit.matmul(a16, b16), reference(a16, b16), "float16")
    a3 = rand(rng, (3, 300), "float32")
    check(xejit.matmul(a3, b), reference(a3, b), "float32")
    assert not simd and len(kernel) == 3, (simd, kernel)
    bf = np.asfortranarray(b)
    check(xejit.matmul(a, bf), reference(a, bf), "float32")
    assert not simd


@requires_device
def test_repeated_calls_reuse_the_recipe_and_read_their_operands_afresh(calls, monkeypatch):
    """A repeated call goes from the recipe to the kernel (the full path once per shape, with and
    without out=): b changed in place, a new b of the same shape at another page offset, a new a,
    and another thread all give the float64 result."""
    simd, kernel = calls
    full = []
    real = xm._matmul
    monkeypatch.setattr(xm, "_matmul", lambda *args, **kw: full.append(1) or real(*args, **kw))
    rng = np.random.default_rng(9)
    b = rand(rng, (512, 300), "float32")
    a = rand(rng, (1, 512), "float32")
    for i in range(3):
        check(xejit.matmul(a, b), reference(a, b), "float32")
        out = poisoned((1, 300), "float32", "numpy")
        xejit.matmul(a, b, out=out)
        check(out, reference(a, b), "float32")
        b[i::3] *= -1.5                                          # changed in place
        a = rand(rng, (1, 512), "float32")
    other = np.empty(512 * 300 + 7, np.float32)[7:].reshape(512, 300)   # another page offset
    other[...] = rand(rng, (512, 300), "float32")
    check(xejit.matmul(a, other), reference(a, other), "float32")
    got = {}
    t = threading.Thread(target=lambda: got.update(c=xejit.matmul(a, b)))
    t.start()
    t.join()
    check(got["c"], reference(a, b), "float32")
    assert len(simd) == 8 and not kernel
    assert len(full) == 2   # the first call without and with out= (the recipe is per shape, not per array or thread)


@requires_device
@settings(max_examples=15, deadline=None)
@given(M=st.sampled_from(cpu_gemv.ROWS), N=st.integers(1, 200), K=st.integers(1, 150),
       pad=st.tuples(st.integers(0, 9), st.integers(0, 9)), bf16=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_gemv_matches_float64(M, N, K, pad, bf16, seed):
    """Any N (blocks of 64 columns, of 16, single columns), any K (blocks of RB rows and single
    rows in the last slice), row pitches past K and N."""
    if not cpu_simd_gemm.fma_available():
        pytest.skip("the default device is not the CPU device reading host memory")
    dtype = "bfloat16" if bf16 else "float32"
    rng = np.random.default_rng(seed)
    a = rand(rng, (M, K + pad[0]), dtype)[:, :K]
    b = rand(rng, (K, N + pad[1]), dtype)[:, :N]
    c = poisoned((M + 2, N), dtype, "numpy")
    cpu_simd_gemm.gemv(a, b, c[1:M + 1])
    check(c[1:M + 1], reference(a, b), dtype)
    assert np.isnan(c[0].astype(np.float32)).all() and np.isnan(c[M + 1].astype(np.float32)).all()


@requires_device
def test_gemv_of_empty_operands_and_bad_arguments():
    if not cpu_simd_gemm.fma_available():
        pytest.skip("the default device is not the CPU device reading host memory")
    c = poisoned((2, 5), "float32", "numpy")
    cpu_simd_gemm.gemv(np.ones((2, 0), np.float32), np.ones((0, 5), np.float32), c)
    assert (c == 0).all()                                  # an empty sum
    cpu_simd_gemm.gemv(np.ones((1, 4), np.float32), np.ones((4, 0), np.float32), np.empty((1, 0), np.float32))
    with pytest.raises(TypeError, match="one dtype"):
        cpu_simd_gemm.gemv(np.ones((1, 4), np.float32), np.ones((4, 5), np.float64), np.empty((1, 5), np.float32))
    with pytest.raises(TypeError, match="float32 or bfloat16"):
        cpu_simd_gemm.gemv(np.ones((1, 4), np.int32), np.ones((4, 5), np.int32), np.empty((1, 5), np.int32))
    with pytest.raises(ValueError, match="at most"):
        cpu_simd_gemm.gemv(np.ones((3, 4), np.float32), np.ones((4, 5), np.float32), np.empty((3, 5), np.float32))
    with pytest.raises(ValueError, match="unit column strides"):
        cpu_simd_gemm.gemv(np.ones((1, 4), np.float32), np.ones((5, 4), np.float32).T, np.empty((1, 5), np.float32))
    with pytest.raises(ValueError, match="matching shapes"):
        cpu_simd_gemm.gemv(np.ones((1, 4), np.float32), np.ones((4, 5), np.float32), np.empty((1, 6), np.float32))
