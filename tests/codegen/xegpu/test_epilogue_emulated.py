"""A DSL kernel with a fused bias + ReLU epilogue through ``kernel[grid]`` on pvc and dg2 code
paths (DPAS and 2D block IO emulated on the CPU device), against float64 numpy."""
import numpy as np
import pytest
import torch

import xejit
from tests.kernels import matmul_bias_relu


@pytest.mark.parametrize("target", ["pvc", "dg2"])
def test_bias_relu_epilogue_emulated(target, monkeypatch):
    monkeypatch.delenv("XEJIT_INTERPRET", raising=False)
    monkeypatch.setenv("XEJIT_EMULATE", target)
    M, N, K = 50, 40, 48                                  # unaligned: padded loads, clipped stores
    rng = np.random.default_rng(7)
    a = torch.from_numpy(rng.standard_normal((M, K)).astype(np.float32)).bfloat16()
    b = torch.from_numpy(rng.standard_normal((K, N)).astype(np.float32)).bfloat16()
    bias = rng.standard_normal(N).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)               # poisoned
    matmul_bias_relu[(xejit.cdiv(M, 32), xejit.cdiv(N, 32))](a, b, bias, c, M, N, K, BM=32, BN=32, BK=16)
    ref = np.maximum(a.double().numpy() @ b.double().numpy() + bias, 0)
    assert np.isfinite(c).all()
    assert np.abs(c - ref).max() / np.abs(ref).max() <= 1e-2
    assert (c == 0).any() and (c > 0).any()               # the ReLU did something
