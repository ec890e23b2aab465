"""Interpreter vs. float64 numpy references; outputs poisoned before each run."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import xejit
from tests.language.kernels import (gather_scatter_kernel, matmul_bias_relu, matmul_kernel, softmax_kernel,
                     splitk_kernel)

RTOL = {np.float32: 1e-5, np.float16: 1e-2, "bf16": 1e-2}


def rand(rng, shape, dtype=np.float32):
    return (rng.standard_normal(shape) + 0.1).astype(dtype)


def close(out, ref, rtol):
    scale = np.abs(ref).max() + 1e-30
    err = np.abs(out.astype(np.float64) - ref).max() / scale
    assert np.isfinite(out).all(), "unwritten (poisoned) elements remain"
    assert err <= rtol, f"relative error {err} > {rtol}"


def gemm(a, b, BM=32, BN=32, BK=16, dtype=np.float32, **kw):
    M, K = a.shape
    N = b.shape[1]
    c = np.full((M, N), np.nan, dtype)
    matmul_kernel[(xejit.cdiv(M, BM), xejit.cdiv(N, BN))](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, **kw)
    return c


@pytest.mark.parametrize("M,N,K", [(64, 64, 32), (100, 70, 50), (33, 17, 5)])
def test_gemm_fp32(M, N, K):
    rng = np.random.default_rng(M * N + K)
    a, b = rand(rng, (M, K)), rand(rng, (K, N))
    close(gemm(a, b), a.astype(np.float64) @ b, 1e-5)


def test_gemm_b_column_major():
    rng = np.random.default_rng(1)
    a, b = rand(rng, (70, 40)), np.asfortranarray(rand(rng, (40, 50)))
    assert "order = [0, 1]" in matmul_kernel.ir_text(a, b, a, 1, 1, 1, BM=32, BN=32, BK=16)
    close(gemm(a, b), a.astype(np.float64) @ b, 1e-5)


def test_gemm_fp16_and_torch_bf16():
    rng = np.random.default_rng(2)
    a, b = rand(rng, (48, 40), np.float16), rand(rng, (40, 36), np.float16)
    close(gemm(a, b, dtype=np.float16), a.astype(np.float64) @ b.astype(np.float64), 1e-2)
    ta, tb = torch.from_numpy(rand(rng, (40, 24))).bfloat16(), torch.from_numpy(rand(rng, (24, 40))).bfloat16()
    tc = torch.full((40, 40), float("nan"), dtype=torch.bfloat16)
    matmul_kernel[(2, 2)](ta, tb, tc, 40, 40, 24, BM=32, BN=32, BK=16)
    ref = ta.double().numpy() @ tb.double().numpy()
    close(tc.float().numpy(), ref, 1e-2)


def test_gemm_int8_exact():
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (40, 64), dtype=np.int8)
    b = rng.integers(-128, 128, (64, 24), dtype=np.int8)
    c = np.full((40, 24), -12345, np.int32)
    matmul_kernel[(2, 1)](a, b, c, 40, 24, 64, BM=32, BN=32, BK=32, ACC=xejit.language.int32)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


def test_bias_relu_epilogue():
    rng = np.random.default_rng(4)
    M, N, K = 50, 40, 30
    a, b, bias = rand(rng, (M, K)), rand(rng, (K, N)), rand(rng, (N,))
    c = np.full((M, N), np.nan, np.float32)
    matmul_bias_relu[(2, 2)](a, b, bias, c, M, N, K, BM=32, BN=32, BK=16)
    ref = np.maximum(a.astype(np.float64) @ b + bias, 0)
    close(c, ref, 1e-5)
    assert (c == 0).any() and (c > 0).any()


def test_row_softmax():
    rng = np.random.default_rng(5)
    x = rand(rng, (37, 20)) * 3
    y = np.full_like(x, np.nan)
    softmax_kernel[(xejit.cdiv(37, 8),)](x, y, 20, BM=8, BN=32)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    close(y, e / e.sum(1, keepdims=True), 1e-5)


def test_splitk_atomic_add():
    rng = np.random.default_rng(6)
    M, N, K = 40, 36, 100
    a, b = rand(rng, (M, K)), rand(rng, (K, N))
    c0 = rand(rng, (M, N))
    c = c0.copy()
    splitk_kernel[(2, 2, 3)](a, b, c, M, N, K, BM=32, BN=32, BK=16, SPLIT=3)
    close(c, c0 + a.astype(np.float64) @ b, 1e-5)


def test_gather_scatter_masked():
    rng = np.random.default_rng(7)
    x = rand(rng, (64,))
    idx = rng.permutation(64)[:45].astype(np.int32)
    y = np.full(64, 777.0, np.float32)
    gather_scatter_kernel[(3,)](x, idx, y, 45, BN=16)
    ref = np.full(64, 777.0)
    ref[idx] = x[idx] * 2.0
    np.testing.assert_allclose(y, ref, rtol=1e-6)


def test_gather_2d_offsets_from_strides():
    import xejit.language as xl

    @xejit.kernel(interpret=True)
    def column_sum(x, out, M, BM: xl.constexpr, BN: xl.constexpr):
        rows = xl.arange(0, BM, axis=0)
        cols = xl.arange(0, BN)
        offs = rows * x.strides[0] + cols * x.strides[1]
        v = xl.load_gather(xl.init_tile(x, offs), rows < M)
        xl.store_tile(xl.init_tile(out, [0, 0], [1, BN]), xl.sum(v, axis=0))

    rng = np.random.default_rng(8)
    x = rand(rng, (10, 8))
    out = np.full(8, np.nan, np.float32)
    column_sum[(1,)](x, out, 10, BM=16, BN=8)
    close(out, x.astype(np.float64).sum(0), 1e-5)


@settings(max_examples=12, deadline=None)
@given(M=st.integers(1, 70), N=st.integers(1, 70), K=st.integers(1, 70),
       blocks=st.sampled_from([(16, 16, 8), (32, 16, 16), (8, 32, 32)]),
       col_major_b=st.booleans())
def test_gemm_property(M, N, K, blocks, col_major_b):
    rng = np.random.default_rng(M * 10000 + N * 100 + K)
    a, b = rand(rng, (M, K)), rand(rng, (K, N))
    if col_major_b:
        b = np.asfortranarray(b)
    BM, BN, BK = blocks
    close(gemm(a, b, BM, BN, BK), a.astype(np.float64) @ b, 1e-5)


@settings(max_examples=10, deadline=None)
@given(M=st.integers(1, 40), N=st.integers(1, 64))
def test_softmax_property(M, N):
    rng = np.random.default_rng(M * 100 + N)
    x = rand(rng, (M, N))
    y = np.full_like(x, np.nan)
    softmax_kernel[(xejit.cdiv(M, 8),)](x, y, N, BM=8, BN=64)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    close(y, e / e.sum(1, keepdims=True), 1e-5)


def test_device_path_and_interpreter_agree(monkeypatch):
    rng = np.random.default_rng(9)
    a, b = rand(rng, (20, 12)), rand(rng, (12, 10))
    out = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("XEJIT_INTERPRET", mode)
        c = np.full((20, 10), np.nan, np.float32)
        matmul_kernel[(xejit.cdiv(20, 16), xejit.cdiv(10, 16))](a, b, c, 20, 10, 12, BM=16, BN=16, BK=8)
        out[mode] = c
    close(out["0"], a.astype(np.float64) @ b, 1e-5)
    close(out["1"], a.astype(np.float64) @ b, 1e-5)
