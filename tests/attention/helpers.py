"""Inputs, the float64 reference and tolerances for the attention tests."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from tests.matmul.helpers import RTOL, TORCH, f64

__all__ = ["RTOL", "TORCH", "check", "f64", "rand", "reference", "sdpa"]


def rand(rng: np.random.Generator, shape, dtype: str, lib: str):
    x = rng.standard_normal(shape) + 0.1
    x[x == 0] = 0.5
    if lib == "torch":
        return torch.from_numpy(x).to(TORCH[dtype])
    return x.astype(dtype)


def reference(q, k, v, causal=False, scale=None) -> np.ndarray:
    """SDPA in float64 numpy: top-left causal mask, key/value heads repeated for GQA."""
    q, k, v = f64(q), f64(k), f64(v)
    g = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        Sq, Sk = s.shape[-2:]
        s = np.where(np.tril(np.ones((Sq, Sk), bool)), s, -np.inf)
    if s.shape[-1] == 0:
        return np.zeros(q.shape[:-1] + (v.shape[-1],))
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def sdpa(q, k, v, causal=False, scale=None) -> np.ndarray:
    """torch's SDPA in float64 on the same values."""
    t = [torch.from_numpy(f64(x)) for x in (q, k, v)]
    return F.scaled_dot_product_attention(*t, is_causal=causal, scale=scale, enable_gqa=True).numpy()


def check(out, ref: np.ndarray, dtype: str) -> None:
    got = f64(out)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.isfinite(got).all(), "unwritten (poisoned) or non-finite elements in the result"
    scale = max(np.abs(ref).max(), 1e-30) if ref.size else 1.0
    err = np.abs(got - ref).max() / scale if ref.size else 0.0
    assert err <= RTOL[dtype], f"relative error {err:.3g} > {RTOL[dtype]}"
